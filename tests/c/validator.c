/*
 * The C suite (tests/c/main.c runs it): the validation gate (agent_set_validator).
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Validation gate                                                                            */
/* ------------------------------------------------------------------------------------------ */

void test_validator_rejects_with_its_message_and_nothing_is_written(void)
{
    AgentHandle h = open_store("gate.db", NULL);
    Recorder r;
    Gate g;
    AgentBuffer out = junk_buffer();
    char *before;
    recorder_init(&r, NULL);
    add_recorder(h, &r);
    gate_init(&g, "\"balance\":-", "balance would go negative: \xc3\xa9 \"quoted\"", 3);
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g, gate_free));
    CHECK_SET(h, "{\"balance\":10}", "{\"balance\":10}");
    CHECK(g.calls == 1 && r.calls == 1);
    before = state_copy(h);

    CHECK_STATUS(AGENT_ERR_REJECTED, set_s(h, "{\"balance\":-5}", &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_set_state");
    CHECK_LAST_ERROR_HAS("balance would go negative: \xc3\xa9 \"quoted\"");
    CHECK(g.calls == 2);
    CHECK(r.calls == 1); /* no hook for a rejected change */
    CHECK_UNCHANGED(h, before, 1);

    /* without a message the gate's return value is reported; any non-zero value rejects */
    g.message = NULL;
    g.rc = -42;
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_REJECTED, replace_s(h, "{\"balance\":-1}", &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_replace_state");
    CHECK_LAST_ERROR_HAS("-42");
    CHECK(g.calls == 3 && r.calls == 1);
    CHECK_UNCHANGED(h, before, 1);

    /* a message handed back with an accepted change is dropped (and freed: valgrind) */
    g.message = "ignored";
    g.message_always = 1;
    CHECK_SET(h, "{\"balance\":11}", "{\"balance\":11}");
    CHECK(g.calls == 4 && r.calls == 2 && r.version == 2);
    CHECK(g.bad_views == 0);

    /* removing the gate lets the change through */
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, NULL, NULL, NULL));
    CHECK(g.freed == 1);
    CHECK_SET(h, "{\"balance\":-5}", "{\"balance\":-5}");
    CHECK(g.calls == 4 && r.calls == 3);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(g.freed == 1 && r.freed == 1);
    free(before);
    gate_destroy(&g);
    recorder_destroy(&r);
}

void test_validator_sees_the_change_about_to_commit(void)
{
    AgentHandle h = open_store("gate_views.db",
                               "{\"initial_state\":{\"i\":0},\"change_log\":{\"keep_last\":10}}");
    Gate g;
    gate_init(&g, NULL, NULL, 1);
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g, gate_free));

    CHECK_SET(h, "{ \"a\" : 1 , \"x\" : null }", "{\"i\":0,\"a\":1}");
    CHECK(g.calls == 1 && g.version == 1);
    CHECK(g.prev != NULL && strcmp(g.prev, "{\"i\":0}") == 0); /* the initial state */
    CHECK(g.next != NULL && strcmp(g.next, "{\"i\":0,\"a\":1}") == 0);
    CHECK(g.patch != NULL && strcmp(g.patch, "{\"a\":1,\"x\":null}") == 0);
    CHECK_REPLACE(h, "{\"b\":2}", "{\"b\":2}");
    CHECK(g.calls == 2 && g.version == 2 && g.patch == NULL);
    CHECK(g.prev != NULL && strcmp(g.prev, "{\"i\":0,\"a\":1}") == 0);
    CHECK_STATUS(AGENT_OK, set_if_s(h, 2, "{\"c\":3}", NULL, NULL));
    CHECK(g.calls == 3 && g.version == 3);
    CHECK(g.next != NULL && strcmp(g.next, "{\"b\":2,\"c\":3}") == 0);
    CHECK_STATUS(AGENT_OK, agent_restore_state(h, 1, NULL, NULL));
    CHECK(g.calls == 4 && g.version == 4 && g.patch == NULL); /* a restore is a replacement */
    CHECK(g.prev != NULL && strcmp(g.prev, "{\"b\":2,\"c\":3}") == 0);
    CHECK(g.next != NULL && strcmp(g.next, "{\"i\":0,\"a\":1}") == 0);
    CHECK(g.bad_views == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(g.freed == 1);
    gate_destroy(&g);
}

