package agentstate

// Schema evolution: the declarative steps of Options.SchemaSteps, steps of code
// (SetSchemaStep), and the history's states as stored or upgraded (agent_state.h topic 9).

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/cgo"
	"strings"
	"sync/atomic"
	"unsafe"
)

// SchemaStep is a declarative step of Options.SchemaSteps: it upgrades a state stored under
// schema version From to From+1 by applying Ops in order. It is sent to the library as
// {"from": From, "ops": [...]}; the library checks it at Open (an unknown op, a path that is
// not a JSON Pointer, From not below SchemaVersion, two steps from one version:
// ErrInvalidArgument).
//
//	agentstate.Options{
//		SchemaVersion: 2,
//		SchemaSteps: []agentstate.SchemaStep{
//			{From: 0, Ops: []agentstate.StepOp{agentstate.StepRename("/user/nick", "name")}},
//			{From: 1, Ops: []agentstate.StepOp{agentstate.StepDefault("/messages", []any{})}},
//		},
//	}
type SchemaStep struct {
	// From is the schema version the step upgrades from (to From+1).
	From uint32
	// Ops are the step's operations, applied in order (StepMerge, StepDefault, ...).
	Ops []StepOp
}

// StepOp is one operation of a declarative step, best built with StepMerge, StepMergeAt,
// StepDefault, StepSet, StepRemove, StepRename or StepMove. Paths are JSON Pointers (RFC 6901,
// "/user/name") to members of objects. It is sent to the library as {"op": Op, "path": Path,
// "from": From, "to": To, "value": Value}, leaving out the empty strings, and Value unless Op
// is "merge", "default" or "set" (or Value is not nil). Value is encoded with Marshal.
type StepOp struct {
	// Op is "merge", "default", "set", "remove", "rename" or "move".
	Op string
	// Path is the member the operation works on ("merge": where the patch applies, "" for the
	// whole state; "move": where the member goes).
	Path string
	// From is, for "move", the member moved.
	From string
	// To is, for "rename", the member's new name (a name, not a path).
	To string
	// Value is the patch ("merge") or the value ("default", "set").
	Value any
}

// StepMerge is the operation that merges patch (which must encode to a JSON object) into the
// state by RFC 7396, as SetState does.
func StepMerge(patch any) StepOp { return StepOp{Op: "merge", Value: patch} }

// StepMergeAt is StepMerge applied to the object at path.
func StepMergeAt(path string, patch any) StepOp {
	return StepOp{Op: "merge", Path: path, Value: patch}
}

// StepDefault is the operation that sets the member at path to value where it is missing.
func StepDefault(path string, value any) StepOp {
	return StepOp{Op: "default", Path: path, Value: value}
}

// StepSet is the operation that sets the member at path to value, present or not.
func StepSet(path string, value any) StepOp { return StepOp{Op: "set", Path: path, Value: value} }

// StepRemove is the operation that removes the member at path where it is present.
func StepRemove(path string) StepOp { return StepOp{Op: "remove", Path: path} }

// StepRename is the operation that renames the member at path to to (a name in the same
// object, not a path).
func StepRename(path, to string) StepOp { return StepOp{Op: "rename", Path: path, To: to} }

// StepMove is the operation that moves the member at from to path.
func StepMove(from, path string) StepOp { return StepOp{Op: "move", From: from, Path: path} }

