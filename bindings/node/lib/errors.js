'use strict';
// The error classes, one per status of the C ABI, with the same codes and names as the other
// bindings (Python's agent_state.errors). test/surface.test.js checks them against
// include/agent_state_surface.json, which the library generates.

class AgentError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

function kind(name, status, code, extra) {
  const cls = { [name]: class extends AgentError {} }[name];
  cls.status = status;
  cls.code = code;
  Object.defineProperty(cls.prototype, 'status', { value: status });
  Object.defineProperty(cls.prototype, 'code', { value: code });
  if (extra) extra(cls);
  return cls;
}

const InvalidArgumentError = kind('InvalidArgumentError', 1, 'AGENT_ERR_INVALID_ARGUMENT');
const BadHandleError = kind('BadHandleError', 2, 'AGENT_ERR_BAD_HANDLE');
const JSONError = kind('JSONError', 3, 'AGENT_ERR_JSON');
const CodecError = kind('CodecError', 4, 'AGENT_ERR_CODEC');
const StateTooLargeError = kind('StateTooLargeError', 5, 'AGENT_ERR_TOO_LARGE');
const StorageError = kind('StorageError', 6, 'AGENT_ERR_STORAGE');
const BusyError = kind('BusyError', 7, 'AGENT_ERR_BUSY');
const HookError = kind('HookError', 8, 'AGENT_ERR_HOOK');
const ConflictError = kind('ConflictError', 9, 'AGENT_ERR_CONFLICT');
const RejectedError = kind('RejectedError', 10, 'AGENT_ERR_REJECTED');
const GapError = kind('GapError', 11, 'AGENT_ERR_GAP');
const UnavailableError = kind('UnavailableError', 12, 'AGENT_ERR_UNAVAILABLE');
const AuthError = kind('AuthError', 13, 'AGENT_ERR_AUTH');
const CallCancelledError = kind('CallCancelledError', 14, 'AGENT_ERR_CANCELLED');
const NewerSchemaError = kind('NewerSchemaError', 15, 'AGENT_ERR_NEWER_SCHEMA');
const MigrationError = kind('MigrationError', 16, 'AGENT_ERR_MIGRATION');
// A JSON Pointer that names nothing (getPath, getTail, a patchState operation's path or from),
// and a JSON Patch `test` that found another value. Both carry `operation` (the operation's
// index in the patch, from 0; null for a read) and `path` (the operation's path, or the read's
// pointer, as written).
const PathError = kind('PathError', 17, 'AGENT_ERR_PATH');
const TestFailedError = kind('TestFailedError', 18, 'AGENT_ERR_TEST_FAILED');
const PanicError = kind('PanicError', 99, 'AGENT_ERR_PANIC');

const BY_STATUS = new Map(
  [InvalidArgumentError, BadHandleError, JSONError, CodecError, StateTooLargeError, StorageError,
    BusyError, HookError, ConflictError, RejectedError, GapError, UnavailableError, AuthError,
    CallCancelledError, NewerSchemaError, MigrationError, PathError, TestFailedError,
    PanicError].map((cls) => [cls.status, cls]),
);

// The addon's errors carry "<status>\u0001<message>[\u0001<fields as JSON>]"; anything else
// (a TypeError of the addon's argument checks) passes through unchanged.
function translate(error) {
  if (!(error instanceof Error) || typeof error.message !== 'string') return error;
  const parts = error.message.split('\u0001');
  if (parts.length < 2 || !/^\d+$/.test(parts[0])) return error;
  const status = Number(parts[0]);
  const cls = BY_STATUS.get(status);
  const out = cls ? new cls(parts[1]) : new AgentError(parts[1]);
  if (!cls) {
    // A status this package does not know (a newer library): still a status and a code.
    Object.defineProperty(out, 'status', { value: status });
    Object.defineProperty(out, 'code', { value: `AGENT_ERR_${status}` });
  }
  if (parts.length > 2) Object.assign(out, JSON.parse(parts[2]));
  return out;
}

module.exports = {
  AgentError, InvalidArgumentError, BadHandleError, JSONError, CodecError, StateTooLargeError,
  StorageError, BusyError, HookError, ConflictError, RejectedError, GapError, UnavailableError,
  AuthError, CallCancelledError, NewerSchemaError, MigrationError, PathError, TestFailedError,
  PanicError, BY_STATUS, translate,
};
