package agentstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The cross-language conformance vectors (tests/conformance/README.md) through the Go binding:
// tests/conformance/vectors/*.json, which the C, C++ and Python runners run too, and
// tests/conformance/binding_values.json, which Python runs too.
//
// Inputs given as JSON go through the value API (decoded with Unmarshal into map[string]any
// first), text inputs through the *JSON methods. A Go map has no member order, so results are
// compared with the members of every object sorted (canonicalText): the library's text for the
// *JSON methods, Marshal of what the value API returned otherwise. An expectation given as
// exact text (expect_text) is compared byte for byte.

var conformanceDir = filepath.Join("..", "..", "tests", "conformance")

func TestConformanceVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(conformanceDir, "vectors", "*.json"))
	if err != nil || len(files) < 5 {
		t.Fatalf("vector files: %v %v", files, err)
	}
	sort.Strings(files)
	for _, f := range append(files, filepath.Join(conformanceDir, "binding_values.json")) {
		root := readVectors(t, f)
		vectors := member(root, "vectors")
		if vectors == nil || len(vectors.vals) == 0 {
			t.Fatalf("%s: no vectors", f)
		}
		for _, v := range vectors.vals {
			v := v
			t.Run(strings.TrimSuffix(filepath.Base(f), ".json")+": "+member(v, "name").str, func(t *testing.T) {
				if !runsHere(v) {
					t.Skip(str(member(v, "runners_why")))
				}
				if !runsOnBackend(t, v) {
					t.Skip("not on this backend: " + str(member(v, "backends_why")))
				}
				r := &vectorRun{t: t, vector: v}
				r.path, r.agentID = storeLocation(t)
				defer r.close()
				r.run()
			})
		}
	}
}

func readVectors(t *testing.T, path string) *node {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	root, err := parseJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return root
}

func runsHere(v *node) bool {
	runners := member(v, "runners")
	if runners == nil {
		return true
	}
	for _, r := range runners.vals {
		if r.str == "go" {
			return true
		}
	}
	return false
}

func str(n *node) string {
	if n == nil {
		return ""
	}
	return n.str
}

// textForm is a text form: a string, or pieces (strings and [string, count] pairs) joined.
func textForm(n *node) []byte {
	if n.kind == 's' {
		return []byte(n.str)
	}
	var b strings.Builder
	for _, p := range n.vals {
		if p.kind == 's' {
			b.WriteString(p.str)
			continue
		}
		count, _ := strconv.Atoi(p.vals[1].str)
		b.WriteString(strings.Repeat(p.vals[0].str, count))
	}
	return []byte(b.String())
}

