package agentstate

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A *regexp.Regexp is stored as the codec's RegExp (it used to be stored as {}, its exported
// fields: none): the same bytes the Python binding writes for a pattern with that source and
// those flags. A leading (?i), (?m), (?s) group (or a combination) is the flags; anything else
// stays in the source.
func TestGoRegexpIsStoredAsARegExp(t *testing.T) {
	type withRegexps struct {
		P *regexp.Regexp `json:"p"`
		V regexp.Regexp  `json:"v"`
		N *regexp.Regexp `json:"n"`
	}
	cases := []struct {
		in   any
		want string
	}{
		{map[string]any{"p": regexp.MustCompile("a+")}, `{"p":{"$regexp":{"source":"a+","flags":""}}}`},
		{regexp.MustCompile(`(?i)a+`), `{"$regexp":{"source":"a+","flags":"i"}}`},
		{regexp.MustCompile(`(?smi)^a.b$`), `{"$regexp":{"source":"^a.b$","flags":"ims"}}`},
		// Only a leading group of i, m and s: Go's U has no JavaScript twin, a later or scoped
		// group is part of the pattern.
		{regexp.MustCompile(`(?U)a+`), `{"$regexp":{"source":"(?U)a+","flags":""}}`},
		{regexp.MustCompile(`(?iU)a+`), `{"$regexp":{"source":"(?iU)a+","flags":""}}`},
		{regexp.MustCompile(`(?i:a)b`), `{"$regexp":{"source":"(?i:a)b","flags":""}}`},
		{regexp.MustCompile(`x(?i)a`), `{"$regexp":{"source":"x(?i)a","flags":""}}`},
		{regexp.MustCompile(`"\d+"\\`), `{"$regexp":{"source":"\"\\d+\"\\\\","flags":""}}`},
		{withRegexps{P: regexp.MustCompile("p"), V: *regexp.MustCompile("(?m)^v")},
			`{"p":{"$regexp":{"source":"p","flags":""}},"v":{"$regexp":{"source":"^v","flags":"m"}},"n":null}`},
	}
	for _, c := range cases {
		got, err := Marshal(c.in)
		if err != nil || string(got) != c.want {
			t.Errorf("Marshal(%v) = %s, %v\nwant %s", c.in, got, err, c.want)
		}
	}

	// Through an Agent: read back as a RegExp in the generic form, and as a *regexp.Regexp
	// (also a regexp.Regexp) where the destination asks for one, the same pattern.
	a := openAgent(t, "", Options{})
	st, err := a.SetState(map[string]any{"p": regexp.MustCompile(`(?i)^a+$`)})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := st["p"].(RegExp); !ok || r != (RegExp{Source: "^a+$", Flags: "i"}) {
		t.Fatalf("generic form: %#v", st["p"])
	}
	var typed struct {
		P *regexp.Regexp `json:"p"`
		V regexp.Regexp  `json:"v"`
	}
	if _, err := a.SetState(map[string]any{"v": RegExp{Source: "b+", Flags: "ms"}}); err != nil {
		t.Fatal(err)
	}
	if err := a.GetStateInto(&typed); err != nil {
		t.Fatal(err)
	}
	if typed.P == nil || typed.P.String() != "(?i)^a+$" || !typed.P.MatchString("AAA") || typed.V.String() != "(?ms)b+" {
		t.Fatalf("typed: %v, %v", typed.P, &typed.V)
	}
	again, err := Marshal(typed.P)
	if err != nil || string(again) != `{"$regexp":{"source":"^a+$","flags":"i"}}` {
		t.Fatalf("written back: %s, %v", again, err)
	}
}

