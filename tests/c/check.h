/*
 * The C suite's shared part: the check macros and counters (check.c), the store and text
 * helpers with the choice of backend (support.c), and the hook fixtures (fixtures.c). Every file
 * of the suite includes this header first: it defines _GNU_SOURCE before any system header, and
 * includes the headers the tests use. main.c runs the tests (tests.h lists them).
 */
#ifndef AGENT_STATE_TEST_CHECK_H
#define AGENT_STATE_TEST_CHECK_H

#define _GNU_SOURCE

#include "agent_state.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Checks (check.c)                                                                           */
/* ------------------------------------------------------------------------------------------ */

extern int g_passed, g_failed;
extern const char *g_test; /* the running test's name, in failure messages */
extern int g_quick;        /* AGENT_TEST_QUICK: fewer iterations (valgrind) */

/* Counts one check; on failure prints file:line, the running test and the message. */
int check_(int ok, const char *file, int line, const char *fmt, ...);

#define CHECK(expr) check_((expr) != 0, __FILE__, __LINE__, "%s", #expr)

/* `call` must return status `want`; on failure shows both names and the last error. */
#define CHECK_STATUS(want, call) check_status_((call), (want), __FILE__, __LINE__, #call)

int check_status_(AgentStatus got, AgentStatus want, const char *file, int line,
                  const char *call);

/* A buffer holds exactly `text` (compact JSON), NUL-terminated at data[len]. */
int buf_is(const AgentBuffer *b, const char *text);
int buf_is_empty(const AgentBuffer *b);

#define CHECK_BUF(buf, text) \
    check_(buf_is(&(buf), (text)), __FILE__, __LINE__, "%s is %.*s, expected %s", #buf, \
           (buf).data ? (int)(buf).len : 6, (buf).data ? (const char *)(buf).data : "(NULL)", (text))

