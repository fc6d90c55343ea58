package agentstate

// Map is a JavaScript Map: entries in insertion order, keys of any storable type. It is stored
// as {"$map":[[key,value],...]}. A nil Map is stored as null, an empty one as {"$map":[]}.
//
// Keys are compared as the library compares them: numbers by value (1, 1.0 and
// json.Number("1e0") are one key; so are 0 and -0), anything else by its JSON text. Get, Has,
// Set and Delete follow that rule; a Map holding two keys that are one for the library cannot
// be stored (Marshal and the writes fail with ErrCodec).
type Map []MapEntry

// MapEntry is one entry of a Map.
type MapEntry struct {
	Key   any
	Value any
}

// index returns the position of the first entry whose key is the same as key for the library,
// or -1 (also for a key that cannot be encoded).
func (m Map) index(key any) int {
	want, err := Marshal(key)
	if err != nil {
		return -1
	}
	id := identityOf(want)
	for i, e := range m {
		if k, err := Marshal(e.Key); err == nil && identityOf(k) == id {
			return i
		}
	}
	return -1
}

// Get returns the value of the entry whose key is the same as key for the library (see Map),
// and whether there is one.
func (m Map) Get(key any) (any, bool) {
	if i := m.index(key); i >= 0 {
		return m[i].Value, true
	}
	return nil, false
}

// Has reports whether m has an entry whose key is the same as key for the library.
func (m Map) Has(key any) bool { return m.index(key) >= 0 }

// Set sets the value of the entry whose key is the same as key for the library, keeping that
// entry's key and place (as a JavaScript Map does), or appends a new entry.
func (m *Map) Set(key, value any) {
	if i := m.index(key); i >= 0 {
		(*m)[i].Value = value
		return
	}
	*m = append(*m, MapEntry{Key: key, Value: value})
}

// Delete removes the entry whose key is the same as key for the library, and reports whether
// there was one.
func (m *Map) Delete(key any) bool {
	i := m.index(key)
	if i < 0 {
		return false
	}
	*m = append((*m)[:i], (*m)[i+1:]...)
	return true
}

// MarshalJSON encodes m as its tagged form, so Map also works inside encoding/json.
func (m Map) MarshalJSON() ([]byte, error) { return Marshal(m) }

// UnmarshalJSON decodes a $map tagged value (or null).
func (m *Map) UnmarshalJSON(data []byte) error { return Unmarshal(data, m) }

// Set is a JavaScript Set: distinct values in insertion order, stored as {"$set":[...]}.
// Members are compared as Map keys are (numbers by value, anything else by JSON text); a Set
// holding two members that are one for the library cannot be stored (ErrCodec). A nil Set is
// stored as null.
type Set []any

// Has reports whether s holds a member that is the same as v for the library.
func (s Set) Has(v any) bool {
	want, err := Marshal(v)
	if err != nil {
		return false
	}
	id := identityOf(want)
	for _, x := range s {
		if b, err := Marshal(x); err == nil && identityOf(b) == id {
			return true
		}
	}
	return false
}

// MarshalJSON encodes s as its tagged form, so Set also works inside encoding/json.
func (s Set) MarshalJSON() ([]byte, error) { return Marshal(s) }

// UnmarshalJSON decodes a $set tagged value (or null).
func (s *Set) UnmarshalJSON(data []byte) error { return Unmarshal(data, s) }

// TypedArray is a JavaScript typed array, stored as
// {"$typedarray":{"type":"Float32Array","base64":"..."}}: Type is the JavaScript constructor
// name (Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Float16Array,
// Int32Array, Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array, or
// DataView for bytes with no element type) and Data
// the elements' bytes (little-endian, as JavaScript lays them out on every common platform);
// its length must be a multiple of the element size. The library checks both.
type TypedArray struct {
	Type string
	Data []byte
}

// MarshalJSON encodes a as its tagged form, so TypedArray also works inside encoding/json.
func (a TypedArray) MarshalJSON() ([]byte, error) { return Marshal(a) }

// UnmarshalJSON decodes a $typedarray tagged value.
func (a *TypedArray) UnmarshalJSON(data []byte) error { return Unmarshal(data, a) }

// RegExp is a JavaScript regular expression, stored as
// {"$regexp":{"source":"a+b","flags":"gi"}}. Flags must be distinct letters from "dgimsuvy"
// (not both u and v); the library checks them. The source is not compiled.
type RegExp struct {
	Source string
	Flags  string
}

// MarshalJSON encodes r as its tagged form, so RegExp also works inside encoding/json.
func (r RegExp) MarshalJSON() ([]byte, error) { return Marshal(r) }

// UnmarshalJSON decodes a $regexp tagged value.
func (r *RegExp) UnmarshalJSON(data []byte) error { return Unmarshal(data, r) }
