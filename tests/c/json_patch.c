/*
 * The C suite (tests/c/main.c runs it): RFC 6902 JSON Patch writes (agent_patch_state,
 * agent_patch_state_if) and reads of one place by RFC 6901 JSON Pointer (agent_get_path,
 * agent_get_tail): appends with "/-", compare-and-set, what hooks, the validator and the change
 * log see of a patch, and every bad input refused with its status, a message naming the
 * operation at fault, and nothing written. The public RFC 6902 suite runs through the C ABI in
 * tests/conformance/json_patch_c.c.
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static AgentStatus patch_s(AgentHandle h, const char *ops, AgentBuffer *out)
{
    return agent_patch_state(h, (const uint8_t *)ops, strlen(ops), out);
}

static AgentStatus patch_if_s(AgentHandle h, uint64_t expected, const char *ops, AgentBuffer *out,
                              uint64_t *out_version)
{
    return agent_patch_state_if(h, expected, (const uint8_t *)ops, strlen(ops), out, out_version);
}

/* agent_patch_state(ops) succeeds and returns `text` as the full state, which get also shows. */
#define CHECK_PATCH(h, ops, text) check_patch_((h), (ops), (text), __FILE__, __LINE__)

static int check_patch_(AgentHandle h, const char *ops, const char *text, const char *file,
                        int line)
{
    AgentBuffer out = junk_buffer();
    AgentStatus rc = patch_s(h, ops, &out);
    int ok = check_(rc == AGENT_OK && buf_is(&out, text), file, line,
                    "agent_patch_state(%s) gave %.*s (status %s, %s), expected %s", ops,
                    out.data ? (int)out.len : 6, out.data ? (const char *)out.data : "(NULL)",
                    agent_status_name(rc), error_if_failed(rc), text);
    agent_buffer_free(&out);
    return ok && check_state_(h, text, file, line);
}

/* agent_get_path (tail < 0) or agent_get_tail(n = tail) at `pointer` gives `text`. */
#define CHECK_READ(h, pointer, tail, text) \
    check_read_((h), (pointer), (tail), (text), __FILE__, __LINE__)

static int check_read_(AgentHandle h, const char *pointer, long tail, const char *text,
                       const char *file, int line)
{
    AgentBuffer out = junk_buffer();
    AgentStatus rc = tail < 0 ? agent_get_path(h, pointer, strlen(pointer), &out)
                              : agent_get_tail(h, pointer, strlen(pointer), (size_t)tail, &out);
    int ok = check_(rc == AGENT_OK && buf_is(&out, text), file, line,
                    "%s(\"%s\"%s) gave %.*s (status %s, %s), expected %s",
                    tail < 0 ? "agent_get_path" : "agent_get_tail", pointer,
                    tail < 0 ? "" : ", n", out.data ? (int)out.len : 6,
                    out.data ? (const char *)out.data : "(NULL)", agent_status_name(rc),
                    error_if_failed(rc), text);
    agent_buffer_free(&out);
    return ok;
}

/* agent_get_path (tail < 0) or agent_get_tail fails with `want` at `len` bytes of `pointer`,
 * leaves *out empty, names itself in the message, which also holds `has` (when not NULL). */
#define CHECK_READ_FAILS(h, want, pointer, len, tail, has) \
    check_read_fails_((h), (want), (pointer), (len), (tail), (has), __FILE__, __LINE__)

static void check_read_fails_(AgentHandle h, AgentStatus want, const char *pointer, size_t len,
                              long tail, const char *has, const char *file, int line)
{
    const char *fn = tail < 0 ? "agent_get_path" : "agent_get_tail";
    AgentBuffer out = junk_buffer();
    AgentStatus rc = tail < 0 ? agent_get_path(h, pointer, len, &out)
                              : agent_get_tail(h, pointer, len, (size_t)tail, &out);
    check_(rc == want, file, line, "%s(\"%.*s\") returned %s, expected %s; last error: %s", fn,
           pointer ? (int)len : 4, pointer ? pointer : "NULL", agent_status_name(rc),
           agent_status_name(want), error_if_failed(rc));
    check_(buf_is_empty(&out), file, line, "%s failed but left *out non-empty", fn);
    if (rc != AGENT_OK) {
        check_last_error_from_(fn, file, line);
        if (has != NULL) {
            check_(strstr(agent_last_error(), has) != NULL, file, line,
                   "last error \"%s\" does not contain \"%s\"", agent_last_error(), has);
        }
    }
    agent_buffer_free(&out);
}

