/*
 * PostgreSQL: the server killed and restarted under load.
 *
 * P processes x T threads write to one agent of the server at $AGENT_STATE_RELIABILITY_STORE,
 * each thread through its own handle opened once (synchronous "full", busy_timeout_ms B) and
 * never reopened. Thread t of process p owns member "p<p>t<t>" and merges {"p<p>t<t>": i} for
 * i = 1, 2, ... as fast as it can. Meanwhile the parent, KILLS times: lets the load run, stops
 * the server like a crash (`tests/pg/server.sh kill DIR`: pg_ctl stop -m immediate), leaves it
 * down for a random while, restarts it (`server.sh restart DIR`), and waits until every thread
 * has written successfully again through its same handle.
 *
 * With PG_SERVER_FREEZE=1, every second round freezes the server instead of killing it
 * (SIGSTOP to its postmaster and that process's children, for longer than a call may take, then
 * SIGCONT): a hung server or a network partition, where nothing refuses a connection, so every
 * call has to give up by its own clock. There AGENT_ERR_BUSY (a row lock still held, after the
 * thaw, by a connection the client gave up during the freeze) is accepted besides
 * AGENT_ERR_UNAVAILABLE, but not a call that outlasts busy_timeout_ms + server_timeout_ms
 * (S, default 250 ms, $PG_SERVER_SERVER_TIMEOUT_MS) + MARGIN. run.sh
 * sets it (the program's own default stays off); until the library timed round trips by its
 * own clock, the calls waited for the thaw (README.md beside this file, Findings 6).
 *
 * Each writer, after a failed write, reads its member back (retrying the read until it
 * succeeds) and checks what the failure promised: a plain failure had no effect (the member
 * is still i - 1); a failure whose message says the commit's outcome is unknown left it at
 * i - 1 or i (counted as applied or not, neither acknowledged nor failed; the writer goes on
 * from what is there). Checks:
 *   - every failing call (writes and reads) returned AGENT_ERR_UNAVAILABLE, and within
 *     busy_timeout_ms + server_timeout_ms + MARGIN (default 3000 ms, $PG_SERVER_MARGIN_MS: slack
 *     for a loaded machine or ASan; a freeze lasts longer than all three and up to 2 s more, so a
 *     call that waited for the thaw is still caught);
 *   - after every restart every handle succeeds again (within 60 s), without reopening;
 *   - at the end (a fresh handle) every member is exactly the writer's last acknowledged (or
 *     found-applied) value: no acknowledged write lost, none applied that reported no effect;
 *     and the agent's version is the number of applied writes.
 *
 * Run it on a server of its own (run.sh starts one with AGENT_STATE_PG_PORT=5544 in a fresh
 * directory): it takes the server down.
 *
 * Usage: pg_server KILLS SERVER_DIR [PROCS THREADS BUSY_TIMEOUT_MS]
 *        (run from the repository root: it calls tests/pg/server.sh)
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "common.h"

enum { MAX_PROCS = 16, MAX_THREADS = 16 };

struct wstat {
    /* written by the worker */
    long long expect;        /* the member's value as far as the writer knows (acked or found applied) */
    long long acked;         /* acknowledged writes */
    long long successes;     /* successful calls of any kind (the parent watches it grow) */
    long long fail_unavailable, fail_busy, fail_other, fail_slow;
    long long unknown_applied, unknown_not_applied;
    long long violations;    /* a failure's promise broken */
    double max_fail_ms, max_call_ms;
    int ready, done, opened_once;
};

struct shared {
    volatile int stop;
    struct wstat w[MAX_PROCS][MAX_THREADS];
};

static struct shared *g_sh;
static const char *g_loc;
static char g_opts[512];
static long g_timeout_ms;
static long g_margin_ms;
static long g_server_ms;
static int g_freeze; /* PG_SERVER_FREEZE=1: odd rounds freeze the server instead of killing it */

static long long own_value(const char *s, int p, int t) {
    char key[32];
    snprintf(key, sizeof key, "p%dt%d", p, t);
    long long v = 0;
    json_member_int(s, strlen(s), key, &v);
    return v;
}

