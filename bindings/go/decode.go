package agentstate

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Unmarshal decodes JSON text as the library stores it into v, which must be a non-nil pointer.
// It follows encoding/json (struct tags and case-insensitive member names, embedded structs,
// json.Unmarshaler, encoding.TextUnmarshaler, null leaves non-nullable values alone) and reads
// tagged values back into what Marshal made them from:
//
//   - into an empty interface (any): objects become map[string]any, arrays []any, numbers
//     json.Number (their exact text), and tagged values time.Time (UTC), *big.Int, []byte,
//     Map, Set, TypedArray and RegExp;
//   - into time.Time, big.Int, []byte, Map, Set, TypedArray, RegExp: their tagged forms (and,
//     as encoding/json would accept them, an RFC 3339 string for time.Time, a number for
//     big.Int, a base64 string for []byte);
//   - a $map into a Go map (keys decoded into the key type), a $set into a slice.
//
// A tagged value never decodes into a struct or as a plain object. A mismatch between the JSON
// and the Go type is an ErrCodec error naming the location; malformed JSON is an ErrJSON error.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return newError("Unmarshal", StatusInvalidArgument, fmt.Sprintf("the target must be a non-nil pointer, not %T", v), nil)
	}
	n, err := parseJSON(data)
	if err != nil {
		return newError("Unmarshal", StatusJSON, err.Error(), nil)
	}
	if err := decode(n, rv.Elem()); err != nil {
		return newError("Unmarshal", StatusCodec, err.Error(), unwrapCodecErr(err))
	}
	return nil
}

// unmarshalAny decodes JSON text into a generic Go value (see Unmarshal).
func unmarshalAny(data []byte) (any, error) {
	n, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	return toAny(n)
}

// ---- a small JSON parser that keeps each value's text ----

// node is one parsed JSON value.
type node struct {
	kind byte // '{' object, '[' array, 's' string, 'n' number, 't' true, 'f' false, 'z' null
	raw  []byte
	str  string // a string's value, a number's literal
	keys []string
	vals []*node // object member values, array elements
}

const maxParseDepth = 10000

type jsonParser struct {
	data  []byte
	pos   int
	depth int
}

func parseJSON(data []byte) (*node, error) {
	p := jsonParser{data: data}
	p.ws()
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos != len(p.data) {
		return nil, p.errorf("unexpected data after the JSON value")
	}
	return n, nil
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at byte %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *jsonParser) ws() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (*node, error) {
	if p.pos >= len(p.data) {
		return nil, p.errorf("unexpected end of input")
	}
	start := p.pos
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &node{kind: 's', str: s, raw: p.data[start:p.pos]}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		for p.pos < len(p.data) && strings.IndexByte("+-.eE0123456789", p.data[p.pos]) >= 0 {
			p.pos++
		}
		lit := string(p.data[start:p.pos])
		if !isJSONNumber(lit) {
			return nil, p.errorf("invalid number %q", lit)
		}
		return &node{kind: 'n', str: lit, raw: p.data[start:p.pos]}, nil
	default:
		for i, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(p.data[p.pos:], []byte(lit)) {
				p.pos += len(lit)
				return &node{kind: "tfz"[i], raw: p.data[start:p.pos]}, nil
			}
		}
		return nil, p.errorf("unexpected character %q", c)
	}
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxParseDepth {
		return p.errorf("nesting deeper than %d levels", maxParseDepth)
	}
	return nil
}

func (p *jsonParser) object() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	start := p.pos
	p.pos++ // '{'
	n := &node{kind: '{'}
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		n.raw = p.data[start:p.pos]
		p.depth--
		return n, nil
	}
	for {
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("expected a member name")
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf("expected ':'")
		}
		p.pos++
		p.ws()
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		n.keys = append(n.keys, key)
		n.vals = append(n.vals, val)
		p.ws()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of input in an object")
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] == '}' {
			p.pos++
			break
		}
		return nil, p.errorf("expected ',' or '}'")
	}
	n.raw = p.data[start:p.pos]
	p.depth--
	return n, nil
}