void test_validator_gates_every_write_of_its_handle_and_no_other(void)
{
    AgentHandle h = open_store("gate_scope.db", "{\"change_log\":{\"keep_last\":10}}");
    AgentHandle other = open_store("gate_scope.db", NULL);
    Gate g;
    char *before;
    int calls;
    gate_init(&g, "forbidden", "not allowed here", 1);
    CHECK_SET(h, "{\"ok\":1}", "{\"ok\":1}");
    CHECK_SET(other, "{\"forbidden\":1}", "{\"ok\":1,\"forbidden\":1}"); /* version 2 */
    CHECK_SET(h, "{\"forbidden\":null}", "{\"ok\":1}");                 /* version 3 */
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g, gate_free));
    before = state_copy(h);

    CHECK_STATUS(AGENT_ERR_REJECTED, set_s(h, "{\"forbidden\":2}", NULL));
    CHECK_LAST_ERROR_FROM("agent_set_state");
    CHECK_LAST_ERROR_HAS("not allowed here");
    CHECK_STATUS(AGENT_ERR_REJECTED, replace_s(h, "{\"forbidden\":2}", NULL));
    CHECK_LAST_ERROR_FROM("agent_replace_state");
    CHECK_STATUS(AGENT_ERR_REJECTED, set_if_s(h, 3, "{\"forbidden\":2}", NULL, NULL));
    CHECK_LAST_ERROR_FROM("agent_set_state_if");
    CHECK_LAST_ERROR_HAS("not allowed here");
    CHECK_STATUS(AGENT_ERR_REJECTED, replace_if_s(h, 3, "{\"forbidden\":2}", NULL, NULL));
    CHECK_LAST_ERROR_FROM("agent_replace_state_if");
    {
        AgentBuffer out = junk_buffer();
        uint64_t v = 99;
        CHECK_STATUS(AGENT_ERR_REJECTED, agent_restore_state(h, 2, &out, &v));
        CHECK_LAST_ERROR_FROM("agent_restore_state");
        CHECK_LAST_ERROR_HAS("not allowed here");
        CHECK_EMPTY(out);
    }
    CHECK(g.calls == 5);
    CHECK_UNCHANGED(h, before, 3);

    /* a conflict, a malformed or unstorable input, a future version never reach the gate */
    calls = g.calls;
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, 1, "{\"forbidden\":2}", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_JSON, set_s(h, "{\"forbidden\":", NULL));
    CHECK_STATUS(AGENT_ERR_CODEC, set_s(h, "{\"forbidden\":{\"$date\":\"x\"}}", NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_restore_state(h, 99, NULL, NULL));
    CHECK(g.calls == calls);

    /* other handles are not gated by it */
    CHECK_SET(other, "{\"forbidden\":3}", "{\"ok\":1,\"forbidden\":3}");
    CHECK(g.calls == calls);
    CHECK_STATUS(AGENT_OK, agent_close(other));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(g.freed == 1);
    free(before);
    gate_destroy(&g);
}

void test_validator_user_data_is_freed_exactly_once(void)
{
    AgentHandle h = open_store("gate_free.db", NULL);
    Gate g1, g2, g3;
    int freed = 0;
    gate_init(&g1, NULL, NULL, 1);
    gate_init(&g2, NULL, NULL, 1);
    gate_init(&g3, NULL, NULL, 1);

    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g1, gate_free));
    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}");
    CHECK(g1.calls == 1 && g1.freed == 0);
    /* replaced: the old one is released at once, and no longer called */
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g2, gate_free));
    CHECK(g1.freed == 1 && g2.freed == 0);
    CHECK_SET(h, "{\"a\":2}", "{\"a\":2}");
    CHECK(g1.calls == 1 && g2.calls == 1);
    /* removed with a NULL fn: the gate's user_data is released, and so is the one passed
     * along with the NULL fn */
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, NULL, &freed, count_free));
    CHECK(g2.freed == 1 && freed == 1);
    CHECK_SET(h, "{\"a\":3}", "{\"a\":3}");
    CHECK(g2.calls == 1);
    /* removing when none is set is fine; a NULL free_user_data too */
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, NULL, NULL, NULL));
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g3, NULL));
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g3, gate_free));
    CHECK(g3.freed == 0); /* the first registration had no finalizer */
    CHECK_SET(h, "{\"a\":4}", "{\"a\":4}");
    CHECK(g3.calls == 1);
    /* closed: released exactly once */
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(g1.freed == 1 && g2.freed == 1 && g3.freed == 1 && freed == 1);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_set_validator(h, gate_fn, &g3, gate_free));
    CHECK(g3.freed == 2); /* a failed registration releases its own user_data right away */
    gate_destroy(&g1);
    gate_destroy(&g2);
    gate_destroy(&g3);
}

void test_own_handle_from_validator_is_busy(void)
{
    AgentHandle h = open_store("gate_busy.db", "{\"change_log\":{\"keep_last\":10}}");
    AgentHandle other = open_at(":memory:", NULL);
    Gate g;
    gate_init(&g, NULL, NULL, 1);
    g.self = h;
    g.other = other;
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, gate_fn, &g, gate_free));

    CHECK_SET(h, "{\"outer\":1}", "{\"outer\":1}"); /* none of the inner writes happened */
    CHECK(g.calls == 1);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_get_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_get_versioned_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_set_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_set_if_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_replace_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_gate_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_hook_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_poll_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_restore_rc);
    CHECK_STATUS(AGENT_ERR_BUSY, g.self_close_rc);
    CHECK_STATUS(AGENT_OK, g.other_get_rc); /* other handles may be used */
    CHECK_VERSIONED(h, "{\"outer\":1}", 1); /* the handle is still open, the gate still set */
    CHECK(g.freed == 0);
    g.self = 0;
    CHECK_SET(h, "{\"outer\":2}", "{\"outer\":2}");
    CHECK(g.calls == 2);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK_STATUS(AGENT_OK, agent_close(other));
    CHECK(g.freed == 1);
    gate_destroy(&g);
}