/*
 * agent_patch_state and agent_patch_state_if (at the current version) both refuse the `len`
 * bytes at `ops` with `want`: *out left empty, the message names the
 * function and holds `has` (when not NULL), and the state and its version are as before.
 */
#define CHECK_PATCH_FAILS(h, want, ops, len, has) \
    check_patch_fails_((h), (want), (const uint8_t *)(ops), (len), (has), __FILE__, __LINE__)
#define CHECK_PATCH_FAILS_S(h, want, ops, has) CHECK_PATCH_FAILS((h), (want), (ops), strlen(ops), (has))

static void check_patch_fails_(AgentHandle h, AgentStatus want, const uint8_t *ops, size_t len,
                               const char *has, const char *file, int line)
{
    AgentBuffer b = { NULL, 0, NULL };
    uint64_t version = 0;
    char *before;
    int form;
    if (agent_get_state_versioned(h, &b, &version) != AGENT_OK) {
        check_(0, file, line, "agent_get_state_versioned failed: %s", agent_last_error());
        return;
    }
    before = dup_bytes(b.data, b.len);
    agent_buffer_free(&b);
    for (form = 0; form < 2; form++) {
        const char *fn = form == 0 ? "agent_patch_state" : "agent_patch_state_if";
        AgentBuffer out = junk_buffer();
        uint64_t new_version = 0;
        AgentStatus rc = form == 0 ? agent_patch_state(h, ops, len, &out)
                                   : agent_patch_state_if(h, version, ops, len, &out, &new_version);
        check_(rc == want, file, line, "%s(%.*s) returned %s, expected %s; last error: %s", fn,
               ops ? (int)len : 4, ops ? (const char *)ops : "NULL", agent_status_name(rc),
               agent_status_name(want), error_if_failed(rc));
        check_(buf_is_empty(&out), file, line, "%s failed but left *out non-empty", fn);
        if (rc != AGENT_OK) {
            check_last_error_from_(fn, file, line);
            if (has != NULL) {
                check_(strstr(agent_last_error(), has) != NULL, file, line,
                       "%s: last error \"%s\" does not contain \"%s\"", fn, agent_last_error(),
                       has);
            }
        }
        agent_buffer_free(&out);
        check_unchanged_(h, before, version, file, line);
    }
    free(before);
}

/* What an on_state_changed hook or a validator saw of the last change. */
typedef struct {
    int calls;
    int freed;
    int32_t kind;
    uint64_t version;
    char *patch; /* NULL for a NULL patch */
    char *next;
    const char *reject_if; /* validator: reject a change whose operations contain this */
} Seen;

static void seen_keep(Seen *s, const AgentStateChange *c)
{
    s->calls++;
    s->kind = c->kind;
    s->version = c->version;
    free(s->patch);
    free(s->next);
    s->patch = c->patch != NULL ? dup_bytes(c->patch, c->patch_len) : NULL;
    s->next = dup_bytes(c->next, c->next_len);
}

static int32_t seen_hook(void *user_data, const AgentStateChange *c)
{
    seen_keep(user_data, c);
    return 0;
}

static int32_t seen_validator(void *user_data, const AgentStateChange *c, AgentBuffer *message)
{
    Seen *s = user_data;
    static const char why[] = "no deleting of messages";
    seen_keep(s, c);
    if (s->reject_if != NULL && s->patch != NULL && strstr(s->patch, s->reject_if) != NULL) {
        agent_buffer_copy((const uint8_t *)why, sizeof why - 1, message);
        return 1;
    }
    return 0;
}

static void seen_free(void *user_data)
{
    ((Seen *)user_data)->freed++;
}

