/*
 * The C suite (tests/c/main.c runs it): the initial-state hook (precedence, answers,
 * user_data, failures, re-entry) and SQLite's write lock held by another handle.
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Initial-state hook                                                                         */
/* ------------------------------------------------------------------------------------------ */

void test_initial_state_hook_takes_precedence_and_is_called_each_time(void)
{
    AgentHandle h = open_store("init_hook.db", "{\"initial_state\":{\"from\":\"option\"}}");
    InitHook ih;
    memset(&ih, 0, sizeof ih);
    ih.answer = "{\"from\":\"hook\",\"n\":{\"x\":1}}";
    ih.use_copy = 1;
    CHECK_STATE(h, "{\"from\":\"option\"}");
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &ih, init_hook_free));
    CHECK_STATE(h, "{\"from\":\"hook\",\"n\":{\"x\":1}}");
    CHECK_STATE(h, "{\"from\":\"hook\",\"n\":{\"x\":1}}");
    CHECK(ih.calls == 2); /* called every time a default is needed */

    /* the first write merges the hook's answer with the patch */
    CHECK_SET(h, "{\"n\":{\"y\":2}}", "{\"from\":\"hook\",\"n\":{\"x\":1,\"y\":2}}");
    CHECK(ih.calls == 3);
    CHECK_STATE(h, "{\"from\":\"hook\",\"n\":{\"x\":1,\"y\":2}}");
    CHECK(ih.calls == 3); /* something is stored now: no default needed */
    CHECK(ih.freed == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(ih.freed == 1); /* on close */
}

void test_initial_state_hook_can_answer_with_static_text(void)
{
    AgentHandle h = open_store("init_static.db", NULL);
    InitHook ih;
    memset(&ih, 0, sizeof ih);
    ih.answer = "{\"static\":true}";
    ih.use_copy = 0;
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &ih, NULL));
    CHECK_STATE(h, "{\"static\":true}");
    CHECK_SET(h, "{\"a\":1}", "{\"static\":true,\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_initial_state_hook_user_data_is_freed_exactly_once(void)
{
    AgentHandle h = open_store("init_free.db", "{\"initial_state\":{\"from\":\"option\"}}");
    InitHook first, second;
    int data_of_null_fn = 0;
    memset(&first, 0, sizeof first);
    memset(&second, 0, sizeof second);
    first.answer = "{\"from\":\"first\"}";
    first.use_copy = 1;
    second.answer = "{\"from\":\"second\"}";
    second.use_copy = 1;

    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &first, init_hook_free));
    CHECK_STATE(h, "{\"from\":\"first\"}");
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &second, init_hook_free));
    CHECK(first.freed == 1); /* replaced */
    CHECK_STATE(h, "{\"from\":\"second\"}");
    CHECK(first.calls == 1);
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, NULL, NULL, NULL));
    CHECK(second.freed == 1); /* removed */
    CHECK_STATE(h, "{\"from\":\"option\"}"); /* the option applies again */
    /* fn NULL with user_data: released right away */
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, NULL, &data_of_null_fn, count_free));
    CHECK(data_of_null_fn == 1);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(first.freed == 1 && second.freed == 1 && data_of_null_fn == 1);
}

void test_initial_state_hook_failures_are_reported(void)
{
    static const struct {
        const char *answer;
        int32_t rc;
        AgentStatus want;
    } k[] = {
        { "{\"a\":1}", 1, AGENT_ERR_HOOK },             /* non-zero return */
        { "{\"a\":1}", -7, AGENT_ERR_HOOK },
        { "[1]", 0, AGENT_ERR_INVALID_ARGUMENT },      /* not an object */
        { "\"x\"", 0, AGENT_ERR_INVALID_ARGUMENT },
        { "{\"a\":", 0, AGENT_ERR_JSON },              /* malformed JSON */
        { "{\"a\":\"\\ud800\"}", 0, AGENT_ERR_JSON },
        { "{\"a\":1,\"a\":2}", 0, AGENT_ERR_CODEC },     /* codec */
        { "{\"d\":{\"$date\":\"yesterday\"}}", 0, AGENT_ERR_CODEC },
        { "{\"s\":\"0123456789012345678901234567890123456789\"}", 0, AGENT_ERR_TOO_LARGE },
    };
    size_t i;
    for (i = 0; i < sizeof k / sizeof k[0]; i++) {
        AgentHandle h = open_store("init_fail.db", "{\"max_value_bytes\":32}");
        InitHook ih;
        AgentBuffer out = junk_buffer();
        memset(&ih, 0, sizeof ih);
        ih.answer = k[i].answer;
        ih.use_copy = (int)(i % 2);
        ih.rc = k[i].rc;
        CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &ih, init_hook_free));
        check_status_(agent_get_state(h, &out), k[i].want, __FILE__, __LINE__, k[i].answer);
        CHECK_EMPTY(out);
        CHECK_LAST_ERROR_FROM("agent_get_state");
        out = junk_buffer();
        check_status_(set_s(h, "{\"b\":2}", &out), k[i].want, __FILE__, __LINE__, k[i].answer);
        CHECK_EMPTY(out);
        CHECK_LAST_ERROR_FROM("agent_set_state");
        CHECK(ih.calls == 2);
        /* nothing was written: without the hook the store still shows the option's default */
        CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, NULL, NULL, NULL));
        CHECK(ih.freed == 1);
        CHECK_STATE(h, "{}");
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
    {
        /* a hook that returns 0 but leaves *out empty gave no state: the call fails */
        AgentHandle h = open_store("init_fail.db", NULL);
        InitHook ih;
        AgentBuffer out = junk_buffer();
        memset(&ih, 0, sizeof ih);
        CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(h, init_hook, &ih, NULL));
        CHECK(agent_get_state(h, &out) != AGENT_OK);
        CHECK_EMPTY(out);
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
}