// Decoding into a *regexp.Regexp refuses, with ErrCodec saying why, what Go cannot hold: a
// flag without a Go twin (it would be lost at the next write) or a source RE2 does not take.
func TestRegExpThatGoCannotHoldIsRefused(t *testing.T) {
	var v struct {
		R *regexp.Regexp `json:"r"`
	}
	for text, want := range map[string][]string{
		`{"r":{"$regexp":{"source":"a","flags":"g"}}}`:          {"the flag 'g', which a Go *regexp.Regexp cannot hold", "decode it into agentstate.RegExp"},
		`{"r":{"$regexp":{"source":"a","flags":"iu"}}}`:         {"the flag 'u'", "decode it into agentstate.RegExp"},
		`{"r":{"$regexp":{"source":"(?<=a)b","flags":""}}}`:     {"/(?<=a)b/ does not compile in Go", "decode it into agentstate.RegExp"},
		`{"r":{"$regexp":{"source":"a","flags":1}}}`:            {"$regexp must be"},
		`{"r":{"$date":"2026-11-30T03:06:44.123Z"}}`:            {"cannot decode $date value into Go value of type regexp.Regexp"},
		`{"r":"(unclosed"}`:                                     {"does not compile as a Go regular expression"},
		`{"r":{"$regexp":{"source":"a","flags":"i"},"x":null}}`: {"cannot decode object"},
	} {
		err := Unmarshal([]byte(text), &v)
		wantStatus(t, err, ErrCodec, want...)
	}
	// The same text into a RegExp keeps it whole.
	var r struct{ R RegExp }
	if err := Unmarshal([]byte(`{"R":{"$regexp":{"source":"(?<=a)b","flags":"gu"}}}`), &r); err != nil || r.R != (RegExp{"(?<=a)b", "gu"}) {
		t.Fatalf("%#v, %v", r.R, err)
	}
}

// The other binding reads what Go stores as a compiled pattern, and stores a pattern as the
// same bytes Go does: checked against the Python binding of this checkout, on this run's
// backend.
func TestGoRegexpAgreesWithPython(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	path, id := storeLocation(t)
	a, err := Open(path, Options{AgentID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.ReplaceState(map[string]any{
		"plain": regexp.MustCompile(`a+`),
		"flags": regexp.MustCompile(`(?ims)^a.b$`),
	}); err != nil {
		t.Fatal(err)
	}
	script := `
import json, re, sys, agent_state
path, agent_id = sys.argv[1], sys.argv[2]
with agent_state.Agent(path, **({"agent_id": agent_id} if agent_id else {})) as a:
    seen = {k: [type(v).__name__, v.pattern, v.flags & (re.I | re.M | re.S)] for k, v in a.get_state().items()}
    a.replace_state({"plain": re.compile("a+"), "flags": re.compile("^a.b$", re.I | re.M | re.S)})
print(json.dumps(seen, sort_keys=True))
print(json.dumps([int(re.I), int(re.M), int(re.S)]))
`
	cmd := exec.Command(python, "-c", script, path, id)
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+filepath.Join(root, "bindings", "python", "src"),
		"AGENT_STATE_LIBRARY="+filepath.Join(root, "target", "release", "libagent_state.so"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("python3 printed %q", out)
	}
	var bits []int
	if err := json.Unmarshal([]byte(lines[1]), &bits); err != nil || len(bits) != 3 {
		t.Fatalf("python3 printed %q", out)
	}
	want := `{"flags": ["Pattern", "^a.b$", ` + strconv.Itoa(bits[0]|bits[1]|bits[2]) + `], "plain": ["Pattern", "a+", 0]}`
	if lines[0] != want {
		t.Fatalf("Python read Go's patterns as %s\nwant %s", lines[0], want)
	}
	stored, err := a.GetStateJSON()
	if err != nil {
		t.Fatal(err)
	}
	ours, _ := Marshal(map[string]any{"plain": regexp.MustCompile(`a+`), "flags": regexp.MustCompile(`(?ims)^a.b$`)})
	jsonEqual(t, stored, ours) // member order aside (Go sorts map keys, Python keeps its own)
	for _, part := range []string{`"flags":{"$regexp":{"source":"^a.b$","flags":"ims"}}`, `"plain":{"$regexp":{"source":"a+","flags":""}}`} {
		if !strings.Contains(string(stored), part) || !strings.Contains(string(ours), part) {
			t.Fatalf("Python stored %s, Go writes %s: both should hold %s", stored, ours, part)
		}
	}
}
