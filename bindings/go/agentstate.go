package agentstate

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"
)

// maxBusyTimeoutMs is the largest busy_timeout_ms (and server_timeout_ms) the library accepts
// (crates/agent_state/src/options.rs).
const maxBusyTimeoutMs = 2147483647

// Synchronous is the durability of a commit (the "synchronous" open option).
type Synchronous string

const (
	// SyncFull fsyncs every commit: an acknowledged write survives power loss (the default).
	SyncFull Synchronous = "full"
	// SyncNormal fsyncs at checkpoints only: a write survives a crash of the process, the last
	// ones may be lost on power loss.
	SyncNormal Synchronous = "normal"
)

// Options configures Open. The zero value means the library's defaults.
type Options struct {
	// InitialState is the state shown while nothing is stored: a value that encodes to a JSON
	// object (a map, a struct, json.RawMessage, ...); nil (or a nil map) means {}. It is
	// encoded with Marshal, so it may hold time.Time, *big.Int, []byte, Map, Set, TypedArray
	// and RegExp.
	InitialState any
	// MaxValueBytes caps the encoded state, and every input document, in bytes (2 to
	// 1000000000); 0 means the library's default, 2097152.
	MaxValueBytes int
	// Synchronous is SyncFull or SyncNormal; "" means SyncFull.
	Synchronous Synchronous
	// BusyTimeout is how long a call waits for what another connection holds before failing
	// with ErrBusy: SQLite's write lock; on PostgreSQL the agent's row, a table lock or a
	// pooled connection. It never bounds how long an uncontended statement takes. In whole
	// milliseconds (rounded up), at most 2147483647ms (about 24.8 days; Open refuses more with
	// ErrInvalidArgument). 0 means the library's default (5s); a negative value means not to
	// wait at all.
	BusyTimeout time.Duration
	// ServerTimeout is, on PostgreSQL, how long the server may take to answer: a connection
	// attempt gets this long, a statement BusyTimeout + ServerTimeout; past it (a frozen or
	// partitioned server) the call fails with ErrUnavailable. Whole milliseconds (rounded up),
	// 1ms to 2147483647ms; 0 (or negative) means the library's default (10s). A SQLite file
	// does not use it.
	ServerTimeout time.Duration
	// ReadOnly opens an existing store for reading only; writes fail with ErrStorage.
	ReadOnly bool
	// ChangeLog switches the store's change log on (with a retention) or off; nil leaves the
	// store's setting as it is. See ChangeLog.
	ChangeLog *ChangeLog
	// AgentID names which agent of the store to open: valid UTF-8, at most 255 bytes (Open
	// refuses anything else with ErrInvalidArgument). Required on PostgreSQL. On a SQLite
	// file, "" means the file's single agent (as before agent ids existed); with an id, one
	// file holds many isolated agents (state, version, change log, hooks), and the Agents
	// with an id in one process share one connection per file.
	AgentID string
	// MaxConnections is, on PostgreSQL, the most connections this process keeps to the
	// server, shared by all its Agents on it (1 to 1000); 0 means the library's default, 4.
	// The pool has the largest size any Open asked for. A SQLite file does not use it.
	MaxConnections int
}

// ChangeLog configures the change log of a store (the "change_log" open option): the recent
// changes, each with its version, time, patch and resulting state, written in the same
// transaction as the change. Poll, ChangesSince, StateAt and Restore read it: without it, Poll
// and ChangesSince fail with ErrInvalidArgument, and StateAt and Restore reach only the current
// version and version 0 (ErrGap for the others).
//
// The setting is recorded in the store file: once switched on, every handle on the file, in
// any process, logs its changes with this retention, whatever options it was opened with,
// until an Open with another ChangeLog changes the retention or switches the log off.
//
//	agentstate.Options{ChangeLog: &agentstate.ChangeLog{KeepLast: 1000}}         // on
//	agentstate.Options{ChangeLog: &agentstate.ChangeLog{KeepFor: 24 * time.Hour}} // on
//	agentstate.Options{ChangeLog: &agentstate.ChangeLog{Off: true}}                // off
//	agentstate.Options{}                                                           // as stored
//
// With both KeepLast and KeepFor set, both limits apply. The newest change is always kept. To
// switch the log on, at least one of them must be positive; &ChangeLog{} is an
// ErrInvalidArgument error, as is Off with a retention.
type ChangeLog struct {
	// KeepLast keeps the last KeepLast changes (0: no limit by count).
	KeepLast int
	// KeepFor keeps the changes made in the last KeepFor, in whole seconds, rounded up (0: no
	// limit by age).
	KeepFor time.Duration
	// Off switches the log off and drops the changes it holds ("change_log": false).
	Off bool
}

