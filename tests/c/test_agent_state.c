/*
 * C test suite of agent_state: every behaviour of include/agent_state.h, checked through the
 * C ABI exactly as a C program uses it.
 *
 * Run by `make test-c` (target/c/test_c, no arguments) and `make test-valgrind` (the same binary
 * with AGENT_TEST_QUICK=1, which shrinks the loop counts). Store files live in a fresh mkdtemp
 * directory under /tmp, removed at the end. Exit status is non-zero when any check failed; the
 * last line is "N passed, M failed" (N and M count checks).
 *
 * Layout: the check macros and small helpers first, then one function per behaviour, named for
 * what it proves, then the list of tests and main().
 */
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
/* Checks                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static pthread_mutex_t g_check_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_passed, g_failed;
static const char *g_test = "";
static int g_quick; /* AGENT_TEST_QUICK: fewer iterations (valgrind) */

/* Counts one check; on failure prints file:line, the running test and the message. */
static int check_(int ok, const char *file, int line, const char *fmt, ...)
{
    pthread_mutex_lock(&g_check_mu);
    if (ok) {
        g_passed++;
    } else {
        va_list ap;
        g_failed++;
        fprintf(stderr, "%s:%d: [%s] FAILED: ", file, line, g_test);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
    pthread_mutex_unlock(&g_check_mu);
    return ok;
}

#define CHECK(expr) check_((expr) != 0, __FILE__, __LINE__, "%s", #expr)

/* `call` must return status `want`; on failure shows both names and the last error. */
#define CHECK_STATUS(want, call) check_status_((call), (want), __FILE__, __LINE__, #call)

static int check_status_(AgentStatus got, AgentStatus want, const char *file, int line,
                         const char *call)
{
    return check_(got == want, file, line, "%s returned %s (%d), expected %s (%d); last error: %s",
                  call, agent_status_name(got), (int)got, agent_status_name(want), (int)want,
                  got == AGENT_OK ? "no error" : agent_last_error());
}

/* A buffer holds exactly `text` (compact JSON), NUL-terminated at data[len]. */
static int buf_is(const AgentBuffer *b, const char *text)
{
    size_t n = strlen(text);
    return b->data != NULL && b->len == n && memcmp(b->data, text, n) == 0 && b->data[n] == 0;
}

static int buf_is_empty(const AgentBuffer *b)
{
    return b->data == NULL && b->len == 0 && b->owner == NULL;
}

#define CHECK_BUF(buf, text) \
    check_(buf_is(&(buf), (text)), __FILE__, __LINE__, "%s is %.*s, expected %s", #buf, \
           (buf).data ? (int)(buf).len : 6, (buf).data ? (const char *)(buf).data : "(NULL)", (text))

#define CHECK_EMPTY(buf) \
    check_(buf_is_empty(&(buf)), __FILE__, __LINE__, "%s is not the empty buffer {NULL,0,NULL}", #buf)

/* The message of the last failed call on this thread starts with "<function>: ". */
#define CHECK_LAST_ERROR_FROM(fn) check_last_error_from_((fn), __FILE__, __LINE__)

static int check_last_error_from_(const char *fn, const char *file, int line)
{
    const char *msg = agent_last_error();
    size_t n = strlen(fn);
    return check_(msg != NULL && strncmp(msg, fn, n) == 0 && msg[n] == ':' && strlen(msg) > n + 2,
                  file, line, "last error \"%s\" does not start with \"%s: \"", msg ? msg : "(NULL)",
                  fn);
}

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static char g_dir[] = "/tmp/agent_state_test_XXXXXX";

/* "<temp dir>/<name>", in one of a few rotating static buffers (main thread only). */
static const char *tmp_path(const char *name)
{
    static char bufs[8][512];
    static int next;
    char *p = bufs[next++ % 8];
    snprintf(p, sizeof bufs[0], "%s/%s", g_dir, name);
    return p;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The last error, worth showing only after a failed call. */
static const char *error_if_failed(AgentStatus rc)
{
    return rc == AGENT_OK ? "no error" : agent_last_error();
}

static AgentBuffer junk_buffer(void)
{
    /* A non-empty output buffer not owned by the library: a failing call must overwrite it
     * with the empty buffer (owner NULL, so nothing leaks either way). */
    AgentBuffer b;
    b.data = (const uint8_t *)"junk";
    b.len = 4;
    b.owner = NULL;
    return b;
}

static AgentStatus set_s(AgentHandle h, const char *patch, AgentBuffer *out)
{
    return agent_set_state(h, (const uint8_t *)patch, strlen(patch), out);
}

static AgentStatus replace_s(AgentHandle h, const char *next, AgentBuffer *out)
{
    return agent_replace_state(h, (const uint8_t *)next, strlen(next), out);
}

static AgentStatus set_if_s(AgentHandle h, uint64_t expected, const char *patch, AgentBuffer *out,
                            uint64_t *out_version)
{
    return agent_set_state_if(h, expected, (const uint8_t *)patch, strlen(patch), out, out_version);
}

static AgentStatus replace_if_s(AgentHandle h, uint64_t expected, const char *next,
                                AgentBuffer *out, uint64_t *out_version)
{
    return agent_replace_state_if(h, expected, (const uint8_t *)next, strlen(next), out,
                                  out_version);
}

static char *dup_bytes(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s == NULL) {
        perror("malloc");
        exit(2);
    }
    if (n > 0) {
        memcpy(s, p, n);
    }
    s[n] = 0;
    return s;
}

/* The current state as a malloc'd string, or NULL when get_state fails. */
static char *state_copy(AgentHandle h)
{
    AgentBuffer b = { NULL, 0, NULL };
    char *s = NULL;
    if (agent_get_state(h, &b) == AGENT_OK) {
        s = dup_bytes(b.data, b.len);
    }
    agent_buffer_free(&b);
    return s;
}

#define CHECK_STATE(h, text) check_state_((h), (text), __FILE__, __LINE__)

static int check_state_(AgentHandle h, const char *text, const char *file, int line)
{
    AgentBuffer b = { NULL, 0, NULL };
    AgentStatus rc = agent_get_state(h, &b);
    int ok = check_(rc == AGENT_OK && buf_is(&b, text), file, line,
                    "state is %.*s (status %s, %s), expected %s", b.data ? (int)b.len : 6,
                    b.data ? (const char *)b.data : "(NULL)", agent_status_name(rc),
                    error_if_failed(rc), text);
    agent_buffer_free(&b);
    return ok;
}

/* agent_set_state(patch) succeeds and returns `text` as the full state, which get also shows. */
#define CHECK_SET(h, patch, text) check_write_((h), 0, (patch), (text), __FILE__, __LINE__)
#define CHECK_REPLACE(h, next, text) check_write_((h), 1, (next), (text), __FILE__, __LINE__)

static int check_write_(AgentHandle h, int replace, const char *in, const char *text,
                        const char *file, int line)
{
    AgentBuffer out = { NULL, 0, NULL };
    AgentStatus rc = replace ? replace_s(h, in, &out) : set_s(h, in, &out);
    int ok = check_(rc == AGENT_OK && buf_is(&out, text), file, line,
                    "%s(%s) gave %.*s (status %s, %s), expected %s",
                    replace ? "agent_replace_state" : "agent_set_state", in,
                    out.data ? (int)out.len : 6, out.data ? (const char *)out.data : "(NULL)",
                    agent_status_name(rc), error_if_failed(rc), text);
    agent_buffer_free(&out);
    return ok && check_state_(h, text, file, line);
}

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

static void check_rejected_(AgentHandle h, int ops, AgentStatus want, const uint8_t *in,
                            size_t len, const char *file, int line, const char *what)
{
    char *before = state_copy(h);
    int op;
    for (op = 0; op < ops; op++) {
        const char *fn = op == 0 ? "agent_set_state" : "agent_replace_state";
        AgentBuffer out = junk_buffer();
        AgentStatus rc = op == 0 ? agent_set_state(h, in, len, &out)
                                 : agent_replace_state(h, in, len, &out);
        check_(rc == want, file, line, "%s(%s) returned %s, expected %s; last error: %s", fn,
               what, agent_status_name(rc), agent_status_name(want), error_if_failed(rc));
        check_(buf_is_empty(&out), file, line, "%s(%s) failed but left *out non-empty", fn, what);
        if (rc != AGENT_OK) {
            check_last_error_from_(fn, file, line);
        }
        agent_buffer_free(&out);
    }
    {
        char *after = state_copy(h);
        check_(before != NULL && after != NULL && strcmp(before, after) == 0, file, line,
               "refusing %s changed the state from %s to %s", what, before ? before : "(NULL)",
               after ? after : "(NULL)");
        free(after);
    }
    free(before);
}

/* ---- the backend: where "a store file" lives ------------------------------------------------
 *
 * AGENT_STATE_TEST_BACKEND=postgres (with AGENT_STATE_TEST_PG_URI) runs the tests on a
 * PostgreSQL server: a store path in this run's temporary directory names an agent on the
 * server instead, agent_id "c_<pid>_<start time>_<file name>" (so that opening the same name
 * twice opens the same store, in forked children too), and ":memory:" a fresh agent at each
 * open (private and empty, like an in-memory store). Every open of a test store goes through
 * store_open. Tests about files, paths and :memory: are marked SQLITE_ONLY in k_tests. */
static int g_pg;
static const char *g_pg_uri;
static char g_agent_prefix[64];

/* `options` (NULL or JSON text) with "agent_id": `id` added; non-objects are kept as they are
 * (refused by the library on both backends). Malloc'ed. */
static char *with_agent_id(const char *options, const char *id)
{
    const char *rest = "}";
    size_t cap;
    char *out;
    if (options != NULL) {
        const char *p = options;
        while (*p == ' ') {
            p++;
        }
        if (*p != '{') {
            return strdup(options);
        }
        for (p++; *p == ' '; p++) {
        }
        rest = p;
    }
    cap = strlen(id) + strlen(rest) + 32;
    out = malloc(cap);
    if (out != NULL) {
        snprintf(out, cap, "{\"agent_id\":\"%s\"%s%s", id, *rest == '}' ? "" : ",", rest);
    }
    return out;
}

/* agent_open on this run's backend: on PostgreSQL, `path` in the temporary directory or
 * ":memory:" becomes the server URI and an agent_id (see above); other paths are opened as
 * they are. */
static AgentStatus store_open(const char *path, const char *options, AgentHandle *out)
{
    static unsigned long memory_stores;
    size_t dir_len = strlen(g_dir);
    char id[256], *text;
    AgentStatus rc;
    if (!g_pg || path == NULL) {
        return agent_open(path, options, out);
    }
    if (strcmp(path, ":memory:") == 0) {
        snprintf(id, sizeof id, "%smem_%lu", g_agent_prefix,
                 __atomic_add_fetch(&memory_stores, 1, __ATOMIC_RELAXED));
    } else if (strncmp(path, g_dir, dir_len) == 0 && path[dir_len] == '/') {
        /* the file name, in letters, digits, '.', '-' and '_' (anything else as %XX) */
        const unsigned char *c = (const unsigned char *)path + dir_len + 1;
        size_t n = (size_t)snprintf(id, sizeof id, "%s", g_agent_prefix);
        for (; *c != 0 && n + 4 < 200; c++) {
            if (isalnum(*c) || *c == '.' || *c == '-' || *c == '_') {
                id[n++] = (char)*c;
            } else {
                n += (size_t)snprintf(id + n, sizeof id - n, "%%%02X", *c);
            }
        }
        id[n] = 0;
    } else {
        return agent_open(path, options, out);
    }
    text = with_agent_id(options, id);
    if (text == NULL) {
        return AGENT_ERR_INVALID_ARGUMENT;
    }
    rc = agent_open(g_pg_uri, text, out);
    free(text);
    return rc;
}

static AgentHandle open_at(const char *path, const char *options)
{
    AgentHandle h = 0;
    if (!CHECK_STATUS(AGENT_OK, store_open(path, options, &h))) {
        fprintf(stderr, "    (while opening %s with %s)\n", path, options ? options : "NULL");
    }
    return h;
}

static AgentHandle open_store(const char *name, const char *options)
{
    return open_at(tmp_path(name), options);
}

/* Reads integer member "key" of a flat JSON object text; 0 when absent. */
static long member_int(const char *json, size_t len, const char *key)
{
    char pat[64];
    const char *p;
    char *copy = dup_bytes((const uint8_t *)json, len);
    long v = 0;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(copy, pat);
    if (p != NULL) {
        v = strtol(p + strlen(pat), NULL, 10);
    }
    free(copy);
    return v;
}

/* A malloc'd JSON object nested `levels` deep in total, the top-level object being level 1:
 * {"a":{"a":{}}} (3 levels of objects) or, with `arrays`, {"a":[[]]} (3 levels). */
static char *nested_document(int levels, int arrays)
{
    char *s = malloc((size_t)levels * 8 + 16);
    size_t n = 0;
    int i;
    if (s == NULL) {
        exit(2);
    }
    s[n++] = '{';
    if (levels > 1) {
        memcpy(s + n, "\"a\":", 4);
        n += 4;
        for (i = 2; i <= levels; i++) {
            if (arrays) {
                s[n++] = '[';
            } else if (i < levels) {
                memcpy(s + n, "{\"a\":", 5);
                n += 5;
            } else {
                s[n++] = '{';
            }
        }
        for (i = 2; i <= levels; i++) {
            s[n++] = arrays ? ']' : '}';
        }
    }
    s[n++] = '}';
    s[n] = 0;
    return s;
}

static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f != NULL && fwrite(data, 1, n, f) == n;
    if (f != NULL && fclose(f) != 0) {
        ok = 0;
    }
    return ok;
}

/* Reads a whole file (at most `cap` bytes) into `buf`; returns its size or -1. */
static long read_file(const char *path, void *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n;
    if (f == NULL) {
        return -1;
    }
    n = fread(buf, 1, cap, f);
    fclose(f);
    return (long)n;
}

static void sleep_ms(long ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

/* A free_user_data that counts its calls in the int it is given. */
static void count_free(void *user_data)
{
    ++*(int *)user_data;
}

/* ------------------------------------------------------------------------------------------ */
/* Hook fixtures                                                                              */
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

static void recorder_init(Recorder *r, const char *name)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    r->name = name;
}

static void recorder_destroy(Recorder *r)
{
    free(r->next);
    free(r->prev);
    free(r->patch);
    pthread_mutex_destroy(&r->mu);
}

static char g_log[4096]; /* order of events, for the ordering tests (one thread) */

static void log_event(const char *fmt, ...)
{
    size_t n = strlen(g_log);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_log + n, sizeof g_log - n, fmt, ap);
    va_end(ap);
}

static int views_ok(const AgentStateChange *c)
{
    int ok = c->next != NULL && c->next[c->next_len] == 0 && c->prev != NULL &&
             c->prev[c->prev_len] == 0;
    if (c->patch == NULL) {
        ok = ok && c->patch_len == 0;
    } else {
        ok = ok && c->patch[c->patch_len] == 0;
    }
    return ok;
}

static int32_t record_hook(void *user_data, const AgentStateChange *c)
{
    Recorder *r = user_data;
    pthread_mutex_lock(&r->mu);
    r->calls++;
    if (!views_ok(c)) {
        r->bad_views++;
    }
    if (r->next != NULL &&
        (c->prev_len != strlen(r->next) || memcmp(c->prev, r->next, c->prev_len) != 0)) {
        r->chain_breaks++;
    }
    if (r->calls > 1 && c->version != r->version + 1) {
        r->version_breaks++;
    }
    r->version = c->version;
    free(r->next);
    free(r->prev);
    free(r->patch);
    r->next = dup_bytes(c->next, c->next_len);
    r->prev = dup_bytes(c->prev, c->prev_len);
    r->patch = c->patch ? dup_bytes(c->patch, c->patch_len) : NULL;
    if (r->name != NULL) {
        log_event("%s:%s;", r->name, r->next);
    }
    pthread_mutex_unlock(&r->mu);
    return r->rc;
}

static void recorder_free(void *user_data)
{
    Recorder *r = user_data;
    pthread_mutex_lock(&r->mu);
    r->freed++;
    pthread_mutex_unlock(&r->mu);
}

static uint64_t add_recorder(AgentHandle h, Recorder *r)
{
    uint64_t id = 0;
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(h, record_hook, r, recorder_free, &id));
    CHECK(id != 0);
    return id;
}

/* An initial-state hook with a fixed answer. */
typedef struct {
    const char *answer; /* JSON text handed back (NULL: leave *out empty) */
    int use_copy;       /* 1: via agent_buffer_copy; 0: pointer to static text, owner NULL */
    int32_t rc;         /* what the hook returns */
    int calls;
    int freed;
} InitHook;

static int32_t init_hook(void *user_data, AgentBuffer *out)
{
    InitHook *ih = user_data;
    ih->calls++;
    if (ih->answer != NULL) {
        if (ih->use_copy) {
            if (agent_buffer_copy((const uint8_t *)ih->answer, strlen(ih->answer), out) !=
                AGENT_OK) {
                return 99;
            }
        } else {
            out->data = (const uint8_t *)ih->answer;
            out->len = strlen(ih->answer);
        }
    }
    return ih->rc;
}

static void init_hook_free(void *user_data)
{
    ((InitHook *)user_data)->freed++;
}

static int32_t noop_hook(void *user_data, const AgentStateChange *c)
{
    (void)user_data;
    (void)c;
    return 0;
}

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

static void gate_init(Gate *g, const char *reject_if, const char *message, int32_t rc)
{
    memset(g, 0, sizeof *g);
    g->reject_if = reject_if;
    g->message = message;
    g->rc = rc;
}

static void gate_destroy(Gate *g)
{
    free(g->next);
    free(g->prev);
    free(g->patch);
}

static int32_t gate_fn(void *user_data, const AgentStateChange *c, AgentBuffer *message)
{
    Gate *g = user_data;
    int reject;
    g->calls++;
    if (!views_ok(c) || message == NULL || !buf_is_empty(message)) {
        g->bad_views++;
    }
    free(g->next);
    free(g->prev);
    free(g->patch);
    g->next = dup_bytes(c->next, c->next_len);
    g->prev = dup_bytes(c->prev, c->prev_len);
    g->patch = c->patch ? dup_bytes(c->patch, c->patch_len) : NULL;
    g->version = c->version;
    if (g->self != 0) {
        AgentBuffer b = { NULL, 0, NULL };
        uint64_t v = 0, id = 0;
        size_t n = 0;
        g->self_get_rc = agent_get_state(g->self, &b);
        agent_buffer_free(&b);
        g->self_get_versioned_rc = agent_get_state_versioned(g->self, &b, &v);
        agent_buffer_free(&b);
        g->self_set_rc = set_s(g->self, "{\"inner\":1}", NULL);
        g->self_set_if_rc = agent_set_state_if(g->self, c->version - 1,
                                               (const uint8_t *)"{\"inner\":1}", 11, NULL, NULL);
        g->self_replace_rc = replace_s(g->self, "{\"inner\":1}", NULL);
        g->self_gate_rc = agent_set_validator(g->self, NULL, NULL, NULL);
        g->self_hook_rc = agent_on_state_changed(g->self, noop_hook, NULL, NULL, &id);
        g->self_poll_rc = agent_poll(g->self, &n);
        g->self_restore_rc = agent_restore_state(g->self, 0, NULL, NULL);
        g->self_close_rc = agent_close(g->self);
    }
    if (g->other != 0) {
        AgentBuffer b = { NULL, 0, NULL };
        g->other_get_rc = agent_get_state(g->other, &b);
        agent_buffer_free(&b);
    }
    reject = g->reject_if != NULL &&
             strstr((const char *)c->next, g->reject_if) != NULL;
    if ((reject || g->message_always) && g->message != NULL) {
        if (agent_buffer_copy((const uint8_t *)g->message, strlen(g->message), message) != AGENT_OK) {
            g->bad_views++;
        }
    }
    return reject ? g->rc : 0;
}

static void gate_free(void *user_data)
{
    ((Gate *)user_data)->freed++;
}

/* ------------------------------------------------------------------------------------------ */
/* Status codes, version, errors                                                              */
/* ------------------------------------------------------------------------------------------ */

