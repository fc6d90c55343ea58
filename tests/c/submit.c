/*
 * Awaited calls (agent_submit, agent_queue_*): every op, with and without AGENT_CALL_IF and
 * AGENT_CALL_NO_STATE, through the done callback and through a completion queue; a read the
 * handle's validated copy answers completes before agent_submit returns, on the calling thread;
 * a call waiting for a lock another process holds completes once it is let go, or is cancelled
 * by its token with nothing written; a thousand calls in flight use at most the pool's cap of
 * threads; bad input is refused (done never called) or completes with its status and message;
 * a handle closed and a queue freed with calls in flight.
 */
#include <poll.h>

#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static const AgentCompletion k_no_completion = { 0, 0, 0, 0, { NULL, 0, NULL }, { NULL, 0, NULL } };

/* One call's completion as a done callback received it (its buffers are the test's). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
    pthread_t thread;
    AgentCompletion c;
} Waiter;

static void waiter_init(Waiter *w)
{
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->arrived = 0;
    w->c = k_no_completion;
}

static void waiter_destroy(Waiter *w)
{
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

static void waiter_done(void *context, AgentCompletion *c)
{
    Waiter *w = context;
    pthread_mutex_lock(&w->mu);
    w->c = *c; /* the buffers move to the waiter */
    w->thread = pthread_self();
    w->arrived++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void waiter_wait(Waiter *w)
{
    pthread_mutex_lock(&w->mu);
    while (!w->arrived) {
        pthread_cond_wait(&w->cv, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
}

static int waiter_arrived(Waiter *w)
{
    int n;
    pthread_mutex_lock(&w->mu);
    n = w->arrived;
    pthread_mutex_unlock(&w->mu);
    return n;
}

static void completion_free(AgentCompletion *c)
{
    agent_buffer_free(&c->state);
    agent_buffer_free(&c->message);
}

/* Whether `fd` is readable, waiting up to `ms` (-1: without a limit). */
static int readable(int fd, int ms)
{
    struct pollfd p;
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    return poll(&p, 1, ms) == 1;
}

/* Takes one completion from queue `q`, waiting on its descriptor for it. */
static void queue_take_one(AgentQueue q, int fd, AgentCompletion *out)
{
    size_t n = 0;
    while (n == 0) {
        CHECK(readable(fd, -1));
        CHECK_STATUS(AGENT_OK, agent_queue_take(q, out, 1, &n));
    }
}

/*
 * Submits `call` on `h` through the done callback (q == 0) or through queue `q` (whose
 * descriptor is `fd`), waits for its completion into *out and sets *now when it completed
 * before the submitting call returned, on this thread. Returns the submitting call's status.
 */
static AgentStatus call_and_wait(AgentHandle h, AgentQueue q, int fd, const AgentCall *call,
                                 AgentCompletion *out, int *now)
{
    AgentStatus rc;
    *out = k_no_completion;
    *now = 0;
    if (q == 0) {
        Waiter w;
        waiter_init(&w);
        rc = agent_submit(h, call, waiter_done, &w);
        if (rc == AGENT_OK) {
            *now = waiter_arrived(&w) && pthread_equal(w.thread, pthread_self());
            waiter_wait(&w);
            CHECK(w.arrived == 1);
            *out = w.c;
        }
        waiter_destroy(&w);
    } else {
        int32_t done = -1;
        rc = agent_queue_submit(q, h, call, out, &done);
        if (rc == AGENT_OK) {
            CHECK(done == 0 || done == 1);
            *now = done == 1;
            if (!*now) {
                CHECK(out->state.data == NULL && out->message.data == NULL);
                queue_take_one(q, fd, out);
            }
        }
    }
    return rc;
}

static AgentCall make_call(int32_t op, uint32_t flags, const char *data, uint64_t expected,
                           uint64_t tag)
{
    AgentCall c;
    c.op = op;
    c.flags = flags;
    c.data = (const uint8_t *)data;
    c.len = data ? strlen(data) : 0;
    c.expected_version = expected;
    c.cancel = 0;
    c.tag = tag;
    return c;
}

/* The cap on the pool's threads this process runs with. */
static int pool_cap(void)
{
    const char *v = getenv("AGENT_STATE_WORKERS");
    return v != NULL && atoi(v) > 0 ? atoi(v) : 8;
}

/* This process's threads, from /proc/self/task. */
static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* Calls whose done callbacks wait for each other: they can all be inside at once only when
 * every worker runs one, that is once every call submitted before them has completed. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inside, left, want;
} Fence;

static void fence_done(void *context, AgentCompletion *c)
{
    Fence *f = context;
    completion_free(c);
    pthread_mutex_lock(&f->mu);
    f->inside++;
    pthread_cond_broadcast(&f->cv);
    while (f->inside < f->want) {
        pthread_cond_wait(&f->cv, &f->mu);
    }
    f->left++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Waits until every call submitted before has completed (`h`: any open handle). */
static void drain_pool(AgentHandle h)
{
    Fence f;
    AgentCall c = make_call(AGENT_OP_SET_STATE, AGENT_CALL_NO_STATE, "{}", 0, 0);
    int i;
    pthread_mutex_init(&f.mu, NULL);
    pthread_cond_init(&f.cv, NULL);
    f.inside = 0;
    f.left = 0;
    f.want = pool_cap();
    for (i = 0; i < f.want; i++) {
        if (!CHECK_STATUS(AGENT_OK, agent_submit(h, &c, fence_done, &f))) {
            f.want = i; /* (a failed check: wait only for the accepted ones) */
        }
    }
    pthread_mutex_lock(&f.mu);
    while (f.left < f.want) {
        pthread_cond_wait(&f.cv, &f.mu);
    }
    pthread_mutex_unlock(&f.mu);
    pthread_mutex_destroy(&f.mu);
    pthread_cond_destroy(&f.cv);
}

/* ------------------------------------------------------------------------------------------ */
/* Every op                                                                                   */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    int32_t op;
    uint32_t flags;
    uint64_t expected;
    const char *data;
    AgentStatus status;
    uint32_t committed;
    uint64_t version;
    const char *state;   /* NULL: the completion carries none */
    const char *message; /* on error: the function it names */
} Step;

#define IF AGENT_CALL_IF
#define NS AGENT_CALL_NO_STATE

static const Step k_steps[] = {
    { AGENT_OP_GET_STATE, 0, 0, NULL, AGENT_OK, 0, 0, "{}", NULL },
    { AGENT_OP_SET_STATE, 0, 0, "{\"a\":1}", AGENT_OK, 1, 1, "{\"a\":1}", NULL },
    { AGENT_OP_SET_STATE, 0, 0, "{\"a\":1}", AGENT_OK, 0, 1, "{\"a\":1}", NULL },
    { AGENT_OP_SET_STATE, IF, 1, "{\"b\":2}", AGENT_OK, 1, 2, "{\"a\":1,\"b\":2}", NULL },
    { AGENT_OP_SET_STATE, IF, 1, "{\"c\":3}", AGENT_ERR_CONFLICT, 0, 0, NULL, "agent_set_state_if" },
    { AGENT_OP_SET_STATE, NS, 0, "{\"c\":3}", AGENT_OK, 1, 3, NULL, NULL },
    { AGENT_OP_SET_STATE, IF | NS, 3, "{\"d\":4}", AGENT_OK, 1, 4, NULL, NULL },
    { AGENT_OP_SET_STATE, 0, 0, "{\"d\":", AGENT_ERR_JSON, 0, 0, NULL, "agent_set_state" },
    { AGENT_OP_GET_STATE, 0, 0, NULL, AGENT_OK, 0, 4, "{\"a\":1,\"b\":2,\"c\":3,\"d\":4}", NULL },
    { AGENT_OP_REPLACE_STATE, 0, 0, "{\"r\":1}", AGENT_OK, 1, 5, "{\"r\":1}", NULL },
    { AGENT_OP_REPLACE_STATE, IF, 5, "{\"r\":2}", AGENT_OK, 1, 6, "{\"r\":2}", NULL },
    { AGENT_OP_REPLACE_STATE, IF, 5, "{\"r\":0}", AGENT_ERR_CONFLICT, 0, 0, NULL, "agent_replace_state_if" },
    { AGENT_OP_REPLACE_STATE, NS, 0, "{\"r\":3}", AGENT_OK, 1, 7, NULL, NULL },
    { AGENT_OP_REPLACE_STATE, IF | NS, 7, "{\"r\":4}", AGENT_OK, 1, 8, NULL, NULL },
    { AGENT_OP_REPLACE_STATE, 0, 0, "[1]", AGENT_ERR_INVALID_ARGUMENT, 0, 0, NULL, "agent_replace_state" },
    { AGENT_OP_PATCH_STATE, 0, 0, "[{\"op\":\"add\",\"path\":\"/l\",\"value\":[]}]", AGENT_OK, 1, 9,
      "{\"r\":4,\"l\":[]}", NULL },
    { AGENT_OP_PATCH_STATE, IF, 9, "[{\"op\":\"add\",\"path\":\"/l/-\",\"value\":1}]", AGENT_OK, 1, 10,
      "{\"r\":4,\"l\":[1]}", NULL },
    { AGENT_OP_PATCH_STATE, IF, 9, "[{\"op\":\"add\",\"path\":\"/l/-\",\"value\":0}]",
      AGENT_ERR_CONFLICT, 0, 0, NULL, "agent_patch_state_if" },
    { AGENT_OP_PATCH_STATE, NS, 0, "[{\"op\":\"add\",\"path\":\"/l/-\",\"value\":2}]", AGENT_OK, 1, 11,
      NULL, NULL },
    { AGENT_OP_PATCH_STATE, IF | NS, 11, "[{\"op\":\"add\",\"path\":\"/l/-\",\"value\":3}]", AGENT_OK,
      1, 12, NULL, NULL },
    { AGENT_OP_PATCH_STATE, 0, 0, "[{\"op\":\"remove\",\"path\":\"/nope\"}]", AGENT_ERR_PATH, 0, 0,
      NULL, "agent_patch_state" },
    { AGENT_OP_GET_STATE, 0, 0, NULL, AGENT_OK, 0, 12, "{\"r\":4,\"l\":[1,2,3]}", NULL },
    { AGENT_OP_GET_STATE, NS, 0, NULL, AGENT_OK, 0, 12, NULL, NULL },
};

#undef IF
#undef NS

static void every_op(AgentQueue q, int fd)
{
    AgentHandle h = open_store(q ? "submit_ops_queue.db" : "submit_ops_callback.db", NULL);
    size_t i;
    for (i = 0; i < sizeof k_steps / sizeof k_steps[0]; i++) {
        const Step *s = &k_steps[i];
        AgentCall call = make_call(s->op, s->flags, s->data, s->expected, 1000 + i);
        AgentCompletion c;
        int now = 0;
        if (!CHECK_STATUS(AGENT_OK, call_and_wait(h, q, fd, &call, &c, &now))) {
            continue;
        }
        check_(c.tag == 1000 + i && c.status == s->status && c.committed == s->committed &&
                   c.version == s->version,
               __FILE__, __LINE__,
               "step %zu (%s): tag %llu status %s committed %u version %llu, expected %s %u %llu", i,
               q ? "queue" : "callback", (unsigned long long)c.tag, agent_status_name(c.status),
               c.committed, (unsigned long long)c.version, agent_status_name(s->status),
               s->committed, (unsigned long long)s->version);
        if (s->state != NULL) {
            CHECK_BUF(c.state, s->state);
        } else {
            CHECK_EMPTY(c.state);
        }
        if (s->message != NULL) {
            size_t n = strlen(s->message);
            check_(c.message.data != NULL && c.message.len > n + 2 &&
                       strncmp((const char *)c.message.data, s->message, n) == 0 &&
                       c.message.data[n] == ':' && c.message.data[c.message.len] == 0,
                   __FILE__, __LINE__, "step %zu: message %s does not name %s", i,
                   c.message.data ? (const char *)c.message.data : "(none)", s->message);
        } else {
            CHECK_EMPTY(c.message);
        }
        completion_free(&c);
    }
    CHECK_VERSIONED(h, "{\"r\":4,\"l\":[1,2,3]}", 12);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_submit_every_op_through_the_callback_and_the_queue(void)
{
    AgentQueue q = 0;
    int32_t fd = -1;
    every_op(0, -1);
    CHECK_STATUS(AGENT_OK, agent_queue_new(&q, &fd));
    CHECK(q != 0 && fd >= 0);
    every_op(q, fd);
    CHECK(!readable(fd, 0));
    CHECK_STATUS(AGENT_OK, agent_queue_free(q));
}

/* ------------------------------------------------------------------------------------------ */
/* Completing at once                                                                         */
/* ------------------------------------------------------------------------------------------ */

void test_submit_a_read_the_handles_copy_answers_completes_before_it_returns(void)
{
    AgentHandle h = open_store("submit_inline.db", NULL);
    AgentCall get = make_call(AGENT_OP_GET_STATE, 0, NULL, 0, 7);
    AgentQueue q = 0;
    int32_t fd = -1;
    AgentCompletion c;
    AgentBuffer b = { NULL, 0, NULL };
    int now = 0;
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"n\":1}", NULL));
    CHECK_STATUS(AGENT_OK, agent_get_state(h, &b)); /* this thread's copy */
    agent_buffer_free(&b);
    CHECK_STATUS(AGENT_OK, agent_queue_new(&q, &fd));
    /* On SQLite the handle validates its copy without I/O (a commit mark in shared memory): the
     * read completes on this thread, before agent_submit returns. On PostgreSQL every read asks
     * the server, so it goes to a worker and completes later. */
    CHECK_STATUS(AGENT_OK, call_and_wait(h, 0, -1, &get, &c, &now));
    CHECK(now == !g_pg);
    CHECK(c.tag == 7 && c.status == AGENT_OK && c.version == 1 && c.committed == 0);
    CHECK_BUF(c.state, "{\"n\":1}");
    completion_free(&c);
    CHECK_STATUS(AGENT_OK, call_and_wait(h, q, fd, &get, &c, &now));
    CHECK(now == !g_pg);
    CHECK_BUF(c.state, "{\"n\":1}");
    completion_free(&c);
    CHECK(!readable(fd, 0)); /* nothing queued */
    /* After a commit the copy is not trusted: the read goes to a worker. */
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"n\":2}", NULL));
    CHECK_STATUS(AGENT_OK, call_and_wait(h, 0, -1, &get, &c, &now));
    CHECK(!now && c.version == 2);
    CHECK_BUF(c.state, "{\"n\":2}");
    completion_free(&c);
    /* That worker's read is still current: the next read completes at once, though this thread
     * never read the handle since (as an event loop's thread, whose reads all go to workers). */
    CHECK_STATUS(AGENT_OK, call_and_wait(h, q, fd, &get, &c, &now));
    CHECK(now == !g_pg && c.version == 2);
    CHECK_BUF(c.state, "{\"n\":2}");
    completion_free(&c);
    /* A fired token sends even a hot read to a worker, which reports it cancelled. */
    CHECK_STATUS(AGENT_OK, agent_get_state(h, &b));
    agent_buffer_free(&b);
    CHECK_STATUS(AGENT_OK, agent_cancel_new(0, &get.cancel));
    CHECK_STATUS(AGENT_OK, call_and_wait(h, 0, -1, &get, &c, &now));
    CHECK(!now && c.status == AGENT_ERR_CANCELLED && c.version == 0);
    CHECK_EMPTY(c.state);
    completion_free(&c);
    CHECK_STATUS(AGENT_OK, agent_cancel_free(get.cancel));
    CHECK_STATUS(AGENT_OK, agent_queue_free(q));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* ------------------------------------------------------------------------------------------ */
