package agentstate

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCompareAndSetConflictLeavesStateUnchanged(t *testing.T) {
	a := openAgent(t, tempDB(t), Options{})
	var rec recorder
	a.OnChange(rec.hook)
	st, v, err := a.SetStateIf(5, map[string]any{"x": 1})
	wantStatus(t, err, ErrConflict, "SetStateIf", "expected version 5", "version 0")
	if st != nil || v != 0 {
		t.Fatalf("a conflict returned %v, %d", st, v)
	}
	if _, v, err = a.SetStateIf(0, map[string]any{"x": 1}); err != nil || v != 1 {
		t.Fatalf("SetStateIf(0) = %d, %v", v, err)
	}
	// Every form, at a stale version: nothing is written, no hook runs.
	_, _, err = a.ReplaceStateIf(0, map[string]any{"y": 1})
	wantStatus(t, err, ErrConflict, "ReplaceStateIf")
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
