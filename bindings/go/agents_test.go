package agentstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// A store's agents (agents.go): ListAgents, DeleteAgent(If), ExpireAgents and their Context
// forms, on both backends. On PostgreSQL the store is the server's, shared with every other
// test and process: each test uses ids under a prefix of its own (newAgentID) and lists with
// that prefix; expiry ages its agents to January 1970, before anything else a test writes.

// agentsStore is a store for a test of a store's agents and the id prefix its agents use: a
// fresh SQLite file, or the server with a fresh prefix.
func agentsStore(t *testing.T) (path, prefix string) {
	t.Helper()
	path, id := storeLocation(t)
	if id == "" {
		return path, "t/"
	}
	prefix = id + "/"
	t.Cleanup(func() { // the server outlives the test: leave none of its agents behind
		for {
			page, err := ListAgents(path, Options{}, ListQuery{Prefix: prefix})
			if err != nil || len(page) == 0 {
				return
			}
			for _, info := range page {
				if _, _, err := DeleteAgent(path, Options{}, info.ID); err != nil {
					t.Errorf("cleaning up %q: %v", info.ID, err)
					return
				}
			}
		}
	})
	return path, prefix
}

// openID opens the agent id of the store at path and closes it when the test ends.
func openID(t *testing.T, path, id string, opts Options) *Agent {
	t.Helper()
	opts.AgentID = id
	a, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%q, agent %q): %v", path, id, err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

func mustSet(t *testing.T, a *Agent, patch string) {
	t.Helper()
	if _, err := a.SetStateJSON([]byte(patch)); err != nil {
		t.Fatalf("SetStateJSON(%s): %v", patch, err)
	}
}

func mustList(t *testing.T, path string, q ListQuery) []AgentInfo {
	t.Helper()
	page, err := ListAgents(path, Options{}, q)
	if err != nil {
		t.Fatalf("ListAgents(%+v): %v", q, err)
	}
	return page
}

func ids(infos []AgentInfo, prefix string) []string {
	out := []string{}
	for _, info := range infos {
		out = append(out, strings.TrimPrefix(info.ID, prefix))
	}
	return out
}

func wantIDs(t *testing.T, what string, got []AgentInfo, prefix string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if g := ids(got, prefix); !reflect.DeepEqual(g, want) {
		t.Fatalf("%s: ids %q, want %q", what, g, want)
	}
}

// versionOf is the agent's state and version, read through a.
func versionOf(t *testing.T, a *Agent) (string, uint64) {
	t.Helper()
	st, v, err := a.GetStateVersionedJSON()
	if err != nil {
		t.Fatalf("GetStateVersionedJSON: %v", err)
	}
	return string(st), v
}

