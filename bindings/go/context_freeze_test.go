package agentstate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A PostgreSQL server that does not answer (its processes stopped with SIGSTOP: a hung host, a
// network cut): no server-side timeout fires and nothing refuses the connection, so only the
// context can end a call that waits for it before BusyTimeout + ServerTimeout. On a server of
// the test's own (tests/pg/server.sh), never the shared one the other tests use.
// crates/agent_state/tests/postgres/cancel.rs is the same scenario in Rust.

// privateServer starts a PostgreSQL server of the test's own in a fresh directory under
// os.TempDir() (tests/pg/server.sh start: a Unix socket in that directory, no TCP port) and
// returns its URI and directory; the server is stopped and the directory removed when the
// test ends. A server that cannot start fails the test under CI=true, else skips it.
func privateServer(t *testing.T) (uri, dir string) {
	t.Helper()
	dir = filepath.Join(os.TempDir(), fmt.Sprintf("agentstate-go-freeze-%d-%d", os.Getpid(), time.Now().UnixNano()))
	port := strconv.Itoa(5433 + os.Getpid()%500) // as the Rust tests' second server
	script := filepath.Join("..", "..", "tests", "pg", "server.sh")
	run := func(args ...string) ([]byte, string, error) {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "AGENT_STATE_PG_PORT="+port)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return out, stderr.String(), err
	}
	// Registered first, so it runs last: after the thaw and the Agents' Close. Also when the
	// start failed halfway (stop removes whatever is there).
	t.Cleanup(func() {
		if _, stderr, err := run("stop", dir); err != nil {
			t.Errorf("server.sh stop %s: %v\n%s", dir, err, stderr)
		}
	})
	out, stderr, err := run("start", dir)
	if err != nil {
		msg := fmt.Sprintf("cannot start a private PostgreSQL server (server.sh start %s): %v\n%s", dir, err, stderr)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	uri = strings.TrimSpace(string(out))
	if !strings.HasPrefix(uri, "postgresql://") {
		t.Fatalf("server.sh start printed %q, not a URI", out)
	}
	return uri, dir
}

// freezeServer stops the server in dir (the postmaster first, so that it starts no process
// meanwhile, then its children) and returns thaw, which resumes them (SIGCONT). thaw is also
// registered with t.Cleanup before the first SIGSTOP is sent, so the server is resumed however
// the test ends (a failure, t.Fatal, a panic); calling it again does nothing.
func freezeServer(t *testing.T, dir string) (thaw func()) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatalf("the server's pid: %v", err)
	}
	line, _, _ := strings.Cut(string(text), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		t.Fatalf("the server's pid: %q in postmaster.pid: %v", line, err)
	}
	signal := func(sig syscall.Signal, name string) error {
		if err := syscall.Kill(pid, sig); err != nil {
			return fmt.Errorf("kill -%s %d: %v", name, pid, err)
		}
		// Its children; pkill exits 1 when there is none (not expected, but not an error).
		out, err := exec.Command("pkill", "-"+name, "-P", strconv.Itoa(pid)).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 1) {
			return fmt.Errorf("pkill -%s -P %d: %v %s", name, pid, err, out)
		}
		return nil
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			if err := signal(syscall.SIGCONT, "CONT"); err != nil {
				t.Errorf("resuming the server: %v", err)
			}
		})
	}
	t.Cleanup(thaw)
	if err := signal(syscall.SIGSTOP, "STOP"); err != nil {
		t.Fatalf("freezing the server: %v", err)
	}
	return thaw
}

func TestContextCancelsCallsToAServerThatDoesNotAnswer(t *testing.T) {
	if !onPostgres(t) {
		t.Skip("PostgreSQL only: freezes a PostgreSQL server of its own (SIGSTOP); the SQLite run has no server to freeze")
	}
	uri, dir := privateServer(t)
	// Client bounds far beyond the contexts': only a context can end the waits below.
	a, err := Open(uri, withAgentID(t, Options{BusyTimeout: 30 * time.Second, ServerTimeout: 30 * time.Second}, newAgentID()))
	if err != nil {
		t.Fatalf("Open(%q): %v", uri, err)
	}
	t.Cleanup(func() { // after the thaw (registered later, run earlier), before the server stops
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if _, err := a.SetState(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	// A generous bound for a loaded machine: the point is that the context, not the client's
	// 30 + 30 s, ended the call.
	const bound = 10 * time.Second
	before := runtime.NumGoroutine()
	thaw := freezeServer(t, dir)

	// A write under a 300 ms deadline: nothing answers its first statement.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	start := time.Now()
	st, err := a.SetStateContext(ctx, map[string]any{"n": 2})
	writeTook, afterDeadline := time.Since(start), time.Since(deadline)
	if st != nil {
		t.Fatalf("a cancelled write returned a state: %v", st)
	}
	wantCancelled(t, err, "SetStateContext", context.DeadlineExceeded)
	if strings.Contains(err.Error(), "was not made") {
		t.Fatalf("the write was not made: %v", err)
	}
	if writeTook > bound {
		t.Fatalf("the write with a 300 ms deadline took %v", writeTook)
	}

	// A read cancelled by cancel() from another goroutine, 200 ms after the read started.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	started, cancelledAt := make(chan struct{}), make(chan time.Time, 1)
	go func() {
		<-started
		time.Sleep(200 * time.Millisecond) // not synchronisation: the read is cancelled whenever this fires
		cancelledAt <- time.Now()
		cancel2()
	}()
	start = time.Now()
	close(started)
	_, err = a.GetStateContext(ctx2)
	readTook, returned := time.Since(start), time.Now()
	afterCancel := returned.Sub(<-cancelledAt)
	wantCancelled(t, err, "GetStateContext", context.Canceled)
	if strings.Contains(err.Error(), "was not made") {
		t.Fatalf("the read was not made: %v", err)
	}
	if readTook > bound {
		t.Fatalf("the read cancelled after 200 ms took %v", readTook)
	}
	waitGoroutines(t, before)
	t.Logf("frozen server (busy and server timeouts 30 s): the write under a 300 ms deadline returned after %v (%v after the deadline), "+
		"the read cancelled after 200 ms after %v (%v after cancel())", writeTook, afterDeadline, readTook, afterCancel)

	// Running again: the same Agent carries on (a new connection), and the cancelled write
	// wrote nothing.
	thaw()
	got, v, err := a.GetStateVersionedJSON()
	if err != nil {
		t.Fatalf("GetStateVersionedJSON after the server resumed: %v", err)
	}
	if v != 1 {
		t.Fatalf("version %d after the cancelled write, want 1", v)
	}
	jsonEqual(t, got, []byte(`{"n":1}`))
	ctx3, cancel3 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel3()
	out, v, err := a.SetStateIfJSONContext(ctx3, 1, []byte(`{"n":3}`))
	if err != nil {
		t.Fatalf("SetStateIfJSONContext after the server resumed: %v", err)
	}
	if v != 2 {
		t.Fatalf("version %d after the next write, want 2", v)
	}
	jsonEqual(t, out, []byte(`{"n":3}`))
}