// canonicalText writes a JSON value compactly with the members of every object sorted (as
// Marshal writes Go maps), except inside $typedarray and $regexp, whose member order is fixed.
func canonicalText(n *node, sorted bool) string {
	switch n.kind {
	case '[':
		parts := make([]string, len(n.vals))
		for i, v := range n.vals {
			parts[i] = canonicalText(v, true)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case '{':
		tag := tagOf(n)
		idx := make([]int, len(n.keys))
		for i := range idx {
			idx[i] = i
		}
		if sorted {
			sort.SliceStable(idx, func(a, b int) bool { return n.keys[idx[a]] < n.keys[idx[b]] })
		}
		parts := make([]string, len(idx))
		for j, i := range idx {
			e := encoder{}
			_ = e.str(n.keys[i])
			parts[j] = string(e.buf) + ":" + canonicalText(n.vals[i], tag != "$typedarray" && tag != "$regexp")
		}
		return "{" + strings.Join(parts, ",") + "}"
	case 's':
		e := encoder{}
		_ = e.str(n.str)
		return string(e.buf)
	}
	return string(n.raw)
}

func canonicalOf(data []byte) (string, error) {
	n, err := parseJSON(data)
	if err != nil {
		return "", err
	}
	return canonicalText(n, true), nil
}

// expectation returns the expected text of field in obj and whether it is exact text
// (field_text) rather than a JSON value; ok is false when there is neither.
func expectation(obj *node, field string) (want string, exact, ok bool) {
	if n := member(obj, field); n != nil {
		return canonicalText(n, true), false, true
	}
	if n := member(obj, field+"_text"); n != nil {
		return string(textForm(n)), true, true
	}
	return "", false, false
}

// sameAs checks a result (library text, or the Marshal of a value) against field of obj.
func (r *vectorRun) sameAs(what string, obj *node, field string, got []byte) {
	want, exact, ok := expectation(obj, field)
	if !ok {
		return
	}
	text := string(got)
	if !exact {
		c, err := canonicalOf(got)
		if err != nil {
			r.fail("%s: %s is not JSON: %v", what, got, err)
		}
		text = c
	}
	if text != want {
		r.fail("%s: got %.400s, want %.400s", what, text, want)
	}
}

type event struct {
	next, prev, patch []byte
	version           uint64
}

type vectorRun struct {
	t      *testing.T
	vector *node
	path   string
	// agentID is the vector's agent on PostgreSQL (every open sets it), "" on SQLite.
	agentID string
	op      int
	agent   *Agent
	events  []event
}

func (r *vectorRun) fail(format string, args ...any) {
	r.t.Helper()
	prefix := "open: "
	if r.op > 0 {
		prefix = fmt.Sprintf("op %d: ", r.op)
	}
	r.t.Fatalf(prefix+format, args...)
}

func (r *vectorRun) close() {
	if r.agent != nil {
		_ = r.agent.Close()
	}
}

// schemaSteps maps a vector's schema_steps to []SchemaStep (a value the vector leaves out
// stays nil).
func (r *vectorRun) schemaSteps(raw []byte) []SchemaStep {
	var steps []struct {
		From uint32 `json:"from"`
		Ops  []struct {
			Op    string          `json:"op"`
			Path  string          `json:"path"`
			From  string          `json:"from"`
			To    string          `json:"to"`
			Value json.RawMessage `json:"value"`
		} `json:"ops"`
	}
	if err := json.Unmarshal(raw, &steps); err != nil {
		r.fail("schema_steps %s: %v", raw, err)
	}
	out := make([]SchemaStep, len(steps))
	for i, st := range steps {
		out[i].From = st.From
		for _, op := range st.Ops {
			o := StepOp{Op: op.Op, Path: op.Path, From: op.From, To: op.To}
			if len(op.Value) > 0 {
				o.Value = op.Value
			}
			out[i].Ops = append(out[i].Ops, o)
		}
	}
	return out
}

// options maps the vector's open options to Options; a value Options cannot hold fails the
// vector (such vectors name the runners that can run them).
func (r *vectorRun) options(o *node) Options {
	var opts Options
	for i, key := range keysOf(o) {
		v := o.vals[i]
		switch key {
		case "initial_state":
			var s any
			if err := Unmarshal(v.raw, &s); err != nil {
				r.fail("initial_state: %v", err)
			}
			opts.InitialState = s
		case "max_value_bytes":
			n, err := strconv.Atoi(v.str)
			if err != nil {
				r.fail("max_value_bytes %s is not an int", v.raw)
			}
			opts.MaxValueBytes = n
		case "busy_timeout_ms":
			opts.BusyTimeout = r.duration(key, v)
		case "server_timeout_ms":
			opts.ServerTimeout = r.duration(key, v)
		case "synchronous":
			opts.Synchronous = Synchronous(v.str)
		case "read_only":
			opts.ReadOnly = v.kind == 't'
		case "change_log":
			log := &ChangeLog{Off: v.kind == 'f'}
			if n := member(v, "keep_last"); n != nil {
				log.KeepLast, _ = strconv.Atoi(n.str)
			}
			if n := member(v, "keep_seconds"); n != nil {
				secs, _ := strconv.Atoi(n.str)
				log.KeepFor = time.Duration(secs) * time.Second
			}
			opts.ChangeLog = log
		case "schema_version":
			n, err := strconv.ParseUint(v.str, 10, 32)
			if err != nil {
				r.fail("schema_version %s is not a uint32", v.raw)
			}
			opts.SchemaVersion = uint32(n)
		case "schema_steps":
			opts.SchemaSteps = r.schemaSteps(v.raw)
		default:
			r.fail("option %q has no Options field", key)
		}
	}
	return opts
}

// duration is a vector's millisecond option as a Duration (the largest Duration when the count
// does not fit); a count that is not a positive integer fails the vector.
func (r *vectorRun) duration(key string, v *node) time.Duration {
	ms, err := strconv.ParseInt(v.str, 10, 64)
	if err != nil || ms <= 0 {
		r.fail("%s %s is not a positive Duration", key, v.raw)
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}

func keysOf(o *node) []string {
	if o == nil {
		return nil
	}
	return o.keys
}

func (r *vectorRun) open(o *node) error {
	r.close()
	r.agent = nil
	opts := r.options(o)
	if r.agentID != "" {
		opts = withAgentID(r.t, opts, r.agentID)
	}
	a, err := Open(r.path, opts)
	if err != nil {
		return err
	}
	r.agent = a
	failWhen, rejectWhen := str(member(r.vector, "hook_fails_when")), str(member(r.vector, "validator_rejects"))
	if member(r.vector, "hooks") != nil || failWhen != "" {
		if _, err := a.OnChange(func(c Change) error {
			r.events = append(r.events, event{c.Next, c.Prev, c.Patch, c.Version})
			if failWhen != "" && hasMember(c.Next, failWhen) {
				return errors.New("the hook fails on the member " + failWhen)
			}
			return nil
		}); err != nil {
			r.fail("OnChange: %v", err)
		}
	}
	if rejectWhen != "" {
		if err := a.SetValidator(func(c Change) error {
			if hasMember(c.Next, rejectWhen) {
				return errors.New("the state may not have the member " + rejectWhen)
			}
			return nil
		}); err != nil {
			r.fail("SetValidator: %v", err)
		}
	}
	return nil
}

func hasMember(state []byte, name string) bool {
	n, err := parseJSON(state)
	return err == nil && member(n, name) != nil
}

// checkStatus compares an outcome with the wanted status name and message part.
func (r *vectorRun) checkStatus(err error, want *node, part *node) {
	r.t.Helper()
	got, msg := "AGENT_OK", ""
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			r.fail("%v (%T) is not an *Error", err, err)
		}
		got, msg = statusNameFromC(e.Status), err.Error()
	}
	wantName := "AGENT_OK"
	if want != nil {
		wantName = want.str
	}
	if got != wantName {
		r.fail("got %s (%s), want %s", got, msg, wantName)
	}
	if err != nil && part != nil && !strings.Contains(msg, part.str) {
		r.fail("message %q does not contain %q", msg, part.str)
	}
}

func (r *vectorRun) run() {
	err := r.open(member(r.vector, "open"))
	r.checkStatus(err, member(r.vector, "open_status"), member(r.vector, "open_message"))
	if member(r.vector, "open_status") != nil {
		return
	}
	if ops := member(r.vector, "ops"); ops != nil {
		for i, op := range ops.vals {
			r.op = i + 1
			r.runOp(op)
		}
	}
}
