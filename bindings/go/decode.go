package agentstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
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
//   - a $map into a Go map (keys decoded into the key type), a $set into a slice;
//   - a $regexp into a *regexp.Regexp (or regexp.Regexp): its flags, which must be among i, m
//     and s, become a leading "(?ims)" group of the pattern. Flags Go has no twin for (g, y, d,
//     u, v: they would be lost at the next write) and sources RE2 does not take are ErrCodec
//     errors that say so: decode into RegExp to keep any regular expression as text.
//
// A tagged value never decodes into a struct or as a plain object. A mismatch between the JSON
// and the Go type is an ErrCodec error naming the location; malformed JSON (and invalid UTF-8,
// which encoding/json would silently replace) is an ErrJSON error.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return newError("Unmarshal", StatusInvalidArgument, fmt.Sprintf("the target must be a non-nil pointer, not %T", v), nil)
	}
	if t := rv.Elem().Type(); t.Kind() == reflect.Interface && t.NumMethod() == 0 {
		// The generic form needs neither member order nor each value's text: the fast path.
		val, err := unmarshalAny(data)
		if err != nil {
			return newError("Unmarshal", unmarshalStatus(err), err.Error(), unwrapCodecErr(err))
		}
		rv.Elem().Set(reflect.ValueOf(&val).Elem())
		return nil
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

// unmarshalStatus tells malformed JSON (ErrJSON) from a tagged value that is not well formed
// (ErrCodec, a *codecError) in an error of unmarshalAny.
func unmarshalStatus(err error) Status {
	if _, ok := err.(*codecError); ok {
		return StatusCodec
	}
	return StatusJSON
}

// unmarshalAny decodes JSON text into the generic Go form (see Unmarshal): encoding/json
// decodes it (numbers as json.Number), then withTags turns the tagged objects into Go values.
func unmarshalAny(data []byte) (any, error) {
	dec, err := newDecoder(data)
	if err != nil {
		return nil, err
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, syntaxError(err)
	}
	if err := expectEnd(dec); err != nil {
		return nil, err
	}
	return withTags(v)
}

func newDecoder(data []byte) (*json.Decoder, error) {
	// Invalid bytes outside strings are a syntax error anyway, so checking the whole text is
	// checking the strings, which encoding/json would decode with U+FFFD in their place.
	if !utf8.Valid(data) {
		return nil, errors.New("invalid JSON: invalid UTF-8 in a string")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec, nil
}

// expectEnd refuses anything but white space after the one JSON value (a json.Decoder reads a
// stream of values and would stop after the first).
func expectEnd(dec *json.Decoder) error {
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("invalid JSON at byte %d: unexpected data after the JSON value", dec.InputOffset())
	}
	return nil
}

// syntaxError words an error of encoding/json's decoder as this package's ErrJSON messages.
func syntaxError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, se)
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return errors.New("invalid JSON: unexpected end of input")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// ---- the JSON tree that keeps order and text, cut from text that encoding/json has checked ----

// node is one parsed JSON value. Decoding into typed Go values needs what a map[string]any
// loses: members in order (a later case-insensitive match wins, as in encoding/json) and each
// value's exact text (for json.Unmarshaler and json.RawMessage targets).
type node struct {
	kind byte // '{' object, '[' array, 's' string, 'n' number, 't' true, 'f' false, 'z' null
	raw  []byte
	str  string // a string's value, a number's literal
	keys []string
	vals []*node // object member values, array elements
}

func parseJSON(data []byte) (*node, error) {
	if !json.Valid(data) || !utf8.Valid(data) {
		// Invalid: encoding/json's decoder says what is wrong.
		if _, err := unmarshalAny(data); err != nil {
			return nil, err
		}
		return nil, errors.New("invalid JSON")
	}
	sp := splitter{data: data}
	sp.ws()
	return sp.value(), nil
}

// splitter cuts JSON text that encoding/json has checked (json.Valid) into its values. It
// checks nothing, so it is short; it is 3-7x faster than reading the tree with the
// json.Decoder's tokenizer (BenchmarkCodecUnmarshalTyped), and FuzzCodecAgainstEncodingJSON
// checks each node it makes against encoding/json's reading of the node's text.
type splitter struct {
	data []byte
	pos  int
}

