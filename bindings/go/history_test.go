package agentstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
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
	wantStatus(t, err, ErrBadHandle, "GetStateVersioned")
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
	e := wantStatus(t, err, ErrRejected, "SetState", "balance would be -5 at version 2")
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
	wantStatus(t, err, ErrRejected, "Restore", "no restores today")
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
	wantStatus(t, a.SetValidator(func(Change) error { return nil }), ErrBadHandle, "SetValidator")
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