/* Waiting for another process's lock                                                         */
/* ------------------------------------------------------------------------------------------ */

/* The child's validator: says it is inside (its write holds the lock), waits to be let go. */
static int32_t holding_validator(void *user_data, const AgentStateChange *c, AgentBuffer *message)
{
    const int *fds = user_data; /* [0]: write "inside"; [1]: read "let go" */
    char b = 1;
    (void)c;
    (void)message;
    if (write(fds[0], &b, 1) != 1 || read(fds[1], &b, 1) != 1) {
        return 1;
    }
    return 0;
}

/* A child process that, once the parent writes a byte to its `go`, writes {"holder":n} and holds
 * the store's lock inside that write (SQLite's write lock, the agent's row lock on PostgreSQL)
 * until the parent writes a byte to its `let_go`. */
typedef struct {
    pid_t pid;
    int go, inside, let_go;
} Holder;

static void holder_fork(Holder *hd, const char *path, int n)
{
    int go[2], inside[2], release[2];
    CHECK(pipe(go) == 0 && pipe(inside) == 0 && pipe(release) == 0);
    fflush(stdout);
    fflush(stderr);
    hd->pid = fork();
    if (hd->pid == 0) {
        int fds[2];
        char patch[32], b;
        AgentCancel never = 0;
        AgentHandle h;
        AgentStatus rc = AGENT_ERR_INVALID_ARGUMENT;
        close(go[1]);
        close(inside[0]);
        close(release[1]);
        fds[0] = inside[1];
        fds[1] = release[0];
        if (read(go[0], &b, 1) == 1) {
            h = open_at(path, "{\"busy_timeout_ms\":30000}");
            /* A token that never fires: on PostgreSQL the write takes the row lock first. */
            agent_cancel_new(-1, &never);
            agent_cancel_bind(never);
            agent_set_validator(h, holding_validator, fds, NULL);
            snprintf(patch, sizeof patch, "{\"holder\":%d}", n);
            rc = set_s(h, patch, NULL);
            agent_cancel_bind(0);
            agent_cancel_free(never);
            agent_close(h);
        }
        _exit(rc == AGENT_OK ? 0 : 1);
    }
    CHECK(hd->pid > 0);
    close(go[0]);
    close(inside[1]);
    close(release[0]);
    hd->go = go[1];
    hd->inside = inside[0];
    hd->let_go = release[1];
}

