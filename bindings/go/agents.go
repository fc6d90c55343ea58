package agentstate

// A store's agents as a whole (agent_state.h topic 8): list them, delete one (erased), expire
// the idle ones in bounded batches. These are functions of a store, not methods of an Agent:
// each opens a connection of its own to the store (on PostgreSQL from the process's pool,
// shared with its Agents), makes its call and closes it.

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

const (
	// DefaultListLimit is the page size of ListAgents when ListQuery.Limit is 0 (as the
	// Python binding's list_agents).
	DefaultListLimit = 100
	// DefaultExpireLimit is the batch size of ExpireAgents when its limit is 0: 1,000, the
	// batch of the agent-state command's expire and of the Python binding's expire_agents.
	// (The C library has no default of its own: agent_store_expire refuses a limit of 0.)
	DefaultExpireLimit = 1000
	// MaxListLimit is the largest page (ListAgents) or batch (ExpireAgents) the library takes.
	MaxListLimit = 10000
)

// AgentInfo is one agent of a store, as ListAgents and ExpireAgents return it.
type AgentInfo struct {
	// ID is the agent's id (Options.AgentID); "" is a SQLite file's single agent, opened
	// without an AgentID.
	ID string
	// Version is the version of its stored state (1 or more).
	Version uint64
	// Bytes is the size of its stored state, in bytes.
	Bytes uint64
	// WrittenAt is when its state was last written, to the millisecond, by the writer's clock.
	WrittenAt time.Time
}

// ListQuery selects a page of ListAgents. The zero value is the first DefaultListLimit agents.
type ListQuery struct {
	// Prefix keeps only the ids that start with it ("": any id).
	Prefix string
	// After starts the page after this id ("": at the first agent). To get the next page, use
	// Next, which also continues after the id "" (a SQLite file's single agent, always first).
	After string
	// Limit is the most agents the page holds, 1 to MaxListLimit; 0 means DefaultListLimit.
	Limit int

	afterSet bool // After is an id even when "" (set by Next)
}

// Next is the query of the page after page (the page q returned): the same Prefix and Limit,
// after page's last id. more is false when page is the last one (it holds fewer than the
// limit), and then next is q unchanged.
//
//	q := agentstate.ListQuery{Prefix: "user-"}
//	for more := true; more; {
//		page, err := agentstate.ListAgentsContext(ctx, path, opts, q)
//		if err != nil { return err }
//		for _, info := range page { ... }
//		q, more = q.Next(page)
//	}
func (q ListQuery) Next(page []AgentInfo) (next ListQuery, more bool) {
	if len(page) == 0 || len(page) < q.limit() {
		return q, false
	}
	q.After = page[len(page)-1].ID
	q.afterSet = true
	return q, true
}

func (q ListQuery) limit() int {
	if q.Limit == 0 {
		return DefaultListLimit
	}
	return q.Limit
}

// ListAgents returns the agents with a state stored in the store at path (a SQLite file or a
// PostgreSQL URI, as for Open), ordered by id (byte order of the UTF-8), at most q.Limit, those
// after q.After whose id starts with q.Prefix. A page costs what it holds, whatever the store
// holds; page through the store with ListQuery.Next. Agents opened but never written, and
// deleted ones, are not listed; a SQLite file's single agent (opened without AgentID) is
// listed with the id "". WrittenAt is in the local time zone.
//
// Of opts, BusyTimeout, ServerTimeout, MaxConnections and ReadOnly are used; the agent's own
// options (AgentID, InitialState, ChangeLog, ...) are not. Listing never creates a store.
//
// Errors: ErrInvalidArgument (an empty path, a NUL byte, Limit out of range, Prefix or After
// longer than 255 bytes or not UTF-8, a bad option), ErrStorage (no store at path), ErrBusy,
// ErrUnavailable, ErrAuth.
func ListAgents(path string, opts Options, q ListQuery) ([]AgentInfo, error) {
	return listAgents(context.Background(), "ListAgents", path, opts, q)
}

// ListAgentsContext is ListAgents under ctx: if ctx is done while the call waits (for a lock,
// a pooled connection, the server), it returns an error matching ErrCancelled and ctx.Err()
// within a few milliseconds (see GetStateContext).
func ListAgentsContext(ctx context.Context, path string, opts Options, q ListQuery) ([]AgentInfo, error) {
	return listAgents(ctx, "ListAgentsContext", path, opts, q)
}

