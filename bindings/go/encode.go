package agentstate

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"
)

// maxEncodeDepth bounds the nesting the encoder follows, so that a cyclic value is an error
// instead of a stack overflow. (The library itself stores at most 64 levels.)
const maxEncodeDepth = 1000

// The $date forms: RFC 3339 in UTC with a fraction of exactly 3, 6 or 9 digits (the only ones
// the library accepts). The encoder writes the shortest that holds the value exactly, so a
// whole number of milliseconds is written exactly as before (and as JavaScript writes it);
// the decoder reads all three exactly (a time.Time holds nanoseconds).
const (
	dateLayoutMillis = "2006-01-02T15:04:05.000Z"
	dateLayoutMicros = "2006-01-02T15:04:05.000000Z"
	dateLayoutNanos  = "2006-01-02T15:04:05.000000000Z"
)

// dateLayoutOf is the $date layout for a text of length n, or "" for no accepted form.
func dateLayoutOf(n int) string {
	switch n {
	case len(dateLayoutMillis):
		return dateLayoutMillis
	case len(dateLayoutMicros):
		return dateLayoutMicros
	case len(dateLayoutNanos):
		return dateLayoutNanos
	}
	return ""
}

var (
	timeType         = reflect.TypeOf(time.Time{})
	bigIntType       = reflect.TypeOf(big.Int{})
	mapType          = reflect.TypeOf(Map(nil))
	setType          = reflect.TypeOf(Set(nil))
	typedArrayType   = reflect.TypeOf(TypedArray{})
	regexpType       = reflect.TypeOf(RegExp{})
	numberType       = reflect.TypeOf(json.Number(""))
	marshalerType    = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	textMarshalType  = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	unmarshalerType  = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	textUnmarshalTyp = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// Marshal encodes v as the JSON text the library stores. It follows encoding/json (struct tags,
// omitempty, string, embedded structs, json.Marshaler, encoding.TextMarshaler, sorted map keys;
// and omitzero, the option of Go 1.24's encoding/json, whatever Go version builds the program)
// with these differences, which make every value round-trip through Unmarshal without loss:
//
//   - time.Time is {"$date":"YYYY-MM-DDTHH:MM:SS.sssZ"} (UTC), with 6 or 9 fraction digits
//     instead of 3 when the value has microseconds or nanoseconds: the shortest exact form, so
//     every time.Time in years 0000-9999 is stored exactly (outside them it is an ErrCodec
//     error). The location and the monotonic clock reading are not kept: it decodes as UTC,
//     Equal to the original.
//   - big.Int and *big.Int are {"$bigint":"<decimal>"}.
//   - []byte (any slice of bytes) is {"$arraybuffer":"<base64>"}; a nil slice is null.
//   - Map, Set, TypedArray and RegExp are their tagged forms ($map, $set, $typedarray, $regexp).
//   - *regexp.Regexp (and regexp.Regexp) is a $regexp, what every binding reads back as a
//     regular expression: a leading group of the flags i, m and s ("(?i)", "(?ms)") becomes
//     its flags, the rest of the pattern its source; any other pattern is the source as it
//     is, with no flags. (Go's matching mode of CompilePOSIX and Longest is not stored.)
//   - Patch is the object of the members it names, a deleted one null.
//   - json.Number is written as is (after a syntax check), so numbers keep their exact text.
//   - Strings must be valid UTF-8 (encoding/json would silently replace bad bytes); they are
//     escaped as the library writes them (<, > and & are not escaped; \b and \f are).
//
// A type with a MarshalJSON or MarshalText method is written by it, as by encoding/json (net.IP
// as its text); no other method is used (not String, not MarshalBinary). A struct otherwise is
// the object of its exported fields (a url.URL is its Scheme, Host, Path... members), and a
// struct with fields but no exported one (sync.Mutex, url.Userinfo) is an ErrCodec error rather
// than {}, which would read back empty.
//
// Values with no JSON form (channels, functions, complex numbers, unsafe pointers, NaN and
// infinities, unsupported map keys) are ErrCodec errors, and so is a value that contains itself
// ("circular reference at /a/next: ...", the JSON Pointer where the cycle closes), and so are
// values the library would refuse to store, found here before any call into C:
//
//   - nesting deeper than the library's 64 levels, counted as the library counts them (a Map
//     takes three levels, a Set two, the other tagged values one);
//   - a Go map or struct whose only member is named like a tag ("$date", "$map", ...): stored
//     as it is, it would be read back as a tagged value of another type (write the tagged
//     value's Go type instead, or json.RawMessage to store tagged JSON text on purpose);
//   - a Map with two keys, or a Set with two members, that the library counts as one: numbers
//     equal in value (1 and 1.0, 0 and -0), anything else with the same JSON text.
func Marshal(v any) ([]byte, error) {
	e := encoder{}
	if err := e.encode(reflect.ValueOf(v), 0); err != nil {
		if ce, ok := err.(*codecError); ok && ce.nesting {
			// Too deep: a value that contains itself, or one that is only deep?
			if where, typ, cyclic := findCycle(reflect.ValueOf(v)); cyclic {
				err = encErr("circular reference at %s: a value of type %s that contains itself cannot be stored", where, typ)
			}
		}
		return nil, newError("Marshal", StatusCodec, err.Error(), unwrapCodecErr(err))
	}
	return e.buf, nil
}

type encoder struct {
	buf []byte
	// level is the library's nesting level of the innermost container being written (0 at the
	// top): see enter.
	level int
}

// codecError is an encoding failure with the Go path where it happened.
type codecError struct {
	path  string
	msg   string
	cause error
	// nesting marks a value too deep to store, which Marshal checks for a cycle.
	nesting bool
}

func (e *codecError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return e.msg + " (at " + e.path + ")"
}

func unwrapCodecErr(err error) error {
	if ee, ok := err.(*codecError); ok {
		return ee.cause
	}
	return nil
}

func encErr(format string, args ...any) error {
	return &codecError{msg: fmt.Sprintf(format, args...)}
}

// at prefixes the location of err with one path element.
func at(err error, elem string) error {
	if ee, ok := err.(*codecError); ok {
		ee.path = elem + ee.path
		return ee
	}
	return err
}

func (e *encoder) encode(v reflect.Value, depth int) error {
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	if depth > maxEncodeDepth {
		return &codecError{msg: fmt.Sprintf("json: unsupported value: nesting deeper than %d levels", maxEncodeDepth), nesting: true}
	}
	t := v.Type()
	if t.Kind() == reflect.Pointer && isTaggedType(t.Elem()) {
		// *time.Time, *big.Int, ...: the tagged form, not their MarshalJSON.
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.encode(v.Elem(), depth+1)
	}
	switch t {
	case timeType, bigIntType, typedArrayType, regexpType:
		// Tagged values without members of their own: one level.
		if err := e.enter(1); err != nil {
			return err
		}
		defer e.leave(1)
	case mapType, setType:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
	}
	switch t {
	case goRegexpType:
		if v.CanAddr() {
			return e.goRegexp(v.Addr().Interface().(*regexp.Regexp))
		}
		re := v.Interface().(regexp.Regexp)
		return e.goRegexp(&re)
	case patchType:
		return e.patch(v.Interface().(Patch), depth)
	case patchOpType:
		return e.patchOp(v.Interface().(PatchOp), depth)
	case timeType:
		return e.date(v.Interface().(time.Time))
	case bigIntType:
		var x big.Int
		if v.CanAddr() {
			x.Set(v.Addr().Interface().(*big.Int))
		} else {
			b := v.Interface().(big.Int)
			x.Set(&b)
		}
		e.buf = append(e.buf, `{"$bigint":"`...)
		e.buf = x.Append(e.buf, 10)
		e.buf = append(e.buf, `"}`...)
		return nil
	case mapType:
		// The tagged object, its array and each [key, value] pair: three levels.
		if err := e.enter(3); err != nil {
			return err
		}
		defer e.leave(3)
		seen := make(map[string]struct{}, v.Len())
		e.buf = append(e.buf, `{"$map":[`...)
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			entry := v.Index(i)
			e.buf = append(e.buf, '[')
			start := len(e.buf)
			if err := e.encode(entry.Field(0), depth+2); err != nil {
				return at(err, "["+strconv.Itoa(i)+"].Key")
			}
			if err := once(seen, e.buf[start:], "two keys of this Map"); err != nil {
				return at(err, "["+strconv.Itoa(i)+"].Key")
			}
			e.buf = append(e.buf, ',')
			if err := e.encode(entry.Field(1), depth+2); err != nil {
				return at(err, "["+strconv.Itoa(i)+"].Value")
			}
			e.buf = append(e.buf, ']')
		}
		e.buf = append(e.buf, "]}"...)
		return nil
	case setType:
		// The tagged object and its array: two levels.
		if err := e.enter(2); err != nil {
			return err
		}
		defer e.leave(2)
		seen := make(map[string]struct{}, v.Len())
		e.buf = append(e.buf, `{"$set":[`...)
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			start := len(e.buf)
			if err := e.encode(v.Index(i), depth+1); err != nil {
				return at(err, "["+strconv.Itoa(i)+"]")
			}
			if err := once(seen, e.buf[start:], "two members of this Set"); err != nil {
				return at(err, "["+strconv.Itoa(i)+"]")
			}
		}
		e.buf = append(e.buf, "]}"...)
		return nil
	case typedArrayType:
		ta := v.Interface().(TypedArray)
		e.buf = append(e.buf, `{"$typedarray":{"type":`...)
		if err := e.str(ta.Type); err != nil {
			return at(err, ".Type")
		}
		e.buf = append(e.buf, `,"base64":"`...)
		e.buf = appendBase64(e.buf, ta.Data)
		e.buf = append(e.buf, `"}}`...)
		return nil
	case regexpType:
		re := v.Interface().(RegExp)
		e.buf = append(e.buf, `{"$regexp":{"source":`...)
		if err := e.str(re.Source); err != nil {
			return at(err, ".Source")
		}
		e.buf = append(e.buf, `,"flags":`...)
		if err := e.str(re.Flags); err != nil {
			return at(err, ".Flags")
		}
		e.buf = append(e.buf, "}}"...)
		return nil
	case numberType:
		s := v.String()
		if s == "" {
			s = "0" // as encoding/json
		}
		if !isJSONNumber(s) {
			return encErr("json: invalid number literal %q", s)
		}
		e.buf = append(e.buf, s...)
		return nil
	}
	if v.Kind() != reflect.Pointer && v.CanAddr() && reflect.PointerTo(t).Implements(marshalerType) {
		return e.marshaler(v.Addr())
	}
	if t.Implements(marshalerType) {
		return e.marshaler(v)
	}
	if v.Kind() != reflect.Pointer && v.CanAddr() && reflect.PointerTo(t).Implements(textMarshalType) {
		return e.textMarshaler(v.Addr())
	}
	if t.Implements(textMarshalType) {
		return e.textMarshaler(v)
	}
	switch v.Kind() {
	case reflect.Bool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
	case reflect.Float32:
		return e.float(v.Float(), 32)
	case reflect.Float64:
		return e.float(v.Float(), 64)
	case reflect.String:
		return e.str(v.String())
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.encode(v.Elem(), depth+1)
	case reflect.Struct:
		return e.structure(v, depth)
	case reflect.Map:
		return e.goMap(v, depth)
	case reflect.Slice:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if isByteSlice(t) {
			if err := e.enter(1); err != nil {
				return err
			}
			defer e.leave(1)
			e.buf = append(e.buf, `{"$arraybuffer":"`...)
			e.buf = appendBase64(e.buf, v.Bytes())
			e.buf = append(e.buf, `"}`...)
			return nil
		}
		return e.array(v, depth)
	case reflect.Array:
		return e.array(v, depth)
	default:
		return encErr("json: unsupported type: %s", t)
	}
	return nil
}

