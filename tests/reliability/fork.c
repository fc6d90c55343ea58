/*
 * Fork safety: handles inherited across fork() lose no acknowledged write.
 *
 * A parent opens a store (two handles to it, both with an on_state_changed hook), writes once and
 * forks CHILDREN children that write through the inherited handles (alternating between the two,
 * so the library must release every inherited connection to the file before reconnecting). Child
 * 0 also forks a grandchild halfway, which writes through the same handles. Two scenarios:
 *   close: the parent closes its handles right after forking, then the children start writing
 *          (the parent was the last connection it knew of: it must not checkpoint away the WAL
 *          that the children append to);
 *   write: the parent keeps writing alongside the children, then closes.
 * Each writer owns one member ("c<k>", "g", "p") and writes 1..WRITES to it; at the end, a fresh
 * handle must read, for every writer, exactly the last value it was acknowledged (AGENT_OK). Each
 * process also checks that its hooks saw exactly its own acknowledged writes, and that closing a
 * handle calls free_user_data exactly once in that process (the hook's copy of each process is its
 * own). Children close their handles in even rounds and exit without closing in odd ones. Run
 * with synchronous full and normal, ROUNDS times.
 *
 * Usage: fork ROUNDS CHILDREN WRITES [always-close]
 * (always-close: children close their handles in every round, for valgrind, whose leak check
 * would count what a child that just exits still holds.)
 */
#include <sys/wait.h>

#include "common.h"

struct report {
    int writer;         /* child index, or -1 for the grandchild */
    long last_acked;    /* highest value acknowledged (0: none) */
    long failures;      /* calls that did not return AGENT_OK */
    long hook_calls;    /* deliveries to this process's hooks */
    long freed;         /* free_user_data calls after closing */
    long read_ok;       /* a read after the fork saw the parent's first write */
};

static long g_acknowledged, g_lost, g_processes;
static int g_always_close;

struct hook_data {
    long calls;
    long freed;
};

static int on_change(void *user_data, const AgentStateChange *change) {
    (void)change;
    ((struct hook_data *)user_data)->calls++;
    return 0;
}

static void free_data(void *user_data) { ((struct hook_data *)user_data)->freed++; }

static long member_of(const uint8_t *json, size_t len, const char *name) {
    char key[32];
    snprintf(key, sizeof key, "\"%s\":", name);
    size_t klen = strlen(key);
    for (size_t i = 0; i + klen <= len; i++) {
        if (memcmp(json + i, key, klen) == 0) return strtol((const char *)json + i + klen, NULL, 10);
    }
    return 0;
}

/* Writes member `name` = 1..writes through the handles in turn; returns the last acknowledged. */
static long write_series(AgentHandle *h, int nh, const char *name, long from, long to,
                         long *failures) {
    long last = 0;
    char patch[64];
    for (long i = from; i <= to; i++) {
        snprintf(patch, sizeof patch, "{\"%s\":%ld}", name, i);
        AgentBuffer out = {0};
        AgentStatus st = agent_set_state(h[i % nh], (const uint8_t *)patch, strlen(patch), &out);
        if (st == AGENT_OK) {
            last = i;
            agent_buffer_free(&out);
        } else {
            (*failures)++;
            fprintf(stderr, "%s write %ld: %s: %s\n", name, i, agent_status_name(st),
                    agent_last_error());
        }
    }
    return last;
}

static void send_report(int fd, const struct report *r) {
    if (write(fd, r, sizeof *r) != (ssize_t)sizeof *r) _exit(3);
}

