/*
 * Watching a store's agents (agent_watch_*): the queue form and its descriptor, the callback
 * form, changes in commit order with their kind, patch and state, ids and prefixes, adding and
 * removing agents, resuming after a version, a deletion, another process's commits (and a child
 * refused the parent's watch), closing from another thread and from inside the callback, and
 * bad input refused with its status.
 *
 * On PostgreSQL a watch's location is the server's URI and its agents are this run's
 * (g_agent_prefix); on SQLite, a file of the temporary directory per test.
 */
#include "check.h"
#include "tests.h"

#include <poll.h>
#include <signal.h>

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* How long a test waits for an event it expects: generous, the machine may be loaded. */
#define WAIT_MS 30000

/* The store of a test: its file, or the server. */
static const char *location(const char *file)
{
    return g_pg ? g_pg_uri : tmp_path(file);
}

/* This run's id for agent `name` (the prefix keeps runs on one server apart). */
static void agent_name(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s%s", g_agent_prefix, name);
}

/* A handle on agent `name` of the store at `loc`, with the change log on (a watch reads the
 * changes from it; without it every change arrives as a resync). */
static AgentHandle open_agent(const char *loc, const char *name)
{
    char options[400], id[300];
    AgentHandle h = 0;
    agent_name(id, sizeof id, name);
    snprintf(options, sizeof options,
             "{\"agent_id\":\"%s\",\"change_log\":{\"keep_last\":100},\"synchronous\":\"normal\"}",
             id);
    CHECK_STATUS(AGENT_OK, agent_open(loc, options, &h));
    return h;
}

/* agent_watch_open with options made of `fmt`, where each %s is this run's agent prefix. */
static AgentStatus watch_open(const char *loc, const char *fmt, AgentWatchFn fn, void *context,
                              AgentWatch *out, int32_t *out_fd)
{
    char options[1024];
    snprintf(options, sizeof options, fmt, g_agent_prefix, g_agent_prefix, g_agent_prefix);
    return agent_watch_open(loc, options, fn, context, out, out_fd);
}

static const char *kind_name(int32_t kind)
{
    switch (kind) {
    case AGENT_WATCH_MERGE:
        return "merge";
    case AGENT_WATCH_JSON_PATCH:
        return "json_patch";
    case AGENT_WATCH_REPLACE:
        return "replace";
    case AGENT_WATCH_MIGRATION:
        return "migration";
    case AGENT_WATCH_DELETED:
        return "deleted";
    case AGENT_WATCH_RESYNC:
        return "resync";
    default:
        return "?";
    }
}

/* A view (pointer, length) is NULL with length 0, or NUL-terminated after its length. */
static int view_ok(const char *p, size_t n)
{
    return p == NULL ? n == 0 : p[n] == 0 && strlen(p) == n;
}

/*
 * Appends "<agent>:<version> <kind> <patch or -> <state or ->;" to `log` (the agent's name
 * without this run's prefix), and checks what every event promises: views NUL-terminated, a
 * time for every change (it may be 0, unknown, only for a resync or a deletion), migrated_from
 * only for a migration.
 */
static void log_watch_event(char *log, size_t cap, const AgentWatchEvent *e)
{
    size_t prefix = strlen(g_agent_prefix), n = strlen(log);
    const char *id = e->agent_id;
    check_(view_ok(e->agent_id, e->agent_id_len) && view_ok(e->patch, e->patch_len) &&
               view_ok(e->state, e->state_len),
           __FILE__, __LINE__, "an event's views are not NUL-terminated after their lengths");
    check_(e->kind == AGENT_WATCH_RESYNC || e->kind == AGENT_WATCH_DELETED ||
               e->at_ms > 1600000000000LL, __FILE__, __LINE__,
           "a change committed at %lld ms", (long long)e->at_ms);
    check_(e->kind == AGENT_WATCH_MIGRATION || e->migrated_from == 0, __FILE__, __LINE__,
           "migrated_from %u on a %s", e->migrated_from, kind_name(e->kind));
    if (e->agent_id_len >= prefix && strncmp(id, g_agent_prefix, prefix) == 0) {
        id += prefix;
    }
    snprintf(log + n, cap - n, "%s:%llu %s %s %s;", id, (unsigned long long)e->version,
             kind_name(e->kind), e->patch ? e->patch : "-", e->state ? e->state : "-");
}

