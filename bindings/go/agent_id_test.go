package agentstate

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// A PostgreSQL URI whose Unix-socket directory does not exist: nothing can answer it.
const unreachableURI = "postgresql:///postgres?host=/nonexistent-agent-state-dir&port=1&user=x"

func TestUnavailableIsStatus12(t *testing.T) {
	if StatusUnavailable != 12 || StatusUnavailable.String() != "AGENT_ERR_UNAVAILABLE" {
		t.Fatal(StatusUnavailable)
	}
	if statusNameFromC(12) != "AGENT_ERR_UNAVAILABLE" {
		t.Fatal(statusNameFromC(12))
	}
	if !errors.Is(&Error{Status: 12}, ErrUnavailable) || errors.Is(&Error{Status: 12}, ErrStorage) {
		t.Fatal("ErrUnavailable")
	}
}

func TestOptionsJSONAgentIDAndMaxConnections(t *testing.T) {
	cases := []struct {
		o    Options
		want string
	}{
		{Options{AgentID: "a"}, `{"agent_id":"a"}`},
		{Options{AgentID: "é\"\\", MaxConnections: 8}, `{"agent_id":"é\"\\","max_connections":8}`},
		{Options{MaxConnections: -1}, `{"max_connections":-1}`}, // refused by the library
		{Options{AgentID: ""}, `{}`},
	}
	for _, c := range cases {
		got, err := c.o.optionsJSON()
		if err != nil || got != c.want {
			t.Errorf("optionsJSON(%+v) = %s, %v; want %s", c.o, got, err, c.want)
		}
	}
}

// Open a URI from an empty working directory: the library takes it as a server, never as a
// file name (nothing is created), and reports the unreachable server as ErrUnavailable.
func TestAnUnreachableServerIsErrUnavailable(t *testing.T) {
	dir := chdirTemp(t)
	for _, uri := range []string{
		unreachableURI,
		"postgres:///postgres?host=/nonexistent-agent-state-dir&port=1&user=x",
		"postgresql:///db//with//slashes?host=/nonexistent-agent-state-dir&port=1",
	} {
		a, err := Open(uri, Options{AgentID: "a", BusyTimeout: 2 * time.Second})
		if a != nil {
			a.Close()
		}
		wantStatus(t, err, ErrUnavailable, "Open")
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("the URI was taken for a file name: %v %v", entries, err)
	}
}

func TestBadAgentIDIsInvalidArgument(t *testing.T) {
	path := tempDB(t)
	for _, id := range []string{strings.Repeat("x", 256), strings.Repeat("é", 128), "a\xffb"} {
		_, err := Open(path, Options{AgentID: id})
		wantStatus(t, err, ErrInvalidArgument, "Open")
		if !strings.Contains(err.Error(), "agent_id") && !strings.Contains(err.Error(), "AgentID") {
			t.Errorf("%q: %v does not name the option", id, err)
		}
	}
	for _, n := range []int{-1, 1001} {
		_, err := Open(":memory:", Options{MaxConnections: n})
		wantStatus(t, err, ErrInvalidArgument, "max_connections")
	}
}

func TestLongestAgentIDAndMaxConnectionsAreAccepted(t *testing.T) {
	path := tempDB(t)
	for _, o := range []Options{
		{AgentID: strings.Repeat("x", 255)},
		{AgentID: strings.Repeat("é", 127) + "x", MaxConnections: 1},
		{MaxConnections: 1000},
	} {
		a := openAgent(t, path, o)
		if _, err := a.SetState(map[string]any{"ok": true}); err != nil {
			t.Fatal(err)
		}
	}
}

// Needs the SQLite backend's many agents per file.
func TestAgentsOfOneFileAreIsolated(t *testing.T) {
	skipOnPostgres(t, "agents of one SQLite file (the PostgreSQL run maps each path to an agent)")
	path := tempDB(t)
	a := openAgent(t, path, Options{AgentID: "a", InitialState: map[string]any{"who": nil}})
	b := openAgent(t, path, Options{AgentID: "b", InitialState: map[string]any{"who": nil}})
	if _, err := a.SetState(map[string]any{"who": "a"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.GetStateJSON(); string(got) != `{"who":null}` {
		t.Fatalf("b sees %s", got)
	}
	for _, p := range []map[string]any{{"who": "b"}, {"n": 2}} {
		if _, err := b.SetState(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, v, _ := a.GetStateVersioned(); v != 1 {
		t.Errorf("a at version %d, want 1", v)
	}
	if _, v, _ := b.GetStateVersioned(); v != 2 {
		t.Errorf("b at version %d, want 2", v)
	}
	if got, _ := openAgent(t, path, Options{AgentID: "a"}).GetStateJSON(); string(got) != `{"who":"a"}` {
		t.Errorf("another handle on a sees %s", got)
	}
	if got, _ := openAgent(t, path, Options{AgentID: "c"}).GetStateJSON(); string(got) != `{}` {
		t.Errorf("a new agent c sees %s", got)
	}
}
