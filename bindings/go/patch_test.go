package agentstate

import (
	"encoding/json"
	"testing"
	"time"
)

// convState (agent_test.go) is the State page's ConvState as a Go struct, stored whole.

// convPatch is its patch type: every field omitted when zero, so a patch writes only what it
// sets. (A time.Time is a struct, never "empty": it needs omitzero.)
type convPatch struct {
	Status    string    `json:"status,omitempty"`
	LastReply string    `json:"lastReply,omitempty"`
	At        time.Time `json:"at,omitzero"`
}

var convAt = time.Date(2026, 11, 30, 3, 6, 44, 123e6, time.UTC)

func storedConv(t *testing.T) *Agent {
	t.Helper()
	a := openAgent(t, "", Options{})
	if _, err := a.ReplaceState(convState{Status: "idle", LastReply: "hello", At: convAt}); err != nil {
		t.Fatal(err)
	}
	return a
}

// A struct patch writes the fields it does not omit: with omitempty/omitzero on every field,
// the fields left zero are absent and the stored ones survive; without, a zero value is a
// value and overwrites (as documented: the struct patch rule).
func TestStructPatchOmitsZeroFieldsByItsTags(t *testing.T) {
	a := storedConv(t)
	st, err := a.SetState(convPatch{Status: "processing"})
	if err != nil {
		t.Fatal(err)
	}
	if st["status"] != "processing" || st["lastReply"] != "hello" || !st["at"].(time.Time).Equal(convAt) {
		t.Fatalf("a patch of the status changed other fields: %v", st)
	}
	later := convAt.Add(time.Minute)
	if _, err := a.SetState(convPatch{At: later}); err != nil {
		t.Fatal(err)
	}
	var got convState
	if err := a.GetStateInto(&got); err != nil {
		t.Fatal(err)
	}
	if got.Status != "processing" || got.LastReply != "hello" || !got.At.Equal(later) {
		t.Fatalf("state %+v", got)
	}

	// No omit option: the zero values are sent, and they are values.
	st, err = a.SetState(convState{Status: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	if st["lastReply"] != "" || !st["at"].(time.Time).IsZero() {
		t.Fatalf("a struct without omit options is written whole: %v", st)
	}
}

type zeroByMethod struct{ N int }

func (z *zeroByMethod) IsZero() bool { return z.N == 42 } // pointer receiver: called on an addressable copy

// omitzero follows encoding/json (Go 1.24): the type's IsZero method when it has one (a zero
// time.Time in another location is zero), else the zero value of the type (a struct with all
// fields zero, a nil pointer; unlike omitempty, an empty non-nil slice is not zero).
func TestOmitzero(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	type s struct {
		T  time.Time                  `json:"t,omitzero"`
		P  *int                       `json:"p,omitzero"`
		L  []int                      `json:"l,omitzero"`
		E  []int                      `json:"e,omitempty"`
		S  struct{ A, B int }         `json:"s,omitzero"`
		M  zeroByMethod               `json:"m,omitzero"`
		I  interface{ IsZero() bool } `json:"i,omitzero"`
		NZ int                        `json:"nz,omitzero"`
	}
	cases := []struct {
		in   s
		want string
	}{
		{s{}, `{"m":{"N":0}}`},
		{s{T: time.Time{}.In(paris), M: zeroByMethod{42}, L: nil, E: []int{}}, `{}`},
		{s{L: []int{}, S: struct{ A, B int }{B: 1}, M: zeroByMethod{42}, NZ: 7, I: convAt},
			`{"l":[],"s":{"A":0,"B":1},"i":{"$date":"2026-11-30T03:06:44.123Z"},"nz":7}`},
		{s{I: time.Time{}, M: zeroByMethod{42}}, `{}`},
	}
	for _, c := range cases {
		got, err := Marshal(c.in)
		if err != nil || string(got) != c.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
}

// The builder writes exactly the members it names: Set a value, Delete (or Set nil) null,
// which deletes; nothing else of the state is touched, at any level.
func TestPatchBuilderWritesOnlyWhatItNames(t *testing.T) {
	a := storedConv(t)
	var patches []string
	if _, err := a.OnStateChanged(func(_, _, patch json.RawMessage) error {
		patches = append(patches, string(patch))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st, err := a.SetState(Patch{}.Set("status", "processing").Delete("lastReply"))
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st["status"] != "processing" || !st["at"].(time.Time).Equal(convAt) {
		t.Fatalf("merged state %v", st)
	}
	if patches[0] != `{"status":"processing","lastReply":null}` {
		t.Fatalf("patch as applied: %s", patches[0])
	}

	// Nested: a Patch as a value is a nested patch; an object value merges too.
	if _, err := a.ReplaceStateJSON([]byte(`{"status":"processing","job":{"id":"j1","step":2,"note":"retrying"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetState(Patch{}.Set("job", Patch{}.Set("step", 3).Delete("note"))); err != nil {
		t.Fatal(err)
	}
	raw, err := a.GetStateJSON()
	if err != nil || string(raw) != `{"status":"processing","job":{"id":"j1","step":3}}` {
		t.Fatalf("nested patch: %s, %v", raw, err)
	}

	// Set nil deletes; naming a member again replaces its value in place; a base is not
	// changed by what is built from it.
	base := Patch{}.Set("status", "idle")
	one := base.Set("a", 1).Set("status", "done")
	two := base.Set("job", nil)
	for p, want := range map[*Patch]string{
		&base: `{"status":"idle"}`,
		&one:  `{"status":"done","a":1}`,
		&two:  `{"status":"idle","job":null}`,
	} {
		if got, err := Marshal(*p); err != nil || string(got) != want {
			t.Fatalf("Marshal(patch) = %s, %v; want %s", got, err, want)
		}
	}
	_, version, err := a.GetStateVersioned()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.SetStateIf(version, two); err != nil {
		t.Fatal(err)
	}
	if raw, _ := a.GetStateJSON(); string(raw) != `{"status":"idle"}` {
		t.Fatalf("after SetStateIf: %s", raw)
	}

	// The empty patch is {}; a member that cannot be encoded, or one named like a tag, is
	// refused as in any value.
	if got, _ := Marshal(Patch{}); string(got) != `{}` || (Patch{}).Len() != 0 || one.Len() != 2 {
		t.Fatalf("empty patch %s, lengths %d %d", got, (Patch{}).Len(), one.Len())
	}
	_, err = a.SetState(Patch{}.Set("c", make(chan int)))
	wantStatus(t, err, ErrCodec, "SetState", "unsupported type: chan int", `(at ["c"])`)
	_, err = a.SetState(Patch{}.Set("$date", "2026-11-30T03:06:44.123Z"))
	wantStatus(t, err, ErrCodec, "SetState", "would be stored as a tagged")
	if b, err := json.Marshal(map[string]any{"p": Patch{}.Set("at", convAt)}); err != nil || string(b) != `{"p":{"at":{"$date":"2026-11-30T03:06:44.123Z"}}}` {
		t.Fatalf("json.Marshal of a Patch: %s, %v", b, err)
	}
}