// Listing: ordered by id (bytes of the UTF-8), paged with After/Next, filtered by Prefix;
// each entry's version, size and time of the last write; agents never written not listed.
func TestListAgentsOrderPagingAndPrefix(t *testing.T) {
	path, p := agentsStore(t)
	names := []string{"b", "a", "c/2", "é", "c/1"}
	versions := map[string]uint64{}
	before := time.Now()
	for _, name := range names {
		h := openID(t, path, p+name, Options{})
		mustSet(t, h, `{"name":"`+name+`"}`)
		_, versions[p+name] = versionOf(t, h)
	}
	a := openID(t, path, p+"a", Options{})
	mustSet(t, a, `{"more":"a longer state than the others"}`)
	_, versions[p+"a"] = versionOf(t, a)
	openID(t, path, p+"never", Options{}) // opened, never written: not listed
	after := time.Now()

	all := mustList(t, path, ListQuery{Prefix: p})
	wantIDs(t, "all", all, p, "a", "b", "c/1", "c/2", "é")
	for _, info := range all {
		// 1 for a first write (an agent never deleted), a's 2.
		if want := map[bool]uint64{false: 1, true: 2}[info.ID == p+"a"]; info.Version != versions[info.ID] || info.Version != want {
			t.Errorf("%q: version %d, want %d", info.ID, info.Version, versions[info.ID])
		}
		if info.Bytes == 0 {
			t.Errorf("%q: 0 bytes", info.ID)
		}
		if info.WrittenAt.Before(before.Add(-time.Second)) || info.WrittenAt.After(after.Add(time.Second)) {
			t.Errorf("%q: written at %v, not between %v and %v", info.ID, info.WrittenAt, before, after)
		}
	}
	if all[0].Bytes <= all[1].Bytes {
		t.Errorf("a's larger state is %d bytes, b's %d", all[0].Bytes, all[1].Bytes)
	}

	// Pages of 2 through Next, and by hand with After.
	q := ListQuery{Prefix: p, Limit: 2}
	var pages [][]string
	for more := true; more; {
		page, err := ListAgentsContext(context.Background(), path, Options{}, q)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, ids(page, p))
		q, more = q.Next(page)
	}
	if want := [][]string{{"a", "b"}, {"c/1", "c/2"}, {"é"}}; !reflect.DeepEqual(pages, want) {
		t.Fatalf("pages %q, want %q", pages, want)
	}
	wantIDs(t, "after b", mustList(t, path, ListQuery{Prefix: p, After: p + "b"}), p, "c/1", "c/2", "é")
	wantIDs(t, "after c/2, limit 1", mustList(t, path, ListQuery{Prefix: p, After: p + "c/2", Limit: 1}), p, "é")
	wantIDs(t, "prefix c/", mustList(t, path, ListQuery{Prefix: p + "c/"}), p, "c/1", "c/2")
	wantIDs(t, "prefix none", mustList(t, path, ListQuery{Prefix: p + "zzz"}), p)
	wantIDs(t, "after é", mustList(t, path, ListQuery{Prefix: p, After: p + "é"}), p)
	if _, more := (ListQuery{Limit: 3}).Next(nil); more {
		t.Fatal("Next after an empty page says there is more")
	}

	// Bad arguments: found in Go or by the library, ErrInvalidArgument either way.
	for _, bad := range []ListQuery{{Limit: -1}, {Limit: MaxListLimit + 1}, {Prefix: "a\x00"}, {After: "\xff"}, {Prefix: strings.Repeat("x", 256)}} {
		_, err := ListAgents(path, Options{}, bad)
		if e := wantStatus(t, err, ErrInvalidArgument); e.Op != "ListAgents" {
			t.Fatalf("%+v: Op %q", bad, e.Op)
		}
	}
	if page, err := ListAgents(path, Options{}, ListQuery{Prefix: p, Limit: MaxListLimit}); err != nil || len(page) != 5 {
		t.Fatalf("Limit MaxListLimit: %d agents, %v", len(page), err)
	}
	_, err := ListAgents(path+"\x00", Options{}, ListQuery{})
	wantStatus(t, err, ErrInvalidArgument, "NUL")
}

// A SQLite file's single agent (opened without AgentID) is listed with the id "", first, and
// Next pages past it even one agent at a time; listing a file that is not there creates none.
func TestListAgentsSingleAgentOfAFileAndNoStore(t *testing.T) {
	skipOnPostgres(t, "a file's single agent, and a missing file")
	path := tempDB(t)
	single, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	mustSet(t, single, `{"single":true}`)
	mustSet(t, openID(t, path, "x", Options{}), `{"x":1}`)
	mustSet(t, openID(t, path, "y", Options{}), `{"y":1}`)

	wantIDs(t, "all", mustList(t, path, ListQuery{}), "", "", "x", "y")
	q := ListQuery{Limit: 1}
	var seen []string
	for more := true; more && len(seen) < 10; {
		page := mustList(t, path, q)
		seen = append(seen, ids(page, "")...)
		q, more = q.Next(page)
	}
	if want := []string{"", "x", "y"}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("one at a time: %q, want %q", seen, want)
	}
	if v, existed, err := DeleteAgent(path, Options{}, ""); err != nil || !existed || v != 1 {
		t.Fatalf("DeleteAgent(\"\") = %d, %v, %v", v, existed, err)
	}
	if st, v := versionOf(t, single); st != "{}" || v != 0 {
		t.Fatalf("the single agent after its deletion: %s at %d", st, v)
	}
	wantIDs(t, "after deleting \"\"", mustList(t, path, ListQuery{}), "", "x", "y")

	missing := filepath.Join(t.TempDir(), "none.db")
	_, err = ListAgents(missing, Options{}, ListQuery{})
	wantStatus(t, err, ErrStorage)
	_, _, err = DeleteAgent(missing, Options{}, "x")
	wantStatus(t, err, ErrStorage)
	_, err = ExpireAgents(missing, Options{}, time.Hour, 0, true)
	wantStatus(t, err, ErrStorage)
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the missing store was created: %v", err)
	}
}