/* The body of a child (or the grandchild): write, check its hooks and free_user_data, report. */
static void child_body(int fd, int writer, AgentHandle *h, int nh, struct hook_data *hooks,
                       long writes, int close_handles) {
    struct report r = {.writer = writer};
    for (int k = 0; k < nh; k++) hooks[k].calls = 0;
    /* The inherited cache must not be trusted: a read goes to the store. */
    AgentBuffer out = {0};
    if (agent_get_state(h[0], &out) == AGENT_OK) {
        r.read_ok = member_of(out.data, out.len, "p") >= 1;
        agent_buffer_free(&out);
    }
    char name[16];
    if (writer < 0) snprintf(name, sizeof name, "g");
    else snprintf(name, sizeof name, "c%d", writer);
    long half = writes / 2;
    r.last_acked = write_series(h, nh, name, 1, half, &r.failures);
    if (writer == 0) {
        /* A grandchild: forked from a child whose handles are already its own. */
        pid_t g = fork();
        if (g < 0) DIE("fork");
        if (g == 0) {
            child_body(fd, -1, h, nh, hooks, writes, close_handles);
            _exit(0);
        }
        long more = write_series(h, nh, name, half + 1, writes, &r.failures);
        if (more) r.last_acked = more;
        int status;
        if (waitpid(g, &status, 0) < 0) DIE("waitpid");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) r.failures += 1000;
    } else {
        long more = write_series(h, nh, name, half + 1, writes, &r.failures);
        if (more) r.last_acked = more;
    }
    for (int k = 0; k < nh; k++) r.hook_calls += hooks[k].calls;
    /* Odd rounds exit without closing, as many forked workers do: nothing may depend on it. */
    for (int k = 0; close_handles && k < nh; k++) {
        hooks[k].freed = 0;
        if (agent_close(h[k]) != AGENT_OK) r.failures++;
        r.freed += hooks[k].freed;
    }
    if (!close_handles) r.freed = nh;
    send_report(fd, &r);
}

