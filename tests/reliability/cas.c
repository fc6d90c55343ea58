/*
 * Compare-and-set counters across processes.
 *
 * P processes, started together, each open their own handle to one agent and run a
 * read-modify-write loop on its member "counter": read the state and its version
 * (agent_get_state_versioned), "compute" for a moment (200 us, so that others commit in
 * between), write counter + 1 only if the version is unchanged (agent_set_state_if); on
 * AGENT_ERR_CONFLICT read again. Each process stops after TARGET successes and reports the
 * values it wrote. Checks: the final counter == the number of successes == the final version
 * (no increment lost, none applied twice), no counter value was written by two successful calls
 * (no two read-modify-writes overlapped), and every success returned version + 1 and the state
 * it wrote.
 *
 * The store is a scratch file, or $AGENT_STATE_RELIABILITY_STORE (a PostgreSQL URI: one fresh
 * agent of that server). This is the C suite's test_processes_compare_and_set_one_counter,
 * with counts as arguments and any store.
 *
 * Usage: cas PROCS TARGET
 */
#include <sys/wait.h>

#include "common.h"

enum { MAX_PROCS = 64 };

struct report {
    long successes, conflicts, errors;
};

static const char *g_loc;
static char g_opts[512];

static long long counter_of(const uint8_t *data, size_t len) {
    long long v = 0;
    json_member_int((const char *)data, len, "counter", &v);
    return v;
}

/* Writes each value it wrote to values_fd (as long long) and its report at the end. */
static void cas_process(long target, int start_fd, int values_fd) {
    struct report rep = {0};
    AgentHandle h = 0;
    long attempts = 0;
    char byte;
    if (read(start_fd, &byte, 1) < 0) _exit(100); /* 0 when the parent closes the pipe: go */
    if (agent_open(g_loc, g_opts, &h) != AGENT_OK) {
        fprintf(stderr, "cas process: open: %s\n", agent_last_error());
        rep.errors++;
    }
    while (h != 0 && rep.successes < target && rep.errors == 0 && attempts++ < 1000L * target) {
        AgentBuffer got = {0};
        uint64_t version = 0, new_version = 0;
        AgentStatus rc = agent_get_state_versioned(h, &got, &version);
        if (rc != AGENT_OK) {
            fprintf(stderr, "cas process: get: %s: %s\n", agent_status_name(rc), agent_last_error());
            rep.errors++;
            break;
        }
        long long n = counter_of(got.data, got.len);
        agent_buffer_free(&got);
        char patch[64];
        int plen = snprintf(patch, sizeof patch, "{\"counter\":%lld}", n + 1);
        struct timespec pause = {0, 200000L};
        nanosleep(&pause, NULL);
        rc = agent_set_state_if(h, version, (const uint8_t *)patch, (size_t)plen, &got, &new_version);
        if (rc == AGENT_OK) {
            if (new_version != version + 1 || counter_of(got.data, got.len) != n + 1) {
                fprintf(stderr, "cas process: success at version %llu returned version %llu, counter %lld (want %lld)\n",
                        (unsigned long long)version, (unsigned long long)new_version,
                        counter_of(got.data, got.len), n + 1);
                rep.errors++;
            }
            long long v = n + 1;
            if (write(values_fd, &v, sizeof v) != (ssize_t)sizeof v) _exit(101);
            rep.successes++;
        } else if (rc == AGENT_ERR_CONFLICT) {
            rep.conflicts++;
        } else {
            fprintf(stderr, "cas process: set_if: %s: %s\n", agent_status_name(rc), agent_last_error());
            rep.errors++;
        }
        agent_buffer_free(&got);
    }
    if (rep.successes < target) rep.errors++;
    if (h != 0 && agent_close(h) != AGENT_OK) rep.errors++;
    long long end = -1; /* marks the report */
    if (write(values_fd, &end, sizeof end) != (ssize_t)sizeof end ||
        write(values_fd, &rep, sizeof rep) != (ssize_t)sizeof rep)
        _exit(101);
    _exit(0);
}

