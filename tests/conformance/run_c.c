/*
 * The C runner of the cross-language conformance vectors (tests/conformance/README.md): every
 * vector file named on the command line, each vector on a fresh store, through the C ABI.
 *
 * Inputs are the vectors' JSON text, compacted, passed to the library untouched; outputs are
 * compared byte for byte. One line per vector ("ok", "FAIL" with the reason, or "skip" for a
 * vector restricted to other runners); the last line is "N passed, M failed" (vectors).
 * `make test-c` runs it.
 */
#define _GNU_SOURCE

#include "agent_state.h"
#include "json_reader.h"
#include "vector_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the store location: one helper, so that another backend can be plugged in ---------- */

static char g_dir[] = "/tmp/agent_state_conformance_XXXXXX";
static int g_have_dir;
static const char *g_backend; /* "sqlite" or "postgres" (vt_backend) */
static const char *g_pg_uri;  /* the server, for "postgres" */

/* Where the next vector's store lives (tests/conformance/README.md): on SQLite a fresh file in
 * this run's temporary directory, `agent_id` empty; on PostgreSQL the server's URI and a fresh
 * agent_id, which every open of the vector adds to its options (open_store). */
static int store_location(char *out, size_t cap, char *agent_id, size_t id_cap)
{
    static unsigned counter;
    agent_id[0] = 0;
    if (strcmp(g_backend, "postgres") == 0) {
        vt_agent_id("c", agent_id, id_cap);
        snprintf(out, cap, "%s", g_pg_uri);
        return 1;
    }
    counter++;
    if (!g_have_dir) {
        if (mkdtemp(g_dir) == NULL) {
            perror("mkdtemp");
            return 0;
        }
        g_have_dir = 1;
    }
    snprintf(out, cap, "%s/c%ld_%u.db", g_dir, (long)getpid(), counter);
    return 1;
}

/* Removes a temporary store file and its WAL companions (nothing for an external store). */
static void drop_store(const char *path)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    char name[4200];
    size_t k;
    if (!g_have_dir || strncmp(path, g_dir, strlen(g_dir)) != 0) {
        return;
    }
    for (k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "%s%s", path, suffixes[k]);
        unlink(name);
    }
}

/* ---- the recording hook and the validator -------------------------------------------------- */

typedef struct Event {
    char *next, *prev, *patch; /* patch NULL for a replacement */
    uint64_t version;
} Event;

typedef struct Run {
    AgentHandle h;
    char path[4096];
    char agent_id[128]; /* PostgreSQL: the vector's agent, added to every open's options */
    const JrNode *vector;
    Event *events;
    size_t n_events, cap_events;
    char *fail_when;   /* the hook fails when `next` has this member */
    char *reject_when; /* the validator rejects when `next` has this member */
    char why[1024];
} Run;

