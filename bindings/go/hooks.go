package agentstate

// The hook trampolines: //export'ed functions the C library calls (through the small C
// functions in shim.c, which add the context of the triggering call). A Go hook is kept in a
// runtime/cgo.Handle passed to the library as user_data; the library's free_user_data callback,
// called exactly once per registration (on removal, on Close, or when registration fails),
// deletes it.

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/cgo"
	"runtime/debug"
	"sync/atomic"
	"unsafe"
)

// StateChangedFunc is an OnStateChanged hook. It receives the state after the change, the
// state before it (the initial state if nothing was stored), and the merge patch as applied
// (nil for ReplaceState; for PatchState the array of JSON Patch operations), as compact JSON
// that the hook may keep. Decode them with Unmarshal.
type StateChangedFunc func(next, prev, patch json.RawMessage) error

// InitialStateFunc computes the initial state (see SetInitialStateFunc). The value must encode
// to a JSON object.
type InitialStateFunc func() (any, error)

// HookID identifies a registered OnStateChanged or OnChange hook of one Agent.
type HookID uint64

// Change is one change of the state, as OnChange hooks and the validator see it: compact JSON
// text that the function may keep (decode it with Unmarshal).
type Change struct {
	// Next is the state after the change.
	Next json.RawMessage
	// Prev is the state before it (for the agent's first change, the initial state of the Agent
	// that made it).
	Prev json.RawMessage
	// Patch is the merge patch as applied (SetState and its forms), or for a ChangeJSONPatch
	// the array of JSON Patch operations as applied (PatchState and its forms); nil for a
	// replacement (ReplaceState and its forms, Restore) and a migration.
	Patch json.RawMessage
	// Version is the state's version after the change: 1 for the agent's first write, one more
	// for each commit (a write that leaves the state as it is commits nothing, so it has no
	// Change). The validator sees the version the change would get.
	Version uint64
	// Kind is what made the change: ChangeMerge (SetState and its forms), ChangeJSONPatch
	// (PatchState and its forms), ChangeReplace (ReplaceState and its forms, Restore, a
	// deletion delivered by Poll) or ChangeMigration (a state stored under an older schema
	// version upgraded by the steps; see SetSchemaStep).
	Kind ChangeKind
	// Schema is the schema version Next was written under (the writer's
	// Options.SchemaVersion; 0 when none).
	Schema uint32
	// MigratedFrom is, for a ChangeMigration, the schema version the state was upgraded from
	// (Prev's); 0 for the other kinds.
	MigratedFrom uint32
}

// ChangeKind is what made a change (Change.Kind, LoggedChange.Kind): the library's
// AGENT_CHANGE_* numbers.
type ChangeKind int32

const (
	// ChangeMerge is a merge patch (SetState, SetStateIf and their forms).
	ChangeMerge ChangeKind = 1
	// ChangeReplace is a replacement (ReplaceState, ReplaceStateIf and their forms, Restore,
	// a deletion delivered by Poll).
	ChangeReplace ChangeKind = 2
	// ChangeMigration is a schema migration: a state stored under an older schema version
	// upgraded to the writer's (see Options.SchemaVersion and SetSchemaStep).
	ChangeMigration ChangeKind = 3
	// ChangeJSONPatch is an RFC 6902 JSON Patch (PatchState, PatchStateIf and their forms):
	// the change's Patch is the array of operations.
	ChangeJSONPatch ChangeKind = 4
)

// String returns "merge", "replace", "migration", "json_patch" (the names of the change log's
// "kind"), or "ChangeKind(n)" for a number this package does not know (a newer library).
func (k ChangeKind) String() string {
	switch k {
	case ChangeMerge:
		return "merge"
	case ChangeReplace:
		return "replace"
	case ChangeMigration:
		return "migration"
	case ChangeJSONPatch:
		return "json_patch"
	}
	return fmt.Sprintf("ChangeKind(%d)", int32(k))
}

// ChangeFunc is an OnChange hook.
type ChangeFunc func(c Change) error

// ValidateFunc is a validator (see SetValidator): nil lets the change commit, an error rejects
// it.
type ValidateFunc func(c Change) error

// stateHook is an OnStateChanged (fn) or OnChange (change) registration.
type stateHook struct {
	fn     StateChangedFunc
	change ChangeFunc
}

type initialHook struct{ fn InitialStateFunc }

type validatorHook struct{ fn ValidateFunc }

// liveHooks counts registrations whose cgo.Handle is still alive (for tests).
var liveHooks int64