// Deleting an agent: DeleteAgentIf checks the version; open handles then read their initial
// state at version 0; their hooks get the deletion as one change, by Poll or ahead of the next
// write; versions never go back, so a compare-and-set against a version read before the
// deletion fails, also after the agent has been written again.
func TestDeleteAgentSemantics(t *testing.T) {
	path, p := agentsStore(t)
	id := p + "victim"
	a := openID(t, path, id, Options{ChangeLog: &ChangeLog{KeepLast: 100}, InitialState: map[string]any{"init": true}})
	b := openID(t, path, id, Options{InitialState: map[string]any{"mine": 1}})
	other := openID(t, path, p+"other", Options{})
	mustSet(t, other, `{"other":1}`)
	mustSet(t, a, `{"n":1}`)
	_, first := versionOf(t, a)
	mustSet(t, a, `{"n":2}`)
	mustSet(t, a, `{"n":3}`)
	_, last := versionOf(t, a)
	if first != 1 || last != 3 {
		t.Fatalf("versions %d then %d after two writes", first, last)
	}
	if _, err := b.Poll(); err != nil { // b has seen a's writes
		t.Fatal(err)
	}
	var aRec, bRec recorder
	a.OnChange(aRec.hook)
	b.OnChange(bRec.hook)

	_, _, err := DeleteAgentIf(path, Options{}, id, last-1)
	if e := wantStatus(t, err, ErrConflict); e.Op != "DeleteAgentIf" {
		t.Fatalf("Op %q", e.Op)
	}
	if st, v := versionOf(t, b); st != `{"init":true,"n":3}` || v != last {
		t.Fatalf("after a failed DeleteAgentIf: %s at %d", st, v)
	}
	deleted, existed, err := DeleteAgentIf(path, Options{}, id, last)
	if err != nil || !existed || deleted != last {
		t.Fatalf("DeleteAgentIf(%d) = %d, %v, %v", last, deleted, existed, err)
	}
	wantIDs(t, "after the deletion", mustList(t, path, ListQuery{Prefix: p}), p, "other")
	if st, v := versionOf(t, a); st != `{"init":true}` || v != 0 {
		t.Fatalf("a reads %s at %d, want its initial state at 0", st, v)
	}
	if st, v := versionOf(t, b); st != `{"mine":1}` || v != 0 {
		t.Fatalf("b reads %s at %d, want its initial state at 0", st, v)
	}
	if st, v := versionOf(t, other); st != `{"other":1}` || v == 0 {
		t.Fatalf("another agent: %s at %d", st, v)
	}

	// b's hook, by Poll: one change from the last state it saw to its initial state.
	if n, err := b.Poll(); n != 1 || err != nil {
		t.Fatalf("b.Poll = %d, %v; want the deletion", n, err)
	}
	if got, want := text(bRec.changes()), "0 {\"init\":true,\"n\":3} -> {\"mine\":1} (-)\n"; got != want {
		t.Fatalf("b's hook saw\n%swant\n%s", got, want)
	}
	if n, err := b.Poll(); n != 0 || err != nil {
		t.Fatalf("second b.Poll = %d, %v", n, err)
	}

	// Versions never go back: a compare-and-set against the last version fails before and
	// after a rewrite, as does one against any earlier version.
	_, _, err = a.SetStateIf(last, map[string]any{"stale": 1})
	wantStatus(t, err, ErrConflict)
	_, v, err := a.SetStateIf(0, map[string]any{"again": 1}) // 0: nothing stored
	// The version after the one it was deleted at.
	if err != nil || v != last+1 {
		t.Fatalf("the first write after the deletion: version %d, %v; want %d", v, err, last+1)
	}
	// a's hook got the deletion ahead of its write, from its initial state on.
	want := fmt.Sprintf("0 {\"init\":true,\"n\":3} -> {\"init\":true} (-)\n%d {\"init\":true} -> {\"init\":true,\"again\":1} ({\"again\":1})\n", v)
	if got := text(aRec.changes()); got != want {
		t.Fatalf("a's hook saw\n%swant\n%s", got, want)
	}
	for old := first; old <= last; old++ {
		_, _, err = a.SetStateIf(old, map[string]any{"stale": old})
		wantStatus(t, err, ErrConflict)
	}
	mustSet(t, b, `{"b":1}`)
	for old := first; old <= last; old++ {
		_, _, err = b.ReplaceStateIf(old, map[string]any{"stale": old})
		wantStatus(t, err, ErrConflict)
	}
	if st, cur := versionOf(t, a); st != `{"init":true,"again":1,"b":1}` || cur != v+1 {
		t.Fatalf("after the new incarnation's writes: %s at %d (want %d)", st, cur, v+1)
	}
	if _, _, err := DeleteAgentIf(path, Options{}, id, v); !errors.Is(err, ErrConflict) {
		t.Fatalf("DeleteAgentIf(%d) at %d: %v", v, v+1, err)
	}
	if deleted, existed, err := DeleteAgentContext(context.Background(), path, Options{}, id); err != nil || !existed || deleted != v+1 {
		t.Fatalf("DeleteAgentContext = %d, %v, %v", deleted, existed, err)
	}

	// Nothing stored: not an error; DeleteAgentIf(0) matches it, any other version conflicts.
	for _, del := range []func() (uint64, bool, error){
		func() (uint64, bool, error) { return DeleteAgent(path, Options{}, id) },
		func() (uint64, bool, error) { return DeleteAgent(path, Options{}, p+"never-written") },
		func() (uint64, bool, error) { return DeleteAgentIf(path, Options{}, p+"never-written", 0) },
		func() (uint64, bool, error) {
			return DeleteAgentIfContext(context.Background(), path, Options{}, id, 0)
		},
	} {
		if deleted, existed, err := del(); err != nil || existed || deleted != 0 {
			t.Fatalf("deleting nothing = %d, %v, %v", deleted, existed, err)
		}
	}
	_, _, err = DeleteAgentIf(path, Options{}, p+"never-written", 1)
	wantStatus(t, err, ErrConflict)
	_, _, err = DeleteAgent(path, Options{}, "a\x00b")
	wantStatus(t, err, ErrInvalidArgument, "NUL")
	_, _, err = DeleteAgent(path, Options{}, strings.Repeat("x", 256))
	wantStatus(t, err, ErrInvalidArgument)
	_, _, err = DeleteAgentIf(path, Options{}, id, 1<<63)
	wantStatus(t, err, ErrInvalidArgument)
	_, _, err = DeleteAgent(path, Options{ReadOnly: true}, p+"other")
	wantStatus(t, err, ErrStorage)
	if st, v := versionOf(t, other); st != `{"other":1}` || v == 0 {
		t.Fatalf("a read-only delete deleted: %s at %d", st, v)
	}
}

