// Package agentstate is the Go binding of agent_state: one persistent, transactional JSON state
// value per agent, stored in an embedded SQLite file, with the semantics of the Telnyx Agent
// SDK's State API — GetState, SetState as an RFC 7396 merge patch, ReplaceState, an initial
// state, and OnStateChanged hooks — plus versions, compare-and-set writes, RFC 6902 JSON
// Patch writes (PatchState) and reads of one place by JSON Pointer (GetPath, GetTail), a
// validation gate and an opt-in change log (Poll, ChangesSince, StateAt, Restore).
//
//	a, err := agentstate.Open("conv.db", agentstate.Options{InitialState: map[string]any{"status": "idle"}})
//	if err != nil { ... }
//	defer a.Close()
//	// ctx's deadline or cancel() ends a call waiting for a lock or the server (nothing written)
//	st, err := a.SetStateContext(ctx, map[string]any{"status": "processing"}) // the full merged state
//	err = a.GetStateIntoContext(ctx, &myStruct)                               // decode into a typed struct
//	id, err := a.OnStateChanged(func(next, prev, patch json.RawMessage) error { ... })
//
// Each method without Context (SetState, GetStateInto, ...) gives what its Context form gives
// under context.Background(). The Context forms of the state's calls are awaited: the call
// runs on one of the library's few worker threads while the goroutine waits on a channel,
// holding no OS thread (see GetStateContext); the methods without Context make their call in
// a cgo call, holding the goroutine's thread while it waits.
//
// # Linking
//
// Import path: github.com/agent-state/agent-state/bindings/go (package agentstate). The
// package links the C library through cgo (CGO_ENABLED=1 and a C compiler are needed).
//
// The module is published as make dist stages it: agent_state-go-VERSION.zip beside a
// release, the package with include/agent_state.h and a prebuilt static archive,
// lib/linux_amd64/libagent_state.a (the C library, SQLite and the Rust standard library
// pre-linked into one object whose only global symbols are the agent_* API). On linux/amd64
// the package links that archive by default (link_prebuilt.go):
//
//	#cgo CFLAGS: -I${SRCDIR}/include
//	#cgo LDFLAGS: ${SRCDIR}/lib/linux_amd64/libagent_state.a -lm -ldl -lpthread
//
// so a program needs no Rust toolchain, no pkg-config and no libagent_state.so at run time.
// Unzip it and point a replace directive at it (go.mod: require the import path at v0.0.0,
// replace it => the unzipped directory); `go mod vendor` keeps the header and the archive.
//
// With -tags agentstate_pkgconfig (and by default on other platforms, which have no prebuilt
// archive), the package links an installed shared library instead, found with pkg-config
// (`#cgo pkg-config: agent_state`): `make install` at the repository root, or a distribution's
// package. For a prefix that pkg-config does not search, set
// PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig, and let the loader find $PREFIX/lib at run time
// (CGO_LDFLAGS=-Wl,-rpath,$PREFIX/lib when building, or LD_LIBRARY_PATH).
//
// The repository's bindings/go has no archive (it is built, never committed): there, a build
// without a tag stops with a message, and two build tags link the checkout's own build instead
// (`make build`), with the header from ../../include:
//
//	go test -tags agentstate_inrepo ./...   // ../../target/release/libagent_state.so, with an rpath
//	go test -tags agentstate_static ./...   // ../../target/release/libagent_state.a
//
// With agentstate_static the program does not load libagent_state.so at all (the Rust
// standard library in the archive needs libm, libdl and libpthread:
// `#cgo LDFLAGS: ${SRCDIR}/../../target/release/libagent_state.a -lm -ldl -lpthread`).
//
// # Values
//
// Values are encoded by Marshal and decoded by Unmarshal, which follow encoding/json (struct
// tags, omitempty and omitzero, embedded structs, Marshaler/Unmarshaler...) and add the storage
// codec's tagged values, lossless in both directions: time.Time is {"$date":...} (UTC,
// nanoseconds), *big.Int {"$bigint":...}, []byte {"$arraybuffer":...}, *regexp.Regexp a
// {"$regexp":...} (a leading "(?i)", "(?m)", "(?s)" group as its flags), and the types Map, Set,
// TypedArray and RegExp their tagged forms. GetState decodes objects as map[string]any and
// numbers as json.Number with their exact text; the *JSON methods exchange raw JSON text.
//
// # Struct patches, Patch and Typed
//
// SetState takes a merge patch, and a struct given to it is a patch of every field it does not
// omit: SetState(ConvState{Status: "processing"}) writes lastReply "" and at's zero time too,
// unless those fields are tagged omitempty (or omitzero, for a time.Time or a struct). To
// change only some members, build a Patch — Patch{}.Set("status", "processing").Delete("note")
// — or use a map. Typed[T] (OpenTyped, NewTyped) reads and writes the state as a T: Get, Set
// (a patch), Replace (a whole T), Update (fn changes the T read, and only what it changed is
// written, compare-and-set) and typed OnStateChanged hooks; it changes the types only, never
// what is stored.
//
// A time.Time is stored with the fraction of a second it has, in the shortest of 3, 6 or 9
// digits that holds it exactly (time.Now() included, in years 0000-9999). Its location and
// monotonic clock reading are not stored; it decodes as UTC (Equal to the original). Numbers keep
// their exact value and digits, of any size; the library normalizes only an exponent marker
// (1E2 is stored as 1e+2).
//
// Values with no JSON form — channels, functions, complex numbers, unsafe pointers, NaN,
// infinities, strings that are not UTF-8, unsupported map keys, structs with no exported field,
// a value that contains itself ("circular reference at /path") — are ErrCodec errors found in
// Go, before any call into the library; so are values the library would refuse or read back as another
// type: nesting deeper than 64 levels (at any depth), a map or struct whose only member is
// named like a tag (map[string]any{"$date": ...} would come back as a time.Time; store the
// time.Time, or json.RawMessage for tagged JSON text), and a Map or Set holding the same key
// twice by the library's rule (numbers by value: 1 and 1.0 are one key, which Map.Get, Has,
// Set and Delete also follow). The other language bindings behave the same way; the shared
// vectors in tests/conformance check it.
//
// # Versions, compare-and-set and validation
//
// Every commit gives the agent's state the next version (1 for its first write; stored with
// the state, shared by every Agent and process that opens that agent). A write whose result
// equals the stored state commits nothing: no new version, no hook, no log entry. GetStateVersioned
// reads the state with its version; SetStateIf and ReplaceStateIf write only if the state is
// still at that version, and fail with ErrConflict, writing nothing, otherwise:
//
//	var s Counter
//	v, err := a.GetStateVersionedInto(&s)
//	_, newVersion, err := a.SetStateIf(v, map[string]any{"count": s.Count + 1})
//	if errors.Is(err, agentstate.ErrConflict) { /* someone wrote first: read again, retry */ }
//
// SetValidator installs a gate that sees every change of this Agent (a Change: Next, Prev,
// Patch, Version, Kind, Schema, MigratedFrom) inside the write transaction, before the commit; an error (or panic) rejects
// it with ErrRejected, wrapping the error, and nothing is written. OnChange is the form of
// OnStateChanged that receives a Change, with the version.
//
// # The change log
//
// With Options.ChangeLog (a retention: the last KeepLast changes and/or those of the last
// KeepFor), the agent's changes are logged, each with its version, time, patch and next state.
// The setting belongs to the agent and is recorded in the store with it: every Agent that opens
// that agent, in any process, then logs; the store's other agents (other AgentIDs of the file
// or database) keep their own setting. Poll then delivers to an Agent's
// hooks, once each and in commit order, the changes other Agents and processes committed (and
// a write through the Agent delivers the pending ones first); ChangesSince returns the changes
// after a version (to bring a reconnecting client up to date); StateAt reads an older state and
// Restore makes it current again as a new change. Changes the retention dropped make these
// calls fail with ErrGap.
//
// # Schema versions
//
// Options.SchemaVersion declares the schema version of the states a program reads and writes;
// every stored state and log entry records the version it was written under. Steps upgrade a
// state from version k to k+1: declarative ones in Options.SchemaSteps (StepRename, StepDefault,
// ...), Go ones with SetSchemaStep. The first read or write that finds an older state commits
// the upgrade, once, as a change of its own (Change.Kind ChangeMigration); a failing step is an
// ErrMigration error naming it, nothing written. A state written under a newer version than
// the Agent declares fails every read and write with ErrNewerSchema (a ReadOnly Agent reads it
// as stored). StateAtStored and UpgradeState read the history in its own or the current shape.
//
// # PostgreSQL and many agents per store
//
// Open takes a PostgreSQL connection URI in place of a file name ("postgres://" or
// "postgresql://", libpq syntax, TLS with sslmode and sslrootcert), with Options.AgentID naming the agent:
//
//	a, err := agentstate.Open("postgresql:///app?host=/var/run/postgresql&port=5432&user=app",
//		agentstate.Options{AgentID: "support-bot-7", MaxConnections: 8})
//
// The tables are created on first open. MaxConnections sizes the process's pool of connections
// to the server (default 4); SyncFull and SyncNormal are synchronous_commit on and off;
// BusyTimeout bounds waiting for what other connections hold (the agent's row, a pooled
// connection) and ServerTimeout a server that does not answer (a connection attempt, a
// statement beyond its lock waits). An unreachable server, or a lost connection, is an
// ErrUnavailable error: the call had no effect (unless the message says a commit's outcome is
// unknown) and the Agent reconnects on its next call. On a SQLite file,
// AgentID lets one file hold many isolated agents; the Agents with an id in one process share
// one connection per file.
//
// # A store's agents
//
// ListAgents pages through the agents of a store (by id, with a prefix; ListQuery.Next gives
// the next page), DeleteAgent and DeleteAgentIf delete one (its state, versions and change log,
// erased from a SQLite file), ExpireAgents deletes the idle ones in bounded batches; each has a
// Context form. Agents open on a deleted agent read their initial state at version 0, and
// versions never go back, so a SetStateIf against a version read before the deletion fails.
//
// # Errors
//
// Every failure is an *Error carrying the library's status and message; its text is
// "agentstate: <Op>: <message>", the call named once. Each status has a
// sentinel (ErrInvalidArgument, ErrBadHandle, ErrJSON, ErrCodec, ErrTooLarge, ErrStorage,
// ErrBusy, ErrHook, ErrConflict, ErrRejected, ErrGap, ErrUnavailable, ErrAuth, ErrCancelled,
// ErrNewerSchema, ErrMigration, ErrPanic) for errors.Is; statuses a newer
// library may add match Status(n). The message is read in the same native call as the failing function (the library
// keeps it per OS thread, and a goroutine may change threads between two cgo calls), so it is
// always the failing call's own, however many goroutines fail at once.
//
// # Hooks and goroutines
//
// An Agent may be used from any number of goroutines; concurrent writers never lose an update.
// OnStateChanged and OnChange hooks run on the goroutine that made the change, before its
// SetState or ReplaceState returns (or on the goroutine that calls Poll), in commit order; the
// validator runs on the writing goroutine, inside the transaction. For the awaited Context
// forms (SetStateContext and the like, see GetStateContext) "the writing goroutine" is the
// library worker that makes the write, calling Go back, before the Context method returns. A hook's error or panic never crashes the program:
// it is recovered and returned by the call that triggered the hook, wrapped in an ErrHook error
// (the change stays committed); a validator's, wrapped in an ErrRejected error (nothing
// written). Hooks and validators must not call runtime.Goexit (t.Fatal in a test), which
// cannot unwind through C. Hook and validator functions are kept in runtime/cgo.Handles that
// are released when they are removed or replaced, or the Agent closed.
//
// Close an Agent when done with it; a finalizer closes forgotten ones only as a backstop.
package agentstate
