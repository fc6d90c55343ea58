package agentstate

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMarshalTaggedForms(t *testing.T) {
	big1, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	cases := []struct {
		in   any
		want string
	}{
		{time.Date(2026, 11, 30, 3, 6, 44, 123e6, time.UTC), `{"$date":"2026-11-30T03:06:44.123Z"}`},
		{time.Date(2026, 11, 30, 4, 6, 44, 0, time.FixedZone("CET", 3600)), `{"$date":"2026-11-30T03:06:44.000Z"}`},
		{time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), `{"$date":"0000-01-01T00:00:00.000Z"}`},
		// The shortest exact fraction of 3, 6 or 9 digits.
		{time.Date(2026, 11, 30, 3, 6, 44, 123456e3, time.UTC), `{"$date":"2026-11-30T03:06:44.123456Z"}`},
		{time.Date(2026, 11, 30, 3, 6, 44, 1e3, time.UTC), `{"$date":"2026-11-30T03:06:44.000001Z"}`},
		{time.Date(2026, 11, 30, 3, 6, 44, 123456789, time.UTC), `{"$date":"2026-11-30T03:06:44.123456789Z"}`},
		{time.Date(2026, 11, 30, 3, 6, 44, 1, time.UTC), `{"$date":"2026-11-30T03:06:44.000000001Z"}`},
		{time.Date(2026, 11, 30, 3, 6, 44, 120e6, time.UTC), `{"$date":"2026-11-30T03:06:44.120Z"}`},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), `{"$date":"9999-12-31T23:59:59.999999999Z"}`},
		{big1, `{"$bigint":"-123456789012345678901234567890"}`},
		{*big.NewInt(0), `{"$bigint":"0"}`},
		{(*big.Int)(nil), `null`},
		{[]byte{0, 1, 2, 255}, `{"$arraybuffer":"AAEC/w=="}`},
		{[]byte{}, `{"$arraybuffer":""}`},
		{[]byte(nil), `null`},
		{Map{{Key: 1, Value: "one"}, {Key: map[string]any{"k": 1}, Value: []any{2}}}, `{"$map":[[1,"one"],[{"k":1},[2]]]}`},
		{Map{}, `{"$map":[]}`},
		{Set{1, "1", []int{1}}, `{"$set":[1,"1",[1]]}`},
		{TypedArray{Type: "Float32Array", Data: []byte{0, 0, 0, 0, 0, 0, 0x80, 0x3f}}, `{"$typedarray":{"type":"Float32Array","base64":"AAAAAAAAgD8="}}`},
		{RegExp{Source: "a+b", Flags: "gi"}, `{"$regexp":{"source":"a+b","flags":"gi"}}`},
		{&RegExp{Source: `"\`, Flags: ""}, `{"$regexp":{"source":"\"\\","flags":""}}`},
		{json.Number("1.50e+3"), `1.50e+3`},
		{json.RawMessage(` { "a" : [1, 2] } `), `{"a":[1,2]}`},
		{"<&>\u2028é\x01\n", `"<&>` + "\u2028" + `é\u0001\n"`},
		{math.Copysign(0, -1), `-0`},
		{1e21, `1e+21`},
		{1e-7, `1e-7`},
		{float32(0.1), `0.1`},
		{uint64(math.MaxUint64), `18446744073709551615`},
		{map[string]any{"b": 1, "a": nil}, `{"a":null,"b":1}`},
	}
	for _, c := range cases {
		got, err := Marshal(c.in)
		if err != nil {
			t.Errorf("Marshal(%#v): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("Marshal(%#v) = %s, want %s", c.in, got, c.want)
		}
	}
}

// Types without tagged values encode exactly as encoding/json encodes them (HTML escaping
// aside, which does not occur in these values).
type embeddedBase struct {
	ID   int    `json:"id"`
	Kind string `json:"kind,omitempty"`
}

type Promoted struct {
	Shadowed int
	Deep     string
}

type compat struct {
	embeddedBase
	*Promoted
	Name      string            `json:"name"`
	Skip      string            `json:"-"`
	Dash      string            `json:"-,"`
	Empty     string            `json:",omitempty"`
	Zero      int               `json:"zero,omitempty"`
	Quoted    int64             `json:"quoted,string"`
	QuotedStr string            `json:"qs,string"`
	Ptr       *float64          `json:"ptr"`
	Nested    map[int]bool      `json:"nested"`
	List      []uint16          `json:"list"`
	Arr       [2]int8           `json:"arr"`
	Iface     any               `json:"iface"`
	Raw       json.RawMessage   `json:"raw"`
	Text      textKey           `json:"text"`
	ByText    map[textKey]int   `json:"by_text"`
	Strings   map[string]string `json:"strings,omitempty"`
	Shadowed  string
	unexp     int
}

type textKey struct{ a, b string }

func (k textKey) MarshalText() ([]byte, error) { return []byte(k.a + "/" + k.b), nil }

func (k *textKey) UnmarshalText(b []byte) error {
	parts := strings.SplitN(string(b), "/", 2)
	if len(parts) != 2 {
		return errors.New("want a/b")
	}
	k.a, k.b = parts[0], parts[1]
	return nil
}

func TestMarshalMatchesEncodingJSON(t *testing.T) {
	f := 2.5
	values := []any{
		compat{
			embeddedBase: embeddedBase{ID: 7}, Promoted: &Promoted{Shadowed: 1, Deep: "d"},
			Name: "n", Skip: "s", Dash: "dash", Quoted: -5, QuotedStr: "x", Ptr: &f,
			Nested: map[int]bool{3: true, -1: false}, List: []uint16{1, 2}, Arr: [2]int8{-1, 1},
			Iface: map[string]any{"x": []any{1.5, "y", nil, true}}, Raw: json.RawMessage(`{"r":1}`),
			Text: textKey{"p", "q"}, ByText: map[textKey]int{{"a", "b"}: 1}, Shadowed: "outer", unexp: 1,
		},
		compat{Raw: json.RawMessage(`null`)},
		map[string]int{"z": 1, "a": 2, "m": 3},
		[]any{int8(-3), uint(3), 0.000001, 123456789.0, float32(3.4e38), "", false},
		[3]string{"a"},
		struct{ A, a int }{1, 2},
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Marshal(v)
		if err != nil {
			t.Errorf("Marshal(%#v): %v", v, err)
			continue
		}
		if string(got) != string(want) {
			t.Errorf("Marshal(%T):\n got %s\nwant %s", v, got, want)
		}
	}
}

func TestUnmarshalMatchesEncodingJSON(t *testing.T) {
	input := `{"id":7,"kind":"k","Shadowed":"outer","Deep":"d","name":"n","-":"dash","quoted":"-5","qs":"\"x\"",` +
		`"ptr":2.5,"nested":{"3":true,"-1":false},"list":[1,2],"arr":[-1],"iface":{"x":[1.5,"y",null,true]},` +
		`"raw":{"r":[1, 2]},"text":"p/q","by_text":{"a/b":1},"NAME":"case-insensitive wins last","unknown":1}`
	var want, got compat
	if err := json.Unmarshal([]byte(input), &want); err != nil {
		t.Fatal(err)
	}
	if err := Unmarshal([]byte(input), &got); err != nil {
		t.Fatal(err)
	}
	// encoding/json decodes numbers in interfaces as float64; this package as json.Number.
	want.Iface = map[string]any{"x": []any{json.Number("1.5"), "y", nil, true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}
}

func TestUnmarshalGeneric(t *testing.T) {
	in := `{"d":{"$date":"2026-11-30T03:06:44.123Z"},"b":{"$bigint":"-12345678901234567890"},` +
		`"a":{"$arraybuffer":"AAEC"},"m":{"$map":[[1,{"$set":["x"]}]]},"s":{"$set":[1.0,"1"]},` +
		`"t":{"$typedarray":{"type":"Int16Array","base64":"AQA="}},"r":{"$regexp":{"source":"^x$","flags":"m"}},` +
		`"n":[1.0,1E2,123456789012345678901234567890,-0],"plain":{"$date":"not a date","other":1},"z":null}`
	var v any
	if err := Unmarshal([]byte(in), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := new(big.Int).SetString("-12345678901234567890", 10)
	want := map[string]any{
		"d":     time.Date(2026, 11, 30, 3, 6, 44, 123e6, time.UTC),
		"b":     b,
		"a":     []byte{0, 1, 2},
		"m":     Map{{Key: json.Number("1"), Value: Set{"x"}}},
		"s":     Set{json.Number("1.0"), "1"},
		"t":     TypedArray{Type: "Int16Array", Data: []byte{1, 0}},
		"r":     RegExp{Source: "^x$", Flags: "m"},
		"n":     []any{json.Number("1.0"), json.Number("1E2"), json.Number("123456789012345678901234567890"), json.Number("-0")},
		"plain": map[string]any{"$date": "not a date", "other": json.Number("1")},
		"z":     nil,
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("got  %#v\nwant %#v", v, want)
	}
	// And back: the same text (members sorted, as Go maps are).
	out := mustJSON(t, v)
	jsonEqual(t, out, []byte(in))
	if !strings.Contains(string(out), `1.0,1E2,123456789012345678901234567890,-0`) {
		t.Fatalf("numbers lost their text: %s", out)
	}
}

type allTypes struct {
	When     time.Time         `json:"when"`
	WhenPtr  *time.Time        `json:"when_ptr"`
	Big      *big.Int          `json:"big"`
	BigVal   big.Int           `json:"big_val"`
	Bytes    []byte            `json:"bytes"`
	NilBytes []byte            `json:"nil_bytes"`
	M        Map               `json:"m"`
	S        Set               `json:"s"`
	TA       TypedArray        `json:"ta"`
	RE       *RegExp           `json:"re"`
	GoMap    map[string]int    `json:"go_map"`
	F64      float64           `json:"f64"`
	F32      float32           `json:"f32"`
	NegZero  float64           `json:"neg_zero"`
	I64      int64             `json:"i64"`
	U64      uint64            `json:"u64"`
	Num      json.Number       `json:"num"`
	Any      any               `json:"any"`
	Nested   []*allTypesInner  `json:"nested"`
	ByName   map[string][]byte `json:"by_name"`
	Empty    string            `json:"empty,omitempty"`
}

type allTypesInner struct {
	At  time.Time `json:"at"`
	Tag string    `json:"tag"`
}

func sampleAllTypes() allTypes {
	when := time.Date(2026, 11, 30, 3, 6, 44, 123e6, time.UTC)
	later := when.Add(1500 * time.Millisecond)
	huge, _ := new(big.Int).SetString("123456789012345678901234567890123456789", 10)
	v := allTypes{
		When: when, WhenPtr: &later, Big: huge, Bytes: []byte("\x00\xffbytes"),
		M:     Map{{Key: "k", Value: json.Number("1")}, {Key: json.Number("2"), Value: []any{"two"}}},
		S:     Set{"a", json.Number("1"), true},
		TA:    TypedArray{Type: "Float64Array", Data: make([]byte, 16)},
		RE:    &RegExp{Source: `\d+`, Flags: "gu"},
		GoMap: map[string]int{"x": 1},
		F64:   0.1 + 0.2, F32: 1.1, NegZero: math.Copysign(0, -1),
		I64: math.MinInt64, U64: math.MaxUint64, Num: "1.000",
		Any:    map[string]any{"d": later, "n": json.Number("2.50")},
		Nested: []*allTypesInner{{At: when, Tag: "x"}, nil},
		ByName: map[string][]byte{"k": {1}},
	}
	v.BigVal.SetInt64(-42)
	return v
}

func TestRoundTripTyped(t *testing.T) {
	in := sampleAllTypes()
	data := mustJSON(t, in)
	var out allTypes
	if err := Unmarshal(data, &out); err != nil {
		t.Fatalf("Unmarshal(%s): %v", data, err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the value:\n in %#v\nout %#v\njson %s", in, out, data)
	}
	if math.Signbit(out.NegZero) != true {
		t.Fatal("-0 lost its sign")
	}
}

func TestMapAndSetHelpers(t *testing.T) {
	m := Map{{Key: 1, Value: "int"}, {Key: "1", Value: "string"}}
	if v, ok := m.Get("1"); !ok || v != "string" {
		t.Fatalf("Get(\"1\") = %v, %v", v, ok)
	}
	if v, ok := m.Get(1); !ok || v != "int" {
		t.Fatalf("Get(1) = %v, %v", v, ok)
	}
	if _, ok := m.Get(2); ok {
		t.Fatal("Get(2) found something")
	}
	s := Set{1, "x"}
	if !s.Has("x") || !s.Has(json.Number("1")) || s.Has("1") {
		t.Fatal("Set.Has is wrong")
	}
	// The types work inside encoding/json as well.
	b, err := json.Marshal(map[string]any{"s": s, "r": RegExp{"x", "g"}})
	if err != nil || string(b) != `{"r":{"$regexp":{"source":"x","flags":"g"}},"s":{"$set":[1,"x"]}}` {
		t.Fatalf("json.Marshal = %s, %v", b, err)
	}
	var back struct {
		S Set    `json:"s"`
		R RegExp `json:"r"`
	}
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back.S, Set{json.Number("1"), "x"}) || back.R != (RegExp{"x", "g"}) {
		t.Fatalf("json.Unmarshal = %#v, %v", back, err)
	}
	type both struct {
		M Map        `json:"m"`
		T TypedArray `json:"t"`
	}
	in := both{M: Map{{Key: "k", Value: []byte{1}}}, T: TypedArray{Type: "Uint8Array", Data: []byte{7}}}
	b, err = json.Marshal(in)
	if err != nil || string(b) != `{"m":{"$map":[["k",{"$arraybuffer":"AQ=="}]]},"t":{"$typedarray":{"type":"Uint8Array","base64":"Bw=="}}}` {
		t.Fatalf("json.Marshal = %s, %v", b, err)
	}
	var out both
	if err := json.Unmarshal(b, &out); err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("json.Unmarshal = %#v, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"m":[1]}`), &out); err == nil || !errors.Is(err, ErrCodec) {
		t.Fatalf("a plain array decoded as a Map: %v", err)
	}
}

