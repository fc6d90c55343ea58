/*
 * demo.c: the State API from C, on an embedded SQLite file.
 *
 *   make demo            (builds the library, then runs: target/c/demo demo.db)
 *
 * Run it twice: the second run starts from the state the first one left, and its run counter
 * goes up. The last part times get_state and set_state on the same file.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_state.h"

/* Print the failure and stop: every call in a demo should succeed. */
static void check(AgentStatus status, const char *what) {
    if (status != AGENT_OK) {
        fprintf(stderr, "%s failed: %s (%s)\n", what, agent_status_name(status), agent_last_error());
        exit(1);
    }
}

/* on_state_changed hook: runs after every committed change, on the writing thread. */
static int32_t print_change(void *user_data, const AgentStateChange *change) {
    int *count = user_data;
    ++*count;
    printf("  hook #%d: prev %s\n           next %s\n           patch %s\n", *count,
           (const char *)change->prev, (const char *)change->next,
           change->patch ? (const char *)change->patch : "(none: replace_state)");
    return 0;
}

static AgentBuffer set(AgentHandle h, const char *patch) {
    AgentBuffer out;
    printf("set_state(%s)\n", patch);
    check(agent_set_state(h, (const uint8_t *)patch, strlen(patch), &out), "agent_set_state");
    printf("  -> %s\n", (const char *)out.data);
    return out;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "demo.db";
    AgentHandle h;
    AgentBuffer state;
    int hook_calls = 0;
    uint64_t hook_id;
    char patch[128];
    long runs = 0;
    const char *found;
    int i;
    double t0, get_us, set_us;
    const int gets = 100000, sets = 300;

    printf("agent_state %s, store %s\n", agent_version(), path);
    check(agent_open(path, "{\"initial_state\":{\"status\":\"idle\",\"lastReply\":\"\",\"at\":0}}", &h),
          "agent_open");
    check(agent_on_state_changed(h, print_change, &hook_calls, NULL, &hook_id),
          "agent_on_state_changed");

    check(agent_get_state(h, &state), "agent_get_state");
    printf("state at start: %s\n", (const char *)state.data);
    found = strstr((const char *)state.data, "\"runs\":");
    if (found) runs = strtol(found + 7, NULL, 10);
    agent_buffer_free(&state);

    /* Merge: other keys untouched. */
    snprintf(patch, sizeof patch, "{\"status\":\"processing\",\"runs\":%ld}", runs + 1);
    state = set(h, patch);
    agent_buffer_free(&state);

    /* Nested merge, and null deletes (the reference page's example). */
    state = set(h, "{\"job\":{\"id\":\"j1\",\"step\":2,\"note\":\"retrying\"}}");
    agent_buffer_free(&state);
    state = set(h, "{\"job\":{\"step\":3,\"note\":null}}");
    agent_buffer_free(&state);

    /* A bad patch is refused with a status and a message; nothing is written. */
    {
        const char *bad = "{\"at\":1e400}";
        AgentStatus s = agent_set_state(h, (const uint8_t *)bad, strlen(bad), NULL);
        printf("set_state(%s)\n  -> %s: %s\n", bad, agent_status_name(s), agent_last_error());
    }

    /* Replace: nothing of the previous state survives, except what we carry over. */
    snprintf(patch, sizeof patch, "{\"status\":\"idle\",\"lastReply\":\"done\",\"runs\":%ld}", runs + 1);
    printf("replace_state(%s)\n", patch);
    check(agent_replace_state(h, (const uint8_t *)patch, strlen(patch), &state), "agent_replace_state");
    printf("  -> %s\n", (const char *)state.data);
    agent_buffer_free(&state);
    check(agent_remove_hook(h, hook_id), "agent_remove_hook");

    /* A quick timing loop on the same file (synchronous=full: every set is fsynced). */
    t0 = now_us();
    for (i = 0; i < gets; i++) {
        check(agent_get_state(h, &state), "agent_get_state");
        agent_buffer_free(&state);
    }
    get_us = (now_us() - t0) / gets;
    t0 = now_us();
    for (i = 0; i < sets; i++) {
        snprintf(patch, sizeof patch, "{\"at\":%d}", i);
        check(agent_set_state(h, (const uint8_t *)patch, strlen(patch), NULL), "agent_set_state");
    }
    set_us = (now_us() - t0) / sets;
    check(agent_get_state(h, &state), "agent_get_state");
    printf("final state: %s\n", (const char *)state.data);
    agent_buffer_free(&state);
    printf("timing: get_state %.3f us/op (%d ops), set_state %.1f us/op (%d ops, synchronous=full)\n",
           get_us, gets, set_us, sets);
    printf("hook calls: %d; run this demo again to see the state persist (runs = %ld)\n",
           hook_calls, runs + 1);
    check(agent_close(h), "agent_close");
    return 0;
}
