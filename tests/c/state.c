/*
 * The C suite (tests/c/main.c runs it): reading the state and the initial state, and
 * agent_set_state's RFC 7396 merge (member order, numbers, the compact output form).
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* get_state and the initial state                                                            */
/* ------------------------------------------------------------------------------------------ */

void test_default_initial_state_is_the_empty_object(void)
{
    AgentHandle h = open_store("default.db", NULL);
    CHECK_STATE(h, "{}");
    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_reading_never_persists_the_initial_state(void)
{
    AgentHandle h = open_store("no_persist.db", "{\"initial_state\":{\"a\":1}}");
    CHECK_STATE(h, "{\"a\":1}");
    CHECK_STATE(h, "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));

    /* A new default shows until the first write... */
    h = open_store("no_persist.db", "{\"initial_state\":{\"b\":2}}");
    CHECK_STATE(h, "{\"b\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("no_persist.db", NULL);
    CHECK_STATE(h, "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));

    /* ...which persists the default it merged into; later defaults no longer matter. */
    h = open_store("no_persist.db", "{\"initial_state\":{\"b\":2}}");
    CHECK_SET(h, "{\"c\":3}", "{\"b\":2,\"c\":3}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("no_persist.db", "{\"initial_state\":{\"z\":0}}");
    CHECK_STATE(h, "{\"b\":2,\"c\":3}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_first_write_persists_initial_state_merged_with_patch(void)
{
    AgentHandle h = open_store("first_write.db",
                               "{\"initial_state\":{\"a\":1,\"n\":{\"x\":1,\"y\":2},\"gone\":true}}");
    Recorder r;
    recorder_init(&r, NULL);
    add_recorder(h, &r);
    CHECK_SET(h, "{\"n\":{\"y\":null,\"z\":3},\"gone\":null,\"b\":[1]}",
              "{\"a\":1,\"n\":{\"x\":1,\"z\":3},\"b\":[1]}");
    CHECK(r.calls == 1);
    CHECK(r.prev != NULL && strcmp(r.prev, "{\"a\":1,\"n\":{\"x\":1,\"y\":2},\"gone\":true}") == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(r.freed == 1);
    recorder_destroy(&r);

    h = open_store("first_write.db", NULL);
    CHECK_STATE(h, "{\"a\":1,\"n\":{\"x\":1,\"z\":3},\"b\":[1]}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_replace_as_first_write_ignores_initial_state(void)
{
    AgentHandle h = open_store("first_replace.db", "{\"initial_state\":{\"a\":1}}");
    CHECK_REPLACE(h, "{\"b\":2}", "{\"b\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("first_replace.db", "{\"initial_state\":{\"a\":1}}");
    CHECK_STATE(h, "{\"b\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_stored_empty_object_is_not_nothing_stored(void)
{
    AgentHandle h = open_store("stored_empty.db", "{\"initial_state\":{\"a\":1}}");
    CHECK_REPLACE(h, "{}", "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("stored_empty.db", "{\"initial_state\":{\"x\":1}}");
    CHECK_STATE(h, "{}");
    CHECK_SET(h, "{\"a\":null}", "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* ------------------------------------------------------------------------------------------ */
/* set_state: RFC 7396 merge, order, numbers, output form                                      */
/* ------------------------------------------------------------------------------------------ */

void test_set_state_merges_like_the_reference_page(void)
{
    AgentHandle h = open_store("reference.db", NULL);
    CHECK_REPLACE(h, "{\"status\":\"processing\",\"job\":{\"id\":\"j1\",\"step\":2,\"note\":\"retrying\"}}",
                  "{\"status\":\"processing\",\"job\":{\"id\":\"j1\",\"step\":2,\"note\":\"retrying\"}}");
    CHECK_SET(h, "{\"job\":{\"step\":3,\"note\":null}}",
              "{\"status\":\"processing\",\"job\":{\"id\":\"j1\",\"step\":3}}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("reference.db", NULL);
    CHECK_STATE(h, "{\"status\":\"processing\",\"job\":{\"id\":\"j1\",\"step\":3}}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_set_state_follows_rfc7396(void)
{
    /* RFC 7396 Appendix A (the cases whose target and patch are objects), then more. */
    static const char *const k[][3] = {
        { "{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
        { "{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}" },
        { "{\"a\":\"b\"}", "{\"a\":null}", "{}" },
        { "{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}" },
        { "{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
        { "{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}" },
        { "{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}" },
        { "{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}" },
        { "{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}" },
        { "{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}" },
        /* arrays replace wholesale, nulls inside them included */
        { "{\"a\":[1,2,3]}", "{\"a\":[4]}", "{\"a\":[4]}" },
        { "{\"a\":[{\"x\":1}]}", "{\"a\":[{\"y\":null}]}", "{\"a\":[{\"y\":null}]}" },
        { "{\"a\":{\"b\":1}}", "{\"a\":[]}", "{\"a\":[]}" },
        /* scalars replace objects and objects replace scalars (their nulls dropped) */
        { "{\"a\":{\"x\":1}}", "{\"a\":5}", "{\"a\":5}" },
        { "{\"a\":5}", "{\"a\":{\"x\":1,\"y\":null}}", "{\"a\":{\"x\":1}}" },
        { "{\"a\":true}", "{\"a\":\"t\"}", "{\"a\":\"t\"}" },
        /* deep merge, deletions of absent members, empty patches */
        { "{\"a\":{\"b\":{\"c\":1,\"d\":2}},\"e\":3}", "{\"a\":{\"b\":{\"c\":null}}}",
          "{\"a\":{\"b\":{\"d\":2}},\"e\":3}" },
        { "{\"a\":1}", "{\"b\":null}", "{\"a\":1}" },
        { "{\"a\":1}", "{}", "{\"a\":1}" },
        { "{\"a\":{\"b\":1}}", "{\"a\":{}}", "{\"a\":{\"b\":1}}" },
        { "{\"a\":{\"b\":1}}", "{\"a\":null,\"c\":{\"d\":null}}", "{\"c\":{}}" },
    };
    AgentHandle h = open_store("rfc7396.db", NULL);
    size_t i;
    for (i = 0; i < sizeof k / sizeof k[0]; i++) {
        CHECK_REPLACE(h, k[i][0], k[i][0]);
        CHECK_SET(h, k[i][1], k[i][2]);
    }
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_member_order_is_preserved_and_new_members_appended(void)
{
    AgentHandle h = open_store("order.db", NULL);
    CHECK_REPLACE(h, "{\"z\":1,\"a\":2,\"m\":3}", "{\"z\":1,\"a\":2,\"m\":3}");
    CHECK_SET(h, "{\"a\":null,\"q\":4,\"z\":5,\"b\":6}", "{\"z\":5,\"m\":3,\"q\":4,\"b\":6}");
    /* a deleted member that comes back is new: appended at the end */
    CHECK_SET(h, "{\"a\":7}", "{\"z\":5,\"m\":3,\"q\":4,\"b\":6,\"a\":7}");
    /* the same at depth */
    CHECK_REPLACE(h, "{\"o\":{\"y\":1,\"x\":2},\"p\":0}", "{\"o\":{\"y\":1,\"x\":2},\"p\":0}");
    CHECK_SET(h, "{\"o\":{\"w\":3,\"y\":9}}", "{\"o\":{\"y\":9,\"x\":2,\"w\":3},\"p\":0}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("order.db", NULL);
    CHECK_STATE(h, "{\"o\":{\"y\":9,\"x\":2,\"w\":3},\"p\":0}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* Numbers keep their exact value and every digit as written; only the exponent marker is
 * normalized, as documented (1E2 is stored as 1e+2, -1.5e300 as -1.5e+300). */
void test_numbers_keep_their_exact_value_and_digits(void)
{
    const char *nums = "{\"a\":1.0,\"b\":12345678901234567890123,\"c\":1E2,\"d\":-0,"
                       "\"e\":0.1e-5,\"f\":-1.5e300,\"g\":1.10,\"h\":-12345678901234567890123.5}";
    const char *stored = "{\"a\":1.0,\"b\":12345678901234567890123,\"c\":1e+2,\"d\":-0,"
                         "\"e\":0.1e-5,\"f\":-1.5e+300,\"g\":1.10,\"h\":-12345678901234567890123.5}";
    AgentHandle h = open_store("numbers.db", NULL);
    CHECK_REPLACE(h, nums, stored);
    CHECK_SET(h, "{\"a\":2.50,\"i\":1e+2}",
              "{\"a\":2.50,\"b\":12345678901234567890123,\"c\":1e+2,\"d\":-0,"
              "\"e\":0.1e-5,\"f\":-1.5e+300,\"g\":1.10,\"h\":-12345678901234567890123.5,\"i\":1e+2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("numbers.db", NULL);
    CHECK_STATE(h, "{\"a\":2.50,\"b\":12345678901234567890123,\"c\":1e+2,\"d\":-0,"
                   "\"e\":0.1e-5,\"f\":-1.5e+300,\"g\":1.10,\"h\":-12345678901234567890123.5,\"i\":1e+2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_output_is_compact_json_and_text_round_trips(void)
{
    AgentHandle h = open_store("compact.db", NULL);
    CHECK_REPLACE(h, " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } , \"c\":\"x y\" }\n ",
                  "{\"a\":[1,2],\"b\":{},\"c\":\"x y\"}");
    /* UTF-8 text and escapes that must stay escaped survive byte for byte */
    CHECK_REPLACE(h, "{\"\xc3\xa9t\xc3\xa9\":\"\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\","
                     "\"q\":\"a\\\"b\\\\c\\n\"}",
                  "{\"\xc3\xa9t\xc3\xa9\":\"\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\","
                  "\"q\":\"a\\\"b\\\\c\\n\"}");
    /* an escaped surrogate pair is well-formed */
    {
        AgentBuffer out = { NULL, 0, NULL };
        CHECK_STATUS(AGENT_OK, set_s(h, "{\"e\":\"\\ud83d\\ude00\"}", &out));
        agent_buffer_free(&out);
    }
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_set_state_returns_full_state_and_out_may_be_null(void)
{
    AgentHandle h = open_store("null_out.db", NULL);
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"a\":1}", NULL));
    CHECK_STATUS(AGENT_OK, replace_s(h, "{\"b\":2}", NULL));
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"c\":3}", NULL));
    CHECK_STATE(h, "{\"b\":2,\"c\":3}");
    CHECK_SET(h, "{\"d\":{\"e\":4}}", "{\"b\":2,\"c\":3,\"d\":{\"e\":4}}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_replace_state_keeps_nothing_of_the_previous_state(void)
{
    AgentHandle h = open_store("replace.db", "{\"initial_state\":{\"i\":0}}");
    CHECK_SET(h, "{\"a\":1,\"b\":{\"c\":2,\"keep\":1}}", "{\"i\":0,\"a\":1,\"b\":{\"c\":2,\"keep\":1}}");
    CHECK_REPLACE(h, "{\"b\":{\"d\":3}}", "{\"b\":{\"d\":3}}");
    /* null is a value in a replacement, not a deletion */
    CHECK_REPLACE(h, "{\"x\":null}", "{\"x\":null}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("replace.db", "{\"initial_state\":{\"i\":0}}");
    CHECK_STATE(h, "{\"x\":null}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}
