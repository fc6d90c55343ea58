/*
 * The C suite (tests/c/main.c runs it): threads sharing one handle (no lost updates,
 * commit order of nested writes, closing while others write).
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Threads                                                                                    */
/* ------------------------------------------------------------------------------------------ */

#define MAX_WRITERS 8

typedef struct {
    AgentHandle h;
    int index;
    int count;
    int failures;
} Writer;

/* Writes {"t<i>": n} for n = 1..count; each returned state must show its own latest value. */
static void *writer_thread(void *arg)
{
    Writer *w = arg;
    char key[16], patch[64];
    int n;
    snprintf(key, sizeof key, "t%d", w->index);
    for (n = 1; n <= w->count; n++) {
        AgentBuffer out = { NULL, 0, NULL };
        snprintf(patch, sizeof patch, "{\"%s\":%d}", key, n);
        if (set_s(w->h, patch, &out) != AGENT_OK ||
            member_int((const char *)out.data, out.len, key) != n || out.data[out.len] != 0) {
            w->failures++;
        }
        agent_buffer_free(&out);
    }
    return NULL;
}

typedef struct {
    AgentHandle h;
    int writers;
    volatile int *stop; /* read under g_stop_mu */
    int reads;
    int regressions; /* a key's value went down between two reads */
    int failures;
} Reader;

static pthread_mutex_t g_stop_mu = PTHREAD_MUTEX_INITIALIZER;

static int should_stop(volatile int *stop)
{
    int s;
    pthread_mutex_lock(&g_stop_mu);
    s = *stop;
    pthread_mutex_unlock(&g_stop_mu);
    return s;
}

static void *reader_thread(void *arg)
{
    Reader *r = arg;
    long last[MAX_WRITERS] = { 0 };
    do {
        AgentBuffer b = { NULL, 0, NULL };
        int i;
        if (agent_get_state(r->h, &b) != AGENT_OK) {
            r->failures++;
        } else {
            for (i = 0; i < r->writers; i++) {
                char key[16];
                long v;
                snprintf(key, sizeof key, "t%d", i);
                v = member_int((const char *)b.data, b.len, key);
                if (v < last[i]) {
                    r->regressions++;
                }
                last[i] = v;
            }
        }
        agent_buffer_free(&b);
        r->reads++;
    } while (!should_stop(r->stop));
    return NULL;
}

void test_threads_share_one_handle_without_lost_updates(void)
{
    int writers = g_quick ? 4 : MAX_WRITERS;
    int count = g_quick ? 40 : 200;
    AgentHandle h = open_store("threads.db", "{\"synchronous\":\"normal\"}");
    Writer w[MAX_WRITERS];
    Reader rd[2];
    pthread_t wt[MAX_WRITERS], rt[2];
    volatile int stop = 0;
    Recorder rec;
    char expected[256];
    size_t n = 0;
    int i;

    recorder_init(&rec, NULL);
    add_recorder(h, &rec);
    for (i = 0; i < 2; i++) {
        memset(&rd[i], 0, sizeof rd[i]);
        rd[i].h = h;
        rd[i].writers = writers;
        rd[i].stop = &stop;
        CHECK(pthread_create(&rt[i], NULL, reader_thread, &rd[i]) == 0);
    }
    for (i = 0; i < writers; i++) {
        w[i].h = h;
        w[i].index = i;
        w[i].count = count;
        w[i].failures = 0;
        CHECK(pthread_create(&wt[i], NULL, writer_thread, &w[i]) == 0);
    }
    for (i = 0; i < writers; i++) {
        CHECK(pthread_join(wt[i], NULL) == 0);
        CHECK(w[i].failures == 0);
    }
    pthread_mutex_lock(&g_stop_mu);
    stop = 1;
    pthread_mutex_unlock(&g_stop_mu);
    for (i = 0; i < 2; i++) {
        CHECK(pthread_join(rt[i], NULL) == 0);
        CHECK(rd[i].failures == 0);
        CHECK(rd[i].regressions == 0);
        CHECK(rd[i].reads > 0);
    }

    /* every commit delivered once, each prev equal to the previous next */
    check_(rec.calls == writers * count, __FILE__, __LINE__, "%d deliveries for %d commits",
           rec.calls, writers * count);
    CHECK(rec.chain_breaks == 0);
    CHECK(rec.bad_views == 0);
    CHECK(rec.prev != NULL && strcmp(rec.prev, "{}") != 0);
    {
        char *final_state = state_copy(h);
        CHECK(final_state != NULL && rec.next != NULL && strcmp(final_state, rec.next) == 0);
        for (i = 0; final_state != NULL && i < writers; i++) {
            char key[16];
            snprintf(key, sizeof key, "t%d", i);
            check_(member_int(final_state, strlen(final_state), key) == count, __FILE__, __LINE__,
                   "%s is %ld after %d writes: %s", key,
                   member_int(final_state, strlen(final_state), key), count, final_state);
        }
        /* one member per writer and nothing else (their order is that of first commits) */
        for (i = 0; i < writers; i++) {
            n += (size_t)snprintf(expected + n, sizeof expected - n, "%s\"t%d\":%d",
                                  i ? "," : "{", i, count);
        }
        snprintf(expected + n, sizeof expected - n, "}");
        CHECK(final_state != NULL && strlen(final_state) == strlen(expected));
        free(final_state);
    }
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(rec.freed == 1);
    recorder_destroy(&rec);
}

