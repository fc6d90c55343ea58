package agentstate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Awaited calls (completions.go): the Context methods of the state submit their call to the
// library's worker pool and wait on a channel, holding no OS thread while they wait; the
// methods without a context make their call in a cgo call, as before.

// taskThreads is the number of OS threads of this process: the entries of /proc/self/task.
func taskThreads(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip("no /proc/self/task:", err)
	}
	return len(entries)
}

const (
	// waiters is how many goroutines wait at once in the thread test.
	waiters = 1000
	// waiterThreads bounds the OS threads of the process they wait in: the Go runtime's few,
	// the library's workers (8 by default) and the race detector's, far below one per waiter.
	waiterThreads = 64
)

// A thousand goroutines each waiting on a SetStateContext while another process holds the
// store's write lock (SQLite's; on PostgreSQL the agent's row lock) hold no OS thread each:
// the process they wait in (a child, started fresh, so that threads an earlier test left idle
// cannot hide any) has at most waiterThreads threads while all of them wait, and every write
// completes once the lock is released.
func TestAwaitedCallsWaitingForALockHoldNoThreadEach(t *testing.T) {
	if os.Getenv("AGENTSTATE_WAITERS_DB") != "" {
		t.Skip("child")
	}
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc/self/task to count threads with:", err)
	}
	path := tempDB(t)
	a := openAgent(t, path, Options{BusyTimeout: 60 * time.Second})
	if _, err := a.SetState(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	release := holdLock(t, path)

	cmd := exec.Command(os.Args[0], "-test.run=^TestChildAwaitedWaiters$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "AGENTSTATE_WAITERS_DB="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	var output []string
	threads := -1
	for lines.Scan() {
		line := lines.Text()
		output = append(output, line)
		if strings.HasPrefix(line, "waiting threads=") {
			threads, _ = strconv.Atoi(strings.TrimPrefix(line, "waiting threads="))
			break
		}
	}
	if threads < 0 {
		_ = cmd.Wait()
		t.Fatalf("the child never reported its waiters:\n%s\n%s", strings.Join(output, "\n"), stderr.String())
	}
	// All waiting: let the holder's write commit, and with it the waiters'.
	if err := release(); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	for lines.Scan() {
		output = append(output, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, strings.Join(output, "\n"), stderr.String())
	}
	t.Logf("%d goroutines waiting on SetStateContext in one process: %d OS threads", waiters, threads)
	if threads > waiterThreads {
		t.Fatalf("%d OS threads while %d goroutines waited, want at most %d", threads, waiters, waiterThreads)
	}
	var st map[string]any
	if err := a.GetStateInto(&st); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < waiters; i++ {
		if got := fmt.Sprint(st[fmt.Sprintf("w%d", i)]); got != strconv.Itoa(i) {
			t.Fatalf("member w%d is %s after the waiters completed, want %d", i, got, i)
		}
	}
	if fmt.Sprint(st["holder"]) != "1" || fmt.Sprint(st["n"]) != "1" {
		t.Fatalf("the holder's or the first write is missing: holder=%v n=%v", st["holder"], st["n"])
	}
}

// TestChildAwaitedWaiters is the child process of TestAwaitedCallsWaitingForALockHoldNoThreadEach:
// it starts the waiters, reports its OS threads once all of them wait, and checks that each
// write completes.
func TestChildAwaitedWaiters(t *testing.T) {
	path := os.Getenv("AGENTSTATE_WAITERS_DB")
	if path == "" {
		t.Skip("only run as a child process")
	}
	a, err := openStore(t, path, Options{BusyTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background()) // never cancelled: each call has a token
	defer cancel()
	wait := startWaiters(t, a, ctx, waiters, "w")
	fmt.Printf("waiting threads=%d\n", taskThreads(t))
	for i, err := range wait() {
		if err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
}

// startWaiters starts n goroutines, the i-th writing {"<prefix><i>": i} with SetStateContext
// under ctx, and returns once each has submitted its call and waits for its completion (none
// can complete meanwhile: the store's lock is held); wait waits for them and returns their
// errors. It polls the count of waiting calls every 5 ms, up to 60 s.
func startWaiters(t *testing.T, a *Agent, ctx context.Context, n int, prefix string) (wait func() []error) {
	t.Helper()
	base := atomic.LoadInt64(&awaiting)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = a.SetStateContext(ctx, map[string]any{fmt.Sprintf("%s%d", prefix, i): i})
		}(i)
	}
	deadline := time.Now().Add(60 * time.Second)
	for atomic.LoadInt64(&awaiting)-base < int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d calls waiting after 60 s", atomic.LoadInt64(&awaiting)-base, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return func() []error {
		wg.Wait()
		return errs
	}
}

