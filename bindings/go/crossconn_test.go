package agentstate

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// Reads through one handle see what another handle on the same file committed, every time,
// also right after the reader's own commit.
func TestReadsSeeOtherHandlesCommits(t *testing.T) {
	path := tempDB(t)
	a := openAgent(t, path, Options{Synchronous: SyncNormal})
	b := openAgent(t, path, Options{Synchronous: SyncNormal})
	for i := 0; i < 300; i++ {
		w, r := a, b
		if i%3 == 0 {
			w, r = b, a
		}
		if i%5 == 0 {
			if _, err := r.SetState(map[string]any{"own": i}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.SetState(map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
		var st struct{ I int }
		if err := r.GetStateInto(&st); err != nil {
			t.Fatal(err)
		}
		if st.I != i {
			t.Fatalf("step %d: the other handle reads i=%d", i, st.I)
		}
	}
}

// The same across processes: a child process writes, this one reads.
func TestReadsSeeOtherProcessesCommits(t *testing.T) {
	if os.Getenv("AGENTSTATE_CHILD_DB") != "" {
		t.Skip("child")
	}
	path := tempDB(t)
	a := openAgent(t, path, Options{})
	if _, err := a.SetState(map[string]any{"i": -1}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		a.GetStateJSON() // warm the reader's cache
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), "AGENTSTATE_CHILD_DB="+path, "AGENTSTATE_CHILD_I="+strconv.Itoa(i))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		var st struct{ I int }
		if err := a.GetStateInto(&st); err != nil {
			t.Fatal(err)
		}
		if st.I != i {
			t.Fatalf("after the child wrote i=%d this process reads i=%d", i, st.I)
		}
	}
}

// TestChildWriter is the child process of TestReadsSeeOtherProcessesCommits.
func TestChildWriter(t *testing.T) {
	path := os.Getenv("AGENTSTATE_CHILD_DB")
	if path == "" {
		t.Skip("only run as a child process")
	}
	i, _ := strconv.Atoi(os.Getenv("AGENTSTATE_CHILD_I"))
	a, err := openStore(t, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.SetState(map[string]any{"i": i}); err != nil {
		t.Fatal(err)
	}
}

// A hook running in one goroutine keeps its Go function alive while another goroutine removes
// it or closes the Agent: the library frees user_data only when that delivery ends.
func TestHookOutlivesRemovalWhileRunning(t *testing.T) {
	for _, closeIt := range []bool{false, true} {
		base := liveHookCount()
		a, err := openStore(t, ":memory:", Options{})
		if err != nil {
			t.Fatal(err)
		}
		entered, release := make(chan struct{}), make(chan struct{})
		id, _ := a.OnStateChanged(func(_, _, _ json.RawMessage) error {
			close(entered)
			<-release
			return nil
		})
		done := make(chan error)
		go func() {
			_, err := a.SetState(map[string]any{"x": 1})
			done <- err
		}()
		<-entered
		if closeIt {
			err = a.Close()
		} else {
			err = a.RemoveHook(id)
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := liveHookCount() - base; n != 1 {
			t.Fatalf("close=%v: the running hook was released early (%d alive)", closeIt, n)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := liveHookCount() - base; n != 0 {
			t.Fatalf("close=%v: %d alive after the delivery ended", closeIt, n)
		}
		a.Close()
	}
}

// Close from inside the initial-state function is refused (ErrBusy) and leaves the Agent open,
// so that a later Close works.
func TestCloseFromInitialStateFunc(t *testing.T) {
	a, err := openStore(t, ":memory:", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var inner error
	a.SetInitialStateFunc(func() (any, error) {
		inner = a.Close()
		return map[string]any{}, nil
	})
	if _, err := a.GetState(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, inner, ErrBusy, "Close")
	if _, err := a.GetState(); err != nil {
		t.Fatalf("the Agent was closed after all: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = a.GetState()
	wantStatus(t, err, ErrBadHandle)
}

// Another Agent may be used from inside the initial-state function.
func TestInitialStateFuncUsesAnotherAgent(t *testing.T) {
	src := openAgent(t, "", Options{InitialState: map[string]any{"template": "v1"}})
	a := openAgent(t, "", Options{})
	a.SetInitialStateFunc(func() (any, error) { return src.GetStateJSON() })
	raw, err := a.GetStateJSON()
	if err != nil || string(raw) != `{"template":"v1"}` {
		t.Fatalf("%s, %v", raw, err)
	}
}