func (sp *splitter) ws() {
	for sp.pos < len(sp.data) {
		switch sp.data[sp.pos] {
		case ' ', '\t', '\n', '\r':
			sp.pos++
		default:
			return
		}
	}
}

func (sp *splitter) value() *node {
	start := sp.pos
	n := &node{}
	switch c := sp.data[sp.pos]; c {
	case '{', '[':
		n.kind = c
		sp.pos++
		for {
			sp.ws()
			if c := sp.data[sp.pos]; c == '}' || c == ']' {
				sp.pos++
				break
			}
			if sp.data[sp.pos] == ',' {
				sp.pos++
				sp.ws()
			}
			if c == '{' {
				n.keys = append(n.keys, sp.str())
				sp.ws()
				sp.pos++ // ':'
				sp.ws()
			}
			n.vals = append(n.vals, sp.value())
		}
	case '"':
		n.kind, n.str = 's', sp.str()
	case 't':
		n.kind, sp.pos = 't', sp.pos+len("true")
	case 'f':
		n.kind, sp.pos = 'f', sp.pos+len("false")
	case 'n':
		n.kind, sp.pos = 'z', sp.pos+len("null")
	default:
		n.kind = 'n'
		for sp.pos < len(sp.data) && strings.IndexByte("+-.eE0123456789", sp.data[sp.pos]) >= 0 {
			sp.pos++
		}
		n.str = string(sp.data[start:sp.pos])
	}
	n.raw = sp.data[start:sp.pos]
	return n
}

// str reads the string at sp.pos; encoding/json unescapes it when it has escapes.
func (sp *splitter) str() string {
	start := sp.pos
	escaped := false
	for sp.pos++; sp.data[sp.pos] != '"'; sp.pos++ {
		if sp.data[sp.pos] == '\\' {
			escaped = true
			sp.pos++
		}
	}
	sp.pos++
	if !escaped {
		return string(sp.data[start+1 : sp.pos-1])
	}
	var s string
	_ = json.Unmarshal(sp.data[start:sp.pos], &s) // cannot fail: the text is valid
	return s
}

// plain returns the generic Go form of n without reading tagged values: what encoding/json
// decodes with UseNumber.
func plain(n *node) any {
	switch n.kind {
	case '{':
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k] = plain(n.vals[i])
		}
		return m
	case '[':
		a := make([]any, len(n.vals))
		for i, v := range n.vals {
			a[i] = plain(v)
		}
		return a
	case 's':
		return n.str
	case 'n':
		return json.Number(n.str)
	case 't', 'f':
		return n.kind == 't'
	}
	return nil
}

// toAny decodes n into the generic Go form (see Unmarshal).
func toAny(n *node) (any, error) { return withTags(plain(n)) }

// ---- tagged values ----

var tagNames = [...]string{"$date", "$bigint", "$map", "$set", "$arraybuffer", "$typedarray", "$regexp"}

func isTag(name string) bool {
	for _, t := range tagNames {
		if name == t {
			return true
		}
	}
	return false
}

// tagOf returns the tag of a tagged value (an object whose only member is a tag name), or "".
func tagOf(n *node) string {
	if n.kind != '{' || len(n.keys) != 1 || !isTag(n.keys[0]) {
		return ""
	}
	return n.keys[0]
}

// withTags replaces the tagged objects in a generic value (as encoding/json decodes it) by
// their Go values, the library's rule: an object whose only member is named like a tag.
// Objects and arrays are changed in place.
func withTags(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			for k, inner := range x {
				if isTag(k) {
					return taggedToAny(k, inner)
				}
			}
		}
		for k, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				c, err := withTags(e)
				if err != nil {
					return nil, at(err, "["+strconv.Quote(k)+"]")
				}
				x[k] = c
			}
		}
	case []any:
		for i, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				c, err := withTags(e)
				if err != nil {
					return nil, at(err, "["+strconv.Itoa(i)+"]")
				}
				x[i] = c
			}
		}
	}
	return v, nil
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

func member(n *node, name string) *node {
	for i, k := range n.keys {
		if k == name {
			return n.vals[i]
		}
	}
	return nil
}
