package agentstate

// The Context forms of the methods that may wait (for a lock, a pooled connection, the
// server), as database/sql has them: the call returns ErrCancelled, nothing written, when its
// context is done before it got what it waited for. They use the library's cancel tokens
// (agent_cancel_new, _bind, _fire, _free; see shim.h for the binding to the calling thread).
//
// The state's calls among them (GetStateContext, SetStateContext, ReplaceStateContext,
// PatchStateContext, their versioned, compare-and-set, JSON and Into forms, and Typed's) are
// awaited (completions.go): submitted to the library's worker pool, their goroutine waiting on a
// channel and holding no OS thread. The others (PollContext, ChangesSinceContext, StateAtContext,
// RestoreContext, GetPathContext, ...) wait in a cgo call, their goroutine holding its thread, with
// a watcher goroutine that fires the token when the context is done.

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"time"
)

// cancelCall is the cancel token of one library call made under a context (token 0: none).
type cancelCall struct {
	token  C.AgentCancel
	done   chan struct{} // closed after the call: ends the watcher (nil: no watcher)
	exited chan struct{} // closed by the watcher as it ends
}

// startCancel prepares a call under ctx that waits in a cgo call: callToken's token and, when
// ctx has a Done channel, a goroutine that fires the token when ctx is done, ended by cc.end.
// A ctx that is done already gives the error to return without making the call.
func startCancel(ctx context.Context, op string) (cc cancelCall, err error) {
	token, err := callToken(ctx, op)
	if err != nil || token == 0 {
		return cc, err
	}
	cc.token = token
	if done := ctx.Done(); done != nil {
		stop, exited := make(chan struct{}), make(chan struct{})
		cc.done, cc.exited = stop, exited
		go func() {
			defer close(exited)
			select {
			case <-done:
				C.agent_cancel_fire(token)
			case <-stop:
			}
		}()
	}
	return cc, nil
}

// callToken is the cancel token of a call under ctx: 0 for a context that can never be done
// (context.Background, context.TODO), else a new token whose timeout is ctx's deadline (in ms,
// rounded up), for the caller to fire when ctx is done and to free (freeToken) after the call.
// A ctx that is done already gives the error to return without making the call.
func callToken(ctx context.Context, op string) (C.AgentCancel, error) {
	if ctx == nil {
		return 0, newError(op, StatusInvalidArgument, "the context is nil (use context.Background())", nil)
	}
	done := ctx.Done()
	deadline, hasDeadline := ctx.Deadline()
	if done == nil && !hasDeadline {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, newError(op, StatusCancelled, "the context is done: the call was not made", err)
	}
	timeout := C.int64_t(-1)
	if hasDeadline {
		d := time.Until(deadline)
		if d <= 0 {
			return 0, newError(op, StatusCancelled, "the context's deadline has passed: the call was not made", context.DeadlineExceeded)
		}
		timeout = C.int64_t((d + time.Millisecond - 1) / time.Millisecond)
	}
	var token C.AgentCancel
	if rc := C.agent_cancel_new(timeout, &token); rc != 0 {
		return 0, newError(op, Status(rc), "cannot make the call's cancel token", nil)
	}
	return token, nil
}

// freeToken frees a token of callToken (0: none).
func freeToken(token C.AgentCancel) {
	if token != 0 {
		C.agent_cancel_free(token)
	}
}

// end ends the watcher (and waits for it, so that no goroutine outlives the call) and frees
// the token.
func (cc cancelCall) end() {
	if cc.token == 0 {
		return
	}
	if cc.done != nil {
		close(cc.done)
		<-cc.exited
	}
	freeToken(cc.token)
}

// cancelCause makes an ErrCancelled error of a call under ctx wrap ctx's error too
// (context.Canceled or context.DeadlineExceeded), so that errors.Is sees both.
func cancelCause(ctx context.Context, err error) error {
	e, ok := err.(*Error)
	if !ok || e.Status != StatusCancelled || e.Err != nil {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		e.Err = cerr
	} else if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		// The token's deadline (ctx's, rounded up to a millisecond) came before ctx's timer ran.
		e.Err = context.DeadlineExceeded
	}
	return e
}