static char *dup_bytes(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s != NULL) {
        memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

static int has_member(const uint8_t *json, size_t len, const char *name)
{
    char err[128];
    JrNode *root = jr_parse((const char *)json, len, err, sizeof err);
    int found = jr_get(root, name) != NULL;
    jr_free(root);
    return found;
}

static int32_t record(void *user_data, const AgentStateChange *c)
{
    Run *r = user_data;
    Event *e;
    if (r->n_events == r->cap_events) {
        Event *bigger = realloc(r->events, (r->cap_events * 2 + 8) * sizeof *bigger);
        if (bigger == NULL) {
            return 1;
        }
        r->events = bigger;
        r->cap_events = r->cap_events * 2 + 8;
    }
    e = &r->events[r->n_events++];
    e->next = dup_bytes(c->next, c->next_len);
    e->prev = dup_bytes(c->prev, c->prev_len);
    e->patch = c->patch != NULL ? dup_bytes(c->patch, c->patch_len) : NULL;
    e->version = c->version;
    return r->fail_when != NULL && has_member(c->next, c->next_len, r->fail_when);
}

static int32_t validate(void *user_data, const AgentStateChange *c, AgentBuffer *message)
{
    Run *r = user_data;
    char text[300];
    if (!has_member(c->next, c->next_len, r->reject_when)) {
        return 0;
    }
    snprintf(text, sizeof text, "the state may not have the member %s", r->reject_when);
    agent_buffer_copy((const uint8_t *)text, strlen(text), message);
    return 1;
}

static void clear_events(Run *r)
{
    size_t k;
    for (k = 0; k < r->n_events; k++) {
        free(r->events[k].next);
        free(r->events[k].prev);
        free(r->events[k].patch);
    }
    r->n_events = 0;
}

/* ---- checks ---------------------------------------------------------------------------------- */

static int failf(Run *r, const char *fmt, const char *a, const char *b)
{
    snprintf(r->why, sizeof r->why, fmt, a, b);
    return 0;
}

/* The call returned `got` (with message `msg`); the op wants its "status" and "message". */
static int status_ok(Run *r, const JrNode *op, AgentStatus got, const char *msg)
{
    const JrNode *want = jr_get(op, "status");
    const JrNode *part = jr_get(op, "message");
    const char *want_name = want != NULL ? want->str : "AGENT_OK";
    if (strcmp(agent_status_name(got), want_name) != 0) {
        char got_text[700];
        snprintf(got_text, sizeof got_text, "%s (%s)", agent_status_name(got), msg);
        return failf(r, "got %s, want %s", got_text, want_name);
    }
    if (got != AGENT_OK && part != NULL && strstr(msg, part->str) == NULL) {
        return failf(r, "message \"%s\" does not contain \"%s\"", msg, part->str);
    }
    return 1;
}

/* `actual` (len bytes) equals `want` (want_len bytes; NULL: the vector's text was unusable). */
static int same_text(Run *r, const char *what, const char *want, size_t want_len,
                     const char *actual, size_t len)
{
    char line[900];
    if (want != NULL && want_len == len && memcmp(want, actual, len) == 0) {
        return 1;
    }
    snprintf(line, sizeof line, "%.400s, want %.400s", actual != NULL ? actual : "(nothing)",
             want != NULL ? want : "(unreadable expectation)");
    return failf(r, "%s: got %s", what, line);
}

/* `actual` equals the expectation `field` (or `field`_text) of `obj`, when there is one. */
static int expect_ok(Run *r, const char *what, const JrNode *obj, const char *field,
                     const char *actual, size_t len)
{
    size_t want_len = 0;
    char *want = vt_expected(obj, field, &want_len);
    int ok;
    if (want == NULL && jr_get(obj, field) == NULL) {
        char name[64];
        snprintf(name, sizeof name, "%s_text", field);
        if (jr_get(obj, name) == NULL) {
            return 1;
        }
    }
    ok = same_text(r, what, want, want_len, actual, len);
    free(want);
    return ok;
}

static int version_ok(Run *r, const JrNode *want, uint64_t got)
{
    char a[32], b[64];
    if (want == NULL || strtoull(want->raw, NULL, 10) == got) {
        return 1;
    }
    snprintf(a, sizeof a, "%" PRIu64, got);
    snprintf(b, sizeof b, "%.*s", (int)want->raw_len, want->raw);
    return failf(r, "version %s, want %s", a, b);
}

/* The store's version now equals the op's "version" (when given). */
static int version_now_ok(Run *r, const JrNode *op)
{
    AgentBuffer now = {NULL, 0, NULL};
    uint64_t version = 0;
    AgentStatus rc;
    if (jr_get(op, "version") == NULL) {
        return 1;
    }
    rc = agent_get_state_versioned(r->h, &now, &version);
    agent_buffer_free(&now);
    if (rc != AGENT_OK) {
        return failf(r, "reading the version failed: %s%s", agent_last_error(), "");
    }
    return version_ok(r, jr_get(op, "version"), version);
}

/* ---- opening --------------------------------------------------------------------------------- */

/* Opens r->path with `options` (NULL: defaults) and registers the vector's hook and gate. */
static AgentStatus open_store(Run *r, const JrNode *options, char *msg, size_t msglen)
{
    char *text = NULL;
    size_t len;
    AgentStatus rc;
    uint64_t id;
    if (options != NULL) {
        text = jr_compact(options, &len);
    }
    if (r->agent_id[0] != 0) {
        char *with_id = vt_with_agent_id(text, r->agent_id);
        free(text);
        text = with_id;
        if (text == NULL) {
            snprintf(msg, msglen, "out of memory");
            return AGENT_ERR_INVALID_ARGUMENT;
        }
    }
    rc = agent_open(r->path, text, &r->h);
    free(text);
    if (rc != AGENT_OK) {
        snprintf(msg, msglen, "%s", agent_last_error());
        return rc;
    }
    if (jr_get(r->vector, "hooks") != NULL || r->fail_when != NULL) {
        rc = agent_on_state_changed(r->h, record, r, NULL, &id);
    }
    if (rc == AGENT_OK && r->reject_when != NULL) {
        rc = agent_set_validator(r->h, validate, r, NULL);
    }
    if (rc != AGENT_OK) {
        snprintf(msg, msglen, "registering the hooks: %s", agent_last_error());
    }
    return rc;
}

/* ---- operations ------------------------------------------------------------------------------ */

static int events_ok(Run *r, const JrNode *want)
{
    size_t k;
    char label[64];
    if (want == NULL || want->kind != JR_ARRAY) {
        return failf(r, "%s%s", "events op without an \"events\" array", "");
    }
    if (want->n != r->n_events) {
        char a[32], b[32];
        snprintf(a, sizeof a, "%lu", (unsigned long)r->n_events);
        snprintf(b, sizeof b, "%lu", (unsigned long)want->n);
        return failf(r, "%s deliveries, want %s", a, b);
    }
    for (k = 0; k < want->n; k++) {
        const Event *e = &r->events[k];
        const JrNode *w = want->items[k];
        snprintf(label, sizeof label, "delivery %lu next", (unsigned long)k + 1);
        if (!expect_ok(r, label, w, "next", e->next, strlen(e->next))) {
            return 0;
        }
        snprintf(label, sizeof label, "delivery %lu prev", (unsigned long)k + 1);
        if (!expect_ok(r, label, w, "prev", e->prev, strlen(e->prev))) {
            return 0;
        }
        snprintf(label, sizeof label, "delivery %lu patch", (unsigned long)k + 1);
        if (!expect_ok(r, label, w, "patch", e->patch != NULL ? e->patch : "null",
                       e->patch != NULL ? strlen(e->patch) : 4)) {
            return 0;
        }
        if (!version_ok(r, jr_get(w, "version"), e->version)) {
            return 0;
        }
    }
    clear_events(r);
    return 1;
}

static int run_op(Run *r, const JrNode *op)
{
    const JrNode *kind = jr_get(op, "op");
    const char *name = kind != NULL ? kind->str : "";
    AgentBuffer buf = {NULL, 0, NULL};
    uint64_t version = 0;
    AgentStatus rc;
    char msg[600] = "";
    size_t len = 0;
    char *input = NULL;
    int ok, have_version = 0;
    if (strcmp(name, "events") == 0) {
        return events_ok(r, jr_get(op, "events"));
    }
    if (strcmp(name, "reopen") == 0) {
        const JrNode *options = jr_get(op, "open");
        agent_close(r->h);
        r->h = 0;
        rc = open_store(r, options != NULL ? options : jr_get(r->vector, "open"), msg, sizeof msg);
        return status_ok(r, op, rc, msg);
    }
    if (strcmp(name, "get") == 0) {
        rc = agent_get_state_versioned(r->h, &buf, &version);
        have_version = 1;
    } else {
        const JrNode *if_version = jr_get(op, "if_version");
        uint64_t expected = if_version != NULL ? strtoull(if_version->raw, NULL, 10) : 0;
        input = vt_input(op, &len);
        if (input == NULL) {
            return failf(r, "op %s has no input%s", name, "");
        }
        if (strcmp(name, "set") == 0) {
            rc = agent_set_state(r->h, (const uint8_t *)input, len, &buf);
        } else if (strcmp(name, "replace") == 0) {
            rc = agent_replace_state(r->h, (const uint8_t *)input, len, &buf);
        } else if (strcmp(name, "set_if") == 0) {
            rc = agent_set_state_if(r->h, expected, (const uint8_t *)input, len, &buf, &version);
            have_version = rc == AGENT_OK;
        } else if (strcmp(name, "replace_if") == 0) {
            rc = agent_replace_state_if(r->h, expected, (const uint8_t *)input, len, &buf, &version);
            have_version = rc == AGENT_OK;
        } else if (strcmp(name, "patch") == 0) {
            rc = agent_patch_state(r->h, (const uint8_t *)input, len, &buf);
        } else if (strcmp(name, "patch_if") == 0) {
            rc = agent_patch_state_if(r->h, expected, (const uint8_t *)input, len, &buf, &version);
            have_version = rc == AGENT_OK;
        } else {
            free(input);
            return failf(r, "unknown op %s%s", name, "");
        }
    }
    if (rc != AGENT_OK) {
        snprintf(msg, sizeof msg, "%s", agent_last_error());
    }
    free(input);
    ok = status_ok(r, op, rc, msg);
    if (ok && rc == AGENT_OK) {
        ok = expect_ok(r, "state", op, "expect", (const char *)buf.data, buf.len);
    }
    if (ok) {
        ok = have_version ? version_ok(r, jr_get(op, "version"), version) : version_now_ok(r, op);
    }
    agent_buffer_free(&buf);
    return ok;
}

/* ---- vectors and files ----------------------------------------------------------------------- */

/* The open returned `rc` (message `msg`): the vector's "open_status" and "open_message". */
static int open_status_ok(Run *r, AgentStatus rc, const char *msg)
{
    const JrNode *want = jr_get(r->vector, "open_status");
    const JrNode *part = jr_get(r->vector, "open_message");
    const char *want_name = want != NULL ? want->str : "AGENT_OK";
    if (strcmp(agent_status_name(rc), want_name) != 0) {
        char got[700];
        snprintf(got, sizeof got, "%s (%s)", agent_status_name(rc), msg);
        return failf(r, "open: got %s, want %s", got, want_name);
    }
    if (rc != AGENT_OK && part != NULL && strstr(msg, part->str) == NULL) {
        return failf(r, "open message \"%s\" does not contain \"%s\"", msg, part->str);
    }
    return 1;
}

static int run_vector(Run *r)
{
    const JrNode *ops = jr_get(r->vector, "ops");
    const JrNode *open_status = jr_get(r->vector, "open_status");
    const JrNode *fail_when = jr_get(r->vector, "hook_fails_when");
    const JrNode *reject_when = jr_get(r->vector, "validator_rejects");
    char msg[600] = "";
    AgentStatus rc;
    size_t k;
    int ok = 1;
    r->fail_when = fail_when != NULL ? fail_when->str : NULL;
    r->reject_when = reject_when != NULL ? reject_when->str : NULL;
    if (!store_location(r->path, sizeof r->path, r->agent_id, sizeof r->agent_id)) {
        return failf(r, "%s%s", "no store location", "");
    }
    rc = open_store(r, jr_get(r->vector, "open"), msg, sizeof msg);
    if (open_status != NULL || rc != AGENT_OK) {
        ok = open_status_ok(r, rc, msg);
    }
    for (k = 0; ok && rc == AGENT_OK && open_status == NULL && ops != NULL && k < ops->n; k++) {
        ok = run_op(r, ops->items[k]);
        if (!ok) {
            char where[sizeof r->why];
            memcpy(where, r->why, sizeof where);
            snprintf(r->why, sizeof r->why, "op %lu: %.990s", (unsigned long)k + 1, where);
        }
    }
    if (r->h != 0) {
        agent_close(r->h);
        r->h = 0;
    }
    clear_events(r);
    drop_store(r->path);
    return ok;
}

int main(int argc, char **argv)
{
    int passed = 0, failed = 0, skipped = 0, i;
    Run r;
    char why[200];
    memset(&r, 0, sizeof r);
    g_backend = vt_backend(&g_pg_uri, why, sizeof why);
    if (g_backend == NULL) {
        fprintf(stderr, "conformance_c: %s\n", why);
        return 2;
    }
    printf("agent_state %s conformance vectors, C runner, backend %s\n", agent_version(), g_backend);
    for (i = 1; i < argc; i++) {
        char err[256];
        size_t len, k;
        char *text = jr_read_file(argv[i], &len);
        JrNode *file = text != NULL ? jr_parse(text, len, err, sizeof err) : NULL;
        const JrNode *vectors = jr_get(file, "vectors");
        if (vectors == NULL) {
            printf("FAIL %s: cannot read the vectors (%s)\n", argv[i], text ? err : "no file");
            failed++;
        }
        for (k = 0; vectors != NULL && k < vectors->n; k++) {
            const JrNode *name = jr_get(vectors->items[k], "name");
            r.vector = vectors->items[k];
            if (!vt_runs_here(r.vector, "c") || !vt_backend_ok(r.vector, g_backend)) {
                printf("skip %s: %s\n", argv[i], name->str);
                skipped++;
                continue;
            }
            r.why[0] = 0;
            if (run_vector(&r)) {
                passed++;
                printf("ok   %s: %s\n", argv[i], name->str);
            } else {
                failed++;
                printf("FAIL %s: %s: %s\n", argv[i], name->str, r.why);
            }
        }
        jr_free(file);
        free(text);
    }
    free(r.events);
    if (g_have_dir) {
        rmdir(g_dir);
    }
    printf("%d skipped (restricted to other runners or backends)\n", skipped);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
