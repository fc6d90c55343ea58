// Type declarations of the agent-state package (hand-written; index.js and lib/*.js are the
// implementation). test/surface.test.js holds OpenOptions to the library's option list
// (include/agent_state_surface.json) and the error classes to its statuses; `tsc -p .` checks
// this file together with examples/conversation.ts.
//
// Threads: an Agent belongs to the JavaScript thread (main thread or worker) that opened it. Its
// calls run on the library's worker pool (not libuv's thread pool, which fs, dns and crypto
// share) and resolve on that thread; its hooks and validator run there too. A worker thread
// opens agents of its own (any number of handles, in any threads and processes, may be open on
// one agent: the store orders their writes). An Agent is not transferable with postMessage.

/// <reference types="node" />

// ----------------------------------------------------------------------------- the codec

/**
 * The values the storage codec stores besides JSON's own (each travels as a tagged JSON value,
 * byte for byte what the other languages write, and reads back as the same JavaScript type).
 * In a merge patch each of them is one value, replaced whole.
 *
 * A `Buffer` is stored as a `Uint8Array` and reads back as one; a subclass of a typed array as
 * the standard type it extends.
 */
export type CodecLeaf =
  | Date
  | Map<unknown, unknown>
  | Set<unknown>
  | ArrayBuffer
  | ArrayBufferView
  | bigint
  | RegExp;

/**
 * What a state may hold: JSON's values (finite numbers only) and the codec's leaves, in plain
 * objects and arrays. Anything else (a function, a symbol, a class instance, `undefined` in an
 * array, NaN, a cycle) is a {@link CodecError} naming its path, and nothing is written. An
 * object member whose value is `undefined` is left out, as `JSON.stringify` does (it does not
 * delete: `null` does, in a merge patch).
 */
export type StorableValue =
  | string
  | number
  | boolean
  | null
  | CodecLeaf
  | readonly StorableValue[]
  | { readonly [key: string]: StorableValue | undefined };

/**
 * An RFC 7396 merge patch of `T`: every member optional, objects merged member by member, any
 * member `null` to delete it. Arrays and the codec's leaves ({@link CodecLeaf}: Date, Map, Set,
 * ArrayBuffer, typed arrays, DataView, bigint, RegExp) are values, replaced whole, so their
 * patch is the whole new value.
 */
export type MergePatch<T> = T extends CodecLeaf
  ? T
  : T extends readonly unknown[]
    ? T
    : T extends object
      ? { [K in keyof T]?: MergePatch<T[K]> | null }
      : T;

/**
 * The JSON text the library stores for `state` (a plain object), with the codec's leaves as
 * tagged values. Throws {@link CodecError} for a value the codec refuses. Synchronous; any
 * thread.
 */
export function encodeState(state: Readonly<Record<string, unknown>>): string;

/**
 * The state a stored JSON text holds, the tagged values turned back into their JavaScript
 * types. Fresh values, the caller's to keep. Throws `SyntaxError` for text that is not JSON.
 */
export function decodeState<State extends Record<string, unknown> = Record<string, unknown>>(text: string): State;

// ---------------------------------------------------------------------------- the options

/**
 * The options of a connection to a store: those of the store functions ({@link listAgents},
 * {@link deleteAgent}, {@link expireAgents}), and of every open ({@link OpenOptions} has them
 * all). Each is optional; `undefined` is the same as leaving it out. The library checks them:
 * an unknown name or a wrong type is an {@link InvalidArgumentError} naming it.
 */
export interface ConnectionOptions {
  /**
   * `"full"` (the default): an acknowledged write survives power loss; `"normal"`: it survives a
   * crash of the process (on PostgreSQL, `synchronous_commit` off).
   */
  synchronous?: 'full' | 'normal';
  /**
   * How long a call waits for what another connection holds (SQLite's write lock; on PostgreSQL
   * the agent's row, a table lock or a pooled connection), in milliseconds: 0 to 2147483647,
   * default 5000; 0 fails at once. Past it: {@link BusyError}. Never how long an uncontended
   * statement takes.
   */
  busyTimeoutMs?: number;
  /**
   * PostgreSQL: how long the server may take to answer before the call fails with
   * {@link UnavailableError}, in milliseconds (1 to 2147483647, default 10000). Accepted and
   * unused on SQLite.
   */
  serverTimeoutMs?: number;
  /**
   * Refuse every write and never modify the store (default false): writes fail with
   * {@link StorageError}.
   */
  readOnly?: boolean;
  /**
   * PostgreSQL: the most connections this process keeps to the server, shared by its handles
   * (1 to 1000, default 4). A SQLite file has no pool and does not use it.
   */
  maxConnections?: number;
}

/** The change log's retention: either limit or both (a change is kept while both keep it). */
export interface ChangeLogRetention {
  /** Keep the newest N changes (the newest change is always kept). */
  keepLast?: number;
  /** Keep the changes of the last T seconds before the newest one. */
  keepSeconds?: number;
}

/** The initial state: a state, or a function returning a fresh one each time it is needed. */
export type InitialState<State> = State | (() => State);

/**
 * What kind of change was committed: `'merge'` (`setState`), `'json_patch'` (`patchState`),
 * `'replace'` (`replaceState`, `restore`) or `'migration'` (a state of an older schema version
 * upgraded by the agent's schema steps, on the first read or write that found it).
 */
export type ChangeKind = 'merge' | 'json_patch' | 'replace' | 'migration';

