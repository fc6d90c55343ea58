/*
 * The C suite (tests/c/main.c runs it): reading the change log back
 * (agent_changes_since, agent_get_state_at, agent_restore_state).
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Change log, read back: agent_changes_since, agent_get_state_at, agent_restore_state        */
/* ------------------------------------------------------------------------------------------ */

/* Replaces every "at":<digits> in `s` by "at":0, in place; checks each time is within
 * [lo_ms, hi_ms]; returns how many it replaced. */
static int blank_times(char *s, long long lo_ms, long long hi_ms)
{
    int count = 0;
    char *p = s;
    while ((p = strstr(p, "\"at\":")) != NULL) {
        char *digits = p + 5, *end;
        long long at = strtoll(digits, &end, 10);
        check_(end > digits && at >= lo_ms && at <= hi_ms, __FILE__, __LINE__,
               "\"at\":%lld is not between %lld and %lld", at, lo_ms, hi_ms);
        digits[0] = '0';
        memmove(digits + 1, end, strlen(end) + 1);
        p = digits + 1;
        count++;
    }
    return count;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void test_changes_since_returns_the_documented_json_array(void)
{
    AgentHandle h = open_store("since.db", "{\"change_log\":{\"keep_last\":3}}");
    AgentHandle off = open_store("since_off.db", NULL);
    AgentBuffer out = junk_buffer();
    long long t0 = now_ms() - 1, t1;
    char *text;

    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 0, &out)); /* nothing yet */
    CHECK_BUF(out, "[]");
    agent_buffer_free(&out);
    CHECK_SET(h, "{\"n\":1}", "{\"n\":1}");
    CHECK_SET(h, "{\"n\":2}", "{\"n\":2}");
    CHECK_SET(h, "{\"n\":3}", "{\"n\":3}");
    CHECK_SET(h, "{\"n\":4,\"s\":\"a\\\"b\\u00e9\"}", "{\"n\":4,\"s\":\"a\\\"b\xc3\xa9\"}");
    CHECK_REPLACE(h, "{\"r\":[5, {\"x\":null}]}", "{\"r\":[5,{\"x\":null}]}");
    t1 = now_ms() + 1;
    /* versions 3, 4 and 5 are retained */
    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 3, &out));
    CHECK(out.data != NULL && out.data[out.len] == 0 && strlen((const char *)out.data) == out.len);
    text = dup_bytes(out.data, out.len);
    agent_buffer_free(&out);
    CHECK(blank_times(text, t0, t1) == 2);
    check_(strcmp(text, "[{\"version\":4,\"at\":0,\"kind\":\"merge\",\"schema\":0,\"migrated_from\":null,\"patch\":{\"n\":4,\"s\":\"a\\\"b\xc3\xa9\"},"
                        "\"next\":{\"n\":4,\"s\":\"a\\\"b\xc3\xa9\"}},"
                        "{\"version\":5,\"at\":0,\"kind\":\"replace\",\"schema\":0,\"migrated_from\":null,\"patch\":null,\"next\":{\"r\":[5,{\"x\":null}]}}]") == 0,
           __FILE__, __LINE__, "changes_since(3) is %s", text);
    free(text);
    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 2, &out));
    text = dup_bytes(out.data, out.len);
    agent_buffer_free(&out);
    CHECK(blank_times(text, t0, t1) == 3);
    check_(strncmp(text, "[{\"version\":3,\"at\":0,\"kind\":\"merge\",\"schema\":0,\"migrated_from\":null,"
                         "\"patch\":{\"n\":3},\"next\":{\"n\":3}},{\"version\":4,", 113) == 0,
           __FILE__, __LINE__, "changes_since(2) is %s", text);
    free(text);
    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 5, &out)); /* up to date */
    CHECK_BUF(out, "[]");
    agent_buffer_free(&out);

    /* pruned: GAP; the future, the log off, a NULL out: INVALID_ARGUMENT; out left empty */
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_changes_since(h, 1, &out));
    CHECK_LAST_ERROR_FROM("agent_changes_since");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_changes_since(h, 0, &out));
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_changes_since(h, 6, &out));
    CHECK_LAST_ERROR_FROM("agent_changes_since");
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_changes_since(h, UINT64_MAX, &out));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_changes_since(h, 3, NULL));
    CHECK_LAST_ERROR_FROM("agent_changes_since");
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_changes_since(off, 0, &out));
    CHECK_LAST_ERROR_HAS("change_log");
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_OK, agent_close(off));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_get_state_at_returns_retained_versions(void)
{
    AgentHandle h = open_store("state_at.db",
                               "{\"change_log\":{\"keep_last\":3},\"initial_state\":{\"init\":1}}");
    AgentHandle off = open_store("state_at_off.db", "{\"initial_state\":{\"init\":2}}");
    AgentBuffer out = junk_buffer();
    int i;
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 0, &out)); /* version 0: the initial state */
    CHECK_BUF(out, "{\"init\":1}");
    agent_buffer_free(&out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_at(h, 1, &out)); /* the future */
    CHECK_LAST_ERROR_FROM("agent_get_state_at");
    CHECK_EMPTY(out);
    for (i = 1; i <= 5; i++) {
        char patch[32];
        snprintf(patch, sizeof patch, "{\"n\":%d}", i);
        CHECK_STATUS(AGENT_OK, set_s(h, patch, NULL));
    }
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 3, &out));
    CHECK_BUF(out, "{\"init\":1,\"n\":3}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 4, &out));
    CHECK_BUF(out, "{\"init\":1,\"n\":4}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 5, &out));
    CHECK_BUF(out, "{\"init\":1,\"n\":5}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 0, &out));
    CHECK_BUF(out, "{\"init\":1}");
    agent_buffer_free(&out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_get_state_at(h, 2, &out));
    CHECK_LAST_ERROR_FROM("agent_get_state_at");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_get_state_at(h, 1, &out));
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_at(h, 6, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_at(h, 3, NULL));
    CHECK_LAST_ERROR_FROM("agent_get_state_at");

    /* without the log: the current version and 0 only */
    CHECK_SET(off, "{\"a\":1}", "{\"init\":2,\"a\":1}");
    CHECK_SET(off, "{\"a\":2}", "{\"init\":2,\"a\":2}");
    CHECK_STATUS(AGENT_OK, agent_get_state_at(off, 2, &out));
    CHECK_BUF(out, "{\"init\":2,\"a\":2}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_get_state_at(off, 0, &out));
    CHECK_BUF(out, "{\"init\":2}");
    agent_buffer_free(&out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_get_state_at(off, 1, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_OK, agent_close(off));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_restore_state_replaces_with_an_earlier_version(void)
{
    AgentHandle h = open_store("restore.db", "{\"change_log\":{\"keep_last\":3}}");
    Recorder r;
    AgentBuffer out = junk_buffer();
    uint64_t v = 99;
    char *before;
    int i;
    recorder_init(&r, NULL);
    for (i = 1; i <= 5; i++) {
        char patch[32];
        snprintf(patch, sizeof patch, "{\"n\":%d}", i);
        CHECK_STATUS(AGENT_OK, set_s(h, patch, NULL));
    }
    add_recorder(h, &r);
    CHECK_STATUS(AGENT_OK, agent_restore_state(h, 3, &out, &v));
    CHECK_BUF(out, "{\"n\":3}");
    agent_buffer_free(&out);
    CHECK(v == 6); /* a new change with a new version */
    CHECK_VERSIONED(h, "{\"n\":3}", 6);
    /* hooks see a replacement */
    CHECK(r.calls == 1 && r.version == 6 && r.patch == NULL);
    CHECK(r.prev != NULL && strcmp(r.prev, "{\"n\":5}") == 0);
    CHECK(r.next != NULL && strcmp(r.next, "{\"n\":3}") == 0);
    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 5, &out));
    CHECK(out.data != NULL && strstr((const char *)out.data, "\"version\":6") != NULL &&
          strstr((const char *)out.data, "\"patch\":null,\"next\":{\"n\":3}") != NULL);
    agent_buffer_free(&out);

    /* the current version: nothing changes, so nothing is committed (no version, no hook);
     * version 0 (the initial state); out and out_version may be NULL */
    CHECK_STATUS(AGENT_OK, agent_restore_state(h, 6, NULL, NULL));
    CHECK_VERSIONED(h, "{\"n\":3}", 6);
    CHECK(r.calls == 1);
    CHECK_STATUS(AGENT_OK, agent_restore_state(h, 0, NULL, &v));
    CHECK(v == 7);
    CHECK_VERSIONED(h, "{}", 7);
    CHECK(r.calls == 2 && r.version_breaks == 0 && r.chain_breaks == 0);

    /* not retained: GAP; the future: INVALID_ARGUMENT; nothing written, out left empty */
    before = state_copy(h);
    out = junk_buffer();
    v = 99;
    CHECK_STATUS(AGENT_ERR_GAP, agent_restore_state(h, 4, &out, &v));
    CHECK_LAST_ERROR_FROM("agent_restore_state");
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_restore_state(h, 8, &out, &v));
    CHECK_LAST_ERROR_FROM("agent_restore_state");
    CHECK_EMPTY(out);
    CHECK_UNCHANGED(h, before, 7);
    CHECK(r.calls == 2);
    free(before);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    recorder_destroy(&r);
}
