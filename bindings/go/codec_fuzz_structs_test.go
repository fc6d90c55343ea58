package agentstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// The struct side of FuzzCodecAgainstEncodingJSON: fields.go and the walks over Go types,
// which re-implement encoding/json's rules (encoding/json cannot write a time.Time field as a
// tagged value), checked against encoding/json on a struct type without tagged types.

type FuzzEmbedded struct {
	E      float64 `json:"e"`
	Shadow int
	Deep   string `json:"deep,omitempty"`
}

type fuzzInner struct {
	A int    `json:"a"`
	B string `json:"b,omitempty"`
}

type fuzzStruct struct {
	FuzzEmbedded
	Name   string          `json:"name"`
	N      int8            `json:"n"`
	U      uint16          `json:"u,omitempty"`
	F      float32         `json:"f"`
	Q      int64           `json:"q,string"`
	QS     string          `json:"qs,string"`
	QB     bool            `json:"qb,string"`
	P      *string         `json:"p"`
	L      []int           `json:"l"`
	Arr    [2]string       `json:"arr"`
	M      map[string]int  `json:"m"`
	MI     map[int]bool    `json:"mi"`
	Any    any             `json:"any"`
	Raw    json.RawMessage `json:"raw"`
	Num    json.Number     `json:"num"`
	Shadow string
	Skip   int         `json:"-"`
	Inner  *fuzzInner  `json:"inner"`
	Nested []fuzzInner `json:"nested"`
}

// stdUnmarshal is json.Unmarshal with numbers in interfaces as json.Number, as Unmarshal, and
// invalid UTF-8 refused (documented: encoding/json would replace it).
func stdUnmarshal(data []byte, v any) error {
	if !json.Valid(data) || !utf8.Valid(data) {
		return errors.New("invalid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the value")
	}
	return nil
}

func checkStructs(t *testing.T, data []byte) {
	if generic, err := stdDecode(data); err == nil && hasTagShape(generic) {
		return // tagged values decode by their own rules, checked elsewhere
	}
	var ours, std fuzzStruct
	oursErr := Unmarshal(data, &ours)
	stdErr := stdUnmarshal(data, &std)
	if (oursErr == nil) != (stdErr == nil) {
		t.Fatalf("Unmarshal(%q) into a struct: %v; encoding/json: %v", data, oursErr, stdErr)
	}
	if oursErr != nil {
		return
	}
	if !reflect.DeepEqual(ours, std) {
		t.Fatalf("Unmarshal(%q) = %#v\nencoding/json %#v", data, ours, std)
	}
	got, err := Marshal(ours)
	if err != nil {
		if !strings.Contains(err.Error(), "nesting deeper") {
			t.Fatalf("Marshal(%#v): %v", ours, err)
		}
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(std); err != nil {
		t.Fatal(err)
	}
	// The library's escapes apply to the whole text: outside strings, JSON has no backslash.
	want := libraryEscapes(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal of the struct from %q:\n got %s\nwant %s", data, got, want)
	}
}
