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
// (nil for ReplaceState), as compact JSON that the hook may keep. Decode them with Unmarshal.
type StateChangedFunc func(next, prev, patch json.RawMessage) error

// InitialStateFunc computes the initial state (see SetInitialStateFunc). The value must encode
// to a JSON object.
type InitialStateFunc func() (any, error)

// HookID identifies a registered OnStateChanged hook of one Agent.
type HookID uint64

type stateHook struct{ fn StateChangedFunc }

type initialHook struct{ fn InitialStateFunc }

// liveHooks counts registrations whose cgo.Handle is still alive (for tests).
var liveHooks int64

// OnStateChanged registers fn to run after every committed change made through this Agent
// (by SetState or ReplaceState, from any goroutine), and returns its id for RemoveHook.
//
// Delivery: on the goroutine that made the change, before its SetState/ReplaceState returns,
// after the commit and with no lock of the library held; in commit order (each delivery's prev
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
	h := cgo.NewHandle(&stateHook{fn: fn})
	atomic.AddInt64(&liveHooks, 1)
	var id C.uint64_t
	var cerr *C.char
	// On failure the library has already called free_user_data, which deleted h.
	rc := C.agentstate_on_state_changed(a.handle(), C.uintptr_t(h), &id, &cerr)
	runtime.KeepAlive(a)
	if rc != 0 {
		return 0, libError("OnStateChanged", rc, cerr, 0)
	}
	return HookID(id), nil
}

// RemoveHook unregisters hook id. A delivery already running in another goroutine may still be
// inside the hook; it is released when that delivery ends. Errors: ErrInvalidArgument (no such
// hook on this Agent), ErrBadHandle.
func (a *Agent) RemoveHook(id HookID) error {
	var cerr *C.char
	rc := C.agentstate_remove_hook(a.handle(), C.uint64_t(id), &cerr)
	runtime.KeepAlive(a)
	if rc != 0 {
		return libError("RemoveHook", rc, cerr, 0)
	}
	return nil
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
	var cerr *C.char
	rc := C.agentstate_set_initial_state_hook(a.handle(), C.uintptr_t(h), &cerr)
	runtime.KeepAlive(a)
	if rc != 0 {
		return libError("SetInitialStateFunc", rc, cerr, 0)
	}
	return nil
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
	next := json.RawMessage(goBytes(change.next, change.next_len))
	prev := json.RawMessage(goBytes(change.prev, change.prev_len))
	var patch json.RawMessage
	if change.patch != nil {
		patch = json.RawMessage(goBytes(change.patch, change.patch_len))
	}
	if err := protect(func() error { return hook.fn(next, prev, patch) }); err != nil {
		stashHookError(ctx, err)
		return 1
	}
	return 0
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
		stashHookError(ctx, fmt.Errorf("initial-state function: %w", err))
		return 1
	}
	return 0
}

//export agentstateFreeHook
func agentstateFreeHook(h C.uintptr_t) {
	cgo.Handle(h).Delete()
	atomic.AddInt64(&liveHooks, -1)
}