// DeleteAgent deletes the agent id of the store at path (a SQLite file or a PostgreSQL URI):
// its state, its versions and its change log go in one transaction (its change-log setting
// stays). deleted is the version it had; existed is false (and deleted 0) when nothing was
// stored, which is not an error. id "" is a SQLite file's single agent.
//
// Agents open on it, in this process or another, find it gone at their next call: a read
// returns their initial state at version 0. With the change log on, their hooks get the
// deletion as one change (by Poll, or ahead of their next write) from the last state they saw
// to their initial state: Patch nil, Version 0. The agent's next first write takes the
// version after the one it was deleted at (a tombstone keeps a 64-bit hash of the id, not the
// id, and that version), so a SetStateIf against a version read before the deletion never
// succeeds after it (ErrConflict), even once the agent is written again.
//
// Erasure: on SQLite, once DeleteAgent returns nil, no byte of the deleted state or its history
// is left in the file or its WAL. If another connection's read outlasts BusyTimeout meanwhile,
// it returns ErrBusy after the deletion committed: call it again to finish the erasure. On
// PostgreSQL the rows are deleted; what VACUUM, WAL archives and backups keep is the server's
// (the book's guide "Erasure and retention", docs/src/guides/erasure-retention.md).
//
// Of opts, as for ListAgents. Errors: ErrInvalidArgument (an empty path, a NUL byte, an id
// longer than 255 bytes or not UTF-8, a bad option), ErrStorage (no store at path, ReadOnly),
// ErrBusy, ErrUnavailable, ErrAuth.
func DeleteAgent(path string, opts Options, id string) (deleted uint64, existed bool, err error) {
	return deleteAgent(context.Background(), "DeleteAgent", path, opts, id, -1)
}

// DeleteAgentIf is DeleteAgent only if the agent's state is still at version (0: nothing
// stored); otherwise it returns an error matching ErrConflict and deletes nothing.
func DeleteAgentIf(path string, opts Options, id string, version uint64) (deleted uint64, existed bool, err error) {
	return deleteAgentIf(context.Background(), "DeleteAgentIf", path, opts, id, version)
}

// DeleteAgentContext is DeleteAgent under ctx (see ListAgentsContext): a cancelled call
// deletes nothing.
func DeleteAgentContext(ctx context.Context, path string, opts Options, id string) (deleted uint64, existed bool, err error) {
	return deleteAgent(ctx, "DeleteAgentContext", path, opts, id, -1)
}

// DeleteAgentIfContext is DeleteAgentIf under ctx (see ListAgentsContext): a cancelled call
// returns an error matching ErrCancelled, never ErrConflict, and deletes nothing.
func DeleteAgentIfContext(ctx context.Context, path string, opts Options, id string, version uint64) (deleted uint64, existed bool, err error) {
	return deleteAgentIf(ctx, "DeleteAgentIfContext", path, opts, id, version)
}

// ExpireAgents deletes, as DeleteAgent does, at most limit agents (1 to MaxListLimit; 0 means
// DefaultExpireLimit, 1,000) of the store at path whose state was last written more than idle ago
// (rounded up to whole milliseconds), the longest idle first, in one transaction, and returns
// them. With dryRun it deletes nothing and returns those it would delete. An agent written
// during the call is not deleted. A call costs what it deletes, whatever the store holds: call
// it again until it returns fewer than limit (from a timer, a cron job).
//
// Of opts, as for ListAgents. Errors: as DeleteAgent, and ErrInvalidArgument for a negative
// idle or limit out of range.
func ExpireAgents(path string, opts Options, idle time.Duration, limit int, dryRun bool) ([]AgentInfo, error) {
	return expireAgents(context.Background(), "ExpireAgents", path, opts, idle, limit, dryRun)
}

// ExpireAgentsContext is ExpireAgents under ctx (see ListAgentsContext): a cancelled call
// deletes nothing.
func ExpireAgentsContext(ctx context.Context, path string, opts Options, idle time.Duration, limit int, dryRun bool) ([]AgentInfo, error) {
	return expireAgents(ctx, "ExpireAgentsContext", path, opts, idle, limit, dryRun)
}

// storeCall holds the C strings of a call on a store: the path and the options JSON.
type storeCall struct {
	path, options *C.char
}

// newStoreCall checks path and converts it and opts for the library; free releases them.
func newStoreCall(op, path string, opts Options) (storeCall, error) {
	if strings.IndexByte(path, 0) >= 0 {
		return storeCall{}, newError(op, StatusInvalidArgument, "the path contains a NUL byte", nil)
	}
	optJSON, err := opts.optionsFor(op)
	if err != nil {
		return storeCall{}, err
	}
	return storeCall{path: C.CString(path), options: C.CString(optJSON)}, nil
}

func (s storeCall) free() {
	C.free(unsafe.Pointer(s.path))
	C.free(unsafe.Pointer(s.options))
}

// idText converts an id, prefix or after text for the library (a NUL byte or invalid UTF-8
// is refused here; the library checks the length).
func idText(op, what, text string) (*C.char, error) {
	if strings.IndexByte(text, 0) >= 0 {
		return nil, newError(op, StatusInvalidArgument, what+" contains a NUL byte", nil)
	}
	if !utf8.ValidString(text) {
		return nil, newError(op, StatusInvalidArgument, what+" is not valid UTF-8", nil)
	}
	return C.CString(text), nil
}