/* Takes the next event of queue watch `w` into `log`, waiting up to WAIT_MS; 0 if none came. */
static int take_event(AgentWatch w, char *log, size_t cap)
{
    AgentWatchEvent *e = NULL;
    if (!CHECK_STATUS(AGENT_OK, agent_watch_next(w, WAIT_MS, &e)) ||
        !check_(e != NULL, __FILE__, __LINE__, "no event within %d ms", WAIT_MS)) {
        return 0;
    }
    log_watch_event(log, cap, e);
    agent_watch_event_free(e);
    return 1;
}

/* Takes `n` events of queue watch `w` into `log` (emptied first). */
static void take_events(AgentWatch w, int n, char *log, size_t cap)
{
    int i;
    log[0] = 0;
    for (i = 0; i < n && take_event(w, log, cap); i++) {
    }
}

#define CHECK_LOG(log, want) \
    check_(strcmp((log), (want)) == 0, __FILE__, __LINE__, "events\n      %s\n    expected\n      %s", \
           (log), (want))

/* Whether `fd` is readable, waiting up to `ms`. */
static int readable(int fd, int ms)
{
    struct pollfd p;
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN) != 0;
}

/* Nothing is queued: agent_watch_next without waiting gives no event. */
static void check_nothing_queued(AgentWatch w)
{
    AgentWatchEvent *e = (AgentWatchEvent *)&e; /* not NULL: the call must write NULL */
    CHECK_STATUS(AGENT_OK, agent_watch_next(w, 0, &e));
    CHECK(e == NULL);
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

/*
 * Every watch of the test is closed: the store's watcher thread ends with its last watch (it
 * notices within a few milliseconds, on its own). Waits for it, up to WAIT_MS, so that a later
 * test's fork() copies no watcher's memory without its thread (valgrind would count it lost in
 * the child). `before`: the threads when the test began.
 */
static void check_watchers_end(int before)
{
    struct timespec start, now;
    long waited = 0;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (count_threads() > before && waited < WAIT_MS) {
        sleep_ms(5);
        clock_gettime(CLOCK_MONOTONIC, &now);
        waited = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    }
    check_(count_threads() <= before, __FILE__, __LINE__,
           "%d threads %ld ms after the test's watches closed, %d before it opened them",
           count_threads(), waited, before);
}

/* The callback form's record of what it was handed, for a waiting test thread. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int events;
    char log[2048];
    AgentWatch self;           /* not 0: close it from inside at the first event */
    AgentStatus close_status;  /* of that close */
    int after_close;           /* events handed over after the closing one */
} Collector;

static void collector_init(Collector *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->close_status = -1;
}

static void collector_destroy(Collector *c)
{
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static void collect(void *context, const AgentWatchEvent *e)
{
    Collector *c = context;
    AgentWatch self;
    pthread_mutex_lock(&c->mu);
    if (c->close_status != -1) {
        c->after_close++;
    }
    log_watch_event(c->log, sizeof c->log, e);
    c->events++;
    self = c->self;
    c->self = 0;
    pthread_mutex_unlock(&c->mu);
    if (self != 0) {
        AgentStatus rc = agent_watch_close(self);
        pthread_mutex_lock(&c->mu);
        c->close_status = rc;
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Waits up to WAIT_MS for the collector to hold `n` events; returns whether it does. */
static int collector_wait(Collector *c, int n)
{
    struct timespec until;
    int ok;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&c->mu);
    while (c->events < n) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, &until) != 0) {
            break;
        }
    }
    ok = c->events >= n;
    pthread_mutex_unlock(&c->mu);
    return check_(ok, __FILE__, __LINE__, "%d events within %d ms, expected %d", c->events,
                  WAIT_MS, n);
}

/* ------------------------------------------------------------------------------------------ */
/* The queue form                                                                             */
/* ------------------------------------------------------------------------------------------ */

