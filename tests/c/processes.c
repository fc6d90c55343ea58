/*
 * The C suite (tests/c/main.c runs it): processes (fork) on one store: writing one file,
 * creating one store at once, compare-and-set on one counter.
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Processes                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* A process's writes {"<key>": n} for n = 1..count on its own handle; the other writers' keys
 * must never go backwards in what it sees (no write starts from a stale state). */
static int write_own_key(const char *path, const char *key, const char *const others[2], int count)
{
    AgentHandle h = open_at(path, "{\"synchronous\":\"normal\",\"busy_timeout_ms\":60000}");
    long seen[2] = { 0, 0 };
    int n, i, bad = 0;
    for (n = 1; n <= count; n++) {
        char patch[64];
        AgentBuffer out = { NULL, 0, NULL };
        snprintf(patch, sizeof patch, "{\"%s\":%d}", key, n);
        if (!CHECK_STATUS(AGENT_OK, set_s(h, patch, &out))) {
            bad++;
            continue;
        }
        if (member_int((const char *)out.data, out.len, key) != n) {
            bad++;
        }
        for (i = 0; i < 2; i++) {
            long v = member_int((const char *)out.data, out.len, others[i]);
            if (v < seen[i]) {
                bad++;
            }
            seen[i] = v;
        }
        agent_buffer_free(&out);
    }
    check_(bad == 0, __FILE__, __LINE__, "writer of %s saw %d bad states", key, bad);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    return bad;
}

void test_two_processes_write_one_file(void)
{
    static const char *const keys[3] = { "p0", "p1", "parent" };
    const char *path = tmp_path("processes.db");
    int count = g_quick ? 25 : 200;
    pid_t pids[2];
    int i;

    /* The store exists before the writers start (creating one store from several processes at
     * once is the next test); no handle is open across the fork: each process opens its own. */
    CHECK_STATUS(AGENT_OK, agent_close(open_at(path, NULL)));
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < 2; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            const char *others[2];
            int before = g_failed;
            others[0] = keys[(i + 1) % 3];
            others[1] = keys[(i + 2) % 3];
            write_own_key(path, keys[i], others, count);
            fflush(stderr);
            _exit(g_failed == before ? 0 : 1);
        }
        CHECK(pids[i] > 0);
    }
    {
        const char *others[2];
        others[0] = keys[0];
        others[1] = keys[1];
        write_own_key(path, keys[2], others, count);
    }
    for (i = 0; i < 2; i++) {
        int status = 0;
        CHECK(pids[i] > 0 && waitpid(pids[i], &status, 0) == pids[i]);
        check_(WIFEXITED(status) && WEXITSTATUS(status) == 0, __FILE__, __LINE__,
               "writer process %d ended with status %d", i, status);
    }
    {
        AgentHandle h = open_at(path, NULL);
        char *s = state_copy(h);
        for (i = 0; s != NULL && i < 3; i++) {
            check_(member_int(s, strlen(s), keys[i]) == count, __FILE__, __LINE__,
                   "%s is %ld after %d writes: %s", keys[i], member_int(s, strlen(s), keys[i]),
                   count, s);
        }
        CHECK(s != NULL);
        free(s);
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
}

/* One round: `procs` processes, released together, open the same new store file (each must
 * succeed: "several handles, in one process or many, may open the same file") and write their
 * own key. Returns the number of processes that failed; the first failure's message goes to
 * `first_error`. */
