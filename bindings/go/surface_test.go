package agentstate

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The binding against the library's surface description (include/agent_state_surface.json,
// generated from the core's own definitions of its open options and statuses): every field of
// Options emits one of the surface's options and every option has its field; the Status
// constants, their names and sentinels are exactly the surface's statuses; the options table of
// the book's Go page (docs/src/getting-started/go.md) says the same. The description is read from the checkout (../../include/), or from the
// file AGENT_STATE_SURFACE names (to try a changed one); outside a checkout the tests skip.

type surfaceOption struct {
	Name    string          `json:"name"`
	Default json.RawMessage `json:"default"`
}

type surfaceStatus struct {
	Code int32  `json:"code"`
	Name string `json:"name"`
}

type surfaceDescription struct {
	Options  []surfaceOption `json:"options"`
	Statuses []surfaceStatus `json:"statuses"`
}

func loadSurface(t *testing.T) surfaceDescription {
	t.Helper()
	path := os.Getenv("AGENT_STATE_SURFACE")
	if path == "" {
		path = filepath.Join("..", "..", "include", "agent_state_surface.json")
	}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skipf("no surface description at %s (not in a checkout of the repository)", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	var s surfaceDescription
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(s.Options) == 0 || len(s.Statuses) == 0 {
		t.Fatalf("%s: no options or no statuses", path)
	}
	return s
}

// sampleValue is a value of a field's type that optionsJSON sends (a non-zero one the library
// accepts on its own); a field of a new type needs a case here.
func sampleValue(t *testing.T, f reflect.StructField) reflect.Value {
	t.Helper()
	switch f.Type {
	case reflect.TypeOf(Synchronous("")):
		return reflect.ValueOf(SyncNormal)
	case reflect.TypeOf(time.Duration(0)):
		return reflect.ValueOf(time.Second)
	case reflect.TypeOf(&ChangeLog{}):
		return reflect.ValueOf(&ChangeLog{KeepLast: 10})
	case reflect.TypeOf([]SchemaStep{}):
		return reflect.ValueOf([]SchemaStep{{From: 0, Ops: []StepOp{StepDefault("/a", 1)}}})
	}
	switch f.Type.Kind() {
	case reflect.Interface:
		return reflect.ValueOf(map[string]any{"a": 1})
	case reflect.Int, reflect.Uint32:
		return reflect.ValueOf(100).Convert(f.Type)
	case reflect.Bool:
		return reflect.ValueOf(true)
	case reflect.String:
		return reflect.ValueOf("x").Convert(f.Type)
	}
	t.Fatalf("Options.%s has type %s, which surface_test.go has no sample value of: add one", f.Name, f.Type)
	return reflect.Value{}
}

// optionKeys is the keys of the options JSON of o.
func optionKeys(t *testing.T, o Options) []string {
	t.Helper()
	text, err := o.optionsJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fieldKeys maps each field of Options to the one option it emits when set alone.
func fieldKeys(t *testing.T) map[string]string {
	t.Helper()
	typ := reflect.TypeOf(Options{})
	fields := map[string]string{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		var o Options
		reflect.ValueOf(&o).Elem().Field(i).Set(sampleValue(t, f))
		keys := optionKeys(t, o)
		if len(keys) != 1 {
			t.Fatalf("Options.%s alone emits %v, want one option", f.Name, keys)
		}
		fields[f.Name] = keys[0]
	}
	return fields
}

func TestOptionsAreTheSurfaceOptions(t *testing.T) {
	s := loadSurface(t)
	if keys := optionKeys(t, Options{}); len(keys) != 0 {
		t.Fatalf("the zero Options emits %v: it must leave every option to the library", keys)
	}
	fields := fieldKeys(t)
	byKey := map[string]string{}
	for field, key := range fields {
		if other, dup := byKey[key]; dup {
			t.Errorf("Options.%s and Options.%s both emit %q", other, field, key)
		}
		byKey[key] = field
	}
	want := map[string]bool{}
	for _, o := range s.Options {
		want[o.Name] = true
		if _, ok := byKey[o.Name]; !ok {
			t.Errorf("the library's option %q has no field in Options (add it, and to optionsJSON)", o.Name)
		}
	}
	for key, field := range byKey {
		if !want[key] {
			t.Errorf("Options.%s emits %q, which the library does not have", field, key)
		}
	}
	// Every field set at once: exactly the surface's options.
	var all Options
	v := reflect.ValueOf(&all).Elem()
	for i := 0; i < v.NumField(); i++ {
		v.Field(i).Set(sampleValue(t, v.Type().Field(i)))
	}
	if got := optionKeys(t, all); len(got) != len(s.Options) {
		t.Errorf("every field set emits %v, the surface has %d options", got, len(s.Options))
	}
}

// statusConstants reads errors.go: the constants of type Status (name: value) and the
// sentinels (ErrX: the constant it is).
func statusConstants(t *testing.T) (map[string]int32, map[string]string) {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts, sentinels := map[string]int32{}, map[string]string{}
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gen.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
				continue
			}
			name := vs.Names[0].Name
			switch {
			case gen.Tok == token.CONST && isIdent(vs.Type, "Status"):
				lit, ok := vs.Values[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.INT {
					t.Fatalf("errors.go: %s is not a plain number", name)
				}
				n, err := strconv.ParseInt(lit.Value, 0, 32)
				if err != nil {
					t.Fatal(err)
				}
				consts[name] = int32(n)
			case gen.Tok == token.VAR && strings.HasPrefix(name, "Err"):
				if id, ok := vs.Values[0].(*ast.Ident); ok {
					sentinels[name] = id.Name
				}
			}
		}
	}
	return consts, sentinels
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// goStatusName is the Go name of a C status name: AGENT_ERR_INVALID_ARGUMENT is
// StatusInvalidArgument (sentinel ErrInvalidArgument), AGENT_OK StatusOK, initialisms upper.
func goStatusName(c string) string {
	words := strings.Split(strings.TrimPrefix(strings.TrimPrefix(c, "AGENT_"), "ERR_"), "_")
	for i, w := range words {
		if w != "OK" && w != "JSON" {
			words[i] = w[:1] + strings.ToLower(w[1:])
		}
	}
	return "Status" + strings.Join(words, "")
}

func TestStatusesAreTheSurfaceStatuses(t *testing.T) {
	s := loadSurface(t)
	consts, sentinels := statusConstants(t)
	sentinelOf := map[string]string{}
	for sentinel, constant := range sentinels {
		sentinelOf[constant] = sentinel
	}
	inAll := map[error]bool{}
	for _, e := range allSentinels {
		inAll[e] = true
	}
	for _, st := range s.Statuses {
		name := goStatusName(st.Name)
		code, ok := consts[name]
		if !ok {
			t.Errorf("%s (%d) has no constant %s in errors.go", st.Name, st.Code, name)
			continue
		}
		if code != st.Code {
			t.Errorf("%s is %d, the library's %s is %d", name, code, st.Name, st.Code)
		}
		if got := Status(st.Code).String(); got != st.Name {
			t.Errorf("Status(%d).String() = %q, want %q (statusNames)", st.Code, got, st.Name)
		}
		if st.Code == 0 {
			continue
		}
		sentinel, ok := sentinelOf[name]
		if !ok {
			t.Errorf("%s has no sentinel Err... = %s in errors.go", st.Name, name)
		} else if "Err"+strings.TrimPrefix(name, "Status") != sentinel {
			t.Errorf("the sentinel of %s is %s", name, sentinel)
		}
		if !inAll[Status(st.Code)] {
			t.Errorf("allSentinels (helpers_test.go) lacks the sentinel of %s", st.Name)
		}
	}
	if len(consts) != len(s.Statuses) || len(statusNames) != len(s.Statuses) || len(allSentinels) != len(s.Statuses)-1 {
		t.Errorf("%d Status constants, %d statusNames, %d sentinels for the surface's %d statuses",
			len(consts), len(statusNames), len(allSentinels), len(s.Statuses))
	}
}

// goPage is the book's Getting started page for Go, where the binding's options table lives (the
// README is short).
const goPage = "../../docs/src/getting-started/go.md"

// The book's Go page's table of the options (the one whose header starts "| key | default | field |"):
// the surface's options in its order, each fixed default in its default cell, and the field of
// Options that emits it.
func TestOptionsTableIsTheSurface(t *testing.T) {
	s := loadSurface(t)
	data, err := os.ReadFile(goPage)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, "| key | default | field |") {
			continue
		}
		for _, row := range lines[i+2:] {
			if !strings.HasPrefix(row, "|") {
				break
			}
			var cells []string
			for _, c := range strings.Split(strings.Trim(strings.TrimSpace(row), "|"), "|") {
				cells = append(cells, strings.Trim(strings.TrimSpace(c), "`"))
			}
			rows = append(rows, cells)
		}
	}
	if len(rows) != len(s.Options) {
		t.Fatalf(goPage+"'s options table has %d rows, the surface %d options", len(rows), len(s.Options))
	}
	fields := fieldKeys(t)
	for i, o := range s.Options {
		row := rows[i]
		if len(row) < 3 || row[0] != o.Name {
			t.Errorf(goPage+"'s options table, row %d: %v, want %q", i+1, row, o.Name)
			continue
		}
		if def := string(o.Default); def != "null" && !strings.Contains(strings.ReplaceAll(row[1], " ", ""), def) {
			t.Errorf(goPage+": %s's default cell %q does not hold %s", o.Name, row[1], def)
		}
		if field := strings.TrimPrefix(row[2], "Options."); fields[field] != o.Name {
			t.Errorf(goPage+": %s is in field %q, but that field emits %q", o.Name, row[2], fields[field])
		}
	}
}
