package agentstate

// Versions, compare-and-set writes, and the change log: Poll, ChangesSince, StateAt, Restore.

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
	"time"
)

// GetStateVersioned returns the state (decoded as by GetState) and its version, read together:
// the number of changes committed to this store (0 while nothing is stored; the state is then
// the initial state). Pass the version to SetStateIf or ReplaceStateIf to write only if nobody
// wrote in between.
func (a *Agent) GetStateVersioned() (map[string]any, uint64, error) {
	return a.getStateVersionedValue(syncCall, "GetStateVersioned")
}

func (a *Agent) getStateVersionedValue(ctx context.Context, op string) (map[string]any, uint64, error) {
	data, version, err := a.getStateVersioned(ctx, op)
	return decodeVersioned(op, data, version, err)
}

// decodeVersioned decodes (as decodeState) the state of a call that returns a state and its
// version, or passes on the call's error.
func decodeVersioned(op string, data []byte, version uint64, err error) (map[string]any, uint64, error) {
	if err != nil {
		return nil, 0, err
	}
	st, err := decodeState(op, data)
	if err != nil {
		return nil, 0, err
	}
	return st, version, nil
}

// GetStateVersionedJSON is GetStateVersioned with the state as compact JSON, as stored.
func (a *Agent) GetStateVersionedJSON() (json.RawMessage, uint64, error) {
	return a.getStateVersioned(syncCall, "GetStateVersionedJSON")
}

// GetStateVersionedInto decodes the state into v (a non-nil pointer) as GetStateInto does, and
// returns its version.
func (a *Agent) GetStateVersionedInto(v any) (uint64, error) {
	return a.getStateVersionedInto(syncCall, "GetStateVersionedInto", v)
}

func (a *Agent) getStateVersionedInto(ctx context.Context, op string, v any) (uint64, error) {
	if rv := reflect.ValueOf(v); rv.Kind() != reflect.Pointer || rv.IsNil() {
		return 0, newError(op, StatusInvalidArgument, fmt.Sprintf("the target must be a non-nil pointer, not %T", v), nil)
	}
	data, version, err := a.getStateVersioned(ctx, op)
	if err != nil {
		return 0, err
	}
	if err := Unmarshal(data, v); err != nil {
		e := err.(*Error)
		e.Op = op
		return 0, e
	}
	return version, nil
}

// SetStateIf is a compare-and-set SetState: it merges patch only if the agent's version is
// still expected (0: nothing stored yet) when the write transaction starts, and returns the
// merged state and its new version (expected itself when the patch changes nothing: such a
// write commits nothing). Otherwise it returns an error matching ErrConflict and
// nothing is written. With GetStateVersioned it makes read-modify-write loops that never
// overwrite another writer's change, in this process or another:
//
//	for {
//		var s Counter
//		v, err := a.GetStateVersionedInto(&s)
//		if err != nil { return err }
//		_, _, err = a.SetStateIf(v, map[string]any{"count": s.Count + 1})
//		if !errors.Is(err, agentstate.ErrConflict) { return err }
//	}
//
// Other errors, hooks and the validator as for SetState; when a hook fails (ErrHook) the change
// is committed but the state and version are not returned (nil, 0): read them again.
func (a *Agent) SetStateIf(expected uint64, patch any) (map[string]any, uint64, error) {
	return a.writeValueIf(syncCall, "SetStateIf", expected, patch, false)
}

// SetStateIfJSON is SetStateIf with the patch given as JSON text, passed to the library
// untouched; it returns the merged state as compact JSON.
func (a *Agent) SetStateIfJSON(expected uint64, patch []byte) (json.RawMessage, uint64, error) {
	return a.writeIf(syncCall, "SetStateIfJSON", expected, patch, false)
}

// ReplaceStateIf is a compare-and-set ReplaceState: it replaces the state with next only if
// the agent's version is still expected, and returns the new state and version; otherwise an
// error matching ErrConflict, with nothing written. Other errors as for SetStateIf.
func (a *Agent) ReplaceStateIf(expected uint64, next any) (map[string]any, uint64, error) {
	return a.writeValueIf(syncCall, "ReplaceStateIf", expected, next, true)
}

// ReplaceStateIfJSON is ReplaceStateIf with the state given as JSON text, passed untouched.
func (a *Agent) ReplaceStateIfJSON(expected uint64, next []byte) (json.RawMessage, uint64, error) {
	return a.writeIf(syncCall, "ReplaceStateIfJSON", expected, next, true)
}