// On SQLite, no byte of a deleted state or of its history is left in the file or its WAL.
func TestDeleteAgentErasesTheStateAndItsHistoryFromTheFile(t *testing.T) {
	skipOnPostgres(t, "the bytes of the database file")
	path := tempDB(t)
	const inState, inHistory = "marker-in-state-1f2e3d", "marker-in-history-4c5b6a"
	a := openID(t, path, "victim", Options{ChangeLog: &ChangeLog{KeepLast: 100}})
	mustSet(t, openID(t, path, "bystander", Options{}), `{"keep":"me"}`)
	mustSet(t, a, `{"h":"`+inHistory+`"}`)
	mustSet(t, a, `{"h":null,"s":"`+inState+`"}`)
	found := func(marker string) []string {
		var in []string
		for _, f := range []string{path, path + "-wal"} {
			data, err := os.ReadFile(f)
			if err == nil && bytes.Contains(data, []byte(marker)) {
				in = append(in, filepath.Base(f))
			}
		}
		return in
	}
	if found(inState) == nil || found(inHistory) == nil {
		t.Fatal("the markers are not in the files before the deletion: the test would prove nothing")
	}
	if _, existed, err := DeleteAgent(path, Options{}, "victim"); err != nil || !existed {
		t.Fatalf("DeleteAgent = %v, %v", existed, err)
	}
	if in := found(inState); in != nil {
		t.Errorf("the deleted state is still in %v", in)
	}
	if in := found(inHistory); in != nil {
		t.Errorf("the deleted history is still in %v", in)
	}
	if st, v := versionOf(t, a); st != "{}" || v != 0 {
		t.Fatalf("after the erasure: %s at %d", st, v)
	}
}