// isTaggedType reports whether values of t have a form of their own in this codec (checked
// before the marshaling methods, which some of them have).
func isTaggedType(t reflect.Type) bool {
	switch t {
	case timeType, bigIntType, mapType, setType, typedArrayType, regexpType, numberType, goRegexpType, patchType:
		return true
	}
	return false
}

// isByteSlice reports whether t is encoded as an ArrayBuffer: a slice of a byte kind whose
// element type has no marshaling methods (encoding/json's rule for base64 strings).
func isByteSlice(t reflect.Type) bool {
	if t.Kind() != reflect.Slice || t.Elem().Kind() != reflect.Uint8 {
		return false
	}
	p := reflect.PointerTo(t.Elem())
	return !p.Implements(marshalerType) && !p.Implements(textMarshalType)
}

func (e *encoder) marshaler(v reflect.Value) error {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	m, ok := v.Interface().(json.Marshaler)
	if !ok {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	out, err := m.MarshalJSON()
	if err != nil {
		return &codecError{msg: fmt.Sprintf("json: error calling MarshalJSON for type %s: %v", v.Type(), err), cause: err}
	}
	if !json.Valid(out) {
		return encErr("json: error calling MarshalJSON for type %s: invalid JSON %q", v.Type(), out)
	}
	if !utf8.Valid(out) {
		return encErr("json: MarshalJSON for type %s returned invalid UTF-8", v.Type())
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, out); err != nil {
		return encErr("json: error calling MarshalJSON for type %s: %v", v.Type(), err)
	}
	if err := e.rawNesting(compact.Bytes()); err != nil {
		return err
	}
	e.buf = append(e.buf, compact.Bytes()...)
	return nil
}

func (e *encoder) textMarshaler(v reflect.Value) error {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	m, ok := v.Interface().(encoding.TextMarshaler)
	if !ok {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	out, err := m.MarshalText()
	if err != nil {
		return &codecError{msg: fmt.Sprintf("json: error calling MarshalText for type %s: %v", v.Type(), err), cause: err}
	}
	return e.str(string(out))
}

func (e *encoder) array(v reflect.Value, depth int) error {
	if err := e.enter(1); err != nil {
		return err
	}
	defer e.leave(1)
	e.buf = append(e.buf, '[')
	for i := 0; i < v.Len(); i++ {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.encode(v.Index(i), depth+1); err != nil {
			return at(err, "["+strconv.Itoa(i)+"]")
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

func (e *encoder) goMap(v reflect.Value, depth int) error {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	type kv struct {
		name string
		val  reflect.Value
	}
	entries := make([]kv, 0, v.Len())
	it := v.MapRange()
	for it.Next() {
		name, err := mapKeyName(it.Key())
		if err != nil {
			return err
		}
		entries = append(entries, kv{name, it.Value()})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	if len(entries) == 1 {
		if err := tagShaped("map", entries[0].name); err != nil {
			return err
		}
	}
	if err := e.enter(1); err != nil {
		return err
	}
	defer e.leave(1)
	e.buf = append(e.buf, '{')
	for i, en := range entries {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.str(en.name); err != nil {
			return err
		}
		e.buf = append(e.buf, ':')
		if err := e.encode(en.val, depth+1); err != nil {
			return at(err, "["+strconv.Quote(en.name)+"]")
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// mapKeyName is encoding/json's resolveKeyName: string kinds as they are, then TextMarshaler,
// then integers in decimal.
func mapKeyName(k reflect.Value) (string, error) {
	if k.Kind() == reflect.String {
		return k.String(), nil
	}
	if k.Type().Implements(textMarshalType) {
		if k.Kind() == reflect.Pointer && k.IsNil() {
			return "", nil
		}
		b, err := k.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return "", &codecError{msg: fmt.Sprintf("json: error calling MarshalText for map key %s: %v", k.Type(), err), cause: err}
		}
		return string(b), nil
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10), nil
	}
	return "", encErr("json: unsupported map key type: %s", k.Type())
}
