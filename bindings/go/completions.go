package agentstate

// Awaited calls: the Context methods of the state (GetStateContext, SetStateContext,
// ReplaceStateContext, PatchStateContext, their versioned and compare-and-set forms, and the
// Typed ones) submit their call to the library's worker pool (agent_submit) and wait for its
// completion on a channel, in a select with ctx.Done(). A goroutine blocked in a cgo call holds
// its OS thread for as long as the call waits; one blocked on a channel holds none, so a
// thousand goroutines waiting for a busy store need the library's few workers (8 by default,
// AGENT_STATE_WORKERS) rather than a thousand threads.
//
// A completion comes either before agent_submit returns (a read the handle's validated copy
// answers, a call refused at once, a call made from inside a hook: see shim.h), written into
// the submitter's slot with no channel involved, or later on a worker thread, whose callback
// puts it in the shim's list and wakes the dispatcher goroutine through an eventfd that Go's
// netpoller watches; the dispatcher sends it to the call's channel, found by the call's tag, a
// runtime/cgo.Handle. (A worker calling into Go itself would cost tens of microseconds a call:
// see shim.c.) The methods without a context (GetState, SetState, ...) pass syncCall down and
// make their call on the calling goroutine's thread, as before.

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"os"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// syncCall is the context the methods without one (GetState, SetState, ...) pass down to the
// code they share with the Context methods: a call under it is made in a cgo call on the
// calling goroutine's thread. Under any other context, context.Background() included, the
// state's calls are submitted (awaited).
var syncCall context.Context = syncContext{context.Background()}

// syncContext is syncCall's type, a context that is never done.
type syncContext struct{ context.Context }

// completion is what the library reports for a submitted call, copied out of its
// AgentCompletion: the buffers are the receiver's to free (result does).
type completion struct {
	status  C.int32_t
	version uint64
	state   C.AgentBuffer
	message C.AgentBuffer
	// hooks is the context the call's hooks reported to on the worker that ran it (0: none
	// reported there; those that ran on the submitting thread reported to the call's own).
	hooks C.uintptr_t
}

func completionOf(c *C.AgentCompletion, hooks C.uintptr_t) completion {
	return completion{
		status:  C.int32_t(c.status),
		version: uint64(c.version),
		state:   c.state,
		message: c.message,
		hooks:   hooks,
	}
}

// awaiting counts the calls waiting for a completion from a worker (for tests).
var awaiting int64

// submitted counts the calls submitted (for tests: the Context methods submit, the others do
// not), and waited those whose completion came from a worker, through the call's channel.
var submitted, waited uint64

// waiter is where one awaited call's completion arrives: a channel with room for it, and the
// runtime/cgo.Handle of the waiter, the call's tag. Waiters are reused, handle included (see
// getWaiter): one call at a time, each receiving its one completion before the next submits.
type waiter struct {
	ch  chan completion
	tag cgo.Handle
}

// idleWaiters keeps up to maxIdleWaiters waiters for reuse. (Not a sync.Pool, which drops what
// it holds at each garbage collection: a dropped waiter's handle would keep it forever.)
var idleWaiters struct {
	sync.Mutex
	list []*waiter
}

const maxIdleWaiters = 1024

// getWaiter returns an idle waiter, or a new one.
func getWaiter() *waiter {
	idleWaiters.Lock()
	if n := len(idleWaiters.list); n > 0 {
		w := idleWaiters.list[n-1]
		idleWaiters.list = idleWaiters.list[:n-1]
		idleWaiters.Unlock()
		return w
	}
	idleWaiters.Unlock()
	w := &waiter{ch: make(chan completion, 1)}
	w.tag = cgo.NewHandle(w)
	return w
}

// putWaiter keeps w, whose call completed (its channel empty again), for reuse, or deletes its
// handle when enough are kept.
func putWaiter(w *waiter) {
	idleWaiters.Lock()
	if len(idleWaiters.list) < maxIdleWaiters {
		idleWaiters.list = append(idleWaiters.list, w)
		w = nil
	}
	idleWaiters.Unlock()
	if w != nil {
		w.tag.Delete()
	}
}

// deliver sends a worker's completion to its call's waiter.
func deliver(c *C.AgentCompletion, hooks C.uintptr_t) {
	// The tag is the handle of a waiter whose call is in flight: valid here. Its channel has
	// room for the one completion, so the send never blocks.
	w := cgo.Handle(c.tag).Value().(*waiter)
	w.ch <- completionOf(c, hooks)
}