static void test_version_and_status_names(void)
{
    static const struct {
        AgentStatus code;
        int value;
        const char *name;
    } k[] = {
        { AGENT_OK, 0, "AGENT_OK" },
        { AGENT_ERR_INVALID_ARGUMENT, 1, "AGENT_ERR_INVALID_ARGUMENT" },
        { AGENT_ERR_BAD_HANDLE, 2, "AGENT_ERR_BAD_HANDLE" },
        { AGENT_ERR_JSON, 3, "AGENT_ERR_JSON" },
        { AGENT_ERR_CODEC, 4, "AGENT_ERR_CODEC" },
        { AGENT_ERR_TOO_LARGE, 5, "AGENT_ERR_TOO_LARGE" },
        { AGENT_ERR_STORAGE, 6, "AGENT_ERR_STORAGE" },
        { AGENT_ERR_BUSY, 7, "AGENT_ERR_BUSY" },
        { AGENT_ERR_HOOK, 8, "AGENT_ERR_HOOK" },
        { AGENT_ERR_CONFLICT, 9, "AGENT_ERR_CONFLICT" },
        { AGENT_ERR_REJECTED, 10, "AGENT_ERR_REJECTED" },
        { AGENT_ERR_GAP, 11, "AGENT_ERR_GAP" },
        { AGENT_ERR_UNAVAILABLE, 12, "AGENT_ERR_UNAVAILABLE" },
        { AGENT_ERR_PANIC, 99, "AGENT_ERR_PANIC" },
    };
    size_t i;
    char numbers[64];
    const char *v = agent_version();
    CHECK(v != NULL && strlen(v) > 0);
    /* The header's version macros describe the library it ships with. */
    check_(strcmp(v, AGENT_STATE_VERSION) == 0, __FILE__, __LINE__,
           "agent_version() is %s, the header's AGENT_STATE_VERSION %s", v, AGENT_STATE_VERSION);
    snprintf(numbers, sizeof numbers, "%d.%d.%d", AGENT_STATE_VERSION_MAJOR,
             AGENT_STATE_VERSION_MINOR, AGENT_STATE_VERSION_PATCH);
    CHECK(strcmp(numbers, AGENT_STATE_VERSION) == 0);
    for (i = 0; i < sizeof k / sizeof k[0]; i++) {
        CHECK(k[i].code == k[i].value);
        check_(strcmp(agent_status_name(k[i].code), k[i].name) == 0, __FILE__, __LINE__,
               "agent_status_name(%d) is %s, expected %s", k[i].value,
               agent_status_name(k[i].code), k[i].name);
    }
    CHECK(strcmp(agent_status_name(-1), "AGENT_ERR_UNKNOWN") == 0);
    CHECK(strcmp(agent_status_name(13), "AGENT_ERR_UNKNOWN") == 0);
    CHECK(strcmp(agent_status_name(100), "AGENT_ERR_UNKNOWN") == 0);
}

static void *fresh_thread_reads_last_error(void *arg)
{
    const char *msg = agent_last_error();
    AgentBuffer b = { NULL, 0, NULL };
    *(int *)arg = msg != NULL && msg[0] == 0;
    /* A failure on this thread must not touch the main thread's message. */
    if (agent_get_state(0, &b) != AGENT_ERR_BAD_HANDLE) {
        *(int *)arg = 0;
    }
    if (strncmp(agent_last_error(), "agent_get_state: ", 17) != 0) {
        *(int *)arg = 0;
    }
    return NULL;
}

static void test_last_error_is_per_thread_and_kept_by_successes(void)
{
    pthread_t t;
    int fresh_ok = 0;
    AgentHandle h;
    AgentBuffer b = { NULL, 0, NULL };

    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_close(0));
    CHECK_LAST_ERROR_FROM("agent_close");
    CHECK(pthread_create(&t, NULL, fresh_thread_reads_last_error, &fresh_ok) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(fresh_ok); /* "" on a new thread, its own message after its own failure */
    CHECK_LAST_ERROR_FROM("agent_close"); /* the other thread's failure did not replace ours */

    h = open_at(":memory:", NULL);
    CHECK_STATUS(AGENT_OK, agent_get_state(h, &b));
    agent_buffer_free(&b);
    CHECK_LAST_ERROR_FROM("agent_close"); /* successful calls do not clear it */
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* ------------------------------------------------------------------------------------------ */
/* agent_open                                                                                 */
/* ------------------------------------------------------------------------------------------ */

#define CHECK_OPEN_FAILS(want, path, options) check_open_fails_((want), (path), (options), __FILE__, __LINE__)

static void check_open_fails_(AgentStatus want, const char *path, const char *options,
                              const char *file, int line)
{
    AgentHandle h = 77;
    AgentStatus rc = store_open(path, options, &h);
    check_(rc == want, file, line, "agent_open(%s, %s) returned %s, expected %s; last error: %s",
           path ? path : "NULL", options ? options : "NULL", agent_status_name(rc),
           agent_status_name(want), agent_last_error());
    check_(h == 0, file, line, "agent_open failed but *out is %llu, not 0", (unsigned long long)h);
    if (rc != AGENT_OK) {
        check_last_error_from_("agent_open", file, line);
    } else {
        agent_close(h);
    }
}

static void test_open_refuses_bad_arguments_and_options(void)
{
    const char *p = tmp_path("options.db");
    AgentHandle h;

    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, NULL, NULL);
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, "", NULL);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_open(p, NULL, NULL));
    CHECK_LAST_ERROR_FROM("agent_open");

    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"nope\":1}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"initialState\":{}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"max_value_bytes\":\"big\"}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"max_value_bytes\":-1}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"max_value_bytes\":1.5}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"synchronous\":\"sometimes\"}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"busy_timeout_ms\":-5}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"read_only\":\"yes\"}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"initial_state\":[1]}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"initial_state\":\"x\"}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "[]");
    CHECK_OPEN_FAILS(AGENT_ERR_JSON, p, "{\"max_value_bytes\":");
    CHECK_OPEN_FAILS(AGENT_ERR_JSON, p, "{\"initial_state\":{\"s\":\"\\ud800\"}}");
    CHECK_OPEN_FAILS(AGENT_ERR_CODEC, p, "{\"initial_state\":{\"a\":1,\"a\":2}}");
    CHECK_OPEN_FAILS(AGENT_ERR_CODEC, p, "{\"initial_state\":{\"n\":1e400}}");
    CHECK_OPEN_FAILS(AGENT_ERR_TOO_LARGE, p,
                     "{\"max_value_bytes\":16,\"initial_state\":{\"s\":\"0123456789abcdef\"}}");

    /* Every documented option, well-typed, is accepted. */
    h = open_at(p, "{\"initial_state\":{},\"max_value_bytes\":2,\"synchronous\":\"normal\","
                   "\"busy_timeout_ms\":0,\"read_only\":false}");
    CHECK_STATE(h, "{}");
    CHECK_REJECTED_S(h, AGENT_ERR_TOO_LARGE, "{\"a\":1}"); /* 7 bytes > max_value_bytes 2 */
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, "{\"synchronous\":\"full\",\"read_only\":true}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* Every function of versions, compare-and-set, the gate and the change log refuses handle
 * `h` with AGENT_ERR_BAD_HANDLE, leaves its output buffer empty, and releases a gate's
 * user_data right away. */
static void check_bad_handle_for_history_functions(AgentHandle h)
{
    AgentBuffer out = junk_buffer();
    uint64_t version = 77;
    size_t delivered = 77;
    int gate_freed = 0;

    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_state_versioned(h, &out, &version));
    CHECK_LAST_ERROR_FROM("agent_get_state_versioned");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE,
                 agent_set_state_if(h, 0, (const uint8_t *)"{}", 2, &out, &version));
    CHECK_LAST_ERROR_FROM("agent_set_state_if");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE,
                 agent_replace_state_if(h, 0, (const uint8_t *)"{}", 2, &out, &version));
    CHECK_LAST_ERROR_FROM("agent_replace_state_if");
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_poll(h, &delivered));
    CHECK_LAST_ERROR_FROM("agent_poll");
    CHECK(delivered == 0);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_changes_since(h, 0, &out));
    CHECK_LAST_ERROR_FROM("agent_changes_since");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_state_at(h, 0, &out));
    CHECK_LAST_ERROR_FROM("agent_get_state_at");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_restore_state(h, 0, &out, &version));
    CHECK_LAST_ERROR_FROM("agent_restore_state");
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_set_validator(h, NULL, &gate_freed, count_free));
    CHECK_LAST_ERROR_FROM("agent_set_validator");
    CHECK(gate_freed == 1);
    {
        Gate g;
        gate_init(&g, NULL, NULL, 1);
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_set_validator(h, gate_fn, &g, gate_free));
        CHECK_LAST_ERROR_FROM("agent_set_validator");
        CHECK(g.freed == 1 && g.calls == 0); /* released right away, never called */
        gate_destroy(&g);
    }
}

static void test_bad_handles_are_refused_by_every_function(void)
{
    AgentHandle closed = open_at(":memory:", NULL);
    AgentHandle live = open_at(":memory:", NULL);
    AgentHandle bad[4];
    size_t i;

    CHECK_STATUS(AGENT_OK, agent_close(closed));
    bad[0] = 0;
    bad[1] = 12345;
    bad[2] = closed;
    bad[3] = live + 1000; /* a forged neighbour of a live handle */

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AgentHandle h = bad[i];
        AgentBuffer out = junk_buffer();
        uint64_t id = 5;
        int freed = 0, init_freed = 0;

        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_state(h, &out));
        CHECK_LAST_ERROR_FROM("agent_get_state");
        CHECK_EMPTY(out);
        out = junk_buffer();
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, set_s(h, "{\"a\":1}", &out));
        CHECK_LAST_ERROR_FROM("agent_set_state");
        CHECK_EMPTY(out);
        out = junk_buffer();
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, replace_s(h, "{\"a\":1}", &out));
        CHECK_LAST_ERROR_FROM("agent_replace_state");
        CHECK_EMPTY(out);
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_close(h));
        CHECK_LAST_ERROR_FROM("agent_close");
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE,
                     agent_on_state_changed(h, record_hook, &freed, count_free, &id));
        CHECK_LAST_ERROR_FROM("agent_on_state_changed");
        CHECK(freed == 1); /* a failed registration releases user_data right away */
        CHECK(id == 0);
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_remove_hook(h, 1));
        CHECK_LAST_ERROR_FROM("agent_remove_hook");
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE,
                     agent_set_initial_state_hook(h, init_hook, &init_freed, count_free));
        CHECK_LAST_ERROR_FROM("agent_set_initial_state_hook");
        CHECK(init_freed == 1);
        check_bad_handle_for_history_functions(h);
    }
    CHECK_STATE(live, "{}"); /* the live neighbour is untouched */
    CHECK_STATUS(AGENT_OK, agent_close(live));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_close(live)); /* double close */
    CHECK_LAST_ERROR_FROM("agent_close");
}

static void test_handles_are_never_reused(void)
{
    AgentHandle a = open_at(":memory:", NULL);
    AgentHandle b;
    CHECK_STATUS(AGENT_OK, agent_close(a));
    b = open_at(":memory:", NULL);
    CHECK(a != 0 && b != 0 && a != b);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_close(a));
    CHECK_STATUS(AGENT_OK, agent_close(b));
}

/* ------------------------------------------------------------------------------------------ */
/* get_state and the initial state                                                            */
/* ------------------------------------------------------------------------------------------ */