// OnStateChanged registers fn to run after every committed change made through this Agent
// (by SetState, ReplaceState, PatchState and their forms, or Restore, from any goroutine), and
// returns its id for RemoveHook. With the change log on (see ChangeLog), fn also receives the
// changes of other Agents and processes, delivered by Poll or ahead of this Agent's next write
// (see OnChange, the form of this hook that also receives each change's version).
//
// Delivery: on the goroutine that made the change, before its SetState/ReplaceState returns
// (for the awaited Context forms, SetStateContext and the like, on the library worker that
// made it, in a goroutine of its own, before the Context method returns), after the commit and with no lock of the library held; in commit order (each delivery's prev
// is the previous delivery's next, also with many writing goroutines); several hooks in
// registration order. fn may call this Agent — GetState, SetState/ReplaceState (that change is
// delivered after fn returns, and a hook failure in its delivery is reported to the outermost
// call, the one whose delivery was running), OnStateChanged, RemoveHook, Close. It must not wait for another
// goroutine that is writing to the same Agent (deliveries are ordered, so that would deadlock)
// and must not call runtime.Goexit (t.Fatal, t.FailNow, t.SkipNow) since that cannot unwind
// through C.
//
// If fn returns an error or panics, the change stays committed and the call that made it
// returns an error matching ErrHook that wraps fn's error (or a *PanicError).
func (a *Agent) OnStateChanged(fn StateChangedFunc) (HookID, error) {
	if fn == nil {
		return 0, newError("OnStateChanged", StatusInvalidArgument, "the hook function is nil", nil)
	}
	return a.register("OnStateChanged", &stateHook{fn: fn})
}

func (a *Agent) register(op string, hook *stateHook) (HookID, error) {
	h := cgo.NewHandle(hook)
	atomic.AddInt64(&liveHooks, 1)
	var id C.uint64_t
	// On failure the library has already called free_user_data, which deleted h.
	err := a.setupCall(op, func(c cCall) C.int32_t {
		return C.agentstate_on_state_changed(c.h, C.uintptr_t(h), &id, c.err)
	})
	if err != nil {
		return 0, err
	}
	return HookID(id), nil
}

// OnChange is OnStateChanged with the change's version: it registers fn to run after every
// committed change delivered to this Agent's hooks, and returns its id for RemoveHook. Same
// delivery, ordering, re-entrance and error rules as OnStateChanged (an error or panic makes
// the triggering call return an ErrHook error wrapping it; the change stays committed).
//
// Deliveries are the changes made through this Agent and, with the change log on (see
// ChangeLog), those of other Agents and processes: Poll delivers them, and every write through
// this Agent first delivers the ones still pending, so that c.Prev of each delivery is the
// c.Next of the one before and versions increase by one (unless the log's retention dropped
// some: see Poll and ErrGap). Without the log, other Agents' changes are not delivered and
// show up in the next delivery's Prev.
func (a *Agent) OnChange(fn ChangeFunc) (HookID, error) {
	if fn == nil {
		return 0, newError("OnChange", StatusInvalidArgument, "the hook function is nil", nil)
	}
	return a.register("OnChange", &stateHook{change: fn})
}

// RemoveHook unregisters hook id. A delivery already running in another goroutine may still be
// inside the hook; it is released when that delivery ends. Errors: ErrInvalidArgument (no such
// hook on this Agent), ErrBadHandle.
func (a *Agent) RemoveHook(id HookID) error {
	return a.setupCall("RemoveHook", func(c cCall) C.int32_t {
		return C.agentstate_remove_hook(c.h, C.uint64_t(id), c.err)
	})
}

// SetInitialStateFunc sets the function that supplies the initial state, taking precedence over
// Options.InitialState; nil removes it. It is called every time a default state is needed:
// by GetState while nothing is stored, and by the first write. Its value is encoded with
// Marshal and checked like any input.
//
// It runs with the Agent's lock held: calling the same Agent from inside it fails with ErrBusy
// (other Agents may be used), and it must not wait for another goroutine using this Agent. An
// error or panic makes the call that needed the initial state fail with an error matching
// ErrHook that wraps it.
func (a *Agent) SetInitialStateFunc(fn InitialStateFunc) error {
	var h cgo.Handle
	if fn != nil {
		h = cgo.NewHandle(&initialHook{fn: fn})
		atomic.AddInt64(&liveHooks, 1)
	}
	return a.setupCall("SetInitialStateFunc", func(c cCall) C.int32_t {
		return C.agentstate_set_initial_state_hook(c.h, C.uintptr_t(h), c.err)
	})
}

