package agentstate

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestVersion(t *testing.T) {
	if v := Version(); v == "" || strings.Count(v, ".") != 2 {
		t.Fatalf("Version() = %q", v)
	}
}

// The library's version is the workspace's, [workspace.package] version in ../../Cargo.toml
// (the one place it is written; this package has no version of its own, its module version is
// the repository's tag). Skipped outside a checkout (a copy of the module, as in
// tests/install/run.sh).
func TestVersionIsTheWorkspaces(t *testing.T) {
	manifest, err := os.ReadFile(filepath.Join("..", "..", "Cargo.toml"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no ../../Cargo.toml: not a checkout of the repository")
	} else if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?ms)^\[workspace\.package\][^\[]*?^version\s*=\s*"([^"]+)"`).FindSubmatch(manifest)
	if m == nil {
		t.Fatal("no [workspace.package] version in ../../Cargo.toml")
	}
	if v := Version(); v != string(m[1]) {
		t.Fatalf("Version() = %q, the workspace's version %q", v, m[1])
	}
}

func TestInitialStateAndReadsNeverStore(t *testing.T) {
	path := tempDB(t)
	a, err := openStore(t, path, Options{InitialState: map[string]any{"status": "idle", "at": 0}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := a.GetState()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st, map[string]any{"status": "idle", "at": json.Number("0")}) {
		t.Fatalf("initial state %v", st)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Reading did not store: another initial state shows through on reopen.
	b := openAgent(t, path, Options{InitialState: map[string]any{"other": true}})
	raw, err := b.GetStateJSON()
	if err != nil || string(raw) != `{"other":true}` {
		t.Fatalf("GetStateJSON = %s, %v", raw, err)
	}
	// The first write starts from the initial state and stores it.
	if raw, err = b.SetStateJSON([]byte(`{"n":1}`)); err != nil || string(raw) != `{"other":true,"n":1}` {
		t.Fatalf("SetStateJSON = %s, %v", raw, err)
	}
	c := openAgent(t, path, Options{})
	if raw, err = c.GetStateJSON(); err != nil || string(raw) != `{"other":true,"n":1}` {
		t.Fatalf("after reopen: %s, %v", raw, err)
	}
}

func TestDefaultInitialStateIsEmptyObject(t *testing.T) {
	a := openAgent(t, "", Options{})
	raw, err := a.GetStateJSON()
	if err != nil || string(raw) != `{}` {
		t.Fatalf("GetStateJSON = %s, %v", raw, err)
	}
	st, err := a.GetState()
	if err != nil || st == nil || len(st) != 0 {
		t.Fatalf("GetState = %#v, %v", st, err)
	}
}

func TestSetStateMergesRFC7396(t *testing.T) {
	a := openAgent(t, "", Options{})
	if _, err := a.ReplaceStateJSON([]byte(`{"status":"processing","job":{"id":"j1","step":2,"note":"retrying"}}`)); err != nil {
		t.Fatal(err)
	}
	// The reference page's example: recursive merge, null deletes, untouched keys survive.
	st, err := a.SetState(map[string]any{"job": map[string]any{"step": 3, "note": nil}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"status": "processing", "job": map[string]any{"id": "j1", "step": json.Number("3")}}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("SetState returned %v, want %v", st, want)
	}
	raw, _ := a.GetStateJSON()
	if string(raw) != `{"status":"processing","job":{"id":"j1","step":3}}` {
		t.Fatalf("stored %s", raw)
	}
	// Arrays and tagged values replace whole; new members are appended in patch order.
	if raw, err = a.SetStateJSON([]byte(`{"z":[1],"a":{"$set":[1]},"status":null}`)); err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"job":{"id":"j1","step":3},"z":[1],"a":{"$set":[1]}}` {
		t.Fatalf("merged %s", raw)
	}
	if raw, err = a.SetStateJSON([]byte(`{"z":[2],"a":{"x":1}}`)); err != nil || string(raw) != `{"job":{"id":"j1","step":3},"z":[2],"a":{"x":1}}` {
		t.Fatalf("merged %s, %v", raw, err)
	}
}

type convState struct {
	Status    string    `json:"status"`
	LastReply string    `json:"lastReply"`
	At        time.Time `json:"at"`
	Job       *struct {
		ID   string `json:"id"`
		Step int    `json:"step"`
	} `json:"job,omitempty"`
}

func TestTypedStructs(t *testing.T) {
	at := time.Date(2026, 11, 30, 3, 6, 44, 123e6, time.UTC)
	a := openAgent(t, "", Options{InitialState: convState{Status: "idle", At: at}})
	var s convState
	if err := a.GetStateInto(&s); err != nil {
		t.Fatal(err)
	}
	if s.Status != "idle" || !s.At.Equal(at) || s.Job != nil {
		t.Fatalf("GetStateInto: %+v", s)
	}
	later := at.Add(time.Second)
	if _, err := a.SetState(struct {
		Status string    `json:"status"`
		At     time.Time `json:"at"`
	}{"processing", later}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetStateJSON([]byte(`{"job":{"id":"j1","step":2}}`)); err != nil {
		t.Fatal(err)
	}
	s = convState{}
	if err := a.GetStateInto(&s); err != nil {
		t.Fatal(err)
	}
	if s.Status != "processing" || !s.At.Equal(later) || s.Job == nil || s.Job.ID != "j1" || s.Job.Step != 2 {
		t.Fatalf("GetStateInto: %+v", s)
	}
	// A mismatching target is an ErrCodec error that names the place.
	var wrong struct {
		At int `json:"at"`
	}
	wantStatus(t, a.GetStateInto(&wrong), ErrCodec, "GetStateInto", "$date value", "(at .at)")
	wantStatus(t, a.GetStateInto(wrong), ErrInvalidArgument, "non-nil pointer")
}

func TestReplaceState(t *testing.T) {
	a := openAgent(t, "", Options{InitialState: map[string]any{"keep": "no"}})
	st, err := a.ReplaceState(map[string]any{"only": []any{1, "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st, map[string]any{"only": []any{json.Number("1"), "x"}}) {
		t.Fatalf("ReplaceState returned %v", st)
	}
	raw, _ := a.GetStateJSON()
	if string(raw) != `{"only":[1,"x"]}` {
		t.Fatalf("stored %s", raw)
	}
	if raw, err = a.ReplaceStateJSON([]byte(` { "b" : 1.50 , "a" : 2 } `)); err != nil || string(raw) != `{"b":1.50,"a":2}` {
		t.Fatalf("ReplaceStateJSON = %s, %v (want compact, order and number text kept)", raw, err)
	}
}

// Every tagged type survives Go -> library -> Go unchanged, and the stored text is canonical.
func TestLosslessRoundTripThroughTheLibrary(t *testing.T) {
	a := openAgent(t, tempDB(t), Options{})
	in := sampleAllTypes()
	if _, err := a.ReplaceState(in); err != nil {
		t.Fatal(err)
	}
	var out allTypes
	if err := a.GetStateInto(&out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the value:\n in %#v\nout %#v", in, out)
	}
	// Generic values: decode, write back, same stored text (in sorted member order).
	raw, _ := a.GetStateJSON()
	st, err := a.GetState()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReplaceState(st); err != nil {
		t.Fatal(err)
	}
	raw2, _ := a.GetStateJSON()
	jsonEqual(t, raw2, raw)
	if string(raw2) != string(mustJSON(t, st)) {
		t.Fatalf("stored %s\nwant   %s", raw2, mustJSON(t, st))
	}
	// Numbers keep their exact value and digits, beyond float64 precision, through Go and
	// back. (The library normalizes an exponent marker, 1E2 to 1e+2, as its README says.)
	if _, err := a.ReplaceStateJSON([]byte(`{"n":[1.0,1E2,123456789012345678901234567890,0.30000000000000000001,-0,1e-400]}`)); err != nil {
		t.Fatal(err)
	}
	const canonical = `{"n":[1.0,1e+2,123456789012345678901234567890,0.30000000000000000001,-0,1e-400]}`
	raw, _ = a.GetStateJSON()
	if string(raw) != canonical {
		t.Fatalf("stored %s, want %s", raw, canonical)
	}
	st, _ = a.GetState()
	if _, err := a.ReplaceState(st); err != nil {
		t.Fatal(err)
	}
	raw, _ = a.GetStateJSON()
	if string(raw) != canonical {
		t.Fatalf("numbers changed through Go: %s", raw)
	}
	var big1 struct{ N []*big.Int }
	if _, err := a.ReplaceStateJSON([]byte(`{"N":[{"$bigint":"-99999999999999999999999"},123456789012345678901234567890]}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.GetStateInto(&big1); err != nil || big1.N[0].String() != "-99999999999999999999999" || big1.N[1].String() != "123456789012345678901234567890" {
		t.Fatalf("big ints: %v, %v", big1.N, err)
	}
}

func TestPersistenceAndOptions(t *testing.T) {
	path := tempDB(t)
	a, err := openStore(t, path, Options{Synchronous: SyncNormal, BusyTimeout: 250 * time.Millisecond, MaxValueBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetState(map[string]any{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !onPostgres(t) { // the file's mode: SQLite only
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Fatalf("store mode %v, want 0600", info.Mode().Perm())
		}
	}
	r := openAgent(t, path, Options{ReadOnly: true, BusyTimeout: -1})
	raw, err := r.GetStateJSON()
	if err != nil || string(raw) != `{"k":"v"}` {
		t.Fatalf("read-only GetStateJSON = %s, %v", raw, err)
	}
	_, err = r.SetState(map[string]any{"k": "w"})
	wantStatus(t, err, ErrStorage, "read_only")
}

func TestOptionsJSON(t *testing.T) {
	cases := []struct {
		o    Options
		want string
	}{
		{Options{}, `{}`},
		{Options{InitialState: map[string]any{"a": 1}, MaxValueBytes: 10, Synchronous: SyncFull,
			BusyTimeout: 1500*time.Microsecond + time.Second, ReadOnly: true},
			`{"initial_state":{"a":1},"max_value_bytes":10,"synchronous":"full","busy_timeout_ms":1002,"read_only":true}`},
		{Options{BusyTimeout: -time.Second}, `{"busy_timeout_ms":0}`},
		{Options{InitialState: map[string]any(nil)}, `{}`},
		{Options{BusyTimeout: time.Nanosecond}, `{"busy_timeout_ms":1}`},
	}
	for _, c := range cases {
		got, err := c.o.optionsJSON()
		if err != nil || got != c.want {
			t.Errorf("optionsJSON(%+v) = %s, %v; want %s", c.o, got, err, c.want)
		}
	}
}

func TestCloseIsIdempotentAndFinal(t *testing.T) {
	a, err := openStore(t, ":memory:", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = a.GetState()
	wantStatus(t, err, ErrBadHandle, "GetState", "not open")
	_, err = a.SetState(map[string]any{"x": 1})
	wantStatus(t, err, ErrBadHandle)
	_, err = a.OnStateChanged(func(_, _, _ json.RawMessage) error { return nil })
	wantStatus(t, err, ErrBadHandle)
	wantStatus(t, a.SetInitialStateFunc(func() (any, error) { return nil, nil }), ErrBadHandle)
	wantStatus(t, a.RemoveHook(1), ErrBadHandle)

	var nilAgent *Agent
	_, err = nilAgent.GetState()
	wantStatus(t, err, ErrBadHandle)
	if err := nilAgent.Close(); err != nil {
		t.Fatal(err)
	}
}

// Edge values the wire forms can hold, through the library and back.
func TestEdgeValuesThroughTheLibrary(t *testing.T) {
	a := openAgent(t, "", Options{})
	type edges struct {
		First time.Time         `json:"first"`
		Last  time.Time         `json:"last"`
		Leap  time.Time         `json:"leap"`
		NUL   string            `json:"nul"`
		Keys  map[string]string `json:"keys"`
		Emoji string            `json:"emoji"`
		Empty []byte            `json:"empty"`
		Zero  *big.Int          `json:"zero"`
	}
	in := edges{
		First: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		Last:  time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		Leap:  time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC),
		NUL:   "a\x00b", Keys: map[string]string{"\x00": "nul key", "\"\\/": "quotes"},
		Emoji: "\U0001F600 \u2028", Empty: []byte{}, Zero: new(big.Int),
	}
	if _, err := a.ReplaceState(in); err != nil {
		t.Fatal(err)
	}
	var out edges
	if err := a.GetStateInto(&out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("in  %#v\nout %#v", in, out)
	}
}