// The Context forms of the state's calls are submitted (awaited), whatever the context; the
// forms without a context are not.
func TestOnlyTheContextFormsAreSubmitted(t *testing.T) {
	a := openAgent(t, "", Options{})
	ty := NewTyped[struct {
		N int `json:"n"`
	}](a)
	ctx := context.Background()
	version := func() uint64 {
		_, v, err := a.GetStateVersioned()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ops := []struct {
		op        string
		submitted bool
		call      func() error
	}{
		{"GetState", false, func() error { _, err := a.GetState(); return err }},
		{"GetStateContext", true, func() error { _, err := a.GetStateContext(ctx); return err }},
		{"GetStateVersioned", false, func() error { _, _, err := a.GetStateVersioned(); return err }},
		{"GetStateVersionedContext", true, func() error { _, _, err := a.GetStateVersionedContext(ctx); return err }},
		{"SetState", false, func() error { _, err := a.SetState(map[string]any{"n": 1}); return err }},
		{"SetStateContext", true, func() error { _, err := a.SetStateContext(ctx, map[string]any{"n": 2}); return err }},
		{"ReplaceState", false, func() error { _, err := a.ReplaceState(map[string]any{"n": 3}); return err }},
		{"ReplaceStateContext", true, func() error { _, err := a.ReplaceStateContext(ctx, map[string]any{"n": 4}); return err }},
		{"PatchState", false, func() error {
			_, err := a.PatchState([]PatchOp{OpReplace("/n", 5)})
			return err
		}},
		{"PatchStateContext", true, func() error {
			_, err := a.PatchStateContext(ctx, []PatchOp{OpReplace("/n", 6)})
			return err
		}},
		{"SetStateIf", false, func() error { _, _, err := a.SetStateIf(version(), map[string]any{"n": 7}); return err }},
		{"SetStateIfContext", true, func() error {
			_, _, err := a.SetStateIfContext(ctx, version(), map[string]any{"n": 8})
			return err
		}},
		{"ReplaceStateIf", false, func() error { _, _, err := a.ReplaceStateIf(version(), map[string]any{"n": 9}); return err }},
		{"ReplaceStateIfContext", true, func() error {
			_, _, err := a.ReplaceStateIfContext(ctx, version(), map[string]any{"n": 10})
			return err
		}},
		{"PatchStateIf", false, func() error {
			_, _, err := a.PatchStateIf(version(), []PatchOp{OpReplace("/n", 11)})
			return err
		}},
		{"PatchStateIfContext", true, func() error {
			_, _, err := a.PatchStateIfContext(ctx, version(), []PatchOp{OpReplace("/n", 12)})
			return err
		}},
		{"Typed.Get", false, func() error { _, err := ty.Get(); return err }},
		{"Typed.GetContext", true, func() error { _, err := ty.GetContext(ctx); return err }},
		{"Typed.Set", false, func() error { _, err := ty.Set(map[string]any{"n": 13}); return err }},
		{"Typed.SetContext", true, func() error { _, err := ty.SetContext(ctx, map[string]any{"n": 14}); return err }},
		{"Typed.Update", false, func() error {
			_, err := ty.Update(func(s *struct {
				N int `json:"n"`
			}) error {
				s.N++
				return nil
			})
			return err
		}},
	}
	for _, o := range ops {
		// version() runs before the call it feeds, not submitted either.
		before := atomic.LoadUint64(&submitted)
		if err := o.call(); err != nil {
			t.Fatalf("%s: %v", o.op, err)
		}
		n := atomic.LoadUint64(&submitted) - before
		if o.submitted && n != 1 || !o.submitted && n != 0 {
			t.Errorf("%s submitted %d calls, want submitted=%v", o.op, n, o.submitted)
		}
	}
	got, err := a.GetStateJSON()
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, []byte(`{"n":15}`))
}