static void test_default_initial_state_is_the_empty_object(void)
{
    AgentHandle h = open_store("default.db", NULL);
    CHECK_STATE(h, "{}");
    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_reading_never_persists_the_initial_state(void)
{
    AgentHandle h = open_store("no_persist.db", "{\"initial_state\":{\"a\":1}}");
    CHECK_STATE(h, "{\"a\":1}");
    CHECK_STATE(h, "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));

    /* A new default shows until the first write... */
    h = open_store("no_persist.db", "{\"initial_state\":{\"b\":2}}");
    CHECK_STATE(h, "{\"b\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("no_persist.db", NULL);
    CHECK_STATE(h, "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));

    /* ...which persists the default it merged into; later defaults no longer matter. */
    h = open_store("no_persist.db", "{\"initial_state\":{\"b\":2}}");
    CHECK_SET(h, "{\"c\":3}", "{\"b\":2,\"c\":3}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("no_persist.db", "{\"initial_state\":{\"z\":0}}");
    CHECK_STATE(h, "{\"b\":2,\"c\":3}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_first_write_persists_initial_state_merged_with_patch(void)
{
    AgentHandle h = open_store("first_write.db",
                               "{\"initial_state\":{\"a\":1,\"n\":{\"x\":1,\"y\":2},\"gone\":true}}");
    Recorder r;
    recorder_init(&r, NULL);
    add_recorder(h, &r);
    CHECK_SET(h, "{\"n\":{\"y\":null,\"z\":3},\"gone\":null,\"b\":[1]}",
              "{\"a\":1,\"n\":{\"x\":1,\"z\":3},\"b\":[1]}");
    CHECK(r.calls == 1);
    CHECK(r.prev != NULL && strcmp(r.prev, "{\"a\":1,\"n\":{\"x\":1,\"y\":2},\"gone\":true}") == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(r.freed == 1);
    recorder_destroy(&r);

    h = open_store("first_write.db", NULL);
    CHECK_STATE(h, "{\"a\":1,\"n\":{\"x\":1,\"z\":3},\"b\":[1]}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_replace_as_first_write_ignores_initial_state(void)
{
    AgentHandle h = open_store("first_replace.db", "{\"initial_state\":{\"a\":1}}");
    CHECK_REPLACE(h, "{\"b\":2}", "{\"b\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("first_replace.db", "{\"initial_state\":{\"a\":1}}");
    CHECK_STATE(h, "{\"b\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_stored_empty_object_is_not_nothing_stored(void)
{
    AgentHandle h = open_store("stored_empty.db", "{\"initial_state\":{\"a\":1}}");
    CHECK_REPLACE(h, "{}", "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("stored_empty.db", "{\"initial_state\":{\"x\":1}}");
    CHECK_STATE(h, "{}");
    CHECK_SET(h, "{\"a\":null}", "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* ------------------------------------------------------------------------------------------ */
/* set_state: RFC 7396 merge, order, numbers, output form                                      */
/* ------------------------------------------------------------------------------------------ */

static void test_set_state_merges_like_the_reference_page(void)
{
    AgentHandle h = open_store("reference.db", NULL);
    CHECK_REPLACE(h, "{\"status\":\"processing\",\"job\":{\"id\":\"j1\",\"step\":2,\"note\":\"retrying\"}}",
                  "{\"status\":\"processing\",\"job\":{\"id\":\"j1\",\"step\":2,\"note\":\"retrying\"}}");
    CHECK_SET(h, "{\"job\":{\"step\":3,\"note\":null}}",
              "{\"status\":\"processing\",\"job\":{\"id\":\"j1\",\"step\":3}}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("reference.db", NULL);
    CHECK_STATE(h, "{\"status\":\"processing\",\"job\":{\"id\":\"j1\",\"step\":3}}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_set_state_follows_rfc7396(void)
{
    /* RFC 7396 Appendix A (the cases whose target and patch are objects), then more. */
    static const char *const k[][3] = {
        { "{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
        { "{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}" },
        { "{\"a\":\"b\"}", "{\"a\":null}", "{}" },
        { "{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}" },
        { "{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
        { "{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}" },
        { "{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}" },
        { "{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}" },
        { "{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}" },
        { "{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}" },
        /* arrays replace wholesale, nulls inside them included */
        { "{\"a\":[1,2,3]}", "{\"a\":[4]}", "{\"a\":[4]}" },
        { "{\"a\":[{\"x\":1}]}", "{\"a\":[{\"y\":null}]}", "{\"a\":[{\"y\":null}]}" },
        { "{\"a\":{\"b\":1}}", "{\"a\":[]}", "{\"a\":[]}" },
        /* scalars replace objects and objects replace scalars (their nulls dropped) */
        { "{\"a\":{\"x\":1}}", "{\"a\":5}", "{\"a\":5}" },
        { "{\"a\":5}", "{\"a\":{\"x\":1,\"y\":null}}", "{\"a\":{\"x\":1}}" },
        { "{\"a\":true}", "{\"a\":\"t\"}", "{\"a\":\"t\"}" },
        /* deep merge, deletions of absent members, empty patches */
        { "{\"a\":{\"b\":{\"c\":1,\"d\":2}},\"e\":3}", "{\"a\":{\"b\":{\"c\":null}}}",
          "{\"a\":{\"b\":{\"d\":2}},\"e\":3}" },
        { "{\"a\":1}", "{\"b\":null}", "{\"a\":1}" },
        { "{\"a\":1}", "{}", "{\"a\":1}" },
        { "{\"a\":{\"b\":1}}", "{\"a\":{}}", "{\"a\":{\"b\":1}}" },
        { "{\"a\":{\"b\":1}}", "{\"a\":null,\"c\":{\"d\":null}}", "{\"c\":{}}" },
    };
    AgentHandle h = open_store("rfc7396.db", NULL);
    size_t i;
    for (i = 0; i < sizeof k / sizeof k[0]; i++) {
        CHECK_REPLACE(h, k[i][0], k[i][0]);
        CHECK_SET(h, k[i][1], k[i][2]);
    }
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_member_order_is_preserved_and_new_members_appended(void)
{
    AgentHandle h = open_store("order.db", NULL);
    CHECK_REPLACE(h, "{\"z\":1,\"a\":2,\"m\":3}", "{\"z\":1,\"a\":2,\"m\":3}");
    CHECK_SET(h, "{\"a\":null,\"q\":4,\"z\":5,\"b\":6}", "{\"z\":5,\"m\":3,\"q\":4,\"b\":6}");
    /* a deleted member that comes back is new: appended at the end */
    CHECK_SET(h, "{\"a\":7}", "{\"z\":5,\"m\":3,\"q\":4,\"b\":6,\"a\":7}");
    /* the same at depth */
    CHECK_REPLACE(h, "{\"o\":{\"y\":1,\"x\":2},\"p\":0}", "{\"o\":{\"y\":1,\"x\":2},\"p\":0}");
    CHECK_SET(h, "{\"o\":{\"w\":3,\"y\":9}}", "{\"o\":{\"y\":9,\"x\":2,\"w\":3},\"p\":0}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("order.db", NULL);
    CHECK_STATE(h, "{\"o\":{\"y\":9,\"x\":2,\"w\":3},\"p\":0}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* Numbers keep their exact value and every digit as written; only the exponent marker is
 * normalized, as documented (1E2 is stored as 1e+2, -1.5e300 as -1.5e+300). */
static void test_numbers_keep_their_exact_value_and_digits(void)
{
    const char *nums = "{\"a\":1.0,\"b\":12345678901234567890123,\"c\":1E2,\"d\":-0,"
                       "\"e\":0.1e-5,\"f\":-1.5e300,\"g\":1.10,\"h\":-12345678901234567890123.5}";
    const char *stored = "{\"a\":1.0,\"b\":12345678901234567890123,\"c\":1e+2,\"d\":-0,"
                         "\"e\":0.1e-5,\"f\":-1.5e+300,\"g\":1.10,\"h\":-12345678901234567890123.5}";
    AgentHandle h = open_store("numbers.db", NULL);
    CHECK_REPLACE(h, nums, stored);
    CHECK_SET(h, "{\"a\":2.50,\"i\":1e+2}",
              "{\"a\":2.50,\"b\":12345678901234567890123,\"c\":1e+2,\"d\":-0,"
              "\"e\":0.1e-5,\"f\":-1.5e+300,\"g\":1.10,\"h\":-12345678901234567890123.5,\"i\":1e+2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("numbers.db", NULL);
    CHECK_STATE(h, "{\"a\":2.50,\"b\":12345678901234567890123,\"c\":1e+2,\"d\":-0,"
                   "\"e\":0.1e-5,\"f\":-1.5e+300,\"g\":1.10,\"h\":-12345678901234567890123.5,\"i\":1e+2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_output_is_compact_json_and_text_round_trips(void)
{
    AgentHandle h = open_store("compact.db", NULL);
    CHECK_REPLACE(h, " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } , \"c\":\"x y\" }\n ",
                  "{\"a\":[1,2],\"b\":{},\"c\":\"x y\"}");
    /* UTF-8 text and escapes that must stay escaped survive byte for byte */
    CHECK_REPLACE(h, "{\"\xc3\xa9t\xc3\xa9\":\"\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\","
                     "\"q\":\"a\\\"b\\\\c\\n\"}",
                  "{\"\xc3\xa9t\xc3\xa9\":\"\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\","
                  "\"q\":\"a\\\"b\\\\c\\n\"}");
    /* an escaped surrogate pair is well-formed */
    {
        AgentBuffer out = { NULL, 0, NULL };
        CHECK_STATUS(AGENT_OK, set_s(h, "{\"e\":\"\\ud83d\\ude00\"}", &out));
        agent_buffer_free(&out);
    }
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_set_state_returns_full_state_and_out_may_be_null(void)
{
    AgentHandle h = open_store("null_out.db", NULL);
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"a\":1}", NULL));
    CHECK_STATUS(AGENT_OK, replace_s(h, "{\"b\":2}", NULL));
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"c\":3}", NULL));
    CHECK_STATE(h, "{\"b\":2,\"c\":3}");
    CHECK_SET(h, "{\"d\":{\"e\":4}}", "{\"b\":2,\"c\":3,\"d\":{\"e\":4}}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_replace_state_keeps_nothing_of_the_previous_state(void)
{
    AgentHandle h = open_store("replace.db", "{\"initial_state\":{\"i\":0}}");
    CHECK_SET(h, "{\"a\":1,\"b\":{\"c\":2,\"keep\":1}}", "{\"i\":0,\"a\":1,\"b\":{\"c\":2,\"keep\":1}}");
    CHECK_REPLACE(h, "{\"b\":{\"d\":3}}", "{\"b\":{\"d\":3}}");
    /* null is a value in a replacement, not a deletion */
    CHECK_REPLACE(h, "{\"x\":null}", "{\"x\":null}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("replace.db", "{\"initial_state\":{\"i\":0}}");
    CHECK_STATE(h, "{\"x\":null}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* ------------------------------------------------------------------------------------------ */
/* Refused inputs                                                                             */
/* ------------------------------------------------------------------------------------------ */

static void test_patch_must_be_a_json_object(void)
{
    AgentHandle h = open_store("not_object.db", NULL);
    AgentBuffer out = junk_buffer();
    CHECK_SET(h, "{\"keep\":1}", "{\"keep\":1}");
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "[1]");
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "\"x\"");
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "1");
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "null");
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "true");
    /* a tagged value is a leaf, not a plain object: it cannot be the state */
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "{\"$date\":\"2026-11-30T03:06:44.123Z\"}");
    CHECK_REJECTED(h, AGENT_ERR_INVALID_ARGUMENT, NULL, 5);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state(h, NULL));
    CHECK_LAST_ERROR_FROM("agent_get_state");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_set_state(h, NULL, 0, &out));
    CHECK_EMPTY(out);
    CHECK_STATE(h, "{\"keep\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_malformed_json_is_refused(void)
{
    static const char nul_inside[] = "{\"a\":\"x\0y\"}";
    static const char nul_after[] = "{\"a\":1}\0";
    AgentHandle h = open_store("bad_json.db", NULL);
    char *deep;
    CHECK_SET(h, "{\"keep\":1}", "{\"keep\":1}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":1,}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{'a':1}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":01}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":NaN}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{} x");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{}{}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":\"\xff\"}");          /* invalid UTF-8 byte */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"\xc3\":1}");              /* truncated sequence */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":\"\xc0\xaf\"}");      /* overlong encoding */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":\"\xed\xa0\x80\"}");  /* UTF-8 encoded surrogate */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":\"\\ud800\"}");       /* lone high surrogate */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":\"\\udc00x\"}");      /* lone low surrogate */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"\\ud800\":1}");           /* ... in a name */
    CHECK_REJECTED(h, AGENT_ERR_JSON, nul_inside, sizeof nul_inside - 1); /* NUL inside a string */
    CHECK_REJECTED(h, AGENT_ERR_JSON, nul_after, sizeof nul_after - 1);   /* NUL after the object */
    CHECK_REJECTED(h, AGENT_ERR_JSON, "{\"a\":1}", 4);                    /* length cuts it short */
    deep = nested_document(200, 1);
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, deep);
    free(deep);
    deep = nested_document(129, 0); /* "nesting of 128 levels or more" is AGENT_ERR_JSON */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, deep);
    free(deep);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_codec_refuses_what_it_cannot_store(void)
{
    AgentHandle h = open_store("codec.db", NULL);
    char *deep;
    CHECK_SET(h, "{\"keep\":1}", "{\"keep\":1}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"a\":1,\"a\":2}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"a\":1,\"\\u0061\":2}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"x\":{\"b\":[{\"c\":1,\"c\":2}]}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"a\":null,\"a\":null}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"n\":1e400}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"n\":-1e400}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"n\":[1e309]}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"d\":{\"$date\":\"yesterday\"}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"d\":{\"$date\":\"2026-13-01T00:00:00.000Z\"}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"d\":{\"$date\":1764471604123}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"b\":{\"$bigint\":\"12a\"}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"b\":{\"$bigint\":12}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"m\":{\"$map\":[[1]]}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"m\":{\"$map\":{\"a\":1}}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"s\":{\"$set\":5}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"s\":{\"$set\":[1,1]}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"ab\":{\"$arraybuffer\":\"!!\"}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC,
                     "{\"t\":{\"$typedarray\":{\"type\":\"Float32Array\",\"base64\":\"AAA=\"}}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC,
                     "{\"t\":{\"$typedarray\":{\"type\":\"Float99Array\",\"base64\":\"\"}}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"r\":{\"$regexp\":{\"source\":\"a+b\"}}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"r\":{\"$regexp\":\"a+b\"}}");
    deep = nested_document(70, 0);
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, deep);
    free(deep);
    deep = nested_document(70, 1);
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, deep);
    free(deep);
    /* the edges: 64 levels are stored, 65 to 127 are refused by the codec; at 128 levels the
     * parser stops (the header: "nesting of 128 levels or more" is AGENT_ERR_JSON) */
    deep = nested_document(65, 0);
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, deep);
    free(deep);
    deep = nested_document(127, 0);
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, deep);
    free(deep);
    deep = nested_document(128, 0);
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, deep);
    free(deep);
    deep = nested_document(64, 0);
    CHECK_STATUS(AGENT_OK, replace_s(h, deep, NULL));
    CHECK_STATE(h, deep);
    free(deep);
    deep = nested_document(64, 1);
    CHECK_STATUS(AGENT_OK, replace_s(h, deep, NULL));
    CHECK_STATE(h, deep);
    free(deep);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_merge_result_must_be_storable(void)
{
    AgentHandle h = open_store("merge_codec.db", NULL);
    AgentStatus rc;
    /* {"$set":5,"y":1} is a plain object (two members); deleting y would leave a malformed
     * tagged value. */
    CHECK_REPLACE(h, "{\"x\":{\"$set\":5,\"y\":1}}", "{\"x\":{\"$set\":5,\"y\":1}}");
    CHECK_STATUS(AGENT_ERR_CODEC, set_s(h, "{\"x\":{\"y\":null}}", NULL));
    CHECK_STATE(h, "{\"x\":{\"$set\":5,\"y\":1}}");
    /* ...while leaving a well-formed one is fine */
    CHECK_REPLACE(h, "{\"x\":{\"$bigint\":\"12\",\"y\":1}}", "{\"x\":{\"$bigint\":\"12\",\"y\":1}}");
    CHECK_SET(h, "{\"x\":{\"y\":null}}", "{\"x\":{\"$bigint\":\"12\"}}");
    /* a merge may not turn the state itself into a tagged value */
    CHECK_REPLACE(h, "{\"$date\":\"2026-11-30T03:06:44.123Z\",\"a\":1}",
                  "{\"$date\":\"2026-11-30T03:06:44.123Z\",\"a\":1}");
    rc = set_s(h, "{\"a\":null}", NULL);
    check_(rc != AGENT_OK, __FILE__, __LINE__, "a merge left a tagged value as the state");
    CHECK_STATE(h, "{\"$date\":\"2026-11-30T03:06:44.123Z\",\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_too_large_state_is_refused_and_nothing_written(void)
{
    char big[2100];
    char edge[1100];
    AgentHandle h = open_store("too_large.db", "{\"max_value_bytes\":1024}");
    memset(big, 0, sizeof big);
    strcpy(big, "{\"s\":\"");
    memset(big + 6, 'x', 2000);
    strcpy(big + 2006, "\"}");
    CHECK_REJECTED_S(h, AGENT_ERR_TOO_LARGE, big);
    CHECK_STATE(h, "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("too_large.db", "{\"max_value_bytes\":1024,\"initial_state\":{\"fresh\":true}}");
    CHECK_STATE(h, "{\"fresh\":true}"); /* nothing was stored */

    /* A state exactly max_value_bytes long is accepted; one byte more is refused, also when
     * it only grows that large through a merge of small patches. */
    memset(edge, 0, sizeof edge);
    strcpy(edge, "{\"s\":\"");
    memset(edge + 6, 'y', 1016);
    strcpy(edge + 1022, "\"}"); /* 1024 bytes */
    CHECK_REPLACE(h, edge, edge);
    CHECK_PATCH_REJECTED_S(h, AGENT_ERR_TOO_LARGE, "{\"t\":1}"); /* 1030 bytes merged */
    CHECK_REPLACE(h, "{\"s\":\"\"}", "{\"s\":\"\"}");
    {
        /* each patch adds 517 bytes: 8 + 517 = 525 fits, 525 + 517 = 1042 does not */
        char patch[600];
        memset(patch, 0, sizeof patch);
        strcpy(patch, "{\"a\":\"");
        memset(patch + 6, 'a', 510);
        strcpy(patch + 516, "\"}");
        CHECK_STATUS(AGENT_OK, set_s(h, patch, NULL));
        patch[2] = 'b';
        CHECK_PATCH_REJECTED_S(h, AGENT_ERR_TOO_LARGE, patch);
        patch[2] = 'a';
        {
            char expected[700];
            snprintf(expected, sizeof expected, "{\"s\":\"\",%s", patch + 1);
            CHECK_STATE(h, expected);
        }
    }
    CHECK_STATUS(AGENT_OK, agent_close(h));

    {
        /* the default max_value_bytes is 2097152 */
        size_t n = 2097152 + 1;
        char *huge = malloc(n + 1);
        memset(huge, 'z', n);
        memcpy(huge, "{\"s\":\"", 6);
        memcpy(huge + n - 2, "\"}", 2);
        huge[n] = 0;
        h = open_at(":memory:", NULL);
        CHECK_REJECTED_S(h, AGENT_ERR_TOO_LARGE, huge);
        CHECK_STATUS(AGENT_OK, agent_close(h));
        free(huge);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Storage                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* One 512-byte page: a valid, empty SQLite database with the given header fields. */
static void craft_sqlite_file(unsigned char page[512], uint32_t application_id,
                              uint32_t user_version)
{
    static const unsigned char magic[16] = "SQLite format 3";
    memset(page, 0, 512);
    memcpy(page, magic, 16);
    page[16] = 0x02; /* page size 512 */
    page[18] = 1;    /* write version: legacy */
    page[19] = 1;    /* read version */
    page[21] = 64;
    page[22] = 32;
    page[23] = 32;
    page[27] = 1; /* change counter */
    page[31] = 1; /* size in pages */
    page[47] = 4; /* schema format */
    page[59] = 1; /* UTF-8 */
    page[60] = (unsigned char)(user_version >> 24);
    page[61] = (unsigned char)(user_version >> 16);
    page[62] = (unsigned char)(user_version >> 8);
    page[63] = (unsigned char)user_version;
    page[68] = (unsigned char)(application_id >> 24);
    page[69] = (unsigned char)(application_id >> 16);
    page[70] = (unsigned char)(application_id >> 8);
    page[71] = (unsigned char)application_id;
    page[95] = 1;  /* version-valid-for */
    page[100] = 0x0D; /* page 1: an empty leaf table b-tree (sqlite_schema) */
    page[105] = 0x02; /* cell content area starts at 512 */
}

/* Opening `path` fails with AGENT_ERR_STORAGE, and the file and its directory are untouched. */
#define CHECK_REFUSED_FILE(path, bytes, n) check_refused_file_((path), (bytes), (n), __FILE__, __LINE__)

static void check_refused_file_(const char *path, const unsigned char *bytes, size_t n,
                                const char *file, int line)
{
    static unsigned char after[8192];
    char side[600];
    const char *suffix[3] = { "-wal", "-shm", "-journal" };
    AgentHandle h = 77;
    long got;
    int i;
    check_status_(agent_open(path, NULL, &h), AGENT_ERR_STORAGE, file, line, "agent_open(foreign file)");
    check_(h == 0, file, line, "failed open left *out = %llu", (unsigned long long)h);
    check_last_error_from_("agent_open", file, line);
    got = read_file(path, after, sizeof after);
    check_(got == (long)n && memcmp(after, bytes, n) == 0, file, line,
           "%s changed: %ld bytes now, %zu before", path, got, n);
    for (i = 0; i < 3; i++) {
        snprintf(side, sizeof side, "%s%s", path, suffix[i]);
        check_(!file_exists(side), file, line, "opening a foreign file created %s", side);
    }
}

static void test_storage_refuses_files_that_are_not_agent_stores(void)
{
    static unsigned char text[4096];
    static unsigned char page[512];
    const char *p;
    size_t i;
    const char *line = "This is a plain text file, not a database. ";
    for (i = 0; i < sizeof text; i++) {
        text[i] = (unsigned char)line[i % strlen(line)];
    }
    p = tmp_path("text_file.db");
    CHECK(write_file(p, text, sizeof text));
    CHECK_REFUSED_FILE(p, text, sizeof text);

    craft_sqlite_file(page, 0x12345678, 0); /* an SQLite database of another application */
    p = tmp_path("foreign_sqlite.db");
    CHECK(write_file(p, page, sizeof page));
    CHECK_REFUSED_FILE(p, page, sizeof page);

    craft_sqlite_file(page, 0x41675374, 99); /* an agent store ("AgSt") of a newer schema */
    p = tmp_path("newer_schema.db");
    CHECK(write_file(p, page, sizeof page));
    CHECK_REFUSED_FILE(p, page, sizeof page);
}

static void test_storage_errors_for_missing_directory_and_read_only(void)
{
    AgentHandle h = 77;
    const char *missing = tmp_path("no/such/dir/x.db");
    const char *absent = tmp_path("absent_read_only.db");
    const char *p = tmp_path("read_only.db");

    CHECK_STATUS(AGENT_ERR_STORAGE, agent_open(missing, NULL, &h));
    CHECK(h == 0);
    CHECK_LAST_ERROR_FROM("agent_open");

    h = 77;
    CHECK_STATUS(AGENT_ERR_STORAGE, agent_open(absent, "{\"read_only\":true}", &h));
    CHECK(h == 0);
    CHECK(!file_exists(absent)); /* read-only never creates */

    h = open_at(p, NULL);
    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, "{\"read_only\":true,\"initial_state\":{\"x\":1}}");
    CHECK_STATE(h, "{\"a\":1}");
    CHECK_REJECTED_S(h, AGENT_ERR_STORAGE, "{\"b\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, NULL);
    CHECK_STATE(h, "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_state_persists_and_new_store_file_is_private(void)
{
    const char *p = tmp_path("mode.db");
    struct stat st;
    AgentHandle h;
    mode_t old = umask(022);
    h = open_at(p, NULL);
    umask(old);
    CHECK(stat(p, &st) == 0);
    check_((st.st_mode & 0777) == 0600, __FILE__, __LINE__, "new store file has mode %03o, expected 600",
           (unsigned)(st.st_mode & 0777));
    CHECK_SET(h, "{\"n\":1,\"s\":\"kept\"}", "{\"n\":1,\"s\":\"kept\"}");
    CHECK_SET(h, "{\"n\":2}", "{\"n\":2,\"s\":\"kept\"}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, "{\"initial_state\":{\"other\":1}}");
    CHECK_STATE(h, "{\"n\":2,\"s\":\"kept\"}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
}

/* Checks that `name` (relative to the current directory) exists with mode 0600. */
static void check_private_file(const char *name, int line)
{
    struct stat st;
    int ok = stat(name, &st) == 0 && (st.st_mode & 0777) == 0600;
    check_(ok, __FILE__, line, "%s: %s", name,
           ok ? "" : (access(name, F_OK) == 0 ? "mode is not 0600" : "missing"));
}

/* The bundled SQLite reads names starting with "file:" as URIs; a path is a file name. */
static void test_uri_looking_paths_open_exactly_the_named_file(void)
{
    static const char *const names[] = {"file:notes.db", "file:z.db#frag",
                                        "file:q.db?mode=memory&cache=shared"};
    char cwd[4096];
    size_t i;
    mode_t old = umask(022);
    if (getcwd(cwd, sizeof cwd) == NULL || chdir(g_dir) != 0) {
        check_(0, __FILE__, __LINE__, "cannot enter %s", g_dir);
        umask(old);
        return;
    }
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        char side[600];
        AgentHandle h = open_at(names[i], NULL);
        CHECK_SET(h, "{\"n\":1}", "{\"n\":1}");
        check_private_file(names[i], __LINE__);
        snprintf(side, sizeof side, "%s-wal", names[i]);
        check_private_file(side, __LINE__);
        snprintf(side, sizeof side, "%s-shm", names[i]);
        check_private_file(side, __LINE__);
        CHECK_STATUS(AGENT_OK, agent_close(h));
        h = open_at(names[i], NULL);
        CHECK_STATE(h, "{\"n\":1}");
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
    /* ... and no file the user never named. */
    CHECK(!file_exists("notes.db") && !file_exists("z.db") && !file_exists("q.db"));
    umask(old);
    CHECK(chdir(cwd) == 0);
}

static void test_path_is_taken_as_raw_bytes(void)
{
    const char *p = tmp_path("caf\xe9 \xff.db"); /* not UTF-8: the OS takes bytes */
    AgentHandle h = open_at(p, NULL);
    CHECK(file_exists(p));
    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, NULL);
    CHECK_STATE(h, "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_memory_store_is_private_to_its_handle(void)
{
    AgentHandle a = open_at(":memory:", NULL);
    AgentHandle b = open_at(":memory:", NULL);
    CHECK_SET(a, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATE(b, "{}");
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK_STATUS(AGENT_OK, agent_close(b));
    a = open_at(":memory:", NULL);
    CHECK_STATE(a, "{}");
    CHECK_STATUS(AGENT_OK, agent_close(a));
}

static void test_two_handles_on_one_file_see_each_others_commits(void)
{
    AgentHandle a = open_store("two_handles.db", NULL);
    AgentHandle b = open_store("two_handles.db", NULL);
    CHECK_STATE(b, "{}");
    CHECK_SET(a, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATE(b, "{\"a\":1}");
    CHECK_SET(b, "{\"b\":2}", "{\"a\":1,\"b\":2}"); /* starts from a's commit */
    CHECK_STATE(a, "{\"a\":1,\"b\":2}");
    CHECK_REPLACE(a, "{\"c\":3}", "{\"c\":3}");
    CHECK_SET(b, "{\"d\":4}", "{\"c\":3,\"d\":4}");
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK_STATE(b, "{\"c\":3,\"d\":4}");
    CHECK_STATUS(AGENT_OK, agent_close(b));
}

/* ------------------------------------------------------------------------------------------ */
/* Tagged values                                                                              */
/* ------------------------------------------------------------------------------------------ */

static void test_tagged_values_are_accepted_and_round_trip(void)
{
    const char *all =
        "{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"},"
        "\"b\":{\"$bigint\":\"-1234567890123456789012\"},"
        "\"m\":{\"$map\":[[1,\"a\"]]},"
        "\"s\":{\"$set\":[1,2]},"
        "\"ab\":{\"$arraybuffer\":\"AAEC\"},"
        "\"ta\":{\"$typedarray\":{\"type\":\"Float32Array\",\"base64\":\"AAAAAA==\"}},"
        "\"re\":{\"$regexp\":{\"source\":\"a+b\",\"flags\":\"gi\"}},"
        "\"nested\":[{\"$set\":[]},{\"$map\":[]}]}";
    AgentHandle h = open_store("tagged.db", NULL);
    CHECK_SET(h, all, all);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("tagged.db", NULL);
    CHECK_STATE(h, all);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("tagged_initial.db", "{\"initial_state\":{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"}}}");
    CHECK_STATE(h, "{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"}}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_tagged_values_are_leaves_for_merge(void)
{
    AgentHandle h = open_store("tagged_merge.db", NULL);
    /* a tagged patch member replaces a plain object whole (no member of it survives) */
    CHECK_REPLACE(h, "{\"s\":{\"a\":1,\"b\":2}}", "{\"s\":{\"a\":1,\"b\":2}}");
    CHECK_SET(h, "{\"s\":{\"$set\":[1]}}", "{\"s\":{\"$set\":[1]}}");
    /* a plain patch object replaces a tagged target instead of merging into it */
    CHECK_REPLACE(h, "{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"}}",
                  "{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"}}");
    CHECK_SET(h, "{\"d\":{\"x\":1}}", "{\"d\":{\"x\":1}}");
    /* tagged over tagged: whole replacement, no merging of entries */
    CHECK_REPLACE(h, "{\"m\":{\"$map\":[[1,\"a\"]]}}", "{\"m\":{\"$map\":[[1,\"a\"]]}}");
    CHECK_SET(h, "{\"m\":{\"$map\":[[2,\"b\"]]}}", "{\"m\":{\"$map\":[[2,\"b\"]]}}");
    CHECK_REPLACE(h, "{\"t\":{\"$typedarray\":{\"type\":\"Float32Array\",\"base64\":\"AAAAAA==\"}}}",
                  "{\"t\":{\"$typedarray\":{\"type\":\"Float32Array\",\"base64\":\"AAAAAA==\"}}}");
    CHECK_SET(h, "{\"t\":{\"$regexp\":{\"source\":\"x\",\"flags\":\"\"}}}",
              "{\"t\":{\"$regexp\":{\"source\":\"x\",\"flags\":\"\"}}}");
    /* deleting a tagged member */
    CHECK_SET(h, "{\"t\":null}", "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* ------------------------------------------------------------------------------------------ */
/* Initial-state hook                                                                         */
/* ------------------------------------------------------------------------------------------ */

static void test_initial_state_hook_takes_precedence_and_is_called_each_time(void)
{
    AgentHandle h = open_store("init_hook.db", "{\"initial_state\":{\"from\":\"option\"}}");
    InitHook ih;
    memset(&ih, 0, sizeof ih);
    ih.answer = "{\"from\":\"hook\",\"n\":{\"x\":1}}";
    ih.use_copy = 1;
    CHECK_STATE(h, "{\"from\":\"option\"}");
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &ih, init_hook_free));
    CHECK_STATE(h, "{\"from\":\"hook\",\"n\":{\"x\":1}}");
    CHECK_STATE(h, "{\"from\":\"hook\",\"n\":{\"x\":1}}");
    CHECK(ih.calls == 2); /* called every time a default is needed */

    /* the first write merges the hook's answer with the patch */
    CHECK_SET(h, "{\"n\":{\"y\":2}}", "{\"from\":\"hook\",\"n\":{\"x\":1,\"y\":2}}");
    CHECK(ih.calls == 3);
    CHECK_STATE(h, "{\"from\":\"hook\",\"n\":{\"x\":1,\"y\":2}}");
    CHECK(ih.calls == 3); /* something is stored now: no default needed */
    CHECK(ih.freed == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(ih.freed == 1); /* on close */
}

static void test_initial_state_hook_can_answer_with_static_text(void)
{
    AgentHandle h = open_store("init_static.db", NULL);
    InitHook ih;
    memset(&ih, 0, sizeof ih);
    ih.answer = "{\"static\":true}";
    ih.use_copy = 0;
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &ih, NULL));
    CHECK_STATE(h, "{\"static\":true}");
    CHECK_SET(h, "{\"a\":1}", "{\"static\":true,\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_initial_state_hook_user_data_is_freed_exactly_once(void)
{
    AgentHandle h = open_store("init_free.db", "{\"initial_state\":{\"from\":\"option\"}}");
    InitHook first, second;
    int data_of_null_fn = 0;
    memset(&first, 0, sizeof first);
    memset(&second, 0, sizeof second);
    first.answer = "{\"from\":\"first\"}";
    first.use_copy = 1;
    second.answer = "{\"from\":\"second\"}";
    second.use_copy = 1;

    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &first, init_hook_free));
    CHECK_STATE(h, "{\"from\":\"first\"}");
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &second, init_hook_free));
    CHECK(first.freed == 1); /* replaced */
    CHECK_STATE(h, "{\"from\":\"second\"}");
    CHECK(first.calls == 1);
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, NULL, NULL, NULL));
    CHECK(second.freed == 1); /* removed */
    CHECK_STATE(h, "{\"from\":\"option\"}"); /* the option applies again */
    /* fn NULL with user_data: released right away */
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, NULL, &data_of_null_fn, count_free));
    CHECK(data_of_null_fn == 1);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(first.freed == 1 && second.freed == 1 && data_of_null_fn == 1);
}

static void test_initial_state_hook_failures_are_reported(void)
{
    static const struct {
        const char *answer;
        int32_t rc;
        AgentStatus want;
    } k[] = {
        { "{\"a\":1}", 1, AGENT_ERR_HOOK },             /* non-zero return */
        { "{\"a\":1}", -7, AGENT_ERR_HOOK },
        { "[1]", 0, AGENT_ERR_INVALID_ARGUMENT },      /* not an object */
        { "\"x\"", 0, AGENT_ERR_INVALID_ARGUMENT },
        { "{\"a\":", 0, AGENT_ERR_JSON },              /* malformed JSON */
        { "{\"a\":\"\\ud800\"}", 0, AGENT_ERR_JSON },
        { "{\"a\":1,\"a\":2}", 0, AGENT_ERR_CODEC },     /* codec */
        { "{\"d\":{\"$date\":\"yesterday\"}}", 0, AGENT_ERR_CODEC },
        { "{\"s\":\"0123456789012345678901234567890123456789\"}", 0, AGENT_ERR_TOO_LARGE },
    };
    size_t i;
    for (i = 0; i < sizeof k / sizeof k[0]; i++) {
        AgentHandle h = open_store("init_fail.db", "{\"max_value_bytes\":32}");
        InitHook ih;
        AgentBuffer out = junk_buffer();
        memset(&ih, 0, sizeof ih);
        ih.answer = k[i].answer;
        ih.use_copy = (int)(i % 2);
        ih.rc = k[i].rc;
        CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &ih, init_hook_free));
        check_status_(agent_get_state(h, &out), k[i].want, __FILE__, __LINE__, k[i].answer);
        CHECK_EMPTY(out);
        CHECK_LAST_ERROR_FROM("agent_get_state");
        out = junk_buffer();
        check_status_(set_s(h, "{\"b\":2}", &out), k[i].want, __FILE__, __LINE__, k[i].answer);
        CHECK_EMPTY(out);
        CHECK_LAST_ERROR_FROM("agent_set_state");
        CHECK(ih.calls == 2);
        /* nothing was written: without the hook the store still shows the option's default */
        CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, NULL, NULL, NULL));
        CHECK(ih.freed == 1);
        CHECK_STATE(h, "{}");
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
    {
        /* a hook that returns 0 but leaves *out empty gave no state: the call fails */
        AgentHandle h = open_store("init_fail.db", NULL);
        InitHook ih;
        AgentBuffer out = junk_buffer();
        memset(&ih, 0, sizeof ih);
        CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &ih, NULL));
        CHECK(agent_get_state(h, &out) != AGENT_OK);
        CHECK_EMPTY(out);
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
}

/* An initial-state hook that calls into its own handle (must be refused with BUSY) and into
 * another handle (allowed). */
typedef struct {
    AgentHandle self;
    AgentHandle other;
    AgentStatus got[7];
    int empty_outs;
    int errors_named;
    int freed_inside;
    AgentStatus other_rc;
} ReentryProbe;

static int32_t reentering_init_hook(void *user_data, AgentBuffer *out)
{
    ReentryProbe *p = user_data;
    AgentBuffer b = junk_buffer();
    uint64_t id = 0;
    p->got[0] = agent_get_state(p->self, &b);
    p->empty_outs += buf_is_empty(&b);
    p->errors_named += strncmp(agent_last_error(), "agent_get_state: ", 17) == 0;
    b = junk_buffer();
    p->got[1] = set_s(p->self, "{\"x\":1}", &b);
    p->empty_outs += buf_is_empty(&b);
    p->errors_named += strncmp(agent_last_error(), "agent_set_state: ", 17) == 0;
    b = junk_buffer();
    p->got[2] = replace_s(p->self, "{\"x\":1}", &b);
    p->empty_outs += buf_is_empty(&b);
    p->errors_named += strncmp(agent_last_error(), "agent_replace_state: ", 21) == 0;
    p->got[3] = agent_close(p->self);
    p->errors_named += strncmp(agent_last_error(), "agent_close: ", 13) == 0;
    p->got[4] = agent_on_state_changed(p->self, record_hook, &p->freed_inside, count_free, &id);
    p->got[5] = agent_set_initial_state_hook(p->self, init_hook, &p->freed_inside, count_free);
    p->got[6] = agent_remove_hook(p->self, 1);
    b.data = NULL;
    b.len = 0;
    b.owner = NULL;
    p->other_rc = agent_get_state(p->other, &b);
    agent_buffer_free(&b);
    return agent_buffer_copy((const uint8_t *)"{\"init\":1}", 10, out);
}

static void test_own_handle_from_initial_state_hook_is_busy(void)
{
    ReentryProbe p;
    int i;
    memset(&p, 0, sizeof p);
    p.self = open_store("reentry.db", NULL);
    p.other = open_at(":memory:", NULL);
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(p.self, reentering_init_hook, &p, NULL));
    CHECK_STATE(p.self, "{\"init\":1}");
    for (i = 0; i < 7; i++) {
        check_(p.got[i] == AGENT_ERR_BUSY, __FILE__, __LINE__,
               "call %d into its own handle from the initial-state hook returned %s, expected AGENT_ERR_BUSY",
               i, agent_status_name(p.got[i]));
    }
    CHECK(p.empty_outs == 3);
    CHECK(p.errors_named == 4);
    CHECK(p.freed_inside == 2); /* both refused registrations released their user_data */
    CHECK_STATUS(AGENT_OK, p.other_rc);
    /* the handle is still usable and still open */
    CHECK_SET(p.self, "{\"y\":2}", "{\"init\":1,\"y\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(p.self));
    CHECK_STATUS(AGENT_OK, agent_close(p.other));
}

/* While the first write on a fresh agent asks its initial-state hook for the default, that
 * write's transaction holds the store's write lock: a second handle on the same file, with a
 * short busy timeout, cannot write and gets AGENT_ERR_BUSY. */
typedef struct {
    AgentHandle other;
    AgentStatus write_rc;
    AgentStatus read_rc;
    int error_named;
    int out_empty;
} LockProbe;

static int32_t write_other_handle_hook(void *user_data, AgentBuffer *out)
{
    LockProbe *p = user_data;
    AgentBuffer b = junk_buffer();
    p->write_rc = set_s(p->other, "{\"other\":1}", &b);
    p->error_named = strncmp(agent_last_error(), "agent_set_state: ", 17) == 0;
    p->out_empty = buf_is_empty(&b);
    agent_buffer_free(&b);
    p->read_rc = agent_get_state(p->other, &b); /* WAL: readers are not blocked */
    agent_buffer_free(&b);
    out->data = (const uint8_t *)"{\"init\":true}";
    out->len = 13;
    return 0;
}

static void test_write_lock_held_by_another_handle_gives_busy(void)
{
    AgentHandle a = open_store("lock.db", NULL);
    LockProbe p;
    memset(&p, 0, sizeof p);
    p.other = open_store("lock.db", "{\"busy_timeout_ms\":50}");
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(a, write_other_handle_hook, &p, NULL));
    CHECK_SET(a, "{\"a\":1}", "{\"init\":true,\"a\":1}");
    CHECK_STATUS(AGENT_ERR_BUSY, p.write_rc);
    CHECK(p.error_named);
    CHECK(p.out_empty);
    CHECK_STATUS(AGENT_OK, p.read_rc);
    CHECK_STATE(p.other, "{\"init\":true,\"a\":1}"); /* its refused write left no trace */
    CHECK_SET(p.other, "{\"other\":2}", "{\"init\":true,\"a\":1,\"other\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK_STATUS(AGENT_OK, agent_close(p.other));
}

/* ------------------------------------------------------------------------------------------ */
/* on_state_changed hooks                                                                     */
/* ------------------------------------------------------------------------------------------ */

static void test_state_changed_hook_sees_next_prev_and_patch(void)
{
    AgentHandle h = open_store("hook_views.db", "{\"initial_state\":{\"i\":0}}");
    Recorder r;
    recorder_init(&r, NULL);
    add_recorder(h, &r);

    CHECK_SET(h, "{ \"a\" : 1 }", "{\"i\":0,\"a\":1}");
    CHECK(r.calls == 1);
    CHECK(r.prev && strcmp(r.prev, "{\"i\":0}") == 0); /* the initial state */
    CHECK(r.next && strcmp(r.next, "{\"i\":0,\"a\":1}") == 0);
    CHECK(r.patch && strcmp(r.patch, "{\"a\":1}") == 0); /* compact, as applied */

    CHECK_SET(h, "{\"i\":null,\"b\":{\"c\":[1,2]}}", "{\"a\":1,\"b\":{\"c\":[1,2]}}");
    CHECK(r.calls == 2);
    CHECK(r.prev && strcmp(r.prev, "{\"i\":0,\"a\":1}") == 0);
    CHECK(r.patch && strcmp(r.patch, "{\"i\":null,\"b\":{\"c\":[1,2]}}") == 0);

    CHECK_REPLACE(h, "{\"z\":1}", "{\"z\":1}");
    CHECK(r.calls == 3);
    CHECK(r.prev && strcmp(r.prev, "{\"a\":1,\"b\":{\"c\":[1,2]}}") == 0);
    CHECK(r.next && strcmp(r.next, "{\"z\":1}") == 0);
    CHECK(r.patch == NULL); /* NULL (and length 0) for a replacement */

    /* an empty patch is still a committed change */
    CHECK_SET(h, "{}", "{\"z\":1}");
    CHECK(r.calls == 4);

    /* refused inputs are no change: no delivery */
    CHECK_STATUS(AGENT_ERR_JSON, set_s(h, "{", NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, replace_s(h, "[]", NULL));
    CHECK(r.calls == 4);
    CHECK(r.bad_views == 0);
    CHECK(r.chain_breaks == 0);
    CHECK(r.freed == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(r.freed == 1);
    recorder_destroy(&r);
}

static void test_state_changed_hooks_run_in_order_and_can_be_removed(void)
{
    AgentHandle h = open_store("hook_order.db", NULL);
    Recorder a, b, c;
    uint64_t ida, idb, idc;
    recorder_init(&a, "A");
    recorder_init(&b, "B");
    recorder_init(&c, "C");
    ida = add_recorder(h, &a);
    idb = add_recorder(h, &b);
    idc = add_recorder(h, &c);
    CHECK(ida != idb && idb != idc && ida != idc);

    g_log[0] = 0;
    CHECK_SET(h, "{\"n\":1}", "{\"n\":1}");
    CHECK(strcmp(g_log, "A:{\"n\":1};B:{\"n\":1};C:{\"n\":1};") == 0);

    CHECK_STATUS(AGENT_OK, agent_remove_hook(h, idb));
    CHECK(b.freed == 1); /* on removal, nothing running */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_remove_hook(h, idb)); /* removed already */
    CHECK_LAST_ERROR_FROM("agent_remove_hook");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_remove_hook(h, 987654321)); /* unknown id */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_remove_hook(h, 0));
    CHECK(b.freed == 1);

    g_log[0] = 0;
    CHECK_SET(h, "{\"n\":2}", "{\"n\":2}");
    CHECK(strcmp(g_log, "A:{\"n\":2};C:{\"n\":2};") == 0);
    CHECK(a.calls == 2 && b.calls == 1 && c.calls == 2);

    {
        /* a hook id belongs to its handle */
        AgentHandle other = open_at(":memory:", NULL);
        CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_remove_hook(other, ida));
        CHECK_STATUS(AGENT_OK, agent_close(other));
    }
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(a.freed == 1 && b.freed == 1 && c.freed == 1); /* on close, exactly once each */
    recorder_destroy(&a);
    recorder_destroy(&b);
    recorder_destroy(&c);
}

static void test_failed_hook_registration_frees_user_data(void)
{
    AgentHandle h = open_at(":memory:", NULL);
    int freed = 0;
    uint64_t id = 5;
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_on_state_changed(h, NULL, &freed, count_free, &id));
    CHECK_LAST_ERROR_FROM("agent_on_state_changed");
    CHECK(freed == 1);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_on_state_changed(h, record_hook, &freed, count_free, NULL));
    CHECK(freed == 2);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(h, record_hook, NULL, NULL, &id)); /* NULL free ok */
    CHECK_STATUS(AGENT_OK, agent_remove_hook(h, id));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(freed == 2);
}

static void test_failing_hook_returns_hook_status_and_change_stays(void)
{
    AgentHandle h = open_store("hook_fail.db", NULL);
    Recorder bad, good;
    AgentBuffer out = junk_buffer();
    uint64_t id;
    recorder_init(&bad, NULL);
    recorder_init(&good, NULL);
    id = add_recorder(h, &bad);
    add_recorder(h, &good);
    bad.rc = 3;

    CHECK_STATUS(AGENT_ERR_HOOK, set_s(h, "{\"a\":1}", &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_set_state");
    CHECK_STATE(h, "{\"a\":1}"); /* committed all the same */
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_HOOK, replace_s(h, "{\"b\":2}", &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_replace_state");
    CHECK_STATE(h, "{\"b\":2}");
    CHECK(bad.calls == 2);
    CHECK(good.calls == 2);
    CHECK(bad.chain_breaks == 0 && good.chain_breaks == 0);

    CHECK_STATUS(AGENT_OK, agent_remove_hook(h, id));
    CHECK_SET(h, "{\"c\":3}", "{\"b\":2,\"c\":3}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("hook_fail.db", NULL);
    CHECK_STATE(h, "{\"b\":2,\"c\":3}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(bad.freed == 1 && good.freed == 1);
    recorder_destroy(&bad);
    recorder_destroy(&good);
}

/* A hook that, on the first delivery, reads and writes its own handle. */
typedef struct {
    AgentHandle h;
    int calls;
    AgentStatus get_rc, set_rc, replace_rc;
    char *seen_inside;  /* get_state from inside the first delivery */
    char *set_result;   /* what the nested set_state returned */
    int freed;
} NestingHook;

static int32_t nesting_hook(void *user_data, const AgentStateChange *c)
{
    NestingHook *n = user_data;
    n->calls++;
    log_event("enter:%.*s|prev:%.*s;", (int)c->next_len, (const char *)c->next, (int)c->prev_len,
              (const char *)c->prev);
    if (n->calls == 1) {
        AgentBuffer b = { NULL, 0, NULL };
        n->get_rc = agent_get_state(n->h, &b);
        n->seen_inside = b.data ? dup_bytes(b.data, b.len) : NULL;
        agent_buffer_free(&b);
        n->set_rc = set_s(n->h, "{\"nested\":1}", &b);
        n->set_result = b.data ? dup_bytes(b.data, b.len) : NULL;
        agent_buffer_free(&b);
        n->replace_rc = replace_s(n->h, "{\"replaced\":2}", NULL);
        log_event("nested-done;");
    }
    log_event("exit;");
    return 0;
}

static void nesting_hook_free(void *user_data)
{
    ((NestingHook *)user_data)->freed++;
}

static void test_hook_may_change_its_own_handle_and_nested_change_comes_after(void)
{
    NestingHook n;
    uint64_t id;
    memset(&n, 0, sizeof n);
    n.h = open_store("hook_nested.db", NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(n.h, nesting_hook, &n, nesting_hook_free, &id));
    g_log[0] = 0;
    {
        AgentBuffer out = { NULL, 0, NULL };
        CHECK_STATUS(AGENT_OK, set_s(n.h, "{\"start\":0}", &out));
        CHECK_BUF(out, "{\"start\":0}"); /* the outer call returns its own change */
        agent_buffer_free(&out);
    }
    CHECK_STATUS(AGENT_OK, n.get_rc);
    CHECK_STATUS(AGENT_OK, n.set_rc);
    CHECK_STATUS(AGENT_OK, n.replace_rc);
    CHECK(n.seen_inside && strcmp(n.seen_inside, "{\"start\":0}") == 0);
    CHECK(n.set_result && strcmp(n.set_result, "{\"start\":0,\"nested\":1}") == 0);
    /* the nested changes are delivered after the running hook returns, in commit order */
    check_(strcmp(g_log, "enter:{\"start\":0}|prev:{};nested-done;exit;"
                         "enter:{\"start\":0,\"nested\":1}|prev:{\"start\":0};exit;"
                         "enter:{\"replaced\":2}|prev:{\"start\":0,\"nested\":1};exit;") == 0,
           __FILE__, __LINE__, "delivery order was %s", g_log);
    CHECK(n.calls == 3);
    CHECK_STATE(n.h, "{\"replaced\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(n.h));
    CHECK(n.freed == 1);
    free(n.seen_inside);
    free(n.set_result);
}

/* A hook that removes itself, or closes its handle, from inside its own delivery. */
typedef struct {
    AgentHandle h;
    uint64_t id;
    int close_instead; /* 0: remove itself; 1: close the handle */
    int calls;
    int freed;
    int freed_while_running;
    AgentStatus rc, after_rc;
} SelfEndingHook;

static int32_t self_ending_hook(void *user_data, const AgentStateChange *c)
{
    SelfEndingHook *s = user_data;
    AgentBuffer b = junk_buffer();
    (void)c;
    s->calls++;
    s->rc = s->close_instead ? agent_close(s->h) : agent_remove_hook(s->h, s->id);
    s->freed_while_running = s->freed; /* its user_data is still in use: must not be freed yet */
    s->after_rc = s->close_instead ? agent_get_state(s->h, &b) : agent_remove_hook(s->h, s->id);
    agent_buffer_free(&b);
    return 0;
}

static void self_ending_free(void *user_data)
{
    ((SelfEndingHook *)user_data)->freed++;
}

static void test_hook_may_remove_itself(void)
{
    SelfEndingHook s;
    Recorder later;
    memset(&s, 0, sizeof s);
    recorder_init(&later, NULL);
    s.h = open_store("hook_remove_self.db", NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(s.h, self_ending_hook, &s, self_ending_free, &s.id));
    add_recorder(s.h, &later);
    CHECK_SET(s.h, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, s.rc);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, s.after_rc);
    CHECK(s.freed_while_running == 0);
    CHECK(s.freed == 1);
    CHECK_SET(s.h, "{\"a\":2}", "{\"a\":2}");
    CHECK(s.calls == 1);
    CHECK(later.calls == 2);
    CHECK_STATUS(AGENT_OK, agent_close(s.h));
    CHECK(s.freed == 1 && later.freed == 1);
    recorder_destroy(&later);
}

static void test_closing_handle_from_inside_its_own_hook(void)
{
    SelfEndingHook s;
    Recorder other;
    AgentBuffer out = { NULL, 0, NULL };
    AgentStatus rc;
    memset(&s, 0, sizeof s);
    recorder_init(&other, NULL);
    s.close_instead = 1;
    s.h = open_store("hook_close.db", NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(s.h, self_ending_hook, &s, self_ending_free, &s.id));
    add_recorder(s.h, &other);
    rc = set_s(s.h, "{\"a\":1}", &out);
    CHECK_STATUS(AGENT_OK, rc); /* the change committed and every hook returned 0 */
    if (rc == AGENT_OK) {
        CHECK_BUF(out, "{\"a\":1}");
    }
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, s.rc);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, s.after_rc);
    CHECK(s.freed_while_running == 0);
    CHECK(s.freed == 1);
    CHECK(other.freed == 1);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_close(s.h));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, set_s(s.h, "{\"a\":2}", NULL));
    recorder_destroy(&other);
    s.h = open_store("hook_close.db", NULL);
    CHECK_STATE(s.h, "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(s.h));
}

/* A hook that blocks inside its delivery until released, to act on its handle meanwhile. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int inside, release, freed;
    AgentHandle h;
    AgentStatus set_rc;
} BlockingHook;

static int32_t blocking_hook(void *user_data, const AgentStateChange *c)
{
    BlockingHook *b = user_data;
    (void)c;
    pthread_mutex_lock(&b->mu);
    b->inside = 1;
    pthread_cond_broadcast(&b->cond);
    while (!b->release) {
        pthread_cond_wait(&b->cond, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return 0;
}

static void blocking_hook_free(void *user_data)
{
    BlockingHook *b = user_data;
    pthread_mutex_lock(&b->mu);
    b->freed++;
    pthread_mutex_unlock(&b->mu);
}

static void *set_state_thread(void *arg)
{
    BlockingHook *b = arg;
    b->set_rc = set_s(b->h, "{\"a\":1}", NULL);
    return NULL;
}

/* Removing a hook (close_instead 0) or closing its handle (1) while another thread is inside
 * the hook returns at once; the hook's user_data is released only when that delivery ends. */
static void check_release_waits_for_running_delivery(int close_instead)
{
    BlockingHook b;
    pthread_t t;
    uint64_t id = 0;
    int freed_while_inside;
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cond, NULL);
    b.h = open_at(":memory:", NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(b.h, blocking_hook, &b, blocking_hook_free, &id));
    CHECK(pthread_create(&t, NULL, set_state_thread, &b) == 0);
    pthread_mutex_lock(&b.mu);
    while (!b.inside) {
        pthread_cond_wait(&b.cond, &b.mu);
    }
    pthread_mutex_unlock(&b.mu);

    if (close_instead) {
        AgentBuffer out = junk_buffer();
        CHECK_STATUS(AGENT_OK, agent_close(b.h));
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_state(b.h, &out));
        CHECK_EMPTY(out);
    } else {
        CHECK_STATUS(AGENT_OK, agent_remove_hook(b.h, id));
    }
    pthread_mutex_lock(&b.mu);
    freed_while_inside = b.freed;
    b.release = 1;
    pthread_cond_broadcast(&b.cond);
    pthread_mutex_unlock(&b.mu);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(freed_while_inside == 0);
    CHECK(b.freed == 1);
    CHECK_STATUS(AGENT_OK, b.set_rc);
    if (!close_instead) {
        CHECK_SET(b.h, "{\"b\":2}", "{\"a\":1,\"b\":2}"); /* no longer delivered: no blocking */
        CHECK_STATUS(AGENT_OK, agent_close(b.h));
        CHECK(b.freed == 1);
    }
    pthread_cond_destroy(&b.cond);
    pthread_mutex_destroy(&b.mu);
}

static void test_remove_or_close_during_delivery_defers_free_until_it_ends(void)
{
    check_release_waits_for_running_delivery(0);
    check_release_waits_for_running_delivery(1);
}

/* ------------------------------------------------------------------------------------------ */
/* Versions and compare-and-set                                                               */
/* ------------------------------------------------------------------------------------------ */

/* agent_get_state_versioned gives `text` and `version` together. */
#define CHECK_VERSIONED(h, text, version) \
    check_versioned_((h), (text), (version), __FILE__, __LINE__)

static int check_versioned_(AgentHandle h, const char *text, uint64_t version, const char *file,
                            int line)
{
    AgentBuffer b = junk_buffer();
    uint64_t v = 12345;
    AgentStatus rc = agent_get_state_versioned(h, &b, &v);
    int ok = check_(rc == AGENT_OK && buf_is(&b, text) && v == version, file, line,
                    "agent_get_state_versioned gave %.*s at version %llu (status %s, %s), "
                    "expected %s at version %llu",
                    b.data ? (int)b.len : 6, b.data ? (const char *)b.data : "(NULL)",
                    (unsigned long long)v, agent_status_name(rc), error_if_failed(rc), text,
                    (unsigned long long)version);
    agent_buffer_free(&b);
    return ok;
}

/* The state is exactly `before` (the bytes of an earlier state_copy) at version `version`. */
#define CHECK_UNCHANGED(h, before, version) \
    check_unchanged_((h), (before), (version), __FILE__, __LINE__)

static void check_unchanged_(AgentHandle h, const char *before, uint64_t version, const char *file,
                             int line)
{
    char *after = state_copy(h);
    check_(before != NULL && after != NULL && strcmp(before, after) == 0, file, line,
           "the state changed from %s to %s", before ? before : "(NULL)",
           after ? after : "(NULL)");
    free(after);
    check_versioned_(h, before ? before : "", version, file, line);
}

static void test_get_state_versioned_reads_state_and_version_together(void)
{
    AgentHandle h = open_store("versioned.db", "{\"initial_state\":{\"n\":0}}");
    AgentHandle other, ro;
    AgentBuffer out = junk_buffer();
    uint64_t v = 99;

    CHECK_VERSIONED(h, "{\"n\":0}", 0); /* nothing stored: the initial state at version 0 */
    CHECK_STATUS(AGENT_OK, agent_get_state_versioned(h, &out, NULL)); /* out_version may be NULL */
    CHECK_BUF(out, "{\"n\":0}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_versioned(h, NULL, &v));
    CHECK_LAST_ERROR_FROM("agent_get_state_versioned");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_versioned(h, NULL, NULL));
    CHECK_VERSIONED(h, "{\"n\":0}", 0); /* reading stored nothing */

    CHECK_SET(h, "{\"n\":1}", "{\"n\":1}");
    CHECK_VERSIONED(h, "{\"n\":1}", 1);
    CHECK_REPLACE(h, "{\"m\":2}", "{\"m\":2}");
    CHECK_VERSIONED(h, "{\"m\":2}", 2);
    CHECK_SET(h, "{}", "{\"m\":2}"); /* an empty patch is a committed change too */
    CHECK_VERSIONED(h, "{\"m\":2}", 3);
    /* refused writes do not count */
    CHECK_STATUS(AGENT_ERR_JSON, set_s(h, "{", NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, replace_s(h, "[]", NULL));
    CHECK_VERSIONED(h, "{\"m\":2}", 3);

    /* every handle's commits count, and the version is stored with the state */
    other = open_store("versioned.db", NULL);
    CHECK_VERSIONED(other, "{\"m\":2}", 3);
    CHECK_SET(other, "{\"o\":1}", "{\"m\":2,\"o\":1}");
    CHECK_VERSIONED(h, "{\"m\":2,\"o\":1}", 4);
    CHECK_STATUS(AGENT_OK, agent_close(other));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    ro = open_store("versioned.db", "{\"read_only\":true}");
    CHECK_VERSIONED(ro, "{\"m\":2,\"o\":1}", 4);
    CHECK_STATUS(AGENT_OK, agent_close(ro));
}

static void test_set_state_if_writes_only_at_the_expected_version(void)
{
    AgentHandle h = open_store("cas_set.db", NULL);
    AgentHandle ro;
    Recorder r;
    AgentBuffer out = junk_buffer();
    uint64_t v = 99;
    char *before;
    recorder_init(&r, NULL);
    add_recorder(h, &r);

    /* nothing stored yet: only version 0 is current */
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, 5, "{\"x\":1}", &out, &v));
    CHECK_LAST_ERROR_FROM("agent_set_state_if");
    CHECK_EMPTY(out);
    CHECK_VERSIONED(h, "{}", 0);
    CHECK_STATUS(AGENT_OK, set_if_s(h, 0, "{\"x\":1,\"keep\":[1,2]}", &out, &v));
    CHECK_BUF(out, "{\"x\":1,\"keep\":[1,2]}");
    CHECK(v == 1);
    agent_buffer_free(&out);

    /* a stale or a future version: CONFLICT, nothing written, no delivery */
    before = state_copy(h);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, 0, "{\"x\":2}", &out, &v));
    CHECK_LAST_ERROR_FROM("agent_set_state_if");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, 2, "{\"x\":2}", &out, NULL));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, UINT64_MAX, "{\"x\":2}", NULL, NULL));
    CHECK_UNCHANGED(h, before, 1);
    CHECK(r.calls == 1);
    free(before);

    /* at the current version it merges; out and out_version may be NULL */
    CHECK_STATUS(AGENT_OK, set_if_s(h, 1, "{\"x\":2}", NULL, NULL));
    CHECK_VERSIONED(h, "{\"x\":2,\"keep\":[1,2]}", 2);
    CHECK(r.calls == 2 && r.version == 2);
    CHECK(r.patch != NULL && strcmp(r.patch, "{\"x\":2}") == 0);

    /* inputs are refused as agent_set_state refuses them, nothing written */
    before = state_copy(h);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_set_state_if(h, 2, NULL, 0, NULL, NULL));
    CHECK_LAST_ERROR_FROM("agent_set_state_if");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, set_if_s(h, 2, "[1]", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_JSON, set_if_s(h, 2, "{\"a\":", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_CODEC, set_if_s(h, 2, "{\"a\":1,\"a\":2}", NULL, NULL));
    CHECK_UNCHANGED(h, before, 2);
    free(before);
    CHECK(r.calls == 2 && r.version_breaks == 0 && r.chain_breaks == 0 && r.bad_views == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));

    /* a read-only handle cannot write even at the right version */
    ro = open_store("cas_set.db", "{\"read_only\":true}");
    CHECK_STATUS(AGENT_ERR_STORAGE, set_if_s(ro, 2, "{\"x\":3}", NULL, NULL));
    CHECK_VERSIONED(ro, "{\"x\":2,\"keep\":[1,2]}", 2);
    CHECK_STATUS(AGENT_OK, agent_close(ro));
    CHECK(r.freed == 1);
    recorder_destroy(&r);
}

