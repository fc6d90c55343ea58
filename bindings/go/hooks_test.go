package agentstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

type delivery struct{ next, prev, patch string }

func TestHookArguments(t *testing.T) {
	a := openAgent(t, "", Options{InitialState: map[string]any{"status": "idle"}})
	var got []delivery
	var nilPatch []bool
	if _, err := a.OnStateChanged(func(next, prev, patch json.RawMessage) error {
		got = append(got, delivery{string(next), string(prev), string(patch)})
		nilPatch = append(nilPatch, patch == nil)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetState(map[string]any{"status": "processing"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReplaceState(map[string]any{"r": 1}); err != nil {
		t.Fatal(err)
	}
	want := []delivery{
		{`{"status":"processing"}`, `{"status":"idle"}`, `{"status":"processing"}`},
		{`{"r":1}`, `{"status":"processing"}`, ``},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || nilPatch[0] || !nilPatch[1] {
		t.Fatalf("deliveries %q (nil patch %v), want %q", got, nilPatch, want)
	}
	// Failed writes deliver nothing.
	a.SetStateJSON([]byte(`{"a":1,"a":1}`))
	if len(got) != 2 {
		t.Fatalf("a failed write was delivered: %q", got[2:])
	}
}

func TestHooksRunInRegistrationOrderAndCanBeRemoved(t *testing.T) {
	a := openAgent(t, "", Options{})
	var order []string
	mk := func(name string) StateChangedFunc {
		return func(_, _, _ json.RawMessage) error { order = append(order, name); return nil }
	}
	id1, _ := a.OnStateChanged(mk("one"))
	id2, _ := a.OnStateChanged(mk("two"))
	_, _ = a.OnStateChanged(mk("three"))
	if id1 == id2 || id1 == 0 {
		t.Fatalf("ids %d %d", id1, id2)
	}
	a.SetState(map[string]any{"x": 1})
	if err := a.RemoveHook(id2); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, a.RemoveHook(id2), ErrInvalidArgument, "no hook with id")
	a.SetState(map[string]any{"x": 2})
	if strings.Join(order, ",") != "one,two,three,one,three" {
		t.Fatalf("order %v", order)
	}
}

func TestHookErrorsAndPanicsComeBackToTheCaller(t *testing.T) {
	a := openAgent(t, "", Options{})
	first := errors.New("first failed")
	var calls int
	a.OnStateChanged(func(_, _, _ json.RawMessage) error { calls++; return first })
	a.OnStateChanged(func(_, _, _ json.RawMessage) error { calls++; panic("hook exploded") })
	a.OnStateChanged(func(_, _, _ json.RawMessage) error { calls++; panic(fmt.Errorf("wrapped: %w", first)) })
	a.OnStateChanged(func(_, _, _ json.RawMessage) error { calls++; return nil })

	_, err := a.SetState(map[string]any{"x": 1})
	e := wantStatus(t, err, ErrHook, "first failed", "hook panicked: hook exploded")
	if calls != 4 {
		t.Fatalf("%d hooks ran, want all 4", calls)
	}
	if !errors.Is(err, first) || len(e.HookErrors) != 3 {
		t.Fatalf("hook errors %v", e.HookErrors)
	}
	var pe *PanicError
	if !errors.As(e.HookErrors[1], &pe) || pe.Value != "hook exploded" || !strings.Contains(string(pe.Stack), "hooks_test.go") {
		t.Fatalf("panic error %#v", e.HookErrors[1])
	}
	if !errors.Is(e.HookErrors[2], first) {
		t.Fatal("a panic with an error value does not unwrap to it")
	}
	// ReplaceState too, and the change is committed.
	_, err = a.ReplaceState(map[string]any{"y": 1})
	wantStatus(t, err, ErrHook, "ReplaceState")
	if raw, _ := a.GetStateJSON(); string(raw) != `{"y":1}` {
		t.Fatalf("state %s", raw)
	}
	if n := pendingHookErrorCount(); n != 0 {
		t.Fatalf("%d hook error records left behind", n)
	}
}

func TestNestedWritesFromAHook(t *testing.T) {
	a := openAgent(t, "", Options{})
	var seen []delivery
	nestedFailure := errors.New("nested delivery failed")
	a.OnStateChanged(func(next, prev, patch json.RawMessage) error {
		seen = append(seen, delivery{string(next), string(prev), string(patch)})
		switch string(patch) {
		case `{"step":1}`:
			// A write from inside the hook: committed now, delivered after this hook returns.
			st, err := a.SetState(map[string]any{"step": 2})
			if err != nil || st["step"] != json.Number("2") {
				return fmt.Errorf("nested SetState: %v %v", st, err)
			}
			if len(seen) != 1 {
				return errors.New("nested change delivered in place")
			}
			cur, err := a.GetStateJSON()
			if err != nil || string(cur) != `{"step":2}` {
				return fmt.Errorf("GetStateJSON in hook: %s %v", cur, err)
			}
		case `{"step":2}`:
			return nestedFailure
		}
		return nil
	})
	_, err := a.SetState(map[string]any{"step": 1})
	// The nested change's hook failure is reported to the outermost call on this goroutine,
	// which is the one that runs that delivery.
	wantStatus(t, err, ErrHook)
	if !errors.Is(err, nestedFailure) {
		t.Fatalf("err %v", err)
	}
	want := []delivery{{`{"step":1}`, `{}`, `{"step":1}`}, {`{"step":2}`, `{"step":1}`, `{"step":2}`}}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("deliveries %q, want %q", seen, want)
	}
}

func TestCloseAndRegistrationFromInsideAHook(t *testing.T) {
	a, err := openStore(t, ":memory:", Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := liveHookCount()
	var late int
	var selfID HookID
	selfID, _ = a.OnStateChanged(func(_, _, patch json.RawMessage) error {
		if string(patch) == `{"register":true}` {
			if _, err := a.OnStateChanged(func(_, _, _ json.RawMessage) error { late++; return nil }); err != nil {
				return err
			}
			return a.RemoveHook(selfID)
		}
		return a.Close()
	})
	if _, err := a.SetState(map[string]any{"register": true}); err != nil {
		t.Fatal(err)
	}
	if liveHookCount() != base+1 {
		t.Fatalf("live hooks %d, want %d", liveHookCount(), base+1)
	}
	a.OnStateChanged(func(_, _, _ json.RawMessage) error { return a.Close() })
	if _, err := a.SetState(map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	if late != 1 {
		t.Fatalf("late hook ran %d times", late)
	}
	_, err = a.GetState()
	wantStatus(t, err, ErrBadHandle)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if liveHookCount() != base {
		t.Fatalf("live hooks %d after close, want %d", liveHookCount(), base)
	}
}

// Every registration's cgo.Handle is deleted exactly once: on RemoveHook, on Close, or right
// away when registration fails; re-registering in a loop leaks nothing.
func TestHookHandlesAreReleased(t *testing.T) {
	base := liveHookCount()
	a, err := openStore(t, ":memory:", Options{})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(_, _, _ json.RawMessage) error { return nil }
	for i := 0; i < 1000; i++ {
		id, err := a.OnStateChanged(noop)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.RemoveHook(id); err != nil {
			t.Fatal(err)
		}
		if err := a.SetInitialStateFunc(func() (any, error) { return map[string]any{}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := liveHookCount() - base; n != 1 {
		t.Fatalf("%d hook handles alive, want 1 (the initial-state function)", n)
	}
	if err := a.SetInitialStateFunc(nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		a.OnStateChanged(noop)
	}
	a.SetInitialStateFunc(func() (any, error) { return map[string]any{}, nil })
	if n := liveHookCount() - base; n != 11 {
		t.Fatalf("%d hook handles alive, want 11", n)
	}
	a.Close()
	if n := liveHookCount() - base; n != 0 {
		t.Fatalf("%d hook handles alive after Close", n)
	}
	// Failed registrations (closed handle) release their handle at once.
	a.OnStateChanged(noop)
	a.SetInitialStateFunc(func() (any, error) { return nil, nil })
	if n := liveHookCount() - base; n != 0 {
		t.Fatalf("%d hook handles alive after failed registrations", n)
	}
}

func TestInitialStateFunc(t *testing.T) {
	path := tempDB(t)
	a := openAgent(t, path, Options{InitialState: map[string]any{"from": "option"}})
	var calls int
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	if err := a.SetInitialStateFunc(func() (any, error) {
		calls++
		return map[string]any{"from": "func", "at": at}, nil
	}); err != nil {
		t.Fatal(err)
	}
	st, err := a.GetState()
	if err != nil || st["from"] != "func" || st["at"] != at {
		t.Fatalf("GetState = %v, %v", st, err)
	}
	a.GetState()
	if calls != 2 {
		t.Fatalf("called %d times, want every time a default is needed", calls)
	}
	// The first write merges into it and stores; then it is no longer needed.
	if _, err := a.SetState(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	raw, _ := a.GetStateJSON()
	if string(raw) != `{"at":{"$date":"2026-01-02T03:04:05.006Z"},"from":"func","n":1}` || calls != 3 {
		t.Fatalf("state %s after %d calls", raw, calls)
	}

	b := openAgent(t, "", Options{})
	failure := errors.New("no default today")
	b.SetInitialStateFunc(func() (any, error) { return nil, failure })
	_, err = b.GetState()
	wantStatus(t, err, ErrHook, "GetState", "no default today")
	if !errors.Is(err, failure) {
		t.Fatal(err)
	}
	_, err = b.SetState(map[string]any{"x": 1})
	if !errors.Is(err, ErrHook) || !errors.Is(err, failure) {
		t.Fatalf("SetState: %v", err)
	}
	b.SetInitialStateFunc(func() (any, error) { panic("no") })
	_, err = b.GetState()
	var pe *PanicError
	if !errors.Is(err, ErrHook) || !errors.As(err, &pe) || pe.Value != "no" {
		t.Fatalf("panic: %v", err)
	}
	// An unencodable value is the function's failure, with the codec error inside.
	b.SetInitialStateFunc(func() (any, error) { return map[string]any{"c": make(chan int)}, nil })
	_, err = b.GetState()
	if !errors.Is(err, ErrHook) || !errors.Is(err, ErrCodec) {
		t.Fatalf("unencodable: %v", err)
	}
	// A value the library refuses is the library's error for the call.
	b.SetInitialStateFunc(func() (any, error) { return map[string]any{"s": Set{1, 1}}, nil })
	_, err = b.GetState()
	wantStatus(t, err, ErrCodec, "initial-state hook")
	b.SetInitialStateFunc(nil)
	if raw, err := b.GetStateJSON(); err != nil || string(raw) != `{}` {
		t.Fatalf("after removal: %s, %v", raw, err)
	}
	if n := pendingHookErrorCount(); n != 0 {
		t.Fatalf("%d hook error records left behind", n)
	}
}

// The library documents agent_get_state's errors from an initial-state hook's answer as
// HOOK / JSON / CODEC / TOO_LARGE, but an answer that is not an object gives INVALID_ARGUMENT.
func TestInitialStateFuncNotAnObject(t *testing.T) {
	b := openAgent(t, "", Options{})
	b.SetInitialStateFunc(func() (any, error) { return []int{1}, nil })
	_, err := b.GetState()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err %v", err)
	}
	if e.Status != StatusInvalidArgument {
		t.Fatalf("status %v: %v", e.Status, err)
	}
	if !strings.Contains(err.Error(), "must be a JSON object") {
		t.Fatal(err)
	}
}

// Hook errors are reported to the call that triggered them, also with many goroutines writing
// at once, each on whatever OS thread it runs.
func TestHookErrorsGoToTheTriggeringCall(t *testing.T) {
	a := openAgent(t, "", Options{})
	a.OnStateChanged(func(_, _, patch json.RawMessage) error {
		var p map[string]int
		if err := json.Unmarshal(patch, &p); err != nil {
			return err
		}
		for k, v := range p {
			if v%3 == 0 {
				return fmt.Errorf("refused %s=%d", k, v)
			}
		}
		return nil
	})
	const goroutines, writes = 16, 60
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
				switch {
				case i%3 == 0 && (err == nil || !strings.HasSuffix(err.Error(), want)):
					errs <- fmt.Sprintf("%s: want %q, got %v", key, want, err)
				case i%3 != 0 && err != nil:
					errs <- fmt.Sprintf("%s=%d: unexpected %v", key, i, err)
				}
				if i%5 == 0 {
					runtime.Gosched()
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

func TestPanicNilInAHook(t *testing.T) {
	a := openAgent(t, "", Options{})
	a.OnStateChanged(func(_, _, _ json.RawMessage) error { panic(nil) })
	_, err := a.SetState(map[string]any{"x": 1})
	var pe *PanicError
	if !errors.Is(err, ErrHook) || !errors.As(err, &pe) || pe.Value != nil {
		t.Fatalf("panic(nil): %v", err)
	}
}

// A write to another Agent from inside a hook is delivered after the hook returns; its hook's
// failure is reported to the outermost call.
func TestNestedWriteToAnotherAgent(t *testing.T) {
	a := openAgent(t, "", Options{})
	b := openAgent(t, "", Options{})
	bFailure := errors.New("b's hook failed")
	var order []string
	b.OnStateChanged(func(_, _, _ json.RawMessage) error { order = append(order, "b"); return bFailure })
	var nested error
	a.OnStateChanged(func(_, _, _ json.RawMessage) error {
		_, nested = b.SetState(map[string]any{"from": "a's hook"})
		order = append(order, "a")
		return nil
	})
	_, err := a.SetState(map[string]any{"x": 1})
	if nested != nil {
		t.Fatalf("the nested call failed: %v", nested)
	}
	if !errors.Is(err, ErrHook) || !errors.Is(err, bFailure) {
		t.Fatalf("outer call: %v", err)
	}
	if strings.Join(order, ",") != "a,b" {
		t.Fatalf("order %v", order)
	}
}