static void one_round(int round, const char *sync, int parent_writes, int children, long writes) {
    char path[512], options[128];
    snprintf(path, sizeof path, "%s/fork-%d-%s-%s.db", getenv("RELIABILITY_TMP"), round, sync,
             parent_writes ? "write" : "close");
    unlink(path);
    /* Lost writes are the point, not lock waits: SQLite's busy handler is not fair, and on a
     * loaded machine (or under valgrind) a writer may wait for longer than the default. */
    snprintf(options, sizeof options, "{\"synchronous\":\"%s\",\"busy_timeout_ms\":60000}", sync);
    enum { NH = 2 };
    AgentHandle h[NH];
    struct hook_data hooks[NH];
    memset(hooks, 0, sizeof hooks);
    for (int k = 0; k < NH; k++) {
        CHECK_STATUS(agent_open(path, options, &h[k]), AGENT_OK, "open %s", path);
        uint64_t id;
        CHECK_STATUS(agent_on_state_changed(h[k], on_change, &hooks[k], free_data, &id), AGENT_OK,
                     "hook");
    }
    AgentBuffer out = {0};
    CHECK_STATUS(agent_set_state(h[0], (const uint8_t *)"{\"p\":1}", 7, &out), AGENT_OK, "first");
    agent_buffer_free(&out);

    int fds[2], go[2];
    if (pipe(fds) != 0 || pipe(go) != 0) DIE("pipe");
    pid_t pids[64];
    for (int c = 0; c < children; c++) {
        pids[c] = fork();
        if (pids[c] < 0) DIE("fork");
        if (pids[c] == 0) {
            close(fds[0]);
            close(go[1]);
            /* "close": start once the parent has closed its handles (EOF on the pipe). */
            char byte;
            if (!parent_writes && read(go[0], &byte, 1) != 0) DIE("go pipe");
            close(go[0]);
            child_body(fds[1], c, h, NH, hooks, writes, g_always_close || round % 2 == 0);
            _exit(0);
        }
    }
    close(fds[1]);
    close(go[0]);
    long parent_last = 1, parent_failures = 0;
    for (int k = 0; k < NH; k++) hooks[k].calls = 0;
    if (parent_writes) {
        long more = write_series(h, NH, "p", 2, writes, &parent_failures);
        if (more) parent_last = more;
        long calls = hooks[0].calls + hooks[1].calls;
        CHECK(calls == writes - 1 - parent_failures,
              "%s/%s: parent hooks saw %ld deliveries for %ld writes", sync, "write", calls,
              writes - 1 - parent_failures);
    }
    for (int k = 0; k < NH; k++) {
        hooks[k].freed = 0;
        CHECK_STATUS(agent_close(h[k]), AGENT_OK, "parent close");
        CHECK(hooks[k].freed == 1, "parent: free_user_data called %ld times", hooks[k].freed);
    }
    CHECK(parent_failures == 0, "parent: %ld writes failed", parent_failures);
    close(go[1]);

    long acked[65];
    int seen = 0;
    struct report r;
    while (read(fds[0], &r, sizeof r) == (ssize_t)sizeof r) {
        int slot = r.writer < 0 ? 64 : r.writer;
        acked[slot] = r.last_acked;
        seen++;
        CHECK(r.failures == 0, "%s: writer %d: %ld calls failed", sync, r.writer, r.failures);
        CHECK(r.read_ok, "%s: writer %d: a read after fork missed the parent's write", sync,
              r.writer);
        CHECK(r.hook_calls == r.last_acked, "%s: writer %d: hooks saw %ld deliveries, %ld acked",
              sync, r.writer, r.hook_calls, r.last_acked);
        CHECK(r.freed == NH, "%s: writer %d: free_user_data called %ld times for %d hooks", sync,
              r.writer, r.freed, NH);
    }
    close(fds[0]);
    for (int c = 0; c < children; c++) {
        int status;
        if (waitpid(pids[c], &status, 0) < 0) DIE("waitpid");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d exited abnormally", c);
    }
    CHECK(seen == children + 1, "%d reports for %d children and a grandchild", seen, children);

    AgentHandle fresh;
    CHECK_STATUS(agent_open(path, options, &fresh), AGENT_OK, "reopen");
    CHECK_STATUS(agent_get_state(fresh, &out), AGENT_OK, "final read");
    for (int c = 0; c < children; c++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", c);
        long got = member_of(out.data, out.len, name);
        g_acknowledged += acked[c];
        g_lost += got < acked[c] ? acked[c] - got : 0;
        CHECK(got == acked[c], "%s/%s round %d: %s is %ld, last acknowledged %ld", sync,
              parent_writes ? "write" : "close", round, name, got, acked[c]);
    }
    long g = member_of(out.data, out.len, "g");
    g_acknowledged += acked[64] + parent_last;
    g_processes += children + 2;
    CHECK(g == acked[64], "%s: grandchild's g is %ld, last acknowledged %ld", sync, g, acked[64]);
    long p = member_of(out.data, out.len, "p");
    CHECK(p == parent_last, "%s: parent's p is %ld, last acknowledged %ld", sync, p, parent_last);
    agent_buffer_free(&out);
    agent_close(fresh);
    unlink(path);
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "always-close") == 0)) {
        fprintf(stderr, "usage: fork ROUNDS CHILDREN WRITES [always-close]\n");
        return 2;
    }
    g_always_close = argc == 5;
    int rounds = atoi(argv[1]), children = atoi(argv[2]);
    long writes = atol(argv[3]);
    if (children < 1 || children > 63 || writes < 2) DIE("bad arguments");
    const char *syncs[] = {"full", "normal"};
    for (int round = 0; round < rounds; round++) {
        for (int s = 0; s < 2; s++) {
            for (int parent_writes = 0; parent_writes < 2; parent_writes++) {
                one_round(round, syncs[s], parent_writes, children, writes);
            }
        }
    }
    printf("fork: %d rounds x 2 synchronous modes x 2 scenarios, %d children + 1 grandchild, "
           "%ld writes each\n",
           rounds, children, writes);
    printf("fork: processes=%ld acknowledged_writes=%ld lost=%ld\n", g_processes, g_acknowledged,
           g_lost);
    return finish("fork");
}