// json is the value of the "change_log" option.
func (c *ChangeLog) json() (string, error) {
	if c.Off {
		if c.KeepLast != 0 || c.KeepFor != 0 {
			return "", newError("Open", StatusInvalidArgument, "ChangeLog: Off together with KeepLast or KeepFor", nil)
		}
		return "false", nil
	}
	var parts []string
	if c.KeepLast != 0 {
		parts = append(parts, `"keep_last":`+strconv.Itoa(c.KeepLast))
	}
	if c.KeepFor != 0 {
		secs := int64(c.KeepFor / time.Second)
		if c.KeepFor > 0 && c.KeepFor%time.Second != 0 {
			secs++
		}
		if c.KeepFor < 0 && secs == 0 {
			secs = -1 // refused by the library like any other non-positive count
		}
		parts = append(parts, `"keep_seconds":`+strconv.FormatInt(secs, 10))
	}
	return "{" + strings.Join(parts, ",") + "}", nil
}

// optionsJSON builds the options object for agent_open.
func (o Options) optionsJSON() (string, error) {
	var parts []string
	if o.InitialState != nil {
		b, err := Marshal(o.InitialState)
		if err != nil {
			return "", err
		}
		if string(b) != "null" { // a nil map or pointer: the default, like nil
			parts = append(parts, `"initial_state":`+string(b))
		}
	}
	if o.MaxValueBytes != 0 {
		parts = append(parts, `"max_value_bytes":`+strconv.Itoa(o.MaxValueBytes))
	}
	if o.Synchronous != "" {
		b, err := Marshal(string(o.Synchronous))
		if err != nil {
			return "", err
		}
		parts = append(parts, `"synchronous":`+string(b))
	}
	switch {
	case o.BusyTimeout < 0:
		parts = append(parts, `"busy_timeout_ms":0`)
	case o.BusyTimeout > 0:
		ms, err := timeoutMs("BusyTimeout", o.BusyTimeout)
		if err != nil {
			return "", err
		}
		parts = append(parts, `"busy_timeout_ms":`+ms)
	}
	if o.ServerTimeout > 0 {
		ms, err := timeoutMs("ServerTimeout", o.ServerTimeout)
		if err != nil {
			return "", err
		}
		parts = append(parts, `"server_timeout_ms":`+ms)
	}
	if o.ReadOnly {
		parts = append(parts, `"read_only":true`)
	}
	if o.ChangeLog != nil {
		log, err := o.ChangeLog.json()
		if err != nil {
			return "", err
		}
		parts = append(parts, `"change_log":`+log)
	}
	if o.AgentID != "" {
		if !utf8.ValidString(o.AgentID) {
			return "", newError("Open", StatusInvalidArgument, "AgentID is not valid UTF-8", nil)
		}
		b, err := Marshal(o.AgentID)
		if err != nil {
			return "", err
		}
		parts = append(parts, `"agent_id":`+string(b))
	}
	if o.MaxConnections != 0 {
		parts = append(parts, `"max_connections":`+strconv.Itoa(o.MaxConnections))
	}
	return "{" + strings.Join(parts, ",") + "}", nil
}

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

// Version returns the version of the C library, e.g. "0.1.0".
func Version() string { return C.GoString(C.agent_version()) }

// Open opens (creating when absent, unless opts.ReadOnly) the agent store at path. ":memory:"
// opens a private in-memory store. A new file is created with mode 0600; a file that is not an
// agent store, or was written by a newer release, is refused with ErrStorage and left alone.
//
// A path starting with "postgres://" or "postgresql://" is a PostgreSQL connection URI in
// libpq's syntax ("postgresql://user:password@host:5432/dbname", or
// "postgresql:///dbname?host=/var/run/postgresql&port=5432&user=app" for a Unix socket; this
// build has no TLS): it is passed to the library as is (never through path/filepath, whose
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
	optJSON, err := opts.optionsJSON()
	if err != nil {
		e := err.(*Error)
		if e.Op != "Open" { // an encoding error of the initial state
			e.Op = "Open"
			e.Message = "initial state: " + e.Message
		}
		return nil, e
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	copts := C.CString(optJSON)
	defer C.free(unsafe.Pointer(copts))
	var h C.AgentHandle
	var cerr *C.char
	if rc := C.agentstate_open(cpath, copts, &h, &cerr); rc != 0 {
		return nil, libError("Open", rc, cerr, 0)
	}
	a := &Agent{h: h}
	runtime.SetFinalizer(a, (*Agent).finalize)
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
	data, err := a.getState("GetState")
	if err != nil {
		return nil, err
	}
	return decodeState("GetState", data)
}

