/*
 * A driver for instruction profiles of the write path (bench/profile.sh runs it under
 * callgrind): N calls of one kind on a store in /dev/shm, states like the bench's (a status
 * plus ~250-byte members), after one replace_state of the first state.
 *
 *   writes set SIZE N [EXTRA_OPTIONS]      set_state with a patch touching two members
 *   writes replace SIZE N [EXTRA_OPTIONS]  replace_state, alternating two states
 *   writes whole SIZE N [EXTRA_OPTIONS]    set_state with a patch repeating the whole state
 *   writes open SIZE N                     open + get_state + close of an existing store
 *
 * EXTRA_OPTIONS is appended inside the options object, e.g. ',"change_log":{"keep_last":1000}'.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_state.h"

static char *make_state(size_t size, int salt)
{
    char *s = malloc(size + 1024);
    size_t n = 0;
    int i = 0;
    n += (size_t)sprintf(s + n, "{\"status\":\"idle%d\"", salt);
    while (n + 260 < size || i < 2) {
        n += (size_t)sprintf(s + n,
                             ",\"m%d\":{\"id\":%d,\"name\":\"member %d\",\"tags\":[\"alpha\",\"beta\"],"
                             "\"score\":0.5,\"text\":\"%0150d\"}",
                             i, i, i, 0);
        i++;
    }
    s[n++] = '}';
    s[n] = 0;
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: writes set|replace|whole|open SIZE N [EXTRA_OPTIONS]\n");
        return 2;
    }
    const char *mode = argv[1];
    size_t size = (size_t)atol(argv[2]);
    int n = atoi(argv[3]);
    char path[64], wal[80], shm[80], opts[512], patch[200];
    snprintf(path, sizeof path, "/dev/shm/agent_state_profile_%d.db", (int)getpid());
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    snprintf(opts, sizeof opts, "{\"synchronous\":\"normal\",\"max_value_bytes\":4194304%s}",
             argc > 4 ? argv[4] : "");
    AgentHandle h;
    if (agent_open(path, opts, &h) != AGENT_OK) {
        fprintf(stderr, "%s\n", agent_last_error());
        return 1;
    }
    char *st[2] = { make_state(size, 1), make_state(size, 2) };
    agent_replace_state(h, (const uint8_t *)st[0], strlen(st[0]), NULL);
    int rc = AGENT_OK;
    for (int i = 0; i < n && rc == AGENT_OK; i++) {
        if (!strcmp(mode, "replace")) {
            rc = agent_replace_state(h, (const uint8_t *)st[i & 1], strlen(st[i & 1]), NULL);
        } else if (!strcmp(mode, "whole")) {
            rc = agent_set_state(h, (const uint8_t *)st[i & 1], strlen(st[i & 1]), NULL);
        } else if (!strcmp(mode, "open")) {
            AgentHandle o;
            AgentBuffer b;
            rc = agent_open(path, NULL, &o);
            if (rc == AGENT_OK) {
                rc = agent_get_state(o, &b);
                agent_buffer_free(&b);
                agent_close(o);
            }
        } else {
            snprintf(patch, sizeof patch, "{\"status\":\"s%d\",\"m1\":{\"id\":%d,\"score\":%d.25}}", i,
                     i, i % 7);
            rc = agent_set_state(h, (const uint8_t *)patch, strlen(patch), NULL);
        }
    }
    if (rc != AGENT_OK)
        fprintf(stderr, "%s\n", agent_last_error());
    agent_close(h);
    remove(path);
    remove(wal);
    remove(shm);
    free(st[0]);
    free(st[1]);
    return rc == AGENT_OK ? 0 : 1;
}
