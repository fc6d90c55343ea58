/*
 * The C suite (tests/c/main.c runs it): the ABI's ground rules. Version and status names,
 * the per-thread last error, agent_open's refusals, bad and stale handles, buffer ownership.
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Status codes, version, errors                                                              */
/* ------------------------------------------------------------------------------------------ */

void test_version_and_status_names(void)
{
    static const struct {
        AgentStatus code;
        int value;
        const char *name;
    } k[] = {
        { AGENT_OK, 0, "AGENT_OK" },
        { AGENT_ERR_INVALID_ARGUMENT, 1, "AGENT_ERR_INVALID_ARGUMENT" },
        { AGENT_ERR_BAD_HANDLE, 2, "AGENT_ERR_BAD_HANDLE" },
        { AGENT_ERR_JSON, 3, "AGENT_ERR_JSON" },
        { AGENT_ERR_CODEC, 4, "AGENT_ERR_CODEC" },
        { AGENT_ERR_TOO_LARGE, 5, "AGENT_ERR_TOO_LARGE" },
        { AGENT_ERR_STORAGE, 6, "AGENT_ERR_STORAGE" },
        { AGENT_ERR_BUSY, 7, "AGENT_ERR_BUSY" },
        { AGENT_ERR_HOOK, 8, "AGENT_ERR_HOOK" },
        { AGENT_ERR_CONFLICT, 9, "AGENT_ERR_CONFLICT" },
        { AGENT_ERR_REJECTED, 10, "AGENT_ERR_REJECTED" },
        { AGENT_ERR_GAP, 11, "AGENT_ERR_GAP" },
        { AGENT_ERR_UNAVAILABLE, 12, "AGENT_ERR_UNAVAILABLE" },
        { AGENT_ERR_AUTH, 13, "AGENT_ERR_AUTH" },
        { AGENT_ERR_CANCELLED, 14, "AGENT_ERR_CANCELLED" },
        { AGENT_ERR_NEWER_SCHEMA, 15, "AGENT_ERR_NEWER_SCHEMA" },
        { AGENT_ERR_MIGRATION, 16, "AGENT_ERR_MIGRATION" },
        { AGENT_ERR_PATH, 17, "AGENT_ERR_PATH" },
        { AGENT_ERR_TEST_FAILED, 18, "AGENT_ERR_TEST_FAILED" },
        { AGENT_ERR_PANIC, 99, "AGENT_ERR_PANIC" },
    };
    size_t i;
    char numbers[64];
    const char *v = agent_version();
    CHECK(v != NULL && strlen(v) > 0);
    /* The header's version macros describe the library it ships with. */
    check_(strcmp(v, AGENT_STATE_VERSION) == 0, __FILE__, __LINE__,
           "agent_version() is %s, the header's AGENT_STATE_VERSION %s", v, AGENT_STATE_VERSION);
    snprintf(numbers, sizeof numbers, "%d.%d.%d", AGENT_STATE_VERSION_MAJOR,
             AGENT_STATE_VERSION_MINOR, AGENT_STATE_VERSION_PATCH);
    CHECK(strcmp(numbers, AGENT_STATE_VERSION) == 0);
    for (i = 0; i < sizeof k / sizeof k[0]; i++) {
        CHECK(k[i].code == k[i].value);
        check_(strcmp(agent_status_name(k[i].code), k[i].name) == 0, __FILE__, __LINE__,
               "agent_status_name(%d) is %s, expected %s", k[i].value,
               agent_status_name(k[i].code), k[i].name);
    }
    CHECK(strcmp(agent_status_name(-1), "AGENT_ERR_UNKNOWN") == 0);
    CHECK(strcmp(agent_status_name(19), "AGENT_ERR_UNKNOWN") == 0);
    CHECK(strcmp(agent_status_name(100), "AGENT_ERR_UNKNOWN") == 0);
}

static void *fresh_thread_reads_last_error(void *arg)
{
    const char *msg = agent_last_error();
    AgentBuffer b = { NULL, 0, NULL };
    *(int *)arg = msg != NULL && msg[0] == 0;
    /* A failure on this thread must not touch the main thread's message. */
    if (agent_get_state(0, &b) != AGENT_ERR_BAD_HANDLE) {
        *(int *)arg = 0;
    }
    if (strncmp(agent_last_error(), "agent_get_state: ", 17) != 0) {
        *(int *)arg = 0;
    }
    return NULL;
}

