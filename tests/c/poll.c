/*
 * The C suite (tests/c/main.c runs it): the change log option and agent_poll (other
 * handles' and other processes' changes, pruned changes as a gap).
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Change log: agent_poll, agent_changes_since, agent_get_state_at, agent_restore_state        */
/* ------------------------------------------------------------------------------------------ */

/* An on_state_changed hook that writes each delivery as "<version>|<prev>|<next>|<patch>;"
 * (patch "NULL" for a replacement). */
typedef struct {
    char text[4096];
    int calls;
} History;

static int32_t history_hook(void *user_data, const AgentStateChange *c)
{
    History *hist = user_data;
    size_t n = strlen(hist->text);
    hist->calls++;
    snprintf(hist->text + n, sizeof hist->text - n, "%llu|%.*s|%.*s|%.*s;",
             (unsigned long long)c->version, (int)c->prev_len, (const char *)c->prev,
             (int)c->next_len, (const char *)c->next, c->patch ? (int)c->patch_len : 4,
             c->patch ? (const char *)c->patch : "NULL");
    return 0;
}

#define CHECK_HISTORY(hist, expected) \
    check_(strcmp((hist).text, (expected)) == 0, __FILE__, __LINE__, \
           "deliveries were\n      %s\n    expected\n      %s", (hist).text, (expected))

void test_change_log_option_is_validated_and_recorded_in_the_store(void)
{
    const char *p = tmp_path("log_option.db");
    AgentHandle a, b, c;
    AgentBuffer out = junk_buffer();

    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_last\":0}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_last\":-1}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_last\":1.5}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_last\":\"3\"}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_seconds\":0}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":{\"keep_days\":3}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p,
                     "{\"change_log\":{\"keep_last\":3,\"other\":1}}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":true}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":null}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":[2]}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, p, "{\"change_log\":3}");

    /* switched on by one handle, recorded in the file: a handle without the option logs */
    a = open_at(p, "{\"change_log\":{\"keep_last\":5,\"keep_seconds\":3600}}");
    CHECK_STATUS(AGENT_OK, agent_close(a));
    b = open_at(p, NULL);
    CHECK_SET(b, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_changes_since(b, 0, &out));
    CHECK(out.data != NULL && strstr((const char *)out.data, "\"version\":1") != NULL);
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_poll(b, NULL));

    /* switched off by another handle: off for every handle, the log dropped */
    c = open_at(p, "{\"change_log\":false}");
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_changes_since(b, 0, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_poll(b, NULL));
    CHECK_SET(c, "{\"b\":2}", "{\"a\":1,\"b\":2}");
    CHECK_VERSIONED(b, "{\"a\":1,\"b\":2}", 2); /* versions go on without the log */
    CHECK_STATUS(AGENT_OK, agent_close(c));

    /* on again: nothing of before is retained */
    c = open_at(p, "{\"change_log\":{\"keep_last\":5}}");
    out = junk_buffer();
    CHECK_STATUS(AGENT_OK, agent_changes_since(c, 2, &out));
    CHECK_BUF(out, "[]");
    agent_buffer_free(&out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_changes_since(c, 0, &out));
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_get_state_at(c, 1, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_OK, agent_close(c));
    CHECK_STATUS(AGENT_OK, agent_close(b));
}