// SetValidator sets the validation gate of this Agent; nil removes it. fn sees every change
// made through this Agent (SetState, ReplaceState, PatchState, their If and JSON forms,
// Restore) inside the write transaction, after the merge (or the operations) and the codec and
// size checks, before the commit, on the writing goroutine (for the awaited Context forms, on
// the library worker that makes the write: see SetStateContext); c.Version is the version the
// change would get.
//
// Returning nil lets the change commit. Returning an error (or panicking) rejects it: nothing
// is written, no hook runs, and the write returns an error matching ErrRejected whose message
// includes the error's text and which wraps the error itself (errors.Is and errors.As see it;
// a panic becomes a *PanicError). Changes made through other Agents or processes are not gated
// by it.
//
// fn runs with the Agent's lock held and the store's write lock taken: it must be quick, a call
// into this Agent from inside it fails with ErrBusy (other Agents may be used), it must not
// wait for another goroutine using this Agent, and it must not call runtime.Goexit (t.Fatal,
// t.FailNow, t.SkipNow).
func (a *Agent) SetValidator(fn ValidateFunc) error {
	var h cgo.Handle
	if fn != nil {
		h = cgo.NewHandle(&validatorHook{fn: fn})
		atomic.AddInt64(&liveHooks, 1)
	}
	return a.setupCall("SetValidator", func(c cCall) C.int32_t {
		return C.agentstate_set_validator(c.h, C.uintptr_t(h), c.err)
	})
}

// protect runs a hook, turning a panic (also panic(nil)) into a *PanicError.
func protect(f func() error) (err error) {
	returned := false
	defer func() {
		if r := recover(); r != nil || !returned {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	err = f()
	returned = true
	return err
}

// goBytes copies n bytes at p (n may be 0).
func goBytes(p *C.uint8_t, n C.size_t) []byte {
	out := make([]byte, int(n))
	if n > 0 {
		copy(out, unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n)))
	}
	return out
}

//export agentstateStateChanged
func agentstateStateChanged(h C.uintptr_t, change *C.AgentStateChange, ctx C.uintptr_t) C.int32_t {
	hook, ok := cgo.Handle(h).Value().(*stateHook)
	if !ok {
		return 1
	}
	c := changeOf(change)
	err := protect(func() error {
		if hook.change != nil {
			return hook.change(c)
		}
		return hook.fn(c.Next, c.Prev, c.Patch)
	})
	if err != nil {
		stashHookError(ctx, err)
		return 1
	}
	return 0
}

// changeOf copies a change the library lends to a hook or validator.
func changeOf(change *C.AgentStateChange) Change {
	c := Change{
		Next:         json.RawMessage(goBytes(change.next, change.next_len)),
		Prev:         json.RawMessage(goBytes(change.prev, change.prev_len)),
		Version:      uint64(change.version),
		Kind:         ChangeKind(change.kind),
		Schema:       uint32(change.schema),
		MigratedFrom: uint32(change.migrated_from),
	}
	if change.patch != nil {
		c.Patch = json.RawMessage(goBytes(change.patch, change.patch_len))
	}
	return c
}

//export agentstateValidate
func agentstateValidate(h C.uintptr_t, change *C.AgentStateChange, message *C.AgentBuffer, ctx C.uintptr_t) C.int32_t {
	hook, ok := cgo.Handle(h).Value().(*validatorHook)
	if !ok {
		return 1
	}
	c := changeOf(change)
	err := protect(func() error { return hook.fn(c) })
	if err == nil {
		return 0
	}
	if pe, ok := err.(*PanicError); ok {
		pe.who = "validator"
	}
	// The reason goes back through the library (it becomes part of the call's message); the
	// error itself through the call's context, to be wrapped by the returned *Error.
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

//export agentstateInitialState
func agentstateInitialState(h C.uintptr_t, out *C.AgentBuffer, ctx C.uintptr_t) C.int32_t {
	hook, ok := cgo.Handle(h).Value().(*initialHook)
	if !ok {
		return 1
	}
	var data []byte
	err := protect(func() error {
		v, err := hook.fn()
		if err != nil {
			return err
		}
		if data, err = Marshal(v); err != nil {
			return err
		}
		return nil
	})
	if err == nil {
		var cerr *C.char
		rc := C.agentstate_buffer_copy((*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(len(data)), out, &cerr)
		if rc != 0 {
			err = libError("SetInitialStateFunc", rc, cerr, 0)
		}
	}
	if err != nil {
		stashHookError(ctx, initialStateError{err})
		return 1
	}
	return 0
}

// initialStateError is the failure of an initial-state function (or of encoding its value),
// the cause of the ErrHook error of the call that needed the initial state. Its text names the
// function once and leaves out the "agentstate: Marshal: " of an encoding error, which the
// outer error already begins with.
type initialStateError struct{ err error }

func (e initialStateError) Error() string {
	if inner, ok := e.err.(*Error); ok {
		return "initial-state function: " + inner.Message
	}
	return "initial-state function: " + e.err.Error()
}

func (e initialStateError) Unwrap() error { return e.err }

//export agentstateFreeHook
func agentstateFreeHook(h C.uintptr_t) {
	cgo.Handle(h).Delete()
	atomic.AddInt64(&liveHooks, -1)
}