#define CHECK_EMPTY(buf) \
    check_(buf_is_empty(&(buf)), __FILE__, __LINE__, "%s is not the empty buffer {NULL,0,NULL}", #buf)

/* The message of the last failed call on this thread starts with "<function>: ". */
#define CHECK_LAST_ERROR_FROM(fn) check_last_error_from_((fn), __FILE__, __LINE__)

int check_last_error_from_(const char *fn, const char *file, int line);

/* The last error holds `text` (a validator's message). */
#define CHECK_LAST_ERROR_HAS(text) \
    check_(strstr(agent_last_error(), (text)) != NULL, __FILE__, __LINE__, \
           "last error \"%s\" does not contain \"%s\"", agent_last_error(), (text))

#define CHECK_STATE(h, text) check_state_((h), (text), __FILE__, __LINE__)

int check_state_(AgentHandle h, const char *text, const char *file, int line);

/* agent_set_state(patch) succeeds and returns `text` as the full state, which get also shows. */
#define CHECK_SET(h, patch, text) check_write_((h), 0, (patch), (text), __FILE__, __LINE__)
#define CHECK_REPLACE(h, next, text) check_write_((h), 1, (next), (text), __FILE__, __LINE__)

int check_write_(AgentHandle h, int replace, const char *in, const char *text, const char *file,
                 int line);

/*
 * Both agent_set_state and agent_replace_state refuse the `len` bytes at `in` with status
 * `want`: the output buffer is left empty, the last error names the function, and the state
 * is the same as before (nothing was written).
 */
#define CHECK_REJECTED(h, want, in, len) \
    check_rejected_((h), 2, (want), (const uint8_t *)(in), (len), __FILE__, __LINE__, #in)
#define CHECK_REJECTED_S(h, want, in) CHECK_REJECTED((h), (want), (in), strlen(in))
/* The same for agent_set_state only (for patches that are refused only as merges). */
#define CHECK_PATCH_REJECTED_S(h, want, in) \
    check_rejected_((h), 1, (want), (const uint8_t *)(in), strlen(in), __FILE__, __LINE__, #in)

void check_rejected_(AgentHandle h, int ops, AgentStatus want, const uint8_t *in, size_t len,
                     const char *file, int line, const char *what);

/* agent_open(path, options) fails with `want`, leaves *out 0 and names itself in the error. */
#define CHECK_OPEN_FAILS(want, path, options) check_open_fails_((want), (path), (options), __FILE__, __LINE__)

void check_open_fails_(AgentStatus want, const char *path, const char *options, const char *file,
                       int line);

/* agent_get_state_versioned gives `text` and `version` together. */
#define CHECK_VERSIONED(h, text, version) \
    check_versioned_((h), (text), (version), __FILE__, __LINE__)

int check_versioned_(AgentHandle h, const char *text, uint64_t version, const char *file,
                     int line);

/* The state is exactly `before` (the bytes of an earlier state_copy) at version `version`. */
#define CHECK_UNCHANGED(h, before, version) \
    check_unchanged_((h), (before), (version), __FILE__, __LINE__)

void check_unchanged_(AgentHandle h, const char *before, uint64_t version, const char *file,
                      int line);

/* ------------------------------------------------------------------------------------------ */
/* Helpers and the backend (support.c)                                                        */
/* ------------------------------------------------------------------------------------------ */

/* This run's temporary directory (mkdtemp'd by main from its template). */
extern char g_dir[];
/* AGENT_STATE_TEST_BACKEND=postgres: the server's URI and this run's agent_id prefix. */
extern int g_pg;
extern const char *g_pg_uri;
extern char g_agent_prefix[64];

/* "<temp dir>/<name>", in one of a few rotating static buffers (main thread only). */
const char *tmp_path(const char *name);
int file_exists(const char *path);
/* The last error, worth showing only after a failed call. */
const char *error_if_failed(AgentStatus rc);
/* A non-empty output buffer not owned by the library (a failing call must empty it). */
AgentBuffer junk_buffer(void);
AgentStatus set_s(AgentHandle h, const char *patch, AgentBuffer *out);
AgentStatus replace_s(AgentHandle h, const char *next, AgentBuffer *out);
AgentStatus set_if_s(AgentHandle h, uint64_t expected, const char *patch, AgentBuffer *out,
                     uint64_t *out_version);
AgentStatus replace_if_s(AgentHandle h, uint64_t expected, const char *next, AgentBuffer *out,
                         uint64_t *out_version);
char *dup_bytes(const uint8_t *p, size_t n);
/* The current state as a malloc'd string, or NULL when get_state fails. */
char *state_copy(AgentHandle h);
/* agent_open on this run's backend (support.c says how a path maps to a PostgreSQL agent). */
AgentStatus store_open(const char *path, const char *options, AgentHandle *out);
AgentHandle open_at(const char *path, const char *options);
AgentHandle open_store(const char *name, const char *options);
/* Reads integer member "key" of a flat JSON object text; 0 when absent. */
long member_int(const char *json, size_t len, const char *key);
/* A malloc'd JSON object nested `levels` deep ({"a":{"a":{}}}, or {"a":[[]]} with `arrays`). */
char *nested_document(int levels, int arrays);
int write_file(const char *path, const void *data, size_t n);
/* Reads a whole file (at most `cap` bytes) into `buf`; returns its size or -1. */
long read_file(const char *path, void *buf, size_t cap);
void sleep_ms(long ms);
/* A free_user_data that counts its calls in the int it is given. */
void count_free(void *user_data);

/* ------------------------------------------------------------------------------------------ */
/* Hook fixtures (fixtures.c)                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* An on_state_changed hook's memory of what it saw. */
typedef struct {
    pthread_mutex_t mu;
    int calls;
    int freed;         /* calls of recorder_free */
    int32_t rc;        /* what the hook returns */
    int chain_breaks;  /* deliveries whose prev differs from the previous delivery's next */
    int bad_views;     /* views not NUL-terminated, or patch/patch_len inconsistent */
    char *next;        /* copies of the last delivery */
    char *prev;
    char *patch;       /* NULL when the delivery had a NULL patch */
    char *log;         /* optional: append "<name>:<next>;" per delivery */
    const char *name;
    uint64_t version;  /* AgentStateChange.version of the last delivery */
    int version_breaks; /* deliveries whose version is not the previous delivery's plus one */
} Recorder;

void recorder_init(Recorder *r, const char *name);
void recorder_destroy(Recorder *r);

extern char g_log[4096]; /* order of events, for the ordering tests (one thread) */

void log_event(const char *fmt, ...);
int views_ok(const AgentStateChange *c);
int32_t record_hook(void *user_data, const AgentStateChange *c);
void recorder_free(void *user_data);
uint64_t add_recorder(AgentHandle h, Recorder *r);

/* An initial-state hook with a fixed answer. */
typedef struct {
    const char *answer; /* JSON text handed back (NULL: leave *out empty) */
    int use_copy;       /* 1: via agent_buffer_copy; 0: pointer to static text, owner NULL */
    int32_t rc;         /* what the hook returns */
    int calls;
    int freed;
} InitHook;

int32_t init_hook(void *user_data, AgentBuffer *out);
void init_hook_free(void *user_data);
int32_t noop_hook(void *user_data, const AgentStateChange *c);

/* A validation gate: rejects a change whose next state contains `reject_if`. */
typedef struct {
    const char *reject_if; /* NULL: accept every change */
    const char *message;   /* handed back with agent_buffer_copy when rejecting (NULL: none) */
    int message_always;    /* 1: also fill *message when accepting (the library must drop it) */
    int32_t rc;            /* returned when rejecting */
    int calls;
    int freed;
    int bad_views;
    uint64_t version;      /* change->version of the last call */
    char *next, *prev, *patch; /* copies of the last call's views (patch NULL for NULL) */
    AgentHandle self;      /* not 0: call this (own) handle from inside, recording statuses */
    AgentHandle other;     /* not 0: read this other handle from inside */
    AgentStatus self_get_rc, self_get_versioned_rc, self_set_rc, self_set_if_rc,
        self_replace_rc, self_gate_rc, self_hook_rc, self_close_rc, self_poll_rc,
        self_restore_rc, other_get_rc;
} Gate;

void gate_init(Gate *g, const char *reject_if, const char *message, int32_t rc);
void gate_destroy(Gate *g);
int32_t gate_fn(void *user_data, const AgentStateChange *c, AgentBuffer *message);
void gate_free(void *user_data);

#endif