static void test_replace_state_if_writes_only_at_the_expected_version(void)
{
    AgentHandle h = open_store("cas_replace.db", "{\"initial_state\":{\"i\":1}}");
    Recorder r;
    AgentBuffer out = junk_buffer();
    uint64_t v = 99;
    char *before;
    recorder_init(&r, NULL);
    add_recorder(h, &r);

    CHECK_STATUS(AGENT_ERR_CONFLICT, replace_if_s(h, 1, "{\"a\":1}", &out, &v));
    CHECK_LAST_ERROR_FROM("agent_replace_state_if");
    CHECK_EMPTY(out);
    CHECK_VERSIONED(h, "{\"i\":1}", 0);
    CHECK_STATUS(AGENT_OK, replace_if_s(h, 0, "{\"a\":1}", &out, &v));
    CHECK_BUF(out, "{\"a\":1}"); /* nothing of the initial state survives */
    CHECK(v == 1);
    agent_buffer_free(&out);
    CHECK(r.calls == 1 && r.version == 1 && r.patch == NULL);
    CHECK(r.prev != NULL && strcmp(r.prev, "{\"i\":1}") == 0);

    before = state_copy(h);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_CONFLICT, replace_if_s(h, 0, "{\"b\":2}", &out, &v));
    CHECK_LAST_ERROR_FROM("agent_replace_state_if");
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_CONFLICT, replace_if_s(h, 7, "{\"b\":2}", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_replace_state_if(h, 1, NULL, 3, NULL, NULL));
    CHECK_LAST_ERROR_FROM("agent_replace_state_if");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, replace_if_s(h, 1, "\"s\"", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_JSON, replace_if_s(h, 1, "{\"b\"", NULL, NULL));
    CHECK_UNCHANGED(h, before, 1);
    free(before);
    CHECK(r.calls == 1);

    CHECK_STATUS(AGENT_OK, replace_if_s(h, 1, "{\"b\":2}", NULL, NULL));
    CHECK_VERSIONED(h, "{\"b\":2}", 2);
    CHECK(r.calls == 2 && r.version == 2 && r.patch == NULL && r.version_breaks == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    recorder_destroy(&r);
}

