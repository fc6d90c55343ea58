/*
 * The C suite (tests/c/main.c runs it): versions and compare-and-set
 * (agent_get_state_versioned, agent_set_state_if, agent_replace_state_if).
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Versions and compare-and-set                                                               */
/* ------------------------------------------------------------------------------------------ */

void test_get_state_versioned_reads_state_and_version_together(void)
{
    AgentHandle h = open_store("versioned.db", "{\"initial_state\":{\"n\":0}}");
    AgentHandle other, ro;
    AgentBuffer out = junk_buffer();
    uint64_t v = 99;

    CHECK_VERSIONED(h, "{\"n\":0}", 0); /* nothing stored: the initial state at version 0 */
    CHECK_STATUS(AGENT_OK, agent_get_state_versioned(h, &out, NULL)); /* out_version may be NULL */
    CHECK_BUF(out, "{\"n\":0}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_versioned(h, NULL, &v));
    CHECK_LAST_ERROR_FROM("agent_get_state_versioned");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_versioned(h, NULL, NULL));
    CHECK_VERSIONED(h, "{\"n\":0}", 0); /* reading stored nothing */

    CHECK_SET(h, "{\"n\":1}", "{\"n\":1}");
    CHECK_VERSIONED(h, "{\"n\":1}", 1);
    CHECK_REPLACE(h, "{\"m\":2}", "{\"m\":2}");
    CHECK_VERSIONED(h, "{\"m\":2}", 2);
    /* a write that changes nothing commits nothing: the version stays */
    CHECK_SET(h, "{}", "{\"m\":2}");
    CHECK_VERSIONED(h, "{\"m\":2}", 2);
    CHECK_STATUS(AGENT_OK, set_if_s(h, 2, "{\"m\":2}", NULL, &v));
    CHECK(v == 2);
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, 1, "{}", NULL, &v));
    /* refused writes do not count */
    CHECK_STATUS(AGENT_ERR_JSON, set_s(h, "{", NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, replace_s(h, "[]", NULL));
    CHECK_VERSIONED(h, "{\"m\":2}", 2);

    /* every handle's commits count, and the version is stored with the state */
    other = open_store("versioned.db", NULL);
    CHECK_VERSIONED(other, "{\"m\":2}", 2);
    CHECK_SET(other, "{\"o\":1}", "{\"m\":2,\"o\":1}");
    CHECK_VERSIONED(h, "{\"m\":2,\"o\":1}", 3);
    CHECK_STATUS(AGENT_OK, agent_close(other));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    ro = open_store("versioned.db", "{\"read_only\":true}");
    CHECK_VERSIONED(ro, "{\"m\":2,\"o\":1}", 3);
    CHECK_STATUS(AGENT_OK, agent_close(ro));
}

void test_set_state_if_writes_only_at_the_expected_version(void)
{
    AgentHandle h = open_store("cas_set.db", NULL);
    AgentHandle ro;
    Recorder r;
    AgentBuffer out = junk_buffer();
    uint64_t v = 99;
    char *before;
    recorder_init(&r, NULL);
    add_recorder(h, &r);

    /* nothing stored yet: only version 0 is current */
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, 5, "{\"x\":1}", &out, &v));
    CHECK_LAST_ERROR_FROM("agent_set_state_if");
    CHECK_EMPTY(out);
    CHECK_VERSIONED(h, "{}", 0);
    CHECK_STATUS(AGENT_OK, set_if_s(h, 0, "{\"x\":1,\"keep\":[1,2]}", &out, &v));
    CHECK_BUF(out, "{\"x\":1,\"keep\":[1,2]}");
    CHECK(v == 1);
    agent_buffer_free(&out);

    /* a stale or a future version: CONFLICT, nothing written, no delivery */
    before = state_copy(h);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, 0, "{\"x\":2}", &out, &v));
    CHECK_LAST_ERROR_FROM("agent_set_state_if");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, 2, "{\"x\":2}", &out, NULL));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, UINT64_MAX, "{\"x\":2}", NULL, NULL));
    CHECK_UNCHANGED(h, before, 1);
    CHECK(r.calls == 1);
    free(before);

    /* at the current version it merges; out and out_version may be NULL */
    CHECK_STATUS(AGENT_OK, set_if_s(h, 1, "{\"x\":2}", NULL, NULL));
    CHECK_VERSIONED(h, "{\"x\":2,\"keep\":[1,2]}", 2);
    CHECK(r.calls == 2 && r.version == 2);
    CHECK(r.patch != NULL && strcmp(r.patch, "{\"x\":2}") == 0);

    /* inputs are refused as agent_set_state refuses them, nothing written */
    before = state_copy(h);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_set_state_if(h, 2, NULL, 0, NULL, NULL));
    CHECK_LAST_ERROR_FROM("agent_set_state_if");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, set_if_s(h, 2, "[1]", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_JSON, set_if_s(h, 2, "{\"a\":", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_CODEC, set_if_s(h, 2, "{\"a\":1,\"a\":2}", NULL, NULL));
    CHECK_UNCHANGED(h, before, 2);
    free(before);
    CHECK(r.calls == 2 && r.version_breaks == 0 && r.chain_breaks == 0 && r.bad_views == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));

    /* a read-only handle cannot write even at the right version */
    ro = open_store("cas_set.db", "{\"read_only\":true}");
    CHECK_STATUS(AGENT_ERR_STORAGE, set_if_s(ro, 2, "{\"x\":3}", NULL, NULL));
    CHECK_VERSIONED(ro, "{\"x\":2,\"keep\":[1,2]}", 2);
    CHECK_STATUS(AGENT_OK, agent_close(ro));
    CHECK(r.freed == 1);
    recorder_destroy(&r);
}