/* Records a failed call's status and duration. */
static void record_failure(struct wstat *ws, int p, int t, const char *what, AgentStatus st, double ms,
                           int unknown) {
    if (ms > ws->max_fail_ms) ws->max_fail_ms = ms;
    if (st == AGENT_ERR_UNAVAILABLE) {
        if (!unknown) ws->fail_unavailable++; /* an unknown outcome is counted apart */
    } else if (st == AGENT_ERR_BUSY && g_freeze) {
        ws->fail_busy++;
    } else {
        ws->fail_other++;
        if (ws->fail_other <= 5)
            fprintf(stderr, "FAIL p%dt%d %s: %s (want AGENT_ERR_UNAVAILABLE%s): %s\n", p, t, what,
                    agent_status_name(st), g_freeze ? " or AGENT_ERR_BUSY" : "", agent_last_error());
    }
    if (ms > (double)(g_timeout_ms + g_server_ms + g_margin_ms)) {
        ws->fail_slow++;
        if (ws->fail_slow <= 5)
            fprintf(stderr, "FAIL p%dt%d %s failed after %.0f ms (busy_timeout_ms %ld + server_timeout_ms %ld + margin %ld): %s\n",
                    p, t, what, ms, g_timeout_ms, g_server_ms, g_margin_ms, agent_last_error());
    }
}

struct worker_arg {
    int p, t;
};

static void *worker_main(void *arg) {
    struct worker_arg *a = arg;
    int p = a->p, t = a->t;
    struct wstat *ws = &g_sh->w[p][t];
    AgentHandle h;
    if (agent_open(g_loc, g_opts, &h) != AGENT_OK) {
        fprintf(stderr, "FAIL p%dt%d: open: %s\n", p, t, agent_last_error());
        ws->violations++;
        ws->done = 1;
        return NULL;
    }
    ws->opened_once = 1;
    ws->ready = 1;
    char patch[64];
    long long i = 1;
    const struct timespec pause = {0, 5 * 1000 * 1000}; /* after a failure: no busy loop */
    while (!g_sh->stop) {
        int len = snprintf(patch, sizeof patch, "{\"p%dt%d\":%lld}", p, t, i);
        double t0 = now_s();
        AgentStatus st = agent_set_state(h, (const uint8_t *)patch, (size_t)len, NULL);
        double ms = (now_s() - t0) * 1000;
        if (ms > ws->max_call_ms) ws->max_call_ms = ms;
        if (st == AGENT_OK) {
            ws->acked++;
            ws->successes++;
            ws->expect = i++;
            continue;
        }
        int unknown = strstr(agent_last_error(), "outcome is unknown") != NULL;
        record_failure(ws, p, t, "set_state", st, ms, unknown);
        /* Read the member back (the server may still be down: retry, also after stop). */
        char *s = NULL;
        double r0 = now_s();
        for (;;) {
            nanosleep(&pause, NULL);
            double c0 = now_s();
            AgentStatus rs;
            s = get_state_str(h, &rs);
            double cms = (now_s() - c0) * 1000;
            if (cms > ws->max_call_ms) ws->max_call_ms = cms;
            if (s) break;
            record_failure(ws, p, t, "get_state", rs, cms, 0);
            if (now_s() - r0 > 120) break;
        }
        if (!s) {
            fprintf(stderr, "FAIL p%dt%d: no successful read for 120 s after a failed write\n", p, t);
            ws->violations++;
            break;
        }
        ws->successes++;
        long long v = own_value(s, p, t);
        free(s);
        if (v == i - 1) {
            if (unknown) ws->unknown_not_applied++;
        } else if (unknown && v == i) {
            ws->unknown_applied++;
            ws->expect = i++;
        } else {
            ws->violations++;
            fprintf(stderr, "FAIL p%dt%d: after a failed write of %lld (%s) the member is %lld\n", p, t, i,
                    unknown ? "outcome unknown" : "no effect", v);
            ws->expect = v;
            i = v + 1;
        }
    }
    agent_close(h);
    ws->done = 1;
    return NULL;
}

