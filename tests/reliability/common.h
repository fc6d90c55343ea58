/*
 * Shared helpers of the reliability tests: checks that count instead of abort, file helpers,
 * and the tiny JSON readers the tests need (the states they write have a fixed, known shape).
 *
 * Every test program prints one "ok"/"FAIL" line per check group and ends with
 * "<name>: N checks, M failed"; its exit status is 0 only when nothing failed.
 */
#ifndef RELIABILITY_COMMON_H
#define RELIABILITY_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "agent_state.h"

static long g_checks;
static long g_failures;

/* Records one check; prints it when it fails (with the library's last error when useful). */
#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        g_checks++;                                                                           \
        if (!(cond)) {                                                                        \
            g_failures++;                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                              \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
        }                                                                                     \
    } while (0)

/* Checks that a call returned `want`; on mismatch prints both names and the last error. */
#define CHECK_STATUS(got_expr, want, ...)                                                     \
    do {                                                                                      \
        AgentStatus got_ = (got_expr);                                                        \
        g_checks++;                                                                           \
        if (got_ != (want)) {                                                                 \
            g_failures++;                                                                     \
            fprintf(stderr, "FAIL %s:%d: got %s, want %s (last error: %s): ", __FILE__,       \
                    __LINE__, agent_status_name(got_), agent_status_name(want),               \
                    agent_last_error());                                                      \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
        }                                                                                     \
    } while (0)

/* A fatal setup failure (not a finding about the library): stop the program. */
#define DIE(...)                                                                              \
    do {                                                                                      \
        fprintf(stderr, "SETUP ERROR %s:%d: ", __FILE__, __LINE__);                           \
        fprintf(stderr, __VA_ARGS__);                                                         \
        fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno));                        \
        exit(2);                                                                              \
    } while (0)

static inline int finish(const char *name) {
    printf("%s: %ld checks, %ld failed\n", name, g_checks, g_failures);
    fflush(stdout);
    return g_failures == 0 ? 0 : 1;
}

/* ---- small utilities ------------------------------------------------------------------- */

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift64*: deterministic per seed, good enough for test randomness. */
static inline uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static inline uint64_t rng_below(uint64_t *s, uint64_t n) { return n ? rng_next(s) % n : 0; }

/* Reads a whole file; returns NULL when it does not exist. The result is NUL-terminated. */
static inline unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap + 1);
    if (!buf) DIE("out of memory");
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            if (!buf) DIE("out of memory");
        }
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

static inline void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) DIE("cannot create %s", path);
    if (len && fwrite(data, 1, len, f) != len) DIE("cannot write %s", path);
    if (fclose(f) != 0) DIE("cannot close %s", path);
}

/* FNV-1a of a file's bytes; 0 when the file does not exist. */
static inline uint64_t file_hash(const char *path) {
    size_t len;
    unsigned char *b = read_file(path, &len);
    if (!b) return 0;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    free(b);
    return h ? h : 1;
}

static inline int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Removes a store file, its WAL and shared-memory files, and the library's watch ring (the
 * file where writers note which agent each commit changed, for watches). */
static inline void remove_store(const char *path) {
    size_t n = strlen(path);
    char *side = malloc(n + 7);
    if (!side) DIE("out of memory");
    unlink(path);
    memcpy(side, path, n);
    memcpy(side + n, "-wal", 5);
    unlink(side);
    memcpy(side + n, "-shm", 5);
    unlink(side);
    memcpy(side + n, "-watch", 7);
    unlink(side);
    free(side);
}

/* Makes `dir` (and its parents) exist. */
static inline void make_dirs(const char *dir) {
    char *tmp = strdup(dir);
    if (!tmp) DIE("out of memory");
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) DIE("cannot create %s", dir);
    free(tmp);
}

