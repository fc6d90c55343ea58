// Types of @agent-state/client (src/index.js). The wire format is
// crates/agent-state-serve/PROTOCOL.md.

/** A JSON value, as JSON.parse returns it. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [member: string]: JsonValue };

/** A JSON object. */
export type JsonObject = { [member: string]: JsonValue };

/** The whole state; `version` may be any version (a client replaces its copy). */
export interface SnapshotMessage {
  readonly type: "snapshot";
  readonly version: number;
  readonly state: JsonValue;
}

/** An RFC 7396 merge patch; `version` is the previous message's plus one. */
export interface PatchMessage {
  readonly type: "patch";
  readonly version: number;
  readonly patch: JsonValue;
}

/** One RFC 6902 operation. */
export type JsonPatchOperation =
  | { readonly op: "add" | "replace" | "test"; readonly path: string; readonly value: JsonValue }
  | { readonly op: "remove"; readonly path: string }
  | { readonly op: "move" | "copy"; readonly from: string; readonly path: string };

/** An RFC 6902 JSON Patch, its operations in order; `version` is the previous message's plus one. */
export interface JsonPatchMessage {
  readonly type: "json_patch";
  readonly version: number;
  readonly ops: readonly JsonPatchOperation[];
}

/** A replacement of the whole state; `version` is the previous message's plus one. */
export interface ReplaceMessage {
  readonly type: "replace";
  readonly version: number;
  readonly state: JsonValue;
}

/**
 * Every `interval_ms` (30 s unless the server was started with another `--ping-interval`);
 * `version` is the last version sent. watch() only uses it to tell a live stream: three
 * intervals without a message are a dead one.
 */
export interface PingMessage {
  readonly type: "ping";
  readonly version: number;
  readonly interval_ms: number;
}

/** Every message of the watch stream. */
export type WatchMessage = SnapshotMessage | PatchMessage | JsonPatchMessage | ReplaceMessage | PingMessage;

/** The messages that change the state: the ones onState receives. */
export type StateMessage = SnapshotMessage | PatchMessage | JsonPatchMessage | ReplaceMessage;

/** A JSON value deeply read-only, as watch() hands it out (it is frozen at run time too). */
export type ReadonlyJson =
  | null
  | boolean
  | number
  | string
  | readonly ReadonlyJson[]
  | { readonly [member: string]: ReadonlyJson };

/** What went wrong; watch() reconnects after every one of them (until stop()). */
export type WatchErrorCode =
  /** The server closed an open stream: 4001 (fell behind), 1011 (store failed), 1001 (stopping), ... */
  | "closed"
  /** A patch or replace whose version is not the previous one plus one. */
  | "version_gap"
  /**
   * A frame that is not a valid message (not JSON, no version, a patch before any snapshot), or
   * a JSON Patch that does not apply to the copy (`cause` is the JsonPatchError; the next
   * connection asks for a snapshot).
   */
  | "bad_message"
  /** The connection was not established (a refused upgrade: 401, 404, 400; the server down). */
  | "connect_failed"
  /** Three ping intervals without any message (90 s at the server's default): the stream is taken as dead. */
  | "timeout";

export interface WatchErrorBase extends Error {
  readonly name: "WatchError";
}

export interface WatchClosedError extends WatchErrorBase {
  readonly code: "closed";
  /** The WebSocket close code (4001, 1011, 1001, 1006, ...). */
  readonly closeCode: number;
  readonly reason: string;
}

export interface WatchConnectError extends WatchErrorBase {
  readonly code: "connect_failed";
  /** The close code when the socket closed before opening (a browser says only 1006). */
  readonly closeCode?: number;
  readonly reason?: string;
  /** What the WebSocket constructor threw, when it threw. */
  readonly cause?: unknown;
}

export interface WatchGapError extends WatchErrorBase {
  readonly code: "version_gap";
  /** The version that should have come (the copy's plus one). */
  readonly expected: number;
  /** The version that came. */
  readonly got: number;
}

export interface WatchOtherError extends WatchErrorBase {
  readonly code: "bad_message" | "timeout";
  /** For a JSON Patch that did not apply to the copy: why. */
  readonly cause?: JsonPatchError;
}

/** Why applyJsonPatch refused: an `Error` named "JsonPatchError". */
export interface JsonPatchError extends Error {
  readonly name: "JsonPatchError";
  /**
   * "malformed": not an array of operations (an unknown op, a member missing, a pointer that
   * does not parse); "no_such_path": a path or `from` the document does not have (an index out
   * of range, a move into its own child, removing the whole document); "test_failed": a `test`
   * whose value is not the document's.
   */
  readonly code: "malformed" | "no_such_path" | "test_failed";
  /** The failing operation's index in the patch (from 0); undefined when the patch is not an array. */
  readonly index: number | undefined;
}

/** The errors passed to onError: `Error`s with a string `code`. */
export type WatchError = WatchClosedError | WatchConnectError | WatchGapError | WatchOtherError;

/** The subset of the standard WebSocket that watch() uses. */
export interface WebSocketLike {
  addEventListener(type: "open", listener: (event: unknown) => void): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
  addEventListener(type: "close", listener: (event: { code: number; reason: string }) => void): void;
  close(code?: number, reason?: string): void;
}

export interface WatchOptions {
  /** The server's token, sent as the access_token query parameter. */
  token?: string;
  /**
   * Called with the new whole state after every snapshot, patch, json_patch and replace.
   * `state` and `message` are deeply frozen: treat them as read-only (a mutation throws in
   * strict mode).
   */
  onState?: (state: ReadonlyJson, version: number, message: Readonly<StateMessage>) => void;
  /** Called for every interruption; watch() reconnects by itself afterwards. */
  onError?: (error: WatchError) => void;
  /** The WebSocket constructor; default globalThis.WebSocket (Node 20: --experimental-websocket). */
  WebSocket?: new (url: string) => WebSocketLike;
  /** Resume from this version instead of starting with a snapshot; needs `state`. */
  since?: number;
  /** The state at version `since` (copied, not kept). Only with `since`. */
  state?: JsonValue;
}

export interface WatchHandle {
  /** Closes the socket and cancels every timer; no callback runs afterwards. */
  stop(): void;
  /** The local copy (undefined until the first snapshot). */
  readonly state: ReadonlyJson | undefined;
  /** The copy's version (undefined until the first snapshot). */
  readonly version: number | undefined;
  /** Whether a WebSocket is open right now. */
  readonly connected: boolean;
}

/**
 * RFC 7396 JSON Merge Patch: `patch` applied to `target`, as a new value; neither input is
 * modified (untouched members are shared). Existing members keep their place, new ones are
 * appended.
 */
export function applyMergePatch(target: JsonValue | undefined, patch: JsonValue): JsonValue;

/**
 * RFC 6902 JSON Patch: `ops` applied in order to `target`, as a new value; neither input is
 * modified (untouched parts are shared). All or nothing: throws a JsonPatchError when an
 * operation cannot apply. A replaced member keeps its place, new ones are appended, as the
 * server's library orders them.
 */
export function applyJsonPatch(target: JsonValue, ops: readonly JsonPatchOperation[] | JsonValue): JsonValue;

/**
 * Follows one agent's state: `WS {url}/v1/agents/{encodeURIComponent(agentId)}/watch`.
 * `url` is the server's base (http, https, ws or wss; a path prefix is kept).
 * Throws a TypeError when there is no WebSocket or an argument is malformed.
 */
export function watch(url: string | URL, agentId: string, options?: WatchOptions): WatchHandle;