static void test_compare_and_set_sees_other_handles_commits(void)
{
    AgentHandle a = open_store("cas_two.db", NULL);
    AgentHandle b = open_store("cas_two.db", NULL);
    AgentBuffer got = { NULL, 0, NULL };
    uint64_t va = 0, v = 0;

    CHECK_SET(a, "{\"count\":0}", "{\"count\":0}");
    /* a reads, b commits in between: a's write at the version it read is refused */
    CHECK_STATUS(AGENT_OK, agent_get_state_versioned(a, &got, &va));
    agent_buffer_free(&got);
    CHECK(va == 1);
    CHECK_STATUS(AGENT_OK, set_if_s(b, 1, "{\"count\":1}", NULL, &v));
    CHECK(v == 2);
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(a, va, "{\"count\":1}", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_CONFLICT, replace_if_s(a, va, "{\"count\":1}", NULL, NULL));
    CHECK_VERSIONED(a, "{\"count\":1}", 2);
    /* the retry reads again and succeeds */
    CHECK_STATUS(AGENT_OK, agent_get_state_versioned(a, &got, &va));
    CHECK(va == 2 && member_int((const char *)got.data, got.len, "count") == 1);
    agent_buffer_free(&got);
    CHECK_STATUS(AGENT_OK, set_if_s(a, va, "{\"count\":2}", NULL, &v));
    CHECK(v == 3);
    CHECK_VERSIONED(b, "{\"count\":2}", 3);
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK_STATUS(AGENT_OK, agent_close(b));
}

static void test_state_changed_hooks_see_the_version_of_each_change(void)
{
    AgentHandle h = open_store("hook_versions.db", NULL);
    AgentHandle other = open_store("hook_versions.db", NULL);
    Recorder r;
    recorder_init(&r, NULL);

    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}"); /* version 1, before the hook */
    add_recorder(h, &r);
    CHECK_SET(h, "{\"a\":2}", "{\"a\":2}");
    CHECK(r.calls == 1 && r.version == 2);
    CHECK_REPLACE(h, "{\"b\":1}", "{\"b\":1}");
    CHECK(r.calls == 2 && r.version == 3);
    CHECK_STATUS(AGENT_OK, set_if_s(h, 3, "{\"c\":1}", NULL, NULL));
    CHECK(r.calls == 3 && r.version == 4);
    CHECK_STATUS(AGENT_OK, replace_if_s(h, 4, "{\"d\":1}", NULL, NULL));
    CHECK(r.calls == 4 && r.version == 5);
    CHECK(r.version_breaks == 0);
    /* without the change log another handle's commit is not delivered; the next delivery
     * carries the store's version */
    CHECK_SET(other, "{\"e\":1}", "{\"d\":1,\"e\":1}");
    CHECK_SET(h, "{\"f\":1}", "{\"d\":1,\"e\":1,\"f\":1}");
    CHECK(r.calls == 5 && r.version == 7);
    CHECK(r.version_breaks == 1);
    CHECK_STATUS(AGENT_OK, agent_close(other));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    recorder_destroy(&r);
}

/* ------------------------------------------------------------------------------------------ */
/* Validation gate                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* The last error holds `text` (the gate's message). */
#define CHECK_LAST_ERROR_HAS(text) \
    check_(strstr(agent_last_error(), (text)) != NULL, __FILE__, __LINE__, \
           "last error \"%s\" does not contain \"%s\"", agent_last_error(), (text))

static void test_validator_rejects_with_its_message_and_nothing_is_written(void)
{
    AgentHandle h = open_store("gate.db", NULL);
    Recorder r;
    Gate g;
    AgentBuffer out = junk_buffer();
    char *before;
    recorder_init(&r, NULL);
    add_recorder(h, &r);
    gate_init(&g, "\"balance\":-", "balance would go negative: \xc3\xa9 \"quoted\"", 3);
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g, gate_free));
    CHECK_SET(h, "{\"balance\":10}", "{\"balance\":10}");
    CHECK(g.calls == 1 && r.calls == 1);
    before = state_copy(h);

    CHECK_STATUS(AGENT_ERR_REJECTED, set_s(h, "{\"balance\":-5}", &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_set_state");
    CHECK_LAST_ERROR_HAS("balance would go negative: \xc3\xa9 \"quoted\"");
    CHECK(g.calls == 2);
    CHECK(r.calls == 1); /* no hook for a rejected change */
    CHECK_UNCHANGED(h, before, 1);

    /* without a message the gate's return value is reported; any non-zero value rejects */
    g.message = NULL;
    g.rc = -42;
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_REJECTED, replace_s(h, "{\"balance\":-1}", &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_replace_state");
    CHECK_LAST_ERROR_HAS("-42");
    CHECK(g.calls == 3 && r.calls == 1);
    CHECK_UNCHANGED(h, before, 1);

    /* a message handed back with an accepted change is dropped (and freed: valgrind) */
    g.message = "ignored";
    g.message_always = 1;
    CHECK_SET(h, "{\"balance\":11}", "{\"balance\":11}");
    CHECK(g.calls == 4 && r.calls == 2 && r.version == 2);
    CHECK(g.bad_views == 0);

    /* removing the gate lets the change through */
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, NULL, NULL, NULL));
    CHECK(g.freed == 1);
    CHECK_SET(h, "{\"balance\":-5}", "{\"balance\":-5}");
    CHECK(g.calls == 4 && r.calls == 3);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(g.freed == 1 && r.freed == 1);
    free(before);
    gate_destroy(&g);
    recorder_destroy(&r);
}

static void test_validator_sees_the_change_about_to_commit(void)
{
    AgentHandle h = open_store("gate_views.db",
                               "{\"initial_state\":{\"i\":0},\"change_log\":{\"keep_last\":10}}");
    Gate g;
    gate_init(&g, NULL, NULL, 1);
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g, gate_free));

    CHECK_SET(h, "{ \"a\" : 1 , \"x\" : null }", "{\"i\":0,\"a\":1}");
    CHECK(g.calls == 1 && g.version == 1);
    CHECK(g.prev != NULL && strcmp(g.prev, "{\"i\":0}") == 0); /* the initial state */
    CHECK(g.next != NULL && strcmp(g.next, "{\"i\":0,\"a\":1}") == 0);
    CHECK(g.patch != NULL && strcmp(g.patch, "{\"a\":1,\"x\":null}") == 0);
    CHECK_REPLACE(h, "{\"b\":2}", "{\"b\":2}");
    CHECK(g.calls == 2 && g.version == 2 && g.patch == NULL);
    CHECK(g.prev != NULL && strcmp(g.prev, "{\"i\":0,\"a\":1}") == 0);
    CHECK_STATUS(AGENT_OK, set_if_s(h, 2, "{\"c\":3}", NULL, NULL));
    CHECK(g.calls == 3 && g.version == 3);
    CHECK(g.next != NULL && strcmp(g.next, "{\"b\":2,\"c\":3}") == 0);
    CHECK_STATUS(AGENT_OK, agent_restore_state(h, 1, NULL, NULL));
    CHECK(g.calls == 4 && g.version == 4 && g.patch == NULL); /* a restore is a replacement */
    CHECK(g.prev != NULL && strcmp(g.prev, "{\"b\":2,\"c\":3}") == 0);
    CHECK(g.next != NULL && strcmp(g.next, "{\"i\":0,\"a\":1}") == 0);
    CHECK(g.bad_views == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(g.freed == 1);
    gate_destroy(&g);
}

