package agentstate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// openAgent opens a store (":memory:" when path is "") on this run's backend (openStore) and
// closes it when the test ends.
func openAgent(t *testing.T, path string, opts Options) *Agent {
	t.Helper()
	if path == "" {
		path = ":memory:"
	}
	a, err := openStore(t, path, opts) // backend_test.go: on PostgreSQL, an agent on the server
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

func tempDB(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "agent.db")
}

// wantStatus checks that err is an *Error of the given status, matching exactly that sentinel,
// with a library message containing each of substrs.
func wantStatus(t *testing.T, err error, want error, substrs ...string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *agentstate.Error", err, err)
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %q: errors.Is(err, %v) is false (status %v)", err, want, e.Status)
	}
	for _, s := range allSentinels {
		if s != want && errors.Is(e, s) && e.Err == nil {
			t.Fatalf("error %q also matches %v", err, s)
		}
	}
	for _, s := range substrs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not contain %q", err, s)
		}
	}
	// One context prefix ("agentstate: <Op>: "), never the C function's name besides.
	if m := cFunctionPrefix.FindString(err.Error()); m != "" {
		t.Fatalf("error %q repeats its context (%q)", err, m)
	}
	return e
}

// cFunctionPrefix finds a library message that still starts with its C function's name.
var cFunctionPrefix = regexp.MustCompile(`(^|: )agent_[a-z_]+: `)

var allSentinels = []error{
	ErrInvalidArgument, ErrBadHandle, ErrJSON, ErrCodec, ErrTooLarge, ErrStorage, ErrBusy,
	ErrHook, ErrConflict, ErrRejected, ErrGap, ErrUnavailable, ErrAuth, ErrCancelled, ErrNewerSchema,
	ErrMigration, ErrPath, ErrTestFailed, ErrPanic,
}

// jsonEqual compares two JSON texts as values (numbers by their text).
func jsonEqual(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	dg := json.NewDecoder(strings.NewReader(string(got)))
	dg.UseNumber()
	dw := json.NewDecoder(strings.NewReader(string(want)))
	dw.UseNumber()
	if err := dg.Decode(&g); err != nil {
		t.Fatalf("bad JSON %s: %v", got, err)
	}
	if err := dw.Decode(&w); err != nil {
		t.Fatalf("bad JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := Marshal(v)
	if err != nil {
		t.Fatalf("Marshal(%#v): %v", v, err)
	}
	return b
}

// chdirTemp makes a fresh temporary directory the working directory for the rest of the test
// (restored at its end) and returns it: where relative paths, and paths that look like URIs,
// are resolved.
func chdirTemp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chdir(cwd) })
	return dir
}
