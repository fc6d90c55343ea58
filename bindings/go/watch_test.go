package agentstate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// watchWait bounds how long a test waits for an event it expects (a loaded machine, a server
// far away): generous, since a passing test never waits it out.
const watchWait = 30 * time.Second

// watchStore is a store to watch on this run's backend, existing already (watching never
// creates one), and a prefix no other test or process uses for its agent ids.
func watchStore(t *testing.T) (location, prefix string) {
	t.Helper()
	prefix = newAgentID() + "/"
	if onPostgres(t) {
		return testPGURI, prefix
	}
	location = filepath.Join(t.TempDir(), "watched.db")
	seed, err := Open(location, Options{AgentID: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	seed.Close()
	return location, prefix
}

// openWatched opens the agent id of the store at location (closed at the test's end), with
// the change log on unless opts says otherwise (the watcher reads each change from it; with
// it off, a change comes as a WatchResync).
func openWatched(t *testing.T, location, id string, opts Options) *Agent {
	t.Helper()
	opts.AgentID = id
	if opts.ChangeLog == nil {
		opts.ChangeLog = &ChangeLog{KeepLast: 100}
	}
	a, err := Open(location, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func startWatch(t *testing.T, location string, opts WatchOptions) *Watcher {
	t.Helper()
	w, err := Watch(context.Background(), location, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// receive takes n events from w, failing the test if they do not come.
func receive(t *testing.T, w *Watcher, n int) []WatchEvent {
	t.Helper()
	var got []WatchEvent
	timeout := time.After(watchWait)
	for len(got) < n {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("the events ended after %d of %d (Err %v): %+v", len(got), n, w.Err(), got)
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("%d of %d events came within %v: %+v", len(got), n, watchWait, got)
		}
	}
	return got
}

// byAgent groups events by agent, in the order they came.
func byAgent(events []WatchEvent) map[string][]WatchEvent {
	out := map[string][]WatchEvent{}
	for _, ev := range events {
		out[ev.AgentID] = append(out[ev.AgentID], ev)
	}
	return out
}

// Another process's commits come on the channel, per agent in commit order, each once, with
// their kinds, versions and patches; a deletion comes as one "deleted" event.
func TestWatchSeesAnotherProcessesChanges(t *testing.T) {
	if os.Getenv("AGENTSTATE_WATCH_CHILD") != "" {
		t.Skip("child")
	}
	location, prefix := watchStore(t)
	a, b := prefix+"a", prefix+"b"
	w := startWatch(t, location, WatchOptions{IDs: []string{a, b}})
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchChildWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AGENTSTATE_WATCH_CHILD="+location, "AGENTSTATE_WATCH_PREFIX="+prefix)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got := byAgent(receive(t, w, 4))
	// The deletion once the changes before it came: a deletion erases the agent's change log,
	// so a watcher that had not read a change yet when the agent was deleted skips to the
	// deletion (the copy it keeps is right all the same).
	if _, _, err := DeleteAgent(location, Options{}, a); err != nil {
		t.Fatal(err)
	}
	got[a] = append(got[a], receive(t, w, 1)...)
	evA, evB := got[a], got[b]
	if len(evA) != 4 || len(evB) != 1 {
		t.Fatalf("events of a %+v, of b %+v", evA, evB)
	}
	wantA := []struct {
		version uint64
		kind    WatchKind
	}{{1, WatchMerge}, {2, WatchJSONPatch}, {3, WatchMerge}, {0, WatchDeleted}}
	for i, want := range wantA {
		if evA[i].Version != want.version || evA[i].Kind != want.kind {
			t.Fatalf("a's event %d is %s v%d, want %s v%d", i, evA[i].Kind, evA[i].Version, want.kind, want.version)
		}
	}
	jsonEqual(t, evA[0].Patch, []byte(`{"n":1}`))
	jsonEqual(t, evA[0].State, []byte(`{"n":1}`)) // an agent's first change carries its state
	jsonEqual(t, evA[1].Patch, []byte(`[{"op":"add","path":"/m","value":2}]`))
	jsonEqual(t, evA[2].Patch, []byte(`{"n":3}`))
	if evA[1].State != nil || evA[3].State != nil || evA[3].Patch != nil {
		t.Fatalf("states where none is promised: %+v", evA)
	}
	if evA[0].At.IsZero() || time.Since(evA[0].At) > time.Hour {
		t.Fatalf("a's first change was committed at %v", evA[0].At)
	}
	if evB[0].Kind != WatchReplace || evB[0].Version != 1 || evB[0].Patch != nil {
		t.Fatalf("b's event %+v", evB[0])
	}
	jsonEqual(t, evB[0].State, []byte(`{"r":true}`))
}

// TestWatchChildWriter is the child process of TestWatchSeesAnotherProcessesChanges.
func TestWatchChildWriter(t *testing.T) {
	location := os.Getenv("AGENTSTATE_WATCH_CHILD")
	if location == "" {
		t.Skip("only run as a child process")
	}
	prefix := os.Getenv("AGENTSTATE_WATCH_PREFIX")
	a := openWatched(t, location, prefix+"a", Options{})
	b := openWatched(t, location, prefix+"b", Options{})
	steps := []func() error{
		func() error { _, err := a.SetState(map[string]any{"n": 1}); return err },
		func() error {
			_, err := a.PatchState([]map[string]any{{"op": "add", "path": "/m", "value": 2}})
			return err
		},
		func() error { _, err := b.ReplaceState(map[string]any{"r": true}); return err },
		func() error { _, err := a.SetState(map[string]any{"n": 3}); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

// A prefix watch follows the agents created after it began, and no agent outside the prefix.
func TestWatchPrefixFollowsNewAgents(t *testing.T) {
	location, prefix := watchStore(t)
	w := startWatch(t, location, WatchOptions{Prefix: prefix + "in/", States: true})
	outside := openWatched(t, location, prefix+"out", Options{})
	if _, err := outside.SetState(map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		a := openWatched(t, location, prefix+"in/"+string(rune('a'+i)), Options{})
		for v := 1; v <= 2; v++ {
			if _, err := a.SetState(map[string]any{"v": v}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := byAgent(receive(t, w, 6))
	if len(got) != 3 {
		t.Fatalf("events of %d agents, want 3: %+v", len(got), got)
	}
	for id, evs := range got {
		if !strings.HasPrefix(id, prefix+"in/") {
			t.Fatalf("an event of %q, outside the prefix", id)
		}
		if len(evs) != 2 || evs[0].Version != 1 || evs[1].Version != 2 {
			t.Fatalf("%s: %+v", id, evs)
		}
		jsonEqual(t, evs[1].State, []byte(`{"v":2}`)) // States: every event has the state
	}
}

// Since resumes after a version, catching up from the change log; an agent not in Since starts
// at its version when the watch began.
func TestWatchSinceCatchesUp(t *testing.T) {
	location, prefix := watchStore(t)
	logged := openWatched(t, location, prefix+"logged", Options{})
	other := openWatched(t, location, prefix+"other", Options{})
	for i := 1; i <= 3; i++ {
		if _, err := logged.SetState(map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
		if _, err := other.SetState(map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	w := startWatch(t, location, WatchOptions{IDs: []string{prefix + "logged", prefix + "other"},
		Since: map[string]uint64{prefix + "logged": 1}})
	caught := receive(t, w, 2)
	for i, ev := range caught {
		if ev.AgentID != prefix+"logged" || ev.Version != uint64(i+2) || ev.Kind != WatchMerge {
			t.Fatalf("catching up, event %d: %+v", i, ev)
		}
	}
	jsonEqual(t, caught[1].Patch, []byte(`{"i":3}`))
	if _, err := other.SetState(map[string]any{"i": 4}); err != nil {
		t.Fatal(err)
	}
	next := receive(t, w, 1)[0]
	if next.AgentID != prefix+"other" || next.Version != 4 {
		t.Fatalf("after catching up: %+v", next)
	}
}

// PollInterval: on PostgreSQL one store-wide versions query per interval instead of LISTEN
// (for a transaction pooler); a SQLite file ignores it. Either way the changes come.
func TestWatchPollingDeliversToo(t *testing.T) {
	location, prefix := watchStore(t)
	w := startWatch(t, location, WatchOptions{Prefix: prefix, PollInterval: 20 * time.Millisecond})
	a := openWatched(t, location, prefix+"p", Options{})
	for i := 1; i <= 3; i++ {
		if _, err := a.SetState(map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	for i, ev := range receive(t, w, 3) {
		if ev.Version != uint64(i+1) || ev.Kind != WatchMerge {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
}

// Add follows an agent from now or from a version; Remove stops following it.
func TestWatchAddAndRemove(t *testing.T) {
	location, prefix := watchStore(t)
	w := startWatch(t, location, WatchOptions{IDs: []string{}})
	a := openWatched(t, location, prefix+"a", Options{})
	if _, err := a.SetState(map[string]any{"i": 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(prefix+"a", 0); err != nil {
		t.Fatal(err)
	}
	if ev := receive(t, w, 1)[0]; ev.AgentID != prefix+"a" || ev.Version != 1 {
		t.Fatalf("after Add from 0: %+v", ev)
	}
	if err := w.Remove(prefix + "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetState(map[string]any{"i": 2}); err != nil {
		t.Fatal(err)
	}
	b := openWatched(t, location, prefix+"b", Options{})
	if err := w.Add(prefix+"b", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetState(map[string]any{"i": 1}); err != nil {
		t.Fatal(err)
	}
	if ev := receive(t, w, 1)[0]; ev.AgentID != prefix+"b" {
		t.Fatalf("after Remove of a, an event of %+v", ev)
	}
	if err := (&Watcher{}).Remove("x\x00"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Remove of an id with a NUL: %v", err)
	}
}

// Close wakes a receiver waiting on the channel, which then ends; cancelling the context does
// too, and Err says so.
func TestWatchCloseAndCancelEndTheEvents(t *testing.T) {
	location, prefix := watchStore(t)
	w := startWatch(t, location, WatchOptions{Prefix: prefix})
	ended := make(chan int)
	go func() {
		n := 0
		for range w.Events() {
			n++
		}
		ended <- n
	}()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(watchWait):
		t.Fatal("Close did not end a receiver's range")
	}
	if err := w.Err(); err != nil {
		t.Fatalf("Err after Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if err := w.Add(prefix+"x", -1); !errors.Is(err, ErrBadHandle) {
		t.Fatalf("Add after Close: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	w2, err := Watch(ctx, location, WatchOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	cancel()
	select {
	case _, ok := <-w2.Events():
		if ok {
			t.Fatal("an event after the cancel, none was written")
		}
	case <-time.After(watchWait):
		t.Fatal("cancelling the context did not end the events")
	}
	if !errors.Is(w2.Err(), context.Canceled) {
		t.Fatalf("Err after the cancel: %v", w2.Err())
	}
	if _, err := Watch(ctx, location, WatchOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch with a done context: %v", err)
	}
}

// Bad arguments are refused with specific errors, before anything is watched.
func TestWatchRefusesBadArguments(t *testing.T) {
	location, prefix := watchStore(t)
	cases := []struct {
		name string
		opts WatchOptions
		want error
	}{
		{"ids and prefix", WatchOptions{IDs: []string{"a"}, Prefix: "p"}, ErrInvalidArgument},
		{"an id with a NUL", WatchOptions{IDs: []string{"a\x00b"}}, ErrInvalidArgument},
		{"an id of invalid UTF-8", WatchOptions{IDs: []string{"\xff"}}, ErrInvalidArgument},
		{"an id too long", WatchOptions{IDs: []string{strings.Repeat("x", 256)}}, ErrInvalidArgument},
		{"a negative MaxPending", WatchOptions{MaxPending: -1}, ErrInvalidArgument},
		{"a negative PollInterval", WatchOptions{PollInterval: -time.Second}, ErrInvalidArgument},
	}
	for _, c := range cases {
		w, err := Watch(context.Background(), location, c.opts)
		if !errors.Is(err, c.want) {
			if w != nil {
				w.Close()
			}
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	w := startWatch(t, location, WatchOptions{Prefix: prefix})
	if err := w.Add(prefix+"a", -1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Add to a prefix watch: %v", err)
	}
	if onPostgres(t) {
		return
	}
	if _, err := Watch(context.Background(), ":memory:", WatchOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("watching :memory:: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "missing.db")
	if _, err := Watch(context.Background(), missing, WatchOptions{}); !errors.Is(err, ErrStorage) {
		t.Errorf("watching a missing file: %v", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("watching a missing file created it: %v", err)
	}
}

// An Agent opened with Watch: true hands its hooks the changes another process commits, in
// commit order, each once, without Poll (on a library worker thread); without the change log
// the option is refused.
func TestWatchOptionPushesAnotherProcessesChangesToHooks(t *testing.T) {
	if os.Getenv("AGENTSTATE_WATCH_CHILD") != "" {
		t.Skip("child")
	}
	location, prefix := watchStore(t)
	a := openWatched(t, location, prefix+"a", Options{Watch: true})
	seen := make(chan json.RawMessage, 16)
	if _, err := a.OnStateChanged(func(next, prev, patch json.RawMessage) error {
		seen <- append(json.RawMessage(nil), next...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchChildWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AGENTSTATE_WATCH_CHILD="+location, "AGENTSTATE_WATCH_PREFIX="+prefix)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := []string{`{"n":1}`, `{"n":1,"m":2}`, `{"n":3,"m":2}`}
	timeout := time.After(watchWait)
	for i, w := range want {
		select {
		case next := <-seen:
			jsonEqual(t, next, []byte(w))
		case <-timeout:
			t.Fatalf("the hook saw %d of %d changes within %v", i, len(want), watchWait)
		}
	}
	// Nothing twice: the process wrote three changes of this agent.
	select {
	case next := <-seen:
		t.Fatalf("a fourth delivery: %s", next)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := Open(location, Options{AgentID: prefix + "c", ChangeLog: &ChangeLog{Off: true}, Watch: true}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Watch without the change log: %v", err)
	}
}
