package agentstate

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The storage backend the tests run against (tests/conformance/README.md, "Where the stores
// live"): AGENT_STATE_TEST_BACKEND unset or "sqlite" puts the stores in SQLite files;
// "postgres" puts them on the server AGENT_STATE_TEST_PG_URI, one agent (open option
// agent_id) per store. run-tests.sh runs the tests once per backend.
//
// The tests open their stores with openStore (openAgent does): on PostgreSQL, ":memory:" is a
// fresh agent at each open (private and empty, like an in-memory store) and any other path
// names the agent "go_<hash of the path>_<file name>", the same in every process (the child
// processes of the cross-process tests open the path they are given), and unique because test
// paths are in t.TempDir(). Tests of files, paths and processes' file handling call Open
// directly (on PostgreSQL they run on SQLite files again) or skipOnPostgres.

var (
	testBackendName = os.Getenv("AGENT_STATE_TEST_BACKEND")
	testPGURI       = os.Getenv("AGENT_STATE_TEST_PG_URI")
	memoryStoreSeq  int64
	runStarted      = time.Now().Unix()
)

// TestMain stops a PostgreSQL run at once when no agent can be opened on the server: tests
// that wait for a hook delivery or another goroutine would otherwise wait until the timeout.
func TestMain(m *testing.M) {
	switch testBackendName {
	case "", "sqlite":
	case "postgres":
		if !strings.HasPrefix(testPGURI, "postgres://") && !strings.HasPrefix(testPGURI, "postgresql://") {
			fmt.Fprintf(os.Stderr, "AGENT_STATE_TEST_BACKEND=postgres needs a postgres:// URI in AGENT_STATE_TEST_PG_URI, not %q\n", testPGURI)
			os.Exit(2)
		}
		var opts Options
		if !setAgentID(&opts, newAgentID()) {
			fmt.Fprintln(os.Stderr, "FAIL: agentstate.Options has no AgentID field: the binding cannot open an agent on PostgreSQL")
			os.Exit(1)
		}
		a, err := Open(testPGURI, opts)
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: opening an agent on the server %s: %v\n", testPGURI, err)
			os.Exit(1)
		}
		_ = a.Close()
	default:
		fmt.Fprintf(os.Stderr, "AGENT_STATE_TEST_BACKEND=%s: want sqlite or postgres\n", testBackendName)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// onPostgres reports whether this run's stores are on PostgreSQL; a misconfigured run fails.
func onPostgres(t testing.TB) bool {
	t.Helper()
	switch testBackendName {
	case "", "sqlite":
		return false
	case "postgres":
		if testPGURI == "" {
			t.Fatal("AGENT_STATE_TEST_BACKEND=postgres needs AGENT_STATE_TEST_PG_URI")
		}
		return true
	}
	t.Fatalf("AGENT_STATE_TEST_BACKEND=%s: want sqlite or postgres", testBackendName)
	return false
}

// skipOnPostgres skips a test of SQLite files, paths or :memory: on the PostgreSQL run.
func skipOnPostgres(t testing.TB, why string) {
	t.Helper()
	if onPostgres(t) {
		t.Skip("SQLite only: " + why)
	}
}

// newAgentID is a fresh agent_id: "go_<pid>_<start time>_<n>", used by no other test, runner
// or process sharing the database.
func newAgentID() string {
	return fmt.Sprintf("go_%d_%x_%d", os.Getpid(), runStarted, atomic.AddInt64(&memoryStoreSeq, 1))
}

// agentIDForPath is the agent a store path names on PostgreSQL, the same in every process.
func agentIDForPath(path string) string {
	h := fnv.New64a()
	h.Write([]byte(path))
	base := strings.Map(func(r rune) rune {
		if r < 128 && (r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, filepath.Base(path))
	if len(base) > 100 {
		base = base[:100]
	}
	return fmt.Sprintf("go_%x_%s", h.Sum64(), base)
}

// withAgentID sets opts' agent_id option. The Options field is reached by name (AgentID) so
// that these tests build before and after the binding has it: while it does not, a
// PostgreSQL run fails here, saying so.
func withAgentID(t testing.TB, opts Options, id string) Options {
	t.Helper()
	if !setAgentID(&opts, id) {
		t.Fatalf("agentstate.Options has no AgentID string field: cannot open agent %q on PostgreSQL", id)
	}
	return opts
}

// setAgentID sets opts.AgentID (see withAgentID); false when Options has no such field.
func setAgentID(opts *Options, id string) bool {
	field := reflect.ValueOf(opts).Elem().FieldByName("AgentID")
	if !field.IsValid() || field.Kind() != reflect.String || !field.CanSet() {
		return false
	}
	field.SetString(id)
	return true
}

// openStore opens the store at path on this run's backend (see above).
func openStore(t testing.TB, path string, opts Options) (*Agent, error) {
	t.Helper()
	if !onPostgres(t) {
		return Open(path, opts)
	}
	id := agentIDForPath(path)
	if path == ":memory:" {
		id = newAgentID()
	}
	return Open(testPGURI, withAgentID(t, opts, id))
}

// storeLocation is where a conformance vector's store lives: a fresh SQLite file in the test's
// directory, or the server and a fresh agent_id (every open of the vector sets it).
func storeLocation(t *testing.T) (path, agentID string) {
	if onPostgres(t) {
		return testPGURI, newAgentID()
	}
	return filepath.Join(t.TempDir(), "store.db"), ""
}

// runsOnBackend reports whether a vector's "backends" list (none: every backend) names this
// run's backend.
func runsOnBackend(t *testing.T, v *node) bool {
	backends := member(v, "backends")
	if backends == nil {
		return true
	}
	want := "sqlite"
	if onPostgres(t) {
		want = "postgres"
	}
	for _, b := range backends.vals {
		if b.str == want {
			return true
		}
	}
	return false
}