/* An initial-state hook that calls into its own handle (must be refused with BUSY) and into
 * another handle (allowed). */
typedef struct {
    AgentHandle self;
    AgentHandle other;
    AgentStatus got[7];
    int empty_outs;
    int errors_named;
    int freed_inside;
    AgentStatus other_rc;
} ReentryProbe;

static int32_t reentering_init_hook(void *user_data, AgentBuffer *out)
{
    ReentryProbe *p = user_data;
    AgentBuffer b = junk_buffer();
    uint64_t id = 0;
    p->got[0] = agent_get_state(p->self, &b);
    p->empty_outs += buf_is_empty(&b);
    p->errors_named += strncmp(agent_last_error(), "agent_get_state: ", 17) == 0;
    b = junk_buffer();
    p->got[1] = set_s(p->self, "{\"x\":1}", &b);
    p->empty_outs += buf_is_empty(&b);
    p->errors_named += strncmp(agent_last_error(), "agent_set_state: ", 17) == 0;
    b = junk_buffer();
    p->got[2] = replace_s(p->self, "{\"x\":1}", &b);
    p->empty_outs += buf_is_empty(&b);
    p->errors_named += strncmp(agent_last_error(), "agent_replace_state: ", 21) == 0;
    p->got[3] = agent_close(p->self);
    p->errors_named += strncmp(agent_last_error(), "agent_close: ", 13) == 0;
    p->got[4] = agent_on_state_changed(p->self, record_hook, &p->freed_inside, count_free, &id);
    p->got[5] = agent_set_initial_state_hook(p->self, init_hook, &p->freed_inside, count_free);
    p->got[6] = agent_remove_hook(p->self, 1);
    b.data = NULL;
    b.len = 0;
    b.owner = NULL;
    p->other_rc = agent_get_state(p->other, &b);
    agent_buffer_free(&b);
    return agent_buffer_copy((const uint8_t *)"{\"init\":1}", 10, out);
}

void test_own_handle_from_initial_state_hook_is_busy(void)
{
    ReentryProbe p;
    int i;
    memset(&p, 0, sizeof p);
    p.self = open_store("reentry.db", NULL);
    p.other = open_at(":memory:", NULL);
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(p.self, reentering_init_hook, &p, NULL));
    CHECK_STATE(p.self, "{\"init\":1}");
    for (i = 0; i < 7; i++) {
        check_(p.got[i] == AGENT_ERR_BUSY, __FILE__, __LINE__,
               "call %d into its own handle from the initial-state hook returned %s, expected AGENT_ERR_BUSY",
               i, agent_status_name(p.got[i]));
    }
    CHECK(p.empty_outs == 3);
    CHECK(p.errors_named == 4);
    CHECK(p.freed_inside == 2); /* both refused registrations released their user_data */
    CHECK_STATUS(AGENT_OK, p.other_rc);
    /* the handle is still usable and still open */
    CHECK_SET(p.self, "{\"y\":2}", "{\"init\":1,\"y\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(p.self));
    CHECK_STATUS(AGENT_OK, agent_close(p.other));
}

/* While the first write on a fresh agent asks its initial-state hook for the default, that
 * write's transaction holds the store's write lock: a second handle on the same file, with a
 * short busy timeout, cannot write and gets AGENT_ERR_BUSY. */
typedef struct {
    AgentHandle other;
    AgentStatus write_rc;
    AgentStatus read_rc;
    int error_named;
    int out_empty;
} LockProbe;

static int32_t write_other_handle_hook(void *user_data, AgentBuffer *out)
{
    LockProbe *p = user_data;
    AgentBuffer b = junk_buffer();
    p->write_rc = set_s(p->other, "{\"other\":1}", &b);
    p->error_named = strncmp(agent_last_error(), "agent_set_state: ", 17) == 0;
    p->out_empty = buf_is_empty(&b);
    agent_buffer_free(&b);
    p->read_rc = agent_get_state(p->other, &b); /* WAL: readers are not blocked */
    agent_buffer_free(&b);
    out->data = (const uint8_t *)"{\"init\":true}";
    out->len = 13;
    return 0;
}

void test_write_lock_held_by_another_handle_gives_busy(void)
{
    AgentHandle a = open_store("lock.db", NULL);
    LockProbe p;
    memset(&p, 0, sizeof p);
    p.other = open_store("lock.db", "{\"busy_timeout_ms\":50}");
    CHECK_STATUS(AGENT_OK, agent_set_initial_state_hook(a, write_other_handle_hook, &p, NULL));
    CHECK_SET(a, "{\"a\":1}", "{\"init\":true,\"a\":1}");
    CHECK_STATUS(AGENT_ERR_BUSY, p.write_rc);
    CHECK(p.error_named);
    CHECK(p.out_empty);
    CHECK_STATUS(AGENT_OK, p.read_rc);
    CHECK_STATE(p.other, "{\"init\":true,\"a\":1}"); /* its refused write left no trace */
    CHECK_SET(p.other, "{\"other\":2}", "{\"init\":true,\"a\":1,\"other\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK_STATUS(AGENT_OK, agent_close(p.other));
}
