package agentstate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Context methods (context.go): a write waiting for a lock held by another Agent's write
// is cancelled by its context's deadline or by cancel() from another goroutine, nothing
// written; a context already done returns at once; one that is never done changes nothing;
// no goroutine outlives a call. Both backends: the holder is a write whose validator blocks
// inside its transaction (SQLite's write lock; on PostgreSQL the row lock, which a write
// takes first when it runs with a cancel token, so the holder writes through a Context method
// under a context that has a Done channel). tests/c/cancel.c is the same scenario in C.

// holdLock opens a second Agent on path whose write (made through SetStateContext under a
// never-cancelled context) blocks in its validator until release is called; holdLock returns
// once that write is inside its transaction, holding the lock.
func holdLock(t *testing.T, path string) (release func() error) {
	t.Helper()
	holder := openAgent(t, path, Options{BusyTimeout: 30 * time.Second})
	inside, free := make(chan struct{}), make(chan struct{})
	var once sync.Once
	if err := holder.SetValidator(func(c Change) error {
		once.Do(func() { close(inside) })
		<-free
		return nil
	}); err != nil {
		t.Fatalf("SetValidator: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background()) // never cancelled: binds a token
	result := make(chan error, 1)
	go func() {
		_, err := holder.SetStateContext(ctx, map[string]any{"holder": 1})
		result <- err
	}()
	select {
	case <-inside:
	case err := <-result:
		t.Fatalf("the holder's write returned before its validator ran: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the holder's write never reached its validator")
	}
	var released bool
	release = func() error {
		if released {
			return nil
		}
		released = true
		close(free)
		err := <-result
		cancel()
		return err
	}
	t.Cleanup(func() { _ = release() })
	return release
}

// waitGoroutines waits (polling, up to 10 s: generous for a loaded machine, and it returns as
// soon as the count is back) for the number of goroutines to come back to want: a goroutine
// that has done its work (a context's timer, a test's canceller) may take a moment to exit.
func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after the call, %d before:\n%s", n, want, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wantCancelled checks that err is the ErrCancelled *Error of op that also matches cause.
func wantCancelled(t *testing.T, err error, op string, cause error) {
	t.Helper()
	e := wantStatus(t, err, ErrCancelled)
	if !errors.Is(err, cause) {
		t.Fatalf("error %q: errors.Is(err, %v) is false", err, cause)
	}
	if e.Op != op {
		t.Fatalf("error %q: Op %q, want %q", err, e.Op, op)
	}
}

func cancelWhileLocked(t *testing.T, byDeadline bool) {
	path := tempDB(t)
	a := openAgent(t, path, Options{BusyTimeout: 30 * time.Second})
	if _, err := a.SetState(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	release := holdLock(t, path)
	before := runtime.NumGoroutine()

	var ctx context.Context
	var cancel context.CancelFunc
	fired := make(chan struct{})
	if byDeadline {
		ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
		close(fired)
	} else {
		ctx, cancel = context.WithCancel(context.Background())
		go func() {
			time.Sleep(200 * time.Millisecond)
			cancel()
			close(fired)
		}()
	}
	defer cancel()
	start := time.Now()
	st, err := a.SetStateContext(ctx, map[string]any{"n": 2})
	elapsed := time.Since(start)
	if st != nil {
		t.Fatalf("a cancelled write returned a state: %v", st)
	}
	want := context.Canceled
	if byDeadline {
		want = context.DeadlineExceeded
	}
	wantCancelled(t, err, "SetStateContext", want)
	if elapsed < 150*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("the cancelled write took %v (cancelled after 200-300 ms)", elapsed)
	}
	<-fired
	waitGoroutines(t, before)

	if err := release(); err != nil {
		t.Fatalf("the holder's write: %v", err) // not disturbed
	}
	// Nothing of the cancelled write; the Agent writes again, under a context too.
	got, err := a.GetStateJSON()
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, []byte(`{"n":1,"holder":1}`))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	out, err := a.SetStateJSONContext(ctx2, []byte(`{"n":3}`))
	if err != nil {
		t.Fatalf("SetStateJSONContext after the cancelled write: %v", err)
	}
	jsonEqual(t, out, []byte(`{"n":3,"holder":1}`))
}

func TestContextDeadlineCancelsAWriteWaitingForALock(t *testing.T) {
	cancelWhileLocked(t, true)
}

func TestContextCancelCancelsAWriteWaitingForALock(t *testing.T) {
	cancelWhileLocked(t, false)
}

// osThreads is the process's number of OS threads ("Threads:" in /proc/self/status).
func osThreads(t *testing.T) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Threads:") {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "Threads:")))
			if err != nil {
				t.Fatalf("/proc/self/status: %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}

// Many Context calls waiting at once (200 writes from 200 goroutines on 4 Agents, waiting for
// the lock holdLock holds or for their turn on their handle), half ended by a deadline, half
// by cancel() from another goroutine: each returns its ErrCancelled error, nothing is
// written, and afterwards no goroutine is left (the count comes back to what it was) and the
// OS threads do not grow from round to round.
//
// The threads' bound: SetStateContext is awaited (it waits on a channel, not in C), but the
// runtime keeps any thread it started for reuse (it never ends them), and the library's
// workers come and go. A second round of the same calls finds them idle: it may add threads
// only where its peak of calls in C at once passes the first round's (scheduling decides how
// many of the 200 are in a cgo call together), never one per call. So every round after the
// first must stay within the first round's count plus threadSlack; a call that left its
// thread behind (or a thread per token) would add about 200 per round.
// TestAwaitedCallsWaitingForALockHoldNoThreadEach bounds the threads of waiting calls
// themselves, in a fresh process.
func TestContextManyCancelledCallsLeaveNoGoroutineOrThreadBehind(t *testing.T) {
	const (
		calls       = 200
		rounds      = 3
		threadSlack = 32
	)
	threadsAtStart := osThreads(t)
	path := tempDB(t)
	agents := make([]*Agent, 4)
	for i := range agents {
		agents[i] = openAgent(t, path, Options{BusyTimeout: 30 * time.Second})
	}
	if _, err := agents[0].SetState(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	release := holdLock(t, path)
	before := runtime.NumGoroutine()

	round := func() (made int) {
		byDeadline, cancelDeadline := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancelDeadline()
		byCancel, cancel := context.WithCancel(context.Background())
		defer cancel()
		errs := make([]error, calls)
		var wg sync.WaitGroup
		for i := 0; i < calls; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				ctx := byDeadline
				if i%2 == 1 {
					ctx = byCancel
				}
				_, errs[i] = agents[i%len(agents)].SetStateContext(ctx, map[string]any{"n": 100 + i})
			}(i)
		}
		// The other half, by cancel() from this goroutine, once the deadline has passed.
		<-byDeadline.Done()
		cancel()
		wg.Wait()
		for i, err := range errs {
			cause := context.DeadlineExceeded
			if i%2 == 1 {
				cause = context.Canceled
			}
			wantCancelled(t, err, "SetStateContext", cause)
			if !strings.Contains(err.Error(), "was not made") {
				made++ // it was in the library, waiting, when its context ended
			}
		}
		return made
	}

	var threads []int
	for r := 1; r <= rounds; r++ {
		start := time.Now()
		made := round()
		took := time.Since(start)
		if made == 0 {
			t.Fatalf("round %d: none of the %d calls reached the library", r, calls)
		}
		waitGoroutines(t, before)
		n := osThreads(t)
		threads = append(threads, n)
		t.Logf("round %d: %d cancelled calls (%d waiting in the library) in %v; goroutines back to %d; OS threads %d (%d at the start)",
			r, calls, made, took, before, n, threadsAtStart)
		if r > 1 && n > threads[0]+threadSlack {
			t.Fatalf("OS threads after each round: %v: round %d added %d beyond the first round's %d (slack %d)",
				threads, r, n-threads[0], threads[0], threadSlack)
		}
	}

	if err := release(); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	got, v, err := agents[1].GetStateVersionedJSON()
	if err != nil {
		t.Fatal(err)
	}
	if v != 2 {
		t.Fatalf("version %d, want 2 (the first write and the holder's)", v)
	}
	jsonEqual(t, got, []byte(`{"n":1,"holder":1}`))
}

// Every Context method, for the tests below: calls it under ctx and returns its error.
var contextMethods = []struct {
	op   string
	call func(a *Agent, ctx context.Context) error
}{
	{"GetStateContext", func(a *Agent, ctx context.Context) error { _, err := a.GetStateContext(ctx); return err }},
	{"GetStateJSONContext", func(a *Agent, ctx context.Context) error { _, err := a.GetStateJSONContext(ctx); return err }},
	{"GetStateIntoContext", func(a *Agent, ctx context.Context) error {
		var m map[string]any
		return a.GetStateIntoContext(ctx, &m)
	}},
	{"SetStateContext", func(a *Agent, ctx context.Context) error {
		_, err := a.SetStateContext(ctx, map[string]any{"x": 1})
		return err
	}},
	{"SetStateJSONContext", func(a *Agent, ctx context.Context) error {
		_, err := a.SetStateJSONContext(ctx, []byte(`{"x":2}`))
		return err
	}},
	{"ReplaceStateContext", func(a *Agent, ctx context.Context) error {
		_, err := a.ReplaceStateContext(ctx, map[string]any{"x": 3})
		return err
	}},
	{"ReplaceStateJSONContext", func(a *Agent, ctx context.Context) error {
		_, err := a.ReplaceStateJSONContext(ctx, []byte(`{"x":4}`))
		return err
	}},
	{"GetStateVersionedContext", func(a *Agent, ctx context.Context) error {
		_, _, err := a.GetStateVersionedContext(ctx)
		return err
	}},
	{"GetStateVersionedJSONContext", func(a *Agent, ctx context.Context) error {
		_, _, err := a.GetStateVersionedJSONContext(ctx)
		return err
	}},
	{"GetStateVersionedIntoContext", func(a *Agent, ctx context.Context) error {
		var m map[string]any
		_, err := a.GetStateVersionedIntoContext(ctx, &m)
		return err
	}},
	{"SetStateIfContext", func(a *Agent, ctx context.Context) error {
		_, v, err := a.GetStateVersioned()
		if err != nil {
			return err
		}
		_, _, err = a.SetStateIfContext(ctx, v, map[string]any{"x": 5})
		return err
	}},
	{"SetStateIfJSONContext", func(a *Agent, ctx context.Context) error {
		_, v, err := a.GetStateVersioned()
		if err != nil {
			return err
		}
		_, _, err = a.SetStateIfJSONContext(ctx, v, []byte(`{"x":6}`))
		return err
	}},
	{"ReplaceStateIfContext", func(a *Agent, ctx context.Context) error {
		_, v, err := a.GetStateVersioned()
		if err != nil {
			return err
		}
		_, _, err = a.ReplaceStateIfContext(ctx, v, map[string]any{"x": 7})
		return err
	}},
	{"ReplaceStateIfJSONContext", func(a *Agent, ctx context.Context) error {
		_, v, err := a.GetStateVersioned()
		if err != nil {
			return err
		}
		_, _, err = a.ReplaceStateIfJSONContext(ctx, v, []byte(`{"x":8}`))
		return err
	}},
	{"PollContext", func(a *Agent, ctx context.Context) error { _, err := a.PollContext(ctx); return err }},
	{"ChangesSinceContext", func(a *Agent, ctx context.Context) error {
		_, err := a.ChangesSinceContext(ctx, 0)
		return err
	}},
	{"ChangesSinceJSONContext", func(a *Agent, ctx context.Context) error {
		_, err := a.ChangesSinceJSONContext(ctx, 0)
		return err
	}},
	{"StateAtContext", func(a *Agent, ctx context.Context) error { _, err := a.StateAtContext(ctx, 1); return err }},
	{"StateAtJSONContext", func(a *Agent, ctx context.Context) error {
		_, err := a.StateAtJSONContext(ctx, 1)
		return err
	}},
	{"RestoreContext", func(a *Agent, ctx context.Context) error { _, _, err := a.RestoreContext(ctx, 1); return err }},
	{"RestoreJSONContext", func(a *Agent, ctx context.Context) error {
		// Version 2, not 1 again: restoring the state it already has would change nothing.
		_, _, err := a.RestoreJSONContext(ctx, 2)
		return err
	}},
}

// A context that is done already: each method returns at once, matching ErrCancelled and
// ctx.Err(), and writes nothing.
func TestContextAlreadyDoneReturnsAtOnce(t *testing.T) {
	a := openAgent(t, "", Options{ChangeLog: &ChangeLog{KeepLast: 100}})
	if _, err := a.SetState(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	before := runtime.NumGoroutine()
	for _, m := range contextMethods {
		for _, c := range []struct {
			ctx  context.Context
			want error
		}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
			start := time.Now()
			err := m.call(a, c.ctx)
			if d := time.Since(start); d > time.Second {
				t.Errorf("%s with a done context took %v", m.op, d)
			}
			wantCancelled(t, err, m.op, c.want)
		}
	}
	waitGoroutines(t, before)
	got, v, err := a.GetStateVersionedJSON()
	if err != nil {
		t.Fatal(err)
	}
	if v != 1 {
		t.Fatalf("version %d after cancelled writes, want 1", v)
	}
	jsonEqual(t, got, []byte(`{"n":1}`))
}

// Contexts that are never done (Background, an uncancelled WithCancel, a far deadline): each
// method does what the method without Context does, and no goroutine is left behind.
func TestContextNeverDoneChangesNothing(t *testing.T) {
	far, cancelFar := context.WithTimeout(context.Background(), time.Hour)
	defer cancelFar()
	open, cancelOpen := context.WithCancel(context.Background())
	defer cancelOpen()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"Background", context.Background()}, {"WithCancel", open}, {"WithTimeout", far}} {
		t.Run(c.name, func(t *testing.T) {
			a := openAgent(t, "", Options{ChangeLog: &ChangeLog{KeepLast: 100}})
			if _, err := a.SetState(map[string]any{"n": 1}); err != nil {
				t.Fatal(err)
			}
			before := runtime.NumGoroutine()
			for _, m := range contextMethods {
				if err := m.call(a, c.ctx); err != nil {
					t.Fatalf("%s: %v", m.op, err)
				}
			}
			waitGoroutines(t, before)
			st, v, err := a.GetStateVersionedContext(c.ctx)
			if err != nil {
				t.Fatal(err)
			}
			// 1 + the 8 writes of contextMethods + the restores of versions 1 and 2, each a
			// change of the state.
			if v != 11 {
				t.Fatalf("version %d, want 11", v)
			}
			b, _ := json.Marshal(st)
			jsonEqual(t, b, []byte(`{"n":1,"x":1}`))
		})
	}
}

