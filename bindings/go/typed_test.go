package agentstate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The typed agent reads and writes T, and stores exactly what the untyped Agent stores for the
// same calls: types only.
func TestTypedAgentReadsAndWritesT(t *testing.T) {
	path, id := storeLocation(t)
	other, _ := storeLocation(t)
	otherID := id
	if id != "" {
		otherID = newAgentID()
	} else {
		other = tempDB(t)
	}
	initial := convState{Status: "idle"}
	conv, err := OpenTyped[convState](path, Options{AgentID: id, InitialState: initial})
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	plain, err := Open(other, Options{AgentID: otherID, InitialState: initial})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	got, err := conv.Get()
	if err != nil || got.Status != "idle" || got.LastReply != "" || !got.At.IsZero() {
		t.Fatalf("Get before any write: %+v, %v", got, err)
	}
	st, err := conv.Set(Patch{}.Set("status", "processing").Set("lastReply", "hi"))
	if err != nil || st.Status != "processing" || st.LastReply != "hi" {
		t.Fatalf("Set: %+v, %v", st, err)
	}
	if _, err := plain.SetState(map[string]any{"status": "processing", "lastReply": "hi"}); err != nil {
		t.Fatal(err)
	}
	next := convState{Status: "idle", LastReply: "bye", At: convAt}
	if st, err = conv.Replace(next); err != nil || st.Status != next.Status || !st.At.Equal(convAt) {
		t.Fatalf("Replace: %+v, %v", st, err)
	}
	if _, err := plain.ReplaceState(next); err != nil {
		t.Fatal(err)
	}
	st, version, err := conv.GetVersioned()
	if err != nil || version != 2 || st.LastReply != "bye" {
		t.Fatalf("GetVersioned: %+v at %d, %v", st, version, err)
	}
	_, _, err = conv.SetIf(1, Patch{}.Set("status", "stale"))
	wantStatus(t, err, ErrConflict, "Typed.SetIf")
	if st, version, err = conv.SetIf(2, convPatch{Status: "processing"}); err != nil || version != 3 || st.LastReply != "bye" {
		t.Fatalf("SetIf: %+v at %d, %v", st, version, err)
	}
	if _, err := plain.SetState(convPatch{Status: "processing"}); err != nil {
		t.Fatal(err)
	}
	if _, version, err = conv.ReplaceIf(3, next); err != nil || version != 4 {
		t.Fatalf("ReplaceIf: %d, %v", version, err)
	}
	if _, err := plain.ReplaceState(next); err != nil {
		t.Fatal(err)
	}
	typedJSON, err := conv.Agent().GetStateJSON()
	if err != nil {
		t.Fatal(err)
	}
	plainJSON, err := plain.GetStateJSON()
	if err != nil || string(typedJSON) != string(plainJSON) {
		t.Fatalf("typed agent stored %s, the Agent %s (%v)", typedJSON, plainJSON, err)
	}

	// A state that does not fit T is an ErrCodec error naming the typed call.
	if _, err := conv.Agent().SetStateJSON([]byte(`{"status":5}`)); err != nil {
		t.Fatal(err)
	}
	_, err = conv.Get()
	wantStatus(t, err, ErrCodec, "Typed.Get", "cannot decode number 5 into Go value of type string", "(at .status)")
	_, err = conv.Set(Patch{}.Set("c", make(chan int)))
	wantStatus(t, err, ErrCodec, "Typed.Set", "unsupported type: chan int")
}

