package agentstate

import (
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// What the codec cannot represent is refused with ErrCodec before any call into the library,
// and nothing is written: values with no JSON form, and structs with no exported field, which
// encoding/json would write as {} (and which used to be stored so, read back empty).
func TestValuesTheCodecCannotRepresentAreRefused(t *testing.T) {
	type handle struct{ fd, gen int }
	type embedsOnlyAMutex struct {
		sync.Mutex
		n int
	}
	withUser, err := url.Parse("https://user:secret@example.com/a")
	if err != nil {
		t.Fatal(err)
	}
	x := 1
	cases := []struct {
		value any
		want  string
	}{
		{make(chan int), "unsupported type: chan int"},
		{func() {}, "unsupported type: func()"},
		{complex(1, 2), "unsupported type: complex128"},
		{unsafe.Pointer(&x), "unsupported type: unsafe.Pointer"},
		{handle{1, 2}, "type agentstate.handle has no exported fields: it would be stored as {}"},
		{&sync.Mutex{}, "type sync.Mutex has no exported fields"},
		{&embedsOnlyAMutex{}, "type agentstate.embedsOnlyAMutex has no exported fields"},
		// url.URL has exported fields (stored as them), but not its user information.
		{withUser, "type url.Userinfo has no exported fields"},
		// A fmt.Stringer is not a text form: String is for people, not for reading back.
		{stringerOnly{secret: "s"}, "type agentstate.stringerOnly has no exported fields"},
	}
	a := openAgent(t, "", Options{})
	for _, c := range cases {
		_, err := a.SetState(map[string]any{"v": c.value})
		wantStatus(t, err, ErrCodec, "SetState", c.want)
		_, err = a.ReplaceState(map[string]any{"v": []any{c.value}})
		wantStatus(t, err, ErrCodec, "ReplaceState", c.want, `(at ["v"][0]`)
	}
	if st, v, err := a.GetStateVersionedJSON(); err != nil || string(st) != "{}" || v != 0 {
		t.Fatalf("after refused writes: %s at version %d, %v", st, v, err)
	}

	// What stays storable: text and JSON forms are used (encoding.TextMarshaler: net.IP), an
	// empty struct is {} honestly, fields skipped with "-" are skipped on purpose.
	type skipped struct {
		Secret string `json:"-"`
		n      int
	}
	got, err := Marshal(map[string]any{"ip": net.IPv4(192, 0, 2, 1), "empty": struct{}{}, "skipped": skipped{Secret: "s"}})
	if err != nil || string(got) != `{"empty":{},"ip":"192.0.2.1","skipped":{}}` {
		t.Fatalf("Marshal = %s, %v", got, err)
	}
}

type stringerOnly struct{ secret string }

func (s stringerOnly) String() string { return "stringer " + s.secret }

// A value that contains itself is refused as a circular reference at the JSON Pointer where
// it closes (it used to be "nesting deeper than 64 levels"), and nothing is written.
func TestCircularReferenceIsNamedWithItsPath(t *testing.T) {
	type node struct {
		Name string `json:"name"`
		Next *node  `json:"next"`
	}
	ring := &node{Name: "a", Next: &node{Name: "b"}}
	ring.Next.Next = ring
	self := map[string]any{"x": 1}
	self["me"] = self
	list := []any{"a", nil}
	list[1] = list
	var iface any
	iface = &iface
	m := Map{{Key: "k", Value: nil}}
	m[0].Value = []any{m}
	shared := map[string]any{"leaf": 1} // reached twice, not a cycle
	deep := map[string]any{}
	for i, cur := 0, deep; i < 70; i++ {
		next := map[string]any{}
		cur["d"] = next
		cur = next
	}
	cases := []struct {
		value any
		want  string
	}{
		{map[string]any{"ring": ring}, "circular reference at /ring/next/next: a value of type *agentstate.node that contains itself cannot be stored"},
		{map[string]any{"self": self}, "circular reference at /self/me: a value of type map[string]interface {} that contains itself"},
		{map[string]any{"list": list}, "circular reference at /list/1: a value of type []interface {} that contains itself"},
		{map[string]any{"a/b~c": []any{iface}}, "circular reference at /a~1b~0c/0: a value of type *interface {}"},
		{map[string]any{"m": m}, "circular reference at /m/$map/0/1/0: a value of type agentstate.Map"},
		{Patch{}.Set("p", map[string]any{"self": self}), "circular reference at /p/self/me"},
		{selfPatch(), "circular reference at /self/self: a value of type *agentstate.Patch"},
		{map[string]any{"m": selfMap()}, "circular reference at /m/$map/0/1: a value of type *agentstate.Map"},
	}
	a := openAgent(t, "", Options{})
	for _, c := range cases {
		_, err := a.SetState(c.value)
		wantStatus(t, err, ErrCodec, "SetState", c.want)
		if strings.Contains(err.Error(), "nesting") {
			t.Fatalf("a cycle reported as depth: %v", err)
		}
	}
	if st, v, err := a.GetStateVersionedJSON(); err != nil || string(st) != "{}" || v != 0 {
		t.Fatalf("after refused writes: %s at version %d, %v", st, v, err)
	}
	// Deep is not circular, and a value reached twice is not either.
	_, err := a.SetState(map[string]any{"deep": deep})
	wantStatus(t, err, ErrCodec, "nesting deeper than 64 levels")
	if _, err := a.SetState(map[string]any{"one": shared, "two": []any{shared, shared}}); err != nil {
		t.Fatal(err)
	}
}

// selfPatch is a Patch holding a pointer to itself.
func selfPatch() Patch {
	var p Patch
	p = p.Set("self", &p)
	return p
}

// selfMap is a pointer to a Map whose only value is that pointer.
func selfMap() *Map {
	m := &Map{}
	m.Set("k", m)
	return m
}
