package agentstate

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// Regression tests for the cases where the bindings used to disagree on the same value; the
// decisions are recorded in tests/conformance/binding_values.json, which every binding runs.

// A Go map or struct shaped like a tagged value used to be stored as one and come back as
// another type (map[string]any{"$date": ...} came back as a time.Time); it is refused.
func TestTagShapedMapsAndStructsAreRefused(t *testing.T) {
	a := openAgent(t, "", Options{})
	type onlyMap struct {
		M any `json:"$map"`
	}
	type collapses struct {
		D string `json:"$date"`
		X int    `json:"x,omitempty"`
	}
	for _, v := range []any{
		map[string]any{"$date": "2026-11-30T03:06:44.123Z"},
		map[string]string{"$bigint": "1"},
		map[string]any{"$set": []any{1}},
		onlyMap{M: []any{}},
		collapses{D: "2026-11-30T03:06:44.123Z"}, // omitempty leaves "$date" alone
	} {
		_, err := Marshal(v)
		wantStatus(t, err, ErrCodec, "would be stored as a tagged")
		_, err = a.SetState(map[string]any{"v": v})
		wantStatus(t, err, ErrCodec, "SetState", "would be stored as a tagged")
	}
	if got, _ := a.GetStateJSON(); string(got) != "{}" {
		t.Fatalf("a refused write changed the state: %s", got)
	}
	// With another member it is plain data; as JSON text it keeps its tagged meaning.
	got, err := a.SetState(map[string]any{
		"plain": map[string]any{"$date": "not a date", "other": 1},
		"raw":   json.RawMessage(`{"$date":"2026-11-30T03:06:44.123Z"}`),
		"x":     collapses{D: "d", X: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["raw"].(time.Time); !ok {
		t.Fatalf("tagged JSON text did not come back as a time.Time: %#v", got["raw"])
	}
	if plain, ok := got["plain"].(map[string]any); !ok || plain["$date"] != "not a date" {
		t.Fatalf("plain data changed: %#v", got["plain"])
	}
}

// Map keys and Set members compare as the library compares them: numbers by value.
func TestMapAndSetFollowTheLibraryIdentity(t *testing.T) {
	m := Map{{Key: json.Number("1.0"), Value: "a"}, {Key: []any{1}, Value: "list"}}
	for _, k := range []any{1, 1.0, int8(1), uint64(1), json.Number("1"), json.Number("1e0"), json.Number("10E-1")} {
		if v, ok := m.Get(k); !ok || v != "a" {
			t.Fatalf("Get(%#v) = %v, %v; want the key stored as 1.0", k, v, ok)
		}
		if !m.Has(k) {
			t.Fatalf("Has(%#v) is false", k)
		}
	}
	if m.Has("1") || m.Has(true) || m.Has([]any{1.5}) {
		t.Fatal("a key of another kind was found")
	}
	if v, ok := m.Get([]any{json.Number("1")}); !ok || v != "list" {
		t.Fatal("an array key was not found by its JSON text")
	}
	if m.Has([]any{json.Number("1.0")}) {
		t.Fatal("[1.0] found as [1]: inside arrays numbers compare by text, as in the library")
	}
	m.Set(1, "b")
	if len(m) != 2 || m[0].Value != "b" || m[0].Key != json.Number("1.0") {
		t.Fatalf("Set(1) did not update the entry stored as 1.0 in place: %#v", m)
	}
	m.Set(2, "c")
	if !m.Delete(1.0) || m.Has(1) || len(m) != 2 || m.Delete(1) {
		t.Fatalf("Delete: %#v", m)
	}
	// Two keys that are one for the library cannot be stored: refused before any call into C.
	for _, bad := range []any{
		Map{{Key: 1, Value: "a"}, {Key: json.Number("1.0"), Value: "b"}},
		Map{{Key: 0, Value: "a"}, {Key: math.Copysign(0, -1), Value: "b"}},
		Map{{Key: []any{json.Number("1E2")}, Value: 1}, {Key: []any{json.Number("1e+2")}, Value: 2}},
		Map{{Key: map[string]any{"a": 1}, Value: 1}, {Key: map[string]any{"a": 1}, Value: 2}},
		Set{1, 1.0},
		Set{json.Number("12345678901234567890123"), json.Number("12345678901234567890124")},
	} {
		_, err := Marshal(bad)
		wantStatus(t, err, ErrCodec, "are the same for the library")
	}
	if !(Set{json.Number("2.0")}).Has(2) || (Set{[]any{1}}).Has([]any{1.5}) {
		t.Fatal("Set.Has does not follow the library's identity")
	}
	if _, err := Marshal(Map{{Key: []any{1}, Value: 1}, {Key: []any{json.Number("1.0")}, Value: 2}, {Key: "1", Value: 3}}); err != nil {
		t.Fatalf("distinct keys refused: %v", err)
	}
}

// nested returns a map nested depth levels deep (the outermost map is level 1).
func nested(depth int) any {
	var v any = map[string]any{}
	for i := 1; i < depth; i++ {
		v = map[string]any{"a": v}
	}
	return v
}

// A value nested deeper than the library's 64 levels is ErrCodec at every depth, also past the
// parser's 128 levels, where the library itself would report malformed JSON.
func TestNestingBeyondTheLimitIsErrCodecAtEveryDepth(t *testing.T) {
	a := openAgent(t, "", Options{})
	if _, err := a.ReplaceState(nested(64)); err != nil {
		t.Fatalf("64 levels refused: %v", err)
	}
	for _, depth := range []int{65, 100, 127, 128, 129, 200, 1000, 100000} {
		_, err := Marshal(nested(depth))
		wantStatus(t, err, ErrCodec, "nesting deeper than 64")
		_, err = a.ReplaceState(nested(depth))
		wantStatus(t, err, ErrCodec, "ReplaceState", "nesting deeper than 64")
	}
	// Tagged values count as the library counts them: a Set two levels, a Map three.
	at := func(level int, v any) any { // a state holding v at that level
		for i := 2; i < level; i++ {
			v = []any{v}
		}
		return map[string]any{"a": v}
	}
	for _, c := range []struct {
		v  any
		ok bool
	}{
		{at(62, Set{[]any{}}), true}, {at(63, Set{[]any{}}), false}, {at(63, Set{}), true}, {at(64, Set{}), false},
		{at(62, Map{{Key: 1, Value: 2}}), true}, {at(63, Map{}), false},
		{at(64, TypedArray{Type: "Int8Array"}), true}, {at(65, time.Unix(0, 0)), false},
		{at(64, json.RawMessage(`{"$typedarray":{"type":"Int8Array","base64":""}}`)), true},
		{at(64, json.RawMessage(`[[[]]]`)), false},
	} {
		_, err := a.ReplaceState(c.v)
		if c.ok && err != nil {
			t.Fatalf("%#v refused: %v", c.v, err)
		}
		if !c.ok {
			wantStatus(t, err, ErrCodec, "nesting deeper than 64")
		}
	}
}

// BusyTimeout used to overflow when rounded up to milliseconds (math.MaxInt64 was reported as
// -9223372036853); what the library cannot take is refused, naming the maximum.
func TestBusyTimeoutBeyondTheLibraryRangeIsRefused(t *testing.T) {
	for _, d := range []time.Duration{math.MaxInt64, 2147483648 * time.Millisecond, 2147483647*time.Millisecond + 1} {
		_, err := Open(":memory:", Options{BusyTimeout: d})
		e := wantStatus(t, err, ErrInvalidArgument, "Open", "BusyTimeout", "2147483647ms")
		if strings.Contains(e.Message, "-") {
			t.Fatalf("the duration wrapped around: %v", e)
		}
	}
	a := openAgent(t, "", Options{BusyTimeout: 2147483647 * time.Millisecond})
	if _, err := a.SetState(map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	openAgent(t, "", Options{BusyTimeout: time.Nanosecond}) // rounded up to 1ms
}
