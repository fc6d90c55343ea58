// Package agentstate is the Go binding of agent_state: one persistent, transactional JSON state
// value per agent, stored in an embedded SQLite file, with the semantics of the Telnyx Agent
// SDK's State API — GetState, SetState as an RFC 7396 merge patch, ReplaceState, an initial
// state, and OnStateChanged hooks.
//
//	a, err := agentstate.Open("conv.db", agentstate.Options{InitialState: map[string]any{"status": "idle"}})
//	if err != nil { ... }
//	defer a.Close()
//	st, err := a.SetState(map[string]any{"status": "processing"}) // the full merged state
//	err = a.GetStateInto(&myStruct)                               // decode into a typed struct
//	id, err := a.OnStateChanged(func(next, prev, patch json.RawMessage) error { ... })
//
// # Linking
//
// The package links the C library through cgo (CGO_ENABLED=1 and a C compiler are needed) from
// the repository it lives in: headers from ../../include, the library from
// ../../target/release, built with `make build` at the repository root.
//
// By default it links the shared library libagent_state.so, with an rpath to that directory,
// so programs find it at run time as long as the repository stays where it was built (copy the
// .so elsewhere and set LD_LIBRARY_PATH otherwise).
//
// To link the static library libagent_state.a instead, build with the agentstate_static tag:
//
//	go build -tags agentstate_static ./...
//
// which uses `#cgo LDFLAGS: ${SRCDIR}/../../target/release/libagent_state.a -lm -ldl -lpthread`
// (the Rust standard library in the archive needs libm, libdl and libpthread); the program then
// does not load libagent_state.so at all.
//
// # Values
//
// Values are encoded by Marshal and decoded by Unmarshal, which follow encoding/json (struct
// tags, omitempty, embedded structs, Marshaler/Unmarshaler...) and add the storage codec's
// tagged values, lossless in both directions: time.Time is {"$date":...} (UTC milliseconds),
// *big.Int {"$bigint":...}, []byte {"$arraybuffer":...}, and the types Map, Set, TypedArray and
// RegExp their tagged forms. GetState decodes objects as map[string]any and numbers as
// json.Number with their exact text; the *JSON methods exchange raw JSON text.
//
// A time.Time with sub-millisecond precision cannot be a $date without loss, so it is an
// ErrCodec error rather than a silent truncation: call t.Truncate(time.Millisecond) (or Round)
// first. Its location is not stored; it decodes as UTC (Equal to the original). Numbers keep
// their exact value and digits, of any size; the library normalizes only an exponent marker
// (1E2 is stored as 1e+2).
//
// Values with no JSON form — channels, functions, complex numbers, NaN, infinities, cycles,
// strings that are not UTF-8, unsupported map keys — are ErrCodec errors found in Go, before
// any call into the library.
//
// # Errors
//
// Every failure is an *Error carrying the library's status and message. Each status has a
// sentinel (ErrInvalidArgument, ErrBadHandle, ErrJSON, ErrCodec, ErrTooLarge, ErrStorage,
// ErrBusy, ErrHook, ErrPanic) for errors.Is; statuses a newer library may add match
// Status(n). The message is read in the same native call as the failing function (the library
// keeps it per OS thread, and a goroutine may change threads between two cgo calls), so it is
// always the failing call's own, however many goroutines fail at once.
//
// # Hooks and goroutines
//
// An Agent may be used from any number of goroutines; concurrent writers never lose an update.
// OnStateChanged hooks run on the goroutine that made the change, before its SetState or
// ReplaceState returns, in commit order. A hook's error or panic never crashes the program:
// it is recovered and returned by the call that triggered the hook, wrapped in an ErrHook error
// (the change stays committed). Hooks must not call runtime.Goexit (t.Fatal in a test), which
// cannot unwind through C. Hook functions are kept in runtime/cgo.Handles that are released
// when the hook is removed or the Agent closed.
//
// Close an Agent when done with it; a finalizer closes forgotten ones only as a backstop.
package agentstate