/**
 * One operation of an RFC 6902 JSON Patch ({@link Agent.patchState}). `path` and `from` are
 * RFC 6901 JSON Pointers (`"/messages/0/text"`; `~1` is a `/` in a member's name, `~0` a `~`;
 * `"/messages/-"` is the end of an array, where `add` appends). A `value` goes through the
 * codec as a state's does (a Date, a Map, a bigint... are one value each).
 * - `add`: insert `value` at `path` (into an array before the index; an object's member is set);
 * - `remove`: remove what is at `path`;
 * - `replace`: replace what is at `path` (which must exist) with `value`;
 * - `move`: remove what is at `from` and add it at `path`;
 * - `copy`: add a copy of what is at `from` at `path`;
 * - `test`: the patch applies only if what is at `path` equals `value` (JSON equality: numbers
 *   by value, members in any order), else {@link TestFailedError} and nothing is written.
 */
export type JsonPatchOperation =
  | { readonly op: 'add'; readonly path: string; readonly value: unknown }
  | { readonly op: 'remove'; readonly path: string }
  | { readonly op: 'replace'; readonly path: string; readonly value: unknown }
  | { readonly op: 'move'; readonly from: string; readonly path: string }
  | { readonly op: 'copy'; readonly from: string; readonly path: string }
  | { readonly op: 'test'; readonly path: string; readonly value: unknown };

/**
 * What a change applied, by its kind: a merge's patch, a JSON Patch's operations, `null` for a
 * replacement or a migration (decoded: the caller's to keep).
 */
export type ChangePatch<State> =
  | { kind: 'merge'; patch: MergePatch<State> }
  | { kind: 'json_patch'; patch: JsonPatchOperation[] }
  | { kind: 'replace' | 'migration'; patch: null };

/**
 * A committed change as a listener's third argument describes it: its version, schema versions,
 * and its kind with what it applied ({@link ChangePatch}: test `kind` to narrow `patch`). A
 * fresh object.
 */
export type ChangeInfo<State = Record<string, unknown>> = ChangePatch<State> & {
  /** The state's version after the change. */
  version: number;
  /** The schema version of the state after the change (0 when the writer declared none). */
  schema: number;
  /** For a migration, the schema version the state was stored under before; else `null`. */
  migratedFrom: number | null;
};

/**
 * Called after each committed change made through the agent, with the state after it, the
 * state before it and what the change was ({@link ChangeInfo}: its kind, a migration's schema
 * versions), on the agent's thread, in commit order; the write (or the read that migrated)
 * that made the change resolves once its hooks finished. A hook that throws (or rejects) makes
 * that call reject with {@link HookError}; the change is committed all the same.
 */
export type StateListener<State> = (next: State, prev: State, change: ChangeInfo<State>) => Promise<void> | void;

/**
 * One operation of a declarative schema step. Paths are JSON Pointers to object members
 * (`"/user/nick"`); values go through the codec as a state's do.
 * - `merge`: RFC 7396 merge of `value` into the state (or into the object at `path`);
 * - `default`: set `path` to `value` where it is missing;
 * - `set`: set `path` to `value`;
 * - `remove`: remove `path` where it is present;
 * - `rename`: rename the member at `path` to `to` (in the same object);
 * - `move`: move the value at `from` to `path`.
 */
export type SchemaOp =
  | { op: 'merge'; value: Readonly<Record<string, unknown>>; path?: string }
  | { op: 'default'; path: string; value: unknown }
  | { op: 'set'; path: string; value: unknown }
  | { op: 'remove'; path: string }
  | { op: 'rename'; path: string; to: string }
  | { op: 'move'; from: string; path: string };

/**
 * A schema step of code: called with the state as stored under schema version `from` (an older
 * shape, hence `any`) and `from`; returns the state at `from + 1`, a plain object. It runs on
 * the agent's thread inside the transaction that migrates, while the read or write waits:
 * synchronous, and it must not use the agent. A throw, a Promise or anything but a plain object
 * fails the migration with {@link MigrationError} (its message names the step), nothing
 * written.
 */
export type SchemaStepFunction = (state: any, from: number) => object;

/**
 * One step of `schemaSteps`, upgrading a state from schema version `from` to `from + 1`:
 * declarative (`ops`, applied by the library) or of code (`upgrade`, set with
 * {@link Agent.setSchemaStep} before the open resolves). One step per version.
 */
export type SchemaStepSpec =
  | { readonly from: number; readonly ops: readonly SchemaOp[] }
  | { readonly from: number; readonly upgrade: SchemaStepFunction };

/** What a validator's fourth argument says of the change it is asked about. A fresh object. */
export interface ValidatedChange {
  /** What kind of change it is (`'json_patch'`: its patch is the operations). */
  kind: ChangeKind;
  /** The version the change would commit as. */
  version: number;
}

/**
 * Called on the agent's thread before a change through the agent commits, inside its
 * transaction, with the state it would produce, the state before it, what the change applies
 * (the merge patch, a JSON Patch's operations, `null` for a replacement) and its kind and
 * version ({@link ValidatedChange}). Return `false` or a string (the reason), or throw, to reject the
 * change: the write rejects with {@link RejectedError} and nothing is written. Anything else
 * (`true`, `undefined`) accepts it. Synchronous: a returned Promise rejects the change (the
 * write waits inside its transaction).
 */
export type Validator<State> = (
  next: State,
  prev: State,
  patch: MergePatch<State> | JsonPatchOperation[] | null,
  change: ValidatedChange,
) => boolean | string | void;

/**
 * The options of {@link Agent.open} and {@link openAgent}: the library's options (in camelCase;
 * the library's names are snake_case), and the JavaScript-only `onStateChanged`, `validator` and
 * `signal`. The library checks its own: an unknown name or a wrong type is an
 * {@link InvalidArgumentError} naming it.
 */