void test_watch_queue_delivers_each_change_in_order_with_its_kind_patch_and_state(void)
{
    int threads = count_threads();
    const char *loc = location("watch_queue.db");
    AgentHandle h = open_agent(loc, "wq_a");
    AgentWatch w = 0;
    int32_t fd = -7;
    char log[2048];
    const char *ops = "[{\"op\":\"add\",\"path\":\"/d\",\"value\":4}]";

    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"ids\":[\"%swq_a\"]}", NULL, NULL, &w, &fd));
    CHECK(w != 0 && fd >= 0);
    check_nothing_queued(w);
    CHECK(!readable(fd, 0));

    /* the first change carries the state (a watcher cannot know the writer's initial state),
     * later merges and JSON Patches their patch only, a replacement its state only */
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"a\":1}", NULL));
    CHECK(readable(fd, WAIT_MS));
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"b\":2}", NULL));
    CHECK_STATUS(AGENT_OK, replace_s(h, "{\"c\":3}", NULL));
    CHECK_STATUS(AGENT_OK, agent_patch_state(h, (const uint8_t *)ops, strlen(ops), NULL));
    take_events(w, 4, log, sizeof log);
    CHECK_LOG(log, "wq_a:1 merge {\"a\":1} {\"a\":1};"
                   "wq_a:2 merge {\"b\":2} -;"
                   "wq_a:3 replace - {\"c\":3};"
                   "wq_a:4 json_patch [{\"op\":\"add\",\"path\":\"/d\",\"value\":4}] -;");
    /* taken: the descriptor is no longer readable, and nothing more is queued */
    check_nothing_queued(w);
    CHECK(!readable(fd, 0));

    CHECK_STATUS(AGENT_OK, agent_watch_close(w));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_watch_close(w)); /* once */
    CHECK_STATUS(AGENT_OK, agent_close(h));
    check_watchers_end(threads);
}

void test_watch_states_option_gives_every_event_its_state(void)
{
    int threads = count_threads();
    const char *loc = location("watch_states.db");
    AgentHandle h = open_agent(loc, "ws_a");
    AgentWatch w = 0;
    char log[1024];
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"a\":1}", NULL));
    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"ids\":[\"%sws_a\"],\"states\":true}", NULL, NULL,
                                      &w, NULL));
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"b\":2}", NULL));
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"a\":null}", NULL));
    take_events(w, 2, log, sizeof log);
    CHECK_LOG(log, "ws_a:2 merge {\"b\":2} {\"a\":1,\"b\":2};"
                   "ws_a:3 merge {\"a\":null} {\"b\":2};");
    CHECK_STATUS(AGENT_OK, agent_watch_close(w));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    check_watchers_end(threads);
}

void test_watch_prefix_follows_new_agents_and_ids_grow_and_shrink(void)
{
    int threads = count_threads();
    const char *loc = location("watch_select.db");
    AgentHandle a = open_agent(loc, "wp_x_a");
    AgentHandle other = open_agent(loc, "wp_y_other");
    AgentHandle b;
    AgentWatch by_prefix = 0, by_ids = 0;
    char log[2048];

    CHECK_STATUS(AGENT_OK, set_s(a, "{\"n\":1}", NULL));
    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"prefix\":\"%swp_x_\"}", NULL, NULL, &by_prefix, NULL));
    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"ids\":[\"%swp_x_a\"]}", NULL, NULL, &by_ids, NULL));
    /* a prefix watch takes no ids */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_watch_add(by_prefix, "x", -1));
    CHECK_LAST_ERROR_FROM("agent_watch_add");

    /* an agent created after the watch began, under the prefix; one outside it */
    b = open_agent(loc, "wp_x_b");
    CHECK_STATUS(AGENT_OK, set_s(other, "{\"n\":1}", NULL));
    CHECK_STATUS(AGENT_OK, set_s(b, "{\"n\":1}", NULL));
    take_events(by_prefix, 1, log, sizeof log);
    CHECK_LOG(log, "wp_x_b:1 merge {\"n\":1} {\"n\":1};");
    CHECK_STATUS(AGENT_OK, set_s(a, "{\"n\":2}", NULL));
    take_events(by_prefix, 1, log, sizeof log);
    CHECK_LOG(log, "wp_x_a:2 merge {\"n\":2} -;");
    take_events(by_ids, 1, log, sizeof log);
    CHECK_LOG(log, "wp_x_a:2 merge {\"n\":2} -;");

    /* ids: follow another agent from now on, stop following the first */
    {
        char id[300];
        agent_name(id, sizeof id, "wp_y_other");
        CHECK_STATUS(AGENT_OK, agent_watch_add(by_ids, id, -1));
        agent_name(id, sizeof id, "wp_x_a");
        CHECK_STATUS(AGENT_OK, agent_watch_remove(by_ids, id));
    }
    CHECK_STATUS(AGENT_OK, set_s(a, "{\"n\":3}", NULL));
    CHECK_STATUS(AGENT_OK, set_s(other, "{\"n\":2}", NULL));
    take_events(by_ids, 1, log, sizeof log);
    CHECK_LOG(log, "wp_y_other:2 merge {\"n\":2} -;");
    take_events(by_prefix, 1, log, sizeof log);
    CHECK_LOG(log, "wp_x_a:3 merge {\"n\":3} -;");

    CHECK_STATUS(AGENT_OK, agent_watch_close(by_prefix));
    CHECK_STATUS(AGENT_OK, agent_watch_close(by_ids));
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK_STATUS(AGENT_OK, agent_close(b));
    CHECK_STATUS(AGENT_OK, agent_close(other));
    check_watchers_end(threads);
}