static int race_to_create_one_store(const char *path, int procs, int *busy, int *storage,
                                    char *first_error, size_t cap)
{
    int start[2], report[2];
    int p, failed = 0;
    CHECK(pipe(start) == 0 && pipe(report) == 0);
    fflush(stdout);
    fflush(stderr);
    for (p = 0; p < procs; p++) {
        pid_t pid = fork();
        if (pid == 0) {
            AgentHandle h = 0;
            AgentStatus rc;
            char c, patch[32];
            close(start[1]);
            close(report[0]);
            if (read(start[0], &c, 1) < 0) { /* returns 0 when the parent closes the pipe */
                _exit(100);
            }
            rc = store_open(path, "{\"busy_timeout_ms\":60000,\"synchronous\":\"normal\"}", &h);
            if (rc == AGENT_OK) {
                snprintf(patch, sizeof patch, "{\"w%d\":1}", p);
                rc = set_s(h, patch, NULL);
                agent_close(h);
            }
            if (rc != AGENT_OK) {
                char line[512];
                int n = snprintf(line, sizeof line, "%s\n", agent_last_error());
                if (write(report[1], line, (size_t)n) < 0) {
                    _exit(101);
                }
            }
            _exit(rc);
        }
        CHECK(pid > 0);
    }
    close(start[0]);
    close(start[1]); /* go */
    close(report[1]);
    for (p = 0; p < procs; p++) {
        int status = 0;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed++;
            *busy += WIFEXITED(status) && WEXITSTATUS(status) == AGENT_ERR_BUSY;
            *storage += WIFEXITED(status) && WEXITSTATUS(status) == AGENT_ERR_STORAGE;
        }
    }
    if (failed > 0 && first_error[0] == 0) {
        ssize_t n = read(report[0], first_error, cap - 1);
        first_error[n > 0 ? n : 0] = 0;
        first_error[strcspn(first_error, "\n")] = 0;
    }
    close(report[0]);
    if (failed == 0) {
        /* all of them wrote into one and the same store */
        AgentHandle h = open_at(path, NULL);
        char *state = state_copy(h);
        for (p = 0; state != NULL && p < procs; p++) {
            char key[16];
            snprintf(key, sizeof key, "w%d", p);
            CHECK(member_int(state, strlen(state), key) == 1);
        }
        free(state);
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
    return failed;
}

void test_processes_may_create_one_store_at_once(void)
{
    int rounds = g_quick ? 10 : 40, procs = 4;
    int r, failed = 0, busy = 0, storage = 0;
    char first_error[512] = "";
    for (r = 0; r < rounds; r++) {
        char name[64];
        snprintf(name, sizeof name, "created_at_once_%d.db", r);
        failed += race_to_create_one_store(tmp_path(name), procs, &busy, &storage, first_error,
                                           sizeof first_error);
    }
    check_(failed == 0, __FILE__, __LINE__,
           "%d of %d processes failed to open (or write) a new store that others opened at the "
           "same moment: %d AGENT_ERR_BUSY, %d AGENT_ERR_STORAGE; first error: %s",
           failed, rounds * procs, busy, storage, first_error);
}

/* What one compare-and-set process reports back through its pipe. */
#define CAS_MAX_TARGET 100
typedef struct {
    long successes, conflicts, errors;
    long values[CAS_MAX_TARGET]; /* the counter value each successful call wrote */
} CasReport;

/* Reads exactly `n` bytes (fewer at end of file); returns how many it read. */
static size_t read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    return got;
}

/* A child's read-modify-write loop: read {"counter": n} and its version, write n + 1 at that
 * version, until `target` calls succeeded; a CONFLICT is retried from a fresh read. */
static void cas_process(const char *path, int target, int start_fd, int report_fd)
{
    CasReport rep;
    AgentHandle h = 0;
    long attempts = 0;
    char byte;
    memset(&rep, 0, sizeof rep);
    if (read(start_fd, &byte, 1) < 0) { /* 0 when the parent closes the pipe: go */
        _exit(100);
    }
    if (store_open(path, "{\"synchronous\":\"normal\",\"busy_timeout_ms\":60000}", &h) != AGENT_OK) {
        fprintf(stderr, "    cas process: %s\n", agent_last_error());
        rep.errors++;
    }
    while (h != 0 && rep.successes < target && rep.errors == 0 && attempts++ < 1000L * target) {
        AgentBuffer got = { NULL, 0, NULL };
        uint64_t version = 0, new_version = 0;
        char patch[64];
        long n;
        AgentStatus rc = agent_get_state_versioned(h, &got, &version);
        if (rc != AGENT_OK) {
            fprintf(stderr, "    cas process: %s\n", agent_last_error());
            rep.errors++;
            break;
        }
        n = member_int((const char *)got.data, got.len, "counter");
        agent_buffer_free(&got);
        snprintf(patch, sizeof patch, "{\"counter\":%ld}", n + 1);
        { /* "compute" for a moment, so that other processes commit in between */
            struct timespec pause = { 0, 200000L };
            nanosleep(&pause, NULL);
        }
        rc = set_if_s(h, version, patch, &got, &new_version);
        if (rc == AGENT_OK) {
            if (new_version != version + 1 ||
                member_int((const char *)got.data, got.len, "counter") != n + 1) {
                rep.errors++;
            }
            rep.values[rep.successes++] = n + 1;
        } else if (rc == AGENT_ERR_CONFLICT) {
            rep.conflicts++;
        } else {
            fprintf(stderr, "    cas process: %s\n", agent_last_error());
            rep.errors++;
        }
        agent_buffer_free(&got);
    }
    if (rep.successes < target) {
        rep.errors++;
    }
    if (h != 0 && agent_close(h) != AGENT_OK) {
        rep.errors++;
    }
    if (write(report_fd, &rep, sizeof rep) != (ssize_t)sizeof rep) {
        _exit(101);
    }
    _exit(0);
}