export interface OpenOptions<State extends Record<string, unknown> = Record<string, unknown>> extends ConnectionOptions {
  /**
   * Which agent of the store: a non-empty string of at most 255 UTF-8 bytes. Required on
   * PostgreSQL. On a SQLite file, absent is the file's single agent; with an id, one file holds
   * many isolated agents.
   */
  agentId?: string;
  /**
   * The state shown while nothing is stored (default `{}`); never stored by a read, the first
   * write starts from it. A state (copied through the codec each time) or a function returning
   * one (called each time the initial state is needed; it must not use the agent). A subclass
   * that overrides `initialState()` ignores it.
   */
  initialState?: InitialState<State>;
  /**
   * This handle's cap on the encoded state and on input documents, in bytes (2 to 1000000000;
   * absent: the store's cap, `storeMaxValueBytes`, else 2097152). Over it:
   * {@link StateTooLargeError}, nothing written.
   */
  maxValueBytes?: number;
  /**
   * Records this cap (2 to 1000000000) in the store, for every handle opened later without its
   * own `maxValueBytes` (this one too); absent leaves the store's setting as it is. With
   * `readOnly`: {@link InvalidArgumentError}.
   */
  storeMaxValueBytes?: number;
  /**
   * Switches the agent's change log on with this retention (which `changesSince`, `changes`,
   * `stateAt`, `restore` and `poll` read), recorded in the store for every handle of the agent
   * in any process; `false` switches it off and drops it. Absent leaves the agent's setting as
   * it is (off for a new agent).
   */
  changeLog?: ChangeLogRetention | false;
  /**
   * The schema version of the states this program reads and writes (0 to 1000000, default 0;
   * a subclass may declare it as `static override schemaVersion = N`, which this option
   * overrides). A state stored under an older version is upgraded by the steps on the first read
   * or write that finds it, once, as a change of its own (kind `'migration'`); one stored under
   * a newer version is refused with {@link NewerSchemaError}, nothing written, unless
   * `readOnly` (which reads every state as stored).
   */
  schemaVersion?: number;
  /**
   * The steps from each older schema version to the next (default none; a subclass may declare
   * them as `static override schemaSteps = [...]`, which this option overrides): declarative
   * (`{from, ops}`) or of code (`{from, upgrade(state)}`). A version without a step fails the
   * migration with {@link MigrationError}. Steps are checked when the agent opens
   * ({@link InvalidArgumentError}).
   */
  schemaSteps?: readonly SchemaStepSpec[];
  /**
   * Hand this agent's hooks the changes other handles and processes commit, as they are
   * committed, without {@link Agent.poll} (default false): the store's watcher (one per store
   * in the process) delivers them, in commit order, each once. Needs the change log
   * (`changeLog`), else {@link InvalidArgumentError}.
   */
  watch?: boolean;
  /** A listener added before the open resolves, as {@link Agent.subscribe} adds one. */
  onStateChanged?: StateListener<State>;
  /** The validator, set before the open resolves, as {@link Agent.setValidator} sets it. */
  validator?: Validator<State> | null;
  /** Aborts the open: it rejects with {@link CallCancelledError} and no handle is left open. */
  signal?: AbortSignal;
}

/** Options of a single call: its AbortSignal. */
export interface CallOptions {
  /**
   * Aborting it cancels the call: it rejects with {@link CallCancelledError}. A write cancelled
   * before it commits writes nothing; an already aborted signal fails the call at once.
   */
  signal?: AbortSignal;
}

/** Options of `setState`, `replaceState` and `patchState`. */
export interface WriteOptions extends CallOptions {
  /**
   * Compare-and-set: write only if the state is at this version (0: nothing stored), else
   * {@link ConflictError} and nothing is written. `setStateIf` and `replaceStateIf` take it as
   * their first argument.
   */
  expected?: number | bigint | null;
}

/** Options of {@link Agent.changes}. */
export interface ChangesOptions extends CallOptions {
  /** Start after this version (default 0: every change the log holds). */
  after?: number | bigint;
  /** Wait for new changes instead of ending at the newest (until `signal` aborts). */
  follow?: boolean;
  /** With `follow`: how often to look for new changes, in milliseconds (default 100). */
  intervalMs?: number;
}

/** Options of {@link listAgents}. */
export interface ListOptions extends ConnectionOptions, CallOptions {
  /** Only the ids starting with this. */
  prefix?: string | null;
  /** Only the ids after this one (the last id of the previous page). */
  after?: string | null;
  /** At most this many (1 to 10000, default 1000). */
  limit?: number;
}

/** Options of {@link deleteAgent}. */
export interface DeleteOptions extends ConnectionOptions, CallOptions {
  /** Delete only if the agent is at this version, else {@link ConflictError}, nothing deleted. */
  ifVersion?: number | bigint | null;
}

/** Options of {@link expireAgents}. */
export interface ExpireOptions extends ConnectionOptions, CallOptions {
  /** Delete the agents not written for longer than this, in milliseconds. */
  idleMs: number;
  /** At most this many per call (1 to 10000, default 1000): call again until fewer come back. */
  limit?: number;
  /** Only list the agents that would be deleted. */
  dryRun?: boolean;
}

// ------------------------------------------------------------------------------ results

/** A state with its version, read together. */
export interface Versioned<State> {
  state: State;
  /** The number of changes committed to the state: 0 while nothing is stored. */
  version: number;
}

/**
 * One change of the change log: its kind with what it applied ({@link ChangePatch}: the merge
 * patch, a JSON Patch's operations, `null` for a replacement (`replaceState`, `restore`) or a
 * migration). Fresh, decoded values: the caller's to keep.
 */