void test_watch_since_resumes_after_a_version_from_the_change_log(void)
{
    int threads = count_threads();
    const char *loc = location("watch_since.db");
    AgentHandle h = open_agent(loc, "wsn_a");
    AgentWatch w = 0, added = 0;
    char log[2048], id[300];
    int i;
    for (i = 1; i <= 3; i++) {
        char patch[32];
        snprintf(patch, sizeof patch, "{\"n\":%d}", i);
        CHECK_STATUS(AGENT_OK, set_s(h, patch, NULL));
    }
    /* the changes after version 1, from the log, then later ones */
    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"ids\":[\"%swsn_a\"],\"since\":{\"%swsn_a\":1}}",
                                      NULL, NULL, &w, NULL));
    take_events(w, 2, log, sizeof log);
    CHECK_LOG(log, "wsn_a:2 merge {\"n\":2} -;wsn_a:3 merge {\"n\":3} -;");
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"n\":4}", NULL));
    take_events(w, 1, log, sizeof log);
    CHECK_LOG(log, "wsn_a:4 merge {\"n\":4} -;");
    check_nothing_queued(w);

    /* an agent added with a version resumes after it too; from version 0, every change (the
     * first with its state) */
    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"ids\":[]}", NULL, NULL, &added, NULL));
    agent_name(id, sizeof id, "wsn_a");
    CHECK_STATUS(AGENT_OK, agent_watch_add(added, id, 0));
    take_events(added, 4, log, sizeof log);
    CHECK_LOG(log, "wsn_a:1 merge {\"n\":1} {\"n\":1};wsn_a:2 merge {\"n\":2} -;"
                   "wsn_a:3 merge {\"n\":3} -;wsn_a:4 merge {\"n\":4} -;");

    CHECK_STATUS(AGENT_OK, agent_watch_close(w));
    CHECK_STATUS(AGENT_OK, agent_watch_close(added));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    check_watchers_end(threads);
}

void test_watch_a_deletion_is_one_deleted_event_and_a_new_first_write_follows(void)
{
    int threads = count_threads();
    const char *loc = location("watch_delete.db");
    AgentHandle h = open_agent(loc, "wd_a");
    AgentWatch w = 0;
    uint64_t deleted = 0;
    char log[1024], id[300];
    agent_name(id, sizeof id, "wd_a");
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"n\":1}", NULL));
    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"ids\":[\"%swd_a\"]}", NULL, NULL, &w, NULL));
    CHECK_STATUS(AGENT_OK, agent_store_delete(loc, NULL, id, -1, &deleted));
    CHECK(deleted == 1);
    take_events(w, 1, log, sizeof log);
    CHECK_LOG(log, "wd_a:0 deleted - -;");
    /* written again: a first write (the version after the one it was deleted at) */
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"m\":2}", NULL));
    take_events(w, 1, log, sizeof log);
    CHECK_LOG(log, "wd_a:2 merge {\"m\":2} {\"m\":2};");
    CHECK_STATUS(AGENT_OK, agent_watch_close(w));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    check_watchers_end(threads);
}

/* ------------------------------------------------------------------------------------------ */
/* The callback form                                                                          */
/* ------------------------------------------------------------------------------------------ */