static void test_validator_gates_every_write_of_its_handle_and_no_other(void)
{
    AgentHandle h = open_store("gate_scope.db", "{\"change_log\":{\"keep_last\":10}}");
    AgentHandle other = open_store("gate_scope.db", NULL);
    Gate g;
    char *before;
    int calls;
    gate_init(&g, "forbidden", "not allowed here", 1);
    CHECK_SET(h, "{\"ok\":1}", "{\"ok\":1}");
    CHECK_SET(other, "{\"forbidden\":1}", "{\"ok\":1,\"forbidden\":1}"); /* version 2 */
    CHECK_SET(h, "{\"forbidden\":null}", "{\"ok\":1}");                 /* version 3 */
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g, gate_free));
    before = state_copy(h);

    CHECK_STATUS(AGENT_ERR_REJECTED, set_s(h, "{\"forbidden\":2}", NULL));
    CHECK_LAST_ERROR_FROM("agent_set_state");
    CHECK_LAST_ERROR_HAS("not allowed here");
    CHECK_STATUS(AGENT_ERR_REJECTED, replace_s(h, "{\"forbidden\":2}", NULL));
    CHECK_LAST_ERROR_FROM("agent_replace_state");
    CHECK_STATUS(AGENT_ERR_REJECTED, set_if_s(h, 3, "{\"forbidden\":2}", NULL, NULL));
    CHECK_LAST_ERROR_FROM("agent_set_state_if");
    CHECK_LAST_ERROR_HAS("not allowed here");
    CHECK_STATUS(AGENT_ERR_REJECTED, replace_if_s(h, 3, "{\"forbidden\":2}", NULL, NULL));
    CHECK_LAST_ERROR_FROM("agent_replace_state_if");
    {
        AgentBuffer out = junk_buffer();
        uint64_t v = 99;
        CHECK_STATUS(AGENT_ERR_REJECTED, agent_restore_state(h, 2, &out, &v));
        CHECK_LAST_ERROR_FROM("agent_restore_state");
        CHECK_LAST_ERROR_HAS("not allowed here");
        CHECK_EMPTY(out);
    }
    CHECK(g.calls == 5);
    CHECK_UNCHANGED(h, before, 3);

    /* a conflict, a malformed or unstorable input, a future version never reach the gate */
    calls = g.calls;
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, 1, "{\"forbidden\":2}", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_JSON, set_s(h, "{\"forbidden\":", NULL));
    CHECK_STATUS(AGENT_ERR_CODEC, set_s(h, "{\"forbidden\":{\"$date\":\"x\"}}", NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_restore_state(h, 99, NULL, NULL));
    CHECK(g.calls == calls);

    /* other handles are not gated by it */
    CHECK_SET(other, "{\"forbidden\":3}", "{\"ok\":1,\"forbidden\":3}");
    CHECK(g.calls == calls);
    CHECK_STATUS(AGENT_OK, agent_close(other));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(g.freed == 1);
    free(before);
    gate_destroy(&g);
}

static void test_validator_user_data_is_freed_exactly_once(void)
{
    AgentHandle h = open_store("gate_free.db", NULL);
    Gate g1, g2, g3;
    int freed = 0;
    gate_init(&g1, NULL, NULL, 1);
    gate_init(&g2, NULL, NULL, 1);
    gate_init(&g3, NULL, NULL, 1);

    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g1, gate_free));
    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}");
    CHECK(g1.calls == 1 && g1.freed == 0);
    /* replaced: the old one is released at once, and no longer called */
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g2, gate_free));
    CHECK(g1.freed == 1 && g2.freed == 0);
    CHECK_SET(h, "{\"a\":2}", "{\"a\":2}");
    CHECK(g1.calls == 1 && g2.calls == 1);
    /* removed with a NULL fn: the gate's user_data is released, and so is the one passed
     * along with the NULL fn */
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, NULL, &freed, count_free));
    CHECK(g2.freed == 1 && freed == 1);
    CHECK_SET(h, "{\"a\":3}", "{\"a\":3}");
    CHECK(g2.calls == 1);
    /* removing when none is set is fine; a NULL free_user_data too */
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, NULL, NULL, NULL));
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g3, NULL));
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g3, gate_free));
    CHECK(g3.freed == 0); /* the first registration had no finalizer */
    CHECK_SET(h, "{\"a\":4}", "{\"a\":4}");
    CHECK(g3.calls == 1);
    /* closed: released exactly once */
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(g1.freed == 1 && g2.freed == 1 && g3.freed == 1 && freed == 1);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_set_validator(h, gate_fn, &g3, gate_free));
    CHECK(g3.freed == 2); /* a failed registration releases its own user_data right away */
    gate_destroy(&g1);
    gate_destroy(&g2);
    gate_destroy(&g3);
}

static void test_own_handle_from_validator_is_busy(void)
{
    AgentHandle h = open_store("gate_busy.db", "{\"change_log\":{\"keep_last\":10}}");
    AgentHandle other = open_at(":memory:", NULL);
    Gate g;
    gate_init(&g, NULL, NULL, 1);
    g.self = h;
    g.other = other;
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g, gate_free));

    CHECK_SET(h, "{\"outer\":1}", "{\"outer\":1}"); /* none of the inner writes happened */
    CHECK(g.calls == 1);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_get_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_get_versioned_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_set_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_set_if_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_replace_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_gate_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_hook_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_poll_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_restore_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_close_rc);
    CHECK_STATUS(AGENT_OK, g.other_get_rc); /* other handles may be used */
    CHECK_VERSIONED(h, "{\"outer\":1}", 1); /* the handle is still open, the gate still set */
    CHECK(g.freed == 0);
    g.self = 0;
    CHECK_SET(h, "{\"outer\":2}", "{\"outer\":2}");
    CHECK(g.calls == 2);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK_STATUS(AGENT_OK, agent_close(other));
    CHECK(g.freed == 1);
    gate_destroy(&g);
}

/* ------------------------------------------------------------------------------------------ */
/* Change log: agent_poll, agent_changes_since, agent_get_state_at, agent_restore_state        */
/* ------------------------------------------------------------------------------------------ */

/* An on_state_changed hook that writes each delivery as "<version>|<prev>|<next>|<patch>;"
 * (patch "NULL" for a replacement). */
typedef struct {
    char text[4096];
    int calls;
} History;

static int32_t history_hook(void *user_data, const AgentStateChange *c)
{
    History *hist = user_data;
    size_t n = strlen(hist->text);
    hist->calls++;
    snprintf(hist->text + n, sizeof hist->text - n, "%llu|%.*s|%.*s|%.*s;",
             (unsigned long long)c->version, (int)c->prev_len, (const char *)c->prev,
             (int)c->next_len, (const char *)c->next, c->patch ? (int)c->patch_len : 4,
             c->patch ? (const char *)c->patch : "NULL");
    return 0;
}

#define CHECK_HISTORY(hist, expected) \
    check_(strcmp((hist).text, (expected)) == 0, __FILE__, __LINE__, \
           "deliveries were\n      %s\n    expected\n      %s", (hist).text, (expected))

static void test_change_log_option_is_validated_and_recorded_in_the_store(void)
{
    const char *p = tmp_path("log_option.db");
    AgentHandle a, b, c;
    AgentBuffer out = junk_buffer();

    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_last\":0}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_last\":-1}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_last\":1.5}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_last\":\"3\"}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_seconds\":0}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_days\":3}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p,
                     "{\"change_log\":{\"keep_last\":3,\"other\":1}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":true}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":null}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":[2]}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":3}");

    /* switched on by one handle, recorded in the file: a handle without the option logs */
    a = open_at(p, "{\"change_log\":{\"keep_last\":5,\"keep_seconds\":3600}}");
    CHECK_STATUS(AGENT_OK, agent_close(a));
    b = open_at(p, NULL);
    CHECK_SET(b, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_changes_since(b, 0, &out));
    CHECK(out.data != NULL && strstr((const char *)out.data, "\"version\":1") != NULL);
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_poll(b, NULL));

    /* switched off by another handle: off for every handle, the log dropped */
    c = open_at(p, "{\"change_log\":false}");
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_changes_since(b, 0, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_poll(b, NULL));
    CHECK_SET(c, "{\"b\":2}", "{\"a\":1,\"b\":2}");
    CHECK_VERSIONED(b, "{\"a\":1,\"b\":2}", 2); /* versions go on without the log */
    CHECK_STATUS(AGENT_OK, agent_close(c));

    /* on again: nothing of before is retained */
    c = open_at(p, "{\"change_log\":{\"keep_last\":5}}");
    out = junk_buffer();
    CHECK_STATUS(AGENT_OK, agent_changes_since(c, 2, &out));
    CHECK_BUF(out, "[]");
    agent_buffer_free(&out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_changes_since(c, 0, &out));
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_get_state_at(c, 1, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_OK, agent_close(c));
    CHECK_STATUS(AGENT_OK, agent_close(b));
}

static void test_change_log_keep_seconds_prunes_old_changes(void)
{
    AgentHandle h = open_store("log_seconds.db", "{\"change_log\":{\"keep_seconds\":1}}");
    AgentBuffer out = junk_buffer();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_SET(h, "{\"n\":1}", "{\"n\":1}");
    CHECK_SET(h, "{\"n\":2}", "{\"n\":2}");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* Both within the second: only checked when the two writes really were (a loaded machine
     * may stall between them; what follows holds either way). */
    if ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 900) {
        CHECK_STATUS(AGENT_OK, agent_changes_since(h, 0, &out));
        agent_buffer_free(&out);
    }
    sleep_ms(1200);
    CHECK_SET(h, "{\"n\":3}", "{\"n\":3}"); /* prunes what is older than a second */
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_changes_since(h, 0, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_GAP, agent_get_state_at(h, 1, &out));
    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 2, &out));
    CHECK(out.data != NULL && strstr((const char *)out.data, "\"version\":3") != NULL &&
          strstr((const char *)out.data, "\"version\":2") == NULL);
    agent_buffer_free(&out);
    sleep_ms(1200);
    /* nothing is pruned without a write: the newest change is always kept */
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 3, &out));
    CHECK_BUF(out, "{\"n\":3}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_poll_needs_the_change_log(void)
{
    AgentHandle h = open_store("poll_off.db", NULL);
    size_t n = 77;
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_poll(h, &n));
    CHECK_LAST_ERROR_FROM("agent_poll");
    CHECK_LAST_ERROR_HAS("change_log");
    CHECK(n == 0);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_poll(h, NULL));
    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_poll(h, &n));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(":memory:", NULL);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_poll(h, &n));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    /* with the log on, a poll with nothing new delivers 0 */
    h = open_store("poll_off.db", "{\"change_log\":{\"keep_last\":1}}");
    n = 77;
    CHECK_STATUS(AGENT_OK, agent_poll(h, &n));
    CHECK(n == 0);
    CHECK_STATUS(AGENT_OK, agent_poll(h, NULL));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_poll_delivers_other_handles_changes_once_in_commit_order(void)
{
    const char *opts = "{\"change_log\":{\"keep_last\":100},\"synchronous\":\"normal\"}";
    AgentHandle a = open_store("poll.db", opts);
    AgentHandle b = open_store("poll.db", NULL); /* logs too: the store says so */
    AgentHandle late;
    History ha, hl;
    Recorder r;
    uint64_t id;
    size_t n = 77;
    memset(&ha, 0, sizeof ha);
    memset(&hl, 0, sizeof hl);
    recorder_init(&r, NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(a, history_hook, &ha, NULL, &id));
    add_recorder(a, &r);

    CHECK_SET(b, "{\"x\":1}", "{\"x\":1}");
    CHECK_REPLACE(b, "{\"y\":2}", "{\"y\":2}");
    CHECK(ha.calls == 0); /* nothing is delivered before a polls */
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 2);
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 0); /* each change once */
    /* a write through a first delivers what b committed before it */
    CHECK_SET(b, "{\"z\":3}", "{\"y\":2,\"z\":3}");
    CHECK_SET(a, "{\"w\":4}", "{\"y\":2,\"z\":3,\"w\":4}");
    CHECK(ha.calls == 4);
    CHECK_SET(b, "{\"y\":null}", "{\"z\":3,\"w\":4}");
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 1);
    CHECK_HISTORY(ha, "1|{}|{\"x\":1}|{\"x\":1};"
                      "2|{\"x\":1}|{\"y\":2}|NULL;"
                      "3|{\"y\":2}|{\"y\":2,\"z\":3}|{\"z\":3};"
                      "4|{\"y\":2,\"z\":3}|{\"y\":2,\"z\":3,\"w\":4}|{\"w\":4};"
                      "5|{\"y\":2,\"z\":3,\"w\":4}|{\"z\":3,\"w\":4}|{\"y\":null};");
    CHECK(r.calls == 5 && r.chain_breaks == 0 && r.version_breaks == 0 && r.bad_views == 0);

    /* changes committed before a handle opened are not delivered to it */
    late = open_store("poll.db", NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(late, history_hook, &hl, NULL, &id));
    CHECK_STATUS(AGENT_OK, agent_poll(late, &n));
    CHECK(n == 0 && hl.calls == 0);
    CHECK_SET(a, "{\"v\":6}", "{\"z\":3,\"w\":4,\"v\":6}");
    CHECK_STATUS(AGENT_OK, agent_poll(late, &n));
    CHECK(n == 1);
    CHECK_HISTORY(hl, "6|{\"z\":3,\"w\":4}|{\"z\":3,\"w\":4,\"v\":6}|{\"v\":6};");
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n)); /* a's own change is not delivered twice */
    CHECK(n == 0 && r.calls == 6);

    /* a hook that fails: AGENT_ERR_HOOK, and every delivery still happened */
    r.rc = 5;
    CHECK_SET(b, "{\"u\":7}", "{\"z\":3,\"w\":4,\"v\":6,\"u\":7}");
    CHECK_SET(b, "{\"u\":8}", "{\"z\":3,\"w\":4,\"v\":6,\"u\":8}");
    CHECK_STATUS(AGENT_ERR_HOOK, agent_poll(a, &n));
    CHECK_LAST_ERROR_FROM("agent_poll");
    CHECK(r.calls == 8 && r.version == 8 && ha.calls == 8);
    r.rc = 0;
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 0);
    CHECK_STATUS(AGENT_OK, agent_close(late));
    CHECK_STATUS(AGENT_OK, agent_close(b));
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK(r.freed == 1);
    recorder_destroy(&r);
}

static void test_poll_delivers_changes_of_another_process(void)
{
    const char *path = tmp_path("poll_process.db");
    int go[2];
    pid_t pid;
    AgentHandle h;
    History hist;
    uint64_t id;
    size_t n = 0;
    int status = 0;
    memset(&hist, 0, sizeof hist);

    /* forked before any handle is open; the child opens its own after the parent's is open */
    CHECK(pipe(go) == 0);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        AgentHandle c = 0;
        char byte;
        int bad = 0;
        close(go[1]);
        if (read(go[0], &byte, 1) != 1) {
            _exit(100);
        }
        bad |= store_open(path, "{\"synchronous\":\"normal\"}", &c) != AGENT_OK;
        bad |= set_s(c, "{\"from\":\"child\",\"n\":1}", NULL) != AGENT_OK;
        bad |= replace_s(c, "{\"n\":2}", NULL) != AGENT_OK;
        bad |= set_s(c, "{\"n\":3}", NULL) != AGENT_OK;
        bad |= agent_close(c) != AGENT_OK;
        _exit(bad ? 1 : 0);
    }
    CHECK(pid > 0);
    close(go[0]);
    h = open_at(path, "{\"change_log\":{\"keep_last\":10}}");
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(h, history_hook, &hist, NULL, &id));
    CHECK(write(go[1], "g", 1) == 1);
    close(go[1]);
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_STATUS(AGENT_OK, agent_poll(h, &n));
    CHECK(n == 3);
    CHECK_HISTORY(hist, "1|{}|{\"from\":\"child\",\"n\":1}|{\"from\":\"child\",\"n\":1};"
                        "2|{\"from\":\"child\",\"n\":1}|{\"n\":2}|NULL;"
                        "3|{\"n\":2}|{\"n\":3}|{\"n\":3};");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_poll_reports_pruned_changes_as_a_gap_once(void)
{
    AgentHandle a = open_store("gap.db", "{\"change_log\":{\"keep_last\":2}}");
    AgentHandle b = open_store("gap.db", NULL);
    History hist;
    uint64_t id;
    size_t n = 77;
    int i;
    memset(&hist, 0, sizeof hist);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(a, history_hook, &hist, NULL, &id));
    for (i = 1; i <= 5; i++) {
        char patch[32];
        snprintf(patch, sizeof patch, "{\"n\":%d}", i);
        CHECK_STATUS(AGENT_OK, set_s(b, patch, NULL));
    }
    /* retained: 4 and 5; 4's predecessor is gone, so only 5 can be delivered exactly */
    CHECK_STATUS(AGENT_ERR_GAP, agent_poll(a, &n));
    CHECK_LAST_ERROR_FROM("agent_poll");
    CHECK_LAST_ERROR_HAS("changes 1 to 4");
    CHECK_HISTORY(hist, "5|{\"n\":4}|{\"n\":5}|{\"n\":5};");
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n)); /* reported once */
    CHECK(n == 0);
    CHECK_STATE(a, "{\"n\":5}"); /* the state is current */
    CHECK_STATUS(AGENT_OK, set_s(b, "{\"n\":6}", NULL));
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 1 && hist.calls == 2);

    /* "A write through h first delivers the other handles' pending changes": with 8 and 9
     * retained, 9 (whose predecessor 8 is retained) is pending and deliverable, exactly as a
     * poll at this moment would deliver it (then reporting "changes 7 to 8"); only 7 and 8 are
     * lost. The write delivers 9 and then its own 10, and the gap is reported by the next
     * poll. */
    for (i = 7; i <= 9; i++) {
        char patch[32];
        snprintf(patch, sizeof patch, "{\"n\":%d}", i);
        CHECK_STATUS(AGENT_OK, set_s(b, patch, NULL));
    }
    CHECK_SET(a, "{\"a\":1}", "{\"n\":9,\"a\":1}");
    CHECK(hist.calls == 4); /* 9 and a's own 10 */
    check_(strstr(hist.text, "9|{\"n\":8}|{\"n\":9}|{\"n\":9};") != NULL, __FILE__, __LINE__,
           "change 9 was not delivered by the write: %s", hist.text);
    CHECK_STATUS(AGENT_ERR_GAP, agent_poll(a, &n));
    CHECK_LAST_ERROR_HAS("changes 7 to 8");
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 0);
    CHECK_STATUS(AGENT_OK, agent_close(b));
    CHECK_STATUS(AGENT_OK, agent_close(a));
}

/* Replaces every "at":<digits> in `s` by "at":0, in place; checks each time is within
 * [lo_ms, hi_ms]; returns how many it replaced. */
