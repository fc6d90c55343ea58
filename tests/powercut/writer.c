/*
 * writer.c: the power-cut test's writer (tests/powercut/README.md), run under shim.c, which
 * kills it at a chosen event.
 *
 *   writer LIB STORE MODE [KEEP]
 *     LIB: the libagent_state.so to test (dlopen'ed, so that any build of the library can be
 *     tested without relinking); STORE: the store file; MODE: "full" or "normal" (the
 *     "synchronous" open option); KEEP: N > 0 opens with "change_log": {"keep_last": N}.
 *
 * Opens STORE, reads its version V, then writes patch(V+1), patch(V+2), ... with
 * agent_set_state_if (each expecting the previous version) until it is killed. On stdout, one
 * line per step, each with one write(2), so that a line is in the pipe before the next step:
 *   "B V"  the version found at open      "T v"  about to write version v
 *   "A v"  agent_set_state_if returned OK with version v (the write is acknowledged)
 * Any failure of the library exits with status 3 and a message on stderr.
 *
 * The states: the state at version v is a function of v alone; powercut.py computes the same
 * (keep the two in step):
 *   "v": v;  "m<k>": payload(k), 200 bytes, for the last WINDOW versions k (v-63 .. v);
 *   "big": big(v / 10), 120 KiB, while v % 120 >= 100 (versions 100..119, 220..239, ...).
 * patch(v) is the merge patch from state(v-1) to state(v): sets "v" and "m<v>", deletes
 * "m<v-64>", sets "big" when it changes (v % 10 == 0 inside the big range) and deletes it on
 * leaving the range. The texts are slices of one pseudo-random pool of [a-z0-9].
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_state.h"

enum { POOL_LEN = 262144, PAYLOAD_LEN = 200, BIG_LEN = 120 * 1024, WINDOW = 64 };

static char g_pool[POOL_LEN];

static void make_pool(void) {
    static const char alpha[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned x = 0x12345678u;
    for (int i = 0; i < POOL_LEN; i++) {
        x = x * 1103515245u + 12345u;
        g_pool[i] = alpha[(x >> 16) % 36];
    }
}

static const char *payload(unsigned long long k) {
    return g_pool + (k * 7919u) % (POOL_LEN - PAYLOAD_LEN);
}

static const char *big(unsigned long long s) {
    return g_pool + (s * 104729u) % (POOL_LEN - BIG_LEN);
}

static int big_at(unsigned long long v) { return v >= 1 && v % 120 >= 100; }

static __typeof__(agent_open) *p_open;
static __typeof__(agent_get_state_versioned) *p_get_versioned;
static __typeof__(agent_set_state_if) *p_set_if;
static __typeof__(agent_buffer_free) *p_buffer_free;
static __typeof__(agent_last_error) *p_last_error;
static __typeof__(agent_status_name) *p_status_name;

static void fail(const char *what, AgentStatus st) {
    fprintf(stderr, "writer: %s: %s: %s\n", what, p_status_name(st), p_last_error());
    exit(3);
}

static void say(const char *fmt, ...) {
    char line[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (int off = 0; off < n;) {
        ssize_t w = write(1, line + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) exit(4);
        off += (int)w;
    }
}

/* Appends patch(v) to buf (at least 2 * BIG_LEN bytes); returns its length. */
static size_t make_patch(unsigned long long v, char *buf) {
    size_t n = (size_t)sprintf(buf, "{\"v\":%llu,\"m%llu\":\"%.*s\"", v, v, PAYLOAD_LEN, payload(v));
    if (v > WINDOW) n += (size_t)sprintf(buf + n, ",\"m%llu\":null", v - WINDOW);
    if (big_at(v) && v % 10 == 0) {
        n += (size_t)sprintf(buf + n, ",\"big\":\"");
        memcpy(buf + n, big(v / 10), BIG_LEN);
        n += BIG_LEN;
        buf[n++] = '"';
    } else if (!big_at(v) && big_at(v - 1)) {
        n += (size_t)sprintf(buf + n, ",\"big\":null");
    }
    buf[n++] = '}';
    buf[n] = '\0';
    return n;
}

#define LOAD(var, name)                                                       \
    do {                                                                      \
        *(void **)&var = dlsym(lib, #name);                                   \
        if (!var) {                                                           \
            fprintf(stderr, "writer: %s lacks %s\n", argv[1], #name);         \
            return 2;                                                         \
        }                                                                     \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5 || (strcmp(argv[3], "full") != 0 && strcmp(argv[3], "normal") != 0)) {
        fprintf(stderr, "usage: writer LIB STORE full|normal [KEEP]\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "writer: %s\n", dlerror());
        return 2;
    }
    LOAD(p_open, agent_open);
    LOAD(p_get_versioned, agent_get_state_versioned);
    LOAD(p_set_if, agent_set_state_if);
    LOAD(p_buffer_free, agent_buffer_free);
    LOAD(p_last_error, agent_last_error);
    LOAD(p_status_name, agent_status_name);
    make_pool();

    char options[128];
    long keep = argc == 5 ? strtol(argv[4], NULL, 10) : 0;
    if (keep > 0)
        snprintf(options, sizeof options, "{\"synchronous\":\"%s\",\"change_log\":{\"keep_last\":%ld}}", argv[3], keep);
    else
        snprintf(options, sizeof options, "{\"synchronous\":\"%s\"}", argv[3]);
    AgentHandle h;
    AgentStatus st = p_open(argv[2], options, &h);
    if (st != AGENT_OK) fail("agent_open", st);
    AgentBuffer state = {NULL, 0, NULL};
    uint64_t version = 0;
    st = p_get_versioned(h, &state, &version);
    if (st != AGENT_OK) fail("agent_get_state_versioned", st);
    p_buffer_free(&state);
    say("B %llu\n", (unsigned long long)version);

    char *patch = malloc(2 * BIG_LEN);
    if (!patch) return 5;
    for (unsigned long long v = version + 1;; v++) {
        size_t len = make_patch(v, patch);
        say("T %llu\n", v);
        uint64_t got = 0;
        st = p_set_if(h, v - 1, (const uint8_t *)patch, len, NULL, &got);
        if (st != AGENT_OK) fail("agent_set_state_if", st);
        if (got != v) {
            fprintf(stderr, "writer: agent_set_state_if gave version %llu, expected %llu\n",
                    (unsigned long long)got, v);
            return 3;
        }
        say("A %llu\n", v);
    }
}