// ageAgents makes the agents of the store at path look last written at the given times
// (ms since the epoch), as a store would after that long: written_ms and its minute,
// written_grain, set by SQL, with the sqlite3 shell or psql (skipped without them).
func ageAgents(t *testing.T, path string, written map[string]int64) {
	t.Helper()
	var script strings.Builder
	for id, ms := range written {
		grain := ms - ms%60000
		quoted := strings.ReplaceAll(id, "'", "''")
		if onPostgres(t) {
			fmt.Fprintf(&script, "WITH u AS (UPDATE agent_state SET written_ms = %d, written_grain = %d WHERE agent = '%s' RETURNING 1) SELECT count(*) FROM u;\n", ms, grain, quoted)
		} else {
			fmt.Fprintf(&script, "UPDATE agent_state SET written_ms = %d, written_grain = %d WHERE agent = '%s'; SELECT changes();\n", ms, grain, quoted)
		}
	}
	var cmd *exec.Cmd
	if onPostgres(t) {
		psql, err := exec.LookPath("psql")
		if err != nil {
			t.Skip("PostgreSQL: aging agents needs a SQL client, and there is no psql on PATH")
		}
		uri := os.Getenv("AGENT_STATE_TEST_PG_SERVER_URI") // the server itself, behind a pooler
		if uri == "" {
			uri = testPGURI
		}
		cmd = exec.Command(psql, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-d", uri, "-f", "-")
	} else {
		sqlite, err := exec.LookPath("sqlite3")
		if err != nil {
			t.Skip("SQLite: aging agents needs the sqlite3 shell (the module vendors no SQLite driver), and there is none on PATH")
		}
		cmd = exec.Command(sqlite, "-bail", "-cmd", ".timeout 30000", path)
	}
	cmd.Stdin = strings.NewReader(script.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("aging agents with %s: %v\n%s", cmd.Path, err, out)
	}
	if got, want := strings.Fields(string(out)), strings.Fields(strings.Repeat("1 ", len(written))); !reflect.DeepEqual(got, want) {
		t.Fatalf("aging agents with %s: %q, want one row each", cmd.Path, out)
	}
}

// Expiry: the agents idle for longer than the duration go, the longest idle first, at most
// limit a call; a dry run lists the same and deletes nothing; a recent agent stays.
func TestExpireAgentsLongestIdleFirstInBatchesAndDryRun(t *testing.T) {
	path, p := agentsStore(t)
	handles := map[string]*Agent{}
	for _, name := range []string{"old2", "old0", "fresh", "old1"} {
		handles[name] = openID(t, path, p+name, Options{InitialState: map[string]any{"gone": true}})
		mustSet(t, handles[name], `{"name":"`+name+`"}`)
	}
	_, err := ExpireAgents(path, Options{}, -time.Second, 0, true)
	wantStatus(t, err, ErrInvalidArgument)
	_, err = ExpireAgents(path, Options{}, time.Hour, MaxListLimit+1, true)
	wantStatus(t, err, ErrInvalidArgument)
	if !onPostgres(t) { // a private file (on the server, other tests' agents would go)
		time.Sleep(5 * time.Millisecond) // each written more than 0 ms ago
		all, err := ExpireAgents(path, Options{}, 0, 0, true)
		if err != nil || len(all) != 4 {
			t.Fatalf("dry run with idle 0: %v, %v", all, err)
		}
		if gone, err := ExpireAgents(path, Options{}, 24*time.Hour, 0, false); err != nil || len(gone) != 0 {
			t.Fatalf("nothing is a day idle: %v, %v", gone, err)
		}
		wantIDs(t, "before aging", mustList(t, path, ListQuery{Prefix: p}), p, "fresh", "old0", "old1", "old2")
	}

	// Aged to January 1970, a minute apart, old0 the longest idle; everything else in the
	// store (other tests' agents, on PostgreSQL) was written later than cutoff.
	base := int64(10 * 86_400_000)
	written := map[string]int64{p + "old0": base, p + "old1": base + 60_000, p + "old2": base + 120_000}
	ageAgents(t, path, written)
	idle := time.Since(time.UnixMilli(base + 240_000))

	dry, err := ExpireAgentsContext(context.Background(), path, Options{}, idle, 2, true)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "dry run", dry, p, "old0", "old1")
	for _, info := range dry {
		if !info.WrittenAt.Equal(time.UnixMilli(written[info.ID])) || info.Version == 0 || info.Bytes == 0 {
			t.Fatalf("dry run entry %+v, written at %v", info, time.UnixMilli(written[info.ID]))
		}
	}
	wantIDs(t, "after the dry run", mustList(t, path, ListQuery{Prefix: p}), p, "fresh", "old0", "old1", "old2")

	gone, err := ExpireAgents(path, Options{}, idle, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "first batch", gone, p, "old0", "old1")
	if !reflect.DeepEqual(gone, dry) {
		t.Fatalf("expired %+v, the dry run said %+v", gone, dry)
	}
	wantIDs(t, "after the first batch", mustList(t, path, ListQuery{Prefix: p}), p, "fresh", "old2")
	if st, v := versionOf(t, handles["old0"]); st != `{"gone":true}` || v != 0 {
		t.Fatalf("an expired agent reads %s at %d", st, v)
	}
	gone, err = ExpireAgents(path, Options{}, idle, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "second batch", gone, p, "old2")
	gone, err = ExpireAgents(path, Options{}, idle, 2, false)
	if err != nil || len(gone) != 0 {
		t.Fatalf("third batch: %v, %v", gone, err)
	}
	wantIDs(t, "at the end", mustList(t, path, ListQuery{Prefix: p}), p, "fresh")
	if st, v := versionOf(t, handles["fresh"]); st != `{"gone":true,"name":"fresh"}` || v == 0 {
		t.Fatalf("the recent agent: %s at %d", st, v)
	}
}

