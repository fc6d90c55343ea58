package agentstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

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
	wantStatus(t, err, ErrHook, "Poll")
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
	wantStatus(t, err, ErrGap, "Poll", "changes 1 to 4")
	if got := text(rec.changes()); got != "5 {\"n\":4} -> {\"n\":5} ({\"n\":5})\n" || n != 1 {
		t.Fatalf("delivered %s (Poll said %d)", got, n)
	}
	if n, err := a.Poll(); n != 0 || err != nil {
		t.Fatalf("Poll after the gap = %d, %v", n, err)
	}
	_, err = a.ChangesSince(1)
	wantStatus(t, err, ErrGap, "ChangesSince")
	_, err = a.StateAt(3)
	wantStatus(t, err, ErrGap, "StateAt", "version 3")
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