// GetStateContext is GetState under ctx: if ctx is done (cancelled, or its deadline passed)
// while the call waits for a lock, a pooled connection or the server, it returns an error
// that matches ErrCancelled and ctx.Err() (context.Canceled or context.DeadlineExceeded)
// within a few milliseconds; a ctx already done returns that error without calling the
// library. A context that is never done (context.Background) gives GetState's result.
//
// The call is awaited, under any ctx: submitted to the library's worker pool (at most 8
// threads by default; the environment variable AGENT_STATE_WORKERS sets the cap), while this
// goroutine waits on a channel, holding no OS thread, so that any number of goroutines may
// wait at once on a few threads. A read the handle's validated copy answers (no I/O, no lock
// to wait for) completes before the submission returns, on this goroutine (agent_submit in
// agent_state.h says when the copy answers: nothing committed since the read that made it,
// and a backend that can tell without I/O, as a SQLite file; on PostgreSQL reads ask the
// server, on a worker). Calls wait their
// turn in the pool's queue while all its workers are busy (with this process's calls on any
// Agent); a cancelled call waiting there returns once a worker takes it. Called from inside a
// hook, the validator, the initial-state function or a schema step, the call is made there
// and then, on that thread, as GetState is.
func (a *Agent) GetStateContext(ctx context.Context) (map[string]any, error) {
	return a.getStateValue(ctx, "GetStateContext")
}

// GetStateJSONContext is GetStateJSON under ctx (see GetStateContext).
func (a *Agent) GetStateJSONContext(ctx context.Context) (json.RawMessage, error) {
	return a.getState(ctx, "GetStateJSONContext")
}

// GetStateIntoContext is GetStateInto under ctx (see GetStateContext).
func (a *Agent) GetStateIntoContext(ctx context.Context, v any) error {
	return a.getStateInto(ctx, "GetStateIntoContext", v)
}

// SetStateContext is SetState under ctx: if ctx is done while the write waits (for another
// connection's write lock or row lock, a pooled connection, the server, its turn in the
// library's worker pool), it returns an error that matches ErrCancelled and ctx.Err() within a
// few milliseconds of a worker taking it, and nothing is written; a write whose commit was
// already sent is never cancelled (it completes, hooks run, and SetStateContext returns its
// result, as SetState does). A ctx already done returns at once without writing. A context
// that is never done (context.Background) gives SetState's result.
//
// The write is awaited, as GetStateContext's read is (see there): it runs on a library worker
// thread while this goroutine waits on a channel, holding no OS thread. Its hooks and the
// validator run on that worker, in a goroutine of their own (cgo's callback), before
// SetStateContext returns, with the same ordering, errors (ErrHook, ErrRejected wrapping
// what they returned) and re-entrance rules as SetState's: a call they make on this Agent is
// made on that worker, synchronously, Context forms included, and is cancelled with the
// awaited call (by its ctx) rather than by a ctx of its own that is done while it waits (the
// worker's binding of the awaited call's token stays in place).
func (a *Agent) SetStateContext(ctx context.Context, patch any) (map[string]any, error) {
	return a.writeValue(ctx, "SetStateContext", patch, false)
}

// SetStateJSONContext is SetStateJSON under ctx (see SetStateContext).
func (a *Agent) SetStateJSONContext(ctx context.Context, patch []byte) (json.RawMessage, error) {
	return a.write(ctx, "SetStateJSONContext", patch, false)
}

// ReplaceStateContext is ReplaceState under ctx (see SetStateContext).
func (a *Agent) ReplaceStateContext(ctx context.Context, next any) (map[string]any, error) {
	return a.writeValue(ctx, "ReplaceStateContext", next, true)
}

// ReplaceStateJSONContext is ReplaceStateJSON under ctx (see SetStateContext).
func (a *Agent) ReplaceStateJSONContext(ctx context.Context, next []byte) (json.RawMessage, error) {
	return a.write(ctx, "ReplaceStateJSONContext", next, true)
}