export type LoggedChange<State> = ChangePatch<State> & {
  /** The state's version after the change. */
  version: number;
  /** When it was committed (by the writer's clock). */
  at: Date;
  /** The schema version `next` was written under (0 when the writer declared none). */
  schema: number;
  /** For a migration, the schema version the state was stored under before; else `null`. */
  migratedFrom: number | null;
  /**
   * The state after the change, as stored (in the shape of its `schema`; {@link
   * Agent.upgradeState} brings it to the agent's).
   */
  next: State;
};

/** One agent of a store, as {@link listAgents} and {@link expireAgents} return it. */
export interface AgentInfo {
  /** The agent's id (`""` for a SQLite file's single agent, opened without `agentId`). */
  agentId: string;
  /** Its version. */
  version: number;
  /** The stored state's size, in bytes. */
  bytes: number;
  /** When it was last written (by the writer's clock). */
  writtenAt: Date;
}

// ------------------------------------------------------------------------------- Agent

/**
 * One agent's persistent state, in a SQLite file or PostgreSQL: the reference's API
 * (getState, setState, replaceState, initialState, onStateChanged), plus versions,
 * compare-and-set, a validator, the change log and cancellation.
 *
 * Subclass it and open with the subclass's `open` (`await Conversation.open(path, options)`),
 * or use {@link openAgent} with the hooks as options. The Agent owns one native handle until
 * {@link Agent.close} (or `await using`); belongs to the thread that opened it (worker threads
 * open their own). Calls may run concurrently: writes in flight at once through one agent run on
 * the library's worker pool and commit in the order they reach the store (not necessarily the
 * order they were called; await one before the next to order them), and hooks see them one at
 * a time, in commit order.
 *
 * Every call that touches the store can reject with {@link BadHandleError} (the agent is
 * closed), {@link StorageError}, {@link BusyError}, {@link UnavailableError} or
 * {@link AuthError} (PostgreSQL), {@link CallCancelledError} (its signal aborted) and
 * {@link PanicError} (a bug in the library, caught; the agent may still be used).
 */
export class Agent<State extends Record<string, unknown> = Record<string, unknown>> {
  #private;

  /**
   * The class form's schema version: `open` uses it when its options give no `schemaVersion`
   * (`static override schemaVersion = 2`).
   */
  static schemaVersion?: number;

  /**
   * The class form's schema steps: `open` uses them when its options give no `schemaSteps`
   * (`static override schemaSteps: SchemaStepSpec[] = [...]`).
   */
  static schemaSteps?: readonly SchemaStepSpec[];

  /**
   * Opens the agent `options.agentId` of the store at `path` (a file, created if missing, or a
   * `postgresql://` URI) and resolves to an instance of the class it is called on.
   *
   * @throws {InvalidArgumentError} an empty path, an unknown or ill-typed option.
   * @throws {StorageError} the file cannot be opened or is not a store of this library.
   * @throws {UnavailableError} / {AuthError} PostgreSQL could not be reached or refused us.
   * @throws {CallCancelledError} `options.signal` aborted.
   */
  static open<T extends Agent<any>>(this: new () => T, path: string, options?: OpenOptions<StateOf<T>>): Promise<T>;

  /**
   * Agents are made by {@link Agent.open}; an Agent constructed with `new` is not open (every
   * call fails with {@link BadHandleError}).
   */
  constructor();

  /**
   * The state to show while nothing is stored (default: the `initialState` option, else `{}`).
   * Called whenever a read finds nothing stored, and by the first write, which starts from it;
   * a read never persists it. Override it; it must be synchronous and must not use the agent.
   */
  protected initialState(): State;

  /**
   * Called after every committed change made through this agent (`setState`, `replaceState`,
   * `patchState`, their `If` forms, `restore`; with `poll`, other handles' changes too), in
   * commit order, on this agent's thread, with the state after and before the change and what
   * it was ({@link ChangeInfo}: a migration by a read too). The default does nothing.
   * The write resolves after its hook; a hook that throws makes it reject with
   * {@link HookError} (the change is committed all the same).
   */
  protected onStateChanged(next: State, prev: State, change: ChangeInfo<State>): Promise<void> | void;

  /**
   * The stored state, or `initialState()` while nothing is stored.
   *
   * A state of plain JSON values is an immutable snapshot: deep-frozen, and the same object for
   * every read until something is committed (so a read that finds nothing new costs nothing);
   * copy it (`structuredClone`) to edit it, or write a patch. A state holding the codec's types
   * (Date, Map, ...) cannot be frozen, so each read returns a fresh copy of it instead.
   */
  getState(options?: CallOptions): Promise<State>;

  /** The state with its version (0: nothing stored), read together. */
  getStateVersioned(options?: CallOptions): Promise<Versioned<State>>;

  /**
   * Merges `patch` into the state (RFC 7396: objects merge recursively, `null` deletes a
   * member) in one transaction and resolves to the merged state (a snapshot, as
   * {@link Agent.getState} returns), after the hooks ran. The patch is encoded when the call
   * starts: changing the object afterwards changes nothing.
   *
   * @throws {InvalidArgumentError} `patch` is not a plain object.
   * @throws {CodecError} a value the codec cannot store.
   * @throws {StateTooLargeError} the result is over the size cap; nothing written.
   * @throws {ConflictError} with `options.expected`, the state was at another version.
   * @throws {RejectedError} the validator rejected the change; nothing written.
   * @throws {HookError} a hook threw; the change is committed.
   */
  setState(patch: MergePatch<State>, options?: WriteOptions): Promise<State>;

  /**
   * Replaces the whole state with `next` (nothing of the previous state survives) and resolves
   * to it, after the hooks ran (which see the new state and the one before the replacement).
   * Rejects as {@link Agent.setState} does.
   */
  replaceState(next: State, options?: WriteOptions): Promise<State>;

