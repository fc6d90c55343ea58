package agentstate

import (
	"fmt"
	"strconv"
	"strings"
)

// Status is a status code of the C library (AgentStatus). Every *Error carries one, and each
// Status is itself an error value, so errors.Is(err, agentstate.ErrCodec) — or, for a status
// this package does not name yet, errors.Is(err, agentstate.Status(n)) — tells what failed.
type Status int32

// The library's status codes (AGENT_OK and AGENT_ERR_* in agent_state.h). The numbers are
// part of the C ABI and never change.
const (
	StatusOK              Status = 0  // AGENT_OK
	StatusInvalidArgument Status = 1  // AGENT_ERR_INVALID_ARGUMENT
	StatusBadHandle       Status = 2  // AGENT_ERR_BAD_HANDLE
	StatusJSON            Status = 3  // AGENT_ERR_JSON
	StatusCodec           Status = 4  // AGENT_ERR_CODEC
	StatusTooLarge        Status = 5  // AGENT_ERR_TOO_LARGE
	StatusStorage         Status = 6  // AGENT_ERR_STORAGE
	StatusBusy            Status = 7  // AGENT_ERR_BUSY
	StatusHook            Status = 8  // AGENT_ERR_HOOK
	StatusConflict        Status = 9  // AGENT_ERR_CONFLICT
	StatusRejected        Status = 10 // AGENT_ERR_REJECTED
	StatusGap             Status = 11 // AGENT_ERR_GAP
	StatusUnavailable     Status = 12 // AGENT_ERR_UNAVAILABLE
	StatusAuth            Status = 13 // AGENT_ERR_AUTH
	StatusCancelled       Status = 14 // AGENT_ERR_CANCELLED
	StatusNewerSchema     Status = 15 // AGENT_ERR_NEWER_SCHEMA
	StatusMigration       Status = 16 // AGENT_ERR_MIGRATION
	StatusPath            Status = 17 // AGENT_ERR_PATH
	StatusTestFailed      Status = 18 // AGENT_ERR_TEST_FAILED
	StatusPanic           Status = 99 // AGENT_ERR_PANIC
)