static int blank_times(char *s, long long lo_ms, long long hi_ms)
{
    int count = 0;
    char *p = s;
    while ((p = strstr(p, "\"at\":")) != NULL) {
        char *digits = p + 5, *end;
        long long at = strtoll(digits, &end, 10);
        check_(end > digits && at >= lo_ms && at <= hi_ms, __FILE__, __LINE__,
               "\"at\":%lld is not between %lld and %lld", at, lo_ms, hi_ms);
        digits[0] = '0';
        memmove(digits + 1, end, strlen(end) + 1);
        p = digits + 1;
        count++;
    }
    return count;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_changes_since_returns_the_documented_json_array(void)
{
    AgentHandle h = open_store("since.db", "{\"change_log\":{\"keep_last\":3}}");
    AgentHandle off = open_store("since_off.db", NULL);
    AgentBuffer out = junk_buffer();
    long long t0 = now_ms() - 1, t1;
    char *text;

    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 0, &out)); /* nothing yet */
    CHECK_BUF(out, "[]");
    agent_buffer_free(&out);
    CHECK_SET(h, "{\"n\":1}", "{\"n\":1}");
    CHECK_SET(h, "{\"n\":2}", "{\"n\":2}");
    CHECK_SET(h, "{\"n\":3}", "{\"n\":3}");
    CHECK_SET(h, "{\"n\":4,\"s\":\"a\\\"b\\u00e9\"}", "{\"n\":4,\"s\":\"a\\\"b\xc3\xa9\"}");
    CHECK_REPLACE(h, "{\"r\":[5, {\"x\":null}]}", "{\"r\":[5,{\"x\":null}]}");
    t1 = now_ms() + 1;
    /* versions 3, 4 and 5 are retained */
    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 3, &out));
    CHECK(out.data != NULL && out.data[out.len] == 0 && strlen((const char *)out.data) == out.len);
    text = dup_bytes(out.data, out.len);
    agent_buffer_free(&out);
    CHECK(blank_times(text, t0, t1) == 2);
    check_(strcmp(text, "[{\"version\":4,\"at\":0,\"patch\":{\"n\":4,\"s\":\"a\\\"b\xc3\xa9\"},"
                        "\"next\":{\"n\":4,\"s\":\"a\\\"b\xc3\xa9\"}},"
                        "{\"version\":5,\"at\":0,\"patch\":null,\"next\":{\"r\":[5,{\"x\":null}]}}]") == 0,
           __FILE__, __LINE__, "changes_since(3) is %s", text);
    free(text);
    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 2, &out));
    text = dup_bytes(out.data, out.len);
    agent_buffer_free(&out);
    CHECK(blank_times(text, t0, t1) == 3);
    check_(strncmp(text, "[{\"version\":3,\"at\":0,\"patch\":{\"n\":3},\"next\":{\"n\":3}},{\"version\":4,", 66) == 0,
           __FILE__, __LINE__, "changes_since(2) is %s", text);
    free(text);
    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 5, &out)); /* up to date */
    CHECK_BUF(out, "[]");
    agent_buffer_free(&out);

    /* pruned: GAP; the future, the log off, a NULL out: INVALID_ARGUMENT; out left empty */
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_changes_since(h, 1, &out));
    CHECK_LAST_ERROR_FROM("agent_changes_since");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_changes_since(h, 0, &out));
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_changes_since(h, 6, &out));
    CHECK_LAST_ERROR_FROM("agent_changes_since");
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_changes_since(h, UINT64_MAX, &out));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_changes_since(h, 3, NULL));
    CHECK_LAST_ERROR_FROM("agent_changes_since");
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_changes_since(off, 0, &out));
    CHECK_LAST_ERROR_HAS("change_log");
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_OK, agent_close(off));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_get_state_at_returns_retained_versions(void)
{
    AgentHandle h = open_store("state_at.db",
                               "{\"change_log\":{\"keep_last\":3},\"initial_state\":{\"init\":1}}");
    AgentHandle off = open_store("state_at_off.db", "{\"initial_state\":{\"init\":2}}");
    AgentBuffer out = junk_buffer();
    int i;
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 0, &out)); /* version 0: the initial state */
    CHECK_BUF(out, "{\"init\":1}");
    agent_buffer_free(&out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_at(h, 1, &out)); /* the future */
    CHECK_LAST_ERROR_FROM("agent_get_state_at");
    CHECK_EMPTY(out);
    for (i = 1; i <= 5; i++) {
        char patch[32];
        snprintf(patch, sizeof patch, "{\"n\":%d}", i);
        CHECK_STATUS(AGENT_OK, set_s(h, patch, NULL));
    }
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 3, &out));
    CHECK_BUF(out, "{\"init\":1,\"n\":3}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 4, &out));
    CHECK_BUF(out, "{\"init\":1,\"n\":4}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 5, &out));
    CHECK_BUF(out, "{\"init\":1,\"n\":5}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 0, &out));
    CHECK_BUF(out, "{\"init\":1}");
    agent_buffer_free(&out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_get_state_at(h, 2, &out));
    CHECK_LAST_ERROR_FROM("agent_get_state_at");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_get_state_at(h, 1, &out));
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_at(h, 6, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_at(h, 3, NULL));
    CHECK_LAST_ERROR_FROM("agent_get_state_at");

    /* without the log: the current version and 0 only */
    CHECK_SET(off, "{\"a\":1}", "{\"init\":2,\"a\":1}");
    CHECK_SET(off, "{\"a\":2}", "{\"init\":2,\"a\":2}");
    CHECK_STATUS(AGENT_OK, agent_get_state_at(off, 2, &out));
    CHECK_BUF(out, "{\"init\":2,\"a\":2}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_get_state_at(off, 0, &out));
    CHECK_BUF(out, "{\"init\":2}");
    agent_buffer_free(&out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_get_state_at(off, 1, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_OK, agent_close(off));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

static void test_restore_state_replaces_with_an_earlier_version(void)
{
    AgentHandle h = open_store("restore.db", "{\"change_log\":{\"keep_last\":3}}");
    Recorder r;
    AgentBuffer out = junk_buffer();
    uint64_t v = 99;
    char *before;
    int i;
    recorder_init(&r, NULL);
    for (i = 1; i <= 5; i++) {
        char patch[32];
        snprintf(patch, sizeof patch, "{\"n\":%d}", i);
        CHECK_STATUS(AGENT_OK, set_s(h, patch, NULL));
    }
    add_recorder(h, &r);
    CHECK_STATUS(AGENT_OK, agent_restore_state(h, 3, &out, &v));
    CHECK_BUF(out, "{\"n\":3}");
    agent_buffer_free(&out);
    CHECK(v == 6); /* a new change with a new version */
    CHECK_VERSIONED(h, "{\"n\":3}", 6);
    /* hooks see a replacement */
    CHECK(r.calls == 1 && r.version == 6 && r.patch == NULL);
    CHECK(r.prev != NULL && strcmp(r.prev, "{\"n\":5}") == 0);
    CHECK(r.next != NULL && strcmp(r.next, "{\"n\":3}") == 0);
    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 5, &out));
    CHECK(out.data != NULL && strstr((const char *)out.data, "\"version\":6") != NULL &&
          strstr((const char *)out.data, "\"patch\":null,\"next\":{\"n\":3}") != NULL);
    agent_buffer_free(&out);

    /* the current version and version 0 (the initial state); out and out_version may be NULL */
    CHECK_STATUS(AGENT_OK, agent_restore_state(h, 6, NULL, NULL));
    CHECK_VERSIONED(h, "{\"n\":3}", 7);
    CHECK_STATUS(AGENT_OK, agent_restore_state(h, 0, NULL, &v));
    CHECK(v == 8);
    CHECK_VERSIONED(h, "{}", 8);
    CHECK(r.calls == 3 && r.version_breaks == 0 && r.chain_breaks == 0);

    /* not retained: GAP; the future: INVALID_ARGUMENT; nothing written, out left empty */
    before = state_copy(h);
    out = junk_buffer();
    v = 99;
    CHECK_STATUS(AGENT_ERR_GAP, agent_restore_state(h, 5, &out, &v));
    CHECK_LAST_ERROR_FROM("agent_restore_state");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_restore_state(h, 9, &out, &v));
    CHECK_LAST_ERROR_FROM("agent_restore_state");
    CHECK_EMPTY(out);
    CHECK_UNCHANGED(h, before, 8);
    CHECK(r.calls == 3);
    free(before);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    recorder_destroy(&r);
}

/* ------------------------------------------------------------------------------------------ */
/* Buffers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static void test_buffers_are_owned_nul_terminated_and_safe_to_free_twice(void)
{
    AgentHandle h = open_store("buffers.db", NULL);
    AgentBuffer early = { NULL, 0, NULL }, copy = { NULL, 0, NULL }, empty = { NULL, 0, NULL };
    static const uint8_t with_nul[3] = { 'a', 0, 'b' };

    agent_buffer_free(NULL);
    agent_buffer_free(&empty);
    CHECK_EMPTY(empty);

    CHECK_SET(h, "{\"v\":1}", "{\"v\":1}");
    CHECK_STATUS(AGENT_OK, agent_get_state(h, &early));
    CHECK_SET(h, "{\"v\":2}", "{\"v\":2}");
    CHECK_BUF(early, "{\"v\":1}"); /* a held view never changes */
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK_BUF(early, "{\"v\":1}"); /* ...even after close */
    agent_buffer_free(&early);
    CHECK_EMPTY(early);
    agent_buffer_free(&early); /* double free is harmless */
    CHECK_EMPTY(early);

    CHECK_STATUS(AGENT_OK, agent_buffer_copy(with_nul, 3, &copy));
    CHECK(copy.data != NULL && copy.len == 3 && copy.data != with_nul &&
          memcmp(copy.data, with_nul, 3) == 0 && copy.data[3] == 0);
    agent_buffer_free(&copy);
    agent_buffer_free(&copy);
    CHECK_EMPTY(copy);
    CHECK_STATUS(AGENT_OK, agent_buffer_copy(NULL, 0, &copy));
    CHECK(copy.len == 0);
    agent_buffer_free(&copy);
    CHECK_EMPTY(copy);
    copy = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_buffer_copy(NULL, 1, &copy));
    CHECK_LAST_ERROR_FROM("agent_buffer_copy");
    CHECK_EMPTY(copy);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_buffer_copy(with_nul, 3, NULL));
}

static void *read_and_free_buffer(void *arg)
{
    AgentBuffer *b = arg;
    int ok = buf_is(b, "{\"from\":\"main\"}");
    agent_buffer_free(b);
    return ok ? arg : NULL;
}

static void test_buffer_may_be_read_and_freed_on_another_thread(void)
{
    AgentHandle h = open_at(":memory:", NULL);
    AgentBuffer b = { NULL, 0, NULL };
    pthread_t t;
    void *result = NULL;
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"from\":\"main\"}", &b));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(pthread_create(&t, NULL, read_and_free_buffer, &b) == 0);
    CHECK(pthread_join(t, &result) == 0);
    CHECK(result == &b);
    CHECK_EMPTY(b);
}

/* ------------------------------------------------------------------------------------------ */
/* Threads                                                                                    */
/* ------------------------------------------------------------------------------------------ */

#define MAX_WRITERS 8

typedef struct {
    AgentHandle h;
    int index;
    int count;
    int failures;
} Writer;

/* Writes {"t<i>": n} for n = 1..count; each returned state must show its own latest value. */
static void *writer_thread(void *arg)
{
    Writer *w = arg;
    char key[16], patch[64];
    int n;
    snprintf(key, sizeof key, "t%d", w->index);
    for (n = 1; n <= w->count; n++) {
        AgentBuffer out = { NULL, 0, NULL };
        snprintf(patch, sizeof patch, "{\"%s\":%d}", key, n);
        if (set_s(w->h, patch, &out) != AGENT_OK ||
            member_int((const char *)out.data, out.len, key) != n || out.data[out.len] != 0) {
            w->failures++;
        }
        agent_buffer_free(&out);
    }
    return NULL;
}

typedef struct {
    AgentHandle h;
    int writers;
    volatile int *stop; /* read under g_stop_mu */
    int reads;
    int regressions; /* a key's value went down between two reads */
    int failures;
} Reader;

static pthread_mutex_t g_stop_mu = PTHREAD_MUTEX_INITIALIZER;

static int should_stop(volatile int *stop)
{
    int s;
    pthread_mutex_lock(&g_stop_mu);
    s = *stop;
    pthread_mutex_unlock(&g_stop_mu);
    return s;
}

static void *reader_thread(void *arg)
{
    Reader *r = arg;
    long last[MAX_WRITERS] = { 0 };
    do {
        AgentBuffer b = { NULL, 0, NULL };
        int i;
        if (agent_get_state(r->h, &b) != AGENT_OK) {
            r->failures++;
        } else {
            for (i = 0; i < r->writers; i++) {
                char key[16];
                long v;
                snprintf(key, sizeof key, "t%d", i);
                v = member_int((const char *)b.data, b.len, key);
                if (v < last[i]) {
                    r->regressions++;
                }
                last[i] = v;
            }
        }
        agent_buffer_free(&b);
        r->reads++;
    } while (!should_stop(r->stop));
    return NULL;
}

static void test_threads_share_one_handle_without_lost_updates(void)
{
    int writers = g_quick ? 4 : MAX_WRITERS;
    int count = g_quick ? 40 : 200;
    AgentHandle h = open_store("threads.db", "{\"synchronous\":\"normal\"}");
    Writer w[MAX_WRITERS];
    Reader rd[2];
    pthread_t wt[MAX_WRITERS], rt[2];
    volatile int stop = 0;
    Recorder rec;
    char expected[256];
    size_t n = 0;
    int i;

    recorder_init(&rec, NULL);
    add_recorder(h, &rec);
    for (i = 0; i < 2; i++) {
        memset(&rd[i], 0, sizeof rd[i]);
        rd[i].h = h;
        rd[i].writers = writers;
        rd[i].stop = &stop;
        CHECK(pthread_create(&rt[i], NULL, reader_thread, &rd[i]) == 0);
    }
    for (i = 0; i < writers; i++) {
        w[i].h = h;
        w[i].index = i;
        w[i].count = count;
        w[i].failures = 0;
        CHECK(pthread_create(&wt[i], NULL, writer_thread, &w[i]) == 0);
    }
    for (i = 0; i < writers; i++) {
        CHECK(pthread_join(wt[i], NULL) == 0);
        CHECK(w[i].failures == 0);
    }
    pthread_mutex_lock(&g_stop_mu);
    stop = 1;
    pthread_mutex_unlock(&g_stop_mu);
    for (i = 0; i < 2; i++) {
        CHECK(pthread_join(rt[i], NULL) == 0);
        CHECK(rd[i].failures == 0);
        CHECK(rd[i].regressions == 0);
        CHECK(rd[i].reads > 0);
    }

    /* every commit delivered once, each prev equal to the previous next */
    check_(rec.calls == writers * count, __FILE__, __LINE__, "%d deliveries for %d commits",
           rec.calls, writers * count);
    CHECK(rec.chain_breaks == 0);
    CHECK(rec.bad_views == 0);
    CHECK(rec.prev != NULL && strcmp(rec.prev, "{}") != 0);
    {
        char *final_state = state_copy(h);
        CHECK(final_state != NULL && rec.next != NULL && strcmp(final_state, rec.next) == 0);
        for (i = 0; final_state != NULL && i < writers; i++) {
            char key[16];
            snprintf(key, sizeof key, "t%d", i);
            check_(member_int(final_state, strlen(final_state), key) == count, __FILE__, __LINE__,
                   "%s is %ld after %d writes: %s", key,
                   member_int(final_state, strlen(final_state), key), count, final_state);
        }
        /* one member per writer and nothing else (their order is that of first commits) */
        for (i = 0; i < writers; i++) {
            n += (size_t)snprintf(expected + n, sizeof expected - n, "%s\"t%d\":%d",
                                  i ? "," : "{", i, count);
        }
        snprintf(expected + n, sizeof expected - n, "}");
        CHECK(final_state != NULL && strlen(final_state) == strlen(expected));
        free(final_state);
    }
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(rec.freed == 1);
    recorder_destroy(&rec);
}

/* A hook that, on every 5th delivery, writes {"nested": <delivery number>} to its own handle
 * (then checks the chain like record_hook). */
typedef struct {
    Recorder rec;
    AgentHandle h;
    int nested_failures;
} NestingRecorder;

static int32_t nesting_record_hook(void *user_data, const AgentStateChange *c)
{
    NestingRecorder *n = user_data;
    int calls;
    record_hook(&n->rec, c);
    pthread_mutex_lock(&n->rec.mu);
    calls = n->rec.calls;
    pthread_mutex_unlock(&n->rec.mu);
    if (calls % 5 == 0) {
        char patch[48];
        snprintf(patch, sizeof patch, "{\"nested\":%d}", calls);
        if (set_s(n->h, patch, NULL) != AGENT_OK) {
            pthread_mutex_lock(&n->rec.mu);
            n->nested_failures++;
            pthread_mutex_unlock(&n->rec.mu);
        }
    }
    return 0;
}

static void test_nested_writes_from_hooks_keep_commit_order_across_threads(void)
{
    int writers = 4;
    int count = g_quick ? 25 : 150;
    NestingRecorder n;
    Writer w[4];
    pthread_t t[4];
    uint64_t id = 0;
    int i, total, pending;
    recorder_init(&n.rec, NULL);
    n.nested_failures = 0;
    n.h = open_store("nested_threads.db", "{\"synchronous\":\"normal\"}");
    /* recorder_free gets &n, whose first member is the Recorder */
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(n.h, nesting_record_hook, &n, recorder_free, &id));
    for (i = 0; i < writers; i++) {
        w[i].h = n.h;
        w[i].index = i;
        w[i].count = count;
        w[i].failures = 0;
        CHECK(pthread_create(&t[i], NULL, writer_thread, &w[i]) == 0);
    }
    for (i = 0; i < writers; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(w[i].failures == 0);
    }
    /* one delivery per write; every 5th delivery makes one more write */
    total = 0;
    for (pending = writers * count; pending > 0; pending--) {
        total++;
        pending += total % 5 == 0;
    }
    CHECK(n.nested_failures == 0);
    check_(n.rec.calls == total, __FILE__, __LINE__, "%d deliveries, expected %d", n.rec.calls, total);
    CHECK(n.rec.chain_breaks == 0);
    CHECK(n.rec.bad_views == 0);
    {
        char *final_state = state_copy(n.h);
        CHECK(final_state != NULL && n.rec.next != NULL && strcmp(final_state, n.rec.next) == 0);
        free(final_state);
    }
    CHECK_STATUS(AGENT_OK, agent_close(n.h));
    CHECK(n.rec.freed == 1);
    recorder_destroy(&n.rec);
}

typedef struct {
    AgentHandle h;
    int ok, bad_handle, other, after_close_ok;
    volatile int *closed; /* set (under g_stop_mu) once agent_close returned */
} CloseRacer;

static void *close_racer_thread(void *arg)
{
    CloseRacer *c = arg;
    int i;
    for (i = 0; i < 1000000; i++) {
        int closed_before = should_stop(c->closed);
        AgentBuffer out = { NULL, 0, NULL };
        AgentStatus rc = i % 2 ? agent_get_state(c->h, &out) : set_s(c->h, "{\"a\":1}", &out);
        agent_buffer_free(&out);
        if (rc == AGENT_OK) {
            c->ok++;
            c->after_close_ok += closed_before;
        } else if (rc == AGENT_ERR_BAD_HANDLE) {
            c->bad_handle++;
            break;
        } else {
            c->other++;
        }
    }
    return NULL;
}

static void test_close_while_other_threads_write(void)
{
    AgentHandle h = open_store("close_race.db", "{\"synchronous\":\"normal\"}");
    CloseRacer c[3];
    pthread_t t[3];
    Recorder rec;
    volatile int closed = 0;
    int i;
    recorder_init(&rec, NULL);
    add_recorder(h, &rec);
    for (i = 0; i < 3; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].h = h;
        c[i].closed = &closed;
        CHECK(pthread_create(&t[i], NULL, close_racer_thread, &c[i]) == 0);
    }
    sleep_ms(g_quick ? 200 : 50);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    pthread_mutex_lock(&g_stop_mu);
    closed = 1;
    pthread_mutex_unlock(&g_stop_mu);
    for (i = 0; i < 3; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(c[i].other == 0);        /* only OK or AGENT_ERR_BAD_HANDLE */
        CHECK(c[i].bad_handle == 1);   /* every thread saw the close */
        CHECK(c[i].after_close_ok == 0);
    }
    CHECK(rec.freed == 1);
    CHECK(rec.chain_breaks == 0);
    recorder_destroy(&rec);
}

/* ------------------------------------------------------------------------------------------ */
/* Processes                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* A process's writes {"<key>": n} for n = 1..count on its own handle; the other writers' keys
 * must never go backwards in what it sees (no write starts from a stale state). */
static int write_own_key(const char *path, const char *key, const char *const others[2], int count)
{
    AgentHandle h = open_at(path, "{\"synchronous\":\"normal\",\"busy_timeout_ms\":60000}");
    long seen[2] = { 0, 0 };
    int n, i, bad = 0;
    for (n = 1; n <= count; n++) {
        char patch[64];
        AgentBuffer out = { NULL, 0, NULL };
        snprintf(patch, sizeof patch, "{\"%s\":%d}", key, n);
        if (!CHECK_STATUS(AGENT_OK, set_s(h, patch, &out))) {
            bad++;
            continue;
        }
        if (member_int((const char *)out.data, out.len, key) != n) {
            bad++;
        }
        for (i = 0; i < 2; i++) {
            long v = member_int((const char *)out.data, out.len, others[i]);
            if (v < seen[i]) {
                bad++;
            }
            seen[i] = v;
        }
        agent_buffer_free(&out);
    }
    check_(bad == 0, __FILE__, __LINE__, "writer of %s saw %d bad states", key, bad);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    return bad;
}

static void test_two_processes_write_one_file(void)
{
    static const char *const keys[3] = { "p0", "p1", "parent" };
    const char *path = tmp_path("processes.db");
    int count = g_quick ? 25 : 200;
    pid_t pids[2];
    int i;

    /* The store exists before the writers start (creating one store from several processes at
     * once is the next test); no handle is open across the fork: each process opens its own. */
    CHECK_STATUS(AGENT_OK, agent_close(open_at(path, NULL)));
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < 2; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            const char *others[2];
            int before = g_failed;
            others[0] = keys[(i + 1) % 3];
            others[1] = keys[(i + 2) % 3];
            write_own_key(path, keys[i], others, count);
            fflush(stderr);
            _exit(g_failed == before ? 0 : 1);
        }
        CHECK(pids[i] > 0);
    }
    {
        const char *others[2];
        others[0] = keys[0];
        others[1] = keys[1];
        write_own_key(path, keys[2], others, count);
    }
    for (i = 0; i < 2; i++) {
        int status = 0;
        CHECK(pids[i] > 0 && waitpid(pids[i], &status, 0) == pids[i]);
        check_(WIFEXITED(status) && WEXITSTATUS(status) == 0, __FILE__, __LINE__,
               "writer process %d ended with status %d", i, status);
    }
    {
        AgentHandle h = open_at(path, NULL);
        char *s = state_copy(h);
        for (i = 0; s != NULL && i < 3; i++) {
            check_(member_int(s, strlen(s), keys[i]) == count, __FILE__, __LINE__,
                   "%s is %ld after %d writes: %s", keys[i], member_int(s, strlen(s), keys[i]),
                   count, s);
        }
        CHECK(s != NULL);
        free(s);
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
}

