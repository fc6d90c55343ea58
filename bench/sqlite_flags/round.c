/* One round of bench/sqlite_flags/run.sh: loads the libagent_state.so named on the command
 * line (a build with one set of the bundled SQLite's compile flags), runs each case for a fixed
 * count of operations on a store in DIR, and prints "case ns_per_op" lines. run.sh alternates
 * the builds round by round and takes the medians, so that the shared machine's noise hits every
 * build alike.
 *
 *   round LIB DIR OPS_FULL OPS_NORMAL OPS_GET
 *
 * The cases: a 1 KiB set_state (a two-member patch) at synchronous full, the same at normal,
 * and get_state on a hot handle. Through dlopen, so that one binary measures every build. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct AgentBuffer {
    const uint8_t *data;
    size_t len;
    void *owner;
} AgentBuffer;

typedef int (*open_fn)(const char *, const char *, uint64_t *);
typedef int (*close_fn)(uint64_t);
typedef int (*get_fn)(uint64_t, AgentBuffer *);
typedef int (*set_fn)(uint64_t, const uint8_t *, size_t, AgentBuffer *);
typedef void (*free_fn)(AgentBuffer *);
typedef const char *(*err_fn)(void);

static open_fn a_open;
static close_fn a_close;
static get_fn a_get;
static set_fn a_set, a_replace;
static free_fn a_free;
static err_fn a_err;

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "round: %s: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

static void check(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "round: %s failed (%d): %s\n", what, rc, a_err());
        exit(1);
    }
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* A state of about 1 KiB, as benches/support/mod.rs's make_state makes it. */
static void make_state(char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "{\"status\":\"idle\"");
    for (int i = 0; n + 260 < 1024 || i < 2; i++) {
        n += (size_t)snprintf(out + n, cap - n,
                              ",\"m%d\":{\"id\":%d,\"name\":\"member %d\",\"tags\":[\"alpha\",\"beta\"],"
                              "\"score\":0.5,\"text\":\"%0150d\"}",
                              i, i, i, 0);
    }
    snprintf(out + n, cap - n, "}");
}

static uint64_t open_store(const char *dir, const char *name, const char *sync, const char *state) {
    char path[4096], options[128];
    snprintf(path, sizeof path, "%s/%s.db", dir, name);
    snprintf(options, sizeof options, "{\"synchronous\":\"%s\"}", sync);
    uint64_t h = 0;
    check(a_open(path, options, &h), "agent_open");
    check(a_replace(h, (const uint8_t *)state, strlen(state), NULL), "agent_replace_state");
    return h;
}

static double set_loop(uint64_t h, long ops) {
    char patch[128];
    double t0 = now_ns();
    for (long i = 0; i < ops; i++) {
        int n = snprintf(patch, sizeof patch, "{\"status\":\"s%ld\",\"m1\":{\"id\":%ld,\"score\":%ld.25}}",
                         i % 64, i % 64, i % 7);
        check(a_set(h, (const uint8_t *)patch, (size_t)n, NULL), "agent_set_state");
    }
    return (now_ns() - t0) / (double)ops;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: round LIB DIR OPS_FULL OPS_NORMAL OPS_GET\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "round: %s\n", dlerror());
        return 1;
    }
    a_open = (open_fn)sym(lib, "agent_open");
    a_close = (close_fn)sym(lib, "agent_close");
    a_get = (get_fn)sym(lib, "agent_get_state");
    a_set = (set_fn)sym(lib, "agent_set_state");
    a_replace = (set_fn)sym(lib, "agent_replace_state");
    a_free = (free_fn)sym(lib, "agent_buffer_free");
    a_err = (err_fn)sym(lib, "agent_last_error");
    const char *dir = argv[2];
    long ops_full = atol(argv[3]), ops_normal = atol(argv[4]), ops_get = atol(argv[5]);
    static char state[4096];
    make_state(state, sizeof state);

    uint64_t full = open_store(dir, "full", "full", state);
    set_loop(full, 5); /* warm-up */
    if (ops_full > 0)
        printf("set_full %.1f\n", set_loop(full, ops_full));
    check(a_close(full), "agent_close");

    uint64_t normal = open_store(dir, "normal", "normal", state);
    set_loop(normal, 20);
    printf("set_normal %.1f\n", set_loop(normal, ops_normal));

    AgentBuffer b;
    size_t sink = 0;
    for (int i = 0; i < 1000; i++) {
        check(a_get(normal, &b), "agent_get_state");
        a_free(&b);
    }
    double t0 = now_ns();
    for (long i = 0; i < ops_get; i++) {
        check(a_get(normal, &b), "agent_get_state");
        sink += b.data[b.len - 1];
        a_free(&b);
    }
    printf("get_hot %.1f\n", (now_ns() - t0) / (double)ops_get);
    check(a_close(normal), "agent_close");
    return sink == 0 ? 3 : 0;
}