static void seen_destroy(Seen *s)
{
    free(s->patch);
    free(s->next);
}

/* ------------------------------------------------------------------------------------------ */
/* JSON Patch                                                                                 */
/* ------------------------------------------------------------------------------------------ */

void test_json_patch_appends_and_applies_every_operation(void)
{
    AgentHandle h = open_store("patch.db", NULL);
    AgentBuffer out = junk_buffer();

    /* The first write of a store patches the initial state ({}). */
    CHECK_PATCH(h, "[{\"op\":\"add\",\"path\":\"/messages\",\"value\":[]}]", "{\"messages\":[]}");
    CHECK_VERSIONED(h, "{\"messages\":[]}", 1);
    /* "/-" is the place after the last element: add appends there. */
    CHECK_PATCH(h, "[{\"op\":\"add\",\"path\":\"/messages/-\",\"value\":{\"role\":\"user\",\"text\":\"hi\"}}]",
                "{\"messages\":[{\"role\":\"user\",\"text\":\"hi\"}]}");
    CHECK_PATCH(h, " [ {\"op\": \"add\", \"path\": \"/messages/-\", \"value\": {\"role\": \"bot\", \"text\": \"hello\"}} ] ",
                "{\"messages\":[{\"role\":\"user\",\"text\":\"hi\"},{\"role\":\"bot\",\"text\":\"hello\"}]}");
    CHECK_VERSIONED(h, "{\"messages\":[{\"role\":\"user\",\"text\":\"hi\"},{\"role\":\"bot\",\"text\":\"hello\"}]}", 3);

    /* Every operation, in order, in one patch (and one version). */
    CHECK_PATCH(h,
                "[{\"op\":\"test\",\"path\":\"/messages/0/role\",\"value\":\"user\"},"
                "{\"op\":\"replace\",\"path\":\"/messages/0/text\",\"value\":\"hi there\"},"
                "{\"op\":\"copy\",\"from\":\"/messages/1\",\"path\":\"/last\"},"
                "{\"op\":\"move\",\"from\":\"/last/text\",\"path\":\"/said\"},"
                "{\"op\":\"remove\",\"path\":\"/messages/1\"},"
                "{\"op\":\"add\",\"path\":\"/messages/0\",\"value\":\"first\"},"
                "{\"op\":\"add\",\"path\":\"/a~1b~0c\",\"value\":1.50}]",
                "{\"messages\":[\"first\",{\"role\":\"user\",\"text\":\"hi there\"}],"
                "\"last\":{\"role\":\"bot\"},\"said\":\"hello\",\"a/b~c\":1.50}");
    CHECK_VERSIONED(h, "{\"messages\":[\"first\",{\"role\":\"user\",\"text\":\"hi there\"}],"
                       "\"last\":{\"role\":\"bot\"},\"said\":\"hello\",\"a/b~c\":1.50}", 4);

    /* out may be NULL; an empty patch, or one whose result is the stored state, commits nothing. */
    CHECK_STATUS(AGENT_OK, patch_s(h, "[{\"op\":\"remove\",\"path\":\"/said\"}]", NULL));
    CHECK_VERSIONED(h, "{\"messages\":[\"first\",{\"role\":\"user\",\"text\":\"hi there\"}],"
                       "\"last\":{\"role\":\"bot\"},\"a/b~c\":1.50}", 5);
    CHECK_STATUS(AGENT_OK, patch_s(h, "[]", &out));
    CHECK_BUF(out, "{\"messages\":[\"first\",{\"role\":\"user\",\"text\":\"hi there\"}],"
                   "\"last\":{\"role\":\"bot\"},\"a/b~c\":1.50}");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, patch_s(h, "[{\"op\":\"test\",\"path\":\"/last/role\",\"value\":\"bot\"}]", NULL));
    CHECK_STATUS(AGENT_OK, patch_s(h, "[{\"op\":\"replace\",\"path\":\"/a~1b~0c\",\"value\":1.50}]", NULL));
    CHECK_VERSIONED(h, "{\"messages\":[\"first\",{\"role\":\"user\",\"text\":\"hi there\"}],"
                       "\"last\":{\"role\":\"bot\"},\"a/b~c\":1.50}", 5);
    /* The whole state replaced through the root. */
    CHECK_PATCH(h, "[{\"op\":\"replace\",\"path\":\"\",\"value\":{\"fresh\":true}}]", "{\"fresh\":true}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_json_patch_if_writes_only_at_the_expected_version(void)
{
    AgentHandle h = open_store("patch_if.db", NULL);
    AgentHandle other = open_store("patch_if.db", NULL);
    AgentBuffer out = junk_buffer();
    uint64_t v = 99;
    const char *append = "[{\"op\":\"add\",\"path\":\"/log/-\",\"value\":\"x\"}]";

    /* Nothing stored: version 0 is expected. */
    CHECK_STATUS(AGENT_OK, patch_if_s(h, 0, "[{\"op\":\"add\",\"path\":\"/log\",\"value\":[]}]", &out, &v));
    CHECK_BUF(out, "{\"log\":[]}");
    CHECK(v == 1);
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, patch_if_s(h, 1, append, &out, &v));
    CHECK_BUF(out, "{\"log\":[\"x\"]}");
    CHECK(v == 2);
    agent_buffer_free(&out);
    /* out and out_version may be NULL. */
    CHECK_STATUS(AGENT_OK, patch_if_s(h, 2, append, NULL, NULL));
    CHECK_VERSIONED(h, "{\"log\":[\"x\",\"x\"]}", 3);

    /* Another handle's commit moves the version on: the stale expectation writes nothing. */
    CHECK_STATUS(AGENT_OK, patch_s(other, append, NULL));
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_CONFLICT, patch_if_s(h, 3, append, &out, &v));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_patch_state_if");
    CHECK_VERSIONED(h, "{\"log\":[\"x\",\"x\",\"x\"]}", 4);
    /* A future version conflicts too. */
    CHECK_STATUS(AGENT_ERR_CONFLICT, patch_if_s(h, 9, append, NULL, NULL));
    CHECK_VERSIONED(h, "{\"log\":[\"x\",\"x\",\"x\"]}", 4);
    /* Read again and retry. */
    CHECK_STATUS(AGENT_OK, patch_if_s(h, 4, append, NULL, &v));
    CHECK(v == 5);
    CHECK_VERSIONED(other, "{\"log\":[\"x\",\"x\",\"x\",\"x\"]}", 5);
    CHECK_STATUS(AGENT_OK, agent_close(other));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_json_patch_hooks_validator_and_change_log_see_the_operations(void)
{
    AgentHandle h = open_store("patch_seen.db", "{\"change_log\":{\"keep_last\":10}}");
    Seen hook, gate;
    uint64_t id = 0;
    AgentBuffer out = junk_buffer();
    const char *append = "[{\"op\":\"add\",\"path\":\"/messages/-\",\"value\":\"hi\"}]";
    const char *remove = "[{\"op\":\"remove\", \"path\":\"/messages/0\"}]";
    char *before, *text;
    memset(&hook, 0, sizeof hook);
    memset(&gate, 0, sizeof gate);
    gate.reject_if = "remove";
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(h, seen_hook, &hook, seen_free, &id));
    CHECK_STATUS(AGENT_OK, agent_set_validator(h, seen_validator, &gate, seen_free));

    CHECK_REPLACE(h, "{\"messages\":[]}", "{\"messages\":[]}");
    CHECK(hook.calls == 1 && hook.kind == AGENT_CHANGE_REPLACE && hook.patch == NULL);
    CHECK(gate.calls == 1 && gate.kind == AGENT_CHANGE_REPLACE);

    /* The validator sees the operations (as their compact text) and the result; the hook too. */
    CHECK_PATCH(h, append, "{\"messages\":[\"hi\"]}");
    CHECK(gate.calls == 2 && gate.kind == AGENT_CHANGE_JSON_PATCH && gate.version == 2);
    CHECK(gate.patch != NULL && strcmp(gate.patch, append) == 0);
    CHECK(gate.next != NULL && strcmp(gate.next, "{\"messages\":[\"hi\"]}") == 0);
    CHECK(hook.calls == 2 && hook.kind == AGENT_CHANGE_JSON_PATCH && hook.version == 2);
    check_(hook.patch != NULL && strcmp(hook.patch, append) == 0, __FILE__, __LINE__,
           "the hook saw patch %s", hook.patch ? hook.patch : "(NULL)");
    CHECK(hook.next != NULL && strcmp(hook.next, "{\"messages\":[\"hi\"]}") == 0);

    /* A merge is still a merge. */
    CHECK_SET(h, "{\"n\":1}", "{\"messages\":[\"hi\"],\"n\":1}");
    CHECK(hook.calls == 3 && hook.kind == AGENT_CHANGE_MERGE && strcmp(hook.patch, "{\"n\":1}") == 0);

    /* Rejected by the validator: REJECTED with its message, nothing written, no hook. */
    before = state_copy(h);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_REJECTED, patch_s(h, remove, &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_patch_state");
    CHECK_LAST_ERROR_HAS("no deleting of messages");
    CHECK(gate.calls == 4 && gate.kind == AGENT_CHANGE_JSON_PATCH);
    CHECK(gate.patch != NULL && strcmp(gate.patch, "[{\"op\":\"remove\",\"path\":\"/messages/0\"}]") == 0);
    CHECK(hook.calls == 3);
    CHECK_UNCHANGED(h, before, 3);
    free(before);

    /* A failed test never reaches the validator. */
    CHECK_STATUS(AGENT_ERR_TEST_FAILED,
                 patch_s(h, "[{\"op\":\"test\",\"path\":\"/n\",\"value\":2}]", NULL));
    CHECK(gate.calls == 4 && hook.calls == 3);

    /* The change log keeps each change's kind, and a JSON Patch's operations as "patch". */
    CHECK_STATUS(AGENT_OK, agent_changes_since(h, 0, &out));
    text = dup_bytes(out.data, out.len);
    agent_buffer_free(&out);
    check_(strstr(text, "{\"version\":1,") != NULL && strstr(text, "\"kind\":\"replace\"") != NULL,
           __FILE__, __LINE__, "changes_since(0) is %s", text);
    check_(strstr(text, "\"kind\":\"json_patch\",\"schema\":0,\"migrated_from\":null,"
                        "\"patch\":[{\"op\":\"add\",\"path\":\"/messages/-\",\"value\":\"hi\"}],"
                        "\"next\":{\"messages\":[\"hi\"]}}") != NULL,
           __FILE__, __LINE__, "changes_since(0) is %s", text);
    check_(strstr(text, "\"kind\":\"merge\",\"schema\":0,\"migrated_from\":null,\"patch\":{\"n\":1},") != NULL,
           __FILE__, __LINE__, "changes_since(0) is %s", text);
    free(text);
    /* The state at a JSON Patch's version is replayed from the log. */
    CHECK_STATUS(AGENT_OK, agent_get_state_at(h, 2, &out));
    CHECK_BUF(out, "{\"messages\":[\"hi\"]}");
    agent_buffer_free(&out);

    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(hook.freed == 1 && gate.freed == 1);
    seen_destroy(&hook);
    seen_destroy(&gate);
}

