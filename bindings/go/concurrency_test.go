package agentstate

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Goroutines sharing one Agent (and a second Agent on the same file) never lose an update, and
// hooks see every change once, in commit order.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	path := tempDB(t)
	// Lost updates are the point, not lock waits: SQLite's busy handler is not fair, and on a
	// loaded machine one Agent's goroutines may keep the lock longer than the default 5s.
	opts := Options{Synchronous: SyncNormal, BusyTimeout: time.Minute}
	a := openAgent(t, path, opts)
	b := openAgent(t, path, opts)
	var mu sync.Mutex
	var chain []delivery
	hook := func(next, prev, patch json.RawMessage) error {
		mu.Lock()
		chain = append(chain, delivery{string(next), string(prev), string(patch)})
		mu.Unlock()
		return nil
	}
	if _, err := a.OnStateChanged(hook); err != nil {
		t.Fatal(err)
	}
	const goroutines, writes = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*goroutines*writes)
	for g := 0; g < 2*goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			ag := a
			if g%2 == 1 {
				ag = b
			}
			for i := 0; i < writes; i++ {
				patch := map[string]any{fmt.Sprintf("g%d", g): map[string]any{fmt.Sprintf("w%d", i): i}}
				st, err := ag.SetState(patch)
				if err != nil {
					errs <- err
					return
				}
				// The returned state holds this write and everything this goroutine wrote before.
				mine, _ := st[fmt.Sprintf("g%d", g)].(map[string]any)
				if len(mine) != i+1 {
					errs <- fmt.Errorf("g%d write %d: returned state has %d of my writes", g, i, len(mine))
					return
				}
				if i%10 == 0 {
					if _, err := ag.GetState(); err != nil {
						errs <- err
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var final map[string]map[string]int
	if err := a.GetStateInto(&final); err != nil {
		t.Fatal(err)
	}
	for g := 0; g < 2*goroutines; g++ {
		if n := len(final[fmt.Sprintf("g%d", g)]); n != writes {
			t.Fatalf("g%d: %d of %d writes survived", g, n, writes)
		}
	}
	// a's hook saw a's changes only (b's are visible to reads, not delivered), each once, in
	// commit order: every commit adds a member, so each delivered next is longer than the last.
	if len(chain) != goroutines*writes {
		t.Fatalf("%d deliveries, want %d", len(chain), goroutines*writes)
	}
	last := -1
	for i, d := range chain {
		n := len(d.next)
		if n <= last {
			t.Fatalf("delivery %d is out of order (next shrank)", i)
		}
		last = n
	}
}

// With one handle, deliveries chain exactly: each prev is the previous next.
func TestDeliveriesAreInCommitOrder(t *testing.T) {
	a := openAgent(t, "", Options{})
	var mu sync.Mutex
	var chain []delivery
	a.OnStateChanged(func(next, prev, patch json.RawMessage) error {
		mu.Lock()
		chain = append(chain, delivery{string(next), string(prev), string(patch)})
		mu.Unlock()
		if len(next)%7 == 0 {
			runtime.Gosched()
		}
		return nil
	})
	const goroutines, writes = 12, 50
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < writes; i++ {
				if _, err := a.SetState(map[string]any{fmt.Sprintf("g%d", g): i}); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	if len(chain) != goroutines*writes {
		t.Fatalf("%d deliveries, want %d", len(chain), goroutines*writes)
	}
	if chain[0].prev != `{}` {
		t.Fatalf("first prev %s", chain[0].prev)
	}
	for i := 1; i < len(chain); i++ {
		if chain[i].prev != chain[i-1].next {
			t.Fatalf("delivery %d: prev %s != previous next %s", i, chain[i].prev, chain[i-1].next)
		}
	}
	final, _ := a.GetStateJSON()
	if string(final) != chain[len(chain)-1].next {
		t.Fatalf("final %s, last delivery %s", final, chain[len(chain)-1].next)
	}
}

// Close racing with calls in other goroutines: they finish or fail with ErrBadHandle; nothing
// crashes, and Close from several goroutines at once is still idempotent.
func TestCloseRacesWithCalls(t *testing.T) {
	for round := 0; round < 20; round++ {
		a, err := openStore(t, ":memory:", Options{})
		if err != nil {
			t.Fatal(err)
		}
		a.OnStateChanged(func(_, _, _ json.RawMessage) error { return nil })
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 30; i++ {
					var err error
					if i%2 == 0 {
						_, err = a.SetState(map[string]any{"g": g, "i": i})
					} else {
						_, err = a.GetState()
					}
					if err != nil {
						wantStatus(t, err, ErrBadHandle)
						return
					}
				}
			}(g)
		}
		for c := 0; c < 3; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(round) * 50 * time.Microsecond)
				if err := a.Close(); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
}

// The finalizer closes an Agent that was never closed (a backstop, not the way to close), and
// with it releases the hooks.
func TestFinalizerClosesForgottenAgents(t *testing.T) {
	base := liveHookCount()
	func() {
		for i := 0; i < 5; i++ {
			a, err := openStore(t, ":memory:", Options{})
			if err != nil {
				t.Fatal(err)
			}
			// Hooks that do not refer to the Agent do not keep it alive.
			a.OnStateChanged(func(_, _, _ json.RawMessage) error { return nil })
			a.SetState(map[string]any{"i": i})
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for liveHookCount() != base {
		if time.Now().After(deadline) {
			t.Fatalf("%d hook handles still alive: the finalizer did not close the agents", liveHookCount()-base)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