void test_watch_callback_form_hands_over_each_change(void)
{
    int threads = count_threads();
    const char *loc = location("watch_callback.db");
    AgentHandle h = open_agent(loc, "wc_a");
    AgentWatch w = 0;
    AgentWatchEvent *e = NULL;
    int32_t fd = 7;
    Collector c;
    collector_init(&c);
    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"ids\":[\"%swc_a\"]}", collect, &c, &w, &fd));
    CHECK(w != 0 && fd == -1); /* no descriptor: the callback is handed each event */
    /* no queue to take from */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_watch_next(w, 0, &e));
    CHECK_LAST_ERROR_FROM("agent_watch_next");
    CHECK(e == NULL);
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"a\":1}", NULL));
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"a\":2}", NULL));
    CHECK_STATUS(AGENT_OK, replace_s(h, "{\"z\":0}", NULL));
    if (collector_wait(&c, 3)) {
        pthread_mutex_lock(&c.mu);
        CHECK_LOG(c.log, "wc_a:1 merge {\"a\":1} {\"a\":1};wc_a:2 merge {\"a\":2} -;"
                         "wc_a:3 replace - {\"z\":0};");
        pthread_mutex_unlock(&c.mu);
    }
    CHECK_STATUS(AGENT_OK, agent_watch_close(w));
    /* closed: no callback runs any more (close waited for a running one) */
    pthread_mutex_lock(&c.mu);
    c.close_status = AGENT_OK;
    pthread_mutex_unlock(&c.mu);
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"a\":3}", NULL));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(c.after_close == 0);
    collector_destroy(&c);
    check_watchers_end(threads);
}

void test_watch_closing_from_inside_its_callback(void)
{
    int threads = count_threads();
    const char *loc = location("watch_callback_close.db");
    AgentHandle h = open_agent(loc, "wcc_a");
    AgentWatch w = 0;
    Collector c;
    collector_init(&c);
    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"ids\":[\"%swcc_a\"]}", collect, &c, &w, NULL));
    pthread_mutex_lock(&c.mu);
    c.self = w; /* the callback closes its own watch at the first event */
    pthread_mutex_unlock(&c.mu);
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"a\":1}", NULL));
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"a\":2}", NULL));
    collector_wait(&c, 1);
    /* the close inside returned (it did not wait for the callback it was called from) */
    pthread_mutex_lock(&c.mu);
    while (c.close_status == -1) {
        pthread_cond_wait(&c.cv, &c.mu);
    }
    CHECK_STATUS(AGENT_OK, c.close_status);
    pthread_mutex_unlock(&c.mu);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_watch_close(w));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(c.after_close == 0);
    collector_destroy(&c);
    check_watchers_end(threads);
}

/* ------------------------------------------------------------------------------------------ */
/* Closing from another thread                                                                */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    AgentWatch w;
    AgentStatus rc;
    AgentWatchEvent *event;
} Waiting;

static void *wait_for_ever(void *arg)
{
    Waiting *wt = arg;
    wt->rc = agent_watch_next(wt->w, -1, &wt->event);
    return NULL;
}

void test_watch_close_from_another_thread_wakes_a_waiting_next(void)
{
    int threads = count_threads();
    const char *loc = location("watch_wake.db");
    AgentHandle h = open_agent(loc, "ww_a");
    Waiting wt;
    pthread_t t;
    CHECK_STATUS(AGENT_OK, set_s(h, "{}", NULL)); /* the store exists */
    wt.w = 0;
    wt.rc = -1;
    wt.event = (AgentWatchEvent *)&wt;
    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"ids\":[\"%sww_a\"]}", NULL, NULL, &wt.w, NULL));
    CHECK(pthread_create(&t, NULL, wait_for_ever, &wt) == 0);
    /* Not synchronisation: whether the thread waits already or calls next after the close,
     * it returns AGENT_ERR_BAD_HANDLE. The pause makes the first case the likely one. */
    sleep_ms(100);
    CHECK_STATUS(AGENT_OK, agent_watch_close(wt.w));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, wt.rc);
    CHECK(wt.event == NULL);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    check_watchers_end(threads);
}

/* ------------------------------------------------------------------------------------------ */
/* Processes                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* One write of a writer process: a merge patch, or a replacement. */
struct write_step {
    int replace;
    const char *json;
};

/* Forks a writer process now, before the caller starts a watch or pushes (so that it copies no
 * watcher or worker thread) and while no handle of the store is open (a child cannot use its
 * parent's connection). It waits until release_writer(*go), then opens its own handle on agent
 * `name`, makes the writes of `steps` in order and exits 0 when every one succeeded. */