// The Context forms: a context already done returns ErrCancelled (matching ctx.Err()) without
// calling the library, nothing deleted; a deletion waiting for a lock another Agent's write
// holds is ended by the context's deadline, and deletes nothing.
func TestStoreAgentsContextForms(t *testing.T) {
	path, p := agentsStore(t)
	a := openID(t, path, p+"a", Options{})
	mustSet(t, a, `{"a":1}`)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ListAgentsContext(done, path, Options{}, ListQuery{Prefix: p})
	wantCancelled(t, err, "ListAgentsContext", context.Canceled)
	_, _, err = DeleteAgentContext(done, path, Options{}, p+"a")
	wantCancelled(t, err, "DeleteAgentContext", context.Canceled)
	_, _, err = DeleteAgentIfContext(done, path, Options{}, p+"a", 1)
	wantCancelled(t, err, "DeleteAgentIfContext", context.Canceled)
	_, err = ExpireAgentsContext(done, path, Options{}, 0, 0, false)
	wantCancelled(t, err, "ExpireAgentsContext", context.Canceled)
	var nilCtx context.Context
	_, err = ListAgentsContext(nilCtx, path, Options{}, ListQuery{})
	wantStatus(t, err, ErrInvalidArgument, "context")
	wantIDs(t, "after the cancelled calls", mustList(t, path, ListQuery{Prefix: p}), p, "a")

	// A deletion waiting for the lock held by a write in progress (holdLock: the file's write
	// lock on SQLite, the agent's row on PostgreSQL).
	lockPath := tempDB(t)
	holder := openAgent(t, lockPath, Options{})
	mustSet(t, holder, `{"n":1}`)
	store, id := lockPath, ""
	if onPostgres(t) {
		store, id = testPGURI, agentIDForPath(lockPath)
	}
	release := holdLock(t, lockPath)
	ctx, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	start := time.Now()
	_, _, err = DeleteAgentContext(ctx, store, Options{BusyTimeout: 30 * time.Second}, id)
	elapsed := time.Since(start)
	wantCancelled(t, err, "DeleteAgentContext", context.DeadlineExceeded)
	if elapsed < 150*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("the cancelled deletion took %v (deadline 300 ms)", elapsed)
	}
	if err := release(); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	st, v := versionOf(t, holder)
	if st != `{"n":1,"holder":1}` || v == 0 {
		t.Fatalf("after the cancelled deletion: %s at %d", st, v)
	}
	ctx3, cancel3 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel3()
	if deleted, existed, err := DeleteAgentIfContext(ctx3, store, Options{}, id, v); err != nil || !existed || deleted != v {
		t.Fatalf("DeleteAgentIfContext once the lock is free = %d, %v, %v", deleted, existed, err)
	}
}