  /**
   * `setState` only if the state is at version `expected` (0: nothing stored), else
   * {@link ConflictError} (its `expected` and `actual`) and nothing written.
   */
  setStateIf(expected: number | bigint, patch: MergePatch<State>, options?: CallOptions): Promise<Versioned<State>>;

  /** `replaceState` only at version `expected`, else {@link ConflictError}, nothing written. */
  replaceStateIf(expected: number | bigint, next: State, options?: CallOptions): Promise<Versioned<State>>;

  /**
   * Applies `operations`, an RFC 6902 JSON Patch ({@link JsonPatchOperation}), to the state in
   * one transaction, all or nothing, and resolves to the new state (a snapshot, as
   * {@link Agent.getState} returns), after the hooks ran (they see kind `'json_patch'` and the
   * operations as `patch`). Appending to a list is `{op: "add", path: "/messages/-", value}`,
   * and the change log stores just that operation. The operations are encoded when the call
   * starts. A patch whose result is the stored state commits nothing (the version stays).
   *
   * @throws {InvalidArgumentError} not an array, an unknown `op`, a missing member, a malformed
   *   pointer (`~2`), or a result that is not an object.
   * @throws {PathError} an operation's `path` (or `from`) names nothing, an index is out of
   *   range, or a `move` goes into its own child; its `operation` and `path` say which.
   * @throws {TestFailedError} a `test` operation found another value.
   * @throws {CodecError} a value the codec cannot store, or an operation with a member twice.
   * @throws {StateTooLargeError} the result is over the size cap.
   * @throws {ConflictError} with `options.expected`, the state was at another version.
   * @throws {RejectedError} the validator rejected the change.
   * @throws {HookError} a hook threw; the change is committed.
   * Nothing is written on any of them but the last.
   */
  patchState(operations: readonly JsonPatchOperation[], options?: WriteOptions): Promise<State>;

  /**
   * `patchState` only if the state is at version `expected` (0: nothing stored), else
   * {@link ConflictError} (its `expected` and `actual`) and nothing written.
   */
  patchStateIf(expected: number | bigint, operations: readonly JsonPatchOperation[], options?: CallOptions): Promise<Versioned<State>>;

  /**
   * The part of the state at `pointer`, an RFC 6901 JSON Pointer (`"/messages/0/text"`; `""` is
   * the whole state), decoded; the rest of the state is not sent to JavaScript. While nothing is
   * stored it reads `initialState()`. `T` is what the caller says is there (not checked).
   *
   * @throws {PathError} the pointer names nothing (a missing member, an index out of range or
   *   with a leading zero, `-`); its `path` is the pointer and `operation` null.
   * @throws {InvalidArgumentError} a malformed pointer (not starting with `/`, `~2`).
   */
  getPath<T = unknown>(pointer: string, options?: CallOptions): Promise<T>;

  /**
   * The last `n` elements of the array at `pointer`, oldest first (fewer when the array is
   * shorter; the last message is `(await agent.getTail("/messages", 1))[0]`). Only those
   * elements are sent to JavaScript.
   *
   * @throws {PathError} the pointer names nothing.
   * @throws {InvalidArgumentError} a malformed pointer, the value there is not an array, or `n`
   *   is not a whole number of at least 0.
   */
  getTail<T = unknown>(pointer: string, n: number, options?: CallOptions): Promise<T[]>;

  /**
   * Adds a listener called like `onStateChanged` after each change through this agent (and,
   * with `poll`, other handles' changes); returns a function that removes it.
   *
   * @throws {BadHandleError} the agent is closed (synchronously).
   */
  subscribe(listener: StateListener<State>): () => void;

  /**
   * Sets the validator of the changes made through this agent (`null` removes it).
   *
   * @throws {BadHandleError} the agent is closed (synchronously).
   * @throws {InvalidArgumentError} not a function (synchronously).
   */
  setValidator(validator: Validator<State> | null): void;

  /**
   * Sets the schema step of code from version `from` to `from + 1` (`null` removes it); see
   * {@link SchemaStepFunction}. Set steps right after opening, before the first read or write.
   *
   * @throws {BadHandleError} the agent is closed (synchronously).
   * @throws {InvalidArgumentError} `from` is not below the agent's schema version, the options
   *   give a declarative step from `from` already, or `step` is not a function (synchronously).
   */
  setSchemaStep(from: number, step: SchemaStepFunction | null): void;

  /**
   * The schema version this agent declares (the `schemaVersion` option, default 0).
   *
   * @throws {BadHandleError} the agent is closed.
   */
  get schemaVersion(): number;

  /**
   * The state at `version` as stored, not upgraded, with the schema version it was written
   * under (the agent's own for version 0). Needs the change log for an older version.
   *
   * @throws {GapError} the log no longer holds that version.
   */
  stateAtStored(version: number | bigint, options?: CallOptions): Promise<{ state: Record<string, unknown>; schema: number }>;

  /**
   * `state`, stored under schema version `from` (e.g. from {@link Agent.stateAtStored} or the
   * change log), upgraded to this agent's version by its steps, without writing anything. A
   * state of the agent's version resolves as it is.
   *
   * @throws {NewerSchemaError} `from` is above the agent's version.
   * @throws {MigrationError} a step failed or is missing.
   * @throws {InvalidArgumentError} `state` is not a plain object, `from` not a version.
   */
  upgradeState(state: Readonly<Record<string, unknown>>, from: number, options?: CallOptions): Promise<State>;

  /**
   * The changes committed after version `after` (default 0), oldest first.
   *
   * @throws {InvalidArgumentError} the agent's change log is off.
   * @throws {GapError} the log no longer holds the changes after `after` (its `first` and
   *   `last` are the versions whose changes are missing).
   */
  changesSince(after?: number | bigint, options?: CallOptions): Promise<LoggedChange<State>[]>;