void test_last_error_is_per_thread_and_kept_by_successes(void)
{
    pthread_t t;
    int fresh_ok = 0;
    AgentHandle h;
    AgentBuffer b = { NULL, 0, NULL };

    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_close(0));
    CHECK_LAST_ERROR_FROM("agent_close");
    CHECK(pthread_create(&t, NULL, fresh_thread_reads_last_error, &fresh_ok) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(fresh_ok); /* "" on a new thread, its own message after its own failure */
    CHECK_LAST_ERROR_FROM("agent_close"); /* the other thread's failure did not replace ours */

    h = open_at(":memory:", NULL);
    CHECK_STATUS(AGENT_OK, agent_get_state(h, &b));
    agent_buffer_free(&b);
    CHECK_LAST_ERROR_FROM("agent_close"); /* successful calls do not clear it */
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* ------------------------------------------------------------------------------------------ */
/* agent_open                                                                                 */
/* ------------------------------------------------------------------------------------------ */

void test_open_refuses_bad_arguments_and_options(void)
{
    const char *p = tmp_path("options.db");
    AgentHandle h;

    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, NULL, NULL);
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, "", NULL);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_open(p, NULL, NULL));
    CHECK_LAST_ERROR_FROM("agent_open");

    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"nope\":1}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"initialState\":{}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"max_value_bytes\":\"big\"}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"max_value_bytes\":-1}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"max_value_bytes\":1.5}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"synchronous\":\"sometimes\"}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"busy_timeout_ms\":-5}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"read_only\":\"yes\"}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"initial_state\":[1]}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"initial_state\":\"x\"}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "[]");
    CHECK_OPEN_FAILS(AGENT_ERR_JSON, p, "{\"max_value_bytes\":");
    CHECK_OPEN_FAILS(AGENT_ERR_JSON, p, "{\"initial_state\":{\"s\":\"\\ud800\"}}");
    CHECK_OPEN_FAILS(AGENT_ERR_CODEC, p, "{\"initial_state\":{\"a\":1,\"a\":2}}");
    CHECK_OPEN_FAILS(AGENT_ERR_CODEC, p, "{\"initial_state\":{\"n\":1e400}}");
    CHECK_OPEN_FAILS(AGENT_ERR_TOO_LARGE, p,
                     "{\"max_value_bytes\":16,\"initial_state\":{\"s\":\"0123456789abcdef\"}}");

    /* Every documented option, well-typed, is accepted. */
    h = open_at(p, "{\"initial_state\":{},\"max_value_bytes\":2,\"synchronous\":\"normal\","
                   "\"busy_timeout_ms\":0,\"read_only\":false}");
    CHECK_STATE(h, "{}");
    CHECK_REJECTED_S(h, AGENT_ERR_TOO_LARGE, "{\"a\":1}"); /* 7 bytes > max_value_bytes 2 */
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, "{\"synchronous\":\"full\",\"read_only\":true}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* Every function of versions, compare-and-set, the gate and the change log refuses handle
 * `h` with AGENT_ERR_BAD_HANDLE, leaves its output buffer empty, and releases a gate's
 * user_data right away. */
static void check_bad_handle_for_history_functions(AgentHandle h)
{
    AgentBuffer out = junk_buffer();
    uint64_t version = 77;
    size_t delivered = 77;
    int gate_freed = 0;

    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_state_versioned(h, &out, &version));
    CHECK_LAST_ERROR_FROM("agent_get_state_versioned");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE,
                 agent_set_state_if(h, 0, (const uint8_t *)"{}", 2, &out, &version));
    CHECK_LAST_ERROR_FROM("agent_set_state_if");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE,
                 agent_replace_state_if(h, 0, (const uint8_t *)"{}", 2, &out, &version));
    CHECK_LAST_ERROR_FROM("agent_replace_state_if");
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_poll(h, &delivered));
    CHECK_LAST_ERROR_FROM("agent_poll");
    CHECK(delivered == 0);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_changes_since(h, 0, &out));
    CHECK_LAST_ERROR_FROM("agent_changes_since");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_state_at(h, 0, &out));
    CHECK_LAST_ERROR_FROM("agent_get_state_at");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_restore_state(h, 0, &out, &version));
    CHECK_LAST_ERROR_FROM("agent_restore_state");
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_set_validator(h, NULL, &gate_freed, count_free));
    CHECK_LAST_ERROR_FROM("agent_set_validator");
    CHECK(gate_freed == 1);
    {
        Gate g;
        gate_init(&g, NULL, NULL, 1);
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_set_validator(h, gate_fn, &g, gate_free));
        CHECK_LAST_ERROR_FROM("agent_set_validator");
        CHECK(g.freed == 1 && g.calls == 0); /* released right away, never called */
        gate_destroy(&g);
    }
}

