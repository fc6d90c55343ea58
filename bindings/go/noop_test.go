package agentstate

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// A write whose result is the stored state, byte for byte, commits nothing: no new version, no
// hook, no change-log entry; it returns the stored state, and compare-and-set still checks the
// version first. On both backends.
func TestAWriteThatChangesNothingCommitsNothing(t *testing.T) {
	a := openAgent(t, tempDB(t), Options{ChangeLog: &ChangeLog{KeepLast: 100}})
	calls := 0
	if _, err := a.OnStateChanged(func(next, prev, patch json.RawMessage) error {
		calls++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, v, err := a.SetStateIf(0, map[string]any{"status": "idle", "at": 0}); err != nil || v != 1 {
		t.Fatalf("first write: version %d, %v", v, err)
	}
	for _, patch := range []any{
		map[string]any{},
		map[string]any{"status": "idle"},
		map[string]any{"at": 0, "gone": nil},
		Patch{}.Set("status", "idle"),
	} {
		state, v, err := a.SetStateIf(1, patch)
		if err != nil || v != 1 {
			t.Fatalf("%v: version %d, %v", patch, v, err)
		}
		if state["status"] != "idle" {
			t.Fatalf("%v: state %v", patch, state)
		}
		if _, err := a.SetState(patch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.ReplaceState(map[string]any{"status": "idle", "at": 0}); err != nil {
		t.Fatal(err)
	}
	_, _, err := a.SetStateIf(0, map[string]any{})
	wantStatus(t, err, ErrConflict)
	if _, v, err := a.GetStateVersioned(); err != nil || v != 1 {
		t.Fatalf("version %d, %v: a write that changed nothing committed", v, err)
	}
	if calls != 1 {
		t.Fatalf("%d hook calls, want 1 (the first write)", calls)
	}
	changes, err := a.ChangesSince(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 {
		t.Fatalf("%d logged changes, want 1", len(changes))
	}
	if _, v, err := a.SetStateIf(1, map[string]any{"status": "busy"}); err != nil || v != 2 || calls != 2 {
		t.Fatalf("a real change: version %d, %d calls, %v", v, calls, err)
	}
}

// The store remembers the cap it was given (StoreMaxValueBytes): an Agent opened later with
// the defaults writes a state over the default cap, and an Agent's own smaller cap refuses,
// saying which cap and how to raise it. SQLite only: the cap is store-wide, and this suite's
// PostgreSQL agents share one database (the core's PostgreSQL tests use one of their own).
func TestTheStoreRemembersItsCap(t *testing.T) {
	if onPostgres(t) {
		t.Skip("a store's cap is store-wide; the suite's PostgreSQL agents share one database")
	}
	path := filepath.Join(t.TempDir(), "cap.db")
	recorder := openAgent(t, path, Options{StoreMaxValueBytes: 4_000_000})
	if err := recorder.Close(); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("z", 3_000_000)
	later := openAgent(t, path, Options{})
	if _, err := later.ReplaceState(map[string]any{"s": big}); err != nil {
		t.Fatalf("the store's cap was not used: %v", err)
	}
	own := openAgent(t, path, Options{MaxValueBytes: 1_000_000})
	_, err := own.SetState(map[string]any{"t": 1})
	wantStatus(t, err, ErrTooLarge, "this handle's max_value_bytes (1000000)", "store_max_value_bytes")
	_, err = Open(path, Options{ReadOnly: true, StoreMaxValueBytes: 100})
	wantStatus(t, err, ErrInvalidArgument, "store_max_value_bytes")
}