// Update writes what fn changed and nothing else, as one compare-and-set patch; members T does
// not know survive; on a conflict it reads again and calls fn again; fn's error writes nothing;
// no change, no write.
func TestTypedUpdateWritesOnlyWhatFnChanged(t *testing.T) {
	path, id := storeLocation(t)
	conv, err := OpenTyped[convState](path, Options{AgentID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	if _, err := conv.Agent().ReplaceStateJSON([]byte(`{"status":"idle","lastReply":"hello","extra":{"keep":1},"job":{"id":"j1","step":2,"note":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	var patches []string
	if _, err := conv.Agent().OnStateChanged(func(_, _, patch json.RawMessage) error {
		patches = append(patches, string(patch))
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	st, err := conv.Update(func(s *convState) error {
		s.Status = "processing"
		s.At = convAt
		s.Job.Step = 3
		return nil
	})
	if err != nil || st.Status != "processing" || st.LastReply != "hello" || st.Job.Step != 3 {
		t.Fatalf("Update: %+v, %v", st, err)
	}
	if len(patches) != 1 || patches[0] != `{"status":"processing","at":{"$date":"2026-11-30T03:06:44.123Z"},"job":{"step":3}}` {
		t.Fatalf("patches %q", patches)
	}
	raw, _ := conv.Agent().GetStateJSON()
	jsonEqual(t, raw, []byte(`{"status":"processing","lastReply":"hello","extra":{"keep":1},"job":{"id":"j1","step":3,"note":"x"},"at":{"$date":"2026-11-30T03:06:44.123Z"}}`))

	// A field fn clears that omitempty leaves out is deleted.
	if _, err := conv.Update(func(s *convState) error { s.Job = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	if patches[1] != `{"job":null}` {
		t.Fatalf("patch %s", patches[1])
	}

	// Another writer between Update's read and its write: Update retries on the new state.
	writer, err := Open(path, Options{AgentID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	calls := 0
	st, err = conv.Update(func(s *convState) error {
		calls++
		if calls == 1 {
			if _, err := writer.SetState(map[string]any{"lastReply": "from another writer"}); err != nil {
				return err
			}
		}
		s.Status = "idle"
		return nil
	})
	if err != nil || calls != 2 || st.Status != "idle" || st.LastReply != "from another writer" {
		t.Fatalf("Update over a concurrent write: %+v after %d calls, %v", st, calls, err)
	}

	// fn's error is returned as it is, nothing written; a change to nothing writes nothing.
	_, before, _ := conv.GetVersioned()
	errNo := errors.New("not now")
	if _, err := conv.Update(func(s *convState) error { s.Status = "x"; return errNo }); err != errNo {
		t.Fatalf("Update's error: %v", err)
	}
	if st, err := conv.Update(func(s *convState) error { s.Status = "idle"; return nil }); err != nil || st.Status != "idle" {
		t.Fatalf("Update with no change: %+v, %v", st, err)
	}
	if _, after, _ := conv.GetVersioned(); after != before {
		t.Fatalf("version %d after writing nothing, was %d", after, before)
	}
	_, err = conv.Update(nil)
	wantStatus(t, err, ErrInvalidArgument, "Typed.Update")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = conv.UpdateContext(ctx, func(*convState) error { return nil })
	wantStatus(t, err, ErrCancelled)
}

// Typed hooks receive next and prev as T; a state that does not decode makes the change's
// call fail with ErrHook wrapping the ErrCodec error (the change is committed, as for any
// hook failure).
func TestTypedOnStateChanged(t *testing.T) {
	a := openAgent(t, "", Options{InitialState: convState{Status: "idle"}})
	conv := NewTyped[convState](a)
	type seen struct{ next, prev convState }
	var got []seen
	id, err := conv.OnStateChanged(func(next, prev convState) error {
		got = append(got, seen{next, prev})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conv.Set(Patch{}.Set("status", "processing").Set("at", convAt)); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].prev.Status != "idle" || got[0].next.Status != "processing" || !got[0].next.At.Equal(convAt) {
		t.Fatalf("deliveries %+v", got)
	}
	_, err = a.SetStateJSON([]byte(`{"at":"not a date at all"}`))
	e := wantStatus(t, err, ErrHook, "SetStateJSON", "typed hook: cannot decode next: cannot decode")
	if !errors.Is(e.Err, ErrCodec) || strings.Count(err.Error(), "agentstate: ") != 1 {
		t.Fatalf("hook error %q: cause %v, want one matching ErrCodec, the call named once", err, e.Err)
	}
	if err := conv.RemoveHook(id); err != nil {
		t.Fatal(err)
	}
	_, err = conv.OnStateChanged(nil)
	wantStatus(t, err, ErrInvalidArgument, "Typed.OnStateChanged")
}