/* Lets the child take the lock; returns once it holds it. */
static void holder_take(Holder *hd)
{
    char b = 1;
    CHECK(write(hd->go, &b, 1) == 1);
    CHECK(read(hd->inside, &b, 1) == 1);
}

static void holder_let_go_and_reap(Holder *hd)
{
    char b = 1;
    int status = 0;
    CHECK(write(hd->let_go, &b, 1) == 1);
    close(hd->go);
    close(hd->inside);
    close(hd->let_go);
    CHECK(waitpid(hd->pid, &status, 0) == hd->pid);
    check_(WIFEXITED(status) && WEXITSTATUS(status) == 0, __FILE__, __LINE__,
           "the lock holder ended with status %d", status);
}

/*
 * Both holders are forked first, before this test opens its handle or submits anything, and
 * main.c runs it before any other test of submitted calls: no handle of the parent and no
 * library worker thread exists at the forks (a child inherits a thread's memory but not the
 * thread, and the parent's handles without closing them; memcheck would report both lost in
 * the child, which leaves with _exit).
 */
void test_submit_a_call_waiting_for_another_process_completes_later_or_is_cancelled(void)
{
    const char *path = tmp_path("submit_lock.db");
    AgentHandle h;
    AgentCall set = make_call(AGENT_OP_SET_STATE, 0, "{\"n\":2}", 0, 1);
    AgentCall cancelled = make_call(AGENT_OP_SET_STATE, 0, "{\"n\":3}", 0, 2);
    AgentCompletion c = k_no_completion;
    AgentQueue q = 0;
    int32_t fd = -1, done = -1;
    Waiter w;
    Holder first, second;
    size_t n = 0;
    holder_fork(&first, path, 1);
    holder_fork(&second, path, 2);
    /* Opened after the forks: no child inherits it (each opens its own). */
    h = open_at(path, "{\"busy_timeout_ms\":30000}");
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"n\":1}", NULL));

    /* Waits while the other process holds the lock, completes once it lets go. */
    holder_take(&first);
    waiter_init(&w);
    CHECK_STATUS(AGENT_OK, agent_submit(h, &set, waiter_done, &w));
    CHECK(waiter_arrived(&w) == 0); /* the lock is held until let go: it cannot have completed */
    holder_let_go_and_reap(&first);
    waiter_wait(&w);
    CHECK(w.c.status == AGENT_OK && w.c.committed == 1 && w.c.version == 3);
    CHECK_BUF(w.c.state, "{\"n\":2,\"holder\":1}");
    completion_free(&w.c);
    waiter_destroy(&w);

    /* Cancelled by its token while it waits: AGENT_ERR_CANCELLED, nothing written. */
    CHECK_STATUS(AGENT_OK, agent_queue_new(&q, &fd));
    CHECK_STATUS(AGENT_OK, agent_cancel_new(-1, &cancelled.cancel));
    holder_take(&second);
    CHECK_STATUS(AGENT_OK, agent_queue_submit(q, h, &cancelled, &c, &done));
    CHECK(done == 0);
    CHECK(!readable(fd, 0));
    CHECK_STATUS(AGENT_OK, agent_cancel_fire(cancelled.cancel));
    queue_take_one(q, fd, &c);
    CHECK(c.tag == 2 && c.status == AGENT_ERR_CANCELLED && c.committed == 0 && c.version == 0);
    CHECK_EMPTY(c.state);
    CHECK(c.message.data != NULL && strstr((const char *)c.message.data, "cancelled") != NULL);
    completion_free(&c);
    CHECK(!readable(fd, 0));
    holder_let_go_and_reap(&second);
    CHECK_VERSIONED(h, "{\"n\":2,\"holder\":2}", 4);
    CHECK_STATUS(AGENT_OK, agent_queue_take(q, NULL, 0, &n));
    CHECK(n == 0);
    CHECK_STATUS(AGENT_OK, agent_cancel_free(cancelled.cancel));
    CHECK_STATUS(AGENT_OK, agent_queue_free(q));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* ------------------------------------------------------------------------------------------ */