static int child_main(int p, int threads) {
    pthread_t tids[MAX_THREADS];
    struct worker_arg args[MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        args[t] = (struct worker_arg){p, t};
        if (pthread_create(&tids[t], NULL, worker_main, &args[t]) != 0) DIE("pthread_create");
    }
    for (int t = 0; t < threads; t++) pthread_join(tids[t], NULL);
    return 0;
}

/*
 * Freezes (SIGSTOP) or thaws (SIGCONT) the server: its postmaster (the pid in
 * DIR/data/postmaster.pid) and that process's children, found in /proc. Returns how many
 * processes got the signal.
 */
static int server_signal(const char *dir, int sig) {
    char path[4400];
    snprintf(path, sizeof path, "%s/data/postmaster.pid", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long pm = 0;
    if (fscanf(f, "%ld", &pm) != 1) pm = 0;
    fclose(f);
    if (pm <= 0) return 0;
    int n = 0;
    if (sig == SIGSTOP && kill((pid_t)pm, sig) == 0) n++; /* first, so that it forks no more */
    DIR *d = opendir("/proc");
    if (!d) DIE("opendir /proc");
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char stat_path[64], buf[512];
        snprintf(stat_path, sizeof stat_path, "/proc/%ld/stat", pid);
        FILE *sf = fopen(stat_path, "r");
        if (!sf) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, sf);
        fclose(sf);
        buf[len] = 0;
        char *rp = strrchr(buf, ')'); /* "pid (comm) state ppid ..." */
        long ppid = 0;
        char state;
        if (rp && sscanf(rp + 1, " %c %ld", &state, &ppid) == 2 && ppid == pm && kill((pid_t)pid, sig) == 0) n++;
    }
    closedir(d);
    if (sig == SIGCONT && kill((pid_t)pm, sig) == 0) n++;
    return n;
}

static int server_cmd(const char *cmd, const char *dir) {
    char line[4400];
    snprintf(line, sizeof line, "bash tests/pg/server.sh %s '%s'", cmd, dir);
    fflush(stdout);
    fflush(stderr);
    return system(line);
}

/* Waits until every handle has succeeded again since `before` (60 s at most); returns how many
 * did not. */