static ssize_t read_full(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: cas PROCS TARGET\n");
        return 2;
    }
    int procs = atoi(argv[1]);
    long target = atol(argv[2]);
    if (procs < 1 || procs > MAX_PROCS || target < 1) DIE("bad arguments");
    char dir[4096], path[4200], agent_buf[300];
    snprintf(dir, sizeof dir, "%s/cas", scratch_dir());
    make_dirs(dir);
    snprintf(path, sizeof path, "%s/cas.db", dir);
    g_loc = store_location(path);
    const char *agent = store_agent(g_loc, "cas", agent_buf, sizeof agent_buf);
    store_options(g_opts, sizeof g_opts, agent, "\"synchronous\":\"normal\",\"busy_timeout_ms\":60000");
    printf("cas: %d processes x %ld successes each, store %s\n", procs, target, store_kind(g_loc));

    long long max_value = (long long)procs * target;
    unsigned char *seen = calloc((size_t)max_value + 1, 1);
    if (!seen) DIE("out of memory");
    int start[2], values[MAX_PROCS][2];
    pid_t pids[MAX_PROCS];
    if (pipe(start) != 0) DIE("pipe");
    double t0 = now_s();
    for (int p = 0; p < procs; p++) {
        if (pipe(values[p]) != 0) DIE("pipe");
        fflush(stdout);
        fflush(stderr);
        pids[p] = fork();
        if (pids[p] < 0) DIE("fork");
        if (pids[p] == 0) {
            close(start[1]);
            for (int q = 0; q <= p; q++) close(values[q][0]);
            cas_process(target, start[0], values[p][1]);
        }
        close(values[p][1]);
    }
    close(start[0]);
    close(start[1]); /* go: all at once */
    long successes = 0, conflicts = 0, errors = 0, duplicates = 0;
    for (int p = 0; p < procs; p++) {
        /* Values until the -1 marker, then the report (a pipe per process: read them in turn,
         * each pipe buffers a process's values while the parent reads another's). */
        long long v;
        struct report rep = {0};
        int reported = 0;
        while (read_full(values[p][0], &v, sizeof v) == (ssize_t)sizeof v) {
            if (v == -1) {
                reported = read_full(values[p][0], &rep, sizeof rep) == (ssize_t)sizeof rep;
                break;
            }
            if (v < 1 || v > max_value || seen[v]++) {
                duplicates++;
                if (duplicates < 10) fprintf(stderr, "FAIL: counter value %lld written twice (or out of range)\n", v);
            }
        }
        CHECK(reported, "process %d sent no report", p);
        successes += rep.successes;
        conflicts += rep.conflicts;
        errors += rep.errors;
        close(values[p][0]);
        int status;
        waitpid(pids[p], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d ended with status %d", p, status);
    }
    double dt = now_s() - t0;
    CHECK(errors == 0, "%ld errors in the compare-and-set processes", errors);
    CHECK(successes == max_value, "%ld successes, want %lld", successes, max_value);
    CHECK(duplicates == 0, "%ld counter values were written by more than one successful call", duplicates);

    AgentHandle h;
    char reopen[512];
    store_options(reopen, sizeof reopen, agent, NULL);
    long long final = -1;
    uint64_t version = 0;
    CHECK_STATUS(agent_open(g_loc, reopen, &h), AGENT_OK, "reopen");
    AgentBuffer got = {0};
    CHECK_STATUS(agent_get_state_versioned(h, &got, &version), AGENT_OK, "final read");
    if (got.data) final = counter_of(got.data, got.len);
    agent_buffer_free(&got);
    agent_close(h);
    CHECK(final == successes, "final counter %lld after %ld successful calls", final, successes);
    CHECK(version == (uint64_t)successes, "final version %llu after %ld successful calls",
          (unsigned long long)version, successes);
    free(seen);
    printf("cas: store=%s processes=%d successes=%ld conflicts=%ld final=%lld version=%llu "
           "duplicates=%ld errors=%ld in %.1f s\n",
           store_kind(g_loc), procs, successes, conflicts, final, (unsigned long long)version, duplicates,
           errors, dt);
    if (g_failures == 0 && !store_override()) remove_store(path);
    return finish("cas");
}