// batchLimit is limit for the library: 0 is def (the library has no default: it refuses 0);
// out of range is refused here (the library would refuse it too, but a Go int may not fit its
// uint32).
func batchLimit(op string, limit, def int) (C.uint32_t, error) {
	if limit == 0 {
		limit = def
	}
	if limit < 1 || limit > MaxListLimit {
		return 0, newError(op, StatusInvalidArgument, fmt.Sprintf("limit must be from 1 to %d (0: %d), got %d", MaxListLimit, def, limit), nil)
	}
	return C.uint32_t(limit), nil
}

func listAgents(ctx context.Context, op, path string, opts Options, q ListQuery) ([]AgentInfo, error) {
	limit, err := batchLimit(op, q.Limit, DefaultListLimit)
	if err != nil {
		return nil, err
	}
	var prefix, after *C.char
	if q.Prefix != "" {
		if prefix, err = idText(op, "the prefix", q.Prefix); err != nil {
			return nil, err
		}
		defer C.free(unsafe.Pointer(prefix))
	}
	if q.After != "" || q.afterSet {
		if after, err = idText(op, "after", q.After); err != nil {
			return nil, err
		}
		defer C.free(unsafe.Pointer(after))
	}
	s, err := newStoreCall(op, path, opts)
	if err != nil {
		return nil, err
	}
	defer s.free()
	var buf C.AgentBuffer
	err = libCall(ctx, op, cCall{}, func(c cCall) C.int32_t {
		return C.agentstate_store_list(s.path, s.options, prefix, after, limit, &buf, c.token, c.err)
	})
	if err != nil {
		return nil, err
	}
	return decodeAgentInfos(op, takeBuffer(&buf))
}

func deleteAgentIf(ctx context.Context, op, path string, opts Options, id string, version uint64) (uint64, bool, error) {
	if version > math.MaxInt64 {
		return 0, false, newError(op, StatusInvalidArgument, fmt.Sprintf("version %d is more than the largest, %d", version, int64(math.MaxInt64)), nil)
	}
	return deleteAgent(ctx, op, path, opts, id, int64(version))
}

func deleteAgent(ctx context.Context, op, path string, opts Options, id string, ifVersion int64) (uint64, bool, error) {
	cid, err := idText(op, "the agent id", id)
	if err != nil {
		return 0, false, err
	}
	defer C.free(unsafe.Pointer(cid))
	s, err := newStoreCall(op, path, opts)
	if err != nil {
		return 0, false, err
	}
	defer s.free()
	var deleted C.uint64_t
	err = libCall(ctx, op, cCall{}, func(c cCall) C.int32_t {
		return C.agentstate_store_delete(s.path, s.options, cid, C.int64_t(ifVersion), &deleted, c.token, c.err)
	})
	if err != nil {
		return 0, false, err
	}
	return uint64(deleted), deleted != 0, nil
}

func expireAgents(ctx context.Context, op, path string, opts Options, idle time.Duration, limit int, dryRun bool) ([]AgentInfo, error) {
	if idle < 0 {
		return nil, newError(op, StatusInvalidArgument, fmt.Sprintf("idle %v is negative", idle), nil)
	}
	idleMs := uint64(idle / time.Millisecond)
	if idle%time.Millisecond != 0 {
		idleMs++
	}
	climit, err := batchLimit(op, limit, DefaultExpireLimit)
	if err != nil {
		return nil, err
	}
	s, err := newStoreCall(op, path, opts)
	if err != nil {
		return nil, err
	}
	defer s.free()
	var dry C.int
	if dryRun {
		dry = 1
	}
	var buf C.AgentBuffer
	err = libCall(ctx, op, cCall{}, func(c cCall) C.int32_t {
		return C.agentstate_store_expire(s.path, s.options, C.uint64_t(idleMs), climit, dry, &buf, c.token, c.err)
	})
	if err != nil {
		return nil, err
	}
	return decodeAgentInfos(op, takeBuffer(&buf))
}

// decodeAgentInfos decodes the library's JSON array of agents
// ([{"id","version","bytes","written_at"},...], written_at in ms since the Unix epoch).
func decodeAgentInfos(op string, data []byte) ([]AgentInfo, error) {
	var entries []struct {
		ID        string `json:"id"`
		Version   uint64 `json:"version"`
		Bytes     uint64 `json:"bytes"`
		WrittenAt int64  `json:"written_at"`
	}
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, newError(op, StatusJSON, "cannot decode the library's list of agents: "+err.Error(), nil)
	}
	out := make([]AgentInfo, len(entries))
	for i, e := range entries {
		out[i] = AgentInfo{ID: e.ID, Version: e.Version, Bytes: e.Bytes, WrittenAt: time.UnixMilli(e.WrittenAt)}
	}
	return out, nil
}