// schemaStepsJSON is the value of the "schema_steps" option. Errors name the step and
// operation (op "Open"; optionsFor renames it).
func schemaStepsJSON(steps []SchemaStep) (string, error) {
	var b strings.Builder
	b.WriteByte('[')
	for i, st := range steps {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"from":%d,"ops":[`, st.From)
		for j, op := range st.Ops {
			if j > 0 {
				b.WriteByte(',')
			}
			if err := writeStepOp(&b, op); err != nil {
				return "", newError("Open", StatusCodec, fmt.Sprintf("SchemaSteps[%d].Ops[%d]: %s", i, j, err.Error()), err)
			}
		}
		b.WriteString("]}")
	}
	b.WriteByte(']')
	return b.String(), nil
}

func writeStepOp(b *strings.Builder, op StepOp) error {
	str := func(key, v string) error {
		text, err := Marshal(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(b, `,%q:%s`, key, text)
		return nil
	}
	text, err := Marshal(op.Op)
	if err != nil {
		return err
	}
	b.WriteString(`{"op":`)
	b.Write(text)
	for _, kv := range [][2]string{{"path", op.Path}, {"from", op.From}, {"to", op.To}} {
		if kv[1] != "" {
			if err := str(kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	switch {
	case op.Value != nil, op.Op == "merge", op.Op == "default", op.Op == "set":
		v, err := Marshal(op.Value)
		if err != nil {
			if e, ok := err.(*Error); ok {
				return errors.New("value: " + e.Message)
			}
			return err
		}
		b.WriteString(`,"value":`)
		b.Write(v)
	}
	b.WriteByte('}')
	return nil
}

// SchemaStepFunc is a step of code (see SetSchemaStep): it returns state, stored under the
// step's version, upgraded to the next version. state is decoded as GetState decodes (numbers
// json.Number, tagged values time.Time, *big.Int, ...) and is the function's own to change
// and return; the result is encoded with Marshal and must be an object.
type SchemaStepFunc func(state map[string]any) (map[string]any, error)

// SchemaStepJSONFunc is SchemaStepFunc on JSON text (see SetSchemaStepJSON): state is compact
// JSON the function may keep, and it returns the upgraded state's JSON text.
type SchemaStepJSONFunc func(state json.RawMessage) (json.RawMessage, error)

type schemaStepHook struct {
	fn  SchemaStepFunc
	raw SchemaStepJSONFunc
}

// SetSchemaStep sets the step of code that upgrades a state from schema version from to
// from+1; nil removes it. An Agent opened with Options.SchemaVersion N upgrades a state stored
// under an older version on first touch (a read or a write), running the steps from its
// version up to N (the declarative ones of Options.SchemaSteps, these for the others), then
// the validator, and commits the result as a migration (hooks see a Change of Kind
// ChangeMigration), once, whichever Agent or process gets there first. Set the steps right
// after Open, before the first read or write.
//
// fn returning an error, panicking (a *PanicError) or returning a nil map fails the upgrade:
// the read or write that needed it returns an error matching ErrMigration whose message names
// the step ("schema step 1 -> 2: ...") and which wraps fn's error; nothing is written.
//
// fn runs like the validator: on the goroutine of the call that found the old state, with the
// Agent's lock held inside the write transaction (for UpgradeState, without a transaction). It
// must be quick, a call into this Agent from inside it fails with ErrBusy, it must not wait for
// another goroutine using this Agent, and it must not call runtime.Goexit (t.Fatal). The Agent
// keeps fn (in a runtime/cgo.Handle) until it is replaced, removed or the Agent is closed.
//
// Errors: ErrInvalidArgument (from is not below the Agent's schema version, or
// Options.SchemaSteps already has a step from from: one step per version), ErrBadHandle,
// ErrBusy (from inside a hook that holds the Agent's lock).
func (a *Agent) SetSchemaStep(from uint32, fn SchemaStepFunc) error {
	if fn == nil {
		return a.setSchemaStep("SetSchemaStep", from, nil)
	}
	return a.setSchemaStep("SetSchemaStep", from, &schemaStepHook{fn: fn})
}

// SetSchemaStepJSON is SetSchemaStep with a step that works on JSON text: the state as stored
// (compact JSON) in, the upgraded state's JSON text out, passed to the library untouched. nil
// removes the step. Same rules and errors as SetSchemaStep.
func (a *Agent) SetSchemaStepJSON(from uint32, fn SchemaStepJSONFunc) error {
	if fn == nil {
		return a.setSchemaStep("SetSchemaStepJSON", from, nil)
	}
	return a.setSchemaStep("SetSchemaStepJSON", from, &schemaStepHook{raw: fn})
}

func (a *Agent) setSchemaStep(op string, from uint32, hook *schemaStepHook) error {
	var h cgo.Handle
	if hook != nil {
		h = cgo.NewHandle(hook)
		atomic.AddInt64(&liveHooks, 1)
	}
	// On failure the library has already called free_user_data, which deleted h.
	return a.setupCall(op, func(c cCall) C.int32_t {
		return C.agentstate_set_schema_step(c.h, C.uint32_t(from), C.uintptr_t(h), c.err)
	})
}

// SchemaVersion returns the schema version this Agent declares (Options.SchemaVersion; 0 when
// none). Errors: ErrBadHandle.
func (a *Agent) SchemaVersion() (uint32, error) {
	var v C.uint32_t
	err := a.setupCall("SchemaVersion", func(c cCall) C.int32_t {
		return C.agentstate_schema_version(c.h, &v, c.err)
	})
	if err != nil {
		return 0, err
	}
	return uint32(v), nil
}

// StateAtStored returns the state at version as stored (decoded as by GetState), with the
// schema version it was written under (the Agent's own for version 0, the initial state):
// StateAt without any upgrade. Pass both to UpgradeState for the state in this Agent's shape.
//
// Errors: those of StateAt (ErrGap, ErrInvalidArgument for a future version, ErrBadHandle,
// ErrStorage).
func (a *Agent) StateAtStored(version uint64) (map[string]any, uint32, error) {
	return a.stateAtStoredValue(context.Background(), "StateAtStored", version)
}

// StateAtStoredContext is StateAtStored under ctx (see GetStateContext).
func (a *Agent) StateAtStoredContext(ctx context.Context, version uint64) (map[string]any, uint32, error) {
	return a.stateAtStoredValue(ctx, "StateAtStoredContext", version)
}

// StateAtStoredJSON is StateAtStored with the state as compact JSON, as stored.
func (a *Agent) StateAtStoredJSON(version uint64) (json.RawMessage, uint32, error) {
	return a.stateAtStored(context.Background(), "StateAtStoredJSON", version)
}

// StateAtStoredJSONContext is StateAtStoredJSON under ctx (see GetStateContext).
func (a *Agent) StateAtStoredJSONContext(ctx context.Context, version uint64) (json.RawMessage, uint32, error) {
	return a.stateAtStored(ctx, "StateAtStoredJSONContext", version)
}

func (a *Agent) stateAtStoredValue(ctx context.Context, op string, version uint64) (map[string]any, uint32, error) {
	data, schema, err := a.stateAtStored(ctx, op, version)
	if err != nil {
		return nil, 0, err
	}
	st, err := decodeState(op, data)
	if err != nil {
		return nil, 0, err
	}
	return st, schema, nil
}

func (a *Agent) stateAtStored(ctx context.Context, op string, version uint64) ([]byte, uint32, error) {
	var schema C.uint32_t
	data, err := a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		return C.agentstate_get_state_at_stored(c.h, C.uint64_t(version), out, &schema, c.ctx, c.token, c.err)
	})
	if err != nil {
		return nil, 0, err
	}
	return data, uint32(schema), nil
}

// UpgradeState returns state (a value that encodes to a JSON object: a map, a struct,
// json.RawMessage, ...), stored under schema version from, upgraded to this Agent's schema
// version by its steps (decoded as by GetState); nothing is written. It is for a state read
// from the history (StateAtStored, a LoggedChange's Next and Schema) wanted in the current
// shape; a state of the Agent's version comes back as it is. Steps of code run on this
// goroutine, as for a migration.
//
// Errors: ErrNewerSchema (from is above the Agent's version), ErrMigration (a step failed or
// is missing; it wraps a Go step's error), ErrCodec / ErrJSON / ErrInvalidArgument (state),
// ErrBadHandle.
func (a *Agent) UpgradeState(state any, from uint32) (map[string]any, error) {
	return a.upgradeStateValue(context.Background(), "UpgradeState", state, from)
}

// UpgradeStateContext is UpgradeState under ctx (see GetStateContext).
func (a *Agent) UpgradeStateContext(ctx context.Context, state any, from uint32) (map[string]any, error) {
	return a.upgradeStateValue(ctx, "UpgradeStateContext", state, from)
}

// UpgradeStateJSON is UpgradeState with the state given as JSON text, passed to the library
// untouched; it returns the upgraded state as compact JSON.
func (a *Agent) UpgradeStateJSON(state []byte, from uint32) (json.RawMessage, error) {
	return a.upgradeState(context.Background(), "UpgradeStateJSON", state, from)
}

// UpgradeStateJSONContext is UpgradeStateJSON under ctx (see GetStateContext).
func (a *Agent) UpgradeStateJSONContext(ctx context.Context, state []byte, from uint32) (json.RawMessage, error) {
	return a.upgradeState(ctx, "UpgradeStateJSONContext", state, from)
}

func (a *Agent) upgradeStateValue(ctx context.Context, op string, state any, from uint32) (map[string]any, error) {
	data, err := Marshal(state)
	if err != nil {
		e := err.(*Error)
		e.Op = op
		return nil, e
	}
	out, err := a.upgradeState(ctx, op, data, from)
	if err != nil {
		return nil, err
	}
	return decodeState(op, out)
}

func (a *Agent) upgradeState(ctx context.Context, op string, data []byte, from uint32) ([]byte, error) {
	p, n := inputPtr(data), C.size_t(len(data))
	out, err := a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		return C.agentstate_upgrade_state(c.h, p, n, C.uint32_t(from), out, c.ctx, c.token, c.err)
	})
	runtime.KeepAlive(data)
	return out, err
}

//export agentstateSchemaStep
func agentstateSchemaStep(h C.uintptr_t, from C.uint32_t, state *C.uint8_t, n C.size_t, out *C.AgentBuffer, message *C.AgentBuffer, ctx C.uintptr_t) C.int32_t {
	hook, ok := cgo.Handle(h).Value().(*schemaStepHook)
	if !ok {
		return 1
	}
	in := goBytes(state, n)
	var data []byte
	err := protect(func() error {
		if hook.raw != nil {
			next, err := hook.raw(json.RawMessage(in))
			if err != nil {
				return err
			}
			if next == nil {
				return errors.New("the step returned no state")
			}
			data = next
			return nil
		}
		st, err := decodeState("SetSchemaStep", in)
		if err != nil {
			return err
		}
		next, err := hook.fn(st)
		if err != nil {
			return err
		}
		if next == nil {
			return errors.New("the step returned a nil state")
		}
		if data, err = Marshal(next); err != nil {
			return stepEncodingError{err.(*Error)}
		}
		return nil
	})
	if err == nil {
		var cerr *C.char
		rc := C.agentstate_buffer_copy(inputPtr(data), C.size_t(len(data)), out, &cerr)
		runtime.KeepAlive(data)
		if rc != 0 {
			err = libError("SetSchemaStep", rc, cerr, 0)
		}
	}
	if err == nil {
		return 0
	}
	if pe, ok := err.(*PanicError); ok {
		pe.who = "step"
	}
	// The reason goes back through the library (it becomes part of the call's message, after
	// the step's name); the error itself through the call's context, to be wrapped by the
	// returned *Error.
	text := []byte(err.Error())
	if len(text) == 0 {
		text = []byte(fmt.Sprintf("%T with an empty message", err))
	}
	var cerr *C.char
	if rc := C.agentstate_buffer_copy(inputPtr(text), C.size_t(len(text)), message, &cerr); rc != 0 {
		C.free(unsafe.Pointer(cerr))
	}
	runtime.KeepAlive(text)
	stashHookError(ctx, rejection{err})
	return 1
}

// stepEncodingError is a step's result that Marshal refused; its text leaves out the
// "agentstate: Marshal: " that the outer error's context already gives.
type stepEncodingError struct{ err *Error }

func (e stepEncodingError) Error() string { return "cannot encode the state: " + e.err.Message }

func (e stepEncodingError) Unwrap() error { return e.err }