// GetStateInto decodes the state into v (a non-nil pointer) with Unmarshal: like
// json.Unmarshal, plus the tagged types (time.Time, *big.Int, []byte, Map, Set, ...).
func (a *Agent) GetStateInto(v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() != reflect.Pointer || rv.IsNil() {
		return newError("GetStateInto", StatusInvalidArgument, fmt.Sprintf("the target must be a non-nil pointer, not %T", v), nil)
	}
	data, err := a.getState("GetStateInto")
	if err != nil {
		return err
	}
	if err := Unmarshal(data, v); err != nil {
		e := err.(*Error)
		e.Op = "GetStateInto"
		return e
	}
	return nil
}

// GetStateJSON returns the state as the library stores it: compact JSON, members in order,
// numbers exactly as written.
func (a *Agent) GetStateJSON() (json.RawMessage, error) {
	return a.getState("GetStateJSON")
}

func (a *Agent) getState(op string) ([]byte, error) {
	var buf C.AgentBuffer
	var cerr *C.char
	ctx := newCallContext()
	rc := C.agentstate_get_state(a.handle(), &buf, ctx, &cerr)
	runtime.KeepAlive(a)
	if rc != 0 {
		return nil, libError(op, rc, cerr, ctx)
	}
	dropHookErrors(ctx)
	return takeBuffer(&buf), nil
}

// SetState merges patch into the state by RFC 7396 (JSON Merge Patch: members merge
// recursively, nil deletes, everything else — arrays, scalars, tagged values — replaces) in
// one transaction, and returns the full merged state (decoded as by GetState). patch must
// encode (with Marshal) to a JSON object: a map, a struct, a json.RawMessage...
//
// OnStateChanged hooks run before SetState returns, on this goroutine. If one fails, the change
// is committed all the same and SetState returns a nil state and an error that matches ErrHook
// and wraps the hook's error. On any other error nothing was written; a value that cannot be
// encoded is an ErrCodec error before any call into the library.
func (a *Agent) SetState(patch any) (map[string]any, error) {
	return a.writeValue("SetState", patch, false)
}

// SetStateJSON is SetState with the patch given as JSON text, passed to the library untouched;
// it returns the merged state as compact JSON.
func (a *Agent) SetStateJSON(patch []byte) (json.RawMessage, error) {
	return a.write("SetStateJSON", patch, false)
}

// ReplaceState replaces the state with next (which must encode to a JSON object): nothing of
// the previous state survives. It returns the new state; hooks see a nil patch. Errors as for
// SetState.
func (a *Agent) ReplaceState(next any) (map[string]any, error) {
	return a.writeValue("ReplaceState", next, true)
}

// ReplaceStateJSON is ReplaceState with the state given as JSON text, passed untouched.
func (a *Agent) ReplaceStateJSON(next []byte) (json.RawMessage, error) {
	return a.write("ReplaceStateJSON", next, true)
}

func (a *Agent) writeValue(op string, v any, replace bool) (map[string]any, error) {
	data, err := Marshal(v)
	if err != nil {
		e := err.(*Error)
		e.Op = op
		return nil, e
	}
	out, err := a.write(op, data, replace)
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

func (a *Agent) write(op string, data []byte, replace bool) ([]byte, error) {
	p := inputPtr(data)
	var buf C.AgentBuffer
	var cerr *C.char
	ctx := newCallContext()
	var rc C.int32_t
	if replace {
		rc = C.agentstate_replace_state(a.handle(), p, C.size_t(len(data)), &buf, ctx, &cerr)
	} else {
		rc = C.agentstate_set_state(a.handle(), p, C.size_t(len(data)), &buf, ctx, &cerr)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(data)
	if rc != 0 {
		return nil, libError(op, rc, cerr, ctx)
	}
	dropHookErrors(ctx)
	return takeBuffer(&buf), nil
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
	e := &Error{Status: Status(rc), Op: op, Message: msg}
	if ctx != 0 {
		for _, err := range takeHookErrors(ctx) {
			if r, ok := err.(rejection); ok {
				if e.Status == StatusRejected {
					e.Err = r.err
				}
				continue
			}
			e.HookErrors = append(e.HookErrors, err)
		}
		if e.Err == nil && len(e.HookErrors) > 0 {
			e.Err = e.HookErrors[0]
		}
	}
	return e
}

// rejection is what the validator returned when it rejected a change, stashed (like a hook's
// error) for the call that made the change.
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

// timeoutMs is d in whole milliseconds, rounded up without overflowing (adding 999999ns to a
// Duration near its maximum would wrap around to a negative count), as option text; more than
// the library accepts is ErrInvalidArgument, naming the field.
func timeoutMs(field string, d time.Duration) (string, error) {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	if ms > maxBusyTimeoutMs {
		return "", newError("Open", StatusInvalidArgument, fmt.Sprintf(
			"%s %v is more than the maximum, %dms (%v)", field, d,
			maxBusyTimeoutMs, time.Duration(maxBusyTimeoutMs)*time.Millisecond), nil)
	}
	return strconv.FormatInt(ms, 10), nil
}