  /**
   * The change log as an async iterator, from after version `options.after`; with `follow`, it
   * waits for new changes until `signal` aborts, else it ends at the newest. Rejects as
   * {@link Agent.changesSince} does.
   */
  changes(options?: ChangesOptions): AsyncGenerator<LoggedChange<State>, void, undefined>;

  /**
   * The state as it was at `version` (needs the change log), as stored: in the shape of the
   * schema version it was written under ({@link Agent.stateAtStored} tells which;
   * {@link Agent.upgradeState} brings it to this agent's).
   *
   * @throws {GapError} the log no longer holds that version.
   */
  stateAt(version: number | bigint, options?: CallOptions): Promise<State>;

  /**
   * Replaces the state with the state at `version` (upgraded to this agent's schema version),
   * as a new change (hooks run), and resolves to it with its new version. Rejects as {@link Agent.stateAt} and {@link Agent.replaceState}
   * do.
   */
  restore(version: number | bigint, options?: CallOptions): Promise<Versioned<State>>;

  /**
   * Delivers to this agent's hooks the changes that other handles and processes committed
   * since it last looked (needs the change log); resolves to how many were delivered.
   */
  poll(options?: CallOptions): Promise<number>;

  /**
   * The size cap in force for this agent, in bytes.
   *
   * @throws {BadHandleError} the agent is closed.
   */
  get maxValueBytes(): number;

  /** The store's path or URI, as given to `open` (`undefined` before it). */
  get path(): string | undefined;

  /** True from `open` until `close`. */
  get isOpen(): boolean;

  /**
   * Closes the agent after the hooks under way finish; later calls reject with
   * {@link BadHandleError}. Closing again resolves at once.
   */
  close(): Promise<void>;

