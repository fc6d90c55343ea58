// agent_state.hpp: header-only C++17 wrapper of the agent_state C library.
//
// One persistent, transactional JSON state value per agent, stored in an SQLite file or on a
// PostgreSQL server (a `postgresql://` URI as the path, with Options::agent_id):
// `get_state()` reads it, `set_state(patch)` merges an RFC 7396 merge patch into it,
// `replace_state(next)` replaces it, `patch_state(operations)` applies an RFC 6902 JSON Patch
// (appends with `/messages/-`), `get_path(pointer)` and `get_tail(pointer, n)` read one place
// by JSON Pointer, and hooks observe every committed change. Every commit
// gives the state the next version: `get_state_versioned()` and `set_state_if(expected, patch)`
// make read-modify-write loops that never overwrite another writer's change, `set_validator()`
// gates changes before they commit, and the opt-in change log (Options::change_log) feeds
// `poll()`, `changes_since()`, `state_at()` and `restore()`. Options::schema_version and
// schema steps (Options::schema_steps, `set_schema_step()`) upgrade states written by older
// code on first touch. The free functions
// `list_agents()`, `delete_agent()` and `expire_agents()` manage a store's agents.
//
// Usage: compile with `-std=c++17` (or later), put both this directory (this header and its
// parts in `agent_state/`) and the C header's directory (`include/`) on the include path, and
// link with `-lagent_state -lpthread`.
//
//     agent_state::Options options;
//     options.initial_state = R"({"status":"idle"})";
//     agent_state::Agent agent("conversation.db", options);
//     agent.set_state(R"({"status":"processing"})");  // returns the merged state as JSON text
//
// Conventions:
// - All state, patches and options are JSON text (UTF-8). The wrapper does not parse JSON: the
//   library parses and validates every input and every answer (but one: the list of agents of
//   list_agents() and expire_agents(), a fixed shape read into AgentInfo structs by a small
//   reader in agent_state/store.hpp). Before text reaches the library
//   the wrapper only checks it: for NUL bytes (text passed as a C string), and in
//   Options::to_json() that `initial_state` is exactly one JSON value (a scan of its strings
//   and brackets, not a parse, so that it cannot inject other options) and that `agent_id` is
//   UTF-8 (agent_state/text.hpp). Outputs are compact JSON text with the members in their
//   stored order.
// - Every failure is reported by throwing agent_state::Error (status + message), except that an
//   exception thrown by one of your hooks is rethrown as is (see Agent::on_state_changed). An
//   exception thrown by your validator rejects the change: the call throws
//   Error(Status::rejected) with the validator's exception nested in it (see
//   Agent::set_validator).
// - Thread-safety: one Agent may be used from many threads at once (all member functions but
//   the move operations and the destructor); the C library serializes the calls. Moving or
//   destroying an Agent while another thread uses it is a data race, as for any C++ object.

// The wrapper is this header and its parts, one concept each; this header includes them all,
// and the parts include what they need of each other:
//   agent_state/status.hpp   Status, status_name(), version(), Error
//   agent_state/text.hpp     json_quote() and the checks of text before the C library sees it
//   agent_state/buffer.hpp   Buffer
//   agent_state/options.hpp  Synchronous, ChangeLog, Options
//   agent_state/hooks.hpp    the hook types, Change, ChangeKind, SchemaStepFn, their C
//                            trampolines, Subscription
//   agent_state/agent.hpp    Agent, Versioned, StoredState
//   agent_state/cancel.hpp   Cancel, Cancel::Scope (cancelling one call)
//   agent_state/store.hpp    AgentInfo, list_agents(), delete_agent(), expire_agents()

#ifndef AGENT_STATE_HPP
#define AGENT_STATE_HPP

#include "agent_state/status.hpp"
#include "agent_state/text.hpp"
#include "agent_state/buffer.hpp"
#include "agent_state/options.hpp"
#include "agent_state/hooks.hpp"
#include "agent_state/agent.hpp"
#include "agent_state/cancel.hpp"
#include "agent_state/store.hpp"

#endif  // AGENT_STATE_HPP