static pid_t fork_writer(const char *loc, const char *name, const struct write_step *steps,
                         size_t n, int *go)
{
    int pipe_fds[2];
    pid_t writer;
    CHECK(pipe(pipe_fds) == 0);
    fflush(stdout);
    fflush(stderr);
    writer = fork();
    if (writer == 0) {
        AgentHandle c;
        char byte;
        int bad = 0;
        size_t i;
        close(pipe_fds[1]);
        if (read(pipe_fds[0], &byte, 1) != 1) {
            _exit(100);
        }
        c = open_agent(loc, name);
        for (i = 0; i < n; i++) {
            AgentStatus st = steps[i].replace ? replace_s(c, steps[i].json, NULL)
                                              : set_s(c, steps[i].json, NULL);
            bad |= st != AGENT_OK;
        }
        bad |= agent_close(c) != AGENT_OK;
        _exit(bad ? 1 : 0);
    }
    CHECK(writer > 0);
    close(pipe_fds[0]);
    *go = pipe_fds[1];
    return writer;
}

/* Lets the writer of fork_writer go. */
static void release_writer(int go)
{
    CHECK(write(go, "g", 1) == 1);
    close(go);
}

void test_watch_sees_another_process_and_a_child_cannot_use_the_parents_watch(void)
{
    int threads = count_threads();
    const char *loc = location("watch_process.db");
    AgentHandle h = open_agent(loc, "wpr_a");
    int go, verdict[2];
    const struct write_step writes[] = {
        {0, "{\"from\":\"child\",\"n\":1}"}, {1, "{\"n\":2}"}, {0, "{\"n\":3}"}};
    char child_bad = -1;
    pid_t writer, inheritor;
    int status = 0;
    AgentWatch w = 0;
    char log[2048];

    CHECK_STATUS(AGENT_OK, set_s(h, "{\"from\":\"parent\"}", NULL));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    /* The writer is forked before the watch exists, and opens its own handle. */
    writer = fork_writer(loc, "wpr_a", writes, sizeof writes / sizeof writes[0], &go);
    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"prefix\":\"%swpr_\"}", NULL, NULL, &w, NULL));

    /* A child of the watching process: the watch is the parent's; the child may only close
     * its copy. It reports through a pipe and waits to be killed: under valgrind, any exit of
     * its own (even by a signal it sends itself) would count as lost what the parent's watcher
     * thread holds (the child has its memory but not the thread), and a SIGKILL from another
     * process ends valgrind with it, before its leak check. */
    CHECK(pipe(verdict) == 0);
    fflush(stdout);
    fflush(stderr);
    inheritor = fork();
    if (inheritor == 0) {
        AgentWatchEvent *e = NULL;
        char bad = 0;
        close(verdict[0]);
        bad |= agent_watch_next(w, 0, &e) != AGENT_ERR_INVALID_ARGUMENT || e != NULL;
        bad |= (agent_watch_add(w, "x", -1) != AGENT_ERR_INVALID_ARGUMENT) << 1;
        bad |= (agent_watch_remove(w, "x") != AGENT_ERR_INVALID_ARGUMENT) << 2;
        bad |= (strstr(agent_last_error(), "fork") == NULL) << 3;
        bad |= (agent_watch_close(w) != AGENT_OK) << 4;
        bad |= (agent_watch_close(w) != AGENT_ERR_BAD_HANDLE) << 5;
        if (write(verdict[1], &bad, 1) == 1) {
            for (;;) {
                pause();
            }
        }
        _exit(1);
    }
    close(verdict[1]);
    CHECK(inheritor > 0 && read(verdict[0], &child_bad, 1) == 1);
    close(verdict[0]);
    if (inheritor > 0) {
        kill(inheritor, SIGKILL);
    }
    check_(child_bad == 0, __FILE__, __LINE__,
           "the child using the parent's watch saw wrong statuses (bits %d)", (int)child_bad);
    CHECK(inheritor > 0 && waitpid(inheritor, &status, 0) == inheritor);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    /* the parent's watch is unaffected: the writer's changes arrive, in commit order */
    release_writer(go);
    take_events(w, 3, log, sizeof log);
    CHECK_LOG(log, "wpr_a:2 merge {\"from\":\"child\",\"n\":1} -;"
                   "wpr_a:3 replace - {\"n\":2};"
                   "wpr_a:4 merge {\"n\":3} -;");
    CHECK(writer > 0 && waitpid(writer, &status, 0) == writer);
    check_(WIFEXITED(status) && WEXITSTATUS(status) == 0, __FILE__, __LINE__,
           "the writer ended with status %d", status);
    CHECK_STATUS(AGENT_OK, agent_watch_close(w));
    check_watchers_end(threads);
}

