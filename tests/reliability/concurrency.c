/*
 * Item 2, no lost updates.
 *
 * P processes x T threads merge patches into one store file at once. Thread t of process p owns
 * the member "t<t>" of the nested object "p<p>" and, for i = 1..M, merges
 *     {"p<p>":{"t<t>":i},"w":"p<p>t<t>"}
 * (its counter, plus the contended member "w" that every writer rewrites). In even processes all
 * threads share one handle; in odd processes each thread opens its own. At the end every counter
 * must be M: a lost update (a merge computed from a stale state) would leave one lower, or drop a
 * sibling of the nested object.
 *
 * With hooks (argument "hooks"), every handle registers an on_state_changed hook that records
 * each delivery. Since every commit raises exactly one counter by one, the sum of all counters in
 * a state is its commit number. Each process then checks, per handle: one delivery per
 * successful write (no more, no fewer); each delivery's next = its prev plus one commit, and its
 * own counter goes from i-1 to i; deliveries come in commit order (each delivery's prev is no
 * older than the previous delivery's next); each thread's patches arrive in the order it made
 * them.
 *
 * The store is a scratch file, or $AGENT_STATE_RELIABILITY_STORE (a PostgreSQL URI: then all
 * handles open one fresh agent of that server; see store_location in common.h).
 *
 * Usage: concurrency PROCS THREADS PATCHES [hooks]
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "common.h"

enum { MAX_THREADS = 64 };

struct delivery {
    int thread;
    long long i, prev_own, next_own, prev_total, next_total;
};

struct handle_log {
    pthread_mutex_t mu;
    struct delivery *items;
    size_t len, cap;
    int proc;
    long long writes; /* successful set_state calls through this handle */
    int bad_patch;
};

struct worker {
    pthread_t tid;
    int proc, thread;
    long patches;
    AgentHandle h; /* 0: open my own */
    struct handle_log *log;
    int use_hooks;
    long busy_retries;
    long errors;
};

static const char *g_path;
static char g_opts[512];       /* open options: agent_id (if any), busy timeout */
static char g_reopen[512];     /* the final check's options: agent_id only */

/* Sum of every integer member value in a state: its commit number. */
static long long total_of(const uint8_t *s, size_t len) {
    long long sum = 0;
    for (size_t k = 0; k + 1 < len; k++) {
        if (s[k] == ':' && s[k + 1] >= '0' && s[k + 1] <= '9') {
            long long v = 0;
            size_t j = k + 1;
            while (j < len && s[j] >= '0' && s[j] <= '9') v = v * 10 + (s[j++] - '0');
            sum += v;
        }
    }
    return sum;
}

/* The counter of thread t of process p in state s (0 when absent). */
static long long own_of(const uint8_t *s, size_t len, int p, int t) {
    char pk[32], tk[32];
    snprintf(pk, sizeof pk, "p%d", p);
    snprintf(tk, sizeof tk, "t%d", t);
    size_t olen;
    const char *obj = json_member_obj((const char *)s, len, pk, &olen);
    long long v = 0;
    if (obj && json_member_int(obj, olen, tk, &v)) return v;
    return 0;
}

static int32_t on_changed(void *user_data, const AgentStateChange *c) {
    struct handle_log *log = user_data;
    struct delivery d = {0};
    int p = -1;
    if (!c->patch || sscanf((const char *)c->patch, "{\"p%d\":{\"t%d\":%lld}", &p, &d.thread, &d.i) != 3 ||
        p != log->proc) {
        log->bad_patch++;
        return 0;
    }
    d.prev_own = own_of(c->prev, c->prev_len, p, d.thread);
    d.next_own = own_of(c->next, c->next_len, p, d.thread);
    d.prev_total = total_of(c->prev, c->prev_len);
    d.next_total = total_of(c->next, c->next_len);
    pthread_mutex_lock(&log->mu);
    if (log->len == log->cap) {
        log->cap = log->cap ? log->cap * 2 : 1024;
        log->items = realloc(log->items, log->cap * sizeof *log->items);
        if (!log->items) DIE("out of memory");
    }
    log->items[log->len++] = d;
    pthread_mutex_unlock(&log->mu);
    return 0;
}