/* The state of handle h as a malloc'd NUL-terminated string, or NULL on error (status in *st). */
static inline char *get_state_str(AgentHandle h, AgentStatus *st) {
    AgentBuffer b = {0};
    AgentStatus s = agent_get_state(h, &b);
    if (st) *st = s;
    if (s != AGENT_OK) return NULL;
    char *copy = malloc(b.len + 1);
    if (!copy) DIE("out of memory");
    memcpy(copy, b.data, b.len);
    copy[b.len] = 0;
    agent_buffer_free(&b);
    return copy;
}

static inline AgentStatus set_str(AgentHandle h, const char *patch) {
    return agent_set_state(h, (const uint8_t *)patch, strlen(patch), NULL);
}

/*
 * Reads the integer member `key` of the object that starts at `obj` (compact JSON as the
 * library writes it; `key` is looked up among the object's direct members only). Returns 1 and
 * stores the value when found.
 */
static inline int json_member_int(const char *obj, size_t len, const char *key, long long *out) {
    size_t klen = strlen(key);
    int depth = 0, in_str = 0;
    const char *end = obj + len;
    for (const char *p = obj; p < end; p++) {
        char c = *p;
        if (in_str) {
            if (c == '\\') p++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
        else if (c == '"') {
            if (depth == 1 && (size_t)(end - p) > klen + 2 && memcmp(p + 1, key, klen) == 0 &&
                p[klen + 1] == '"' && p[klen + 2] == ':') {
                char *e;
                long long v = strtoll(p + klen + 3, &e, 10);
                if (e == p + klen + 3) return 0;
                *out = v;
                return 1;
            }
            in_str = 1;
        }
    }
    return 0;
}

/*
 * Finds the object value of direct member `key` of the object at `obj`; returns a pointer to its
 * '{' and stores its length (through the matching '}'), or NULL.
 */
static inline const char *json_member_obj(const char *obj, size_t len, const char *key,
                                          size_t *olen) {
    size_t klen = strlen(key);
    int depth = 0, in_str = 0;
    const char *end = obj + len;
    for (const char *p = obj; p < end; p++) {
        char c = *p;
        if (in_str) {
            if (c == '\\') p++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
        else if (c == '"') {
            if (depth == 1 && (size_t)(end - p) > klen + 3 && memcmp(p + 1, key, klen) == 0 &&
                p[klen + 1] == '"' && p[klen + 2] == ':' && p[klen + 3] == '{') {
                const char *s = p + klen + 3;
                int d = 0, q = 0;
                for (const char *r = s; r < end; r++) {
                    if (q) {
                        if (*r == '\\') r++;
                        else if (*r == '"') q = 0;
                        continue;
                    }
                    if (*r == '"') q = 1;
                    else if (*r == '{' || *r == '[') d++;
                    else if ((*r == '}' || *r == ']') && --d == 0) {
                        *olen = (size_t)(r - s + 1);
                        return s;
                    }
                }
                return NULL;
            }
            in_str = 1;
        }
    }
    return NULL;
}

/* Directory for this run's scratch files: $RELIABILITY_TMP or target/reliability/tmp. */
static inline const char *scratch_dir(void) {
    const char *d = getenv("RELIABILITY_TMP");
    return d && *d ? d : "target/reliability/tmp";
}

static inline int quick_mode(void) {
    const char *m = getenv("RELIABILITY_MODE");
    return !(m && strcmp(m, "soak") == 0);
}

/* An integer from the environment, or `dflt`. */
static inline long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

/* ---- where the store is: a file, or a PostgreSQL agent ---------------------------------- */

/*
 * The programs that can run on PostgreSQL (crash, concurrency, cas, pg_handles, pg_server) take
 * the store from $AGENT_STATE_RELIABILITY_STORE when it is set: a `postgresql://` URI (or a file
 * path), used instead of their own scratch file. With a URI every handle names an agent (the
 * open option "agent_id", required there): $AGENT_STATE_RELIABILITY_AGENT (default "rel") plus
 * the test's name, process id and time, so that every run starts from a fresh, empty agent of
 * the shared server. On a file the agent id is passed only when $AGENT_STATE_RELIABILITY_AGENT
 * is set (SQLite's many agents per file).
 */
static inline const char *store_override(void) {
    const char *s = getenv("AGENT_STATE_RELIABILITY_STORE");
    return s && *s ? s : NULL;
}

static inline int is_pg_uri(const char *loc) {
    return loc && (strncmp(loc, "postgresql://", 13) == 0 || strncmp(loc, "postgres://", 11) == 0);
}

/* The store of this run: the override, or `file` (then removed first, with its side files). */
static inline const char *store_location(const char *file) {
    const char *o = store_override();
    if (o) return o;
    remove_store(file);
    return file;
}

/* Fills `buf` with this run's agent id for test `name`; returns buf, or NULL for no agent id. */
static inline const char *store_agent(const char *loc, const char *name, char *buf, size_t cap) {
    const char *prefix = getenv("AGENT_STATE_RELIABILITY_AGENT");
    if (!(prefix && *prefix) && !is_pg_uri(loc)) return NULL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(buf, cap, "%s-%s-%ld-%lld%06ld", prefix && *prefix ? prefix : "rel", name, (long)getpid(),
             (long long)ts.tv_sec, ts.tv_nsec / 1000);
    return buf;
}

/*
 * Builds open options: {"agent_id":"<agent>",<extra>} (either part may be absent; `extra` is
 * members without braces, e.g. "\"synchronous\":\"full\""). Returns buf.
 */
static inline const char *store_options(char *buf, size_t cap, const char *agent, const char *extra) {
    int n = snprintf(buf, cap, "{");
    if (agent) n += snprintf(buf + n, cap - (size_t)n, "\"agent_id\":\"%s\"", agent);
    if (extra && *extra) n += snprintf(buf + n, cap - (size_t)n, "%s%s", agent ? "," : "", extra);
    snprintf(buf + n, cap - (size_t)n, "}");
    return buf;
}

/* A short name of the store kind for the programs' summary lines. */
static inline const char *store_kind(const char *loc) { return is_pg_uri(loc) ? "postgresql" : "sqlite"; }

/* ---- PostgreSQL side queries (psql) ---------------------------------------------------- */

#include <sys/wait.h>

/* psql: $PSQL, /usr/bin/psql, or the newest /usr/lib/postgresql/N/bin/psql. */
static inline const char *psql_path(void) {
    const char *e = getenv("PSQL");
    if (e && *e) return e;
    if (access("/usr/bin/psql", X_OK) == 0) return "/usr/bin/psql";
    static char found[64];
    for (int v = 30; v >= 9; v--) {
        snprintf(found, sizeof found, "/usr/lib/postgresql/%d/bin/psql", v);
        if (access(found, X_OK) == 0) return found;
    }
    return "psql";
}

/*
 * Runs one SQL query through psql on `uri` (no shell) and returns its single integer result,
 * or -1 when psql failed or printed no number.
 */
static inline long long pg_query_int(const char *uri, const char *sql) {
    int fds[2];
    if (pipe(fds) != 0) DIE("pipe");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) DIE("fork");
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        const char *psql = psql_path();
        execl(psql, psql, "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-d", uri, "-c", sql,
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char out[256];
    size_t n = 0;
    ssize_t r;
    while ((r = read(fds[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)r;
    close(fds[0]);
    out[n] = 0;
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    char *end;
    long long v = strtoll(out, &end, 10);
    return end == out ? -1 : v;
}

/* `uri` with one more query parameter ("name=value"); malloc'd. */
static inline char *uri_with_param(const char *uri, const char *param) {
    size_t n = strlen(uri) + strlen(param) + 2;
    char *s = malloc(n);
    if (!s) DIE("out of memory");
    snprintf(s, n, "%s%c%s", uri, strchr(uri, '?') ? '&' : '?', param);
    return s;
}

/* Server processes serving clients whose application_name is `app` (-1: psql failed). */
static inline long long pg_backends_of(const char *uri, const char *app) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
             "AND pid <> pg_backend_pid() AND application_name = '%s'",
             app);
    return pg_query_int(uri, sql);
}

#endif