// agentstateCompleted is where a worker hands a completion to Go itself: before the
// dispatcher's eventfd exists, or when the shim's list cannot grow.
//
//export agentstateCompleted
func agentstateCompleted(c *C.AgentCompletion, hooks C.uintptr_t) { deliver(c, hooks) }

var dispatcherOnce sync.Once

// startDispatcher starts, once, the goroutine that delivers the workers' completions (see
// dispatch). Open and every awaited call call it. When the system refuses the eventfd, there
// is none, and the workers hand their completions to agentstateCompleted.
func startDispatcher() {
	dispatcherOnce.Do(func() {
		var fd C.int32_t
		var cerr *C.char
		if rc := C.agentstate_completions_fd(&fd, &cerr); rc != 0 {
			C.free(unsafe.Pointer(cerr))
			return
		}
		// Non-blocking, so os.NewFile makes it pollable: a Read parks the goroutine in the
		// netpoller, holding no thread.
		go dispatch(os.NewFile(uintptr(fd), "agentstate-completions"))
	})
}

// dispatch delivers the completions the workers put in the shim's list, for the process's
// life: it waits for the list's eventfd to be readable (the count it reads only wakes it) and
// empties the list, 64 completions per cgo call.
func dispatch(events *os.File) {
	var count [8]byte
	batch := make([]C.AgentstateDone, 64)
	for {
		if _, err := events.Read(count[:]); err != nil {
			// Never seen (an eventfd read fails only with EAGAIN, which the poller waits out);
			// should it happen, polling the list still delivers every completion.
			time.Sleep(time.Millisecond)
		}
		for {
			n := int(C.agentstate_take_completions(&batch[0], C.size_t(len(batch))))
			for i := 0; i < n; i++ {
				deliver(&batch[i].completion, batch[i].hooks)
			}
			if n < len(batch) {
				break
			}
		}
	}
}

// awaited makes the call op (an AGENT_OP_*, with AGENT_CALL_* flags; data is its input, nil
// for a read) on a through agent_submit and waits for its completion. When ctx is done first,
// it fires the call's cancel token and still waits (the library ends a call whose token fired
// within milliseconds: a call waiting for a lock, a connection or the server returns
// AGENT_ERR_CANCELLED having written nothing, a commit already sent completes). It returns the
// state and version of the completion, or its status and message as the *Error the
// synchronous call would have returned (wrapping the errors of the hooks that ran for it, and
// ctx.Err() for a cancelled call).
func (a *Agent) awaited(ctx context.Context, op string, kind C.int32_t, flags C.uint32_t, data []byte, expected uint64) ([]byte, uint64, error) {
	token, err := callToken(ctx, op)
	if err != nil {
		return nil, 0, err
	}
	startDispatcher()
	w := getWaiter()
	callCtx := newCallContext()
	var (
		now  C.AgentCompletion
		done C.int32_t
		cerr *C.char
	)
	atomic.AddUint64(&submitted, 1)
	rc := C.agentstate_submit(a.handle(), kind, flags, inputPtr(data), C.size_t(len(data)),
		C.uint64_t(expected), token, C.uint64_t(w.tag), &now, &done, callCtx, &cerr)
	runtime.KeepAlive(data)
	var c completion
	switch {
	case rc != 0:
		putWaiter(w)
		freeToken(token)
		runtime.KeepAlive(a)
		return nil, 0, cancelCause(ctx, libError(op, rc, cerr, callCtx))
	case done != 0:
		c = completionOf(&now, 0)
	default:
		atomic.AddUint64(&waited, 1)
		atomic.AddInt64(&awaiting, 1)
		select {
		case c = <-w.ch:
		case <-ctx.Done():
			// ctx has a Done channel, so callToken made a token.
			C.agent_cancel_fire(token)
			c = <-w.ch
		}
		atomic.AddInt64(&awaiting, -1)
	}
	putWaiter(w) // its channel empty again: the call's one completion came
	freeToken(token)
	runtime.KeepAlive(a)
	return c.result(ctx, op, callCtx)
}

