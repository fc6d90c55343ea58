/*
 * Cancelling one call: cancel tokens (agent_cancel_new, _bind, _fire, _free), a call waiting for
 * a lock that another handle's write holds, cancelled from another thread or by its deadline;
 * nothing written, the handles usable, other calls undisturbed. Both backends: the holder is a
 * write whose validator blocks (inside its transaction: SQLite's write lock, or, with a token
 * bound, PostgreSQL's row lock).
 */
#include <pthread.h>

#include "check.h"
#include "tests.h"

void test_cancel_tokens_refuse_bad_arguments_and_handles(void)
{
    AgentCancel t = 0;
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_cancel_new(-1, NULL));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_cancel_fire(0));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_cancel_free(0));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_cancel_fire(12345));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_cancel_bind(12345));
    CHECK_STATUS(AGENT_OK, agent_cancel_new(-1, &t));
    CHECK(t != 0);
    CHECK_STATUS(AGENT_OK, agent_cancel_fire(t));
    CHECK_STATUS(AGENT_OK, agent_cancel_fire(t)); /* twice: harmless */
    CHECK_STATUS(AGENT_OK, agent_cancel_free(t));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_cancel_free(t));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_cancel_bind(t));
    CHECK_STATUS(AGENT_OK, agent_cancel_bind(0));
}

void test_a_fired_token_fails_calls_at_once_and_unbinding_ends_it(void)
{
    AgentHandle h = open_store("cancel_now.db", NULL);
    AgentCancel t = 0;
    AgentBuffer out = { NULL, 0, NULL };
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"a\":1}", NULL));
    CHECK_STATUS(AGENT_OK, agent_cancel_new(0, &t)); /* deadline now: already due */
    CHECK_STATUS(AGENT_OK, agent_cancel_bind(t));
    CHECK_STATUS(AGENT_ERR_CANCELLED, set_s(h, "{\"a\":2}", &out));
    CHECK(out.data == NULL);
    CHECK_STATUS(AGENT_ERR_CANCELLED, agent_get_state(h, &out));
    CHECK(strstr(agent_last_error(), "cancelled") != NULL);
    CHECK_STATUS(AGENT_OK, agent_cancel_free(t)); /* still bound: the thread keeps honouring it */
    CHECK_STATUS(AGENT_ERR_CANCELLED, agent_get_state(h, &out));
    CHECK_STATUS(AGENT_OK, agent_cancel_bind(0));
    CHECK_STATE(h, "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* A validator that blocks until released: its write holds the lock meanwhile. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inside;
    int release;
} Holder;

static int32_t holding_validator(void *user_data, const AgentStateChange *c, AgentBuffer *message)
{
    Holder *g = user_data;
    (void)c;
    (void)message;
    pthread_mutex_lock(&g->mu);
    g->inside = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->release) {
        pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    return 0;
}

typedef struct {
    AgentHandle h;
    AgentStatus rc;
} HoldingWrite;

static void *holding_write(void *arg)
{
    HoldingWrite *w = arg;
    AgentCancel never = 0;
    /* A token that never fires: on PostgreSQL it makes the write take the row lock first. */
    agent_cancel_new(-1, &never);
    agent_cancel_bind(never);
    w->rc = set_s(w->h, "{\"holder\":1}", NULL);
    agent_cancel_bind(0);
    agent_cancel_free(never);
    return NULL;
}

typedef struct {
    AgentCancel token;
    long delay_ms;
} Firing;

static void *fire_later(void *arg)
{
    Firing *f = arg;
    sleep_ms(f->delay_ms);
    agent_cancel_fire(f->token);
    return NULL;
}

static void cancel_while_locked(int by_deadline)
{
    Holder g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
    HoldingWrite w;
    AgentHandle holder = open_store(by_deadline ? "cancel_deadline.db" : "cancel_lock.db",
                                    "{\"busy_timeout_ms\":30000}");
    AgentHandle h = open_store(by_deadline ? "cancel_deadline.db" : "cancel_lock.db",
                               "{\"busy_timeout_ms\":30000}");
    AgentCancel t = 0;
    pthread_t ht, ft;
    Firing f;
    AgentBuffer out = { NULL, 0, NULL };
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"n\":1}", NULL));
    CHECK_STATUS(AGENT_OK, agent_set_validator(holder, holding_validator, &g, NULL));
    w.h = holder;
    w.rc = -1;
    CHECK(pthread_create(&ht, NULL, holding_write, &w) == 0);
    pthread_mutex_lock(&g.mu);
    while (!g.inside) {
        pthread_cond_wait(&g.cv, &g.mu);
    }
    pthread_mutex_unlock(&g.mu);
    /* The holder's write is inside its transaction: this write waits for it. */
    CHECK_STATUS(AGENT_OK, agent_cancel_new(by_deadline ? 300 : -1, &t));
    f.token = t;
    f.delay_ms = 200;
    if (!by_deadline) {
        CHECK(pthread_create(&ft, NULL, fire_later, &f) == 0);
    }
    CHECK_STATUS(AGENT_OK, agent_cancel_bind(t));
    CHECK_STATUS(AGENT_ERR_CANCELLED, set_s(h, "{\"n\":2}", &out));
    CHECK_STATUS(AGENT_OK, agent_cancel_bind(0));
    CHECK(out.data == NULL);
    if (!by_deadline) {
        pthread_join(ft, NULL);
    }
    pthread_mutex_lock(&g.mu);
    g.release = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_join(ht, NULL);
    CHECK_STATUS(AGENT_OK, w.rc); /* the holder's call was not disturbed */
    /* Nothing of the cancelled write; the handle writes again. */
    CHECK_STATE(h, "{\"n\":1,\"holder\":1}");
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"n\":3}", NULL));
    CHECK_STATE(h, "{\"n\":3,\"holder\":1}");
    CHECK_STATUS(AGENT_OK, agent_cancel_free(t));
    CHECK_STATUS(AGENT_OK, agent_close(holder));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_a_write_waiting_for_a_lock_is_cancelled_from_another_thread(void)
{
    cancel_while_locked(0);
}

void test_a_write_waiting_for_a_lock_ends_at_its_tokens_deadline(void)
{
    cancel_while_locked(1);
}