static long wait_recovered(int procs, int threads, long long before[MAX_PROCS][MAX_THREADS], double up, long k,
                           double *max_recovery) {
    long bad = 0;
    for (;;) {
        int all = 1;
        for (int p = 0; p < procs; p++)
            for (int t = 0; t < threads; t++)
                if (g_sh->w[p][t].successes <= before[p][t] && !g_sh->w[p][t].done) all = 0;
        if (all) break;
        if (now_s() - up > 60) {
            for (int p = 0; p < procs; p++)
                for (int t = 0; t < threads; t++)
                    if (g_sh->w[p][t].successes <= before[p][t]) {
                        bad++;
                        fprintf(stderr, "FAIL: p%dt%d did not succeed within 60 s after round %ld\n", p, t, k);
                    }
            break;
        }
        usleep(2000);
    }
    double rec = now_s() - up;
    if (rec > *max_recovery) *max_recovery = rec;
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: pg_server KILLS SERVER_DIR [PROCS THREADS BUSY_TIMEOUT_MS]\n");
        return 2;
    }
    long kills = atol(argv[1]);
    const char *dir = argv[2];
    int procs = argc > 3 ? atoi(argv[3]) : 2, threads = argc > 4 ? atoi(argv[4]) : 3;
    g_timeout_ms = argc > 5 ? atol(argv[5]) : 1000;
    g_margin_ms = env_long("PG_SERVER_MARGIN_MS", 3000);
    g_server_ms = env_long("PG_SERVER_SERVER_TIMEOUT_MS", 250);
    g_freeze = env_long("PG_SERVER_FREEZE", 0) != 0;
    g_loc = store_override();
    if (!is_pg_uri(g_loc)) {
        printf("pg-server: skipped: AGENT_STATE_RELIABILITY_STORE is not a PostgreSQL URI\n");
        return 0;
    }
    if (procs < 1 || procs > MAX_PROCS || threads < 1 || threads > MAX_THREADS || strchr(dir, '\''))
        DIE("bad arguments");
    char agent_buf[300], extra[128];
    const char *agent = store_agent(g_loc, "server", agent_buf, sizeof agent_buf);
    snprintf(extra, sizeof extra, "\"synchronous\":\"full\",\"busy_timeout_ms\":%ld,\"server_timeout_ms\":%ld",
             g_timeout_ms, g_server_ms);
    store_options(g_opts, sizeof g_opts, agent, extra);
    g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED) DIE("mmap");
    memset(g_sh, 0, sizeof *g_sh);
    uint64_t seed = (uint64_t)env_long("RELIABILITY_SEED", (long)time(NULL)) * 2654435761u + 7;
    printf("pg-server: %ld rounds (%s), %d processes x %d threads, busy_timeout_ms %ld, server_timeout_ms %ld (+%ld ms margin), seed %llu\n",
           kills, g_freeze ? "kill and freeze in turn" : "server kills", procs, threads, g_timeout_ms, g_server_ms, g_margin_ms,
           (unsigned long long)seed);

    pid_t pids[MAX_PROCS];
    for (int p = 0; p < procs; p++) {
        fflush(stdout);
        fflush(stderr);
        pids[p] = fork();
        if (pids[p] < 0) DIE("fork");
        if (pids[p] == 0) _exit(child_main(p, threads));
    }
    /* Wait until every writer is up and has written. */
    double t0 = now_s();
    for (;;) {
        int all = 1;
        for (int p = 0; p < procs; p++)
            for (int t = 0; t < threads; t++)
                if (!g_sh->w[p][t].successes && !g_sh->w[p][t].done) all = 0;
        if (all) break;
        if (now_s() - t0 > 60) DIE("the writers did not start within 60 s");
        usleep(10000);
    }

    long not_recovered = 0, server_errors = 0, server_kills = 0, freezes = 0;
    double max_recovery = 0, down_total = 0, frozen_total = 0;
    for (long k = 0; k < kills; k++) {
        usleep((useconds_t)(200000 + rng_below(&seed, 600000))); /* load: 0.2-0.8 s */
        if (g_freeze && k % 2 == 1) {
            /* A frozen server: nothing refuses, every call must give up by its own timeout. */
            long long before[MAX_PROCS][MAX_THREADS];
            if (server_signal(dir, SIGSTOP) < 1) {
                server_errors++;
                fprintf(stderr, "FAIL: could not freeze the server (round %ld)\n", k);
            }
            double d0 = now_s();
            /* Longer than any call may take (busy + server timeout + margin), so that a call that
             * waited for the thaw instead of giving up is caught as too slow. */
            usleep((useconds_t)((g_timeout_ms + g_server_ms + g_margin_ms + 1000) * 1000 + rng_below(&seed, 1000000)));
            for (int p = 0; p < procs; p++)
                for (int t = 0; t < threads; t++) before[p][t] = g_sh->w[p][t].successes;
            server_signal(dir, SIGCONT);
            double up = now_s();
            frozen_total += up - d0;
            freezes++;
            not_recovered += wait_recovered(procs, threads, before, up, k, &max_recovery);
            continue;
        }
        if (server_cmd("kill", dir) != 0) {
            server_errors++;
            fprintf(stderr, "FAIL: server.sh kill failed (round %ld)\n", k);
        }
        double d0 = now_s();
        usleep((useconds_t)(100000 + rng_below(&seed, 1400000))); /* down: 0.1-1.5 s */
        long long before[MAX_PROCS][MAX_THREADS];
        for (int p = 0; p < procs; p++)
            for (int t = 0; t < threads; t++) before[p][t] = g_sh->w[p][t].successes;
        if (server_cmd("restart", dir) != 0) {
            server_errors++;
            fprintf(stderr, "FAIL: server.sh restart failed (round %ld)\n", k);
            break;
        }
        double up = now_s();
        down_total += up - d0;
        server_kills++;
        not_recovered += wait_recovered(procs, threads, before, up, k, &max_recovery);
    }
    usleep(300000);
    g_sh->stop = 1;
    for (int p = 0; p < procs; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer process %d ended with status %d", p, status);
    }
    double dt = now_s() - t0;
    CHECK(server_errors == 0, "%ld server.sh commands failed", server_errors);
    CHECK(not_recovered == 0, "%ld handles did not recover after a restart", not_recovered);

    /* Sum up, then compare with what a fresh handle reads. */
    struct wstat sum = {0};
    for (int p = 0; p < procs; p++)
        for (int t = 0; t < threads; t++) {
            struct wstat *w = &g_sh->w[p][t];
            CHECK(w->opened_once, "p%dt%d never opened", p, t);
            sum.acked += w->acked;
            sum.fail_unavailable += w->fail_unavailable;
            sum.fail_other += w->fail_other;
            sum.fail_busy += w->fail_busy;
            sum.fail_slow += w->fail_slow;
            sum.unknown_applied += w->unknown_applied;
            sum.unknown_not_applied += w->unknown_not_applied;
            sum.violations += w->violations;
            if (w->max_fail_ms > sum.max_fail_ms) sum.max_fail_ms = w->max_fail_ms;
            if (w->max_call_ms > sum.max_call_ms) sum.max_call_ms = w->max_call_ms;
        }
    CHECK(sum.fail_other == 0, "%lld failures were not AGENT_ERR_UNAVAILABLE%s", sum.fail_other,
          g_freeze ? " or AGENT_ERR_BUSY" : "");
    CHECK(sum.fail_slow == 0, "%lld failures took longer than busy_timeout_ms + server_timeout_ms + %ld ms", sum.fail_slow,
          g_margin_ms);
    CHECK(sum.violations == 0, "%lld failed writes broke their promise", sum.violations);
    CHECK(kills == 0 || sum.fail_unavailable > 0, "no call failed although the server was killed %ld times", kills);

    char reopen[512];
    store_options(reopen, sizeof reopen, agent, NULL);
    AgentHandle h;
    long lost = 0, phantom = 0;
    uint64_t version = 0;
    CHECK_STATUS(agent_open(g_loc, reopen, &h), AGENT_OK, "final open");
    AgentBuffer b = {0};
    CHECK_STATUS(agent_get_state_versioned(h, &b, &version), AGENT_OK, "final read");
    if (b.data) {
        char *s = strndup((const char *)b.data, b.len);
        if (!s) DIE("out of memory");
        for (int p = 0; p < procs; p++)
            for (int t = 0; t < threads; t++) {
                long long v = own_value(s, p, t), want = g_sh->w[p][t].expect;
                if (v < want) lost += want - v;
                if (v > want) phantom += v - want;
                if (v != want) fprintf(stderr, "FAIL: p%dt%d = %lld, the writer's last acknowledged value is %lld\n", p, t, v, want);
            }
        free(s);
    }
    agent_buffer_free(&b);
    agent_close(h);
    long long applied = sum.acked + sum.unknown_applied;
    CHECK(lost == 0, "%ld acknowledged writes lost", lost);
    CHECK(phantom == 0, "%ld writes applied that were not acknowledged", phantom);
    CHECK(version == (uint64_t)applied, "version %llu, but %lld writes were applied", (unsigned long long)version,
          applied);
    printf("pg-server: server_kills=%ld server_freezes=%ld acknowledged_writes=%lld lost=%ld phantom=%ld failed_unavailable=%lld "
           "failed_busy=%lld failed_other=%lld unknown_outcome=%lld (applied %lld) slow_failures=%lld max_failed_call_ms=%.0f "
           "max_call_ms=%.0f max_recovery_s=%.2f not_recovered=%ld in %.1f s (server down %.1f s, frozen %.1f s)\n",
           server_kills, freezes, sum.acked, lost, phantom, sum.fail_unavailable, sum.fail_busy, sum.fail_other,
           sum.unknown_applied + sum.unknown_not_applied, sum.unknown_applied, sum.fail_slow, sum.max_fail_ms,
           sum.max_call_ms, max_recovery, not_recovered, dt, down_total, frozen_total);
    munmap(g_sh, sizeof *g_sh);
    return finish("pg-server");
}