func (a *Agent) writeValueIf(ctx context.Context, op string, expected uint64, v any, replace bool) (map[string]any, uint64, error) {
	data, err := Marshal(v)
	if err != nil {
		e := err.(*Error)
		e.Op = op
		return nil, 0, e
	}
	out, version, err := a.writeIf(ctx, op, expected, data, replace)
	return decodeVersioned(op, out, version, err)
}

// withVersion is the result of a call that returns a state and its version: nothing but the
// error when there is one.
func withVersion(data []byte, version C.uint64_t, err error) ([]byte, uint64, error) {
	if err != nil {
		return nil, 0, err
	}
	return data, uint64(version), nil
}

// Poll delivers to this Agent's hooks (OnStateChanged, OnChange), on this goroutine and in
// commit order, every change that other Agents or processes committed since this Agent's last
// delivery, each once, with its real prev, next, patch and version, and returns how many it
// delivered. It needs the change log (see ChangeLog): without it, it fails with
// ErrInvalidArgument. The library starts no goroutine or thread: call Poll when convenient, on
// a time.Ticker for instance. Changes committed before this Agent was opened are not
// delivered; a write through this Agent first delivers the pending ones itself.
//
// If the log's retention dropped changes before this Agent delivered them, they are skipped:
// Poll delivers the rest and returns an error matching ErrGap (once; the state is current).
// If a hook fails, every delivery still happens and the error matches ErrHook and wraps the
// hook's error (an ErrGap error wraps it too). With either error n still counts the changes
// delivered; with any other error it is 0.
//
// Poll may be called from inside a hook (what it delivers is delivered after the running hook
// returns), not from the validator or the initial-state function (ErrBusy).
func (a *Agent) Poll() (n int, err error) {
	return a.poll(context.Background(), "Poll")
}

func (a *Agent) poll(ctx context.Context, op string) (int, error) {
	var delivered C.size_t
	err := a.call(ctx, op, func(c cCall) C.int32_t {
		return C.agentstate_poll(c.h, &delivered, c.ctx, c.token, c.err)
	})
	return int(delivered), err
}

// LoggedChange is one change retained by the change log, as ChangesSince returns it.
type LoggedChange struct {
	// Version is the state's version after the change.
	Version uint64
	// At is when the change was committed (millisecond precision, local time).
	At time.Time
	// Patch is the merge patch as applied, or for a ChangeJSONPatch the array of JSON Patch
	// operations; nil for a replacement (ReplaceState, Restore) and a migration.
	Patch json.RawMessage
	// Next is the state after the change, as compact JSON (decode it with Unmarshal), as
	// stored: in the shape of schema version Schema (UpgradeState gives it in the Agent's).
	Next json.RawMessage
	// Kind is what made the change: ChangeMerge, ChangeJSONPatch, ChangeReplace (nil Patch) or
	// ChangeMigration (the log's "kind"; see Change.Kind).
	Kind ChangeKind
	// Schema is the schema version Next was written under (the writer's
	// Options.SchemaVersion; 0 when none).
	Schema uint32
	// MigratedFrom is, for a ChangeMigration, the schema version the state was upgraded from;
	// 0 for the other kinds.
	MigratedFrom uint32
}

// ChangesSince returns the changes committed after version (by any Agent or process), oldest
// first: nothing if version is the current one. It is what a client that reconnects with the
// state at version needs to catch up. It needs the change log (see ChangeLog).
//
// Errors: ErrGap (the log no longer holds all of them: send the whole state instead),
// ErrInvalidArgument (the log is off, or version is in the future), ErrBadHandle, ErrStorage.
func (a *Agent) ChangesSince(version uint64) ([]LoggedChange, error) {
	return a.changesSinceValue(context.Background(), "ChangesSince", version)
}