func (p *jsonParser) array() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	start := p.pos
	p.pos++ // '['
	n := &node{kind: '['}
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		n.raw = p.data[start:p.pos]
		p.depth--
		return n, nil
	}
	for {
		p.ws()
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		n.vals = append(n.vals, val)
		p.ws()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of input in an array")
		}
		if p.data[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.data[p.pos] == ']' {
			p.pos++
			break
		}
		return nil, p.errorf("expected ',' or ']'")
	}
	n.raw = p.data[start:p.pos]
	p.depth--
	return n, nil
}

// str reads a string literal at p.pos.
func (p *jsonParser) str() (string, error) {
	start := p.pos
	p.pos++ // '"'
	escaped := false
	for {
		if p.pos >= len(p.data) {
			return "", p.errorf("unterminated string")
		}
		c := p.data[p.pos]
		if c == '"' {
			break
		}
		if c < 0x20 {
			return "", p.errorf("control character in a string")
		}
		if c == '\\' {
			escaped = true
			p.pos++
		}
		p.pos++
	}
	p.pos++ // closing '"'
	span := p.data[start:p.pos]
	if !escaped {
		body := span[1 : len(span)-1]
		if !utf8.Valid(body) {
			return "", p.errorf("invalid UTF-8 in a string")
		}
		return string(body), nil
	}
	var s string
	if err := json.Unmarshal(span, &s); err != nil {
		return "", p.errorf("invalid string: %v", err)
	}
	return s, nil
}

// ---- tagged values ----

var tagNames = [...]string{"$date", "$bigint", "$map", "$set", "$arraybuffer", "$typedarray", "$regexp"}

// tagOf returns the tag of a tagged value (an object whose only member is a tag name), or "".
func tagOf(n *node) string {
	if n.kind != '{' || len(n.keys) != 1 {
		return ""
	}
	for _, t := range tagNames {
		if n.keys[0] == t {
			return t
		}
	}
	return ""
}

func kindName(n *node) string {
	if tag := tagOf(n); tag != "" {
		return tag + " value"
	}
	switch n.kind {
	case '{':
		return "object"
	case '[':
		return "array"
	case 's':
		return "string"
	case 'n':
		return "number " + n.str
	case 't', 'f':
		return "boolean"
	}
	return "null"
}

func mismatch(n *node, t reflect.Type) error {
	return codecErrf("cannot decode %s into Go value of type %s", kindName(n), t)
}

func codecErrf(format string, args ...any) error {
	return &codecError{msg: fmt.Sprintf(format, args...)}
}

func parseDate(n *node) (time.Time, error) {
	if n.kind != 's' || len(n.str) != len(dateLayout) {
		return time.Time{}, codecErrf("$date must be a string YYYY-MM-DDTHH:MM:SS.sssZ")
	}
	t, err := time.Parse(dateLayout, n.str)
	if err != nil {
		return time.Time{}, codecErrf("$date %q: %v", n.str, err)
	}
	return t, nil
}

func parseBigInt(n *node) (*big.Int, error) {
	if n.kind == 's' && isJSONNumber(n.str) && !strings.ContainsAny(n.str, ".eE") {
		if x, ok := new(big.Int).SetString(n.str, 10); ok {
			return x, nil
		}
	}
	return nil, codecErrf("$bigint must be a string of decimal digits")
}