// result frees c's buffers and returns its state (copied into Go memory) and version, or its
// failure as an *Error with the errors the call's hooks reported, whether on the submitting
// thread (callCtx) or on the worker (c.hooks).
func (c *completion) result(ctx context.Context, op string, callCtx C.uintptr_t) ([]byte, uint64, error) {
	var message []byte
	if c.message.data != nil || c.message.owner != nil {
		message = takeBuffer(&c.message) // an empty buffer owns nothing: no cgo call to free it
	}
	hookErrs := takeHookErrors(callCtx)
	if c.hooks != 0 {
		hookErrs = append(hookErrs, takeHookErrors(c.hooks)...)
	}
	if c.status != 0 {
		C.agent_buffer_free(&c.state)
		err := callError(op, c.status, string(message), hookErrs)
		return nil, 0, cancelCause(ctx, err)
	}
	return takeBuffer(&c.state), c.version, nil
}

// The state's calls, made synchronously under syncCall and awaited under any other context.

func (a *Agent) getState(ctx context.Context, op string) ([]byte, error) {
	if ctx != syncCall {
		data, _, err := a.awaited(ctx, op, C.AGENT_OP_GET_STATE, 0, nil, 0)
		return data, err
	}
	return a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		return C.agentstate_get_state(c.h, out, c.ctx, c.token, c.err)
	})
}

func (a *Agent) getStateVersioned(ctx context.Context, op string) ([]byte, uint64, error) {
	if ctx != syncCall {
		return a.awaited(ctx, op, C.AGENT_OP_GET_STATE, 0, nil, 0)
	}
	var version C.uint64_t
	data, err := a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		return C.agentstate_get_state_versioned(c.h, out, &version, c.ctx, c.token, c.err)
	})
	return withVersion(data, version, err)
}

// writeOp is the AGENT_OP_* of a merge patch (replace false) or a replacement.
func writeOp(replace bool) C.int32_t {
	if replace {
		return C.AGENT_OP_REPLACE_STATE
	}
	return C.AGENT_OP_SET_STATE
}

func (a *Agent) write(ctx context.Context, op string, data []byte, replace bool) ([]byte, error) {
	if ctx != syncCall {
		out, _, err := a.awaited(ctx, op, writeOp(replace), 0, data, 0)
		return out, err
	}
	p, n := inputPtr(data), C.size_t(len(data))
	out, err := a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		if replace {
			return C.agentstate_replace_state(c.h, p, n, out, c.ctx, c.token, c.err)
		}
		return C.agentstate_set_state(c.h, p, n, out, c.ctx, c.token, c.err)
	})
	runtime.KeepAlive(data)
	return out, err
}

func (a *Agent) writeIf(ctx context.Context, op string, expected uint64, data []byte, replace bool) ([]byte, uint64, error) {
	if ctx != syncCall {
		return a.awaited(ctx, op, writeOp(replace), C.AGENT_CALL_IF, data, expected)
	}
	p, n, exp := inputPtr(data), C.size_t(len(data)), C.uint64_t(expected)
	var version C.uint64_t
	out, err := a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		if replace {
			return C.agentstate_replace_state_if(c.h, exp, p, n, out, &version, c.ctx, c.token, c.err)
		}
		return C.agentstate_set_state_if(c.h, exp, p, n, out, &version, c.ctx, c.token, c.err)
	})
	runtime.KeepAlive(data)
	return withVersion(out, version, err)
}

func (a *Agent) patch(ctx context.Context, op string, data []byte) ([]byte, error) {
	if ctx != syncCall {
		out, _, err := a.awaited(ctx, op, C.AGENT_OP_PATCH_STATE, 0, data, 0)
		return out, err
	}
	p, n := inputPtr(data), C.size_t(len(data))
	out, err := a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		return C.agentstate_patch_state(c.h, p, n, out, c.ctx, c.token, c.err)
	})
	runtime.KeepAlive(data)
	return out, err
}

func (a *Agent) patchIf(ctx context.Context, op string, expected uint64, data []byte) ([]byte, uint64, error) {
	if ctx != syncCall {
		return a.awaited(ctx, op, C.AGENT_OP_PATCH_STATE, C.AGENT_CALL_IF, data, expected)
	}
	p, n, exp := inputPtr(data), C.size_t(len(data)), C.uint64_t(expected)
	var version C.uint64_t
	out, err := a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		return C.agentstate_patch_state_if(c.h, exp, p, n, out, &version, c.ctx, c.token, c.err)
	})
	runtime.KeepAlive(data)
	return withVersion(out, version, err)
}