static struct handle_log *new_log(int proc) {
    struct handle_log *log = calloc(1, sizeof *log);
    if (!log) DIE("out of memory");
    pthread_mutex_init(&log->mu, NULL);
    log->proc = proc;
    return log;
}

static AgentHandle open_store(struct handle_log *log, int use_hooks) {
    AgentHandle h;
    /* A long busy timeout: this test is about lost updates, not about lock waits. */
    AgentStatus st = agent_open(g_path, g_opts, &h);
    if (st != AGENT_OK) {
        fprintf(stderr, "FAIL: agent_open: %s\n", agent_last_error());
        exit(1);
    }
    if (use_hooks) {
        uint64_t id;
        if (agent_on_state_changed(h, on_changed, log, NULL, &id) != AGENT_OK) {
            fprintf(stderr, "FAIL: agent_on_state_changed: %s\n", agent_last_error());
            exit(1);
        }
    }
    return h;
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    AgentHandle h = w->h ? w->h : open_store(w->log, w->use_hooks);
    char patch[128];
    for (long i = 1; i <= w->patches; i++) {
        int len = snprintf(patch, sizeof patch, "{\"p%d\":{\"t%d\":%ld},\"w\":\"p%dt%d\"}", w->proc,
                           w->thread, i, w->proc, w->thread);
        for (;;) {
            AgentStatus st = agent_set_state(h, (const uint8_t *)patch, (size_t)len, NULL);
            if (st == AGENT_OK) {
                __atomic_add_fetch(&w->log->writes, 1, __ATOMIC_RELAXED);
                break;
            }
            if (st == AGENT_ERR_BUSY) {
                w->busy_retries++; /* nothing was written: try again */
                continue;
            }
            fprintf(stderr, "FAIL: p%d t%d patch %ld: %s: %s\n", w->proc, w->thread, i,
                    agent_status_name(st), agent_last_error());
            w->errors++;
            break;
        }
    }
    if (!w->h) agent_close(h);
    return NULL;
}

/* Checks one handle's delivery log; returns the number of problems. */
static long check_log(struct handle_log *log, int threads_on_handle, const int *thread_ids, long patches) {
    long bad = log->bad_patch;
    if ((long long)log->len != log->writes) {
        fprintf(stderr, "FAIL: p%d: %zu deliveries for %lld committed writes\n", log->proc, log->len,
                log->writes);
        bad++;
    }
    long long expect_i[MAX_THREADS] = {0};
    for (size_t k = 0; k < log->len; k++) {
        struct delivery *d = &log->items[k];
        if (d->next_total != d->prev_total + 1 || d->next_own != d->i || d->prev_own != d->i - 1) {
            if (bad < 10)
                fprintf(stderr,
                        "FAIL: p%d delivery %zu (t%d #%lld): prev/next do not differ by this one patch "
                        "(own %lld -> %lld, commit %lld -> %lld)\n",
                        log->proc, k, d->thread, d->i, d->prev_own, d->next_own, d->prev_total, d->next_total);
            bad++;
        }
        if (k > 0 && d->prev_total < log->items[k - 1].next_total) {
            if (bad < 10)
                fprintf(stderr, "FAIL: p%d delivery %zu out of commit order (prev commit %lld < %lld)\n",
                        log->proc, k, d->prev_total, log->items[k - 1].next_total);
            bad++;
        }
        if (d->thread < 0 || d->thread >= MAX_THREADS || d->i != ++expect_i[d->thread]) {
            if (bad < 10)
                fprintf(stderr, "FAIL: p%d delivery %zu: thread t%d patch %lld out of order or repeated\n",
                        log->proc, k, d->thread, d->i);
            bad++;
        }
    }
    for (int j = 0; j < threads_on_handle; j++) {
        if (expect_i[thread_ids[j]] != patches) {
            fprintf(stderr, "FAIL: p%d: thread t%d had %lld of its %ld patches delivered\n", log->proc,
                    thread_ids[j], expect_i[thread_ids[j]], patches);
            bad++;
        }
    }
    return bad;
}