func parseBase64(n *node, what string) ([]byte, error) {
	if n.kind != 's' {
		return nil, codecErrf("%s must be a base64 string", what)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(n.str)
	if err != nil {
		return nil, codecErrf("%s: invalid base64: %v", what, err)
	}
	return b, nil
}

func member(n *node, name string) *node {
	for i, k := range n.keys {
		if k == name {
			return n.vals[i]
		}
	}
	return nil
}

func parseTypedArray(n *node) (TypedArray, error) {
	shape := codecErrf(`$typedarray must be {"type": <typed array name>, "base64": <string>}`)
	if n.kind != '{' || len(n.keys) != 2 {
		return TypedArray{}, shape
	}
	typ, data := member(n, "type"), member(n, "base64")
	if typ == nil || data == nil || typ.kind != 's' {
		return TypedArray{}, shape
	}
	b, err := parseBase64(data, "$typedarray base64")
	if err != nil {
		return TypedArray{}, err
	}
	return TypedArray{Type: typ.str, Data: b}, nil
}

func parseRegExp(n *node) (RegExp, error) {
	if n.kind == '{' && len(n.keys) == 2 {
		src, flags := member(n, "source"), member(n, "flags")
		if src != nil && flags != nil && src.kind == 's' && flags.kind == 's' {
			return RegExp{Source: src.str, Flags: flags.str}, nil
		}
	}
	return RegExp{}, codecErrf(`$regexp must be {"source": <string>, "flags": <string>}`)
}

func parseMap(n *node) (Map, error) {
	if n.kind != '[' {
		return nil, codecErrf("$map must be an array of [key, value] pairs")
	}
	m := make(Map, 0, len(n.vals))
	for i, pair := range n.vals {
		if pair.kind != '[' || len(pair.vals) != 2 {
			return nil, at(codecErrf("$map entry must be a [key, value] pair"), "["+strconv.Itoa(i)+"]")
		}
		k, err := toAny(pair.vals[0])
		if err != nil {
			return nil, at(err, "["+strconv.Itoa(i)+"].Key")
		}
		v, err := toAny(pair.vals[1])
		if err != nil {
			return nil, at(err, "["+strconv.Itoa(i)+"].Value")
		}
		m = append(m, MapEntry{Key: k, Value: v})
	}
	return m, nil
}

func parseSet(n *node) (Set, error) {
	if n.kind != '[' {
		return nil, codecErrf("$set must be an array")
	}
	s := make(Set, 0, len(n.vals))
	for i, item := range n.vals {
		v, err := toAny(item)
		if err != nil {
			return nil, at(err, "["+strconv.Itoa(i)+"]")
		}
		s = append(s, v)
	}
	return s, nil
}

// toAny decodes n into the generic Go form (see Unmarshal).
func toAny(n *node) (any, error) {
	switch n.kind {
	case '{':
		if tag := tagOf(n); tag != "" {
			return taggedToAny(tag, n.vals[0])
		}
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			v, err := toAny(n.vals[i])
			if err != nil {
				return nil, at(err, "["+strconv.Quote(k)+"]")
			}
			m[k] = v
		}
		return m, nil
	case '[':
		a := make([]any, len(n.vals))
		for i, item := range n.vals {
			v, err := toAny(item)
			if err != nil {
				return nil, at(err, "["+strconv.Itoa(i)+"]")
			}
			a[i] = v
		}
		return a, nil
	case 's':
		return n.str, nil
	case 'n':
		return json.Number(n.str), nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	}
	return nil, nil
}

func taggedToAny(tag string, inner *node) (any, error) {
	var v any
	var err error
	switch tag {
	case "$date":
		v, err = parseDate(inner)
	case "$bigint":
		v, err = parseBigInt(inner)
	case "$arraybuffer":
		v, err = parseBase64(inner, "$arraybuffer")
	case "$map":
		v, err = parseMap(inner)
	case "$set":
		v, err = parseSet(inner)
	case "$typedarray":
		v, err = parseTypedArray(inner)
	case "$regexp":
		v, err = parseRegExp(inner)
	}
	if err != nil {
		return nil, at(err, "."+tag)
	}
	return v, nil
}

// ---- decoding into typed Go values ----

