'use strict';
// agent-state for Node.js: one persistent, transactional state per agent, in a SQLite file or
// PostgreSQL, with the reference's API (getState, setState, replaceState, initialState,
// onStateChanged). See README.md.
const { Agent, openAgent, listAgents, deleteAgent, expireAgents } = require('./lib/agent');
const { watch, Watch } = require('./lib/watch');
const errors = require('./lib/errors');
const codec = require('./lib/codec');

// Every export is a plain identifier, so that Node's ESM loader (cjs-module-lexer) finds each
// name: `import { Agent, ConflictError } from "agent-state"` works from an ES module too.
const encodeState = codec.encode;
const decodeState = codec.decode;
const {
  AgentError, InvalidArgumentError, BadHandleError, JSONError, CodecError, StateTooLargeError,
  StorageError, BusyError, HookError, ConflictError, RejectedError, GapError, UnavailableError,
  AuthError, CallCancelledError, NewerSchemaError, MigrationError, PathError, TestFailedError,
  PanicError,
} = errors;

module.exports = {
  Agent,
  openAgent,
  listAgents,
  deleteAgent,
  expireAgents,
  watch,
  Watch,
  encodeState,
  decodeState,
  AgentError,
  InvalidArgumentError,
  BadHandleError,
  JSONError,
  CodecError,
  StateTooLargeError,
  StorageError,
  BusyError,
  HookError,
  ConflictError,
  RejectedError,
  GapError,
  UnavailableError,
  AuthError,
  CallCancelledError,
  NewerSchemaError,
  MigrationError,
  PathError,
  TestFailedError,
  PanicError,
};
