package agentstate

import "bytes"

// Map is a JavaScript Map: entries in insertion order, keys of any storable type. It is stored
// as {"$map":[[key,value],...]}; the library refuses two keys with the same JSON text. A nil
// Map is stored as null, an empty one as {"$map":[]}.
type Map []MapEntry

// MapEntry is one entry of a Map.
type MapEntry struct {
	Key   any
	Value any
}

// Get returns the value of the first entry whose key has the same JSON text as key (the
// identity the library uses), and whether there was one.
func (m Map) Get(key any) (any, bool) {
	want, err := Marshal(key)
	if err != nil {
		return nil, false
	}
	for _, e := range m {
		if k, err := Marshal(e.Key); err == nil && bytes.Equal(k, want) {
			return e.Value, true
		}
	}
	return nil, false
}

// MarshalJSON encodes m as its tagged form, so Map also works inside encoding/json.
func (m Map) MarshalJSON() ([]byte, error) { return Marshal(m) }

// UnmarshalJSON decodes a $map tagged value (or null).
func (m *Map) UnmarshalJSON(data []byte) error { return Unmarshal(data, m) }

// Set is a JavaScript Set: distinct values in insertion order, stored as {"$set":[...]}; the
// library refuses two values with the same JSON text. A nil Set is stored as null.
type Set []any

// Has reports whether s holds a value with the same JSON text as v.
func (s Set) Has(v any) bool {
	want, err := Marshal(v)
	if err != nil {
		return false
	}
	for _, x := range s {
		if b, err := Marshal(x); err == nil && bytes.Equal(b, want) {
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
// Int32Array, Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array) and Data
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