// Sentinel errors, one per failure status, for errors.Is. An error returned by this package
// matches exactly one of them (an ErrHook or ErrRejected error may in addition match what its
// hook or validator returned; a Poll error may in addition match what a hook returned).
var (
	// ErrInvalidArgument: a required argument was missing, an option was unknown or ill-typed,
	// a patch or state was not a JSON object, or a hook id was unknown; the change log is off
	// (Poll, ChangesSince), or a version is in the future (ChangesSince, StateAt, Restore).
	// Also a path holding a NUL byte (checked in Go); a malformed JSON Patch (PatchState: not
	// an array, an unknown op, a missing member, a pointer with a bad escape such as "~2", a
	// result that is not an object), a JSON Pointer that is not one (GetPath, GetTail: no
	// leading "/", a bad escape), and GetTail of a value that is not an array.
	ErrInvalidArgument error = StatusInvalidArgument
	// ErrBadHandle: the Agent was closed (or is nil).
	ErrBadHandle error = StatusBadHandle
	// ErrJSON: the input is not well-formed JSON (only raw JSON given to the *JSON methods can
	// be malformed; values encoded by this package never are).
	ErrJSON error = StatusJSON
	// ErrCodec: the value cannot be stored: duplicate member names, a number outside the double
	// range, a malformed tagged value, nesting beyond 64 levels (all found by the library); or,
	// found in Go before any call into C, a value with no JSON form (channel, function, complex
	// number, NaN, infinity, invalid UTF-8, a cycle, a time.Time outside years 0000-9999).
	// Decoding the state into a Go value of the wrong shape is an ErrCodec error too.
	ErrCodec error = StatusCodec
	// ErrTooLarge: the input, or the state a change would produce, exceeds MaxValueBytes.
	ErrTooLarge error = StatusTooLarge
	// ErrStorage: the store failed: I/O error, disk full, read-only store or file, corrupt or
	// foreign file, a file or database of a newer release (the store's own tables, not
	// Options.SchemaVersion, which is ErrNewerSchema); a PostgreSQL error other than an unreachable server
	// (see ErrUnavailable).
	ErrStorage error = StatusStorage
	// ErrBusy: another connection held what this call needed for longer than BusyTimeout (a
	// SQLite file's write lock; on PostgreSQL the agent's row or a pooled connection), or the
	// Agent was called from inside its own initial-state function or validator.
	ErrBusy error = StatusBusy
	// ErrHook: a hook failed (returned an error or panicked). For OnStateChanged hooks the
	// change is committed all the same. The hook's error is wrapped: errors.Is and errors.As
	// see it.
	ErrHook error = StatusHook
	// ErrConflict: a compare-and-set write (SetStateIf, ReplaceStateIf, PatchStateIf and their
	// JSON forms) found the state at another version than expected; nothing was written. Read
	// the state again (GetStateVersioned) and retry.
	ErrConflict error = StatusConflict
	// ErrRejected: the validator (SetValidator) rejected the change; nothing was written and no
	// hook ran. The message carries the validator's reason, and the error wraps what the
	// validator returned (or a *PanicError), so errors.Is and errors.As see it.
	ErrRejected error = StatusRejected
	// ErrGap: the change log no longer holds changes that were asked for, pruned by its
	// retention (Poll, ChangesSince, StateAt, Restore). Poll returns it once, after delivering
	// the changes that remain; the state itself is always current.
	ErrGap error = StatusGap
	// ErrUnavailable: the database server (PostgreSQL) could not be reached or did not answer
	// within ServerTimeout (refused, timed out, restarting), or the connection was lost. The call had no effect,
	// except when the connection dropped while a commit was in flight: then the message says
	// the commit's outcome is unknown (read the version to tell). The Agent stays usable: its
	// next call reconnects, so retrying later is the remedy. A SQLite file never returns it.
	ErrUnavailable error = StatusUnavailable
	// ErrAuth: the connection to the database server (PostgreSQL) could not be secured or
	// authenticated: the TLS handshake failed (the server's certificate is not trusted, has
	// expired or names another host; the server offers no TLS while sslmode requires it, or
	// wants a client certificate), or the server refused the credentials (a wrong password, no
	// pg_hba.conf entry). The message says which, never the password. Unlike ErrUnavailable,
	// retrying with the same URI will not help.
	ErrAuth error = StatusAuth
	// ErrCancelled: the call's cancel token fired, or its deadline passed, while the call waited
	// (for a lock, a connection or the server); nothing was written. The Context methods
	// (SetStateContext, ...) return it when their context is done; the error then also wraps
	// ctx.Err() (context.Canceled or context.DeadlineExceeded) for errors.Is.
	ErrCancelled error = StatusCancelled
	// ErrNewerSchema: the agent's state is stored under a newer schema version than this Agent
	// declares (Options.SchemaVersion): a newer program wrote it. Every read and write fails
	// with it and nothing is written (an older program never overwrites a newer state); run the
	// newer program, or open with ReadOnly to read the state as stored. UpgradeState returns it
	// for a from above the Agent's version.
	ErrNewerSchema error = StatusNewerSchema
	// ErrMigration: upgrading a stored state to this Agent's schema version failed: a step
	// (Options.SchemaSteps, or SetSchemaStep) failed, panicked or is missing, or its result was
	// refused (not an object, the codec, MaxValueBytes, the validator). The message names the
	// step ("schema step 1 -> 2: ..."); the error wraps what a Go step returned (or a
	// *PanicError), so errors.Is and errors.As see it. The stored state is as it was.
	ErrMigration error = StatusMigration
	// ErrPath: a JSON Pointer names nothing in the state: GetPath or GetTail of a member that
	// does not exist, an index out of range or with a leading zero, or "-"; or an operation of
	// PatchState (and its forms) whose path or from does not exist, or a move into its own
	// child. Nothing was written. The message names the operation (see Error.Operation).
	ErrPath error = StatusPath
	// ErrTestFailed: a "test" operation of PatchState (and its forms) found another value than
	// the one it names: the patch's own compare-and-set said no, and nothing was written. The
	// message names the operation (see Error.Operation).
	ErrTestFailed error = StatusTestFailed
	// ErrPanic: a bug in the library was caught at its C boundary; the Agent may still be used.
	ErrPanic error = StatusPanic
)

var statusNames = map[Status]string{
	StatusOK:              "AGENT_OK",
	StatusInvalidArgument: "AGENT_ERR_INVALID_ARGUMENT",
	StatusBadHandle:       "AGENT_ERR_BAD_HANDLE",
	StatusJSON:            "AGENT_ERR_JSON",
	StatusCodec:           "AGENT_ERR_CODEC",
	StatusTooLarge:        "AGENT_ERR_TOO_LARGE",
	StatusStorage:         "AGENT_ERR_STORAGE",
	StatusBusy:            "AGENT_ERR_BUSY",
	StatusHook:            "AGENT_ERR_HOOK",
	StatusConflict:        "AGENT_ERR_CONFLICT",
	StatusRejected:        "AGENT_ERR_REJECTED",
	StatusGap:             "AGENT_ERR_GAP",
	StatusUnavailable:     "AGENT_ERR_UNAVAILABLE",
	StatusAuth:            "AGENT_ERR_AUTH",
	StatusCancelled:       "AGENT_ERR_CANCELLED",
	StatusNewerSchema:     "AGENT_ERR_NEWER_SCHEMA",
	StatusMigration:       "AGENT_ERR_MIGRATION",
	StatusPath:            "AGENT_ERR_PATH",
	StatusTestFailed:      "AGENT_ERR_TEST_FAILED",
	StatusPanic:           "AGENT_ERR_PANIC",
}

