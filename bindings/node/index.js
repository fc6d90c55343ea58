'use strict';
// agent-state for Node.js: one persistent, transactional state per agent, in a SQLite file or
// PostgreSQL, with the reference's API (getState, setState, replaceState, initialState,
// onStateChanged). See README.md.
const { Agent, openAgent, listAgents, deleteAgent, expireAgents } = require('./lib/agent');
const errors = require('./lib/errors');
const codec = require('./lib/codec');

module.exports = {
  Agent,
  openAgent,
  listAgents,
  deleteAgent,
  expireAgents,
  encodeState: codec.encode,
  decodeState: codec.decode,
  AgentError: errors.AgentError,
  InvalidArgumentError: errors.InvalidArgumentError,
  BadHandleError: errors.BadHandleError,
  JSONError: errors.JSONError,
  CodecError: errors.CodecError,
  StateTooLargeError: errors.StateTooLargeError,
  StorageError: errors.StorageError,
  BusyError: errors.BusyError,
  HookError: errors.HookError,
  ConflictError: errors.ConflictError,
  RejectedError: errors.RejectedError,
  GapError: errors.GapError,
  UnavailableError: errors.UnavailableError,
  AuthError: errors.AuthError,
  CallCancelledError: errors.CallCancelledError,
  PanicError: errors.PanicError,
};
