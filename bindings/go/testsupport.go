package agentstate

// Unexported helpers for the tests (cgo cannot be used in _test.go files).

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync/atomic"
)

// statusNameFromC is agent_status_name(s).
func statusNameFromC(s Status) string {
	return C.GoString(C.agent_status_name(C.int32_t(s)))
}

// liveHookCount is the number of hook registrations whose cgo.Handle is alive.
func liveHookCount() int64 { return atomic.LoadInt64(&liveHooks) }

// pendingHookErrorCount is the number of calls with hook errors not yet collected.
func pendingHookErrorCount() int64 { return atomic.LoadInt64(&hookErrorCount) }

// naiveRemoveHook calls agent_remove_hook and then, in a second cgo call, agent_last_error:
// the mistake the shim avoids (between the two calls the goroutine may have moved to another
// OS thread, whose last error belongs to another goroutine). Used only to show that the
// concurrency test can detect such mix-ups. The Gosched stands for the preemption the
// scheduler may put between any two calls; it makes the mix-up frequent instead of rare.
func naiveRemoveHook(a *Agent, id HookID) (Status, string) {
	rc := C.agentstate_remove_hook_plain(a.handle(), C.uint64_t(id))
	runtime.Gosched()
	msg := C.GoString(C.agent_last_error())
	runtime.KeepAlive(a)
	return Status(rc), msg
}
