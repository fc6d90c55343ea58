// watch_shim.c: the C half of the Go binding's watches. See watch_shim.h.

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "watch_shim.h"

// The failing call's message, copied in the same native call (see shim.h).
static int32_t watch_fail(int32_t rc, char **err) {
    if (rc != AGENT_OK && err != NULL) {
        const char *msg = agent_last_error();
        *err = strdup(msg != NULL ? msg : "");
    }
    return rc;
}

int32_t agentstate_watch_open(const char *path, const char *options_json, AgentWatch *out,
                              int32_t *out_fd, char **err) {
    return watch_fail(agent_watch_open(path, options_json, NULL, NULL, out, out_fd), err);
}

int32_t agentstate_watch_next(AgentWatch w, int64_t timeout_ms, AgentWatchEvent **out,
                              char **err) {
    return watch_fail(agent_watch_next(w, timeout_ms, out), err);
}

int32_t agentstate_watch_add(AgentWatch w, const char *id, int64_t since, char **err) {
    return watch_fail(agent_watch_add(w, id, since), err);
}

int32_t agentstate_watch_remove(AgentWatch w, const char *id, char **err) {
    return watch_fail(agent_watch_remove(w, id), err);
}

int32_t agentstate_watch_close(AgentWatch w, char **err) {
    return watch_fail(agent_watch_close(w), err);
}

int agentstate_watch_dup_fd(int32_t fd) {
    // Go owns the duplicate (it closes it to stop waiting); the watch keeps its own descriptor,
    // which the library closes. Both name one eventfd, so readiness is the watch's.
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) {
        return -1;
    }
    int flags = fcntl(dup, F_GETFL);
    if (flags < 0 || fcntl(dup, F_SETFL, flags | O_NONBLOCK) < 0) {
        close(dup);
        return -1;
    }
    return dup;
}