// errValidator and errHook are what the validator and the hook of
// TestAwaitedResultsEqualTheSyncCalls return, to find again wrapped in the calls' errors.
var (
	errValidator = errors.New("the validator refuses a member named reject")
	errHook      = errors.New("the hook fails on a member named fail")
	errInitial   = errors.New("the initial-state function fails")
)

// Each awaited call returns what the synchronous call returns, results and errors alike: two
// stores with the same history, one written with the methods without a context, the other
// with the Context forms, give the same states, versions, statuses, messages and wrapped
// errors (the validator's, a hook's, the initial-state function's), including for the hooks and
// the validator that run on a library worker while the awaited call waits.
func TestAwaitedResultsEqualTheSyncCalls(t *testing.T) {
	type result struct {
		state   json.RawMessage
		version uint64
		err     error
	}
	type step struct {
		name  string
		sync  func(a *Agent) result
		await func(a *Agent, ctx context.Context) result
		// wraps is an error the step's error must wrap (besides its status).
		wraps error
	}
	r := func(state json.RawMessage, err error) result { return result{state: state, err: err} }
	rv := func(state json.RawMessage, version uint64, err error) result { return result{state, version, err} }
	steps := []step{
		{"read the initial state", func(a *Agent) result { return r(a.GetStateJSON()) },
			func(a *Agent, ctx context.Context) result { return r(a.GetStateJSONContext(ctx)) }, nil},
		{"merge", func(a *Agent) result { return r(a.SetStateJSON([]byte(`{"a":1,"b":{"c":2}}`))) },
			func(a *Agent, ctx context.Context) result {
				return r(a.SetStateJSONContext(ctx, []byte(`{"a":1,"b":{"c":2}}`)))
			}, nil},
		{"merge that changes nothing", func(a *Agent) result { return r(a.SetStateJSON([]byte(`{"a":1}`))) },
			func(a *Agent, ctx context.Context) result { return r(a.SetStateJSONContext(ctx, []byte(`{"a":1}`))) }, nil},
		{"replace", func(a *Agent) result { return r(a.ReplaceStateJSON([]byte(`{"r":[1,2]}`))) },
			func(a *Agent, ctx context.Context) result {
				return r(a.ReplaceStateJSONContext(ctx, []byte(`{"r":[1,2]}`)))
			}, nil},
		{"JSON Patch", func(a *Agent) result {
			return r(a.PatchStateJSON([]byte(`[{"op":"add","path":"/r/-","value":3}]`)))
		}, func(a *Agent, ctx context.Context) result {
			return r(a.PatchStateJSONContext(ctx, []byte(`[{"op":"add","path":"/r/-","value":3}]`)))
		}, nil},
		{"read versioned", func(a *Agent) result { return rv(a.GetStateVersionedJSON()) },
			func(a *Agent, ctx context.Context) result { return rv(a.GetStateVersionedJSONContext(ctx)) }, nil},
		{"merge if at version 3", func(a *Agent) result { return rv(a.SetStateIfJSON(3, []byte(`{"d":4}`))) },
			func(a *Agent, ctx context.Context) result {
				return rv(a.SetStateIfJSONContext(ctx, 3, []byte(`{"d":4}`)))
			}, nil},
		{"merge if at a stale version", func(a *Agent) result { return rv(a.SetStateIfJSON(1, []byte(`{"d":5}`))) },
			func(a *Agent, ctx context.Context) result {
				return rv(a.SetStateIfJSONContext(ctx, 1, []byte(`{"d":5}`)))
			}, nil},
		{"replace if at version 4", func(a *Agent) result { return rv(a.ReplaceStateIfJSON(4, []byte(`{"e":[]}`))) },
			func(a *Agent, ctx context.Context) result {
				return rv(a.ReplaceStateIfJSONContext(ctx, 4, []byte(`{"e":[]}`)))
			}, nil},
		{"JSON Patch if at version 5", func(a *Agent) result {
			return rv(a.PatchStateIfJSON(5, []byte(`[{"op":"add","path":"/e/0","value":"x"}]`)))
		}, func(a *Agent, ctx context.Context) result {
			return rv(a.PatchStateIfJSONContext(ctx, 5, []byte(`[{"op":"add","path":"/e/0","value":"x"}]`)))
		}, nil},
		{"JSON Patch whose test fails", func(a *Agent) result {
			return rv(a.PatchStateIfJSON(6, []byte(`[{"op":"test","path":"/e/0","value":"y"}]`)))
		}, func(a *Agent, ctx context.Context) result {
			return rv(a.PatchStateIfJSONContext(ctx, 6, []byte(`[{"op":"test","path":"/e/0","value":"y"}]`)))
		}, nil},
		{"JSON Patch of a missing path", func(a *Agent) result {
			return r(a.PatchStateJSON([]byte(`[{"op":"remove","path":"/nothing"}]`)))
		}, func(a *Agent, ctx context.Context) result {
			return r(a.PatchStateJSONContext(ctx, []byte(`[{"op":"remove","path":"/nothing"}]`)))
		}, nil},
		{"malformed JSON", func(a *Agent) result { return r(a.SetStateJSON([]byte(`{"a":`))) },
			func(a *Agent, ctx context.Context) result { return r(a.SetStateJSONContext(ctx, []byte(`{"a":`))) }, nil},
		{"not an object", func(a *Agent) result { return r(a.ReplaceStateJSON([]byte(`[1]`))) },
			func(a *Agent, ctx context.Context) result { return r(a.ReplaceStateJSONContext(ctx, []byte(`[1]`))) }, nil},
		{"rejected by the validator", func(a *Agent) result { return r(a.SetStateJSON([]byte(`{"reject":1}`))) },
			func(a *Agent, ctx context.Context) result {
				return r(a.SetStateJSONContext(ctx, []byte(`{"reject":1}`)))
			},
			errValidator},
		{"a failing hook", func(a *Agent) result { return r(a.SetStateJSON([]byte(`{"fail":1}`))) },
			func(a *Agent, ctx context.Context) result { return r(a.SetStateJSONContext(ctx, []byte(`{"fail":1}`))) },
			errHook},
		{"a failing hook, compare-and-set", func(a *Agent) result { return rv(a.SetStateIfJSON(7, []byte(`{"fail":2}`))) },
			func(a *Agent, ctx context.Context) result {
				return rv(a.SetStateIfJSONContext(ctx, 7, []byte(`{"fail":2}`)))
			},
			errHook},
		{"read after", func(a *Agent) result { return rv(a.GetStateVersionedJSON()) },
			func(a *Agent, ctx context.Context) result { return rv(a.GetStateVersionedJSONContext(ctx)) }, nil},
	}
	open := func(t *testing.T) *Agent {
		a := openAgent(t, "", Options{BusyTimeout: 30 * time.Second})
		if err := a.SetInitialStateFunc(func() (any, error) { return map[string]any{"init": true}, nil }); err != nil {
			t.Fatal(err)
		}
		if err := a.SetValidator(func(c Change) error {
			if strings.Contains(string(c.Next), `"reject"`) {
				return errValidator
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.OnChange(func(c Change) error {
			if strings.Contains(string(c.Patch), `"fail"`) {
				return errHook
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"Background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"WithTimeout", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Hour)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := c.ctx()
			defer cancel()
			syncAgent, awaitedAgent := open(t), open(t)
			for _, s := range steps {
				want, got := s.sync(syncAgent), s.await(awaitedAgent, ctx)
				if (want.err == nil) != (got.err == nil) {
					t.Fatalf("%s: sync error %v, awaited error %v", s.name, want.err, got.err)
				}
				if want.err != nil {
					we, ge := want.err.(*Error), got.err.(*Error)
					if we.Status != ge.Status || ge.Error() != strings.Replace(we.Error(), "JSON:", "JSONContext:", 1) {
						t.Fatalf("%s: awaited error %q (%v), sync error %q (%v)", s.name, ge, ge.Status, we, we.Status)
					}
					if s.wraps != nil && (!errors.Is(got.err, s.wraps) || !errors.Is(want.err, s.wraps)) {
						t.Fatalf("%s: errors.Is(%v, %v) is false (sync: %v)", s.name, got.err, s.wraps, errors.Is(want.err, s.wraps))
					}
					if len(we.HookErrors) != len(ge.HookErrors) {
						t.Fatalf("%s: awaited HookErrors %v, sync %v", s.name, ge.HookErrors, we.HookErrors)
					}
					continue
				}
				if s.wraps != nil {
					t.Fatalf("%s: no error, want one wrapping %v", s.name, s.wraps)
				}
				jsonEqual(t, got.state, want.state)
				if got.version != want.version {
					t.Fatalf("%s: awaited version %d, sync %d", s.name, got.version, want.version)
				}
			}
		})
	}
}

// The initial-state function's failure, when a read needs it, is the awaited read's error as
// it is the synchronous read's: ErrHook, wrapping what the function returned.
func TestAwaitedReadReportsTheInitialStateFunctionsError(t *testing.T) {
	a := openAgent(t, "", Options{})
	if err := a.SetInitialStateFunc(func() (any, error) { return nil, errInitial }); err != nil {
		t.Fatal(err)
	}
	_, syncErr := a.GetStateJSON()
	_, err := a.GetStateJSONContext(context.Background())
	wantStatus(t, syncErr, ErrHook)
	wantStatus(t, err, ErrHook)
	if !errors.Is(err, errInitial) || !errors.Is(syncErr, errInitial) {
		t.Fatalf("errors.Is(..., errInitial): awaited %v, sync %v", errors.Is(err, errInitial), errors.Is(syncErr, errInitial))
	}
}

// A Context call made from inside a hook of an awaited write (running on a library worker) is
// made there and then, synchronously, as the library requires of a hook's nested calls: it
// returns, its change is delivered after the hook returns, and both writes are committed.
func TestAwaitedCallInsideAHookOfAnAwaitedCall(t *testing.T) {
	a := openAgent(t, "", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var nestedErr error
	var nested json.RawMessage
	var deliveries []string
	if _, err := a.OnChange(func(c Change) error {
		deliveries = append(deliveries, string(c.Patch))
		if strings.Contains(string(c.Patch), `"outer"`) {
			before := atomic.LoadUint64(&submitted)
			nested, nestedErr = a.SetStateJSONContext(ctx, []byte(`{"nested":true}`))
			if n := atomic.LoadUint64(&submitted) - before; n != 1 {
				return fmt.Errorf("the nested call counted %d submissions", n)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.SetStateJSONContext(ctx, []byte(`{"outer":true}`))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the outer call: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the outer call and its hook's nested call did not complete within a minute")
	}
	if nestedErr != nil {
		t.Fatalf("the nested call: %v", nestedErr)
	}
	jsonEqual(t, nested, []byte(`{"outer":true,"nested":true}`))
	if want := []string{`{"outer":true}`, `{"nested":true}`}; strings.Join(deliveries, " ") != strings.Join(want, " ") {
		t.Fatalf("deliveries %v, want %v", deliveries, want)
	}
}

// A context cancelled while its call waits in the pool's queue (every worker busy with a call
// waiting for the lock another Agent holds) or in the library returns ErrCancelled wrapping
// context.Canceled and writes nothing, and the other calls are not disturbed.
func TestAwaitedCallsCancelledWhileWaitingWriteNothing(t *testing.T) {
	path := tempDB(t)
	a := openAgent(t, path, Options{BusyTimeout: 60 * time.Second})
	if _, err := a.SetState(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	release := holdLock(t, path)
	const calls = 40 // more than the pool's workers: some wait in its queue
	ctx, cancel := context.WithCancel(context.Background())
	wait := startWaiters(t, a, ctx, calls, "c")
	cancel()
	for i, err := range wait() {
		wantCancelled(t, err, "SetStateContext", context.Canceled)
		if strings.Contains(err.Error(), "was not made") {
			t.Fatalf("call %d: %v: it was waiting, so it was made", i, err)
		}
	}
	if err := release(); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	got, v, err := a.GetStateVersionedJSON()
	if err != nil {
		t.Fatal(err)
	}
	if v != 2 {
		t.Fatalf("version %d, want 2 (the first write and the holder's)", v)
	}
	jsonEqual(t, got, []byte(`{"n":1,"holder":1}`))
}

// A read the handle's validated copy answers (this OS thread read the handle, and nothing was
// committed since) completes before the submission returns, with no channel wait; after
// another connection's commit the read goes to a worker and returns the new state.
func TestAwaitedHotReadCompletesWithoutWaiting(t *testing.T) {
	skipOnPostgres(t, "a SQLite file's commit watch validates the copy; on PostgreSQL every read asks the server")
	path := tempDB(t)
	a := openAgent(t, path, Options{})
	other := openAgent(t, path, Options{})
	if _, err := a.SetState(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread() // the validated copy is this thread's
	defer runtime.UnlockOSThread()
	want, err := a.GetStateJSON()
	if err != nil {
		t.Fatal(err)
	}
	before := atomic.LoadUint64(&waited)
	got, v, err := a.GetStateVersionedJSONContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := atomic.LoadUint64(&waited) - before; n != 0 {
		t.Fatalf("the hot read waited for %d completions on a channel", n)
	}
	jsonEqual(t, got, want)
	if v != 1 {
		t.Fatalf("version %d, want 1", v)
	}
	if _, err := other.SetState(map[string]any{"n": 2}); err != nil {
		t.Fatal(err)
	}
	before = atomic.LoadUint64(&waited)
	got, v, err = a.GetStateVersionedJSONContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := atomic.LoadUint64(&waited) - before; n != 1 {
		t.Fatalf("the read after another connection's commit waited for %d completions, want 1", n)
	}
	jsonEqual(t, got, []byte(`{"n":2}`))
	if v != 2 {
		t.Fatalf("version %d, want 2", v)
	}
}

// SetStateContext against SetState on a 1 KiB state in a SQLite file (synchronous=normal), the
// merge patch as JSON and as a map: what an awaited write adds (the hand-off to a library
// worker and the completion's way back) to the same write made in a cgo call. `make bench`
// prints the same pairs, in alternating rounds, at each state size (cmd/agentstate-bench).
func BenchmarkSetStateContext(b *testing.B) {
	a, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{Synchronous: SyncNormal})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	if _, err := a.ReplaceStateJSON(benchState(1024)); err != nil {
		b.Fatal(err)
	}
	patches := make([][]byte, 64)
	maps := make([]map[string]any, 64)
	for i := range patches {
		patches[i] = []byte(fmt.Sprintf(`{"status":"s%d","m1":{"id":%d}}`, i, i))
		if err := json.Unmarshal(patches[i], &maps[i]); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		call func(i int) error
	}{
		{"SetStateJSON", func(i int) error { _, err := a.SetStateJSON(patches[i%64]); return err }},
		{"SetStateJSONContext", func(i int) error { _, err := a.SetStateJSONContext(ctx, patches[i%64]); return err }},
		{"SetState", func(i int) error { _, err := a.SetState(maps[i%64]); return err }},
		{"SetStateContext", func(i int) error { _, err := a.SetStateContext(ctx, maps[i%64]); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := c.call(i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// GetStateJSONContext on a 1 KiB state in a SQLite file, nothing committed meanwhile, made
// only through the Context form, then after a GetStateJSON on the same OS thread, against
// GetStateJSON: what an awaited read costs when the handle's validated copy answers it (see
// agent_submit for when it does; otherwise the read goes to a worker).
func BenchmarkGetStateJSONContext(b *testing.B) {
	a, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	if _, err := a.ReplaceStateJSON(benchState(1024)); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	read := func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := a.GetStateJSONContext(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("ContextOnly", read)
	b.Run("AfterASyncRead", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if _, err := a.GetStateJSON(); err != nil {
			b.Fatal(err)
		}
		read(b)
	})
	b.Run("GetStateJSON", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := a.GetStateJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