static int child_main(int proc, int threads, long patches, int use_hooks) {
    struct worker w[MAX_THREADS];
    int shared = proc % 2 == 0;
    struct handle_log *shared_log = new_log(proc);
    AgentHandle h = shared ? open_store(shared_log, use_hooks) : 0;
    for (int t = 0; t < threads; t++) {
        w[t] = (struct worker){.proc = proc, .thread = t, .patches = patches, .h = h, .use_hooks = use_hooks};
        w[t].log = shared ? shared_log : new_log(proc);
        if (pthread_create(&w[t].tid, NULL, worker_main, &w[t]) != 0) DIE("pthread_create");
    }
    long errors = 0, busy = 0, bad = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(w[t].tid, NULL);
        errors += w[t].errors;
        busy += w[t].busy_retries;
    }
    if (use_hooks) {
        int ids[MAX_THREADS];
        if (shared) {
            for (int t = 0; t < threads; t++) ids[t] = t;
            bad += check_log(shared_log, threads, ids, patches);
        } else {
            for (int t = 0; t < threads; t++) {
                ids[0] = t;
                bad += check_log(w[t].log, 1, ids, patches);
            }
        }
    }
    if (h) agent_close(h);
    printf("  process %d (%s handle): busy retries %ld, errors %ld, hook problems %ld\n", proc,
           shared ? "shared" : "own", busy, errors, bad);
    fflush(stdout);
    return errors || bad ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: concurrency PROCS THREADS PATCHES [hooks]\n");
        return 2;
    }
    int procs = atoi(argv[1]), threads = atoi(argv[2]);
    long patches = atol(argv[3]);
    int use_hooks = argc > 4 && strcmp(argv[4], "hooks") == 0;
    if (threads < 1 || threads > MAX_THREADS || procs < 1) DIE("bad arguments");
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/concurrency", scratch_dir());
    make_dirs(dir);
    snprintf(path, sizeof path, "%s/lost-updates-%s.db", dir, use_hooks ? "hooks" : "plain");
    g_path = store_location(path);
    char agent_buf[300];
    const char *agent = store_agent(g_path, use_hooks ? "lost-updates-hooks" : "lost-updates", agent_buf,
                                    sizeof agent_buf);
    store_options(g_opts, sizeof g_opts, agent, "\"busy_timeout_ms\":120000");
    store_options(g_reopen, sizeof g_reopen, agent, NULL);

    printf("concurrency: %d processes x %d threads x %ld patches%s, store %s%s%s\n", procs, threads,
           patches, use_hooks ? ", hooks registered" : "", store_kind(g_path), agent ? ", agent " : "",
           agent ? agent : "");
    double t0 = now_s();
    pid_t pids[256];
    for (int p = 0; p < procs; p++) {
        fflush(stdout);
        pids[p] = fork();
        if (pids[p] < 0) DIE("fork");
        if (pids[p] == 0) _exit(child_main(p, threads, patches, use_hooks));
    }
    for (int p = 0; p < procs; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d failed (status %d)", p, status);
    }
    double dt = now_s() - t0;

    AgentHandle h;
    CHECK_STATUS(agent_open(g_path, g_reopen, &h), AGENT_OK, "reopen");
    AgentStatus st;
    char *s = get_state_str(h, &st);
    CHECK(s != NULL, "get_state after the run");
    long lost = 0;
    if (s) {
        size_t len = strlen(s);
        for (int p = 0; p < procs; p++)
            for (int t = 0; t < threads; t++) {
                long long v = own_of((const uint8_t *)s, len, p, t);
                if (v != patches) {
                    lost += patches - v;
                    fprintf(stderr, "FAIL: p%d.t%d = %lld, want %ld\n", p, t, v, patches);
                }
            }
        long long total = total_of((const uint8_t *)s, len);
        CHECK(total == (long long)procs * threads * patches, "commit count %lld, want %lld", total,
              (long long)procs * threads * patches);
        free(s);
    }
    CHECK(lost == 0, "%ld updates lost", lost);
    agent_close(h);
    long long n = (long long)procs * threads * patches;
    printf("concurrency: patches=%lld lost=%ld hooks=%s in %.1f s (%.0f commits/s)\n", n, lost,
           use_hooks ? "yes" : "no", dt, (double)n / dt);
    if (g_failures == 0 && !store_override()) remove_store(path);
    return finish(use_hooks ? "concurrency-hooks" : "concurrency");
}
