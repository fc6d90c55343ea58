package agentstate

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Agent is one open agent store: a persistent JSON state with merge-patch updates and hooks.
//
// All methods may be called from any number of goroutines at once; concurrent writers never
// lose each other's updates. An Agent must be closed with Close; a finalizer closes a
// forgotten one as a backstop only (an Agent referenced by one of its own hooks, its
// initial-state function or its validator is never collected, so it is never finalized).
type Agent struct {
	h      C.AgentHandle
	closed int32 // atomic: 1 once Close succeeded
}

// Version returns the version of the C library, e.g. "0.3.0".
func Version() string { return C.GoString(C.agent_version()) }

// Open opens (creating when absent, unless opts.ReadOnly) the agent store at path. ":memory:"
// opens a private in-memory store. A new file is created with mode 0600; a file that is not an
// agent store, or was written by a newer release, is refused with ErrStorage and left alone.
//
// A path starting with "postgres://" or "postgresql://" is a PostgreSQL connection URI in
// libpq's syntax ("postgresql://user:password@host:5432/dbname", or
// "postgresql:///dbname?host=/var/run/postgresql&port=5432&user=app" for a Unix socket; TLS
// with libpq's sslmode, sslrootcert, sslcert, sslkey): it is passed to the library as is (never through path/filepath, whose
// Clean would collapse the "//"), opts.AgentID is required, and the tables are created on
// first open. Synchronous SyncFull and SyncNormal are synchronous_commit on and off, and
// BusyTimeout bounds waiting for row locks and pooled connections, ServerTimeout a server that
// does not answer.
//
// Errors: ErrInvalidArgument (empty path, a NUL byte in it, a bad option, no AgentID for
// PostgreSQL), ErrCodec or ErrTooLarge (the initial state), ErrStorage, ErrBusy (also when
// switching the change log on or off has to wait for another connection's write lock too
// long), ErrUnavailable (the PostgreSQL server cannot be reached within ServerTimeout).
func Open(path string, opts Options) (*Agent, error) {
	if strings.IndexByte(path, 0) >= 0 {
		return nil, newError("Open", StatusInvalidArgument, "the path contains a NUL byte", nil)
	}
	optJSON, err := opts.optionsFor("Open")
	if err != nil {
		return nil, err
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	copts := C.CString(optJSON)
	defer C.free(unsafe.Pointer(copts))
	var h C.AgentHandle
	err = libCall(context.Background(), "Open", cCall{}, func(c cCall) C.int32_t {
		return C.agentstate_open(cpath, copts, &h, c.err)
	})
	if err != nil {
		return nil, err
	}
	a := &Agent{h: h}
	runtime.SetFinalizer(a, (*Agent).finalize)
	startDispatcher() // now rather than at the first awaited call: see completions.go
	return a, nil
}

// handle is a's library handle; 0 (never valid) for a nil Agent.
func (a *Agent) handle() C.AgentHandle {
	if a == nil {
		return 0
	}
	return a.h
}

// Close closes the store: hooks are unregistered (their Go functions released) and every later
// call fails with ErrBadHandle. Calls already running in other goroutines finish or fail with
// ErrBadHandle. Close is idempotent: closing a closed Agent returns nil. It may be called from
// inside an OnStateChanged or OnChange hook, not from the initial-state function or the
// validator (ErrBusy).
func (a *Agent) Close() error {
	if a == nil || atomic.LoadInt32(&a.closed) == 1 {
		return nil
	}
	if err := a.close(); err != nil {
		return err
	}
	runtime.SetFinalizer(a, nil)
	return nil
}

func (a *Agent) close() error {
	var cerr *C.char
	rc := C.agentstate_close(a.h, &cerr)
	runtime.KeepAlive(a)
	switch Status(rc) {
	case StatusOK:
	case StatusBadHandle:
		// Closed by a concurrent Close: idempotent.
		C.free(unsafe.Pointer(cerr))
	default:
		return libError("Close", rc, cerr, 0)
	}
	atomic.StoreInt32(&a.closed, 1)
	return nil
}

func (a *Agent) finalize() { _ = a.close() }

// GetState returns the state: the stored object, or the initial state while nothing is stored
// (reading never stores it). Objects are map[string]any, numbers json.Number (their exact
// text), tagged values time.Time, *big.Int, []byte, Map, Set, TypedArray or RegExp.
func (a *Agent) GetState() (map[string]any, error) {
	return a.getStateValue(syncCall, "GetState")
}

func (a *Agent) getStateValue(ctx context.Context, op string) (map[string]any, error) {
	data, err := a.getState(ctx, op)
	if err != nil {
		return nil, err
	}
	return decodeState(op, data)
}

// GetStateInto decodes the state into v (a non-nil pointer) with Unmarshal: like
// json.Unmarshal, plus the tagged types (time.Time, *big.Int, []byte, Map, Set, ...).
func (a *Agent) GetStateInto(v any) error {
	return a.getStateInto(syncCall, "GetStateInto", v)
}

func (a *Agent) getStateInto(ctx context.Context, op string, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() != reflect.Pointer || rv.IsNil() {
		return newError(op, StatusInvalidArgument, fmt.Sprintf("the target must be a non-nil pointer, not %T", v), nil)
	}
	data, err := a.getState(ctx, op)
	if err != nil {
		return err
	}
	if err := Unmarshal(data, v); err != nil {
		e := err.(*Error)
		e.Op = op
		return e
	}
	return nil
}

// GetStateJSON returns the state as the library stores it: compact JSON, members in order,
// numbers exactly as written.
func (a *Agent) GetStateJSON() (json.RawMessage, error) {
	return a.getState(syncCall, "GetStateJSON")
}

// SetState merges patch into the state by RFC 7396 (JSON Merge Patch: members merge
// recursively, nil deletes, everything else — arrays, scalars, tagged values — replaces) in
// one transaction, and returns the full merged state (decoded as by GetState). patch must
// encode (with Marshal) to a JSON object: a Patch, a map, a struct, a json.RawMessage...
//
// A struct patch writes every field it does not omit, zero values included: SetState(
// ConvState{Status: "processing"}) with plain `json:"lastReply"` and `json:"at"` tags
// overwrites lastReply with "" and at with the zero time. Fields are left out of the patch
// only as encoding/json leaves them out: omitempty (false, 0, "", and nil or empty pointers,
// maps, slices, interfaces) and omitzero (the zero value, or the type's IsZero method: the way
// to leave out a time.Time or a struct); a nil pointer, map, slice or interface without an
// omit option is null, which deletes the member. To change only some members, build a Patch
// (Patch{}.Set("status", "processing").Delete("lastReply")), use a patch type whose fields all
// carry omitempty or omitzero, or a map.
//
// A patch that leaves the state as it is (an empty one, or one that writes what is stored)
// commits nothing: no new version, no hook, no log entry; SetState returns the state.
//
// OnStateChanged hooks run before SetState returns, on this goroutine. If one fails, the change
// is committed all the same and SetState returns a nil state and an error that matches ErrHook
// and wraps the hook's error. On any other error nothing was written; a value that cannot be
// encoded is an ErrCodec error before any call into the library.
func (a *Agent) SetState(patch any) (map[string]any, error) {
	return a.writeValue(syncCall, "SetState", patch, false)
}

// SetStateJSON is SetState with the patch given as JSON text, passed to the library untouched;
// it returns the merged state as compact JSON.
func (a *Agent) SetStateJSON(patch []byte) (json.RawMessage, error) {
	return a.write(syncCall, "SetStateJSON", patch, false)
}

// ReplaceState replaces the state with next (which must encode to a JSON object): nothing of
// the previous state survives. It returns the new state; hooks see a nil patch. Errors as for
// SetState.
func (a *Agent) ReplaceState(next any) (map[string]any, error) {
	return a.writeValue(syncCall, "ReplaceState", next, true)
}

// ReplaceStateJSON is ReplaceState with the state given as JSON text, passed untouched.
func (a *Agent) ReplaceStateJSON(next []byte) (json.RawMessage, error) {
	return a.write(syncCall, "ReplaceStateJSON", next, true)
}

func (a *Agent) writeValue(ctx context.Context, op string, v any, replace bool) (map[string]any, error) {
	data, err := Marshal(v)
	if err != nil {
		e := err.(*Error)
		e.Op = op
		return nil, e
	}
	out, err := a.write(ctx, op, data, replace)
	if err != nil {
		return nil, err
	}
	return decodeState(op, out)
}

// emptyInput stands in for the address of an empty input: the library wants a non-NULL
// pointer even for 0 bytes.
var emptyInput = C.malloc(1)

// inputPtr is the address of data for the library (non-NULL also when data is empty). The
// caller keeps data alive across the call.
func inputPtr(data []byte) *C.uint8_t {
	if len(data) > 0 {
		return (*C.uint8_t)(unsafe.Pointer(&data[0]))
	}
	return (*C.uint8_t)(emptyInput)
}

// cCall is what the shim's wrappers take besides the call's own arguments.
type cCall struct {
	h     C.AgentHandle // the Agent's handle (0 in a call on a store, or Open)
	ctx   C.uintptr_t   // the Go call in progress, whose hooks' errors come back to it (0: none)
	token C.AgentCancel // the call's cancel token (0: none)
	err   **C.char      // where the wrapper puts a failure's message
}

// libCall makes the library call f under ctx (f gets c with the call's cancel token and where
// its message goes) and returns its failure as an error: the library's, wrapping the errors
// of the hooks that ran for c.ctx, or ctx's when the token ended the call.
func libCall(ctx context.Context, op string, c cCall, f func(c cCall) C.int32_t) error {
	cc, err := startCancel(ctx, op)
	if err != nil {
		return err
	}
	var cerr *C.char
	c.token, c.err = cc.token, &cerr
	rc := f(c)
	cc.end()
	if rc != 0 {
		return cancelCause(ctx, libError(op, rc, cerr, c.ctx))
	}
	if c.ctx != 0 {
		dropHookErrors(c.ctx)
	}
	return nil
}

// call is libCall on a, as a Go call of its own: its hooks' errors come back to it.
func (a *Agent) call(ctx context.Context, op string, f func(c cCall) C.int32_t) error {
	err := libCall(ctx, op, cCall{h: a.handle(), ctx: newCallContext()}, f)
	runtime.KeepAlive(a)
	return err
}

// callBuffer is call for a function that returns a buffer: its bytes, copied into Go memory
// (the buffer freed).
func (a *Agent) callBuffer(ctx context.Context, op string, f func(c cCall, out *C.AgentBuffer) C.int32_t) ([]byte, error) {
	var buf C.AgentBuffer
	err := a.call(ctx, op, func(c cCall) C.int32_t { return f(c, &buf) })
	if err != nil {
		return nil, err
	}
	return takeBuffer(&buf), nil
}

// setupCall is libCall on a for the calls that register or remove its hooks: never cancelled,
// and no hook of theirs runs during them.
func (a *Agent) setupCall(op string, f func(c cCall) C.int32_t) error {
	err := libCall(context.Background(), op, cCall{h: a.handle()}, f)
	runtime.KeepAlive(a)
	return err
}

// takeBuffer copies a library buffer into Go memory and frees it.
func takeBuffer(buf *C.AgentBuffer) []byte {
	defer C.agent_buffer_free(buf)
	if buf.data == nil {
		return []byte{}
	}
	out := make([]byte, int(buf.len))
	copy(out, unsafe.Slice((*byte)(unsafe.Pointer(buf.data)), int(buf.len)))
	return out
}

func decodeState(op string, data []byte) (map[string]any, error) {
	v, err := unmarshalAny(data)
	if err != nil {
		return nil, newError(op, StatusCodec, "cannot decode the state: "+err.Error(), nil)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, newError(op, StatusCodec, fmt.Sprintf("the state is not an object but %T", v), nil)
	}
	return m, nil
}

// libError builds the *Error of a failed library call: cerr is the message copied in the same
// native call (freed here), ctx the call's context, whose hook errors become the cause.
func libError(op string, rc C.int32_t, cerr *C.char, ctx C.uintptr_t) error {
	msg := ""
	if cerr != nil {
		msg = C.GoString(cerr)
		C.free(unsafe.Pointer(cerr))
	}
	var hookErrs []error
	if ctx != 0 {
		hookErrs = takeHookErrors(ctx)
	}
	return callError(op, rc, msg, hookErrs)
}

// callError builds the *Error of a failed library call from its status, its message and what
// its hooks reported (their errors, and the validator's or a schema step's rejection, which
// becomes the cause of the failure it made).
func callError(op string, rc C.int32_t, msg string, hookErrs []error) error {
	e := &Error{Status: Status(rc), Op: op, Message: withoutFunctionName(msg)}
	for _, err := range hookErrs {
		if r, ok := err.(rejection); ok {
			// The validator's or a schema step's reason: the cause of the failure it made
			// (a validator refusing a migration's result makes it an ErrMigration).
			if e.Status == StatusRejected || e.Status == StatusMigration {
				e.Err = r.err
			}
			continue
		}
		e.HookErrors = append(e.HookErrors, err)
	}
	if e.Err == nil && len(e.HookErrors) > 0 {
		e.Err = e.HookErrors[0]
	}
	return e
}

// rejection is what the validator returned when it rejected a change, or what a schema step
// returned when it failed, stashed (like a hook's error) for the call that made the change.
type rejection struct{ err error }

func (r rejection) Error() string { return r.err.Error() }

// ---- call contexts: which Go call a hook's error belongs to ----

var (
	callSeq        uint64 // atomic
	hookErrorsMu   sync.Mutex
	hookErrorsBy   = map[C.uintptr_t][]error{}
	hookErrorCount int64 // atomic: len(hookErrorsBy), to skip the lock on the common path
)

// newCallContext returns a fresh nonzero id for one library call.
func newCallContext() C.uintptr_t {
	return C.uintptr_t(atomic.AddUint64(&callSeq, 1))
}

// stashHookError records err as a hook failure (or, as a rejection, the validator's reason) of
// the call ctx (0: no Go call to report to).
func stashHookError(ctx C.uintptr_t, err error) {
	if ctx == 0 {
		return
	}
	hookErrorsMu.Lock()
	if _, ok := hookErrorsBy[ctx]; !ok {
		atomic.AddInt64(&hookErrorCount, 1)
	}
	hookErrorsBy[ctx] = append(hookErrorsBy[ctx], err)
	hookErrorsMu.Unlock()
}

func takeHookErrors(ctx C.uintptr_t) []error {
	if atomic.LoadInt64(&hookErrorCount) == 0 {
		return nil
	}
	hookErrorsMu.Lock()
	defer hookErrorsMu.Unlock()
	errs, ok := hookErrorsBy[ctx]
	if ok {
		delete(hookErrorsBy, ctx)
		atomic.AddInt64(&hookErrorCount, -1)
	}
	return errs
}

// dropHookErrors forgets what hooks reported for a call that succeeded (which the library
// never does, but a stash must not outlive its call).
func dropHookErrors(ctx C.uintptr_t) { takeHookErrors(ctx) }
