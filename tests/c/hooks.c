/*
 * The C suite (tests/c/main.c runs it): on_state_changed hooks. What they see, order,
 * removal, failures, nested writes, hooks that remove themselves or close their handle.
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* on_state_changed hooks                                                                     */
/* ------------------------------------------------------------------------------------------ */

void test_state_changed_hook_sees_next_prev_and_patch(void)
{
    AgentHandle h = open_store("hook_views.db", "{\"initial_state\":{\"i\":0}}");
    Recorder r;
    recorder_init(&r, NULL);
    add_recorder(h, &r);

    CHECK_SET(h, "{ \"a\" : 1 }", "{\"i\":0,\"a\":1}");
    CHECK(r.calls == 1);
    CHECK(r.prev && strcmp(r.prev, "{\"i\":0}") == 0); /* the initial state */
    CHECK(r.next && strcmp(r.next, "{\"i\":0,\"a\":1}") == 0);
    CHECK(r.patch && strcmp(r.patch, "{\"a\":1}") == 0); /* compact, as applied */

    CHECK_SET(h, "{\"i\":null,\"b\":{\"c\":[1,2]}}", "{\"a\":1,\"b\":{\"c\":[1,2]}}");
    CHECK(r.calls == 2);
    CHECK(r.prev && strcmp(r.prev, "{\"i\":0,\"a\":1}") == 0);
    CHECK(r.patch && strcmp(r.patch, "{\"i\":null,\"b\":{\"c\":[1,2]}}") == 0);

    CHECK_REPLACE(h, "{\"z\":1}", "{\"z\":1}");
    CHECK(r.calls == 3);
    CHECK(r.prev && strcmp(r.prev, "{\"a\":1,\"b\":{\"c\":[1,2]}}") == 0);
    CHECK(r.next && strcmp(r.next, "{\"z\":1}") == 0);
    CHECK(r.patch == NULL); /* NULL (and length 0) for a replacement */

    /* a write that changes nothing commits nothing: no delivery */
    CHECK_SET(h, "{}", "{\"z\":1}");
    CHECK_SET(h, "{\"z\":1,\"gone\":null}", "{\"z\":1}");
    CHECK_REPLACE(h, "{\"z\":1}", "{\"z\":1}");
    CHECK(r.calls == 3);

    /* refused inputs are no change: no delivery */
    CHECK_STATUS(AGENT_ERR_JSON, set_s(h, "{", NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, replace_s(h, "[]", NULL));
    CHECK(r.calls == 3);
    CHECK(r.bad_views == 0);
    CHECK(r.chain_breaks == 0);
    CHECK(r.freed == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(r.freed == 1);
    recorder_destroy(&r);
}

void test_state_changed_hooks_run_in_order_and_can_be_removed(void)
{
    AgentHandle h = open_store("hook_order.db", NULL);
    Recorder a, b, c;
    uint64_t ida, idb, idc;
    recorder_init(&a, "A");
    recorder_init(&b, "B");
    recorder_init(&c, "C");
    ida = add_recorder(h, &a);
    idb = add_recorder(h, &b);
    idc = add_recorder(h, &c);
    CHECK(ida != idb && idb != idc && ida != idc);

    g_log[0] = 0;
    CHECK_SET(h, "{\"n\":1}", "{\"n\":1}");
    CHECK(strcmp(g_log, "A:{\"n\":1};B:{\"n\":1};C:{\"n\":1};") == 0);

    CHECK_STATUS(AGENT_OK, agent_remove_hook(h, idb));
    CHECK(b.freed == 1); /* on removal, nothing running */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_remove_hook(h, idb)); /* removed already */
    CHECK_LAST_ERROR_FROM("agent_remove_hook");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_remove_hook(h, 987654321)); /* unknown id */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_remove_hook(h, 0));
    CHECK(b.freed == 1);

    g_log[0] = 0;
    CHECK_SET(h, "{\"n\":2}", "{\"n\":2}");
    CHECK(strcmp(g_log, "A:{\"n\":2};C:{\"n\":2};") == 0);
    CHECK(a.calls == 2 && b.calls == 1 && c.calls == 2);

    {
        /* a hook id belongs to its handle */
        AgentHandle other = open_at(":memory:", NULL);
        CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_remove_hook(other, ida));
        CHECK_STATUS(AGENT_OK, agent_close(other));
    }
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(a.freed == 1 && b.freed == 1 && c.freed == 1); /* on close, exactly once each */
    recorder_destroy(&a);
    recorder_destroy(&b);
    recorder_destroy(&c);
}