void test_json_patch_refuses_bad_input_and_writes_nothing(void)
{
    AgentHandle h = open_store("patch_bad.db", "{\"max_value_bytes\":256}");
    static const char too_long[] =
        "[{\"op\":\"add\",\"path\":\"/big\",\"value\":\""
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "\"}]";
    /* A NUL byte inside the text (the length counts it): a control character in a string. */
    static const char with_nul[] = "[{\"op\":\"add\",\"path\":\"/x\",\"value\":\"a\0b\"}]";
    char grow[512];
    int i;
    AgentBuffer out = junk_buffer();
    CHECK_REPLACE(h, "{\"a\":{\"b\":[1,2,3]},\"q\":1}", "{\"a\":{\"b\":[1,2,3]},\"q\":1}");

    /* NULL operations (with or without a length): INVALID_ARGUMENT. */
    CHECK_PATCH_FAILS(h, AGENT_ERR_INVALID_ARGUMENT, NULL, 0, "operations is NULL");
    CHECK_PATCH_FAILS(h, AGENT_ERR_INVALID_ARGUMENT, NULL, 5, "operations is NULL");
    /* Malformed patches: INVALID_ARGUMENT. */
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_INVALID_ARGUMENT, "{}", "an array of operations");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_INVALID_ARGUMENT, "[1]", NULL);
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_INVALID_ARGUMENT, "[{\"op\":\"frob\",\"path\":\"/a\"}]",
                        "operation 0: unknown op \"frob\"");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_INVALID_ARGUMENT, "[{\"op\":\"add\",\"path\":\"/a\"}]",
                        "operation 0 (add \"/a\"): \"value\" is missing");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_INVALID_ARGUMENT, "[{\"path\":\"/a\",\"value\":1}]", NULL);
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_INVALID_ARGUMENT, "[{\"op\":\"move\",\"path\":\"/a\"}]",
                        "operation 0 (move \"/a\")");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_INVALID_ARGUMENT, "[{\"op\":\"remove\",\"path\":\"/a/~2\"}]",
                        "operation 0 (remove \"/a/~2\")");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_INVALID_ARGUMENT, "[{\"op\":\"add\",\"path\":\"a\",\"value\":1}]",
                        "operation 0 (add \"a\")");
    /* A result that is not an object. */
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_INVALID_ARGUMENT, "[{\"op\":\"replace\",\"path\":\"\",\"value\":[]}]",
                        "not a JSON object");
    /* Paths that name nothing: PATH. */
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_PATH, "[{\"op\":\"remove\",\"path\":\"/nope\"}]",
                        "operation 0 (remove \"/nope\")");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_PATH, "[{\"op\":\"remove\",\"path\":\"/a/b/01\"}]",
                        "operation 0 (remove \"/a/b/01\")");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_PATH, "[{\"op\":\"add\",\"path\":\"/a/b/4\",\"value\":1}]",
                        "operation 0 (add \"/a/b/4\")");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_PATH, "[{\"op\":\"replace\",\"path\":\"/a/b/-\",\"value\":1}]",
                        "operation 0 (replace \"/a/b/-\")");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_PATH, "[{\"op\":\"copy\",\"from\":\"/zz\",\"path\":\"/c\"}]",
                        "operation 0 (copy \"/c\")");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_PATH, "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/c\"}]",
                        "operation 0 (move \"/a/c\")");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_PATH, "[{\"op\":\"add\",\"path\":\"/q/r\",\"value\":1}]",
                        "operation 0 (add \"/q/r\")");
    /* A test that does not hold: TEST_FAILED. */
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_TEST_FAILED, "[{\"op\":\"test\",\"path\":\"/q\",\"value\":2}]",
                        "operation 0 (test \"/q\")");
    /* A second operation failing after the first succeeded: all or nothing. */
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_PATH,
                        "[{\"op\":\"add\",\"path\":\"/x\",\"value\":1},{\"op\":\"remove\",\"path\":\"/q/z\"}]",
                        "operation 1 (remove \"/q/z\")");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_TEST_FAILED,
                        "[{\"op\":\"replace\",\"path\":\"/q\",\"value\":5},{\"op\":\"test\",\"path\":\"/q\",\"value\":1}]",
                        "operation 1 (test \"/q\")");
    /* Not JSON, invalid UTF-8: JSON. A duplicate member: CODEC. Over the cap: TOO_LARGE. */
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_JSON, "[{\"op\":\"add\",\"path\":\"/x\",\"value\":1}", NULL);
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_JSON, "", NULL);
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_JSON, "[{\"op\":\"add\",\"path\":\"/x\",\"value\":\"\xff\"}]", "UTF-8");
    CHECK_PATCH_FAILS(h, AGENT_ERR_JSON, with_nul, sizeof with_nul - 1, NULL);
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_CODEC, "[{\"op\":\"add\",\"op\":\"add\",\"path\":\"/x\",\"value\":1}]",
                        "duplicate member");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_CODEC, "[{\"op\":\"add\",\"path\":\"/x\",\"value\":{\"k\":1,\"k\":2}}]",
                        "duplicate member");
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_TOO_LARGE, too_long, "max_value_bytes");
    /* A small patch whose result would be over the cap: TOO_LARGE too. */
    snprintf(grow, sizeof grow, "[{\"op\":\"add\",\"path\":\"/big\",\"value\":\"%.200s\"}]",
             too_long + 36);
    for (i = 0; i < 2; i++) {
        CHECK_STATUS(AGENT_OK, patch_s(h, "[{\"op\":\"add\",\"path\":\"/pad\",\"value\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}]", NULL));
    }
    CHECK_PATCH_FAILS_S(h, AGENT_ERR_TOO_LARGE, grow, "max_value_bytes");

    /* A closed or never-issued handle. */
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, patch_s(0, "[]", &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_patch_state");
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, patch_if_s(0, 0, "[]", &out, NULL));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_patch_state_if");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, patch_s(h, "[]", &out));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, patch_if_s(h, 3, "[]", &out, NULL));
    CHECK_EMPTY(out);
}