func TestMarshalErrors(t *testing.T) {
	type cyclic struct{ Next *cyclic }
	loop := &cyclic{}
	loop.Next = loop
	self := map[string]any{}
	self["self"] = self
	cases := []struct {
		in   any
		want string
	}{
		{make(chan int), "unsupported type: chan int"},
		{func() {}, "unsupported type: func()"},
		{complex(1, 2), "unsupported type: complex128"},
		{math.NaN(), "unsupported value: NaN"},
		{map[string]any{"x": math.Inf(1)}, `unsupported value: +Inf (at ["x"])`},
		// A cycle is named as one, with the JSON Pointer where it closes.
		{loop, "circular reference at /Next: a value of type *agentstate.cyclic that contains itself"},
		{self, "circular reference at /self: a value of type map[string]interface {} that contains itself"},
		{map[[2]int]int{{1, 2}: 3}, "unsupported map key type"},
		{"\xff", "not valid UTF-8"},
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "0000-9999"},
		{time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), "0000-9999"},
		{json.Number("01"), "invalid number literal"},
		{json.RawMessage(`{"a":`), "invalid JSON"},
		{struct {
			T []time.Time `json:"t"`
		}{[]time.Time{time.Unix(0, 5), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}, "(at .t[1])"},
	}
	for _, c := range cases {
		_, err := Marshal(c.in)
		wantStatus(t, err, ErrCodec, c.want)
	}
	// A MarshalJSON error is the cause.
	sentinel := errors.New("no way")
	_, err := Marshal(failingMarshaler{sentinel})
	if !errors.Is(err, sentinel) || !errors.Is(err, ErrCodec) {
		t.Fatalf("MarshalJSON error not wrapped: %v", err)
	}
}