func decode(n *node, v reflect.Value) error {
	t := v.Type()
	if n.kind == 'z' {
		return decodeNull(v)
	}
	if t.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		return decode(n, v.Elem())
	}
	tag := tagOf(n)
	switch t {
	case timeType:
		if tag == "$date" {
			d, err := parseDate(n.vals[0])
			if err != nil {
				return at(err, ".$date")
			}
			v.Set(reflect.ValueOf(d))
			return nil
		}
		if n.kind == 's' {
			var d time.Time
			if err := d.UnmarshalJSON(n.raw); err != nil {
				return codecErrf("cannot decode %q into time.Time: %v", n.str, err)
			}
			v.Set(reflect.ValueOf(d))
			return nil
		}
		return mismatch(n, t)
	case bigIntType:
		var x *big.Int
		switch {
		case tag == "$bigint":
			var err error
			if x, err = parseBigInt(n.vals[0]); err != nil {
				return at(err, ".$bigint")
			}
		case n.kind == 'n' && !strings.ContainsAny(n.str, ".eE"):
			x, _ = new(big.Int).SetString(n.str, 10)
		}
		if x == nil {
			return mismatch(n, t)
		}
		v.Addr().Interface().(*big.Int).Set(x)
		return nil
	case mapType, setType, typedArrayType, regexpType:
		want := map[reflect.Type]string{mapType: "$map", setType: "$set", typedArrayType: "$typedarray", regexpType: "$regexp"}[t]
		if tag != want {
			return mismatch(n, t)
		}
		val, err := taggedToAny(tag, n.vals[0])
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(val))
		return nil
	case numberType:
		if n.kind != 'n' {
			return mismatch(n, t)
		}
		v.SetString(n.str)
		return nil
	}
	if t.Kind() == reflect.Interface {
		if t.NumMethod() != 0 {
			return mismatch(n, t)
		}
		val, err := toAny(n)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(&val).Elem())
		return nil
	}
	if v.CanAddr() && reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(n.raw); err != nil {
			return &codecError{msg: fmt.Sprintf("%s.UnmarshalJSON: %v", t, err), cause: err}
		}
		return nil
	}
	if n.kind == 's' && v.CanAddr() && reflect.PointerTo(t).Implements(textUnmarshalTyp) {
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.str)); err != nil {
			return &codecError{msg: fmt.Sprintf("%s.UnmarshalText: %v", t, err), cause: err}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Bool:
		if n.kind != 't' && n.kind != 'f' {
			return mismatch(n, t)
		}
		v.SetBool(n.kind == 't')
	case reflect.String:
		if n.kind != 's' {
			return mismatch(n, t)
		}
		v.SetString(n.str)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.kind != 'n' {
			return mismatch(n, t)
		}
		x, err := strconv.ParseInt(n.str, 10, 64)
		if err != nil || v.OverflowInt(x) {
			return mismatch(n, t)
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if n.kind != 'n' {
			return mismatch(n, t)
		}
		x, err := strconv.ParseUint(n.str, 10, 64)
		if err != nil || v.OverflowUint(x) {
			return mismatch(n, t)
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		if n.kind != 'n' {
			return mismatch(n, t)
		}
		x, err := strconv.ParseFloat(n.str, t.Bits())
		if err != nil || v.OverflowFloat(x) {
			return mismatch(n, t)
		}
		v.SetFloat(x)
	case reflect.Slice:
		return decodeSlice(n, v)
	case reflect.Array:
		if n.kind != '[' {
			return mismatch(n, t)
		}
		for i := 0; i < v.Len(); i++ {
			if i < len(n.vals) {
				if err := decode(n.vals[i], v.Index(i)); err != nil {
					return at(err, "["+strconv.Itoa(i)+"]")
				}
			} else {
				v.Index(i).Set(reflect.Zero(t.Elem()))
			}
		}
	case reflect.Map:
		return decodeMap(n, v)
	case reflect.Struct:
		return decodeStruct(n, v)
	default:
		return mismatch(n, t)
	}
	return nil
}

// decodeNull applies JSON null as encoding/json does: nil for pointers, interfaces, maps and
// slices; a json.Unmarshaler is asked; anything else is left alone.
func decodeNull(v reflect.Value) error {
	t := v.Type()
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		if t != mapType && t != setType && v.CanAddr() && reflect.PointerTo(t).Implements(unmarshalerType) && t.Kind() != reflect.Pointer {
			return v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON([]byte("null"))
		}
		v.Set(reflect.Zero(t))
		return nil
	}
	if isTaggedType(t) {
		return nil
	}
	if v.CanAddr() && reflect.PointerTo(t).Implements(unmarshalerType) {
		return v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON([]byte("null"))
	}
	return nil
}

func decodeSlice(n *node, v reflect.Value) error {
	t := v.Type()
	tag := tagOf(n)
	if isByteSlice(t) {
		var b []byte
		var err error
		switch {
		case tag == "$arraybuffer":
			b, err = parseBase64(n.vals[0], "$arraybuffer")
		case n.kind == 's':
			b, err = parseBase64(n, "a []byte string")
		}
		if err != nil {
			return err
		}
		if b != nil {
			v.SetBytes(b)
			return nil
		}
	}
	items := n
	if tag == "$set" {
		items = n.vals[0]
		if items.kind != '[' {
			return codecErrf("$set must be an array")
		}
	} else if n.kind != '[' {
		return mismatch(n, t)
	}
	s := reflect.MakeSlice(t, len(items.vals), len(items.vals))
	for i, item := range items.vals {
		if err := decode(item, s.Index(i)); err != nil {
			return at(err, "["+strconv.Itoa(i)+"]")
		}
	}
	v.Set(s)
	return nil
}