func TestContextNilIsAnInvalidArgument(t *testing.T) {
	a := openAgent(t, "", Options{})
	var ctx context.Context // nil
	_, err := a.SetStateContext(ctx, map[string]any{"n": 1})
	wantStatus(t, err, ErrInvalidArgument, "context")
}

// A Context call from inside a hook of a Context call (an awaited write, whose hook runs on a
// library worker): one whose context is done already is not made; a live one runs, under the
// outer call's token, which stays bound: a call without a context made next in the hook runs
// under it (fired by then); after the outer call, none is bound.
func TestContextCallInsideAHook(t *testing.T) {
	a := openAgent(t, "", Options{})
	outer, cancelOuter := context.WithCancel(context.Background())
	defer cancelOuter()
	inner, cancelInner := context.WithCancel(context.Background())
	cancelInner()
	live, cancelLive := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelLive()
	var innerErr, liveErr, inheritedErr error
	if _, err := a.OnStateChanged(func(next, prev, patch json.RawMessage) error {
		if patch == nil {
			return nil
		}
		_, innerErr = a.GetStateContext(inner)           // done already: not made
		_, _, liveErr = a.GetStateVersionedContext(live) // its own token, then the outer one again
		cancelOuter()
		time.Sleep(100 * time.Millisecond) // the watcher fires the outer token
		_, inheritedErr = a.GetState()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The commit was sent before the hook ran: whatever the hook did, the write is committed.
	_, err := a.SetStateContext(outer, map[string]any{"n": 1})
	t.Logf("the outer SetStateContext: %v", err)
	wantCancelled(t, innerErr, "GetStateContext", context.Canceled)
	if liveErr != nil {
		t.Fatalf("GetStateVersionedContext inside the hook: %v", liveErr)
	}
	wantStatus(t, inheritedErr, ErrCancelled)
	// No token bound any more: a call without a context is not cancelled.
	if _, err := a.SetState(map[string]any{"m": 2}); err != nil {
		t.Fatalf("SetState after: %v", err)
	}
	got, err := a.GetStateJSON()
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, []byte(`{"n":1,"m":2}`))
}