// GetStateVersionedContext is GetStateVersioned under ctx (see GetStateContext).
func (a *Agent) GetStateVersionedContext(ctx context.Context) (map[string]any, uint64, error) {
	return a.getStateVersionedValue(ctx, "GetStateVersionedContext")
}

// GetStateVersionedJSONContext is GetStateVersionedJSON under ctx (see GetStateContext).
func (a *Agent) GetStateVersionedJSONContext(ctx context.Context) (json.RawMessage, uint64, error) {
	return a.getStateVersioned(ctx, "GetStateVersionedJSONContext")
}

// GetStateVersionedIntoContext is GetStateVersionedInto under ctx (see GetStateContext).
func (a *Agent) GetStateVersionedIntoContext(ctx context.Context, v any) (uint64, error) {
	return a.getStateVersionedInto(ctx, "GetStateVersionedIntoContext", v)
}

// SetStateIfContext is SetStateIf under ctx (see SetStateContext): a cancelled call returns an
// error matching ErrCancelled and ctx.Err(), never ErrConflict, and writes nothing.
func (a *Agent) SetStateIfContext(ctx context.Context, expected uint64, patch any) (map[string]any, uint64, error) {
	return a.writeValueIf(ctx, "SetStateIfContext", expected, patch, false)
}

// SetStateIfJSONContext is SetStateIfJSON under ctx (see SetStateContext).
func (a *Agent) SetStateIfJSONContext(ctx context.Context, expected uint64, patch []byte) (json.RawMessage, uint64, error) {
	return a.writeIf(ctx, "SetStateIfJSONContext", expected, patch, false)
}

// ReplaceStateIfContext is ReplaceStateIf under ctx (see SetStateContext).
func (a *Agent) ReplaceStateIfContext(ctx context.Context, expected uint64, next any) (map[string]any, uint64, error) {
	return a.writeValueIf(ctx, "ReplaceStateIfContext", expected, next, true)
}

// ReplaceStateIfJSONContext is ReplaceStateIfJSON under ctx (see SetStateContext).
func (a *Agent) ReplaceStateIfJSONContext(ctx context.Context, expected uint64, next []byte) (json.RawMessage, uint64, error) {
	return a.writeIf(ctx, "ReplaceStateIfJSONContext", expected, next, true)
}

// PollContext is Poll under ctx: a cancelled call returns an error matching ErrCancelled and
// ctx.Err() (see GetStateContext); n counts the changes delivered before it was cancelled.
func (a *Agent) PollContext(ctx context.Context) (n int, err error) {
	return a.poll(ctx, "PollContext")
}

// ChangesSinceContext is ChangesSince under ctx (see GetStateContext).
func (a *Agent) ChangesSinceContext(ctx context.Context, version uint64) ([]LoggedChange, error) {
	return a.changesSinceValue(ctx, "ChangesSinceContext", version)
}

// ChangesSinceJSONContext is ChangesSinceJSON under ctx (see GetStateContext).
func (a *Agent) ChangesSinceJSONContext(ctx context.Context, version uint64) (json.RawMessage, error) {
	return a.changesSince(ctx, "ChangesSinceJSONContext", version)
}

// StateAtContext is StateAt under ctx (see GetStateContext).
func (a *Agent) StateAtContext(ctx context.Context, version uint64) (map[string]any, error) {
	return a.stateAtValue(ctx, "StateAtContext", version)
}

// StateAtJSONContext is StateAtJSON under ctx (see GetStateContext).
func (a *Agent) StateAtJSONContext(ctx context.Context, version uint64) (json.RawMessage, error) {
	return a.stateAt(ctx, "StateAtJSONContext", version)
}

// RestoreContext is Restore under ctx (see SetStateContext).
func (a *Agent) RestoreContext(ctx context.Context, version uint64) (map[string]any, uint64, error) {
	return a.restoreValue(ctx, "RestoreContext", version)
}

// RestoreJSONContext is RestoreJSON under ctx (see SetStateContext).
func (a *Agent) RestoreJSONContext(ctx context.Context, version uint64) (json.RawMessage, uint64, error) {
	return a.restore(ctx, "RestoreJSONContext", version)
}
