package agentstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The public RFC 6902 suite (../shared/corpora/json-patch-tests, beside the checkout) through
// the Go binding, as the Rust runner (crates/agent_state/tests/behaviour/json_patch.rs) and
// every other binding's runner apply it: tests/conformance/json_patch/cases.py turns the
// suite into cases, and for each a fresh agent gets the case's state (ReplaceStateIfJSON) and
// its patch (PatchStateJSON), both passed as the JSON text the case gives. A case with an
// expected result must apply, to that result (checked with the library's own equality, the
// case's one-operation "test" patch, which must hold and commit nothing, and with
// encoding/json's); a case with an error must fail with INVALID_ARGUMENT, PATH, TEST_FAILED or
// CODEC and leave the state and version as they were. The statuses go to
// target/conformance/json-patch/go-<backend>.txt, one "ID STATUS" line per case, which
// tests/conformance/json_patch/compare.py checks against the other languages' runs.
//
// Without the corpus the test is skipped with a notice; under CI=true it fails, since CI has
// ../shared beside the checkout.

type jsonPatchCase struct {
	ID     string  `json:"id"`
	State  string  `json:"state"`
	Patch  string  `json:"patch"`
	Expect *string `json:"expect"`
	Verify *string `json:"verify"`
	Error  *string `json:"error"`
}

// jsonPatchCases runs cases.py into the test's directory (not the shared default path, which
// another language's runner may be writing at the same time) and reads the cases.
func jsonPatchCases(t *testing.T) []jsonPatchCase {
	t.Helper()
	root := filepath.Join("..", "..")
	corpus := filepath.Join(root, "..", "shared", "corpora", "json-patch-tests")
	if st, err := os.Stat(corpus); err != nil || !st.IsDir() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no RFC 6902 corpus at %s (CI has ../shared beside the checkout)", corpus)
		}
		t.Skipf("no RFC 6902 corpus at %s: skipped", corpus)
	}
	out := filepath.Join(t.TempDir(), "json-patch-cases.json")
	cmd := exec.Command("python3", filepath.Join(root, "tests", "conformance", "json_patch", "cases.py"), out)
	if text, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cases.py: %v\n%s", err, text)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []jsonPatchCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(file.Cases) < 50 {
		t.Fatalf("cases.py wrote %d cases: too few for the public suite", len(file.Cases))
	}
	return file.Cases
}

// statusLine is the STATUS of a case's line: AGENT_OK or the AGENT_ERR_* name.
func statusLine(err error) string {
	if err == nil {
		return StatusOK.String()
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status.String()
	}
	return "AGENT_ERR_UNKNOWN"
}

// decodedEqual compares two JSON texts as encoding/json decodes them (numbers as float64, so
// 1 and 1.0 are equal, as the library's test finds them).
func decodedEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func TestJSONPatchPublicSuite(t *testing.T) {
	cases := jsonPatchCases(t)
	backend, dir := "sqlite", t.TempDir()
	if onPostgres(t) {
		backend = "postgres"
	}
	open := func(n int) (*Agent, error) {
		if backend == "postgres" {
			return Open(testPGURI, withAgentID(t, Options{}, newAgentID()))
		}
		// One file, an agent per case, as the Rust runner does.
		return Open(filepath.Join(dir, "suite.db"), Options{AgentID: fmt.Sprintf("case%d", n)})
	}
	lines := make([]string, 0, len(cases))
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	for n, c := range cases {
		a, err := open(n)
		if err != nil {
			t.Fatalf("%s: Open: %v", c.ID, err)
		}
		before, version, err := a.ReplaceStateIfJSON(0, []byte(c.State))
		if err != nil {
			a.Close()
			t.Fatalf("%s: ReplaceStateIfJSON(%s): %v", c.ID, c.State, err)
		}
		got, err := a.PatchStateJSON([]byte(c.Patch))
		lines = append(lines, c.ID+" "+statusLine(err))
		switch {
		case c.Expect != nil && err == nil:
			// The library's own equality (numbers by value, members in any order): a test of
			// the whole state that holds and commits nothing...
			_, atPatch, _ := a.GetStateVersionedJSON()
			if _, verr := a.PatchStateJSON([]byte(*c.Verify)); verr != nil {
				fail("%s: got %s, expected %s (%v)", c.ID, got, *c.Expect, verr)
			} else if !decodedEqual(got, []byte(*c.Expect)) {
				// ...and encoding/json's.
				fail("%s: got %s, expected %s (encoding/json)", c.ID, got, *c.Expect)
			}
			stored, atVerify, serr := a.GetStateVersionedJSON()
			if serr != nil || string(stored) != string(got) || atVerify != atPatch {
				fail("%s: stored %s at %d (%v), returned %s at %d", c.ID, stored, atVerify, serr, got, atPatch)
			}
		case c.Expect != nil:
			fail("%s: refused (%v), expected %s", c.ID, err, *c.Expect)
		case c.Error != nil && err == nil:
			fail("%s: applied as %s, expected an error (%s)", c.ID, got, *c.Error)
		case c.Error != nil:
			if !(errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrPath) ||
				errors.Is(err, ErrTestFailed) || errors.Is(err, ErrCodec)) {
				fail("%s: failed with %v, not INVALID_ARGUMENT, PATH, TEST_FAILED or CODEC", c.ID, err)
			}
			after, v, aerr := a.GetStateVersionedJSON()
			if aerr != nil || string(after) != string(before) || v != version {
				fail("%s: a refused patch wrote: %s at %d, was %s at %d (%v)", c.ID, after, v, before, version, aerr)
			}
		case err != nil:
			fail("%s: refused (%v), expected to apply", c.ID, err)
		}
		if err := a.Close(); err != nil {
			t.Fatalf("%s: Close: %v", c.ID, err)
		}
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d cases failed:\n%s", len(failures), len(cases), strings.Join(failures, "\n"))
	}
	out := filepath.Join("..", "..", "target", "conformance", "json-patch")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(out, "go-"+backend+".txt")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d cases; statuses in %s", len(cases), file)
}