void test_processes_compare_and_set_one_counter(void)
{
    enum { MAX_PROCS = 4 };
    const char *path = tmp_path("cas_processes.db");
    int procs = g_quick ? 3 : MAX_PROCS, target = g_quick ? 15 : CAS_MAX_TARGET;
    int start[2], report[MAX_PROCS][2];
    pid_t pids[MAX_PROCS];
    long successes = 0, conflicts = 0, errors = 0;
    static unsigned char seen[MAX_PROCS * CAS_MAX_TARGET + 1];
    int p, duplicates = 0;
    long i;

    /* The store exists before the processes start; no handle is open across the fork. */
    CHECK_STATUS(AGENT_OK, agent_close(open_at(path, NULL)));
    memset(seen, 0, sizeof seen);
    CHECK(pipe(start) == 0);
    fflush(stdout);
    fflush(stderr);
    for (p = 0; p < procs; p++) {
        CHECK(pipe(report[p]) == 0);
        pids[p] = fork();
        if (pids[p] == 0) {
            close(start[1]);
            close(report[p][0]);
            cas_process(path, target, start[0], report[p][1]);
        }
        CHECK(pids[p] > 0);
        close(report[p][1]);
    }
    close(start[0]);
    close(start[1]); /* go: all at once */
    for (p = 0; p < procs; p++) {
        CasReport rep;
        int status = 0;
        if (!check_(read_full(report[p][0], &rep, sizeof rep) == sizeof rep, __FILE__, __LINE__,
                    "process %d sent no report", p)) {
            errors++;
        } else {
            successes += rep.successes;
            conflicts += rep.conflicts;
            errors += rep.errors;
            for (i = 0; i < rep.successes && i < CAS_MAX_TARGET; i++) {
                long v = rep.values[i];
                if (v < 1 || v > MAX_PROCS * CAS_MAX_TARGET || seen[v]++) {
                    duplicates++;
                }
            }
        }
        close(report[p][0]);
        CHECK(pids[p] > 0 && waitpid(pids[p], &status, 0) == pids[p]);
        check_(WIFEXITED(status) && WEXITSTATUS(status) == 0, __FILE__, __LINE__,
               "compare-and-set process %d ended with status %d", p, status);
    }
    check_(errors == 0, __FILE__, __LINE__, "%ld errors in the compare-and-set processes", errors);
    CHECK(successes == (long)procs * target);
    /* every successful call wrote another value: no two read-modify-writes overlapped */
    check_(duplicates == 0, __FILE__, __LINE__,
           "%d counter values were written by more than one successful call", duplicates);
    {
        AgentHandle h = open_at(path, NULL);
        AgentBuffer got = { NULL, 0, NULL };
        uint64_t version = 0;
        CHECK_STATUS(AGENT_OK, agent_get_state_versioned(h, &got, &version));
        check_(got.data != NULL && member_int((const char *)got.data, got.len, "counter") == successes,
               __FILE__, __LINE__, "the counter is %s after %ld successful calls (%ld conflicts)",
               got.data ? (const char *)got.data : "(NULL)", successes, conflicts);
        check_(version == (uint64_t)successes, __FILE__, __LINE__,
               "version %llu after %ld successful calls", (unsigned long long)version, successes);
        agent_buffer_free(&got);
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
    if (getenv("AGENT_TEST_VERBOSE") != NULL) {
        printf("    %ld successes, %ld conflicts over %d processes\n", successes, conflicts, procs);
    }
}
