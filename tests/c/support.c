/*
 * The C suite's helpers (declared in check.h): the temporary directory, text and file
 * helpers, and the backend: where "a store file" lives.
 */
#include "check.h"

char g_dir[] = "/tmp/agent_state_test_XXXXXX";

/* "<temp dir>/<name>", in one of a few rotating static buffers (main thread only). */
const char *tmp_path(const char *name)
{
    static char bufs[8][512];
    static int next;
    char *p = bufs[next++ % 8];
    snprintf(p, sizeof bufs[0], "%s/%s", g_dir, name);
    return p;
}

int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The last error, worth showing only after a failed call. */
const char *error_if_failed(AgentStatus rc)
{
    return rc == AGENT_OK ? "no error" : agent_last_error();
}

AgentBuffer junk_buffer(void)
{
    /* A non-empty output buffer not owned by the library: a failing call must overwrite it
     * with the empty buffer (owner NULL, so nothing leaks either way). */
    AgentBuffer b;
    b.data = (const uint8_t *)"junk";
    b.len = 4;
    b.owner = NULL;
    return b;
}

AgentStatus set_s(AgentHandle h, const char *patch, AgentBuffer *out)
{
    return agent_set_state(h, (const uint8_t *)patch, strlen(patch), out);
}

AgentStatus replace_s(AgentHandle h, const char *next, AgentBuffer *out)
{
    return agent_replace_state(h, (const uint8_t *)next, strlen(next), out);
}

AgentStatus set_if_s(AgentHandle h, uint64_t expected, const char *patch, AgentBuffer *out,
                     uint64_t *out_version)
{
    return agent_set_state_if(h, expected, (const uint8_t *)patch, strlen(patch), out, out_version);
}

AgentStatus replace_if_s(AgentHandle h, uint64_t expected, const char *next,
                         AgentBuffer *out, uint64_t *out_version)
{
    return agent_replace_state_if(h, expected, (const uint8_t *)next, strlen(next), out,
                                  out_version);
}

char *dup_bytes(const uint8_t *p, size_t n)
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
char *state_copy(AgentHandle h)
{
    AgentBuffer b = { NULL, 0, NULL };
    char *s = NULL;
    if (agent_get_state(h, &b) == AGENT_OK) {
        s = dup_bytes(b.data, b.len);
    }
    agent_buffer_free(&b);
    return s;
}

/* ---- the backend: where "a store file" lives ------------------------------------------------
 *
 * AGENT_STATE_TEST_BACKEND=postgres (with AGENT_STATE_TEST_PG_URI) runs the tests on a
 * PostgreSQL server: a store path in this run's temporary directory names an agent on the
 * server instead, agent_id "c_<pid>_<start time>_<file name>" (so that opening the same name
 * twice opens the same store, in forked children too), and ":memory:" a fresh agent at each
 * open (private and empty, like an in-memory store). Every open of a test store goes through
 * store_open. Tests about files, paths and :memory: are marked SQLITE_ONLY in k_tests
 * (main.c). */
int g_pg;
const char *g_pg_uri;
char g_agent_prefix[64];

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
AgentStatus store_open(const char *path, const char *options, AgentHandle *out)
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

AgentHandle open_at(const char *path, const char *options)
{
    AgentHandle h = 0;
    if (!CHECK_STATUS(AGENT_OK, store_open(path, options, &h))) {
        fprintf(stderr, "    (while opening %s with %s)\n", path, options ? options : "NULL");
    }
    return h;
}

AgentHandle open_store(const char *name, const char *options)
{
    return open_at(tmp_path(name), options);
}

/* Reads integer member "key" of a flat JSON object text; 0 when absent. */
long member_int(const char *json, size_t len, const char *key)
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
char *nested_document(int levels, int arrays)
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

int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f != NULL && fwrite(data, 1, n, f) == n;
    if (f != NULL && fclose(f) != 0) {
        ok = 0;
    }
    return ok;
}

/* Reads a whole file (at most `cap` bytes) into `buf`; returns its size or -1. */
long read_file(const char *path, void *buf, size_t cap)
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

void sleep_ms(long ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

/* A free_user_data that counts its calls in the int it is given. */
void count_free(void *user_data)
{
    ++*(int *)user_data;
}
