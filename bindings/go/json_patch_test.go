package agentstate

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
)

// RFC 6902 JSON Patch writes (PatchState and its forms) and reads of one place (GetPath,
// GetTail) through the binding, on this run's backend (backend_test.go): appends, what hooks,
// the validator and the change log see, compare-and-set, every bad input refused with its
// status and nothing written, and the reads with their errors. The public RFC 6902 suite runs
// in json_patch_conformance_test.go.

// seenChange is what a hook or the validator saw of one change.
type seenChange struct {
	kind    ChangeKind
	patch   string
	version uint64
}

// Appends reach OnChange and OnStateChanged hooks, the validator and the change log as
// operations (ChangeJSONPatch), values of the codec (a time.Time) included.
func TestPatchStateAppendsReachHooksTheValidatorAndTheLog(t *testing.T) {
	a := openAgent(t, tempDB(t), Options{
		InitialState: map[string]any{"messages": []any{}},
		ChangeLog:    &ChangeLog{KeepLast: 100},
	})
	var mu sync.Mutex
	var seen, validated []seenChange
	var statePatches []string
	if _, err := a.OnChange(func(c Change) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, seenChange{c.Kind, string(c.Patch), c.Version})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.OnStateChanged(func(next, prev, patch json.RawMessage) error {
		mu.Lock()
		defer mu.Unlock()
		statePatches = append(statePatches, string(patch))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	errEmpty := errors.New("a message needs text")
	if err := a.SetValidator(func(c Change) error {
		validated = append(validated, seenChange{c.Kind, string(c.Patch), c.Version})
		if c.Kind == ChangeJSONPatch && strings.Contains(string(c.Patch), `"text":""`) {
			return errEmpty
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	at := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	type message struct {
		Text string    `json:"text"`
		At   time.Time `json:"at,omitzero"`
	}
	st, err := a.PatchState([]PatchOp{OpAdd("/messages/-", message{Text: "hi", At: at})})
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := st["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("PatchState returned %v", st)
	}
	if got := msgs[0].(map[string]any)["at"]; got != at {
		t.Fatalf("the time came back as %#v, want %v", got, at)
	}
	hi := `[{"op":"add","path":"/messages/-","value":{"text":"hi","at":{"$date":"2026-12-06T05:00:00.000Z"}}}]`
	there := `[{"op":"add","path":"/messages/-","value":{"text":"there"}}]`
	out, err := a.PatchStateJSON([]byte(there))
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, []byte(`{"messages":[{"text":"hi","at":{"$date":"2026-12-06T05:00:00.000Z"}},{"text":"there"}]}`))
	_, err = a.PatchState([]PatchOp{OpAdd("/messages/-", message{})})
	e := wantStatus(t, err, ErrRejected, "PatchState", "a message needs text")
	if !errors.Is(err, errEmpty) {
		t.Fatalf("the rejection does not wrap the validator's error: %v (%#v)", err, e)
	}
	if _, err := a.SetState(map[string]any{"status": "done"}); err != nil {
		t.Fatal(err)
	}
	got, v, err := a.GetStateVersionedJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"messages":[{"text":"hi","at":{"$date":"2026-12-06T05:00:00.000Z"}},{"text":"there"}],"status":"done"}`
	if v != 3 || string(got) != want {
		t.Fatalf("state %s at version %d, want %s at 3", got, v, want)
	}

	wantSeen := []seenChange{
		{ChangeJSONPatch, hi, 1},
		{ChangeJSONPatch, there, 2},
		{ChangeMerge, `{"status":"done"}`, 3},
	}
	mu.Lock()
	if len(seen) != len(wantSeen) || len(statePatches) != len(wantSeen) {
		t.Fatalf("hooks saw %+v and patches %q, want %+v", seen, statePatches, wantSeen)
	}
	for i := range wantSeen {
		if seen[i] != wantSeen[i] {
			t.Fatalf("hook delivery %d: %+v, want %+v", i, seen[i], wantSeen[i])
		}
		if statePatches[i] != wantSeen[i].patch {
			t.Fatalf("OnStateChanged delivery %d: patch %s, want %s", i, statePatches[i], wantSeen[i].patch)
		}
	}
	mu.Unlock()
	if len(validated) != 4 || validated[2].kind != ChangeJSONPatch || validated[2].version != 3 ||
		validated[3] != wantSeen[2] {
		t.Fatalf("the validator saw %+v", validated)
	}
	if ChangeJSONPatch.String() != "json_patch" {
		t.Fatalf("ChangeJSONPatch.String() = %q", ChangeJSONPatch.String())
	}

	// The log keeps the operations and says their kind.
	changes, err := a.ChangesSince(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 3 {
		t.Fatalf("ChangesSince(0) = %+v", changes)
	}
	for i, c := range changes {
		if c.Kind != wantSeen[i].kind || string(c.Patch) != wantSeen[i].patch || c.Version != wantSeen[i].version {
			t.Fatalf("logged change %d: %v %s %d, want %+v", i, c.Kind, c.Patch, c.Version, wantSeen[i])
		}
	}
	// The logged operations decode back into PatchOps.
	var ops []PatchOp
	if err := Unmarshal(changes[1].Patch, &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].Op != "add" || ops[0].Path != "/messages/-" || ops[0].From != "" {
		t.Fatalf("the logged operations decoded as %+v", ops)
	}
	raw, err := a.ChangesSinceJSON(1)
	if err != nil || !strings.Contains(string(raw), `"kind":"json_patch"`) || !strings.Contains(string(raw), `"kind":"merge"`) {
		t.Fatalf("ChangesSinceJSON(1) = %s, %v", raw, err)
	}
	old, err := a.StateAtJSON(1)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, old, []byte(`{"messages":[{"text":"hi","at":{"$date":"2026-12-06T05:00:00.000Z"}}]}`))
	restored, rv, err := a.Restore(1)
	if err != nil || rv != 4 || len(restored["messages"].([]any)) != 1 {
		t.Fatalf("Restore(1) = %v, %d, %v", restored, rv, err)
	}
	if changes, err := a.ChangesSince(3); err != nil || len(changes) != 1 || changes[0].Kind != ChangeReplace {
		t.Fatalf("the restore was logged as %+v, %v", changes, err)
	}
}

// A hook that fails after a patch: the change is committed, the call returns ErrHook.
func TestPatchStateHookErrorKeepsTheChange(t *testing.T) {
	a := openAgent(t, "", Options{})
	errMirror := errors.New("mirror unreachable")
	if _, err := a.OnChange(func(c Change) error { return errMirror }); err != nil {
		t.Fatal(err)
	}
	st, v, err := a.PatchStateIf(0, []PatchOp{OpAdd("/n", 1)})
	wantStatus(t, err, ErrHook, "PatchStateIf")
	if !errors.Is(err, errMirror) || st != nil || v != 0 {
		t.Fatalf("PatchStateIf with a failing hook = %v, %d, %v", st, v, err)
	}
	if got, v, err := a.GetStateVersionedJSON(); err != nil || v != 1 || string(got) != `{"n":1}` {
		t.Fatalf("after the failing hook: %s at %d, %v", got, v, err)
	}
}

// PatchStateIf writes only at the expected version; a test operation guards one place, and
// the error names the operation; a patch that changes nothing commits nothing.
func TestPatchStateIfAndTestOperations(t *testing.T) {
	a := openAgent(t, "", Options{})
	_, v1, err := a.SetStateIf(0, map[string]any{"status": "draft", "n": 1})
	if err != nil {
		t.Fatal(err)
	}
	publish := []PatchOp{OpTest("/status", "draft"), OpReplace("/status", "published")}
	_, _, err = a.PatchStateIf(v1+1, publish)
	wantStatus(t, err, ErrConflict, "PatchStateIf")
	if _, v, _ := a.GetStateVersioned(); v != v1 {
		t.Fatalf("a conflicting patch wrote: version %d", v)
	}
	st, v2, err := a.PatchStateIf(v1, publish)
	if err != nil || v2 != v1+1 || st["status"] != "published" {
		t.Fatalf("PatchStateIf(%d) = %v, %d, %v", v1, st, v2, err)
	}
	// Again: its test no longer holds.
	_, err = a.PatchState(publish)
	e := wantStatus(t, err, ErrTestFailed, "PatchState", "operation 0")
	if i, op, path, ok := e.Operation(); !ok || i != 0 || op != "test" || path != "/status" {
		t.Fatalf("Operation() = %d, %q, %q, %v", i, op, path, ok)
	}
	// The JSON form, and a patch that leaves the state as it is.
	out, v, err := a.PatchStateIfJSON(v2, []byte(`[{"op":"replace","path":"/n","value":1}]`))
	if err != nil || v != v2 {
		t.Fatalf("a patch that changes nothing: %s, %d, %v (want version %d)", out, v, err, v2)
	}
	jsonEqual(t, out, []byte(`{"status":"published","n":1}`))
	_, _, err = a.PatchStateIfJSON(v2+5, []byte(`[]`))
	wantStatus(t, err, ErrConflict, "PatchStateIfJSON")
}

// Concurrent appends never lose each other's element.
func TestPatchStateConcurrentAppends(t *testing.T) {
	a := openAgent(t, tempDB(t), Options{InitialState: map[string]any{"log": []any{}}})
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := a.PatchStateJSON([]byte(`[{"op":"add","path":"/log/-","value":1}]`)); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var log []int
	if err := a.GetPath("/log", &log); err != nil || len(log) != writers*each {
		t.Fatalf("%d elements after %d appends (%v)", len(log), writers*each, err)
	}
}

// Every bad patch earns its status, the message names what is wrong, and nothing is written.
func TestPatchStateRefusesBadPatches(t *testing.T) {
	a := openAgent(t, "", Options{MaxValueBytes: 4096})
	if _, err := a.SetStateJSON([]byte(`{"list":[1,2,3],"obj":{"a":1}}`)); err != nil {
		t.Fatal(err)
	}
	big := `[{"op":"add","path":"/x","value":"` + strings.Repeat("y", 5000) + `"}]`
	grow := `[{"op":"add","path":"/x","value":"` + strings.Repeat("y", 3000) + `"},{"op":"copy","from":"/x","path":"/y"}]`
	type opAt struct {
		index    int
		op, path string
	}
	cases := []struct {
		patch string
		want  error
		says  string
		at    *opAt
	}{
		{`{"op":"add","path":"/a","value":1}`, ErrInvalidArgument, "array", nil},
		{`[{"op":"frob","path":"/a"}]`, ErrInvalidArgument, "unknown op", &opAt{0, "", ""}},
		{`[{"op":"add","path":"/a"}]`, ErrInvalidArgument, "value", &opAt{0, "add", "/a"}},
		{`[{"op":"add","path":"/a","path":"/b","value":1}]`, ErrCodec, "duplicate", nil},
		{`[{"op":"add","path":"/a~2","value":1}]`, ErrInvalidArgument, "~2", &opAt{0, "add", "/a~2"}},
		{`[{"op":"remove","path":"/list/01"}]`, ErrPath, "/list/01", &opAt{0, "remove", "/list/01"}},
		{`[{"op":"remove","path":"/list/3"}]`, ErrPath, "/list/3", &opAt{0, "remove", "/list/3"}},
		{`[{"op":"remove","path":"/nope"}]`, ErrPath, "/nope", &opAt{0, "remove", "/nope"}},
		{`[{"op":"add","path":"/nope/x","value":1}]`, ErrPath, "/nope/x", &opAt{0, "add", "/nope/x"}},
		{`[{"op":"move","from":"/obj","path":"/obj/a/b"}]`, ErrPath, "move", &opAt{0, "move", "/obj/a/b"}},
		{`[{"op":"copy","from":"/none","path":"/c"}]`, ErrPath, "from", &opAt{0, "copy", "/c"}},
		{`[{"op":"test","path":"/obj/a","value":2}]`, ErrTestFailed, "/obj/a", &opAt{0, "test", "/obj/a"}},
		{`[{"op":"replace","path":"","value":[1]}]`, ErrInvalidArgument, "object", nil},
		{`[{"op":"add","path":"/d","value":{"$date":5}}]`, ErrCodec, "$date", &opAt{0, "add", "/d"}},
		{`[{"op":"add","path":"/a","value":1}`, ErrJSON, "", nil},
		{"[{\"op\":\"add\",\"path\":\"/a\",\"value\":\"\xff\"}]", ErrJSON, "UTF-8", nil},
		{``, ErrJSON, "", nil},
		{big, ErrTooLarge, "max_value_bytes", nil},
		{grow, ErrTooLarge, "max_value_bytes", nil},
		// A later operation's failure undoes the earlier ones.
		{`[{"op":"add","path":"/z","value":1},{"op":"remove","path":"/q\"é"}]`, ErrPath, "operation 1", &opAt{1, "remove", `/q"é`}},
	}
	for _, c := range cases {
		shown := c.patch
		if len(shown) > 60 {
			shown = shown[:60]
		}
		_, err := a.PatchStateJSON([]byte(c.patch))
		e := wantStatus(t, err, c.want, "PatchStateJSON", c.says)
		i, op, path, ok := e.Operation()
		switch {
		case c.at == nil && ok:
			t.Errorf("%s: Operation() = %d, %q, %q for %q", shown, i, op, path, e.Message)
		case c.at != nil && (!ok || *c.at != opAt{i, op, path}):
			t.Errorf("%s: Operation() = %d, %q, %q, %v, want %+v (message %q)", shown, i, op, path, ok, *c.at, e.Message)
		}
		got, v, err := a.GetStateVersionedJSON()
		if err != nil || v != 1 || string(got) != `{"list":[1,2,3],"obj":{"a":1}}` {
			t.Fatalf("%s: after the refused patch: %s at %d, %v", shown, got, v, err)
		}
	}

	// Found in Go, before any call into the library: a value with no JSON form.
	_, err := a.PatchState([]PatchOp{OpAdd("/c", make(chan int))})
	wantStatus(t, err, ErrCodec, "PatchState", "Value")
	_, _, err = a.PatchStateIf(1, []PatchOp{OpAdd("/f", func() {})})
	wantStatus(t, err, ErrCodec, "PatchStateIf")
	// Any encodable value is a patch; one that is not an array is refused by the library.
	_, err = a.PatchState(map[string]any{"op": "add"})
	wantStatus(t, err, ErrInvalidArgument, "PatchState", "array")
	if _, v, _ := a.GetStateVersioned(); v != 1 {
		t.Fatalf("version %d after refused patches, want 1", v)
	}
	// A PatchOp that contains itself is a cycle, said as such.
	cyc := []any{nil}
	cyc[0] = OpAdd("/c", cyc)
	_, err = a.PatchState(cyc)
	wantStatus(t, err, ErrCodec, "PatchState", "circular reference")
}

// How a PatchOp is encoded: "from" and "value" only where the operation has them (an empty
// from or a nil value is still sent where it is the operation's own), the same through
// encoding/json.
func TestPatchOpEncoding(t *testing.T) {
	ops := []PatchOp{
		OpAdd("/a", nil),
		OpRemove("/b"),
		OpReplace("/c", big.NewInt(7)),
		OpMove("/d", "/e"),
		OpCopy("", "/backup"),
		OpTest("/f", []int{1}),
		{Op: "remove", Path: "/g", From: "/h", Value: 1},
	}
	want := `[{"op":"add","path":"/a","value":null},{"op":"remove","path":"/b"},` +
		`{"op":"replace","path":"/c","value":{"$bigint":"7"}},{"op":"move","path":"/e","from":"/d"},` +
		`{"op":"copy","path":"/backup","from":""},{"op":"test","path":"/f","value":[1]},` +
		`{"op":"remove","path":"/g","from":"/h","value":1}]`
	if got := string(mustJSON(t, ops)); got != want {
		t.Fatalf("Marshal = %s\nwant      %s", got, want)
	}
	std, err := json.Marshal(ops)
	if err != nil || string(std) != want {
		t.Fatalf("json.Marshal = %s, %v", std, err)
	}
	if got := string(mustJSON(t, &ops[3])); got != `{"op":"move","path":"/e","from":"/d"}` {
		t.Fatalf("Marshal(*PatchOp) = %s", got)
	}
	if p := JSONPointer("messages", "0", "a/b", "~x"); p != "/messages/0/a~1b/~0x" {
		t.Fatalf("JSONPointer = %q", p)
	}
	if p := JSONPointer(); p != "" {
		t.Fatalf("JSONPointer() = %q", p)
	}
	// Copying the whole state into a member, with an empty from.
	a := openAgent(t, "", Options{})
	if _, err := a.SetState(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	st, err := a.PatchState([]PatchOp{OpCopy("", "/backup")})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := st["backup"].(map[string]any); b["n"] != json.Number("1") {
		t.Fatalf("copy from the root: %v", st)
	}
}

// Reads of one place: from the initial state (never stored), escaped names, the whole state,
// decoded into Go values; and their errors.
func TestGetPathAndGetTail(t *testing.T) {
	a := openAgent(t, "", Options{InitialState: map[string]any{
		"messages": []any{map[string]any{"t": "first"}},
		"a/b":      map[string]any{"~": 7},
	}})
	var first string
	if err := a.GetPath("/messages/0/t", &first); err != nil || first != "first" {
		t.Fatalf("GetPath = %q, %v", first, err)
	}
	var n int
	if err := a.GetPath(JSONPointer("a/b", "~"), &n); err != nil || n != 7 {
		t.Fatalf("GetPath(/a~1b/~0) = %d, %v", n, err)
	}
	whole, err := a.GetPathJSON("")
	if err != nil {
		t.Fatal(err)
	}
	state, _ := a.GetStateJSON()
	if string(whole) != string(state) {
		t.Fatalf("GetPathJSON(\"\") = %s, GetStateJSON = %s", whole, state)
	}
	if raw, err := a.GetPathJSON("/messages/0"); err != nil || string(raw) != `{"t":"first"}` {
		t.Fatalf("GetPathJSON = %s, %v", raw, err)
	}
	if _, v, _ := a.GetStateVersioned(); v != 0 {
		t.Fatalf("a read stored the initial state: version %d", v)
	}
	for _, c := range []struct {
		pointer string
		want    error
	}{
		{"/messages/1", ErrPath},
		{"/messages/-", ErrPath},
		{"/messages/00", ErrPath},
		{"/nope", ErrPath},
		{"/messages/0/t/x", ErrPath},
		{"messages", ErrInvalidArgument},
		{"/a~2", ErrInvalidArgument},
		{"/\xff", ErrInvalidArgument},
	} {
		_, err := a.GetPathJSON(c.pointer)
		e := wantStatus(t, err, c.want, "GetPathJSON")
		if _, _, _, ok := e.Operation(); ok {
			t.Errorf("%q: a read's error names an operation: %q", c.pointer, e.Message)
		}
		var v any
		wantStatus(t, a.GetPath(c.pointer, &v), c.want, "GetPath")
	}
	wantStatus(t, a.GetPath("/nope", new(any)), ErrPath, `"/nope"`)

	// The last elements, oldest first.
	for i := 2; i <= 4; i++ {
		if _, err := a.PatchState([]PatchOp{OpAdd("/messages/-", map[string]any{"t": i})}); err != nil {
			t.Fatal(err)
		}
	}
	type msg struct{ T any }
	var last []msg
	if err := a.GetTail("/messages", 2, &last); err != nil || len(last) != 2 ||
		last[0].T != json.Number("3") || last[1].T != json.Number("4") {
		t.Fatalf("GetTail(2) = %+v, %v", last, err)
	}
	if raw, err := a.GetTailJSON("/messages", 10); err != nil || string(raw) != `[{"t":"first"},{"t":2},{"t":3},{"t":4}]` {
		t.Fatalf("GetTailJSON(10) = %s, %v", raw, err)
	}
	if raw, err := a.GetTailJSON("/messages", 0); err != nil || string(raw) != `[]` {
		t.Fatalf("GetTailJSON(0) = %s, %v", raw, err)
	}
	_, err = a.GetTailJSON("/a~1b", 1)
	wantStatus(t, err, ErrInvalidArgument, "GetTailJSON", "not an array")
	_, err = a.GetTailJSON("/messages", -1)
	wantStatus(t, err, ErrInvalidArgument, "GetTailJSON", "negative")
	_, err = a.GetTailJSON("/nope", 1)
	wantStatus(t, err, ErrPath, "GetTailJSON")
	wantStatus(t, a.GetTail("/messages", 1, nil), ErrInvalidArgument, "GetTail", "non-nil pointer")
	var notPointer []msg
	wantStatus(t, a.GetPath("/messages", notPointer), ErrInvalidArgument, "GetPath", "non-nil pointer")
	// A value of another shape than the target: a decoding error.
	var s string
	wantStatus(t, a.GetPath("/messages", &s), ErrCodec, "GetPath")
}

// The Context forms: a done context writes and reads nothing; one never done changes nothing.
func TestPatchStateAndReadsUnderAContext(t *testing.T) {
	methods := []struct {
		op   string
		call func(a *Agent, ctx context.Context) error
	}{
		{"PatchStateContext", func(a *Agent, ctx context.Context) error {
			_, err := a.PatchStateContext(ctx, []PatchOp{OpAdd("/log/-", 1)})
			return err
		}},
		{"PatchStateJSONContext", func(a *Agent, ctx context.Context) error {
			_, err := a.PatchStateJSONContext(ctx, []byte(`[{"op":"add","path":"/log/-","value":2}]`))
			return err
		}},
		{"PatchStateIfContext", func(a *Agent, ctx context.Context) error {
			_, v, err := a.GetStateVersioned()
			if err != nil {
				return err
			}
			_, _, err = a.PatchStateIfContext(ctx, v, []PatchOp{OpAdd("/log/-", 3)})
			return err
		}},
		{"PatchStateIfJSONContext", func(a *Agent, ctx context.Context) error {
			_, v, err := a.GetStateVersioned()
			if err != nil {
				return err
			}
			_, _, err = a.PatchStateIfJSONContext(ctx, v, []byte(`[{"op":"add","path":"/log/-","value":4}]`))
			return err
		}},
		{"GetPathContext", func(a *Agent, ctx context.Context) error {
			var log []int
			return a.GetPathContext(ctx, "/log", &log)
		}},
		{"GetPathJSONContext", func(a *Agent, ctx context.Context) error {
			_, err := a.GetPathJSONContext(ctx, "/log")
			return err
		}},
		{"GetTailContext", func(a *Agent, ctx context.Context) error {
			var log []int
			return a.GetTailContext(ctx, "/log", 2, &log)
		}},
		{"GetTailJSONContext", func(a *Agent, ctx context.Context) error {
			_, err := a.GetTailJSONContext(ctx, "/log", 2)
			return err
		}},
	}
	a := openAgent(t, "", Options{})
	if _, err := a.SetState(map[string]any{"log": []int{0}}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, m := range methods {
		wantCancelled(t, m.call(a, cancelled), m.op, context.Canceled)
	}
	if got, v, err := a.GetStateVersionedJSON(); err != nil || v != 1 || string(got) != `{"log":[0]}` {
		t.Fatalf("after cancelled calls: %s at %d, %v", got, v, err)
	}
	far, cancelFar := context.WithTimeout(context.Background(), time.Hour)
	defer cancelFar()
	for _, m := range methods {
		if err := m.call(a, far); err != nil {
			t.Fatalf("%s: %v", m.op, err)
		}
	}
	if got, v, err := a.GetStateVersionedJSON(); err != nil || v != 5 || string(got) != `{"log":[0,1,2,3,4]}` {
		t.Fatalf("after the calls: %s at %d, %v", got, v, err)
	}
}

// A closed Agent: ErrBadHandle from every new method.
func TestPatchStateAndReadsOnAClosedAgent(t *testing.T) {
	a, err := openStore(t, ":memory:", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = a.PatchState([]PatchOp{OpRemove("/a")})
	wantStatus(t, err, ErrBadHandle, "PatchState")
	_, _, err = a.PatchStateIfJSON(0, []byte(`[]`))
	wantStatus(t, err, ErrBadHandle, "PatchStateIfJSON")
	_, err = a.GetPathJSON("")
	wantStatus(t, err, ErrBadHandle, "GetPathJSON")
	_, err = a.GetTailJSON("/a", 1)
	wantStatus(t, err, ErrBadHandle, "GetTailJSON")
}

// Error.Operation reads the library's form of a message, escapes of the path included, and
// nothing else.
func TestErrorOperationParsesTheMessage(t *testing.T) {
	for _, c := range []struct {
		msg      string
		index    int
		op, path string
		ok       bool
	}{
		{`no such path: operation 12 (remove "/q"): the path does not exist`, 12, "remove", "/q", true},
		{`test failed: operation 0 (test "/a\"b\\c\n\u{7f}é"): the test failed`, 0, "test", "/a\"b\\c\n\x7fé", true},
		{`invalid argument: the JSON Patch is malformed: operation 3: "op" is missing`, 3, "", "", true},
		{`the JSON Patch is malformed: operation 2 (frob): unknown`, 2, "frob", "", true},
		{`codec error: duplicate member name "path" in one object`, 0, "", "", false},
		{`no such path: the state has no value at "/nope"`, 0, "", "", false},
		{`cooperation 1 (add "/a"): x`, 0, "", "", false},
		{`operation x (add "/a"): x`, 0, "", "", false},
		{`operation 1 (add "/a`, 0, "", "", false},
	} {
		e := &Error{Status: StatusPath, Message: c.msg}
		i, op, path, ok := e.Operation()
		if i != c.index || op != c.op || path != c.path || ok != c.ok {
			t.Errorf("%q: Operation() = %d, %q, %q, %v; want %d, %q, %q, %v", c.msg, i, op, path, ok, c.index, c.op, c.path, c.ok)
		}
	}
	// A rejection's message holds the validator's text, which is not the library's form.
	e := &Error{Status: StatusRejected, Message: `rejected: the validator rejected the change: operation 1 (add "/a"): no`}
	if _, _, _, ok := e.Operation(); ok {
		t.Errorf("a rejection's message was read as naming an operation")
	}
}

// Another Agent of the same agent receives a JSON Patch by Poll with its kind and operations.
func TestPatchStateReachesAnotherAgentByPoll(t *testing.T) {
	path := tempDB(t)
	a := openAgent(t, path, Options{ChangeLog: &ChangeLog{KeepLast: 10}, InitialState: map[string]any{"list": []any{}}})
	b := openAgent(t, path, Options{InitialState: map[string]any{"list": []any{}}})
	var got []seenChange
	if _, err := a.OnChange(func(c Change) error {
		got = append(got, seenChange{c.Kind, string(c.Patch), c.Version})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ops := `[{"op":"add","path":"/list/-","value":"x"}]`
	if _, err := b.PatchStateJSON([]byte(ops)); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Poll(); n != 1 || err != nil {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	if len(got) != 1 || got[0] != (seenChange{ChangeJSONPatch, ops, 1}) {
		t.Fatalf("Poll delivered %+v", got)
	}
}

// Typed.Patch and Typed.PatchIf return the new state as a T.
func TestTypedPatch(t *testing.T) {
	type conv struct {
		Status   string   `json:"status"`
		Messages []string `json:"messages"`
	}
	a := openAgent(t, "", Options{})
	c := NewTyped[conv](a)
	if _, err := c.Replace(conv{Status: "idle", Messages: []string{}}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Patch([]PatchOp{OpAdd("/messages/-", "hi"), OpReplace("/status", "busy")})
	if err != nil || st.Status != "busy" || len(st.Messages) != 1 || st.Messages[0] != "hi" {
		t.Fatalf("Typed.Patch = %+v, %v", st, err)
	}
	st, v, err := c.PatchIf(2, []PatchOp{OpAdd("/messages/-", "there")})
	if err != nil || v != 3 || len(st.Messages) != 2 {
		t.Fatalf("Typed.PatchIf = %+v, %d, %v", st, v, err)
	}
	_, _, err = c.PatchIf(2, []PatchOp{OpRemove("/messages/0")})
	wantStatus(t, err, ErrConflict, "Typed.PatchIf")
	_, err = c.Patch([]PatchOp{OpRemove("/messages/5")})
	wantStatus(t, err, ErrPath, "Typed.Patch", "/messages/5")
	_, err = c.Patch([]PatchOp{OpAdd("/c", make(chan int))})
	wantStatus(t, err, ErrCodec, "Typed.Patch")
	if got, v, _ := a.GetStateVersionedJSON(); v != 3 || string(got) != `{"status":"busy","messages":["hi","there"]}` {
		t.Fatalf("stored %s at %d", got, v)
	}
}