void test_change_log_keep_seconds_prunes_old_changes(void)
{
    AgentHandle h = open_store("log_seconds.db", "{\"change_log\":{\"keep_seconds\":1}}");
    AgentBuffer out = junk_buffer();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_SET(h, "{\"n\":1}", "{\"n\":1}");
    CHECK_SET(h, "{\"n\":2}", "{\"n\":2}");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* Both within the second: only checked when the two writes really were (a loaded machine
     * may stall between them; what follows holds either way). */
    if ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 900) {
        CHECK_STATUS(AGENT_OK, agent_changes_since(h, 0, &out));
        agent_buffer_free(&out);
    }
    sleep_ms(1200);
    CHECK_SET(h, "{\"n\":3}", "{\"n\":3}"); /* prunes what is older than a second */
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_GAP, agent_changes_since(h, 0, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_GAP, agent_get_state_at(h, 1, &out));
    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 2, &out));
    CHECK(out.data != NULL && strstr((const char *)out.data, "\"version\":3") != NULL &&
          strstr((const char *)out.data, "\"version\":2") == NULL);
    agent_buffer_free(&out);
    sleep_ms(1200);
    /* nothing is pruned without a write: the newest change is always kept */
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 3, &out));
    CHECK_BUF(out, "{\"n\":3}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_poll_needs_the_change_log(void)
{
    AgentHandle h = open_store("poll_off.db", NULL);
    size_t n = 77;
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_poll(h, &n));
    CHECK_LAST_ERROR_FROM("agent_poll");
    CHECK_LAST_ERROR_HAS("change_log");
    CHECK(n == 0);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_poll(h, NULL));
    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_poll(h, &n));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(":memory:", NULL);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_poll(h, &n));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    /* with the log on, a poll with nothing new delivers 0 */
    h = open_store("poll_off.db", "{\"change_log\":{\"keep_last\":1}}");
    n = 77;
    CHECK_STATUS(AGENT_OK, agent_poll(h, &n));
    CHECK(n == 0);
    CHECK_STATUS(AGENT_OK, agent_poll(h, NULL));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_poll_delivers_other_handles_changes_once_in_commit_order(void)
{
    const char *opts = "{\"change_log\":{\"keep_last\":100},\"synchronous\":\"normal\"}";
    AgentHandle a = open_store("poll.db", opts);
    AgentHandle b = open_store("poll.db", NULL); /* logs too: the store says so */
    AgentHandle late;
    History ha, hl;
    Recorder r;
    uint64_t id;
    size_t n = 77;
    memset(&ha, 0, sizeof ha);
    memset(&hl, 0, sizeof hl);
    recorder_init(&r, NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(a, history_hook, &ha, NULL, &id));
    add_recorder(a, &r);

    CHECK_SET(b, "{\"x\":1}", "{\"x\":1}");
    CHECK_REPLACE(b, "{\"y\":2}", "{\"y\":2}");
    CHECK(ha.calls == 0); /* nothing is delivered before a polls */
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 2);
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 0); /* each change once */
    /* a write through a first delivers what b committed before it */
    CHECK_SET(b, "{\"z\":3}", "{\"y\":2,\"z\":3}");
    CHECK_SET(a, "{\"w\":4}", "{\"y\":2,\"z\":3,\"w\":4}");
    CHECK(ha.calls == 4);
    CHECK_SET(b, "{\"y\":null}", "{\"z\":3,\"w\":4}");
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 1);
    CHECK_HISTORY(ha, "1|{}|{\"x\":1}|{\"x\":1};"
                      "2|{\"x\":1}|{\"y\":2}|NULL;"
                      "3|{\"y\":2}|{\"y\":2,\"z\":3}|{\"z\":3};"
                      "4|{\"y\":2,\"z\":3}|{\"y\":2,\"z\":3,\"w\":4}|{\"w\":4};"
                      "5|{\"y\":2,\"z\":3,\"w\":4}|{\"z\":3,\"w\":4}|{\"y\":null};");
    CHECK(r.calls == 5 && r.chain_breaks == 0 && r.version_breaks == 0 && r.bad_views == 0);

    /* changes committed before a handle opened are not delivered to it */
    late = open_store("poll.db", NULL);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(late, history_hook, &hl, NULL, &id));
    CHECK_STATUS(AGENT_OK, agent_poll(late, &n));
    CHECK(n == 0 && hl.calls == 0);
    CHECK_SET(a, "{\"v\":6}", "{\"z\":3,\"w\":4,\"v\":6}");
    CHECK_STATUS(AGENT_OK, agent_poll(late, &n));
    CHECK(n == 1);
    CHECK_HISTORY(hl, "6|{\"z\":3,\"w\":4}|{\"z\":3,\"w\":4,\"v\":6}|{\"v\":6};");
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n)); /* a's own change is not delivered twice */
    CHECK(n == 0 && r.calls == 6);

    /* a hook that fails: AGENT_ERR_HOOK, and every delivery still happened */
    r.rc = 5;
    CHECK_SET(b, "{\"u\":7}", "{\"z\":3,\"w\":4,\"v\":6,\"u\":7}");
    CHECK_SET(b, "{\"u\":8}", "{\"z\":3,\"w\":4,\"v\":6,\"u\":8}");
    CHECK_STATUS(AGENT_ERR_HOOK, agent_poll(a, &n));
    CHECK_LAST_ERROR_FROM("agent_poll");
    CHECK(r.calls == 8 && r.version == 8 && ha.calls == 8);
    r.rc = 0;
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 0);
    CHECK_STATUS(AGENT_OK, agent_close(late));
    CHECK_STATUS(AGENT_OK, agent_close(b));
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK(r.freed == 1);
    recorder_destroy(&r);
}

