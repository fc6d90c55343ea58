package agentstate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"time"

	agentstate "github.com/agent-state/agent-state/bindings/go"
)

type ConvState struct {
	Status    string    `json:"status"`
	LastReply string    `json:"lastReply"`
	At        time.Time `json:"at"`
}

func Example() {
	dir, _ := os.MkdirTemp("", "agentstate-example")
	defer os.RemoveAll(dir)

	// (Go maps encode with sorted keys; use a struct or json.RawMessage to choose the order.)
	a, err := agentstate.Open(filepath.Join(dir, "conv.db"), agentstate.Options{
		InitialState: map[string]any{"status": "idle", "lastReply": ""},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()

	_, err = a.OnStateChanged(func(next, prev, patch json.RawMessage) error {
		fmt.Printf("changed: %s -> %s (patch %s)\n", prev, next, patch)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	st, err := a.SetState(map[string]any{"status": "processing"}) // the full merged state
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("status:", st["status"])

	at := time.Date(2026, 11, 30, 3, 6, 44, 123e6, time.UTC)
	if _, err := a.SetState(map[string]any{"status": "idle", "at": at}); err != nil {
		log.Fatal(err)
	}
	var s ConvState
	if err := a.GetStateInto(&s); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s at %s\n", s.Status, s.At.Format(time.RFC3339Nano))
	// Output:
	// changed: {"lastReply":"","status":"idle"} -> {"lastReply":"","status":"processing"} (patch {"status":"processing"})
	// status: processing
	// changed: {"lastReply":"","status":"processing"} -> {"lastReply":"","status":"idle","at":{"$date":"2026-11-30T03:06:44.123Z"}} (patch {"at":{"$date":"2026-11-30T03:06:44.123Z"},"status":"idle"})
	// idle at 2026-11-30T03:06:44.123Z
}

func ExampleAgent_SetState_mergePatch() {
	a, _ := agentstate.Open(":memory:", agentstate.Options{})
	defer a.Close()
	a.ReplaceStateJSON([]byte(`{"status":"processing","job":{"id":"j1","step":2,"note":"retrying"}}`))
	// Nested objects merge, nil deletes, untouched members survive.
	a.SetState(map[string]any{"job": map[string]any{"step": 3, "note": nil}})
	raw, _ := a.GetStateJSON()
	fmt.Println(string(raw))
	// Output: {"status":"processing","job":{"id":"j1","step":3}}
}

// A struct given to SetState is a patch of every field it does not omit: without omitempty
// or omitzero, its zero values are written too.
func ExampleAgent_SetState_structPatch() {
	a, _ := agentstate.Open(":memory:", agentstate.Options{})
	defer a.Close()
	at := time.Date(2026, 11, 30, 3, 6, 44, 0, time.UTC)
	a.ReplaceState(ConvState{Status: "idle", LastReply: "hello", At: at})

	// Plain tags: lastReply and at are overwritten with "" and the zero time.
	a.SetState(ConvState{Status: "processing"})
	raw, _ := a.GetStateJSON()
	fmt.Println(string(raw))

	// A patch type that omits its zero fields (omitzero for the time.Time): only status.
	type ConvPatch struct {
		Status    string    `json:"status,omitempty"`
		LastReply string    `json:"lastReply,omitempty"`
		At        time.Time `json:"at,omitzero"`
	}
	a.ReplaceState(ConvState{Status: "idle", LastReply: "hello", At: at})
	a.SetState(ConvPatch{Status: "processing"})
	raw, _ = a.GetStateJSON()
	fmt.Println(string(raw))
	// Output:
	// {"status":"processing","lastReply":"","at":{"$date":"0001-01-01T00:00:00.000Z"}}
	// {"status":"processing","lastReply":"hello","at":{"$date":"2026-11-30T03:06:44.000Z"}}
}

// A Patch names the members it writes; nothing else of the state changes.
func ExamplePatch() {
	a, _ := agentstate.Open(":memory:", agentstate.Options{})
	defer a.Close()
	a.ReplaceStateJSON([]byte(`{"status":"idle","lastReply":"hello","job":{"id":"j1","step":2,"note":"retrying"}}`))

	patch := agentstate.Patch{}.
		Set("status", "processing").
		Delete("lastReply").
		Set("job", agentstate.Patch{}.Set("step", 3).Delete("note")) // a nested patch
	b, _ := agentstate.Marshal(patch)
	fmt.Println(string(b))

	a.SetState(patch)
	raw, _ := a.GetStateJSON()
	fmt.Println(string(raw))
	// Output:
	// {"status":"processing","lastReply":null,"job":{"step":3,"note":null}}
	// {"status":"processing","job":{"id":"j1","step":3}}
}

// Typed reads and writes the state as a Go type; Update writes only what the function changed.
func ExampleOpenTyped() {
	dir, _ := os.MkdirTemp("", "agentstate-example")
	defer os.RemoveAll(dir)
	conv, err := agentstate.OpenTyped[ConvState](filepath.Join(dir, "conv.db"), agentstate.Options{
		InitialState: ConvState{Status: "idle"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer conv.Close()
	conv.OnStateChanged(func(next, prev ConvState) error {
		fmt.Printf("%s -> %s\n", prev.Status, next.Status)
		return nil
	})

	st, _ := conv.Set(agentstate.Patch{}.Set("status", "processing").Set("lastReply", "hi"))
	fmt.Println(st.Status, st.LastReply)
	st, _ = conv.Update(func(s *ConvState) error {
		s.Status = "idle"
		return nil
	})
	fmt.Println(st.Status, st.LastReply)
	// Output:
	// idle -> processing
	// processing hi
	// processing -> idle
	// idle hi
}

func ExampleAgent_OnStateChanged_error() {
	a, _ := agentstate.Open(":memory:", agentstate.Options{})
	defer a.Close()
	errMirror := errors.New("mirror unreachable")
	a.OnStateChanged(func(next, prev, patch json.RawMessage) error { return errMirror })

	_, err := a.SetState(map[string]any{"n": 1})
	fmt.Println(errors.Is(err, agentstate.ErrHook), errors.Is(err, errMirror))
	raw, _ := a.GetStateJSON() // the change was committed all the same
	fmt.Println(string(raw))
	// Output:
	// true true
	// {"n":1}
}

func ExampleMarshal() {
	n, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	b, err := agentstate.Marshal(map[string]any{
		"at":    time.Date(2026, 11, 30, 3, 6, 44, 123e6, time.UTC),
		"big":   n,
		"bytes": []byte{1, 2, 3},
		"map":   agentstate.Map{{Key: 1, Value: "one"}},
		"set":   agentstate.Set{"a", "b"},
		"re":    agentstate.RegExp{Source: "a+b", Flags: "gi"},
		"goRe":  regexp.MustCompile(`(?i)^a+$`), // a leading (?i), (?m), (?s) group: the flags
	})
	fmt.Println(string(b), err)

	// A time.Time keeps the fraction it has: 6 digits for microseconds, 9 for nanoseconds.
	b, _ = agentstate.Marshal(time.Date(2026, 1, 1, 0, 0, 0, 1000, time.UTC))
	fmt.Println(string(b))
	_, err = agentstate.Marshal(map[string]any{"at": time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	fmt.Println(errors.Is(err, agentstate.ErrCodec))
	// Output:
	// {"at":{"$date":"2026-11-30T03:06:44.123Z"},"big":{"$bigint":"123456789012345678901234567890"},"bytes":{"$arraybuffer":"AQID"},"goRe":{"$regexp":{"source":"^a+$","flags":"i"}},"map":{"$map":[[1,"one"]]},"re":{"$regexp":{"source":"a+b","flags":"gi"}},"set":{"$set":["a","b"]}} <nil>
	// {"$date":"2026-01-01T00:00:00.000001Z"}
	// true
}

func ExampleAgent_SetStateIf() {
	a, _ := agentstate.Open(":memory:", agentstate.Options{})
	defer a.Close()
	// A read-modify-write loop that never overwrites another writer's change.
	increment := func() error {
		for {
			var s struct{ Count int }
			version, err := a.GetStateVersionedInto(&s)
			if err != nil {
				return err
			}
			_, _, err = a.SetStateIf(version, map[string]any{"Count": s.Count + 1})
			if !errors.Is(err, agentstate.ErrConflict) {
				return err // nil: committed
			}
		}
	}
	for i := 0; i < 3; i++ {
		if err := increment(); err != nil {
			log.Fatal(err)
		}
	}
	raw, version, _ := a.GetStateVersionedJSON()
	fmt.Println(string(raw), version)

	_, _, err := a.SetStateIf(1, map[string]any{"Count": 0}) // stale: nothing written
	fmt.Println(errors.Is(err, agentstate.ErrConflict))
	// Output:
	// {"Count":3} 3
	// true
}

func ExampleAgent_SetValidator() {
	a, _ := agentstate.Open(":memory:", agentstate.Options{})
	defer a.Close()
	errOverdrawn := errors.New("overdrawn")
	a.SetValidator(func(c agentstate.Change) error {
		var next struct{ Balance int }
		if err := agentstate.Unmarshal(c.Next, &next); err != nil {
			return err
		}
		if next.Balance < 0 {
			return fmt.Errorf("balance %d: %w", next.Balance, errOverdrawn)
		}
		return nil
	})
	a.SetState(map[string]any{"Balance": 10})
	_, err := a.SetState(map[string]any{"Balance": -5})
	fmt.Println(errors.Is(err, agentstate.ErrRejected), errors.Is(err, errOverdrawn))
	fmt.Println(err)
	raw, _ := a.GetStateJSON() // nothing was written
	fmt.Println(string(raw))
	// Output:
	// true true
	// agentstate: SetState: rejected: the validator rejected the change: balance -5: overdrawn
	// {"Balance":10}
}

func ExampleAgent_Poll() {
	dir, _ := os.MkdirTemp("", "agentstate-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "conv.db")

	// The change log is the agent's, recorded in the store with it: every Agent opened on
	// this agent logs its changes (another AgentID of the file keeps its own setting).
	watcher, err := agentstate.Open(path, agentstate.Options{ChangeLog: &agentstate.ChangeLog{KeepLast: 1000}})
	if err != nil {
		log.Fatal(err)
	}
	defer watcher.Close()
	watcher.OnChange(func(c agentstate.Change) error {
		fmt.Printf("version %d: %s -> %s\n", c.Version, c.Prev, c.Next)
		return nil
	})

	writer, _ := agentstate.Open(path, agentstate.Options{}) // another process, say
	defer writer.Close()
	writer.SetState(map[string]any{"status": "processing"})
	writer.SetState(map[string]any{"status": "done"})

	n, err := watcher.Poll() // on a time.Ticker, typically
	fmt.Println(n, err)

	changes, _ := watcher.ChangesSince(1) // what a client at version 1 is missing
	for _, c := range changes {
		fmt.Printf("%d %s %s\n", c.Version, c.Patch, c.Next)
	}
	old, _ := watcher.StateAtJSON(1)
	fmt.Println(string(old))
	// Output:
	// version 1: {} -> {"status":"processing"}
	// version 2: {"status":"processing"} -> {"status":"done"}
	// 2 <nil>
	// 2 {"status":"done"} {"status":"done"}
	// {"status":"processing"}
}

// A store's agents: list them a page at a time, delete one, expire the idle ones.
func ExampleListAgentsContext() {
	dir, _ := os.MkdirTemp("", "agentstate-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agents.db")
	for _, id := range []string{"user-1/chat-a", "user-1/chat-b", "user-2/chat-a"} {
		a, err := agentstate.Open(path, agentstate.Options{AgentID: id})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := a.SetState(map[string]any{"turns": 1}); err != nil {
			log.Fatal(err)
		}
		a.Close()
	}
	ctx := context.Background()

	q := agentstate.ListQuery{Prefix: "user-1/", Limit: 1}
	for more := true; more; {
		page, err := agentstate.ListAgentsContext(ctx, path, agentstate.Options{}, q)
		if err != nil {
			log.Fatal(err)
		}
		for _, info := range page {
			fmt.Println(info.ID, "version", info.Version)
		}
		q, more = q.Next(page)
	}

	version, existed, err := agentstate.DeleteAgentContext(ctx, path, agentstate.Options{}, "user-1/chat-b")
	fmt.Println("deleted:", version, existed, err)

	gone, err := agentstate.ExpireAgentsContext(ctx, path, agentstate.Options{}, 30*24*time.Hour, 500, true)
	fmt.Println("idle for 30 days:", len(gone), err)
	// Output:
	// user-1/chat-a version 1
	// user-1/chat-b version 1
	// deleted: 1 true <nil>
	// idle for 30 days: 0 <nil>
}

// ReplaceState writes a whole new state: nothing of the previous one survives (SetState would
// have kept the members the patch does not name).
func ExampleAgent_ReplaceState() {
	a, _ := agentstate.Open(":memory:", agentstate.Options{})
	defer a.Close()
	a.SetState(map[string]any{"status": "processing", "job": map[string]any{"id": "j1"}})

	st, err := a.ReplaceState(map[string]any{"status": "idle"})
	fmt.Println(st, err)
	raw, version, _ := a.GetStateVersionedJSON()
	fmt.Println(string(raw), version)
	// Output:
	// map[status:idle] <nil>
	// {"status":"idle"} 2
}

// Restore writes an earlier state back, as a new change with a new version; it needs the
// agent's change log to still hold that version.
func ExampleAgent_Restore() {
	a, _ := agentstate.Open(":memory:", agentstate.Options{ChangeLog: &agentstate.ChangeLog{KeepLast: 100}})
	defer a.Close()
	a.SetState(map[string]any{"plan": "draft"})
	a.SetState(map[string]any{"plan": "final"})
	a.SetState(map[string]any{"plan": nil, "oops": true})

	st, version, err := a.Restore(2)
	fmt.Println(st, version, err)
	old, _ := a.StateAtJSON(1)
	fmt.Println(string(old))
	// Output:
	// map[plan:final] 4 <nil>
	// {"plan":"draft"}
}

// The Context forms of the calls return ErrCancelled, with nothing written, when their context
// is done before they got the lock, the pooled connection or the server's answer they waited for.
func ExampleAgent_SetStateContext() {
	a, _ := agentstate.Open(":memory:", agentstate.Options{})
	defer a.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := a.SetStateContext(ctx, map[string]any{"status": "processing"})
	fmt.Println(st, err)

	done, stop := context.WithCancel(context.Background())
	stop() // a request whose client went away, say
	_, err = a.SetStateContext(done, map[string]any{"status": "abandoned"})
	fmt.Println(errors.Is(err, agentstate.ErrCancelled), errors.Is(err, context.Canceled))
	raw, _ := a.GetStateJSON() // nothing was written
	fmt.Println(string(raw))
	// Output:
	// map[status:processing] <nil>
	// true true
	// {"status":"processing"}
}

func ExampleAgent_SetSchemaStep() {
	dir, _ := os.MkdirTemp("", "agentstate-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agent.db")

	// Yesterday's program (schema version 0) wrote this.
	old, err := agentstate.Open(path, agentstate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := old.SetStateJSON([]byte(`{"user":{"nick":"ada"},"visits":3}`)); err != nil {
		log.Fatal(err)
	}
	old.Close()

	// Today's program declares version 2: a declarative step 0 -> 1, a step of code 1 -> 2.
	a, err := agentstate.Open(path, agentstate.Options{
		SchemaVersion: 2,
		SchemaSteps: []agentstate.SchemaStep{
			{From: 0, Ops: []agentstate.StepOp{agentstate.StepRename("/user/nick", "name")}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	err = a.SetSchemaStep(1, func(st map[string]any) (map[string]any, error) {
		st["stats"] = map[string]any{"visits": st["visits"]}
		delete(st, "visits")
		return st, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// The first touch upgrades it, once (a map step's result encodes with sorted keys).
	st, v, err := a.GetStateVersionedJSON()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(st), v)

	// A program of version 1 is refused the newer state, and writes nothing.
	older, err := agentstate.Open(path, agentstate.Options{SchemaVersion: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer older.Close()
	_, err = older.SetState(map[string]any{"visits": 4})
	fmt.Println(errors.Is(err, agentstate.ErrNewerSchema))
	// Output:
	// {"stats":{"visits":3},"user":{"name":"ada"}} 2
	// true
}

// Appending to a list with an RFC 6902 JSON Patch, a guarded change, and reads of one place.
func ExampleAgent_PatchState() {
	a, err := agentstate.Open(":memory:", agentstate.Options{
		InitialState: map[string]any{"status": "draft", "messages": []any{}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	for _, text := range []string{"hello", "how are you?"} {
		op := agentstate.OpAdd("/messages/-", map[string]any{"text": text})
		if _, err := a.PatchState([]agentstate.PatchOp{op}); err != nil {
			log.Fatal(err)
		}
	}
	publish := []agentstate.PatchOp{
		agentstate.OpTest("/status", "draft"),
		agentstate.OpReplace("/status", "published"),
	}
	st, err := a.PatchState(publish)
	fmt.Println(st["status"], err)
	_, err = a.PatchState(publish) // its test no longer holds: nothing is written
	var e *agentstate.Error
	if errors.As(err, &e) {
		index, op, path, _ := e.Operation()
		fmt.Println(errors.Is(err, agentstate.ErrTestFailed), index, op, path)
	}

	var last []struct{ Text string }
	if err := a.GetTail("/messages", 1, &last); err != nil {
		log.Fatal(err)
	}
	first, err := a.GetPathJSON(agentstate.JSONPointer("messages", "0", "text"))
	fmt.Println(last[0].Text, string(first), err)
	// Output:
	// published <nil>
	// true 0 test /status
	// how are you? "hello" <nil>
}
