package agentstate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// KeepFor prunes by age (the newest change is always kept).
func TestChangeLogKeepFor(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps")
	}
	a := openAgent(t, tempDB(t), Options{ChangeLog: &ChangeLog{KeepFor: 500 * time.Millisecond}}) // 1s
	started := time.Now()
	for n := 1; n <= 3; n++ {
		a.SetState(map[string]any{"n": n})
	}
	// All within the second, unless a loaded machine stalled between the writes (then the
	// oldest may already be hidden, and these two checks would say nothing about the library).
	within := time.Since(started) < 900*time.Millisecond
	if changes, err := a.ChangesSince(0); within && (err != nil || len(changes) != 3) {
		t.Fatalf("ChangesSince(0) = %v, %v", changes, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if changes, err := a.ChangesSince(0); within && (err != nil || len(changes) != 3) {
		t.Fatalf("pruned before the next write: %v, %v", changes, err)
	}
	a.SetState(map[string]any{"n": 4})
	_, err := a.ChangesSince(0)
	wantStatus(t, err, ErrGap, "ChangesSince")
	if changes, err := a.ChangesSince(3); err != nil || len(changes) != 1 || changes[0].Version != 4 {
		t.Fatalf("ChangesSince(3) = %v, %v", changes, err)
	}
}

func TestChangesSinceStateAtAndRestore(t *testing.T) {
	a := openAgent(t, tempDB(t), Options{ChangeLog: &ChangeLog{KeepLast: 3}, InitialState: map[string]any{"n": 0}})
	before := time.Now().Add(-time.Second)
	for n := 1; n <= 5; n++ {
		if _, err := a.SetState(map[string]any{"n": n}); err != nil {
			t.Fatal(err)
		}
	}
	after := time.Now().Add(time.Second)
	// Versions 3, 4 and 5 are retained.
	changes, err := a.ChangesSince(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || changes[0].Version != 4 || string(changes[0].Patch) != `{"n":4}` ||
		string(changes[1].Next) != `{"n":5}` || changes[1].Version != 5 {
		t.Fatalf("ChangesSince(3) = %+v", changes)
	}
	for _, c := range changes {
		if c.At.Before(before) || c.At.After(after) {
			t.Fatalf("change %d at %v, not between %v and %v", c.Version, c.At, before, after)
		}
	}
	if changes, err := a.ChangesSince(5); err != nil || changes == nil || len(changes) != 0 {
		t.Fatalf("ChangesSince(current) = %#v, %v", changes, err)
	}
	raw, err := a.ChangesSinceJSON(4)
	if err != nil || !strings.HasPrefix(string(raw), `[{"version":5,"at":`) || !strings.HasSuffix(string(raw), `"patch":{"n":5},"next":{"n":5}}]`) {
		t.Fatalf("ChangesSinceJSON = %s, %v", raw, err)
	}
	_, err = a.ChangesSince(1)
	wantStatus(t, err, ErrGap, "ChangesSince", "after version 1")
	if changes, err := a.ChangesSince(2); err != nil || len(changes) != 3 || changes[0].Version != 3 {
		t.Fatalf("ChangesSince(2) = %+v, %v", changes, err)
	}
	_, err = a.ChangesSince(9)
	wantStatus(t, err, ErrInvalidArgument, "ChangesSince", "in the future")

	for v, want := range map[uint64]string{0: `{"n":0}`, 3: `{"n":3}`, 5: `{"n":5}`} {
		if raw, err := a.StateAtJSON(v); err != nil || string(raw) != want {
			t.Fatalf("StateAtJSON(%d) = %s, %v; want %s", v, raw, err, want)
		}
	}
	if st, err := a.StateAt(4); err != nil || st["n"] != json.Number("4") {
		t.Fatalf("StateAt(4) = %v, %v", st, err)
	}
	_, err = a.StateAt(2)
	wantStatus(t, err, ErrGap, "StateAt")
	_, err = a.StateAtJSON(6)
	wantStatus(t, err, ErrInvalidArgument, "StateAtJSON", "in the future")

	var rec recorder
	a.OnChange(rec.hook)
	st, v, err := a.Restore(3)
	if err != nil || v != 6 || st["n"] != json.Number("3") {
		t.Fatalf("Restore(3) = %v, %d, %v", st, v, err)
	}
	if got := text(rec.changes()); got != "6 {\"n\":5} -> {\"n\":3} (-)\n" {
		t.Fatalf("the restore was delivered as %s", got)
	}
	last, _ := a.ChangesSince(5)
	if len(last) != 1 || last[0].Patch != nil || string(last[0].Next) != `{"n":3}` {
		t.Fatalf("the restore was logged as %+v", last)
	}
	raw, v, err = a.RestoreJSON(0)
	if err != nil || v != 7 || string(raw) != `{"n":0}` {
		t.Fatalf("RestoreJSON(0) = %s, %d, %v", raw, v, err)
	}
}

func TestChangeLogOffAndOptions(t *testing.T) {
	// Never switched on: Poll and ChangesSince say so; StateAt still knows the current
	// version and 0.
	a := openAgent(t, tempDB(t), Options{})
	a.SetState(map[string]any{"n": 1})
	a.SetState(map[string]any{"n": 2})
	n, err := a.Poll()
	wantStatus(t, err, ErrInvalidArgument, "Poll", "change log is off")
	if n != 0 {
		t.Fatal(n)
	}
	_, err = a.ChangesSince(0)
	wantStatus(t, err, ErrInvalidArgument, "ChangesSince", "change log is off")
	if raw, err := a.StateAtJSON(2); err != nil || string(raw) != `{"n":2}` {
		t.Fatalf("StateAtJSON(current) = %s, %v", raw, err)
	}
	if raw, err := a.StateAtJSON(0); err != nil || string(raw) != `{}` {
		t.Fatalf("StateAtJSON(0) = %s, %v", raw, err)
	}
	_, err = a.StateAt(1)
	wantStatus(t, err, ErrGap, "StateAt")

	// Switched on by one Agent, off by another on the same agent: the setting belongs to the
	// agent (TestChangeLogIsPerAgent: not to the store).
	path := tempDB(t)
	on := openAgent(t, path, Options{ChangeLog: &ChangeLog{KeepLast: 10, KeepFor: time.Hour}})
	on.SetState(map[string]any{"n": 1})
	if changes, err := on.ChangesSince(0); err != nil || len(changes) != 1 {
		t.Fatalf("ChangesSince = %v, %v", changes, err)
	}
	openAgent(t, path, Options{ChangeLog: &ChangeLog{Off: true}})
	_, err = on.ChangesSince(0)
	wantStatus(t, err, ErrInvalidArgument, "change log is off")
	_, err = on.Poll()
	wantStatus(t, err, ErrInvalidArgument, "Poll")

	// Bad settings.
	for _, c := range []*ChangeLog{{}, {KeepLast: -1}, {KeepFor: -time.Second}, {KeepFor: -time.Millisecond}} {
		_, err = openStore(t, ":memory:", Options{ChangeLog: c})
		wantStatus(t, err, ErrInvalidArgument, "Open", "change_log")
	}
	_, err = openStore(t, ":memory:", Options{ChangeLog: &ChangeLog{Off: true, KeepLast: 3}})
	wantStatus(t, err, ErrInvalidArgument, "Open", "Off together with")
}

func TestChangeLogOptionJSON(t *testing.T) {
	for _, c := range []struct {
		log  *ChangeLog
		want string
	}{
		{nil, `{}`},
		{&ChangeLog{Off: true}, `{"change_log":false}`},
		{&ChangeLog{KeepLast: 5}, `{"change_log":{"keep_last":5}}`},
		{&ChangeLog{KeepFor: 90 * time.Second}, `{"change_log":{"keep_seconds":90}}`},
		{&ChangeLog{KeepFor: 1500 * time.Millisecond}, `{"change_log":{"keep_seconds":2}}`},
		{&ChangeLog{KeepFor: time.Nanosecond}, `{"change_log":{"keep_seconds":1}}`},
		{&ChangeLog{KeepLast: 1, KeepFor: time.Hour}, `{"change_log":{"keep_last":1,"keep_seconds":3600}}`},
	} {
		got, err := Options{ChangeLog: c.log}.optionsJSON()
		if err != nil || got != c.want {
			t.Errorf("%+v: %s, %v; want %s", c.log, got, err, c.want)
		}
	}
}

// OnChange registrations are released like OnStateChanged ones.
func TestOnChangeRegistration(t *testing.T) {
	base := liveHookCount()
	a, err := openStore(t, ":memory:", Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.OnChange(nil)
	wantStatus(t, err, ErrInvalidArgument, "OnChange", "nil")
	failure := errors.New("hook failed")
	id, err := a.OnChange(func(c Change) error {
		if c.Version == 2 {
			return failure
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a.SetState(map[string]any{"x": 1})
	_, err = a.SetState(map[string]any{"x": 2})
	wantStatus(t, err, ErrHook, "SetState")
	if !errors.Is(err, failure) {
		t.Fatal(err)
	}
	if err := a.RemoveHook(id); err != nil {
		t.Fatal(err)
	}
	a.OnChange(func(Change) error { return nil })
	a.Close()
	if n := liveHookCount() - base; n != 0 {
		t.Fatalf("%d hook handles alive after Close", n)
	}
	_, err = a.OnChange(func(Change) error { return nil })
	wantStatus(t, err, ErrBadHandle, "OnChange")
	if n := liveHookCount() - base; n != 0 {
		t.Fatalf("%d hook handles alive after a failed OnChange", n)
	}
	for _, call := range []func() error{
		func() error { _, err := a.Poll(); return err },
		func() error { _, err := a.ChangesSince(0); return err },
		func() error { _, err := a.StateAt(0); return err },
		func() error { _, _, err := a.Restore(0); return err },
		func() error { _, _, err := a.SetStateIf(0, map[string]any{}); return err },
	} {
		wantStatus(t, call(), ErrBadHandle)
	}
}

// The change log is a setting of the agent, recorded with it in the store: another Agent on the
// same agent logs without asking, while switching one agent's log on leaves the store's other
// agents (another AgentID, a SQLite file's single agent) without one.
func TestChangeLogIsPerAgent(t *testing.T) {
	path, id := storeLocation(t)
	if id == "" {
		id = "logged"
	}
	open := func(id string, log *ChangeLog) *Agent {
		a, err := Open(path, Options{AgentID: id, ChangeLog: log})
		if err != nil {
			t.Fatalf("Open(agent %q): %v", id, err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	logged := open(id, &ChangeLog{KeepLast: 10})
	sameAgent := open(id, nil)
	otherID := id + "/other"
	other := open(otherID, nil)
	for i, a := range []*Agent{logged, sameAgent, other} {
		if _, err := a.SetState(map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	if changes, err := logged.ChangesSince(0); err != nil || len(changes) != 2 {
		t.Fatalf("the logged agent: %d changes, %v; want its 2 writes", len(changes), err)
	}
	_, err := other.ChangesSince(0)
	wantStatus(t, err, ErrInvalidArgument, "change log is off")
	_, err = other.Poll()
	wantStatus(t, err, ErrInvalidArgument, "change log is off")
	if !onPostgres(t) {
		single := open("", nil)
		_, err = single.Poll()
		wantStatus(t, err, ErrInvalidArgument, "change log is off")
	}
}