/* Many calls, few threads                                                                    */
/* ------------------------------------------------------------------------------------------ */

#define MANY_HANDLES 4
#define MANY_MAX 1000

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
    int bad;            /* completions not AGENT_OK */
    int most_threads;   /* the most threads the process had, seen by each completion */
    unsigned char seen[MANY_MAX];
} Many;

static void many_done(void *context, AgentCompletion *c)
{
    Many *m = context;
    int threads = count_threads();
    pthread_mutex_lock(&m->mu);
    if (c->status != AGENT_OK || c->tag >= MANY_MAX || m->seen[c->tag]++) {
        m->bad++;
    }
    if (threads > m->most_threads) {
        m->most_threads = threads;
    }
    m->arrived++;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    completion_free(c);
}

void test_submit_a_thousand_calls_in_flight_use_at_most_the_pools_threads(void)
{
    static Many m; /* large: not on the stack */
    int calls = g_quick ? 100 : MANY_MAX;
    AgentHandle hs[MANY_HANDLES];
    int before = count_threads();
    int i;
    memset(&m, 0, sizeof m);
    pthread_mutex_init(&m.mu, NULL);
    pthread_cond_init(&m.cv, NULL);
    for (i = 0; i < MANY_HANDLES; i++) {
        char name[32];
        snprintf(name, sizeof name, "submit_many_%d.db", i);
        hs[i] = open_store(name, "{\"synchronous\":\"normal\"}");
    }
    /* All submitted before the first completes, on this one thread. */
    for (i = 0; i < calls; i++) {
        char patch[32];
        AgentCall c;
        snprintf(patch, sizeof patch, "{\"n\":%d}", i / MANY_HANDLES + 1);
        c = make_call(AGENT_OP_SET_STATE, AGENT_CALL_NO_STATE, patch, 0, (uint64_t)i);
        if (!CHECK_STATUS(AGENT_OK, agent_submit(hs[i % MANY_HANDLES], &c, many_done, &m))) {
            break;
        }
    }
    pthread_mutex_lock(&m.mu);
    while (m.arrived < i) {
        pthread_cond_wait(&m.cv, &m.mu);
    }
    pthread_mutex_unlock(&m.mu);
    CHECK(i == calls && m.arrived == calls && m.bad == 0);
    /* Threads present before the test may include idle workers of earlier ones: the bound is
     * loose by those, and still far below a thread per call. */
    check_(before > 0 && m.most_threads <= before + pool_cap(), __FILE__, __LINE__,
           "%d calls in flight ran with up to %d threads (%d before, a cap of %d workers)", calls,
           m.most_threads, before, pool_cap());
    printf("    %d calls in flight: at most %d threads (%d before, cap %d)\n", calls,
           m.most_threads, before, pool_cap());
    for (i = 0; i < MANY_HANDLES; i++) {
        uint64_t v = 0;
        AgentBuffer b = { NULL, 0, NULL };
        /* Calls on one handle may run at once: the version counts them all. */
        CHECK_STATUS(AGENT_OK, agent_get_state_versioned(hs[i], &b, &v));
        CHECK(v == (uint64_t)(calls / MANY_HANDLES));
        agent_buffer_free(&b);
        CHECK_STATUS(AGENT_OK, agent_close(hs[i]));
    }
    pthread_mutex_destroy(&m.mu);
    pthread_cond_destroy(&m.cv);
}