// Deletions racing compare-and-set writers (goroutines, one Agent each): no error but
// ErrConflict, and no version is ever acknowledged twice, however many incarnations the agent
// goes through (versions never go back).
func TestDeleteAgentRacingWriters(t *testing.T) {
	path, p := agentsStore(t)
	id := p + "raced"
	const writers, writes, deletions = 4, 40, 15
	var mu sync.Mutex
	seen := map[uint64]string{}
	record := func(v uint64, who string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := seen[v]; ok {
			t.Errorf("version %d acknowledged twice: to %s and to %s", v, prev, who)
		}
		seen[v] = who
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for w := 0; w < writers; w++ {
		a := openID(t, path, id, Options{BusyTimeout: 30 * time.Second})
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < writes; {
				_, v, err := a.GetStateVersioned()
				if err != nil {
					errs <- err
					return
				}
				_, next, err := a.SetStateIf(v, map[string]any{"w": w, "i": i})
				if errors.Is(err, ErrConflict) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				record(next, fmt.Sprintf("writer %d", w))
				i++
			}
		}(w)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < deletions; i++ {
			if _, _, err := DeleteAgent(path, Options{BusyTimeout: 30 * time.Second}, id); err != nil {
				errs <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != writers*writes {
		t.Fatalf("%d versions acknowledged, want %d", len(seen), writers*writes)
	}
}

// ExpireAgents with limit 0 takes the project's one default batch, 1,000 (the command's
// --batch, Python's expire_agents): 150 idle agents go in one call, not the 100 of a page.
func TestExpireAgentsDefaultBatchIsAThousand(t *testing.T) {
	if DefaultExpireLimit != 1000 {
		t.Fatalf("DefaultExpireLimit = %d, want 1000", DefaultExpireLimit)
	}
	path, p := agentsStore(t)
	const n = 150
	written := map[string]int64{}
	base := int64(10 * 86_400_000) // January 1970: before anything else in the store
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%sidle%03d", p, i)
		a := openID(t, path, id, Options{Synchronous: SyncNormal})
		mustSet(t, a, `{"n":1}`)
		written[id] = base + int64(i)*60_000
	}
	ageAgents(t, path, written)
	idle := time.Since(time.UnixMilli(base + n*60_000))
	for _, dryRun := range []bool{true, false} {
		gone, err := ExpireAgents(path, Options{}, idle, 0, dryRun)
		if err != nil {
			t.Fatal(err)
		}
		if len(gone) != n || gone[0].ID != p+"idle000" || gone[n-1].ID != fmt.Sprintf("%sidle%03d", p, n-1) {
			t.Fatalf("dry run %v: %d agents expired with limit 0, want all %d idle ones in one batch", dryRun, len(gone), n)
		}
	}
	if left := mustList(t, path, ListQuery{Prefix: p}); len(left) != 0 {
		t.Fatalf("%d agents left after the expiry", len(left))
	}
}