  /** `await using agent = await Agent.open(...)` closes it at the end of the block. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** The State type of an Agent (sub)class instance. */
export type StateOf<T> = T extends Agent<infer S> ? S : never;

/**
 * Opens an agent without subclassing: the hooks are options (`initialState`,
 * `onStateChanged`, `validator`). Rejects as {@link Agent.open} does.
 */
export function openAgent<State extends Record<string, unknown> = Record<string, unknown>>(
  path: string,
  options?: OpenOptions<State>,
): Promise<Agent<State>>;

/**
 * The agents of the store at `path` with a state stored, by id (UTF-8 byte order), one page of
 * at most `limit` after the id `after`. On a connection of its own (no handle).
 *
 * @throws {InvalidArgumentError} a bad option or limit.
 * @throws {StorageError} / {BusyError} / {UnavailableError} / {CallCancelledError}
 */
export function listAgents(path: string, options?: ListOptions): Promise<AgentInfo[]>;

/**
 * Deletes one agent's state, versions and change log in one transaction (on SQLite also erased
 * from the file and its WAL); resolves to the version it had, or `null` when nothing was stored.
 * Handles open to it see it gone at their next call.
 *
 * @throws {ConflictError} with `ifVersion`, the agent was at another version; nothing deleted.
 * @throws {BusyError} on SQLite, after the deletion committed, when another reader held the WAL
 *   (calling again finishes the erasure).
 */
export function deleteAgent(path: string, agentId: string, options?: DeleteOptions): Promise<number | null>;

/**
 * Deletes (with `dryRun`, only lists) up to `limit` agents not written for longer than
 * `idleMs`, the longest idle first, and resolves to them.
 *
 * @throws {InvalidArgumentError} `idleMs` missing or not a number, a bad limit.
 */
export function expireAgents(path: string, options: ExpireOptions): Promise<AgentInfo[]>;

// ---------------------------------------------------------------------------- watching

/**
 * What a watched change was: a change's kind ({@link ChangeKind}), `'deleted'` (the agent was
 * deleted: version 0, no state) or `'resync'` (changes were missed: the change log no longer
 * held them, the log is off, or the reader fell more than `maxPending` behind; `state` is the
 * agent's current state at `version`, which replaces a copy kept from earlier changes).
 */
export type WatchKind = ChangeKind | 'deleted' | 'resync';

/** A watched change's kind with what it applied (test `kind` to narrow `patch`). */
export type WatchPatch<State> = ChangePatch<State> | { kind: 'deleted' | 'resync'; patch: null };

/**
 * One change delivered by a {@link Watch}, decoded with the codec (a fresh object: the caller's
 * to keep).
 */
export type WatchChange<State = Record<string, unknown>> = WatchPatch<State> & {
  /** The agent that changed. */
  agentId: string;
  /** Its version after the change (0 for `'deleted'`). */
  version: number;
  /**
   * The state after the change: always for `'replace'`, `'migration'` and `'resync'`, and for an
   * agent's first change (the state it started from was the writer's initial state, which a
   * watcher cannot know); for every change with the option `states`; else `null` (and for
   * `'deleted'`).
   */
  state: State | null;
  /** The schema version the state was written under. */
  schema: number;
  /** When it was committed (the writer's clock); `null` when unknown (a resync, a deletion). */
  at: Date | null;
  /** For a migration, the schema version the state was stored under before; else `null`. */
  migratedFrom: number | null;
};

/**
 * The options of {@link watch}: which agents (`ids` or `prefix`, not both; neither is every
 * agent of the store), from where, and the connection's options.
 */
export interface WatchOptions extends ConnectionOptions {
  /** These agents (more can be added with {@link Watch.add}). */
  ids?: readonly string[];
  /**
   * Every agent whose id starts with this (`""`: every agent of the store), including agents
   * created after the watch began.
   */
  prefix?: string;
  /**
   * Resume points: for an agent named here, its changes after this version are delivered (from
   * the change log; when the log no longer holds them, one `'resync'`). Other agents start at
   * their version when the watch begins.
   */
  since?: Readonly<Record<string, number | bigint>> | ReadonlyMap<string, number | bigint>;
  /**
   * Every change carries the agent's state after it (default false), at the cost of the
   * watcher keeping the last state of each watched agent.
   */
  states?: boolean;
  /**
   * Most changes queued for a consumer that does not keep up (default 10000): beyond it an
   * agent's queued changes are replaced by one `'resync'`, so memory stays bounded.
   */
  maxPending?: number;
  /**
   * PostgreSQL: look for changes with one store-wide query every this many milliseconds instead
   * of LISTEN (for a connection through a transaction pooler, which cannot carry LISTEN).
   */
  pollIntervalMs?: number;
  /**
   * How often the watcher also compares every watched agent's stored version, as a safety net
   * for commits it was not told of, in milliseconds (default 30000).
   */
  rescanIntervalMs?: number;
  /** Aborting it cancels the opening ({@link CallCancelledError}), then closes the watch. */
  signal?: AbortSignal;
}

/**
 * A subscription to the changes of a store's agents, committed by any handle of any process:
 * per agent in commit order, each once, none missed (what the change log no longer holds comes
 * as one `'resync'`); no order across agents. Iterate it with `for await` (a `break` closes it),
 * or call {@link Watch.next}. It belongs to the thread that opened it. The process stays alive
 * while a consumer waits for a change, not because a watch is open; an abandoned watch is closed
 * when collected.
 *
 * The store has one watcher thread per process, whatever the number of watches and agents; a
 * consumer that falls behind costs at most `maxPending` queued changes.
 */
export class Watch<State extends Record<string, unknown> = Record<string, unknown>>
  implements AsyncIterableIterator<WatchChange<State>>, AsyncDisposable {
  private constructor();
  /**
   * The next change, waiting for one: `{done: true}` once the watch is closed (queued changes
   * are dropped then).
   *
   * @throws the watch's store failed for good (its error, once; then `{done: true}`). Failures
   *   that pass (a server restarting) are retried by the watcher and caught up after.
   */
  next(): Promise<IteratorResult<WatchChange<State>, undefined>>;
  /** Closes the watch; a `break` out of `for await` calls it. */
  return(): Promise<IteratorResult<WatchChange<State>, undefined>>;
  [Symbol.asyncIterator](): this;
  /**
   * Follows one more agent, from after version `since` (default: from its version now). A watch
   * by `ids` only.
   *
   * @throws {InvalidArgumentError} a watch by prefix, or an invalid id.
   * @throws {BadHandleError} the watch is closed.
   */
  add(agentId: string, since?: number | bigint | null): Promise<void>;
  /**
   * Stops following an agent (its changes already queued are still delivered).
   *
   * @throws {BadHandleError} the watch is closed.
   */
  remove(agentId: string): Promise<void>;
  /** Closes the watch: a waiting `next()` resolves `{done: true}`. Closing again resolves at once. */
  close(): Promise<void>;
  /** `await using w = await watch(...)` closes it at the end of the block. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Watches the agents of the store at `location` (a file or a postgresql:// URI) and resolves
 * once their versions are read: every change committed after that is delivered. Never creates a
 * store.
 *
 * @throws {InvalidArgumentError} bad options (both `ids` and `prefix`, an invalid id, a
 *   `maxPending` of 0, an in-memory store).
 * @throws {StorageError} no store there.
 * @throws {UnavailableError} / {AuthError} / {BusyError} / {CallCancelledError}
 */
export function watch<State extends Record<string, unknown> = Record<string, unknown>>(
  location: string,
  options?: WatchOptions,
): Promise<Watch<State>>;

// ------------------------------------------------------------------------------ errors

/**
 * The base of the library's errors: one class per status of the C ABI, with the same names and
 * codes as the other bindings. `status` is the status number, `code` its name.
 */
export class AgentError extends Error {
  constructor(message?: string, options?: ErrorOptions);
  /** The C ABI's status number (e.g. 9 for a conflict). */
  readonly status: number;
  /** The status's name, e.g. `"AGENT_ERR_CONFLICT"`. */
  readonly code: string;
}

/** A missing or ill-typed argument or option, or a patch or state that is not an object (status 1). */
export class InvalidArgumentError extends AgentError {
  static readonly status: 1;
  static readonly code: 'AGENT_ERR_INVALID_ARGUMENT';
  readonly status: 1;
  readonly code: 'AGENT_ERR_INVALID_ARGUMENT';
}

/** The agent is closed, or was never opened (status 2). */
export class BadHandleError extends AgentError {
  static readonly status: 2;
  static readonly code: 'AGENT_ERR_BAD_HANDLE';
  readonly status: 2;
  readonly code: 'AGENT_ERR_BAD_HANDLE';
}

/** Input that is not well-formed JSON (status 3). */
export class JSONError extends AgentError {
  static readonly status: 3;
  static readonly code: 'AGENT_ERR_JSON';
  readonly status: 3;
  readonly code: 'AGENT_ERR_JSON';
}

/** A value the storage codec refuses; the message names its path (status 4). Nothing written. */
export class CodecError extends AgentError {
  static readonly status: 4;
  static readonly code: 'AGENT_ERR_CODEC';
  readonly status: 4;
  readonly code: 'AGENT_ERR_CODEC';
}

/** The input, or the state a change would produce, is over the size cap (status 5). Nothing written. */
export class StateTooLargeError extends AgentError {
  static readonly status: 5;
  static readonly code: 'AGENT_ERR_TOO_LARGE';
  readonly status: 5;
  readonly code: 'AGENT_ERR_TOO_LARGE';
}

/** The store failed: I/O, a full disk, a read-only or foreign store, a server's error (status 6). */
export class StorageError extends AgentError {
  static readonly status: 6;
  static readonly code: 'AGENT_ERR_STORAGE';
  readonly status: 6;
  readonly code: 'AGENT_ERR_STORAGE';
}

/** Another connection held what the call needs for longer than busyTimeoutMs (status 7). */
export class BusyError extends AgentError {
  static readonly status: 7;
  static readonly code: 'AGENT_ERR_BUSY';
  readonly status: 7;
  readonly code: 'AGENT_ERR_BUSY';
}

/** A hook threw; the change is committed all the same (status 8). `cause` is what it threw. */
export class HookError extends AgentError {
  static readonly status: 8;
  static readonly code: 'AGENT_ERR_HOOK';
  readonly status: 8;
  readonly code: 'AGENT_ERR_HOOK';
}

/** A compare-and-set found another version than expected (status 9). Nothing written. */
export class ConflictError extends AgentError {
  static readonly status: 9;
  static readonly code: 'AGENT_ERR_CONFLICT';
  readonly status: 9;
  readonly code: 'AGENT_ERR_CONFLICT';
  /** The version the call expected. */
  readonly expected: number;
  /** The version the state was at. */
  readonly actual: number;
}

/** The validator rejected the change (status 10). Nothing written. */
export class RejectedError extends AgentError {
  static readonly status: 10;
  static readonly code: 'AGENT_ERR_REJECTED';
  readonly status: 10;
  readonly code: 'AGENT_ERR_REJECTED';
}

/** The change log no longer holds the changes asked for (status 11). */
export class GapError extends AgentError {
  static readonly status: 11;
  static readonly code: 'AGENT_ERR_GAP';
  readonly status: 11;
  readonly code: 'AGENT_ERR_GAP';
  /** The first of the versions whose changes are missing. */
  readonly first: number;
  /** The last of the versions whose changes are missing. */
  readonly last: number;
}

/**
 * The server could not be reached or stopped answering (status 12); the call had no effect
 * unless the message says a commit's outcome is unknown.
 */
export class UnavailableError extends AgentError {
  static readonly status: 12;
  static readonly code: 'AGENT_ERR_UNAVAILABLE';
  readonly status: 12;
  readonly code: 'AGENT_ERR_UNAVAILABLE';
}

/** The connection could not be secured or authenticated (status 13). */
export class AuthError extends AgentError {
  static readonly status: 13;
  static readonly code: 'AGENT_ERR_AUTH';
  readonly status: 13;
  readonly code: 'AGENT_ERR_AUTH';
}

/** The call's AbortSignal aborted (status 14). Nothing written. */
export class CallCancelledError extends AgentError {
  static readonly status: 14;
  static readonly code: 'AGENT_ERR_CANCELLED';
  readonly status: 14;
  readonly code: 'AGENT_ERR_CANCELLED';
}

/**
 * The state is stored under a newer schema version than this agent declares (status 15): a
 * newer program wrote it. Every read and write fails, nothing written; open with `readOnly` to
 * read it as stored.
 */
export class NewerSchemaError extends AgentError {
  static readonly status: 15;
  static readonly code: 'AGENT_ERR_NEWER_SCHEMA';
  readonly status: 15;
  readonly code: 'AGENT_ERR_NEWER_SCHEMA';
  /** The schema version the state is stored under. */
  readonly stored: number;
  /** The schema version this agent declares. */
  readonly declared: number;
}

/**
 * Upgrading a stored state to the agent's schema version failed (status 16): a step threw, is
 * missing, or its result was refused (codec, size cap, validator). The message names the step
 * (`schema step 1 -> 2: ...`); the stored state is unchanged.
 */
export class MigrationError extends AgentError {
  static readonly status: 16;
  static readonly code: 'AGENT_ERR_MIGRATION';
  readonly status: 16;
  readonly code: 'AGENT_ERR_MIGRATION';
  /** The schema version of the step that failed (it upgrades `stepFrom` to `stepFrom + 1`). */
  readonly stepFrom: number;
}

/**
 * A JSON Pointer names nothing in the state (status 17): {@link Agent.getPath} and
 * {@link Agent.getTail} of a member that does not exist or an index out of range, or a
 * {@link Agent.patchState} operation whose `path` (or `from`) does not exist, or a `move` into
 * its own child. Nothing was written.
 */
export class PathError extends AgentError {
  static readonly status: 17;
  static readonly code: 'AGENT_ERR_PATH';
  readonly status: 17;
  readonly code: 'AGENT_ERR_PATH';
  /** The failing operation's index in the patch (from 0); `null` for a read. */
  readonly operation: number | null;
  /**
   * The pointer as written: the operation's `path` (when its `from` is what is missing, the
   * message says so), or the read's pointer.
   */
  readonly path: string;
}

/**
 * A `test` operation of a JSON Patch found another value than the one it names (status 18):
 * the patch's own compare-and-set said no, and nothing was written.
 */
export class TestFailedError extends AgentError {
  static readonly status: 18;
  static readonly code: 'AGENT_ERR_TEST_FAILED';
  readonly status: 18;
  readonly code: 'AGENT_ERR_TEST_FAILED';
  /** The `test` operation's index in the patch (from 0). */
  readonly operation: number;
  /** The pointer it tested. */
  readonly path: string;
}

/** A bug in the library, caught at its boundary (status 99); the agent may still be used. */
export class PanicError extends AgentError {
  static readonly status: 99;
  static readonly code: 'AGENT_ERR_PANIC';
  readonly status: 99;
  readonly code: 'AGENT_ERR_PANIC';
}