/* ------------------------------------------------------------------------------------------ */
/* Bad input, closing and freeing under calls in flight                                      */
/* ------------------------------------------------------------------------------------------ */

static int g_never_called;

static void must_not_complete(void *context, AgentCompletion *c)
{
    (void)context;
    g_never_called++;
    completion_free(c);
}

void test_submit_refuses_bad_input_and_never_calls_done(void)
{
    AgentHandle h = open_store("submit_bad.db", NULL);
    AgentCall ok = make_call(AGENT_OP_SET_STATE, 0, "{}", 0, 1);
    AgentCall bad;
    AgentCompletion now = k_no_completion;
    AgentQueue q = 0;
    int32_t fd = -1, done = 0;
    size_t n = 0;
    g_never_called = 0;
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_submit(h, NULL, must_not_complete, NULL));
    CHECK_LAST_ERROR_HAS("call is NULL");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_submit(h, &ok, NULL, NULL));
    CHECK_LAST_ERROR_HAS("done is NULL");
    bad = ok;
    bad.op = 0;
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_submit(h, &bad, must_not_complete, NULL));
    CHECK_LAST_ERROR_HAS("op");
    bad.op = 5;
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_submit(h, &bad, must_not_complete, NULL));
    bad = ok;
    bad.flags = 4;
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_submit(h, &bad, must_not_complete, NULL));
    CHECK_LAST_ERROR_HAS("flags");
    bad = make_call(AGENT_OP_GET_STATE, AGENT_CALL_IF, NULL, 0, 1);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_submit(h, &bad, must_not_complete, NULL));
    CHECK_LAST_ERROR_HAS("AGENT_CALL_IF");
    bad = ok;
    bad.data = NULL;
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_submit(h, &bad, must_not_complete, NULL));
    CHECK_LAST_ERROR_HAS("data is NULL");
    bad = ok;
    bad.cancel = 12345;
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_submit(h, &bad, must_not_complete, NULL));
    CHECK_LAST_ERROR_HAS("cancel");
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_submit(12345, &ok, must_not_complete, NULL));
    CHECK_LAST_ERROR_FROM("agent_submit");
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_submit(0, &ok, must_not_complete, NULL));

    /* Queues. */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_queue_new(NULL, &fd));
    CHECK_STATUS(AGENT_OK, agent_queue_new(&q, NULL)); /* the descriptor is optional */
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_queue_submit(0, h, &ok, &now, &done));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_queue_submit(12345, h, &ok, &now, &done));
    CHECK_LAST_ERROR_FROM("agent_queue_submit");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_queue_submit(q, h, &ok, NULL, &done));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_queue_submit(q, h, &ok, &now, NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_queue_submit(q, h, NULL, &now, &done));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_queue_submit(q, 12345, &ok, &now, &done));
    CHECK(done == 0 && now.state.data == NULL);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_queue_take(q, NULL, 1, &n));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_queue_take(q, &now, 1, NULL));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_queue_take(12345, &now, 1, &n));
    CHECK_STATUS(AGENT_OK, agent_queue_take(q, &now, 1, &n));
    CHECK(n == 0);
    CHECK_STATUS(AGENT_OK, agent_queue_free(q));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_queue_free(q));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_queue_free(0));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_queue_take(q, &now, 1, &n));

    /* A closed handle is refused at once. */
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_submit(h, &ok, must_not_complete, NULL));
    CHECK(g_never_called == 0);
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived, ok, closed, other;
} Tally;

