package agentstate

// Watching a store: Watch follows the changes of any agents of a store (by id or id prefix),
// committed by any Agent or process, and sends them on a channel.
//
// The library queues a watch's events (filled by the store's watcher thread, one per store per
// process whatever the number of watches and agents) and makes the watch's eventfd readable
// while any is queued. A Watcher has one goroutine, which waits for that descriptor in Go's
// netpoller (holding no OS thread: a duplicate of it, wrapped with os.NewFile, as the
// completions dispatcher waits for its own) and moves the queued events to the channel; no
// goroutine or cgo call waits per agent.

/*
#include <stdlib.h>
#include "watch_shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"
)

// WatchKind is what kind of change a WatchEvent is: the same lowercase words in every language
// of the library.
type WatchKind string

const (
	// WatchMerge is a merge patch (SetState and its forms): Patch is the merge patch.
	WatchMerge WatchKind = "merge"
	// WatchJSONPatch is an RFC 6902 JSON Patch (PatchState and its forms): Patch is the array
	// of operations.
	WatchJSONPatch WatchKind = "json_patch"
	// WatchReplace is a replacement (ReplaceState and its forms, Restore): State is the new
	// state.
	WatchReplace WatchKind = "replace"
	// WatchMigration is a state upgraded to a newer schema version (MigratedFrom is the old
	// one).
	WatchMigration WatchKind = "migration"
	// WatchDeleted is the agent deleted (DeleteAgent, ExpireAgents): Version 0, no State. A
	// later first write starts it again at version 1.
	WatchDeleted WatchKind = "deleted"
	// WatchResync says changes were missed (pruned from the change log before they could be
	// delivered, the log off, or the reader more than MaxPending behind): State is the agent's
	// current state at Version, and replaces a copy kept from earlier events.
	WatchResync WatchKind = "resync"
)

// watchKinds are the library's AGENT_WATCH_* numbers.
var watchKinds = map[C.int32_t]WatchKind{
	1: WatchMerge, 2: WatchJSONPatch, 3: WatchReplace, 4: WatchMigration, 5: WatchDeleted, 6: WatchResync,
}

// WatchEvent is one change delivered by a Watcher: compact JSON text the receiver may keep
// (decode it with Unmarshal), as hooks get theirs.
type WatchEvent struct {
	// AgentID is the agent that changed.
	AgentID string
	// Version is its version after the change (0 for WatchDeleted).
	Version uint64
	// Kind is what kind of change it was.
	Kind WatchKind
	// Patch is the change as applied: the merge patch of a WatchMerge, the array of operations
	// of a WatchJSONPatch; nil for the other kinds.
	Patch json.RawMessage
	// State is the agent's state after the change: always there for WatchReplace,
	// WatchMigration and WatchResync, and for the first change of an agent the watch delivers;
	// for every kind but WatchDeleted with WatchOptions.States; else nil.
	State json.RawMessage
	// Schema is the schema version State was written under (0 when none).
	Schema uint32
	// At is when the change was committed (the writer's clock, millisecond precision, local
	// time, as LoggedChange.At); the zero Time when unknown (a WatchResync).
	At time.Time
	// MigratedFrom is, for a WatchMigration, the schema version the state was upgraded from;
	// 0 for the other kinds.
	MigratedFrom uint32
}

// WatchOptions says which agents a Watch follows and how. The zero value follows every agent
// of the store.
type WatchOptions struct {
	// IDs, when not nil, are the agents followed (each a valid agent id: UTF-8, at most 255
	// bytes, no NUL); it may be empty, and grow with Watcher.Add.
	IDs []string
	// Prefix follows every agent whose id starts with it, agents created later included
	// (with IDs nil; "" is every agent of the store). Setting both IDs and Prefix is an
	// ErrInvalidArgument error.
	Prefix string
	// Since are resume points: for an agent in it, its changes after that version are
	// delivered first, from the change log (or one WatchResync when the log no longer holds
	// them). Agents not in it start at their version when the watch begins.
	Since map[string]uint64
	// States gives every event the agent's state after the change (the library then keeps
	// the last state of each watched agent).
	States bool
	// MaxPending bounds the events queued for a reader that does not keep up (0: the
	// library's default, 10000): beyond it, that agent's queued events give way to one
	// WatchResync.
	MaxPending int
	// PollInterval, on PostgreSQL, reads the watched agents' versions once per interval
	// instead of LISTEN/NOTIFY, for a connection through a transaction pooler (which cannot
	// carry LISTEN); whole milliseconds, rounded up. 0: LISTEN. A SQLite file ignores it.
	PollInterval time.Duration
	// RescanInterval is how often the watcher also compares every watched agent's stored
	// version, as a safety net for commits it was not told of (0: the library's default, 30s).
	RescanInterval time.Duration
	// Open holds the connection's options (BusyTimeout, ServerTimeout, MaxConnections, ...);
	// those of an Agent (AgentID, InitialState, ...) are not used.
	Open Options
}

// Watcher is a subscription to a store's changes, made by Watch. Its methods may be called
// from any goroutine. Close it (or cancel the context given to Watch) when done: the
// goroutine that feeds Events holds it until then.
type Watcher struct {
	w       C.AgentWatch
	events  chan WatchEvent
	file    *os.File        // a duplicate of the watch's eventfd, in the netpoller
	raw     syscall.RawConn // file's
	done    chan struct{}   // closed by Close
	stopped chan struct{}   // closed when run returns
	closing sync.Once
	freeing sync.Once
	freeErr error

	mu  sync.Mutex
	err error
}

// Watch starts watching the store at location (a SQLite file path or a PostgreSQL URI, as Open
// takes it) and returns the Watcher: every change committed after Watch returns is sent on
// its Events channel, per agent in commit order, each once (across agents no order is
// promised). Cancelling ctx closes the watch (Err then returns ctx's error); Watch itself is
// not cancelled by it once started (it returns when the start versions are read).
//
// Errors: ErrInvalidArgument (a bad id or prefix, both IDs and Prefix, a negative MaxPending,
// ":memory:", a NUL byte in location), ErrStorage (no store there: watching never creates
// one), ErrUnavailable and ErrAuth (the server), ErrBusy; ctx's error when it is already done.
func Watch(ctx context.Context, location string, opts WatchOptions) (*Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if strings.IndexByte(location, 0) >= 0 {
		return nil, newError("Watch", StatusInvalidArgument, "the location contains a NUL byte", nil)
	}
	optJSON, err := opts.json()
	if err != nil {
		return nil, err
	}
	cpath := C.CString(location)
	defer C.free(unsafe.Pointer(cpath))
	copts := C.CString(optJSON)
	defer C.free(unsafe.Pointer(copts))
	var (
		h    C.AgentWatch
		fd   C.int32_t
		cerr *C.char
	)
	if rc := C.agentstate_watch_open(cpath, copts, &h, &fd, &cerr); rc != 0 {
		return nil, libError("Watch", rc, cerr, 0)
	}
	w := &Watcher{w: h, events: make(chan WatchEvent), done: make(chan struct{}), stopped: make(chan struct{})}
	dup, errno := C.agentstate_watch_dup_fd(fd)
	if dup < 0 {
		w.free()
		return nil, newError("Watch", StatusStorage, fmt.Sprintf("cannot duplicate the watch's descriptor: %v", errno), nil)
	}
	// Non-blocking, so os.NewFile puts it in the netpoller.
	w.file = os.NewFile(uintptr(dup), "agentstate-watch")
	raw, err := w.file.SyscallConn()
	if err != nil {
		w.file.Close()
		w.free()
		return nil, newError("Watch", StatusStorage, "cannot poll the watch's descriptor: "+err.Error(), nil)
	}
	w.raw = raw
	go w.run()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				w.shutdown(ctx.Err())
			case <-w.done:
			}
		}()
	}
	return w, nil
}

// Events is the channel the watch's events come on. It is closed when the watch ends: after
// Close, when ctx is done, or when the watch failed (Err says why).
func (w *Watcher) Events() <-chan WatchEvent { return w.events }

// Err is why the watch ended: nil while it runs and after Close, ctx's error when ctx ended
// it, or the store's failure when it failed for good (failures that pass, such as a server
// restarting, are retried by the library's watcher, which then catches up).
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Add follows one more agent (a watch of IDs only), from after version since (caught up from
// the change log), or from its current version when since is negative. Errors:
// ErrInvalidArgument (a Prefix watch, a bad id), ErrBadHandle (closed).
func (w *Watcher) Add(id string, since int64) error {
	if err := checkWatchID("Add", id); err != nil {
		return err
	}
	if since < 0 {
		since = -1
	}
	cid := C.CString(id)
	defer C.free(unsafe.Pointer(cid))
	var cerr *C.char
	if rc := C.agentstate_watch_add(w.w, cid, C.int64_t(since), &cerr); rc != 0 {
		return libError("Add", rc, cerr, 0)
	}
	return nil
}

// Remove stops following an agent (its events already queued are still sent). Errors:
// ErrInvalidArgument (a bad id), ErrBadHandle (closed).
func (w *Watcher) Remove(id string) error {
	if err := checkWatchID("Remove", id); err != nil {
		return err
	}
	cid := C.CString(id)
	defer C.free(unsafe.Pointer(cid))
	var cerr *C.char
	if rc := C.agentstate_watch_remove(w.w, cid, &cerr); rc != 0 {
		return libError("Remove", rc, cerr, 0)
	}
	return nil
}

// Close closes the watch: queued events are dropped, Events is closed (a receiver waiting on
// it wakes). It waits for the goroutine feeding Events to end. Idempotent; its error is the
// library's, from the first call.
func (w *Watcher) Close() error { return w.shutdown(nil) }

// shutdown closes the watch for the reason why (nil: Close), waits for the feeding goroutine
// to end, and releases the library's watch.
func (w *Watcher) shutdown(why error) error {
	w.closeWith(why)
	<-w.stopped
	return w.free()
}

// closeWith stops the feeding goroutine, recording why (nil: Close).
func (w *Watcher) closeWith(why error) {
	w.closing.Do(func() {
		w.mu.Lock()
		if w.err == nil {
			w.err = why
		}
		w.mu.Unlock()
		close(w.done)
		// Wakes the goroutine if it waits in the netpoller (its Read returns an error).
		w.file.Close()
	})
}

// free releases the library's watch, once.
func (w *Watcher) free() error {
	w.freeing.Do(func() {
		var cerr *C.char
		if rc := C.agentstate_watch_close(w.w, &cerr); rc != 0 {
			w.freeErr = libError("Close", rc, cerr, 0)
		}
	})
	return w.freeErr
}

// watchBatch is the most events the goroutine takes from the library per wake-up before
// sending them.
const watchBatch = 64

// run moves the library's queued events to the channel until the watch is closed or fails.
func (w *Watcher) run() {
	defer close(w.stopped)
	defer close(w.events)
	batch := make([]WatchEvent, 0, watchBatch)
	for {
		var failed error
		// The function runs at once, and again each time the descriptor becomes readable:
		// it returns true with events (or a failure), false to wait. The library keeps the
		// descriptor readable exactly while events are queued, and the function takes them
		// until none is left or the batch is full, so no readiness is missed.
		err := w.raw.Read(func(uintptr) bool {
			batch, failed = w.take(batch[:0])
			return len(batch) > 0 || failed != nil
		})
		if err != nil { // the file was closed: Close, or ctx done
			return
		}
		for _, ev := range batch {
			select {
			case w.events <- ev:
			case <-w.done:
				return
			}
		}
		if failed != nil {
			select {
			case <-w.done: // closed meanwhile: the library's refusal is the close's
			default:
				w.mu.Lock()
				w.err = failed
				w.mu.Unlock()
				w.closeWith(nil)
				w.free()
			}
			return
		}
	}
}

// take appends the queued events (up to watchBatch) to batch, without waiting.
func (w *Watcher) take(batch []WatchEvent) ([]WatchEvent, error) {
	for len(batch) < watchBatch {
		var (
			ev   *C.AgentWatchEvent
			cerr *C.char
		)
		if rc := C.agentstate_watch_next(w.w, 0, &ev, &cerr); rc != 0 {
			return batch, libError("Watch", rc, cerr, 0)
		}
		if ev == nil {
			return batch, nil
		}
		e, err := watchEventOf(ev)
		C.agent_watch_event_free(ev)
		if err != nil {
			return batch, err
		}
		batch = append(batch, e)
	}
	return batch, nil
}

// watchEventOf copies an event the library hands out.
func watchEventOf(e *C.AgentWatchEvent) (WatchEvent, error) {
	kind, ok := watchKinds[e.kind]
	if !ok {
		return WatchEvent{}, newError("Watch", StatusInvalidArgument, fmt.Sprintf("an event of an unknown kind %d (a newer library?)", int32(e.kind)), nil)
	}
	ev := WatchEvent{
		AgentID: C.GoStringN(e.agent_id, C.int(e.agent_id_len)),
		Version: uint64(e.version),
		Kind:    kind,
		Schema:  uint32(e.schema),
	}
	if e.patch != nil {
		ev.Patch = json.RawMessage(C.GoBytes(unsafe.Pointer(e.patch), C.int(e.patch_len)))
	}
	if e.state != nil {
		ev.State = json.RawMessage(C.GoBytes(unsafe.Pointer(e.state), C.int(e.state_len)))
	}
	if e.at_ms != 0 {
		ev.At = time.UnixMilli(int64(e.at_ms))
	}
	if kind == WatchMigration {
		ev.MigratedFrom = uint32(e.migrated_from)
	}
	return ev, nil
}

// checkWatchID refuses, before any call into C, what C cannot carry (a NUL would cut the id
// there) or the library's ids never are (invalid UTF-8); the library checks the rest.
func checkWatchID(op, id string) error {
	if strings.IndexByte(id, 0) >= 0 {
		return newError(op, StatusInvalidArgument, fmt.Sprintf("agent id %q contains a NUL byte", id), nil)
	}
	if !utf8.ValidString(id) {
		return newError(op, StatusInvalidArgument, fmt.Sprintf("agent id %q is not valid UTF-8", id), nil)
	}
	return nil
}

// json is the options object of agent_watch_open: the connection's options, then the watch's
// own keys.
func (o WatchOptions) json() (string, error) {
	base, err := o.Open.optionsFor("Watch")
	if err != nil {
		return "", err
	}
	var parts []string
	if inner := base[1 : len(base)-1]; inner != "" {
		parts = append(parts, inner)
	}
	str := func(s string) string {
		b, _ := Marshal(s) // valid UTF-8 without NUL (checked): always encodes
		return string(b)
	}
	switch {
	case o.IDs != nil && o.Prefix != "":
		return "", newError("Watch", StatusInvalidArgument, "WatchOptions: IDs and Prefix are both set (give one)", nil)
	case o.IDs != nil:
		ids := make([]string, len(o.IDs))
		for i, id := range o.IDs {
			if err := checkWatchID("Watch", id); err != nil {
				return "", err
			}
			ids[i] = str(id)
		}
		parts = append(parts, `"ids":[`+strings.Join(ids, ",")+`]`)
	default:
		if err := checkWatchID("Watch", o.Prefix); err != nil {
			return "", err
		}
		parts = append(parts, `"prefix":`+str(o.Prefix))
	}
	if len(o.Since) > 0 {
		keys := make([]string, 0, len(o.Since))
		for id := range o.Since {
			if err := checkWatchID("Watch", id); err != nil {
				return "", err
			}
			keys = append(keys, id)
		}
		sort.Strings(keys)
		since := make([]string, len(keys))
		for i, id := range keys {
			since[i] = str(id) + ":" + strconv.FormatUint(o.Since[id], 10)
		}
		parts = append(parts, `"since":{`+strings.Join(since, ",")+`}`)
	}
	if o.States {
		parts = append(parts, `"states":true`)
	}
	switch {
	case o.MaxPending < 0:
		return "", newError("Watch", StatusInvalidArgument, fmt.Sprintf("WatchOptions: MaxPending %d is negative", o.MaxPending), nil)
	case o.MaxPending > 0:
		parts = append(parts, `"max_pending":`+strconv.Itoa(o.MaxPending))
	}
	for _, d := range []struct {
		key   string
		field string
		value time.Duration
	}{{"watch_poll_ms", "PollInterval", o.PollInterval}, {"rescan_ms", "RescanInterval", o.RescanInterval}} {
		switch {
		case d.value < 0:
			return "", newError("Watch", StatusInvalidArgument, fmt.Sprintf("WatchOptions: %s %v is negative", d.field, d.value), nil)
		case d.value > 0:
			ms, err := timeoutMs(d.field, d.value)
			if err != nil {
				err.(*Error).Op = "Watch"
				return "", err
			}
			parts = append(parts, `"`+d.key+`":`+ms)
		}
	}
	return "{" + strings.Join(parts, ",") + "}", nil
}
