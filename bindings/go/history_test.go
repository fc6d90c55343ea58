package agentstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// logged is Options with the change log on, keeping the last keepLast changes.
func logged(keepLast int) Options {
	return Options{Synchronous: SyncNormal, ChangeLog: &ChangeLog{KeepLast: keepLast}}
}

// recorder records every Change delivered to an OnChange hook.
type recorder struct {
	mu   sync.Mutex
	seen []Change
}

func (r *recorder) hook(c Change) error {
	r.mu.Lock()
	r.seen = append(r.seen, c)
	r.mu.Unlock()
	return nil
}

func (r *recorder) changes() []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Change(nil), r.seen...)
}

// text renders deliveries as "version prev -> next (patch)" lines, patch "-" when nil.
func text(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		patch := "-"
		if c.Patch != nil {
			patch = string(c.Patch)
		}
		fmt.Fprintf(&b, "%d %s -> %s (%s)\n", c.Version, c.Prev, c.Next, patch)
	}
	return b.String()
}

func TestVersionsIncreaseAndPersist(t *testing.T) {
	path := tempDB(t)
	a, err := openStore(t, path, Options{InitialState: map[string]any{"n": 0}})
	if err != nil {
		t.Fatal(err)
	}
	st, v, err := a.GetStateVersioned()
	if err != nil || v != 0 || !reflect.DeepEqual(st, map[string]any{"n": json.Number("0")}) {
		t.Fatalf("fresh store: %v, %d, %v", st, v, err)
	}
	var rec recorder
	if _, err := a.OnChange(rec.hook); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetState(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if raw, v, err := a.ReplaceStateIfJSON(1, []byte(`{"m":2}`)); err != nil || v != 2 || string(raw) != `{"m":2}` {
		t.Fatalf("ReplaceStateIfJSON = %s, %d, %v", raw, v, err)
	}
	if st, v, err := a.SetStateIf(2, map[string]any{"m": 3}); err != nil || v != 3 || st["m"] != json.Number("3") {
		t.Fatalf("SetStateIf = %v, %d, %v", st, v, err)
	}
	want := "1 {\"n\":0} -> {\"n\":1} ({\"n\":1})\n" +
		"2 {\"n\":1} -> {\"m\":2} (-)\n" +
		"3 {\"m\":2} -> {\"m\":3} ({\"m\":3})\n"
	if got := text(rec.changes()); got != want {
		t.Fatalf("deliveries\n%swant\n%s", got, want)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// The version is stored with the state.
	b := openAgent(t, path, Options{})
	var s struct{ M int }
	if v, err := b.GetStateVersionedInto(&s); err != nil || v != 3 || s.M != 3 {
		t.Fatalf("after reopen: %+v, %d, %v", s, v, err)
	}
	if raw, v, err := b.GetStateVersionedJSON(); err != nil || v != 3 || string(raw) != `{"m":3}` {
		t.Fatalf("GetStateVersionedJSON = %s, %d, %v", raw, v, err)
	}
	// Another handle's writes move it too, and reads see that at once.
	c := openAgent(t, path, Options{})
	if _, err := c.SetState(map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	if _, v, _ := b.GetStateVersioned(); v != 4 {
		t.Fatalf("version %d after another handle's write, want 4", v)
	}
	_, err = b.GetStateVersionedInto(s)
	wantStatus(t, err, ErrInvalidArgument, "GetStateVersionedInto", "non-nil pointer")
	var closed Agent
	_, _, err = closed.GetStateVersioned()
	wantStatus(t, err, ErrBadHandle, "GetStateVersioned", "agent_get_state_versioned")
}

func TestCompareAndSetConflictLeavesStateUnchanged(t *testing.T) {
	a := openAgent(t, tempDB(t), Options{})
	var rec recorder
	a.OnChange(rec.hook)
	st, v, err := a.SetStateIf(5, map[string]any{"x": 1})
	wantStatus(t, err, ErrConflict, "SetStateIf", "agent_set_state_if", "expected version 5", "version 0")
	if st != nil || v != 0 {
		t.Fatalf("a conflict returned %v, %d", st, v)
	}
	if _, v, err = a.SetStateIf(0, map[string]any{"x": 1}); err != nil || v != 1 {
		t.Fatalf("SetStateIf(0) = %d, %v", v, err)
	}
	// Every form, at a stale version: nothing is written, no hook runs.
	_, _, err = a.ReplaceStateIf(0, map[string]any{"y": 1})
	wantStatus(t, err, ErrConflict, "ReplaceStateIf", "agent_replace_state_if")
	_, _, err = a.SetStateIfJSON(0, []byte(`{"y":1}`))
	wantStatus(t, err, ErrConflict, "SetStateIfJSON")
	raw, v, err := a.ReplaceStateIfJSON(2, []byte(`{"y":1}`))
	wantStatus(t, err, ErrConflict, "ReplaceStateIfJSON")
	if raw != nil || v != 0 {
		t.Fatalf("a conflict returned %s, %d", raw, v)
	}
	raw, v, err = a.GetStateVersionedJSON()
	if err != nil || v != 1 || string(raw) != `{"x":1}` {
		t.Fatalf("after conflicts: %s, %d, %v", raw, v, err)
	}
	if n := len(rec.changes()); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
	// Input errors come before the comparison, and Go-side ones before any call into C.
	_, _, err = a.SetStateIf(1, map[string]any{"c": make(chan int)})
	wantStatus(t, err, ErrCodec, "SetStateIf")
	_, _, err = a.SetStateIfJSON(1, []byte(`{"a":`))
	wantStatus(t, err, ErrJSON, "SetStateIfJSON")
	_, _, err = a.ReplaceStateIf(1, []int{1})
	wantStatus(t, err, ErrInvalidArgument, "ReplaceStateIf", "JSON object")
}

// casIncrement runs one read-modify-write of the counter: true if it committed, false on a
// conflict. With pause, it waits a little between the read and the write, which widens the
// window for other writers (and so the conflicts).
func casIncrement(a *Agent, pause bool) (bool, error) {
	var s struct{ Count int }
	v, err := a.GetStateVersionedInto(&s)
	if err != nil {
		return false, err
	}
	if pause {
		time.Sleep(200 * time.Microsecond)
	}
	_, _, err = a.SetStateIf(v, map[string]any{"Count": s.Count + 1})
	if errors.Is(err, ErrConflict) {
		return false, nil
	}
	return err == nil, err
}

// checkCounter checks that the counter and the version both equal the number of successful
// compare-and-set calls.
func checkCounter(t *testing.T, path string, successes int64) {
	t.Helper()
	a := openAgent(t, path, Options{})
	var s struct{ Count int64 }
	v, err := a.GetStateVersionedInto(&s)
	if err != nil {
		t.Fatal(err)
	}
	if s.Count != successes || v != uint64(successes) {
		t.Fatalf("count %d at version %d after %d successful SetStateIf calls", s.Count, v, successes)
	}
}

// Read-modify-write with SetStateIf from goroutines that each have their own Agent on one
// file: no increment is lost and none is applied twice.
func TestCompareAndSetCounterAcrossAgents(t *testing.T) {
	path := tempDB(t)
	const workers, attempts = 6, 50
	var successes, conflicts int64
	var wg, opened sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		opened.Add(1)
		go func() {
			defer wg.Done()
			a, err := openStore(t, path, Options{Synchronous: SyncNormal})
			opened.Done()
			if err != nil {
				errs <- err
				return
			}
			defer a.Close()
			<-start
			for i := 0; i < attempts; i++ {
				ok, err := casIncrement(a, i%2 == 0)
				if err != nil {
					errs <- err
					return
				}
				if ok {
					atomic.AddInt64(&successes, 1)
				} else {
					atomic.AddInt64(&conflicts, 1)
				}
			}
		}()
	}
	opened.Wait()
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if successes+conflicts != workers*attempts || successes == 0 {
		t.Fatalf("%d successes + %d conflicts, want %d attempts", successes, conflicts, workers*attempts)
	}
	t.Logf("%d successes, %d conflicts", successes, conflicts)
	checkCounter(t, path, successes)
}

// The same with child processes (this test binary, re-executed): each reports its successes.
func TestCompareAndSetCounterAcrossProcesses(t *testing.T) {
	if os.Getenv("AGENTSTATE_CAS_DB") != "" {
		t.Skip("child")
	}
	path := tempDB(t)
	const children = 4
	// This process watches with Poll: it must receive every child's change once, in order.
	watcher := openAgent(t, path, logged(100000))
	var rec recorder
	watcher.OnChange(rec.hook)
	stopPolling := make(chan struct{})
	polled := make(chan error, 1)
	go func() {
		for {
			if _, err := watcher.Poll(); err != nil {
				polled <- err
				return
			}
			select {
			case <-stopPolling:
				polled <- nil
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	// The children open the store, then wait for this file, so that they run at once.
	startFile := filepath.Join(filepath.Dir(path), "start")
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for i := 0; i < children; i++ {
		report := filepath.Join(filepath.Dir(path), fmt.Sprintf("child%d.txt", i))
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildCompareAndSetCounter$", "-test.count=1")
		cmd.Env = append(os.Environ(), "AGENTSTATE_CAS_DB="+path, "AGENTSTATE_CAS_REPORT="+report,
			"AGENTSTATE_CAS_START="+startFile)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	// Give the children time to start (they also start on their own after a while).
	time.Sleep(300 * time.Millisecond)
	if err := os.WriteFile(startFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var successes, attempts int64
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		report, err := os.ReadFile(filepath.Join(filepath.Dir(path), fmt.Sprintf("child%d.txt", i)))
		if err != nil {
			t.Fatalf("child %d wrote no report: %v\n%s", i, err, outs[i])
		}
		var ok, conflicts int64
		if _, err := fmt.Sscanf(string(report), "%d %d", &ok, &conflicts); err != nil {
			t.Fatalf("child %d report %q: %v", i, report, err)
		}
		successes += ok
		attempts += ok + conflicts
	}
	if attempts != children*childAttempts || successes == 0 {
		t.Fatalf("%d successes in %d attempts, want %d attempts", successes, attempts, children*childAttempts)
	}
	t.Logf("%d successes in %d attempts", successes, attempts)
	checkCounter(t, path, successes)
	close(stopPolling)
	if err := <-polled; err != nil {
		t.Fatal(err)
	}
	if _, err := watcher.Poll(); err != nil {
		t.Fatal(err)
	}
	seen := rec.changes()
	if int64(len(seen)) != successes {
		t.Fatalf("Poll delivered %d changes, want %d", len(seen), successes)
	}
	for i, c := range seen {
		var next struct{ Count int }
		if err := Unmarshal(c.Next, &next); err != nil {
			t.Fatal(err)
		}
		if c.Version != uint64(i+1) || next.Count != i+1 || (i > 0 && string(c.Prev) != string(seen[i-1].Next)) {
			t.Fatalf("delivery %d: version %d, count %d: out of order", i, c.Version, next.Count)
		}
	}
}

const childAttempts = 60

// TestChildCompareAndSetCounter is a child process of TestCompareAndSetCounterAcrossProcesses.
func TestChildCompareAndSetCounter(t *testing.T) {
	path := os.Getenv("AGENTSTATE_CAS_DB")
	if path == "" {
		t.Skip("only run as a child process")
	}
	a, err := openStore(t, path, Options{Synchronous: SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := os.Stat(os.Getenv("AGENTSTATE_CAS_START")); err == nil {
			break
		}
	}
	var ok, conflicts int
	for i := 0; i < childAttempts; i++ {
		committed, err := casIncrement(a, i%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		if committed {
			ok++
		} else {
			conflicts++
		}
	}
	if err := os.WriteFile(os.Getenv("AGENTSTATE_CAS_REPORT"), []byte(fmt.Sprintf("%d %d", ok, conflicts)), 0o600); err != nil {
		t.Fatal(err)
	}
}

var errNegative = errors.New("balance must not be negative")

func TestValidatorRejectsAndAccepts(t *testing.T) {
	path := tempDB(t)
	a := openAgent(t, path, logged(100))
	var rec recorder
	a.OnChange(rec.hook)
	var gated []Change
	if err := a.SetValidator(func(c Change) error {
		gated = append(gated, c)
		var next struct{ Balance int }
		if err := Unmarshal(c.Next, &next); err != nil {
			return err
		}
		if next.Balance < 0 {
			return fmt.Errorf("balance would be %d at version %d: %w", next.Balance, c.Version, errNegative)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetState(map[string]any{"balance": 10}); err != nil {
		t.Fatal(err)
	}
	st, err := a.SetState(map[string]any{"balance": -5})
	e := wantStatus(t, err, ErrRejected, "SetState", "agent_set_state", "balance would be -5 at version 2")
	if st != nil || !errors.Is(err, errNegative) || e.Err == nil {
		t.Fatalf("st %v, err %#v: does not wrap the validator's error", st, err)
	}
	if strings.Count(err.Error(), "balance would be") != 1 {
		t.Fatalf("the reason is repeated: %q", err)
	}
	// The validator saw the change as it would commit.
	if len(gated) != 2 || string(gated[1].Prev) != `{"balance":10}` || string(gated[1].Next) != `{"balance":-5}` ||
		string(gated[1].Patch) != `{"balance":-5}` || gated[1].Version != 2 {
		t.Fatalf("the validator saw %s", text(gated))
	}
	// Every kind of write is gated.
	_, _, err = a.SetStateIf(1, map[string]any{"balance": -1})
	wantStatus(t, err, ErrRejected, "SetStateIf", "balance would be -1")
	_, err = a.ReplaceStateJSON([]byte(`{"balance":-2}`))
	wantStatus(t, err, ErrRejected, "ReplaceStateJSON", "balance would be -2")
	if gated[len(gated)-1].Patch != nil {
		t.Fatal("a replacement was shown to the validator with a patch")
	}
	// A panic rejects the change too.
	a.SetValidator(func(c Change) error { panic("validator exploded") })
	_, err = a.SetState(map[string]any{"balance": 20})
	e = wantStatus(t, err, ErrRejected, "SetState", "validator panicked: validator exploded")
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "validator exploded" || !strings.Contains(string(pe.Stack), "history_test.go") {
		t.Fatalf("panic error %#v", e.Err)
	}
	a.SetValidator(func(c Change) error { panic(errNegative) })
	_, err = a.SetState(map[string]any{"balance": 20})
	if !errors.Is(err, ErrRejected) || !errors.Is(err, errNegative) {
		t.Fatalf("panic(err): %v", err)
	}
	// An error with no text still rejects, with a reason.
	a.SetValidator(func(c Change) error { return errors.New("") })
	_, err = a.SetState(map[string]any{"balance": 20})
	wantStatus(t, err, ErrRejected, "empty message")

	// Nothing of it was written or delivered.
	raw, v, _ := a.GetStateVersionedJSON()
	if string(raw) != `{"balance":10}` || v != 1 {
		t.Fatalf("state %s at version %d after rejections", raw, v)
	}
	if n := len(rec.changes()); n != 1 {
		t.Fatalf("%d deliveries, want 1: rejected changes were delivered", n)
	}
	if changes, _ := a.ChangesSince(0); len(changes) != 1 {
		t.Fatalf("the log holds %d changes, want 1", len(changes))
	}
	// Other Agents are not gated by it.
	b := openAgent(t, path, Options{})
	if _, err := b.SetState(map[string]any{"balance": -7}); err != nil {
		t.Fatal(err)
	}
	// Removed, it gates nothing.
	if err := a.SetValidator(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetState(map[string]any{"balance": -8}); err != nil {
		t.Fatal(err)
	}
	if n := pendingHookErrorCount(); n != 0 {
		t.Fatalf("%d hook error records left behind", n)
	}
}

func TestValidatorGatesRestoreAndCallsIntoItsAgentAreBusy(t *testing.T) {
	a := openAgent(t, "", logged(10))
	other := openAgent(t, "", Options{InitialState: map[string]any{"other": true}})
	for i := 1; i <= 3; i++ {
		if _, err := a.SetState(map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	var inner, otherErr error
	var otherState json.RawMessage
	a.SetValidator(func(c Change) error {
		_, inner = a.GetStateJSON()
		otherState, otherErr = other.GetStateJSON()
		if c.Patch == nil {
			return errors.New("no restores today")
		}
		return nil
	})
	_, v, err := a.Restore(1)
	wantStatus(t, err, ErrRejected, "Restore", "agent_restore_state", "no restores today")
	if v != 0 {
		t.Fatalf("version %d from a rejected restore", v)
	}
	wantStatus(t, inner, ErrBusy, "GetStateJSON")
	if otherErr != nil || string(otherState) != `{"other":true}` {
		t.Fatalf("another Agent from inside the validator: %s, %v", otherState, otherErr)
	}
	if raw, _ := a.GetStateJSON(); string(raw) != `{"i":3}` {
		t.Fatalf("state %s", raw)
	}
}

func TestValidatorHandlesAreReleased(t *testing.T) {
	base := liveHookCount()
	a, err := openStore(t, ":memory:", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := a.SetValidator(func(Change) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := liveHookCount() - base; n != 1 {
		t.Fatalf("%d validator handles alive, want 1", n)
	}
	a.SetValidator(nil)
	if n := liveHookCount() - base; n != 0 {
		t.Fatalf("%d validator handles alive after removal", n)
	}
	a.SetValidator(func(Change) error { return nil })
	a.Close()
	if n := liveHookCount() - base; n != 0 {
		t.Fatalf("%d validator handles alive after Close", n)
	}
	wantStatus(t, a.SetValidator(func(Change) error { return nil }), ErrBadHandle, "SetValidator", "agent_set_validator")
	if n := liveHookCount() - base; n != 0 {
		t.Fatalf("%d validator handles alive after a failed SetValidator", n)
	}
}

// Validators on many goroutines at once: each rejection comes back to its own call, with its
// own reason and error.
func TestValidatorErrorsGoToTheirCall(t *testing.T) {
	a := openAgent(t, "", Options{})
	a.SetValidator(func(c Change) error {
		var p map[string]int
		if err := json.Unmarshal(c.Patch, &p); err != nil {
			return err
		}
		for k, v := range p {
			if v%3 == 0 {
				return fmt.Errorf("refused %s=%d", k, v)
			}
		}
		return nil
	})
	const goroutines, writes = 12, 40
	var wg sync.WaitGroup
	errs := make(chan string, goroutines*writes)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			key := fmt.Sprintf("g%d", g)
			for i := 1; i <= writes; i++ {
				_, err := a.SetState(map[string]any{key: i})
				want := fmt.Sprintf("refused %s=%d", key, i)
				var e *Error
				switch {
				case i%3 == 0 && (!errors.As(err, &e) || e.Status != StatusRejected || !strings.Contains(e.Message, want) || e.Err == nil || e.Err.Error() != want):
					errs <- fmt.Sprintf("%s: want %q, got %v", key, want, err)
				case i%3 != 0 && err != nil:
					errs <- fmt.Sprintf("%s=%d: unexpected %v", key, i, err)
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := pendingHookErrorCount(); n != 0 {
		t.Fatalf("%d hook error records left behind", n)
	}
}

// Poll delivers the changes of other handles once each, in commit order, to both kinds of
// hook; a write through the polling handle delivers the pending ones first.
func TestPollDeliversOtherHandlesChangesOnceInCommitOrder(t *testing.T) {
	path := tempDB(t)
	a := openAgent(t, path, logged(100))
	b := openAgent(t, path, Options{}) // logs too: the store says so
	var rec, bRec recorder
	if _, err := a.OnChange(rec.hook); err != nil {
		t.Fatal(err)
	}
	b.OnChange(bRec.hook)
	var old []delivery
	a.OnStateChanged(func(next, prev, patch json.RawMessage) error {
		old = append(old, delivery{string(next), string(prev), string(patch)})
		return nil
	})
	b.SetState(map[string]any{"x": 1})
	b.ReplaceState(map[string]any{"y": 2})
	if n, err := a.Poll(); n != 2 || err != nil {
		t.Fatalf("Poll = %d, %v; want 2", n, err)
	}
	if n, err := a.Poll(); n != 0 || err != nil {
		t.Fatalf("second Poll = %d, %v; want 0: each change once", n, err)
	}
	b.SetState(map[string]any{"z": 3})
	a.SetState(map[string]any{"w": 4})
	b.SetStateJSON([]byte(`{"y":null}`))
	if n, err := a.Poll(); n != 1 || err != nil {
		t.Fatalf("third Poll = %d, %v; want 1", n, err)
	}
	want := `1 {} -> {"x":1} ({"x":1})
2 {"x":1} -> {"y":2} (-)
3 {"y":2} -> {"y":2,"z":3} ({"z":3})
4 {"y":2,"z":3} -> {"y":2,"z":3,"w":4} ({"w":4})
5 {"y":2,"z":3,"w":4} -> {"z":3,"w":4} ({"y":null})
`
	seen := rec.changes()
	if got := text(seen); got != want {
		t.Fatalf("deliveries\n%swant\n%s", got, want)
	}
	for i := 1; i < len(seen); i++ {
		if string(seen[i].Prev) != string(seen[i-1].Next) || seen[i].Version != seen[i-1].Version+1 {
			t.Fatalf("delivery %d does not follow the one before", i)
		}
	}
	if len(old) != 5 || old[1].patch != "" || old[4].next != `{"z":3,"w":4}` {
		t.Fatalf("OnStateChanged saw %q", old)
	}
	// b's hooks saw the same history: its own changes, and a's delivered ahead of b's write.
	if got := text(bRec.changes()); got != want {
		t.Fatalf("b's deliveries\n%swant\n%s", got, want)
	}
	if n, err := b.Poll(); n != 0 || err != nil {
		t.Fatalf("b.Poll = %d, %v", n, err)
	}
}

// The first change of a store is delivered with the writer's initial state as prev (the
// poller cannot know it otherwise).
func TestPollDeliversTheFirstChangeWithTheWritersInitialState(t *testing.T) {
	path := tempDB(t)
	a := openAgent(t, path, Options{ChangeLog: &ChangeLog{KeepLast: 10}, InitialState: map[string]any{"mine": 1}})
	b := openAgent(t, path, Options{InitialState: map[string]any{"theirs": 1}})
	var rec recorder
	a.OnChange(rec.hook)
	b.SetState(map[string]any{"x": 1})
	if n, err := a.Poll(); n != 1 || err != nil {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	if got := text(rec.changes()); got != "1 {\"theirs\":1} -> {\"theirs\":1,\"x\":1} ({\"x\":1})\n" {
		t.Fatalf("delivered %s", got)
	}
}

// Changes committed before an Agent was opened are not delivered to it.
func TestPollStartsAtOpen(t *testing.T) {
	path := tempDB(t)
	w := openAgent(t, path, logged(100))
	w.SetState(map[string]any{"before": 1})
	a := openAgent(t, path, Options{})
	var rec recorder
	a.OnChange(rec.hook)
	w.SetState(map[string]any{"after": 1})
	if n, err := a.Poll(); n != 1 || err != nil {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	if got := text(rec.changes()); got != "2 {\"before\":1} -> {\"before\":1,\"after\":1} ({\"after\":1})\n" {
		t.Fatalf("delivered %s", got)
	}
}

// Poll from several goroutines while other Agents write from several goroutines: every change
// is delivered exactly once, in commit order.
func TestConcurrentPollsDeliverEachChangeOnce(t *testing.T) {
	path := tempDB(t)
	a := openAgent(t, path, logged(100000))
	var rec recorder
	a.OnChange(rec.hook)
	writers := []*Agent{openAgent(t, path, Options{Synchronous: SyncNormal}), openAgent(t, path, Options{Synchronous: SyncNormal})}
	const goroutines, writes = 6, 30
	var wg, pollers sync.WaitGroup
	stop := make(chan struct{})
	var delivered int64
	for p := 0; p < 3; p++ {
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			for {
				n, err := a.Poll()
				if err != nil {
					t.Error(err)
					return
				}
				atomic.AddInt64(&delivered, int64(n))
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < writes; i++ {
				if _, err := writers[g%2].SetState(map[string]any{fmt.Sprintf("g%d", g): i}); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	pollers.Wait()
	n, err := a.Poll()
	if err != nil {
		t.Fatal(err)
	}
	delivered += int64(n)
	seen := rec.changes()
	const total = goroutines * writes
	if delivered != total || len(seen) != total {
		t.Fatalf("Poll counted %d, hooks saw %d, want %d", delivered, len(seen), total)
	}
	for i, c := range seen {
		if c.Version != uint64(i+1) || (i > 0 && string(c.Prev) != string(seen[i-1].Next)) {
			t.Fatalf("delivery %d (version %d) is out of order", i, c.Version)
		}
	}
}

// A handle that polls (and reads history) while other handles commit must stay current: its
// reads inside read transactions must never be taken for the newest state (a bug of 0.2.0's
// first cut, where the handle could then overwrite newer commits).
func TestPollingHandleStaysCurrent(t *testing.T) {
	const goroutines, writes = 6, 30
	for round := 0; round < 100; round++ {
		path := tempDB(t)
		a := openAgent(t, path, logged(1000))
		w := openAgent(t, path, Options{Synchronous: SyncNormal})
		var wg, poller sync.WaitGroup
		stop := make(chan struct{})
		poller.Add(1)
		go func() {
			defer poller.Done()
			for {
				if _, err := a.Poll(); err != nil {
					t.Error(err)
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < writes; i++ {
					if _, err := w.SetState(map[string]any{fmt.Sprintf("g%d", g): i}); err != nil {
						t.Error(err)
					}
				}
			}(g)
		}
		wg.Wait()
		close(stop)
		poller.Wait()
		_, v, err := a.GetStateVersioned()
		if err != nil {
			t.Fatal(err)
		}
		if v == goroutines*writes {
			continue
		}
		_, casVersion, casErr := a.SetStateIf(v, map[string]any{"stale": true})
		fresh := openAgent(t, path, Options{})
		raw, after, _ := fresh.GetStateVersionedJSON()
		t.Fatalf("round %d: after %d commits the polling handle reads version %d; SetStateIf(%d) = version %d, %v (want ErrConflict); a fresh handle now reads version %d: %s",
			round, goroutines*writes, v, v, casVersion, casErr, after, raw)
	}
}

func TestPollHookErrors(t *testing.T) {
	path := tempDB(t)
	a := openAgent(t, path, logged(100))
	b := openAgent(t, path, Options{})
	failure := errors.New("mirror down")
	var calls int
	a.OnChange(func(c Change) error {
		calls++
		if c.Version == 1 {
			return failure
		}
		return nil
	})
	b.SetState(map[string]any{"x": 1})
	b.SetState(map[string]any{"x": 2})
	n, err := a.Poll()
	wantStatus(t, err, ErrHook, "Poll", "agent_poll")
	if !errors.Is(err, failure) || calls != 2 || n != 2 {
		t.Fatalf("Poll = %d, %v after %d calls", n, err, calls)
	}
	if n, err := a.Poll(); n != 0 || err != nil {
		t.Fatalf("Poll after a hook failure = %d, %v: the deliveries were all made", n, err)
	}
}

// Pruned changes: Poll reports ErrGap once, after delivering what the log still holds.
func TestPollReportsAGapAfterPruning(t *testing.T) {
	path := tempDB(t)
	a := openAgent(t, path, Options{ChangeLog: &ChangeLog{KeepLast: 2}})
	b := openAgent(t, path, Options{})
	var rec recorder
	a.OnChange(rec.hook)
	for n := 1; n <= 5; n++ {
		if _, err := b.SetState(map[string]any{"n": n}); err != nil {
			t.Fatal(err)
		}
	}
	// Retained: 4 and 5; 4's predecessor is gone, so only 5 can be delivered with its prev.
	n, err := a.Poll()
	wantStatus(t, err, ErrGap, "Poll", "agent_poll", "changes 1 to 4")
	if got := text(rec.changes()); got != "5 {\"n\":4} -> {\"n\":5} ({\"n\":5})\n" || n != 1 {
		t.Fatalf("delivered %s (Poll said %d)", got, n)
	}
	if n, err := a.Poll(); n != 0 || err != nil {
		t.Fatalf("Poll after the gap = %d, %v", n, err)
	}
	_, err = a.ChangesSince(1)
	wantStatus(t, err, ErrGap, "ChangesSince", "agent_changes_since")
	_, err = a.StateAt(3)
	wantStatus(t, err, ErrGap, "StateAt", "agent_get_state_at", "version 3")
	_, _, err = a.Restore(2)
	wantStatus(t, err, ErrGap, "Restore")
}

// Poll counts what it delivered also when it fails with ErrGap or ErrHook (the deliveries
// happened all the same).
func TestPollCountsDeliveriesAlsoOnGapAndHookErrors(t *testing.T) {
	path := tempDB(t)
	a := openAgent(t, path, Options{ChangeLog: &ChangeLog{KeepLast: 2}})
	b := openAgent(t, path, Options{})
	var rec recorder
	a.OnChange(rec.hook)
	for n := 1; n <= 5; n++ {
		b.SetState(map[string]any{"n": n})
	}
	n, err := a.Poll()
	if !errors.Is(err, ErrGap) || len(rec.changes()) != 1 || n != 1 {
		t.Fatalf("Poll = %d, %v with %d changes delivered; want 1 and ErrGap", n, err, len(rec.changes()))
	}
	a.OnChange(func(Change) error { return errors.New("fails") })
	b.SetState(map[string]any{"n": 6})
	b.SetState(map[string]any{"n": 7})
	n, err = a.Poll()
	if !errors.Is(err, ErrHook) || len(rec.changes()) != 3 || n != 2 {
		t.Fatalf("Poll = %d, %v with %d changes delivered; want 2 and ErrHook", n, err, len(rec.changes())-1)
	}
}

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
	wantStatus(t, err, ErrInvalidArgument, "Poll", "agent_poll", "change log is off")
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

	// Switched on by one Agent, off by another: the setting belongs to the store.
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
		wantStatus(t, err, ErrInvalidArgument, "Open", "agent_open", "change_log")
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