// String returns the C name of the status, e.g. "AGENT_ERR_CODEC", or
// "AGENT_ERR_UNKNOWN(n)" for a number this package does not know (a newer library).
func (s Status) String() string {
	if name, ok := statusNames[s]; ok {
		return name
	}
	return "AGENT_ERR_UNKNOWN(" + strconv.Itoa(int(s)) + ")"
}

// Error makes a Status usable as a sentinel error.
func (s Status) Error() string { return "agentstate: " + s.String() }

// Error is the error type of every failing call of this package.
type Error struct {
	// Status is the library status (for Go-side checks: the status the library would have
	// used for the same problem).
	Status Status
	// Op is the Go function or method that failed, e.g. "SetState".
	Op string
	// Message is the library's message for this very call (agent_last_error, read in the same
	// native call as the failing function, so never another goroutine's) without the name of
	// the C function it starts with (Op names the call), or a description of the problem
	// found in Go.
	Message string
	// Err is the cause, when there is one: the error returned by a hook (the first, if several
	// failed), the error returned by the validator (for ErrRejected), the error returned by a
	// schema step or by the validator of a migration (for ErrMigration), a *PanicError for a
	// hook, validator or step that panicked, or an encoding error. Unwrap returns it.
	Err error
	// HookErrors holds every hook error of the call, in delivery order (Err is the first).
	HookErrors []error
}

// Error formats the failure as "agentstate: <Op>: <message>[: <cause>]", one context prefix:
// for example "agentstate: SetState: rejected: the validator rejected the change: overdrawn".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("agentstate: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	switch {
	case len(e.HookErrors) > 1:
		for i, he := range e.HookErrors {
			fmt.Fprintf(&b, "; hook error %d: %v", i+1, he)
		}
	case e.Err != nil && e.Status != StatusRejected && e.Status != StatusMigration:
		// (a rejection's message holds the validator's text, a migration's the step's)
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is reports whether target is e's Status (so errors.Is(err, ErrCodec) works).
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

// Unwrap returns the cause (a hook's error, an encoding error), or nil.
func (e *Error) Unwrap() error { return e.Err }

// PanicError is the cause of an ErrHook error when a Go hook panicked, of an ErrRejected
// error when the validator panicked, or of an ErrMigration error when a schema step (see
// SetSchemaStep) panicked: the panic was recovered in the trampoline (a panic must
// never unwind through the C library) and reported as the error of the call that triggered
// the hook or validator.
type PanicError struct {
	// Value is what the hook, validator or step passed to panic.
	Value any
	// Stack is the hook goroutine's stack at the panic (runtime/debug.Stack).
	Stack []byte

	who string // "hook" (when empty), "validator" or "step"
}

// Error describes the panic value: "hook panicked: ...", "validator panicked: ..." or "step
// panicked: ...".
func (p *PanicError) Error() string {
	who := p.who
	if who == "" {
		who = "hook"
	}
	return fmt.Sprintf("%s panicked: %v", who, p.Value)
}

// Unwrap returns the panic value when it is an error (panic(err)), else nil.
func (p *PanicError) Unwrap() error {
	if err, ok := p.Value.(error); ok {
		return err
	}
	return nil
}

func newError(op string, status Status, message string, cause error) *Error {
	return &Error{Status: status, Op: op, Message: message, Err: cause}
}

// withoutFunctionName drops the name of the C function that the library puts first in its
// messages ("agent_set_state: rejected: ..."): Error.Op already names the call, and a message
// that says where it comes from three times ("agentstate: SetState: agent_set_state: ...")
// buries what went wrong. A message of another shape is kept whole.
func withoutFunctionName(msg string) string {
	if !strings.HasPrefix(msg, "agent_") {
		return msg
	}
	for i := len("agent_"); i < len(msg); i++ {
		switch c := msg[i]; {
		case c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'):
		case c == ':' && strings.HasPrefix(msg[i:], ": "):
			return msg[i+2:]
		default:
			return msg
		}
	}
	return msg
}