type failingMarshaler struct{ err error }

func (f failingMarshaler) MarshalJSON() ([]byte, error) { return nil, f.err }

func TestUnmarshalErrors(t *testing.T) {
	var st struct {
		N int8      `json:"n"`
		T time.Time `json:"t"`
		S struct{}  `json:"s"`
		B []byte    `json:"b"`
	}
	cases := []struct {
		in   string
		want error
		msg  string
	}{
		{`{"n":128}`, ErrCodec, "cannot decode number 128 into Go value of type int8 (at .n)"},
		{`{"n":1.5}`, ErrCodec, "number 1.5"},
		{`{"n":"1"}`, ErrCodec, "cannot decode string"},
		{`{"t":{"$bigint":"1"}}`, ErrCodec, "$bigint value into Go value of type time.Time"},
		{`{"t":{"$date":"2026-02-30T00:00:00.000Z"}}`, ErrCodec, "day out of range"},
		{`{"t":{"$date":"2026-02-30T00:00:00.000000000Z"}}`, ErrCodec, "day out of range"},
		{`{"t":{"$date":"2026-01-30T00:00:00.0000Z"}}`, ErrCodec, "3, 6 or 9 fraction digits"},
		{`{"t":{"$date":"2026-01-30T00:00:00Z"}}`, ErrCodec, "3, 6 or 9 fraction digits"},
		{`{"t":{"$date":"2026-01-30T00:00:00.12345a789Z"}}`, ErrCodec, "cannot parse"},
		{`{"s":{"$set":[]}}`, ErrCodec, "$set value into Go value of type struct {}"},
		{`{"b":{"$arraybuffer":"AAE"}}`, ErrCodec, "invalid base64"},
		{`{"n":`, ErrJSON, "unexpected end of input"},
		{`{"n":1} x`, ErrJSON, "after the JSON value"},
		{"{\"n\":\"\xff\"}", ErrJSON, "invalid UTF-8"},
	}
	for _, c := range cases {
		err := Unmarshal([]byte(c.in), &st)
		wantStatus(t, err, c.want, c.msg)
	}
	wantStatus(t, Unmarshal([]byte(`{}`), st), ErrInvalidArgument, "non-nil pointer")
	wantStatus(t, Unmarshal([]byte(`{}`), nil), ErrInvalidArgument, "non-nil pointer")
	var v any
	wantStatus(t, Unmarshal([]byte(`{"x":{"$map":[[1]]}}`), &v), ErrCodec, "[key, value] pair")
}