func decodeMap(n *node, v reflect.Value) error {
	t := v.Type()
	kt := t.Key()
	tag := tagOf(n)
	if v.IsNil() {
		v.Set(reflect.MakeMap(t))
	}
	switch {
	case tag == "$map":
		entries := n.vals[0]
		if entries.kind != '[' {
			return codecErrf("$map must be an array of [key, value] pairs")
		}
		for i, pair := range entries.vals {
			if pair.kind != '[' || len(pair.vals) != 2 {
				return at(codecErrf("$map entry must be a [key, value] pair"), ".$map["+strconv.Itoa(i)+"]")
			}
			k := reflect.New(kt).Elem()
			if err := decode(pair.vals[0], k); err != nil {
				return at(err, ".$map["+strconv.Itoa(i)+"].Key")
			}
			e := reflect.New(t.Elem()).Elem()
			if err := decode(pair.vals[1], e); err != nil {
				return at(err, ".$map["+strconv.Itoa(i)+"].Value")
			}
			v.SetMapIndex(k, e)
		}
		return nil
	case tag != "" || n.kind != '{':
		return mismatch(n, t)
	}
	for i, name := range n.keys {
		k := reflect.New(kt).Elem()
		switch {
		case reflect.PointerTo(kt).Implements(textUnmarshalTyp):
			if err := k.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(name)); err != nil {
				return at(&codecError{msg: fmt.Sprintf("map key %q: %v", name, err), cause: err}, "")
			}
		case kt.Kind() == reflect.String:
			k.SetString(name)
		case kt.Kind() >= reflect.Int && kt.Kind() <= reflect.Int64:
			x, err := strconv.ParseInt(name, 10, 64)
			if err != nil || k.OverflowInt(x) {
				return codecErrf("cannot decode map key %q into Go value of type %s", name, kt)
			}
			k.SetInt(x)
		case kt.Kind() >= reflect.Uint && kt.Kind() <= reflect.Uintptr:
			x, err := strconv.ParseUint(name, 10, 64)
			if err != nil || k.OverflowUint(x) {
				return codecErrf("cannot decode map key %q into Go value of type %s", name, kt)
			}
			k.SetUint(x)
		default:
			return codecErrf("cannot decode an object into Go map type %s (unsupported key type)", t)
		}
		e := reflect.New(t.Elem()).Elem()
		if err := decode(n.vals[i], e); err != nil {
			return at(err, "["+strconv.Quote(name)+"]")
		}
		v.SetMapIndex(k, e)
	}
	return nil
}

func decodeStruct(n *node, v reflect.Value) error {
	t := v.Type()
	if n.kind != '{' || tagOf(n) != "" {
		return mismatch(n, t)
	}
	fields := cachedFields(t)
	for i, name := range n.keys {
		var f *field
		for j := range fields {
			if fields[j].name == name {
				f = &fields[j]
				break
			}
		}
		if f == nil {
			for j := range fields {
				if strings.EqualFold(fields[j].name, name) {
					f = &fields[j]
					break
				}
			}
		}
		if f == nil {
			continue // unknown members are ignored, as by encoding/json
		}
		fv := v
		for _, idx := range f.index {
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					if !fv.CanSet() {
						return codecErrf("cannot set embedded pointer to unexported struct %s", fv.Type().Elem())
					}
					fv.Set(reflect.New(fv.Type().Elem()))
				}
				fv = fv.Elem()
			}
			fv = fv.Field(idx)
		}
		var err error
		if f.quoted {
			err = decodeQuoted(n.vals[i], fv)
		} else {
			err = decode(n.vals[i], fv)
		}
		if err != nil {
			return at(err, "."+f.name)
		}
	}
	return nil
}

// decodeQuoted reads a field with the ",string" option: a JSON string holding the JSON text.
func decodeQuoted(n *node, v reflect.Value) error {
	if n.kind == 'z' {
		return nil
	}
	if n.kind != 's' {
		return codecErrf("field with the ,string option needs a string, got %s", kindName(n))
	}
	inner, err := parseJSON([]byte(n.str))
	if err != nil || inner.kind == '{' || inner.kind == '[' {
		return codecErrf("field with the ,string option: %q is not a quoted scalar", n.str)
	}
	return decode(inner, v)
}
