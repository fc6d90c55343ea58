package agentstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCodecAgainstEncodingJSON checks the codec against encoding/json on arbitrary input, where
// the codec does something by hand or on top of encoding/json:
//
//   - the string escaper (the one hand-written writer left): the same text as encoding/json's,
//     apart from the escapes the library writes otherwise, and invalid UTF-8 refused;
//   - the generic decoder (encoding/json plus the tagged values): malformed JSON refused exactly
//     when encoding/json refuses it; without tagged values, the same Go value as encoding/json
//     with UseNumber, which Marshal writes back to text that encoding/json reads as that value;
//     with them, Marshal and Unmarshal reach a fixed point;
//   - the splitter that cuts text checked by json.Valid into the typed decoder's ordered tree:
//     refuses what encoding/json refuses, and each node's text and value are what encoding/json
//     reads at that place.
//
// The seed corpus is testdata/fuzz/FuzzCodecAgainstEncodingJSON; run-tests.sh fuzzes briefly.
func FuzzCodecAgainstEncodingJSON(f *testing.F) {
	f.Add([]byte(`{"status":"idle","m0":{"id":0,"name":"member 0","tags":["alpha","beta"],"score":0.5}}`))
	f.Add([]byte(`{"d":{"$date":"2026-11-30T03:06:44.123Z"},"m":{"$map":[[1,{"$set":["x",1.0]}]]}}`))
	f.Add([]byte("\"\\b\\f\\u2028<&>\\\\u2028\u2029\""))
	f.Add([]byte("raw \b\f\x00\x1f\u2028\u2029<&>\"\\"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkStringEscape(t, string(data))
		if v, err := stdDecode(data); err == nil {
			forEachString(v, func(s string) { checkStringEscape(t, s) })
		}
		checkGenericDecode(t, data)
		checkTree(t, data)
		checkStructs(t, data)
	})
}

func checkStringEscape(t *testing.T, s string) {
	e := encoder{}
	err := e.str(s)
	if !utf8.ValidString(s) {
		if err == nil {
			t.Fatalf("str(%q) accepted invalid UTF-8", s)
		}
		return
	}
	if err != nil {
		t.Fatalf("str(%q): %v", s, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	want := libraryEscapes(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	if string(e.buf) != string(want) {
		t.Fatalf("str(%q) = %s, encoding/json (with the library's escapes) %s", s, e.buf, want)
	}
}

// forEachString calls f with each string of a value decoded by encoding/json, member names too.
func forEachString(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for k, e := range x {
			f(k)
			forEachString(e, f)
		}
	case []any:
		for _, e := range x {
			forEachString(e, f)
		}
	}
}

// libraryEscapes rewrites the escapes of a string encoded by encoding/json that the library
// writes otherwise: U+2028 and U+2029 as they are, \b and \f in their short forms.
func libraryEscapes(text []byte) []byte {
	var out []byte
	for i := 0; i < len(text); i++ {
		if text[i] != '\\' {
			out = append(out, text[i])
			continue
		}
		n := 2
		if text[i+1] == 'u' {
			n = 6
		}
		switch esc := string(text[i : i+n]); esc {
		case `\u2028`, `\u2029`:
			out = append(out, string([]rune{map[string]rune{`\u2028`: 0x2028, `\u2029`: 0x2029}[esc]})...)
		case `\u0008`:
			out = append(out, `\b`...)
		case `\u000c`:
			out = append(out, `\f`...)
		default:
			out = append(out, esc...)
		}
		i += n - 1
	}
	return out
}

// stdDecode is encoding/json's reading of data, numbers as json.Number.
func stdDecode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func checkGenericDecode(t *testing.T, data []byte) {
	v, err := unmarshalAny(data)
	valid := json.Valid(data) && utf8.Valid(data)
	var ce *codecError
	if !valid {
		if err == nil || errors.As(err, &ce) {
			t.Fatalf("unmarshalAny(%q) = %v, %v; want a JSON syntax error", data, v, err)
		}
		return
	}
	std, stdErr := stdDecode(data)
	if stdErr != nil {
		t.Fatalf("encoding/json cannot decode the valid %q: %v", data, stdErr)
	}
	tagged := hasTagShape(std)
	if err != nil {
		if !tagged || !errors.As(err, &ce) {
			t.Fatalf("unmarshalAny(%q): %v", data, err)
		}
		return
	}
	out, err := Marshal(v)
	if !tagged {
		if !reflect.DeepEqual(v, std) {
			t.Fatalf("unmarshalAny(%q) = %#v, encoding/json %#v", data, v, std)
		}
		if tooDeep := nesting(std) > maxStoredDepth; tooDeep != (err != nil) {
			t.Fatalf("Marshal of %q (nesting %d): %v", data, nesting(std), err)
		}
		if err != nil {
			return
		}
		back, err := stdDecode(out)
		if err != nil || !reflect.DeepEqual(back, std) {
			t.Fatalf("Marshal(unmarshalAny(%q)) = %s, which encoding/json reads as %#v, %v", data, out, back, err)
		}
		return
	}
	if err != nil {
		return // a Map or Set with one key twice, nesting too deep with tags: refused, as documented
	}
	again, err := unmarshalAny(out)
	if err != nil {
		t.Fatalf("unmarshalAny(Marshal(...)) of %s: %v", out, err)
	}
	out2, err := Marshal(again)
	if err != nil || !bytes.Equal(out, out2) {
		t.Fatalf("no fixed point: %s then %s (%v)", out, out2, err)
	}
}

// hasTagShape reports whether a value decoded by encoding/json holds an object whose only
// member is named like a tag.
func hasTagShape(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if len(x) == 1 && isTag(k) || hasTagShape(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasTagShape(e) {
				return true
			}
		}
	}
	return false
}

// nesting is the library's nesting level of a value without tagged values: one per container.
func nesting(v any) int {
	deepest := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if d := nesting(e); d > deepest {
				deepest = d
			}
		}
	case []any:
		for _, e := range x {
			if d := nesting(e); d > deepest {
				deepest = d
			}
		}
	default:
		return 0
	}
	return deepest + 1
}

func checkTree(t *testing.T, data []byte) {
	n, err := parseJSON(data)
	if valid := json.Valid(data) && utf8.Valid(data); valid != (err == nil) {
		t.Fatalf("parseJSON(%q): %v; encoding/json says valid = %v", data, err, valid)
	}
	if err != nil {
		return
	}
	if got, want := string(n.raw), strings.Trim(string(data), " \t\r\n"); got != want {
		t.Fatalf("root text %q, want %q", got, want)
	}
	var walk func(n *node)
	walk = func(n *node) {
		std, err := stdDecode(n.raw)
		if err != nil || !reflect.DeepEqual(plain(n), std) {
			t.Fatalf("node %q: %#v, encoding/json %#v (%v)", n.raw, plain(n), std, err)
		}
		for _, c := range n.vals {
			walk(c)
		}
	}
	walk(n)
}