void test_poll_delivers_changes_of_another_process(void)
{
    const char *path = tmp_path("poll_process.db");
    int go[2];
    pid_t pid;
    AgentHandle h;
    History hist;
    uint64_t id;
    size_t n = 0;
    int status = 0;
    memset(&hist, 0, sizeof hist);

    /* forked before any handle is open; the child opens its own after the parent's is open */
    CHECK(pipe(go) == 0);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        AgentHandle c = 0;
        char byte;
        int bad = 0;
        close(go[1]);
        if (read(go[0], &byte, 1) != 1) {
            _exit(100);
        }
        bad |= store_open(path, "{\"synchronous\":\"normal\"}", &c) != AGENT_OK;
        bad |= set_s(c, "{\"from\":\"child\",\"n\":1}", NULL) != AGENT_OK;
        bad |= replace_s(c, "{\"n\":2}", NULL) != AGENT_OK;
        bad |= set_s(c, "{\"n\":3}", NULL) != AGENT_OK;
        bad |= agent_close(c) != AGENT_OK;
        _exit(bad ? 1 : 0);
    }
    CHECK(pid > 0);
    close(go[0]);
    h = open_at(path, "{\"change_log\":{\"keep_last\":10}}");
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(h, history_hook, &hist, NULL, &id));
    CHECK(write(go[1], "g", 1) == 1);
    close(go[1]);
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_STATUS(AGENT_OK, agent_poll(h, &n));
    CHECK(n == 3);
    CHECK_HISTORY(hist, "1|{}|{\"from\":\"child\",\"n\":1}|{\"from\":\"child\",\"n\":1};"
                        "2|{\"from\":\"child\",\"n\":1}|{\"n\":2}|NULL;"
                        "3|{\"n\":2}|{\"n\":3}|{\"n\":3};");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_poll_reports_pruned_changes_as_a_gap_once(void)
{
    AgentHandle a = open_store("gap.db", "{\"change_log\":{\"keep_last\":2}}");
    AgentHandle b = open_store("gap.db", NULL);
    History hist;
    uint64_t id;
    size_t n = 77;
    int i;
    memset(&hist, 0, sizeof hist);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(a, history_hook, &hist, NULL, &id));
    for (i = 1; i <= 5; i++) {
        char patch[32];
        snprintf(patch, sizeof patch, "{\"n\":%d}", i);
        CHECK_STATUS(AGENT_OK, set_s(b, patch, NULL));
    }
    /* retained: 4 and 5; 4's predecessor is gone, so only 5 can be delivered exactly */
    CHECK_STATUS(AGENT_ERR_GAP, agent_poll(a, &n));
    CHECK_LAST_ERROR_FROM("agent_poll");
    CHECK_LAST_ERROR_HAS("changes 1 to 4");
    CHECK_HISTORY(hist, "5|{\"n\":4}|{\"n\":5}|{\"n\":5};");
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n)); /* reported once */
    CHECK(n == 0);
    CHECK_STATE(a, "{\"n\":5}"); /* the state is current */
    CHECK_STATUS(AGENT_OK, set_s(b, "{\"n\":6}", NULL));
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 1 && hist.calls == 2);

    /* "A write through h first delivers the other handles' pending changes": with 8 and 9
     * retained, 9 (whose predecessor 8 is retained) is pending and deliverable, exactly as a
     * poll at this moment would deliver it (then reporting "changes 7 to 8"); only 7 and 8 are
     * lost. The write delivers 9 and then its own 10, and the gap is reported by the next
     * poll. */
    for (i = 7; i <= 9; i++) {
        char patch[32];
        snprintf(patch, sizeof patch, "{\"n\":%d}", i);
        CHECK_STATUS(AGENT_OK, set_s(b, patch, NULL));
    }
    CHECK_SET(a, "{\"a\":1}", "{\"n\":9,\"a\":1}");
    CHECK(hist.calls == 4); /* 9 and a's own 10 */
    check_(strstr(hist.text, "9|{\"n\":8}|{\"n\":9}|{\"n\":9};") != NULL, __FILE__, __LINE__,
           "change 9 was not delivered by the write: %s", hist.text);
    CHECK_STATUS(AGENT_ERR_GAP, agent_poll(a, &n));
    CHECK_LAST_ERROR_HAS("changes 7 to 8");
    CHECK_STATUS(AGENT_OK, agent_poll(a, &n));
    CHECK(n == 0);
    CHECK_STATUS(AGENT_OK, agent_close(b));
    CHECK_STATUS(AGENT_OK, agent_close(a));
}