void test_replace_state_if_writes_only_at_the_expected_version(void)
{
    AgentHandle h = open_store("cas_replace.db", "{\"initial_state\":{\"i\":1}}");
    Recorder r;
    AgentBuffer out = junk_buffer();
    uint64_t v = 99;
    char *before;
    recorder_init(&r, NULL);
    add_recorder(h, &r);

    CHECK_STATUS(AGENT_ERR_CONFLICT, replace_if_s(h, 1, "{\"a\":1}", &out, &v));
    CHECK_LAST_ERROR_FROM("agent_replace_state_if");
    CHECK_EMPTY(out);
    CHECK_VERSIONED(h, "{\"i\":1}", 0);
    CHECK_STATUS(AGENT_OK, replace_if_s(h, 0, "{\"a\":1}", &out, &v));
    CHECK_BUF(out, "{\"a\":1}"); /* nothing of the initial state survives */
    CHECK(v == 1);
    agent_buffer_free(&out);
    CHECK(r.calls == 1 && r.version == 1 && r.patch == NULL);
    CHECK(r.prev != NULL && strcmp(r.prev, "{\"i\":1}") == 0);

    before = state_copy(h);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_CONFLICT, replace_if_s(h, 0, "{\"b\":2}", &out, &v));
    CHECK_LAST_ERROR_FROM("agent_replace_state_if");
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_CONFLICT, replace_if_s(h, 7, "{\"b\":2}", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_replace_state_if(h, 1, NULL, 3, NULL, NULL));
    CHECK_LAST_ERROR_FROM("agent_replace_state_if");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, replace_if_s(h, 1, "\"s\"", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_JSON, replace_if_s(h, 1, "{\"b\"", NULL, NULL));
    CHECK_UNCHANGED(h, before, 1);
    free(before);
    CHECK(r.calls == 1);

    CHECK_STATUS(AGENT_OK, replace_if_s(h, 1, "{\"b\":2}", NULL, NULL));
    CHECK_VERSIONED(h, "{\"b\":2}", 2);
    CHECK(r.calls == 2 && r.version == 2 && r.patch == NULL && r.version_breaks == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    recorder_destroy(&r);
}

void test_compare_and_set_sees_other_handles_commits(void)
{
    AgentHandle a = open_store("cas_two.db", NULL);
    AgentHandle b = open_store("cas_two.db", NULL);
    AgentBuffer got = { NULL, 0, NULL };
    uint64_t va = 0, v = 0;

    CHECK_SET(a, "{\"count\":0}", "{\"count\":0}");
    /* a reads, b commits in between: a's write at the version it read is refused */
    CHECK_STATUS(AGENT_OK, agent_get_state_versioned(a, &got, &va));
    agent_buffer_free(&got);
    CHECK(va == 1);
    CHECK_STATUS(AGENT_OK, set_if_s(b, 1, "{\"count\":1}", NULL, &v));
    CHECK(v == 2);
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(a, va, "{\"count\":1}", NULL, NULL));
    CHECK_STATUS(AGENT_ERR_CONFLICT, replace_if_s(a, va, "{\"count\":1}", NULL, NULL));
    CHECK_VERSIONED(a, "{\"count\":1}", 2);
    /* the retry reads again and succeeds */
    CHECK_STATUS(AGENT_OK, agent_get_state_versioned(a, &got, &va));
    CHECK(va == 2 && member_int((const char *)got.data, got.len, "count") == 1);
    agent_buffer_free(&got);
    CHECK_STATUS(AGENT_OK, set_if_s(a, va, "{\"count\":2}", NULL, &v));
    CHECK(v == 3);
    CHECK_VERSIONED(b, "{\"count\":2}", 3);
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK_STATUS(AGENT_OK, agent_close(b));
}

void test_state_changed_hooks_see_the_version_of_each_change(void)
{
    AgentHandle h = open_store("hook_versions.db", NULL);
    AgentHandle other = open_store("hook_versions.db", NULL);
    Recorder r;
    recorder_init(&r, NULL);

    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}"); /* version 1, before the hook */
    add_recorder(h, &r);
    CHECK_SET(h, "{\"a\":2}", "{\"a\":2}");
    CHECK(r.calls == 1 && r.version == 2);
    CHECK_REPLACE(h, "{\"b\":1}", "{\"b\":1}");
    CHECK(r.calls == 2 && r.version == 3);
    CHECK_STATUS(AGENT_OK, set_if_s(h, 3, "{\"c\":1}", NULL, NULL));
    CHECK(r.calls == 3 && r.version == 4);
    CHECK_STATUS(AGENT_OK, replace_if_s(h, 4, "{\"d\":1}", NULL, NULL));
    CHECK(r.calls == 4 && r.version == 5);
    CHECK(r.version_breaks == 0);
    /* without the change log another handle's commit is not delivered; the next delivery
     * carries the store's version */
    CHECK_SET(other, "{\"e\":1}", "{\"d\":1,\"e\":1}");
    CHECK_SET(h, "{\"f\":1}", "{\"d\":1,\"e\":1,\"f\":1}");
    CHECK(r.calls == 5 && r.version == 7);
    CHECK(r.version_breaks == 1);
    CHECK_STATUS(AGENT_OK, agent_close(other));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    recorder_destroy(&r);
}