/* One round: `procs` processes, released together, open the same new store file (each must
 * succeed: "several handles, in one process or many, may open the same file") and write their
 * own key. Returns the number of processes that failed; the first failure's message goes to
 * `first_error`. */
static int race_to_create_one_store(const char *path, int procs, int *busy, int *storage,
                                    char *first_error, size_t cap)
{
    int start[2], report[2];
    int p, failed = 0;
    CHECK(pipe(start) == 0 && pipe(report) == 0);
    fflush(stdout);
    fflush(stderr);
    for (p = 0; p < procs; p++) {
        pid_t pid = fork();
        if (pid == 0) {
            AgentHandle h = 0;
            AgentStatus rc;
            char c, patch[32];
            close(start[1]);
            close(report[0]);
            if (read(start[0], &c, 1) < 0) { /* returns 0 when the parent closes the pipe */
                _exit(100);
            }
            rc = store_open(path, "{\"busy_timeout_ms\":60000,\"synchronous\":\"normal\"}", &h);
            if (rc == AGENT_OK) {
                snprintf(patch, sizeof patch, "{\"w%d\":1}", p);
                rc = set_s(h, patch, NULL);
                agent_close(h);
            }
            if (rc != AGENT_OK) {
                char line[512];
                int n = snprintf(line, sizeof line, "%s\n", agent_last_error());
                if (write(report[1], line, (size_t)n) < 0) {
                    _exit(101);
                }
            }
            _exit(rc);
        }
        CHECK(pid > 0);
    }
    close(start[0]);
    close(start[1]); /* go */
    close(report[1]);
    for (p = 0; p < procs; p++) {
        int status = 0;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed++;
            *busy += WIFEXITED(status) && WEXITSTATUS(status) == AGENT_ERR_BUSY;
            *storage += WIFEXITED(status) && WEXITSTATUS(status) == AGENT_ERR_STORAGE;
        }
    }
    if (failed > 0 && first_error[0] == 0) {
        ssize_t n = read(report[0], first_error, cap - 1);
        first_error[n > 0 ? n : 0] = 0;
        first_error[strcspn(first_error, "\n")] = 0;
    }
    close(report[0]);
    if (failed == 0) {
        /* all of them wrote into one and the same store */
        AgentHandle h = open_at(path, NULL);
        char *state = state_copy(h);
        for (p = 0; state != NULL && p < procs; p++) {
            char key[16];
            snprintf(key, sizeof key, "w%d", p);
            CHECK(member_int(state, strlen(state), key) == 1);
        }
        free(state);
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
    return failed;
}

static void test_processes_may_create_one_store_at_once(void)
{
    int rounds = g_quick ? 10 : 40, procs = 4;
    int r, failed = 0, busy = 0, storage = 0;
    char first_error[512] = "";
    for (r = 0; r < rounds; r++) {
        char name[64];
        snprintf(name, sizeof name, "created_at_once_%d.db", r);
        failed += race_to_create_one_store(tmp_path(name), procs, &busy, &storage, first_error,
                                           sizeof first_error);
    }
    check_(failed == 0, __FILE__, __LINE__,
           "%d of %d processes failed to open (or write) a new store that others opened at the "
           "same moment: %d AGENT_ERR_BUSY, %d AGENT_ERR_STORAGE; first error: %s",
           failed, rounds * procs, busy, storage, first_error);
}

/* What one compare-and-set process reports back through its pipe. */
#define CAS_MAX_TARGET 100
typedef struct {
    long successes, conflicts, errors;
    long values[CAS_MAX_TARGET]; /* the counter value each successful call wrote */
} CasReport;

/* Reads exactly `n` bytes (fewer at end of file); returns how many it read. */
static size_t read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    return got;
}

/* A child's read-modify-write loop: read {"counter": n} and its version, write n + 1 at that
 * version, until `target` calls succeeded; a CONFLICT is retried from a fresh read. */
static void cas_process(const char *path, int target, int start_fd, int report_fd)
{
    CasReport rep;
    AgentHandle h = 0;
    long attempts = 0;
    char byte;
    memset(&rep, 0, sizeof rep);
    if (read(start_fd, &byte, 1) < 0) { /* 0 when the parent closes the pipe: go */
        _exit(100);
    }
    if (store_open(path, "{\"synchronous\":\"normal\",\"busy_timeout_ms\":60000}", &h) != AGENT_OK) {
        fprintf(stderr, "    cas process: %s\n", agent_last_error());
        rep.errors++;
    }
    while (h != 0 && rep.successes < target && rep.errors == 0 && attempts++ < 1000L * target) {
        AgentBuffer got = { NULL, 0, NULL };
        uint64_t version = 0, new_version = 0;
        char patch[64];
        long n;
        AgentStatus rc = agent_get_state_versioned(h, &got, &version);
        if (rc != AGENT_OK) {
            fprintf(stderr, "    cas process: %s\n", agent_last_error());
            rep.errors++;
            break;
        }
        n = member_int((const char *)got.data, got.len, "counter");
        agent_buffer_free(&got);
        snprintf(patch, sizeof patch, "{\"counter\":%ld}", n + 1);
        { /* "compute" for a moment, so that other processes commit in between */
            struct timespec pause = { 0, 200000L };
            nanosleep(&pause, NULL);
        }
        rc = set_if_s(h, version, patch, &got, &new_version);
        if (rc == AGENT_OK) {
            if (new_version != version + 1 ||
                member_int((const char *)got.data, got.len, "counter") != n + 1) {
                rep.errors++;
            }
            rep.values[rep.successes++] = n + 1;
        } else if (rc == AGENT_ERR_CONFLICT) {
            rep.conflicts++;
        } else {
            fprintf(stderr, "    cas process: %s\n", agent_last_error());
            rep.errors++;
        }
        agent_buffer_free(&got);
    }
    if (rep.successes < target) {
        rep.errors++;
    }
    if (h != 0 && agent_close(h) != AGENT_OK) {
        rep.errors++;
    }
    if (write(report_fd, &rep, sizeof rep) != (ssize_t)sizeof rep) {
        _exit(101);
    }
    _exit(0);
}

static void test_processes_compare_and_set_one_counter(void)
{
    enum { MAX_PROCS = 4 };
    const char *path = tmp_path("cas_processes.db");
    int procs = g_quick ? 3 : MAX_PROCS, target = g_quick ? 15 : CAS_MAX_TARGET;
    int start[2], report[MAX_PROCS][2];
    pid_t pids[MAX_PROCS];
    long successes = 0, conflicts = 0, errors = 0;
    static unsigned char seen[MAX_PROCS * CAS_MAX_TARGET + 1];
    int p, duplicates = 0;
    long i;

    /* The store exists before the processes start; no handle is open across the fork. */
    CHECK_STATUS(AGENT_OK, agent_close(open_at(path, NULL)));
    memset(seen, 0, sizeof seen);
    CHECK(pipe(start) == 0);
    fflush(stdout);
    fflush(stderr);
    for (p = 0; p < procs; p++) {
        CHECK(pipe(report[p]) == 0);
        pids[p] = fork();
        if (pids[p] == 0) {
            close(start[1]);
            close(report[p][0]);
            cas_process(path, target, start[0], report[p][1]);
        }
        CHECK(pids[p] > 0);
        close(report[p][1]);
    }
    close(start[0]);
    close(start[1]); /* go: all at once */
    for (p = 0; p < procs; p++) {
        CasReport rep;
        int status = 0;
        if (!check_(read_full(report[p][0], &rep, sizeof rep) == sizeof rep, __FILE__, __LINE__,
                    "process %d sent no report", p)) {
            errors++;
        } else {
            successes += rep.successes;
            conflicts += rep.conflicts;
            errors += rep.errors;
            for (i = 0; i < rep.successes && i < CAS_MAX_TARGET; i++) {
                long v = rep.values[i];
                if (v < 1 || v > MAX_PROCS * CAS_MAX_TARGET || seen[v]++) {
                    duplicates++;
                }
            }
        }
        close(report[p][0]);
        CHECK(pids[p] > 0 && waitpid(pids[p], &status, 0) == pids[p]);
        check_(WIFEXITED(status) && WEXITSTATUS(status) == 0, __FILE__, __LINE__,
               "compare-and-set process %d ended with status %d", p, status);
    }
    check_(errors == 0, __FILE__, __LINE__, "%ld errors in the compare-and-set processes", errors);
    CHECK(successes == (long)procs * target);
    /* every successful call wrote another value: no two read-modify-writes overlapped */
    check_(duplicates == 0, __FILE__, __LINE__,
           "%d counter values were written by more than one successful call", duplicates);
    {
        AgentHandle h = open_at(path, NULL);
        AgentBuffer got = { NULL, 0, NULL };
        uint64_t version = 0;
        CHECK_STATUS(AGENT_OK, agent_get_state_versioned(h, &got, &version));
        check_(got.data != NULL && member_int((const char *)got.data, got.len, "counter") == successes,
               __FILE__, __LINE__, "the counter is %s after %ld successful calls (%ld conflicts)",
               got.data ? (const char *)got.data : "(NULL)", successes, conflicts);
        check_(version == (uint64_t)successes, __FILE__, __LINE__,
               "version %llu after %ld successful calls", (unsigned long long)version, successes);
        agent_buffer_free(&got);
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
    if (getenv("AGENT_TEST_VERBOSE") != NULL) {
        printf("    %ld successes, %ld conflicts over %d processes\n", successes, conflicts, procs);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* JSONTestSuite corpus                                                                       */
/* ------------------------------------------------------------------------------------------ */

static void test_json_test_suite_corpus(void)
{
    static const char *const dirs[] = { "../shared/corpora/json-test-suite",
                                        "/work/shared/corpora/json-test-suite" };
    static unsigned char text[300000];
    const char *dirname = NULL;
    DIR *d = NULL;
    struct dirent *e;
    AgentHandle h;
    int files = 0;
    size_t i;
    for (i = 0; i < sizeof dirs / sizeof dirs[0] && d == NULL; i++) {
        d = opendir(dirs[i]);
        dirname = dirs[i];
    }
    if (d == NULL) {
        printf("    (JSONTestSuite corpus not found: skipped)\n");
        return;
    }
    h = open_at(":memory:", NULL);
    while ((e = readdir(d)) != NULL) {
        char path[1024];
        long n;
        AgentStatus rc;
        AgentBuffer out = junk_buffer();
        char kind = e->d_name[0];
        if ((kind != 'y' && kind != 'n' && kind != 'i') || e->d_name[1] != '_') {
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dirname, e->d_name);
        n = read_file(path, text, sizeof text);
        if (!check_(n >= 0 && n < (long)sizeof text, __FILE__, __LINE__, "cannot read %s", path)) {
            continue;
        }
        files++;
        rc = agent_set_state(h, text, (size_t)n, &out);
        if (rc == AGENT_OK) {
            CHECK(out.data != NULL && out.data[out.len] == 0);
        } else {
            CHECK_EMPTY(out);
        }
        agent_buffer_free(&out);
        if (kind == 'y') {
            /* well-formed: an object is stored (or refused by the codec), anything else is
             * not an object; never a JSON error */
            check_(rc == AGENT_OK || rc == AGENT_ERR_CODEC || rc == AGENT_ERR_INVALID_ARGUMENT,
                   __FILE__, __LINE__, "%s: %s (%s)", e->d_name, agent_status_name(rc),
                   agent_last_error());
        } else if (kind == 'n') {
            check_(rc == AGENT_ERR_JSON, __FILE__, __LINE__, "%s: %s, expected AGENT_ERR_JSON",
                   e->d_name, agent_status_name(rc));
        } else {
            check_(rc != AGENT_ERR_PANIC && strcmp(agent_status_name(rc), "AGENT_ERR_UNKNOWN") != 0,
                   __FILE__, __LINE__, "%s: %s", e->d_name, agent_status_name(rc));
        }
    }
    closedir(d);
    CHECK(files > 300);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* ------------------------------------------------------------------------------------------ */
/* main                                                                                       */
/* ------------------------------------------------------------------------------------------ */

typedef void (*TestFn)(void);

#define TEST(fn) { #fn, fn, NULL }
/* A test of SQLite files, paths or ":memory:": skipped on PostgreSQL, `why` printed. */
#define SQLITE_ONLY(fn, why) { #fn, fn, why }
static const struct {
    const char *name;
    TestFn fn;
    const char *sqlite_only;
} k_tests[] = {
    TEST(test_version_and_status_names),
    SQLITE_ONLY(test_uri_looking_paths_open_exactly_the_named_file,
                "file names that look like SQLite URIs"),
    TEST(test_last_error_is_per_thread_and_kept_by_successes),
    TEST(test_open_refuses_bad_arguments_and_options),
    TEST(test_bad_handles_are_refused_by_every_function),
    TEST(test_handles_are_never_reused),
    TEST(test_default_initial_state_is_the_empty_object),
    TEST(test_reading_never_persists_the_initial_state),
    TEST(test_first_write_persists_initial_state_merged_with_patch),
    TEST(test_replace_as_first_write_ignores_initial_state),
    TEST(test_stored_empty_object_is_not_nothing_stored),
    TEST(test_set_state_merges_like_the_reference_page),
    TEST(test_set_state_follows_rfc7396),
    TEST(test_member_order_is_preserved_and_new_members_appended),
    TEST(test_numbers_keep_their_exact_value_and_digits),
    TEST(test_output_is_compact_json_and_text_round_trips),
    TEST(test_set_state_returns_full_state_and_out_may_be_null),
    TEST(test_replace_state_keeps_nothing_of_the_previous_state),
    TEST(test_patch_must_be_a_json_object),
    TEST(test_malformed_json_is_refused),
    TEST(test_codec_refuses_what_it_cannot_store),
    TEST(test_merge_result_must_be_storable),
    TEST(test_too_large_state_is_refused_and_nothing_written),
    SQLITE_ONLY(test_storage_refuses_files_that_are_not_agent_stores,
                "foreign and corrupt files"),
    SQLITE_ONLY(test_storage_errors_for_missing_directory_and_read_only,
                "missing directories and files"),
    SQLITE_ONLY(test_state_persists_and_new_store_file_is_private,
                "the store file's mode (persistence is also in test_two_handles_on_one_file_see_each_others_commits and the conformance vectors)"),
    SQLITE_ONLY(test_path_is_taken_as_raw_bytes,
                "file names as raw bytes"),
    SQLITE_ONLY(test_memory_store_is_private_to_its_handle,
                "\":memory:\" stores"),
    TEST(test_two_handles_on_one_file_see_each_others_commits),
    TEST(test_tagged_values_are_accepted_and_round_trip),
    TEST(test_tagged_values_are_leaves_for_merge),
    TEST(test_initial_state_hook_takes_precedence_and_is_called_each_time),
    TEST(test_initial_state_hook_can_answer_with_static_text),
    TEST(test_initial_state_hook_user_data_is_freed_exactly_once),
    TEST(test_initial_state_hook_failures_are_reported),
    TEST(test_own_handle_from_initial_state_hook_is_busy),
    SQLITE_ONLY(test_write_lock_held_by_another_handle_gives_busy,
                "SQLite's write lock: on PostgreSQL a write is optimistic, so a validator holds no lock"),
    TEST(test_state_changed_hook_sees_next_prev_and_patch),
    TEST(test_state_changed_hooks_run_in_order_and_can_be_removed),
    TEST(test_failed_hook_registration_frees_user_data),
    TEST(test_failing_hook_returns_hook_status_and_change_stays),
    TEST(test_hook_may_change_its_own_handle_and_nested_change_comes_after),
    TEST(test_hook_may_remove_itself),
    TEST(test_closing_handle_from_inside_its_own_hook),
    TEST(test_remove_or_close_during_delivery_defers_free_until_it_ends),
    TEST(test_get_state_versioned_reads_state_and_version_together),
    TEST(test_set_state_if_writes_only_at_the_expected_version),
    TEST(test_replace_state_if_writes_only_at_the_expected_version),
    TEST(test_compare_and_set_sees_other_handles_commits),
    TEST(test_state_changed_hooks_see_the_version_of_each_change),
    TEST(test_validator_rejects_with_its_message_and_nothing_is_written),
    TEST(test_validator_sees_the_change_about_to_commit),
    TEST(test_validator_gates_every_write_of_its_handle_and_no_other),
    TEST(test_validator_user_data_is_freed_exactly_once),
    TEST(test_own_handle_from_validator_is_busy),
    TEST(test_change_log_option_is_validated_and_recorded_in_the_store),
    TEST(test_change_log_keep_seconds_prunes_old_changes),
    TEST(test_poll_needs_the_change_log),
    TEST(test_poll_delivers_other_handles_changes_once_in_commit_order),
    TEST(test_poll_delivers_changes_of_another_process),
    TEST(test_poll_reports_pruned_changes_as_a_gap_once),
    TEST(test_changes_since_returns_the_documented_json_array),
    TEST(test_get_state_at_returns_retained_versions),
    TEST(test_restore_state_replaces_with_an_earlier_version),
    TEST(test_buffers_are_owned_nul_terminated_and_safe_to_free_twice),
    TEST(test_buffer_may_be_read_and_freed_on_another_thread),
    TEST(test_threads_share_one_handle_without_lost_updates),
    TEST(test_nested_writes_from_hooks_keep_commit_order_across_threads),
    TEST(test_close_while_other_threads_write),
    TEST(test_two_processes_write_one_file),
    TEST(test_processes_may_create_one_store_at_once),
    TEST(test_processes_compare_and_set_one_counter),
    TEST(test_json_test_suite_corpus),
};

/* Removes the temp directory and everything in it (the tests create no subdirectories). */
static void remove_temp_dir(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *e;
    char path[600];
    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name);
        if (unlink(path) != 0) {
            fprintf(stderr, "cannot remove %s: %s\n", path, strerror(errno));
        }
    }
    closedir(d);
    if (rmdir(g_dir) != 0) {
        fprintf(stderr, "cannot remove %s: %s\n", g_dir, strerror(errno));
    }
}

int main(void)
{
    size_t i;
    const char *quick = getenv("AGENT_TEST_QUICK");
    const char *backend = getenv("AGENT_STATE_TEST_BACKEND");
    int skipped = 0;
    g_quick = quick != NULL && quick[0] != 0 && strcmp(quick, "0") != 0;
    if (backend != NULL && strcmp(backend, "postgres") == 0) {
        g_pg = 1;
        g_pg_uri = getenv("AGENT_STATE_TEST_PG_URI");
        if (g_pg_uri == NULL || g_pg_uri[0] == 0) {
            fprintf(stderr, "AGENT_STATE_TEST_BACKEND=postgres needs AGENT_STATE_TEST_PG_URI\n");
            return 2;
        }
        if (strncmp(g_pg_uri, "postgres://", 11) != 0 && strncmp(g_pg_uri, "postgresql://", 13) != 0) {
            fprintf(stderr, "AGENT_STATE_TEST_PG_URI=%s is not a postgres:// URI\n", g_pg_uri);
            return 2;
        }
        snprintf(g_agent_prefix, sizeof g_agent_prefix, "c_%ld_%lx_", (long)getpid(),
                 (long)time(NULL));
    } else if (backend != NULL && backend[0] != 0 && strcmp(backend, "sqlite") != 0) {
        fprintf(stderr, "AGENT_STATE_TEST_BACKEND=%s: want sqlite or postgres\n", backend);
        return 2;
    }
    if (mkdtemp(g_dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    if (g_pg) {
        AgentHandle probe = 0;
        AgentStatus rc = store_open(":memory:", NULL, &probe);
        printf("agent_state %s C tests%s on PostgreSQL (%s), agents %s*\n", agent_version(),
               g_quick ? " (quick)" : "", g_pg_uri, g_agent_prefix);
        if (rc != AGENT_OK) {
            /* Stop here: tests that wait for a hook or a child would wait for ever. */
            printf("FAIL opening an agent on the server: %s (%s)\n0 passed, 1 failed\n",
                   agent_status_name(rc), agent_last_error());
            rmdir(g_dir);
            return 1;
        }
        agent_close(probe);
    } else {
        printf("agent_state %s C tests%s, store files in %s\n", agent_version(),
               g_quick ? " (quick)" : "", g_dir);
    }
    for (i = 0; i < sizeof k_tests / sizeof k_tests[0]; i++) {
        int failed_before = g_failed;
        g_test = k_tests[i].name;
        if (g_pg && k_tests[i].sqlite_only != NULL) {
            printf("skip %s (SQLite only: %s)\n", k_tests[i].name, k_tests[i].sqlite_only);
            skipped++;
            continue;
        }
        k_tests[i].fn();
        printf("%s %s\n", g_failed == failed_before ? "ok  " : "FAIL", k_tests[i].name);
        fflush(stdout);
    }
    g_test = "";
    remove_temp_dir();
    if (skipped > 0) {
        printf("%d tests skipped (SQLite only)\n", skipped);
    }
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