void test_bad_handles_are_refused_by_every_function(void)
{
    AgentHandle closed = open_at(":memory:", NULL);
    AgentHandle live = open_at(":memory:", NULL);
    AgentHandle bad[4];
    size_t i;

    CHECK_STATUS(AGENT_OK, agent_close(closed));
    bad[0] = 0;
    bad[1] = 12345;
    bad[2] = closed;
    bad[3] = live + 1000; /* a forged neighbour of a live handle */

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AgentHandle h = bad[i];
        AgentBuffer out = junk_buffer();
        uint64_t id = 5;
        int freed = 0, init_freed = 0;

        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_state(h, &out));
        CHECK_LAST_ERROR_FROM("agent_get_state");
        CHECK_EMPTY(out);
        out = junk_buffer();
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, set_s(h, "{\"a\":1}", &out));
        CHECK_LAST_ERROR_FROM("agent_set_state");
        CHECK_EMPTY(out);
        out = junk_buffer();
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, replace_s(h, "{\"a\":1}", &out));
        CHECK_LAST_ERROR_FROM("agent_replace_state");
        CHECK_EMPTY(out);
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_close(h));
        CHECK_LAST_ERROR_FROM("agent_close");
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE,
                     agent_on_state_changed(h, record_hook, &freed, count_free, &id));
        CHECK_LAST_ERROR_FROM("agent_on_state_changed");
        CHECK(freed == 1); /* a failed registration releases user_data right away */
        CHECK(id == 0);
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_remove_hook(h, 1));
        CHECK_LAST_ERROR_FROM("agent_remove_hook");
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE,
                     agent_set_initial_state_hook(h, init_hook, &init_freed, count_free));
        CHECK_LAST_ERROR_FROM("agent_set_initial_state_hook");
        CHECK(init_freed == 1);
        check_bad_handle_for_history_functions(h);
        out = junk_buffer();
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_patch_state(h, (const uint8_t *)"[]", 2, &out));
        CHECK_LAST_ERROR_FROM("agent_patch_state");
        CHECK_EMPTY(out);
        out = junk_buffer();
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE,
                     agent_patch_state_if(h, 0, (const uint8_t *)"[]", 2, &out, NULL));
        CHECK_LAST_ERROR_FROM("agent_patch_state_if");
        CHECK_EMPTY(out);
        out = junk_buffer();
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_path(h, "", 0, &out));
        CHECK_LAST_ERROR_FROM("agent_get_path");
        CHECK_EMPTY(out);
        out = junk_buffer();
        CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_tail(h, "/a", 2, 1, &out));
        CHECK_LAST_ERROR_FROM("agent_get_tail");
        CHECK_EMPTY(out);
    }
    CHECK_STATE(live, "{}"); /* the live neighbour is untouched */
    CHECK_STATUS(AGENT_OK, agent_close(live));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_close(live)); /* double close */
    CHECK_LAST_ERROR_FROM("agent_close");
}

void test_handles_are_never_reused(void)
{
    AgentHandle a = open_at(":memory:", NULL);
    AgentHandle b;
    CHECK_STATUS(AGENT_OK, agent_close(a));
    b = open_at(":memory:", NULL);
    CHECK(a != 0 && b != 0 && a != b);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_close(a));
    CHECK_STATUS(AGENT_OK, agent_close(b));
}

/* ------------------------------------------------------------------------------------------ */
/* Buffers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

void test_buffers_are_owned_nul_terminated_and_safe_to_free_twice(void)
{
    AgentHandle h = open_store("buffers.db", NULL);
    AgentBuffer early = { NULL, 0, NULL }, copy = { NULL, 0, NULL }, empty = { NULL, 0, NULL };
    static const uint8_t with_nul[3] = { 'a', 0, 'b' };

    agent_buffer_free(NULL);
    agent_buffer_free(&empty);
    CHECK_EMPTY(empty);

    CHECK_SET(h, "{\"v\":1}", "{\"v\":1}");
    CHECK_STATUS(AGENT_OK, agent_get_state(h, &early));
    CHECK_SET(h, "{\"v\":2}", "{\"v\":2}");
    CHECK_BUF(early, "{\"v\":1}"); /* a held view never changes */
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK_BUF(early, "{\"v\":1}"); /* ...even after close */
    agent_buffer_free(&early);
    CHECK_EMPTY(early);
    agent_buffer_free(&early); /* double free is harmless */
    CHECK_EMPTY(early);

    CHECK_STATUS(AGENT_OK, agent_buffer_copy(with_nul, 3, &copy));
    CHECK(copy.data != NULL && copy.len == 3 && copy.data != with_nul &&
          memcmp(copy.data, with_nul, 3) == 0 && copy.data[3] == 0);
    agent_buffer_free(&copy);
    agent_buffer_free(&copy);
    CHECK_EMPTY(copy);
    CHECK_STATUS(AGENT_OK, agent_buffer_copy(NULL, 0, &copy));
    CHECK(copy.len == 0);
    agent_buffer_free(&copy);
    CHECK_EMPTY(copy);
    copy = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_buffer_copy(NULL, 1, &copy));
    CHECK_LAST_ERROR_FROM("agent_buffer_copy");
    CHECK_EMPTY(copy);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_buffer_copy(with_nul, 3, NULL));
}

static void *read_and_free_buffer(void *arg)
{
    AgentBuffer *b = arg;
    int ok = buf_is(b, "{\"from\":\"main\"}");
    agent_buffer_free(b);
    return ok ? arg : NULL;
}

void test_buffer_may_be_read_and_freed_on_another_thread(void)
{
    AgentHandle h = open_at(":memory:", NULL);
    AgentBuffer b = { NULL, 0, NULL };
    pthread_t t;
    void *result = NULL;
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"from\":\"main\"}", &b));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(pthread_create(&t, NULL, read_and_free_buffer, &b) == 0);
    CHECK(pthread_join(t, &result) == 0);
    CHECK(result == &b);
    CHECK_EMPTY(b);
}