static void tally_done(void *context, AgentCompletion *c)
{
    Tally *t = context;
    pthread_mutex_lock(&t->mu);
    if (c->status == AGENT_OK) {
        t->ok++;
    } else if (c->status == AGENT_ERR_BAD_HANDLE && c->message.data != NULL &&
               strncmp((const char *)c->message.data, "agent_set_state: ", 17) == 0) {
        t->closed++;
    } else {
        t->other++;
    }
    t->arrived++;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    completion_free(c);
}

void test_submit_closing_the_handle_and_freeing_the_queue_with_calls_in_flight(void)
{
    const char *path = tmp_path("submit_close.db");
    AgentHandle h = open_at(path, NULL);
    AgentHandle other = open_at(path, NULL);
    Tally t;
    AgentQueue q = 0;
    int32_t fd = -1;
    int calls = g_quick ? 20 : 100, i;
    uint64_t v = 0;
    AgentBuffer b = { NULL, 0, NULL };
    memset(&t, 0, sizeof t);
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.cv, NULL);
    /* Closed at once: every call completes, each written or refused as closed. */
    for (i = 0; i < calls; i++) {
        char patch[32];
        AgentCall c;
        snprintf(patch, sizeof patch, "{\"c%d\":%d}", i, i);
        c = make_call(AGENT_OP_SET_STATE, 0, patch, 0, (uint64_t)i);
        CHECK_STATUS(AGENT_OK, agent_submit(h, &c, tally_done, &t));
    }
    CHECK_STATUS(AGENT_OK, agent_close(h));
    pthread_mutex_lock(&t.mu);
    while (t.arrived < calls) {
        pthread_cond_wait(&t.cv, &t.mu);
    }
    pthread_mutex_unlock(&t.mu);
    CHECK(t.ok + t.closed == calls && t.other == 0);
    printf("    %d calls, the handle closed under them: %d written, %d refused as closed\n", calls,
           t.ok, t.closed);
    CHECK_STATUS(AGENT_OK, agent_get_state_versioned(other, &b, &v));
    CHECK(v == (uint64_t)t.ok);
    agent_buffer_free(&b);

    /* A queue freed with calls in flight and completions waiting: they complete into nothing
     * (valgrind: nothing leaks). */
    CHECK_STATUS(AGENT_OK, agent_queue_new(&q, &fd));
    for (i = 0; i < calls; i++) {
        char patch[32];
        AgentCall c;
        AgentCompletion now = k_no_completion;
        int32_t done = 0;
        snprintf(patch, sizeof patch, "{\"q\":%d}", i); /* each a change, in any order */
        c = make_call(AGENT_OP_SET_STATE, 0, patch, 0, (uint64_t)i);
        CHECK_STATUS(AGENT_OK, agent_queue_submit(q, other, &c, &now, &done));
        CHECK(done == 0);
        if (i == calls / 2) {
            CHECK(readable(fd, -1)); /* some wait in the queue */
        }
    }
    CHECK_STATUS(AGENT_OK, agent_queue_free(q));
    drain_pool(other);
    CHECK_STATUS(AGENT_OK, agent_get_state_versioned(other, &b, &v));
    CHECK(v == (uint64_t)(t.ok + calls));
    agent_buffer_free(&b);
    CHECK_STATUS(AGENT_OK, agent_close(other));
    pthread_mutex_destroy(&t.mu);
    pthread_cond_destroy(&t.cv);
}