void test_failed_hook_registration_frees_user_data(void)
{
    AgentHandle h = open_at(":memory:", NULL);
    int freed = 0;
    uint64_t id = 5;
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_on_state_changed(h, NULL, &freed, count_free, &id));
    CHECK_LAST_ERROR_FROM("agent_on_state_changed");
    CHECK(freed == 1);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_on_state_changed(h, record_hook, &freed, count_free, NULL));
    CHECK(freed == 2);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(h, record_hook, NULL, NULL, &id)); /* NULL free ok */
    CHECK_STATUS(AGENT_OK, agent_remove_hook(h, id));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(freed == 2);
}

void test_failing_hook_returns_hook_status_and_change_stays(void)
{
    AgentHandle h = open_store("hook_fail.db", NULL);
    Recorder bad, good;
    AgentBuffer out = junk_buffer();
    uint64_t id;
    recorder_init(&bad, NULL);
    recorder_init(&good, NULL);
    id = add_recorder(h, &bad);
    add_recorder(h, &good);
    bad.rc = 3;

    CHECK_STATUS(AGENT_ERR_HOOK, set_s(h, "{\"a\":1}", &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_set_state");
    CHECK_STATE(h, "{\"a\":1}"); /* committed all the same */
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_HOOK, replace_s(h, "{\"b\":2}", &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_replace_state");
    CHECK_STATE(h, "{\"b\":2}");
    CHECK(bad.calls == 2);
    CHECK(good.calls == 2);
    CHECK(bad.chain_breaks == 0 && good.chain_breaks == 0);

    CHECK_STATUS(AGENT_OK, agent_remove_hook(h, id));
    CHECK_SET(h, "{\"c\":3}", "{\"b\":2,\"c\":3}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("hook_fail.db", NULL);
    CHECK_STATE(h, "{\"b\":2,\"c\":3}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(bad.freed == 1 && good.freed == 1);
    recorder_destroy(&bad);
    recorder_destroy(&good);
}

/* A hook that, on the first delivery, reads and writes its own handle. */
typedef struct {
    AgentHandle h;
    int calls;
    AgentStatus get_rc, set_rc, replace_rc;
    char *seen_inside;  /* get_state from inside the first delivery */
    char *set_result;   /* what the nested set_state returned */
    int freed;
} NestingHook;

static int32_t nesting_hook(void *user_data, const AgentStateChange *c)
{
    NestingHook *n = user_data;
    n->calls++;
    log_event("enter:%.*s|prev:%.*s;", (int)c->next_len, (const char *)c->next, (int)c->prev_len,
              (const char *)c->prev);
    if (n->calls == 1) {
        AgentBuffer b = { NULL, 0, NULL };
        n->get_rc = agent_get_state(n->h, &b);
        n->seen_inside = b.data ? dup_bytes(b.data, b.len) : NULL;
        agent_buffer_free(&b);
        n->set_rc = set_s(n->h, "{\"nested\":1}", &b);
        n->set_result = b.data ? dup_bytes(b.data, b.len) : NULL;
        agent_buffer_free(&b);
        n->replace_rc = replace_s(n->h, "{\"replaced\":2}", NULL);
        log_event("nested-done;");
    }
    log_event("exit;");
    return 0;
}

static void nesting_hook_free(void *user_data)
{
    ((NestingHook *)user_data)->freed++;
}

void test_hook_may_change_its_own_handle_and_nested_change_comes_after(void)
{
    NestingHook n;
    uint64_t id;
    memset(&n, 0, sizeof n);
    n.h = open_store("hook_nested.db", NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(n.h, nesting_hook, &n, nesting_hook_free, &id));
    g_log[0] = 0;
    {
        AgentBuffer out = { NULL, 0, NULL };
        CHECK_STATUS(AGENT_OK, set_s(n.h, "{\"start\":0}", &out));
        CHECK_BUF(out, "{\"start\":0}"); /* the outer call returns its own change */
        agent_buffer_free(&out);
    }
    CHECK_STATUS(AGENT_OK, n.get_rc);
    CHECK_STATUS(AGENT_OK, n.set_rc);
    CHECK_STATUS(AGENT_OK, n.replace_rc);
    CHECK(n.seen_inside && strcmp(n.seen_inside, "{\"start\":0}") == 0);
    CHECK(n.set_result && strcmp(n.set_result, "{\"start\":0,\"nested\":1}") == 0);
    /* the nested changes are delivered after the running hook returns, in commit order */
    check_(strcmp(g_log, "enter:{\"start\":0}|prev:{};nested-done;exit;"
                         "enter:{\"start\":0,\"nested\":1}|prev:{\"start\":0};exit;"
                         "enter:{\"replaced\":2}|prev:{\"start\":0,\"nested\":1};exit;") == 0,
           __FILE__, __LINE__, "delivery order was %s", g_log);
    CHECK(n.calls == 3);
    CHECK_STATE(n.h, "{\"replaced\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(n.h));
    CHECK(n.freed == 1);
    free(n.seen_inside);
    free(n.set_result);
}

/* A hook that removes itself, or closes its handle, from inside its own delivery. */
typedef struct {
    AgentHandle h;
    uint64_t id;
    int close_instead; /* 0: remove itself; 1: close the handle */
    int calls;
    int freed;
    int freed_while_running;
    AgentStatus rc, after_rc;
} SelfEndingHook;

static int32_t self_ending_hook(void *user_data, const AgentStateChange *c)
{
    SelfEndingHook *s = user_data;
    AgentBuffer b = junk_buffer();
    (void)c;
    s->calls++;
    s->rc = s->close_instead ? agent_close(s->h) : agent_remove_hook(s->h, s->id);
    s->freed_while_running = s->freed; /* its user_data is still in use: must not be freed yet */
    s->after_rc = s->close_instead ? agent_get_state(s->h, &b) : agent_remove_hook(s->h, s->id);
    agent_buffer_free(&b);
    return 0;
}

static void self_ending_free(void *user_data)
{
    ((SelfEndingHook *)user_data)->freed++;
}

void test_hook_may_remove_itself(void)
{
    SelfEndingHook s;
    Recorder later;
    memset(&s, 0, sizeof s);
    recorder_init(&later, NULL);
    s.h = open_store("hook_remove_self.db", NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(s.h, self_ending_hook, &s, self_ending_free, &s.id));
    add_recorder(s.h, &later);
    CHECK_SET(s.h, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, s.rc);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, s.after_rc);
    CHECK(s.freed_while_running == 0);
    CHECK(s.freed == 1);
    CHECK_SET(s.h, "{\"a\":2}", "{\"a\":2}");
    CHECK(s.calls == 1);
    CHECK(later.calls == 2);
    CHECK_STATUS(AGENT_OK, agent_close(s.h));
    CHECK(s.freed == 1 && later.freed == 1);
    recorder_destroy(&later);
}

void test_closing_handle_from_inside_its_own_hook(void)
{
    SelfEndingHook s;
    Recorder other;
    AgentBuffer out = { NULL, 0, NULL };
    AgentStatus rc;
    memset(&s, 0, sizeof s);
    recorder_init(&other, NULL);
    s.close_instead = 1;
    s.h = open_store("hook_close.db", NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(s.h, self_ending_hook, &s, self_ending_free, &s.id));
    add_recorder(s.h, &other);
    rc = set_s(s.h, "{\"a\":1}", &out);
    CHECK_STATUS(AGENT_OK, rc); /* the change committed and every hook returned 0 */
    if (rc == AGENT_OK) {
        CHECK_BUF(out, "{\"a\":1}");
    }
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, s.rc);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, s.after_rc);
    CHECK(s.freed_while_running == 0);
    CHECK(s.freed == 1);
    CHECK(other.freed == 1);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_close(s.h));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, set_s(s.h, "{\"a\":2}", NULL));
    recorder_destroy(&other);
    s.h = open_store("hook_close.db", NULL);
    CHECK_STATE(s.h, "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(s.h));
}

/* A hook that blocks inside its delivery until released, to act on its handle meanwhile. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int inside, release, freed;
    AgentHandle h;
    AgentStatus set_rc;
} BlockingHook;

static int32_t blocking_hook(void *user_data, const AgentStateChange *c)
{
    BlockingHook *b = user_data;
    (void)c;
    pthread_mutex_lock(&b->mu);
    b->inside = 1;
    pthread_cond_broadcast(&b->cond);
    while (!b->release) {
        pthread_cond_wait(&b->cond, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return 0;
}

static void blocking_hook_free(void *user_data)
{
    BlockingHook *b = user_data;
    pthread_mutex_lock(&b->mu);
    b->freed++;
    pthread_mutex_unlock(&b->mu);
}

static void *set_state_thread(void *arg)
{
    BlockingHook *b = arg;
    b->set_rc = set_s(b->h, "{\"a\":1}", NULL);
    return NULL;
}

/* Removing a hook (close_instead 0) or closing its handle (1) while another thread is inside
 * the hook returns at once; the hook's user_data is released only when that delivery ends. */
static void check_release_waits_for_running_delivery(int close_instead)
{
    BlockingHook b;
    pthread_t t;
    uint64_t id = 0;
    int freed_while_inside;
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cond, NULL);
    b.h = open_at(":memory:", NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(b.h, blocking_hook, &b, blocking_hook_free, &id));
    CHECK(pthread_create(&t, NULL, set_state_thread, &b) == 0);
    pthread_mutex_lock(&b.mu);
    while (!b.inside) {
        pthread_cond_wait(&b.cond, &b.mu);
    }
    pthread_mutex_unlock(&b.mu);

    if (close_instead) {
        AgentBuffer out = junk_buffer();
        CHECK_STATUS(AGENT_OK, agent_close(b.h));
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_state(b.h, &out));
        CHECK_EMPTY(out);
    } else {
        CHECK_STATUS(AGENT_OK, agent_remove_hook(b.h, id));
    }
    pthread_mutex_lock(&b.mu);
    freed_while_inside = b.freed;
    b.release = 1;
    pthread_cond_broadcast(&b.cond);
    pthread_mutex_unlock(&b.mu);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(freed_while_inside == 0);
    CHECK(b.freed == 1);
    CHECK_STATUS(AGENT_OK, b.set_rc);
    if (!close_instead) {
        CHECK_SET(b.h, "{\"b\":2}", "{\"a\":1,\"b\":2}"); /* no longer delivered: no blocking */
        CHECK_STATUS(AGENT_OK, agent_close(b.h));
        CHECK(b.freed == 1);
    }
    pthread_cond_destroy(&b.cond);
    pthread_mutex_destroy(&b.mu);
}

void test_remove_or_close_during_delivery_defers_free_until_it_ends(void)
{
    check_release_waits_for_running_delivery(0);
    check_release_waits_for_running_delivery(1);
}