/* ------------------------------------------------------------------------------------------ */
/* Reads of one place                                                                         */
/* ------------------------------------------------------------------------------------------ */

void test_get_path_and_get_tail_read_one_place(void)
{
    AgentHandle h = open_store("paths.db", "{\"initial_state\":{\"messages\":[\"hello\"]}}");
    AgentBuffer out = junk_buffer();
    int i;
    char append[128];

    /* Nothing stored: the initial state is read, and reading stores nothing. */
    CHECK_READ(h, "", -1, "{\"messages\":[\"hello\"]}");
    CHECK_READ(h, "/messages", 1, "[\"hello\"]");
    CHECK_VERSIONED(h, "{\"messages\":[\"hello\"]}", 0);

    CHECK_REPLACE(h, "{\"messages\":[],\"a/b\":{\"m~n\":[true,null,{\"\":0.10}]},\"s\":\"\xc3\xa9\"}",
                  "{\"messages\":[],\"a/b\":{\"m~n\":[true,null,{\"\":0.10}]},\"s\":\"\xc3\xa9\"}");
    for (i = 0; i < 5; i++) {
        snprintf(append, sizeof append,
                 "[{\"op\":\"add\",\"path\":\"/messages/-\",\"value\":{\"n\":%d}}]", i);
        CHECK_STATUS(AGENT_OK, patch_s(h, append, NULL));
    }
    /* The empty pointer is the whole state; others name one value, as compact JSON. */
    CHECK_READ(h, "", -1, "{\"messages\":[{\"n\":0},{\"n\":1},{\"n\":2},{\"n\":3},{\"n\":4}],"
                          "\"a/b\":{\"m~n\":[true,null,{\"\":0.10}]},\"s\":\"\xc3\xa9\"}");
    CHECK_READ(h, "/messages/2", -1, "{\"n\":2}");
    CHECK_READ(h, "/messages/4/n", -1, "4");
    CHECK_READ(h, "/a~1b/m~0n/1", -1, "null");
    CHECK_READ(h, "/a~1b/m~0n/2/", -1, "0.10");
    CHECK_READ(h, "/s", -1, "\"\xc3\xa9\"");
    /* The pointer is `len` bytes, not a C string. */
    CHECK_STATUS(AGENT_OK, agent_get_path(h, "/messages/1/n-and-more", 11, &out));
    CHECK_BUF(out, "{\"n\":1}");
    agent_buffer_free(&out);

    /* The tail: the last n elements, oldest first; "the last message" is n = 1. */
    CHECK_READ(h, "/messages", 1, "[{\"n\":4}]");
    CHECK_READ(h, "/messages", 2, "[{\"n\":3},{\"n\":4}]");
    CHECK_READ(h, "/messages", 0, "[]");
    CHECK_READ(h, "/messages", 5, "[{\"n\":0},{\"n\":1},{\"n\":2},{\"n\":3},{\"n\":4}]");
    CHECK_READ(h, "/messages", 1000, "[{\"n\":0},{\"n\":1},{\"n\":2},{\"n\":3},{\"n\":4}]");
    CHECK_READ(h, "/a~1b/m~0n", 2, "[null,{\"\":0.10}]");
    CHECK_STATUS(AGENT_OK, agent_get_tail(h, "/messages", 9, (size_t)-1, &out));
    CHECK_BUF(out, "[{\"n\":0},{\"n\":1},{\"n\":2},{\"n\":3},{\"n\":4}]");
    agent_buffer_free(&out);
    CHECK_VERSIONED(h, "{\"messages\":[{\"n\":0},{\"n\":1},{\"n\":2},{\"n\":3},{\"n\":4}],"
                       "\"a/b\":{\"m~n\":[true,null,{\"\":0.10}]},\"s\":\"\xc3\xa9\"}", 6);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_get_path_and_get_tail_refuse_bad_pointers(void)
{
    AgentHandle h = open_store("paths_bad.db", NULL);
    AgentBuffer out = junk_buffer();
    long form;
    CHECK_REPLACE(h, "{\"a\":{\"b\":[1,2,3]},\"q\":1}", "{\"a\":{\"b\":[1,2,3]},\"q\":1}");

    /* Each for agent_get_path (-1) and agent_get_tail (n = 1). */
    for (form = -1; form <= 1; form += 2) {
        CHECK_READ_FAILS(h, AGENT_ERR_INVALID_ARGUMENT, NULL, 0, form, "pointer is NULL");
        CHECK_READ_FAILS(h, AGENT_ERR_INVALID_ARGUMENT, "a/b", 3, form, "not a JSON Pointer");
        CHECK_READ_FAILS(h, AGENT_ERR_INVALID_ARGUMENT, "/a/~2", 5, form, "not a JSON Pointer");
        CHECK_READ_FAILS(h, AGENT_ERR_INVALID_ARGUMENT, "/a/~", 4, form, "not a JSON Pointer");
        CHECK_READ_FAILS(h, AGENT_ERR_INVALID_ARGUMENT, "/\xff", 2, form, "UTF-8");
        CHECK_READ_FAILS(h, AGENT_ERR_PATH, "/zz", 3, form, "\"/zz\"");
        CHECK_READ_FAILS(h, AGENT_ERR_PATH, "/a/b/3", 6, form, "\"/a/b/3\"");
        CHECK_READ_FAILS(h, AGENT_ERR_PATH, "/a/b/01", 7, form, "\"/a/b/01\"");
        CHECK_READ_FAILS(h, AGENT_ERR_PATH, "/a/b/-", 6, form, "\"/a/b/-\"");
        CHECK_READ_FAILS(h, AGENT_ERR_PATH, "/q/r", 4, form, "\"/q/r\"");
        CHECK_READ_FAILS(0, AGENT_ERR_BAD_HANDLE, "", 0, form, NULL);
    }
    /* NULL out. */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_path(h, "", 0, NULL));
    CHECK_LAST_ERROR_FROM("agent_get_path");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_tail(h, "/a/b", 4, 1, NULL));
    CHECK_LAST_ERROR_FROM("agent_get_tail");
    /* The tail of what is not an array. */
    CHECK_READ_FAILS(h, AGENT_ERR_INVALID_ARGUMENT, "/a", 2, 1, "not an array");
    CHECK_READ_FAILS(h, AGENT_ERR_INVALID_ARGUMENT, "/q", 2, 0, "not an array");
    CHECK_READ_FAILS(h, AGENT_ERR_INVALID_ARGUMENT, "", 0, 1, "not an array");
    CHECK_VERSIONED(h, "{\"a\":{\"b\":[1,2,3]},\"q\":1}", 1);
    /* A closed handle. */
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_path(h, "", 0, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_tail(h, "/a/b", 4, 1, &out));
    CHECK_EMPTY(out);
}