func TestUnmarshalInto(t *testing.T) {
	// A $map into a Go map, a $set into a slice, null semantics, reuse of existing values.
	var dst struct {
		M   map[int]string `json:"m"`
		S   []string       `json:"s"`
		P   *int           `json:"p"`
		K   int            `json:"k"`
		Raw json.RawMessage
		Ar  [3]int `json:"ar"`
	}
	one := 1
	dst.P = &one
	dst.K = 9
	dst.M = map[int]string{7: "kept"}
	in := `{"m":{"$map":[[1,"a"],[2,"b"]]},"s":{"$set":["x","y"]},"p":null,"k":null,"raw":null,"ar":[1,2,3,4]}`
	if err := Unmarshal([]byte(in), &dst); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dst.M, map[int]string{1: "a", 2: "b", 7: "kept"}) || !reflect.DeepEqual(dst.S, []string{"x", "y"}) ||
		dst.P != nil || dst.K != 9 || string(dst.Raw) != "null" || dst.Ar != [3]int{1, 2, 3} {
		t.Fatalf("got %#v", dst)
	}
}

// time.Now() (nanoseconds, a monotonic clock reading, the local location) stores
// without rounding and reads back Equal, in UTC, from a store file that is reopened.
func TestTimeNowRoundTripsThroughAStoreFile(t *testing.T) {
	path := tempDB(t)
	now := time.Now()
	fixed := time.Date(2026, 12, 1, 7, 57, 33, 590436789, time.FixedZone("UTC+1", 3600))
	a := openAgent(t, path, Options{InitialState: map[string]any{"messages": map[string]any{}}})
	if _, err := a.SetState(map[string]any{"at": now, "fixed": fixed}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := openAgent(t, path, Options{InitialState: map[string]any{"messages": map[string]any{}}})
	st, err := b.GetState()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]time.Time{"at": now, "fixed": fixed} {
		got, ok := st[name].(time.Time)
		if !ok || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%s: got %#v, want %v (Equal, in UTC)", name, st[name], want)
		}
		// Equal and in UTC: == holds once the original drops its monotonic reading and zone.
		if got != want.Round(0).UTC() {
			t.Errorf("%s: got %v, not == %v", name, got, want.Round(0).UTC())
		}
	}
	raw, err := b.GetStateJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"fixed":{"$date":"2026-12-01T06:57:33.590436789Z"}`) {
		t.Fatalf("stored %s", raw)
	}
}