/* ------------------------------------------------------------------------------------------ */
/* Bad input                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* agent_watch_open(loc, options) fails with `want`, leaves *out 0 and *out_fd -1, and names
 * itself in the last error. */
static void check_watch_open_fails(AgentStatus want, const char *loc, const char *options,
                                   int line)
{
    AgentWatch w = 99;
    int32_t fd = 99;
    AgentStatus rc = agent_watch_open(loc, options, NULL, NULL, &w, &fd);
    check_(rc == want, __FILE__, line, "agent_watch_open(%s, %s) returned %s, expected %s (%s)",
           loc ? loc : "NULL", options ? options : "NULL", agent_status_name(rc),
           agent_status_name(want), agent_last_error());
    check_(w == 0 && fd == -1, __FILE__, line, "a failed open left out %llu, fd %d",
           (unsigned long long)w, (int)fd);
    CHECK_LAST_ERROR_FROM("agent_watch_open");
    if (rc == AGENT_OK) {
        agent_watch_close(w);
    }
}

#define CHECK_WATCH_OPEN_FAILS(want, loc, options) \
    check_watch_open_fails((want), (loc), (options), __LINE__)

void test_watch_refuses_bad_arguments_options_and_handles(void)
{
    int threads = count_threads();
    const char *loc = location("watch_bad.db");
    AgentHandle h = open_agent(loc, "wb_a");
    AgentWatch w = 0, unknown = 12345;
    AgentWatchEvent *e = (AgentWatchEvent *)&e;
    char long_id[400], options[600];
    CHECK_STATUS(AGENT_OK, set_s(h, "{}", NULL));

    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, NULL, NULL);
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, "", NULL);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_watch_open(loc, NULL, NULL, NULL, NULL, NULL));
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_JSON, loc, "{\"ids\":");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "[]");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"idz\":[]}");
    CHECK_LAST_ERROR_HAS("idz");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"ids\":[],\"prefix\":\"\"}");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"ids\":\"a\"}");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"ids\":[1]}");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"prefix\":7}");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"since\":{\"a\":-1}}");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"since\":[]}");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"states\":1}");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"max_pending\":0}");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"rescan_ms\":0}");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"watch_poll_ms\":-5}");
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, "{\"busy_timeout_ms\":\"x\"}");
    memset(long_id, 'i', 256);
    long_id[256] = 0;
    snprintf(options, sizeof options, "{\"ids\":[\"%s\"]}", long_id);
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, options);
    snprintf(options, sizeof options, "{\"prefix\":\"%s\"}", long_id);
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, loc, options);
    /* an in-memory store is its handle's alone; watching never creates a store */
    CHECK_WATCH_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, ":memory:", NULL);
    if (!g_pg) {
        CHECK_WATCH_OPEN_FAILS(AGENT_ERR_STORAGE, tmp_path("watch_nothing.db"), NULL);
        CHECK(!file_exists(tmp_path("watch_nothing.db")));
    }

    /* unknown handles */
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_watch_next(unknown, 0, &e));
    CHECK(e == NULL);
    CHECK_LAST_ERROR_FROM("agent_watch_next");
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_watch_next(0, 0, &e));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_watch_add(unknown, "a", -1));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_watch_remove(unknown, "a"));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_watch_close(unknown));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_watch_close(0));
    CHECK_LAST_ERROR_FROM("agent_watch_close");
    agent_watch_event_free(NULL); /* a no-op */

    /* bad arguments to a live watch */
    CHECK_STATUS(AGENT_OK, watch_open(loc, "{\"ids\":[\"%swb_a\"]}", NULL, NULL, &w, NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_watch_next(w, 0, NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_watch_next(w, -2, &e));
    CHECK(e == NULL);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_watch_add(w, NULL, -1));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_watch_add(w, "a", -2));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_watch_add(w, long_id, -1));
    CHECK_LAST_ERROR_FROM("agent_watch_add");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_watch_remove(w, NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_watch_add(w, "\xff", -1));
    check_nothing_queued(w);
    CHECK_STATUS(AGENT_OK, agent_watch_close(w));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_watch_next(w, 0, &e));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_watch_add(w, "a", -1));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    check_watchers_end(threads);
}

