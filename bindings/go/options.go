package agentstate

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
	// 1000000000); 0 means the store's cap (StoreMaxValueBytes, recorded by an earlier open),
	// else the library's default, 2097152.
	MaxValueBytes int
	// StoreMaxValueBytes records a cap in the store (2 to 1000000000), which every Agent
	// opened later with MaxValueBytes 0 uses, this one too; 0 leaves the store's cap as it is.
	// Refused with ReadOnly.
	StoreMaxValueBytes int
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
	// ChangeLog switches this agent's change log on (with a retention) or off; nil leaves the
	// agent's setting as it is. See ChangeLog.
	ChangeLog *ChangeLog
	// AgentID names which agent of the store to open: valid UTF-8, at most 255 bytes (Open
	// refuses anything else with ErrInvalidArgument). Required on PostgreSQL. On a SQLite
	// file, "" means the file's single agent (as before agent ids existed); with an id, one
	// file holds many isolated agents (state, version, change log, hooks), and the Agents
	// with an id in one process share one connection per file.
	AgentID string
	// SchemaVersion is the schema version of the states this program reads and writes (0 to
	// 1000000; 0, the default, for a program that declares none). Every state and change-log
	// entry records the version it was written under. A state stored under an older version is
	// upgraded on first touch (a read or a write) by the steps, SchemaSteps and SetSchemaStep,
	// once, as a change of its own (ChangeMigration to hooks); one stored under a newer version
	// makes every read and write fail with ErrNewerSchema, unless ReadOnly (which reads every
	// state as stored). See SetSchemaStep.
	SchemaVersion uint32
	// SchemaSteps are declarative steps, each upgrading a state from version From to From+1
	// (From below SchemaVersion, one step per version); SetSchemaStep gives steps of code for
	// the versions these leave out. nil (or empty) gives none. The library checks them at Open
	// (ErrInvalidArgument). See SchemaStep.
	SchemaSteps []SchemaStep
	// MaxConnections is, on PostgreSQL, the most connections this process keeps to the
	// server, shared by all its Agents on it (1 to 1000); 0 means the library's default, 4.
	// The pool has the largest size any Open asked for. A SQLite file does not use it.
	MaxConnections int
	// Watch pushes changes that other handles and processes commit to this Agent's
	// OnStateChanged hooks, in commit order and once each, without Poll: the store's watcher
	// notices them and a library worker thread runs the hooks. Needs the change log
	// (ErrInvalidArgument at Open otherwise). false: hooks see others' changes on Poll only.
	Watch bool
}

// ChangeLog configures the change log of an agent (the "change_log" open option): its recent
// changes, each with its version, time, patch and resulting state, written in the same
// transaction as the change. Poll, ChangesSince, StateAt and Restore read it: without it, Poll
// and ChangesSince fail with ErrInvalidArgument, and StateAt and Restore reach only the current
// version and version 0 (ErrGap for the others).
//
// The setting is the agent's, recorded in the store with it: once switched on, every Agent
// opened on that agent (the same AgentID of the same file or database), in any process, logs
// its changes with this retention, whatever options it was opened with, until an Open with
// another ChangeLog changes the retention or switches the log off. The store's other agents
// keep their own setting: switching one agent's log on does not switch another's on.
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

// optionsFor is optionsJSON for the call op (Open, ListAgents, ...): its errors name op, and an
// encoding error of the initial state says so.
func (o Options) optionsFor(op string) (string, error) {
	text, err := o.optionsJSON()
	if err != nil {
		e := err.(*Error)
		if e.Op != "Open" { // an encoding error of the initial state
			e.Message = "initial state: " + e.Message
		}
		e.Op = op
		return "", e
	}
	return text, nil
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
	if o.StoreMaxValueBytes != 0 {
		parts = append(parts, `"store_max_value_bytes":`+strconv.Itoa(o.StoreMaxValueBytes))
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
	if o.SchemaVersion != 0 {
		parts = append(parts, `"schema_version":`+strconv.FormatUint(uint64(o.SchemaVersion), 10))
	}
	if len(o.SchemaSteps) > 0 {
		text, err := schemaStepsJSON(o.SchemaSteps)
		if err != nil {
			return "", err
		}
		parts = append(parts, `"schema_steps":`+text)
	}
	if o.MaxConnections != 0 {
		parts = append(parts, `"max_connections":`+strconv.Itoa(o.MaxConnections))
	}
	if o.Watch {
		parts = append(parts, `"watch":true`)
	}
	return "{" + strings.Join(parts, ",") + "}", nil
}

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