/* A hook that, on every 5th delivery, writes {"nested": <delivery number>} to its own handle
 * (then checks the chain like record_hook). */
typedef struct {
    Recorder rec;
    AgentHandle h;
    int nested_failures;
} NestingRecorder;

static int32_t nesting_record_hook(void *user_data, const AgentStateChange *c)
{
    NestingRecorder *n = user_data;
    int calls;
    record_hook(&n->rec, c);
    pthread_mutex_lock(&n->rec.mu);
    calls = n->rec.calls;
    pthread_mutex_unlock(&n->rec.mu);
    if (calls % 5 == 0) {
        char patch[48];
        snprintf(patch, sizeof patch, "{\"nested\":%d}", calls);
        if (set_s(n->h, patch, NULL) != AGENT_OK) {
            pthread_mutex_lock(&n->rec.mu);
            n->nested_failures++;
            pthread_mutex_unlock(&n->rec.mu);
        }
    }
    return 0;
}

void test_nested_writes_from_hooks_keep_commit_order_across_threads(void)
{
    int writers = 4;
    int count = g_quick ? 25 : 150;
    NestingRecorder n;
    Writer w[4];
    pthread_t t[4];
    uint64_t id = 0;
    int i, total, pending;
    recorder_init(&n.rec, NULL);
    n.nested_failures = 0;
    n.h = open_store("nested_threads.db", "{\"synchronous\":\"normal\"}");
    /* recorder_free gets &n, whose first member is the Recorder */
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(n.h, nesting_record_hook, &n, recorder_free, &id));
    for (i = 0; i < writers; i++) {
        w[i].h = n.h;
        w[i].index = i;
        w[i].count = count;
        w[i].failures = 0;
        CHECK(pthread_create(&t[i], NULL, writer_thread, &w[i]) == 0);
    }
    for (i = 0; i < writers; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(w[i].failures == 0);
    }
    /* one delivery per write; every 5th delivery makes one more write */
    total = 0;
    for (pending = writers * count; pending > 0; pending--) {
        total++;
        pending += total % 5 == 0;
    }
    CHECK(n.nested_failures == 0);
    check_(n.rec.calls == total, __FILE__, __LINE__, "%d deliveries, expected %d", n.rec.calls, total);
    CHECK(n.rec.chain_breaks == 0);
    CHECK(n.rec.bad_views == 0);
    {
        char *final_state = state_copy(n.h);
        CHECK(final_state != NULL && n.rec.next != NULL && strcmp(final_state, n.rec.next) == 0);
        free(final_state);
    }
    CHECK_STATUS(AGENT_OK, agent_close(n.h));
    CHECK(n.rec.freed == 1);
    recorder_destroy(&n.rec);
}

typedef struct {
    AgentHandle h;
    int ok, bad_handle, other, after_close_ok;
    volatile int *closed; /* set (under g_stop_mu) once agent_close returned */
} CloseRacer;

static void *close_racer_thread(void *arg)
{
    CloseRacer *c = arg;
    int i;
    for (i = 0; i < 1000000; i++) {
        int closed_before = should_stop(c->closed);
        AgentBuffer out = { NULL, 0, NULL };
        AgentStatus rc = i % 2 ? agent_get_state(c->h, &out) : set_s(c->h, "{\"a\":1}", &out);
        agent_buffer_free(&out);
        if (rc == AGENT_OK) {
            c->ok++;
            c->after_close_ok += closed_before;
        } else if (rc == AGENT_ERR_BAD_HANDLE) {
            c->bad_handle++;
            break;
        } else {
            c->other++;
        }
    }
    return NULL;
}

void test_close_while_other_threads_write(void)
{
    AgentHandle h = open_store("close_race.db", "{\"synchronous\":\"normal\"}");
    CloseRacer c[3];
    pthread_t t[3];
    Recorder rec;
    volatile int closed = 0;
    int i;
    recorder_init(&rec, NULL);
    add_recorder(h, &rec);
    for (i = 0; i < 3; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].h = h;
        c[i].closed = &closed;
        CHECK(pthread_create(&t[i], NULL, close_racer_thread, &c[i]) == 0);
    }
    sleep_ms(g_quick ? 200 : 50);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    pthread_mutex_lock(&g_stop_mu);
    closed = 1;
    pthread_mutex_unlock(&g_stop_mu);
    for (i = 0; i < 3; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(c[i].other == 0);        /* only OK or AGENT_ERR_BAD_HANDLE */
        CHECK(c[i].bad_handle == 1);   /* every thread saw the close */
        CHECK(c[i].after_close_ok == 0);
    }
    CHECK(rec.freed == 1);
    CHECK(rec.chain_breaks == 0);
    recorder_destroy(&rec);
}