func (a *Agent) changesSinceValue(ctx context.Context, op string, version uint64) ([]LoggedChange, error) {
	data, err := a.changesSince(ctx, op, version)
	if err != nil {
		return nil, err
	}
	var raw []struct {
		Version uint64          `json:"version"`
		At      int64           `json:"at"`
		Patch   json.RawMessage `json:"patch"`
		Next    json.RawMessage `json:"next"`
		Schema  uint32          `json:"schema"`
		From    *uint32         `json:"migrated_from"`
		Kind    string          `json:"kind"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, newError(op, StatusCodec, "cannot decode the changes: "+err.Error(), err)
	}
	out := make([]LoggedChange, len(raw))
	for i, r := range raw {
		out[i] = LoggedChange{Version: r.Version, At: time.UnixMilli(r.At), Patch: r.Patch, Next: r.Next,
			Kind: ChangeMerge, Schema: r.Schema}
		if string(r.Patch) == "null" || r.Patch == nil {
			out[i].Patch = nil
			out[i].Kind = ChangeReplace
		}
		if r.From != nil {
			out[i].Kind = ChangeMigration
			out[i].MigratedFrom = *r.From
		}
		switch r.Kind {
		case "merge":
			out[i].Kind = ChangeMerge
		case "json_patch":
			out[i].Kind = ChangeJSONPatch
		case "replace":
			out[i].Kind = ChangeReplace
		case "migration":
			out[i].Kind = ChangeMigration
		}
	}
	return out, nil
}

// ChangesSinceJSON is ChangesSince as the library returns it, one JSON array ready to send:
// [{"version":N,"at":MS,"kind":K,"schema":S,"migrated_from":F|null,"patch":{...}|[...]|null,
// "next":{...}},...], at in milliseconds since the Unix epoch, kind "merge", "json_patch",
// "replace" or "migration" (ChangeKind's names), schema the schema version next was written
// under, migrated_from the version a schema migration upgraded from (else null), patch the
// merge patch, the array of operations of a JSON Patch, or null for a replacement or a
// migration.
func (a *Agent) ChangesSinceJSON(version uint64) (json.RawMessage, error) {
	return a.changesSince(context.Background(), "ChangesSinceJSON", version)
}

func (a *Agent) changesSince(ctx context.Context, op string, version uint64) ([]byte, error) {
	return a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		return C.agentstate_changes_since(c.h, C.uint64_t(version), out, c.ctx, c.token, c.err)
	})
}

// StateAt returns the state at version (decoded as by GetState): the current version, one the
// change log retains, or 0 (the initial state). It is the state as stored, in the shape of the
// schema version it was written under: StateAtStored also returns that version, and
// UpgradeState brings the state to this Agent's.
//
// Errors: ErrGap (the log does not retain it, or is off), ErrInvalidArgument (a future
// version), ErrBadHandle, ErrStorage; for version 0 with an initial-state function, what it
// earns (see GetState).
func (a *Agent) StateAt(version uint64) (map[string]any, error) {
	return a.stateAtValue(context.Background(), "StateAt", version)
}

func (a *Agent) stateAtValue(ctx context.Context, op string, version uint64) (map[string]any, error) {
	data, err := a.stateAt(ctx, op, version)
	if err != nil {
		return nil, err
	}
	return decodeState(op, data)
}

// StateAtJSON is StateAt with the state as compact JSON, as stored.
func (a *Agent) StateAtJSON(version uint64) (json.RawMessage, error) {
	return a.stateAt(context.Background(), "StateAtJSON", version)
}

func (a *Agent) stateAt(ctx context.Context, op string, version uint64) ([]byte, error) {
	return a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		return C.agentstate_get_state_at(c.h, C.uint64_t(version), out, c.ctx, c.token, c.err)
	})
}

// Restore is point-in-time recovery: it replaces the state with the state at version (as
// StateAt finds it, upgraded to this Agent's schema version) as a new change, and returns the restored state and its new version (the
// current one when the state at version is the current state: that commits nothing).
// The validator gates it and hooks see it as a replacement (nil patch).
//
// Errors: those of StateAt and ReplaceState (ErrRejected, ErrHook, ...).
func (a *Agent) Restore(version uint64) (map[string]any, uint64, error) {
	return a.restoreValue(context.Background(), "Restore", version)
}

func (a *Agent) restoreValue(ctx context.Context, op string, version uint64) (map[string]any, uint64, error) {
	data, v, err := a.restore(ctx, op, version)
	return decodeVersioned(op, data, v, err)
}

// RestoreJSON is Restore with the restored state as compact JSON.
func (a *Agent) RestoreJSON(version uint64) (json.RawMessage, uint64, error) {
	return a.restore(context.Background(), "RestoreJSON", version)
}

func (a *Agent) restore(ctx context.Context, op string, version uint64) ([]byte, uint64, error) {
	var newVersion C.uint64_t
	data, err := a.callBuffer(ctx, op, func(c cCall, out *C.AgentBuffer) C.int32_t {
		return C.agentstate_restore_state(c.h, C.uint64_t(version), out, &newVersion, c.ctx, c.token, c.err)
	})
	return withVersion(data, newVersion, err)
}