/* ------------------------------------------------------------------------------------------ */
/* Hooks pushed to (the open option "watch")                                                  */
/* ------------------------------------------------------------------------------------------ */

/* An on_state_changed hook that logs each delivery as "<version> <next>;" in a Collector. */
static int32_t push_hook(void *user_data, const AgentStateChange *change)
{
    Collector *c = user_data;
    size_t used;
    pthread_mutex_lock(&c->mu);
    used = strlen(c->log);
    snprintf(c->log + used, sizeof c->log - used, "%llu %.*s;",
             (unsigned long long)change->version, (int)change->next_len,
             (const char *)change->next);
    c->events++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

void test_watch_option_pushes_other_handles_and_processes_changes_to_the_hooks(void)
{
    int threads = count_threads();
    const char *loc = location("push.db");
    AgentHandle b = open_agent(loc, "psh_a"), a = 0, off = 0;
    char options[400], id[300];
    int go, status = 0;
    const struct write_step writes[] = {{0, "{\"n\":1}"}, {0, "{\"n\":2}"}, {0, "{\"n\":3}"}};
    pid_t writer;
    uint64_t hook = 0;
    Collector c;

    collector_init(&c);
    agent_name(id, sizeof id, "psh_a");
    CHECK_STATUS(AGENT_OK, set_s(b, "{\"from\":\"parent\"}", NULL));
    CHECK_STATUS(AGENT_OK, agent_close(b));
    /* The writer is forked before the pushes start (no watcher or worker thread to copy) and
     * with no handle open on the store (a child cannot use its parent's connection). */
    writer = fork_writer(loc, "psh_a", writes, sizeof writes / sizeof writes[0], &go);
    b = open_agent(loc, "psh_a");

    /* Without the change log the option is refused, and nothing is opened. */
    snprintf(options, sizeof options, "{\"agent_id\":\"%soff\",\"change_log\":false,"
             "\"watch\":true}", g_agent_prefix);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_open(loc, options, &off));
    CHECK(off == 0 && strstr(agent_last_error(), "change_log") != NULL);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_open(loc, "{\"watch\":1}", &off));

    snprintf(options, sizeof options,
             "{\"agent_id\":\"%s\",\"change_log\":{\"keep_last\":100},\"watch\":true}", id);
    CHECK_STATUS(AGENT_OK, agent_open(loc, options, &a));
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(a, push_hook, &c, NULL, &hook));

    /* Another handle's commit, then another process's: a's hook gets each, in order, without
     * agent_poll. */
    CHECK_STATUS(AGENT_OK, set_s(b, "{\"by\":\"handle\"}", NULL));
    collector_wait(&c, 1);
    release_writer(go);
    collector_wait(&c, 4);
    CHECK(writer > 0 && waitpid(writer, &status, 0) == writer);
    check_(WIFEXITED(status) && WEXITSTATUS(status) == 0, __FILE__, __LINE__,
           "the writer ended with status %d", status);
    /* a's own write is delivered once, when made */
    CHECK_STATUS(AGENT_OK, set_s(a, "{\"n\":4}", NULL));
    sleep_ms(300); /* time for a push that must not deliver anything twice */
    pthread_mutex_lock(&c.mu);
    CHECK_LOG(c.log, "2 {\"from\":\"parent\",\"by\":\"handle\"};"
                     "3 {\"from\":\"parent\",\"by\":\"handle\",\"n\":1};"
                     "4 {\"from\":\"parent\",\"by\":\"handle\",\"n\":2};"
                     "5 {\"from\":\"parent\",\"by\":\"handle\",\"n\":3};"
                     "6 {\"from\":\"parent\",\"by\":\"handle\",\"n\":4};");
    pthread_mutex_unlock(&c.mu);

    /* Closed: no more deliveries (the hook's data is the test's, still alive). */
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK_STATUS(AGENT_OK, set_s(b, "{\"n\":5}", NULL));
    sleep_ms(300);
    pthread_mutex_lock(&c.mu);
    CHECK(c.events == 5);
    pthread_mutex_unlock(&c.mu);
    CHECK_STATUS(AGENT_OK, agent_close(b));
    /* The store's watcher ends with the last push, the workers once idle. */
    check_watchers_end(threads);
    collector_destroy(&c);
}
