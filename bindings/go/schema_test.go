package agentstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// Schema evolution through the binding: Options.SchemaVersion and SchemaSteps, steps of code
// (SetSchemaStep), ErrNewerSchema and ErrMigration, what hooks and the history see. Every test
// runs on this run's backend (backend_test.go).

// v2Steps upgrade {"user":{"nick":...}} (version 0) to {"user":{"name":...},"messages":[]}
// (version 2).
var v2Steps = []SchemaStep{
	{From: 0, Ops: []StepOp{StepRename("/user/nick", "name")}},
	{From: 1, Ops: []StepOp{StepDefault("/messages", []any{})}},
}

func v2Options() Options {
	return Options{SchemaVersion: 2, SchemaSteps: v2Steps, ChangeLog: &ChangeLog{KeepLast: 100}}
}

func stateText(t *testing.T, a *Agent) string {
	t.Helper()
	st, err := a.GetStateJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(st)
}

func schemaTestVersion(t *testing.T, a *Agent) uint64 {
	t.Helper()
	_, v, err := a.GetStateVersionedJSON()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSchemaStepsUpgradeAnOlderStateOnceOnFirstRead(t *testing.T) {
	path := tempDB(t)
	v0 := openAgent(t, path, Options{ChangeLog: &ChangeLog{KeepLast: 100}})
	if _, err := v0.SetState(map[string]any{"user": map[string]any{"nick": "ada"}}); err != nil {
		t.Fatal(err)
	}
	v2 := openAgent(t, path, v2Options())
	if n, err := v2.SchemaVersion(); err != nil || n != 2 {
		t.Fatalf("SchemaVersion() = %d, %v; want 2", n, err)
	}
	var changes []Change
	if _, err := v2.OnChange(func(c Change) error { changes = append(changes, c); return nil }); err != nil {
		t.Fatal(err)
	}
	const upgraded = `{"user":{"name":"ada"},"messages":[]}`
	for i := 0; i < 2; i++ { // the second read finds the state upgraded: no second migration
		st, v, err := v2.GetStateVersionedJSON()
		if err != nil {
			t.Fatal(err)
		}
		jsonEqual(t, st, []byte(upgraded))
		if v != 2 {
			t.Fatalf("read %d: version %d, want 2 (the write, then the migration)", i, v)
		}
	}
	if len(changes) != 1 {
		t.Fatalf("%d deliveries, want the one migration: %+v", len(changes), changes)
	}
	c := changes[0]
	if c.Kind != ChangeMigration || c.Schema != 2 || c.MigratedFrom != 0 || c.Version != 2 || c.Patch != nil {
		t.Fatalf("migration delivered as %+v (kind %v)", c, c.Kind)
	}
	jsonEqual(t, c.Prev, []byte(`{"user":{"nick":"ada"}}`))
	jsonEqual(t, c.Next, []byte(upgraded))

	// A write through v2 now writes on the upgraded state, under version 2.
	if _, err := v2.SetState(map[string]any{"messages": []any{"hi"}}); err != nil {
		t.Fatal(err)
	}
	if last := changes[len(changes)-1]; last.Kind != ChangeMerge || last.Schema != 2 || last.Version != 3 {
		t.Fatalf("the write delivered as %+v", last)
	}
	log, err := v2.ChangesSince(0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, lc := range log {
		got = append(got, fmt.Sprintf("%d:%v:%d:%d", lc.Version, lc.Kind, lc.Schema, lc.MigratedFrom))
	}
	if want := "1:merge:0:0 2:migration:2:0 3:merge:2:0"; strings.Join(got, " ") != want {
		t.Fatalf("ChangesSince: %s, want %s", strings.Join(got, " "), want)
	}
	raw, err := v2.ChangesSinceJSON(0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"schema":2,"migrated_from":0`) {
		t.Fatalf("ChangesSinceJSON lacks the migration's schema fields: %s", raw)
	}
}

func TestSchemaWriteToAnOlderStateMigratesFirst(t *testing.T) {
	path := tempDB(t)
	v0 := openAgent(t, path, Options{})
	if _, err := v0.SetState(map[string]any{"user": map[string]any{"nick": "ada"}}); err != nil {
		t.Fatal(err)
	}
	v2 := openAgent(t, path, v2Options())
	var kinds []ChangeKind
	if _, err := v2.OnChange(func(c Change) error { kinds = append(kinds, c.Kind); return nil }); err != nil {
		t.Fatal(err)
	}
	st, err := v2.SetState(map[string]any{"messages": []any{"hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if v := schemaTestVersion(t, v2); v != 3 || fmt.Sprint(st["user"]) != "map[name:ada]" {
		t.Fatalf("SetStateIf: %v at version %d, want the upgraded state at 3", st, v)
	}
	if fmt.Sprint(kinds) != "[migration merge]" {
		t.Fatalf("hooks saw %v", kinds)
	}
}

func TestSchemaOlderProgramGetsErrNewerSchemaAndWritesNothing(t *testing.T) {
	path := tempDB(t)
	v2 := openAgent(t, path, v2Options())
	if _, err := v2.SetState(map[string]any{"user": map[string]any{"name": "ada"}}); err != nil {
		t.Fatal(err)
	}
	v1 := openAgent(t, path, Options{SchemaVersion: 1})
	_, err := v1.GetState()
	wantStatus(t, err, ErrNewerSchema)
	_, err = v1.SetState(map[string]any{"x": 1})
	wantStatus(t, err, ErrNewerSchema)
	_, err = v1.ReplaceStateJSON([]byte(`{"x":1}`))
	wantStatus(t, err, ErrNewerSchema)
	if v := schemaTestVersion(t, v2); v != 1 {
		t.Fatalf("version %d after the refused writes, want 1", v)
	}
	if got := stateText(t, v2); got != `{"user":{"name":"ada"}}` {
		t.Fatalf("state %s after the refused writes", got)
	}
	// A read-only handle of the old program reads it as stored.
	ro := openAgent(t, path, Options{SchemaVersion: 1, ReadOnly: true})
	if got := stateText(t, ro); got != `{"user":{"name":"ada"}}` {
		t.Fatalf("read-only read %s", got)
	}
}

func TestSchemaReadOnlyReadsAnOlderStateAsStored(t *testing.T) {
	path := tempDB(t)
	v0 := openAgent(t, path, Options{})
	if _, err := v0.SetState(map[string]any{"user": map[string]any{"nick": "ada"}}); err != nil {
		t.Fatal(err)
	}
	opts := v2Options()
	opts.ReadOnly, opts.ChangeLog = true, nil
	ro := openAgent(t, path, opts)
	if got := stateText(t, ro); got != `{"user":{"nick":"ada"}}` {
		t.Fatalf("read-only read %s, want the state as stored", got)
	}
	if v := schemaTestVersion(t, v0); v != 1 {
		t.Fatalf("version %d: the read-only read wrote", v)
	}
}

func TestSchemaGoStepRuns(t *testing.T) {
	path := tempDB(t)
	v0 := openAgent(t, path, Options{})
	if _, err := v0.SetState(map[string]any{"count": 2}); err != nil {
		t.Fatal(err)
	}
	v2 := openAgent(t, path, Options{SchemaVersion: 2, SchemaSteps: []SchemaStep{
		{From: 1, Ops: []StepOp{StepSet("/v", 2)}},
	}})
	var calls int
	if err := v2.SetSchemaStep(0, func(st map[string]any) (map[string]any, error) {
		calls++
		n, err := st["count"].(json.Number).Int64()
		if err != nil {
			return nil, err
		}
		return map[string]any{"counter": map[string]any{"value": n * 10}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, []byte(stateText(t, v2)), []byte(`{"counter":{"value":20},"v":2}`))
	stateText(t, v2)
	if calls != 1 {
		t.Fatalf("the step ran %d times, want once", calls)
	}
	// The JSON form, and removing a step.
	v3 := openAgent(t, "", Options{SchemaVersion: 1})
	if err := v3.SetSchemaStepJSON(0, func(st json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"wrapped":` + string(st) + `}`), nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := v3.UpgradeStateJSON([]byte(`{"a":1}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, []byte(`{"wrapped":{"a":1}}`))
	if err := v3.SetSchemaStepJSON(0, nil); err != nil {
		t.Fatal(err)
	}
	_, err = v3.UpgradeStateJSON([]byte(`{"a":1}`), 0)
	wantStatus(t, err, ErrMigration, "0 -> 1")
}

var errStepFailed = errors.New("no counter to convert")

func TestSchemaFailingAndPanickingStepsGiveErrMigration(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   SchemaStepFunc
		want string
	}{
		{"error", func(map[string]any) (map[string]any, error) { return nil, errStepFailed }, "no counter to convert"},
		{"panic", func(map[string]any) (map[string]any, error) { panic("boom") }, "step panicked: boom"},
		{"nil", func(map[string]any) (map[string]any, error) { return nil, nil }, "nil state"},
		{"codec", func(map[string]any) (map[string]any, error) {
			return map[string]any{"ch": make(chan int)}, nil
		}, "cannot encode the state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tempDB(t)
			v0 := openAgent(t, path, Options{})
			if _, err := v0.SetState(map[string]any{"count": 2}); err != nil {
				t.Fatal(err)
			}
			v2 := openAgent(t, path, Options{SchemaVersion: 2, SchemaSteps: []SchemaStep{
				{From: 0, Ops: []StepOp{StepMerge(map[string]any{"v": 1})}},
			}})
			var hooked int
			if _, err := v2.OnChange(func(Change) error { hooked++; return nil }); err != nil {
				t.Fatal(err)
			}
			if err := v2.SetSchemaStep(1, tc.fn); err != nil {
				t.Fatal(err)
			}
			_, err := v2.GetState()
			e := wantStatus(t, err, ErrMigration, "schema step 1 -> 2", tc.want)
			switch tc.name {
			case "error":
				if !errors.Is(err, errStepFailed) {
					t.Fatalf("%v does not wrap the step's error", err)
				}
			case "panic":
				var pe *PanicError
				if !errors.As(err, &pe) || pe.Value != "boom" {
					t.Fatalf("%v does not wrap a *PanicError", err)
				}
			}
			if strings.Count(e.Error(), tc.want) != 1 {
				t.Fatalf("%q repeats the step's reason", e.Error())
			}
			_, err = v2.SetState(map[string]any{"x": 1})
			wantStatus(t, err, ErrMigration, "schema step 1 -> 2")
			if got := stateText(t, v0); got != `{"count":2}` {
				t.Fatalf("state %s after a failed migration", got)
			}
			if v := schemaTestVersion(t, v0); v != 1 || hooked != 0 {
				t.Fatalf("version %d, %d deliveries after a failed migration", v, hooked)
			}
		})
	}
}

func TestSchemaValidatorRefusingAMigrationIsErrMigration(t *testing.T) {
	path := tempDB(t)
	v0 := openAgent(t, path, Options{})
	if _, err := v0.SetState(map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	v1 := openAgent(t, path, Options{SchemaVersion: 1, SchemaSteps: []SchemaStep{
		{From: 0, Ops: []StepOp{StepRemove("/a")}},
	}})
	errNeedA := errors.New("a is required")
	var seen []ChangeKind
	if err := v1.SetValidator(func(c Change) error {
		seen = append(seen, c.Kind)
		if c.Kind == ChangeMigration && c.Schema == 1 && c.MigratedFrom == 0 {
			return errNeedA
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, err := v1.GetState()
	wantStatus(t, err, ErrMigration, "a is required")
	if !errors.Is(err, errNeedA) || fmt.Sprint(seen) != "[migration]" {
		t.Fatalf("%v (validator saw %v)", err, seen)
	}
	if got := stateText(t, v0); got != `{"a":1}` {
		t.Fatalf("state %s", got)
	}
}

func TestSchemaStepCallingItsAgentIsBusy(t *testing.T) {
	path := tempDB(t)
	v0 := openAgent(t, path, Options{})
	if _, err := v0.SetState(map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	v1 := openAgent(t, path, Options{SchemaVersion: 1})
	var inner error
	if err := v1.SetSchemaStep(0, func(st map[string]any) (map[string]any, error) {
		_, inner = v1.GetState()
		return st, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := v1.GetState(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, inner, ErrBusy)
}

func TestSchemaHistoryAsStoredAndUpgraded(t *testing.T) {
	path := tempDB(t)
	v0 := openAgent(t, path, Options{ChangeLog: &ChangeLog{KeepLast: 100}})
	if _, err := v0.SetState(map[string]any{"user": map[string]any{"nick": "ada"}}); err != nil {
		t.Fatal(err)
	}
	v2 := openAgent(t, path, v2Options())
	if _, err := v2.SetState(map[string]any{"messages": []any{"hi"}}); err != nil { // 2: migration, 3: write
		t.Fatal(err)
	}
	old, schema, err := v2.StateAtStored(1)
	if err != nil || schema != 0 || fmt.Sprint(old) != "map[user:map[nick:ada]]" {
		t.Fatalf("StateAtStored(1) = %v, %d, %v", old, schema, err)
	}
	oldJSON, schema, err := v2.StateAtStoredJSON(3)
	if err != nil || schema != 2 {
		t.Fatalf("StateAtStoredJSON(3) = %s, %d, %v", oldJSON, schema, err)
	}
	jsonEqual(t, oldJSON, []byte(`{"user":{"name":"ada"},"messages":["hi"]}`))
	up, err := v2.UpgradeState(old, 0)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, mustJSON(t, up), []byte(`{"user":{"name":"ada"},"messages":[]}`))
	// StateAt is as stored; Restore writes the old state back upgraded.
	jsonEqual(t, mustStateAt(t, v2, 1), []byte(`{"user":{"nick":"ada"}}`))
	restored, v, err := v2.RestoreJSON(1)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, restored, []byte(`{"user":{"name":"ada"},"messages":[]}`))
	if _, schema, err := v2.StateAtStored(v); err != nil || schema != 2 {
		t.Fatalf("the restored state is under schema %d (%v), want 2", schema, err)
	}
	// Argument errors: a newer from, a state that is not an object, malformed JSON.
	_, err = v2.UpgradeState(map[string]any{}, 3)
	wantStatus(t, err, ErrNewerSchema)
	_, err = v2.UpgradeStateJSON([]byte(`[1]`), 0)
	wantStatus(t, err, ErrInvalidArgument)
	_, err = v2.UpgradeStateJSON([]byte(`{"a":`), 0)
	wantStatus(t, err, ErrJSON)
	_, err = v2.UpgradeState(map[string]any{"ch": make(chan int)}, 0)
	wantStatus(t, err, ErrCodec)
	_, _, err = v2.StateAtStored(99)
	wantStatus(t, err, ErrInvalidArgument)
}

func mustStateAt(t *testing.T, a *Agent, version uint64) []byte {
	t.Helper()
	st, err := a.StateAtJSON(version)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSchemaArgumentErrors(t *testing.T) {
	a := openAgent(t, "", Options{SchemaVersion: 2, SchemaSteps: []SchemaStep{
		{From: 0, Ops: []StepOp{StepMove("/a", "/b")}},
	}})
	id := func(st map[string]any) (map[string]any, error) { return st, nil }
	live := func() int64 { return atomic.LoadInt64(&liveHooks) }
	before := live()
	// from not below the version; a step the options already give: refused, the Go step released.
	wantStatus(t, a.SetSchemaStep(2, id), ErrInvalidArgument)
	wantStatus(t, a.SetSchemaStep(0, id), ErrInvalidArgument)
	if got := live(); got != before {
		t.Fatalf("refused steps left %d live handles (had %d)", got, before)
	}
	if err := a.SetSchemaStep(1, id); err != nil {
		t.Fatal(err)
	}
	if err := a.SetSchemaStep(1, nil); err != nil { // removes it
		t.Fatal(err)
	}
	if got := live(); got != before {
		t.Fatalf("a removed step left %d live handles (had %d)", got, before)
	}
	// Open refuses bad steps and versions.
	for _, opts := range []Options{
		{SchemaVersion: 1000001},
		{SchemaVersion: 1, SchemaSteps: []SchemaStep{{From: 1, Ops: []StepOp{StepRemove("/a")}}}},
		{SchemaVersion: 1, SchemaSteps: []SchemaStep{{From: 0, Ops: []StepOp{{Op: "explode", Path: "/a"}}}}},
		{SchemaVersion: 1, SchemaSteps: []SchemaStep{{From: 0, Ops: []StepOp{StepRemove("a")}}}},
	} {
		b, err := openStore(t, ":memory:", opts)
		if err == nil {
			b.Close()
			t.Fatalf("Open with %+v succeeded", opts)
		}
		wantStatus(t, err, ErrInvalidArgument)
	}
	// A value with no JSON form is refused in Go, naming the operation.
	_, err := openStore(t, ":memory:", Options{SchemaVersion: 1, SchemaSteps: []SchemaStep{
		{From: 0, Ops: []StepOp{StepSet("/a", 1), StepSet("/c", make(chan int))}},
	}})
	wantStatus(t, err, ErrCodec, "SchemaSteps[0].Ops[1]")
	// A closed Agent.
	b, err := openStore(t, ":memory:", Options{SchemaVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	wantStatus(t, b.SetSchemaStep(0, id), ErrBadHandle)
	_, err = b.SchemaVersion()
	wantStatus(t, err, ErrBadHandle)
	_, _, err = b.StateAtStored(0)
	wantStatus(t, err, ErrBadHandle)
	_, err = b.UpgradeState(map[string]any{}, 0)
	wantStatus(t, err, ErrBadHandle)
}

func TestSchemaStepsJSON(t *testing.T) {
	text, err := Options{SchemaVersion: 3, SchemaSteps: []SchemaStep{
		{From: 0, Ops: []StepOp{StepMerge(map[string]any{"a": 1}), StepMergeAt("/p", nil)}},
		{From: 1, Ops: []StepOp{StepDefault("/d", nil), StepSet("/s", "x"), StepRemove("/r")}},
		{From: 2, Ops: []StepOp{StepRename("/n", "m"), StepMove("/f", "/t")}},
	}}.optionsJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema_version":3,"schema_steps":[` +
		`{"from":0,"ops":[{"op":"merge","value":{"a":1}},{"op":"merge","path":"/p","value":null}]},` +
		`{"from":1,"ops":[{"op":"default","path":"/d","value":null},{"op":"set","path":"/s","value":"x"},{"op":"remove","path":"/r"}]},` +
		`{"from":2,"ops":[{"op":"rename","path":"/n","to":"m"},{"op":"move","path":"/t","from":"/f"}]}]}`
	if text != want {
		t.Fatalf("options JSON\n%s\nwant\n%s", text, want)
	}
	if s := ChangeKind(7).String(); s != "ChangeKind(7)" {
		t.Fatal(s)
	}
}
