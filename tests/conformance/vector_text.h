/*
 * The parts of the vector format (tests/conformance/README.md) that the C and C++ runners
 * share: building the bytes of an input or an expected output, reading which runners and
 * backends a vector is for, and the backend of this run with its store ids.
 */
#ifndef CONFORMANCE_VECTOR_TEXT_H
#define CONFORMANCE_VECTOR_TEXT_H

#include "json_reader.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The bytes of `op`'s input: "input" (a JSON value, compacted), "input_text" (a string, or
 * pieces: strings and [string, count] pairs, concatenated) or "input_hex". Malloc'ed,
 * NUL-terminated; NULL when the op has none. */
char *vt_input(const JrNode *op, size_t *out_len);

/* The expected text of `field` in `obj`: `field` as a JSON value (compacted), or
 * `field`_text as text or pieces. Malloc'ed; NULL when neither is there. */
char *vt_expected(const JrNode *obj, const char *field, size_t *out_len);

/* True when `vector` has no "runners" list or names `runner` in it. */
int vt_runs_here(const JrNode *vector, const char *runner);

/* The backend this run tests (tests/conformance/README.md, "Where the stores live"):
 * AGENT_STATE_TEST_BACKEND unset or "sqlite" gives "sqlite"; "postgres" gives "postgres" and
 * puts AGENT_STATE_TEST_PG_URI in *pg_uri (it must be set). Anything else: NULL, with the
 * reason in why. */
const char *vt_backend(const char **pg_uri, char *why, size_t why_len);

/* True when `vector` has no "backends" list or names `backend` in it. */
int vt_backend_ok(const JrNode *vector, const char *backend);

/* A fresh agent_id for a PostgreSQL store: "<runner>_<pid>_<start time>_<n>", unique among
 * the runners and processes that share one database, also across runs on a kept server. */
void vt_agent_id(const char *runner, char *out, size_t cap);

/* `options` (the compact JSON text of the open options, NULL for none) with the member
 * "agent_id": `agent_id` added: `{"agent_id":"<id>", ...the vector's members}`. The id must
 * need no escaping (vt_agent_id's do not). Options that are not an object are returned as
 * they are (the library refuses them whatever the backend). Malloc'ed; NULL when out of
 * memory. */
char *vt_with_agent_id(const char *options, const char *agent_id);

#ifdef __cplusplus
}
#endif

#endif
