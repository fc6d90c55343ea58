/*
 * The C suite (tests/c/main.c runs it): schema versions, through the C ABI only. The open
 * options schema_version and schema_steps, agent_set_schema_step, agent_schema_version,
 * agent_get_state_at_stored, agent_upgrade_state, AGENT_ERR_NEWER_SCHEMA, AGENT_ERR_MIGRATION,
 * and what hooks see of a migration (AgentStateChange.kind, schema, migrated_from).
 */
#include "check.h"
#include "tests.h"

/* Schema 2: step 0 -> 1 renames user.nick to user.name, step 1 -> 2 adds messages. */
#define V2_OPTIONS                                                                           \
    "{\"schema_version\":2,\"schema_steps\":["                                               \
    "{\"from\":0,\"ops\":[{\"op\":\"rename\",\"path\":\"/user/nick\",\"to\":\"name\"}]},"     \
    "{\"from\":1,\"ops\":[{\"op\":\"default\",\"path\":\"/messages\",\"value\":[]}]}]"
#define V2_OPTIONS_WITH(more) V2_OPTIONS "," more "}"

/* What an on_state_changed hook saw of the kind and schema of the changes delivered to it. */
typedef struct {
    int calls;
    int32_t kind;
    uint32_t schema, migrated_from;
    uint64_t version;
    int patch_null;
} KindSeen;

static int32_t kind_hook(void *user_data, const AgentStateChange *c)
{
    KindSeen *k = user_data;
    k->calls++;
    k->kind = c->kind;
    k->schema = c->schema;
    k->migrated_from = c->migrated_from;
    k->version = c->version;
    k->patch_null = c->patch == NULL;
    return 0;
}

/* A step of code: fails (returning rc, with `message` unless NULL) or answers `answer`. */
typedef struct {
    int32_t rc;           /* 0: answer; else fail with this */
    const char *message;  /* on failure, handed back with agent_buffer_copy (NULL: none) */
    const char *answer;   /* on success, the upgraded state's JSON text */
    int calls;
    int freed;
    uint32_t from;        /* the `from` of the last call */
    char *saw;            /* a copy of the last state it was given */
    AgentHandle self;     /* not 0: read this (own) handle from inside */
    AgentStatus self_rc;
} Step;

static int32_t step_fn(void *user_data, uint32_t from, const uint8_t *state, size_t len,
                       AgentBuffer *out, AgentBuffer *message)
{
    Step *s = user_data;
    s->calls++;
    s->from = from;
    free(s->saw);
    s->saw = dup_bytes(state, len);
    if (s->self != 0) {
        AgentBuffer b = {NULL, 0, NULL};
        s->self_rc = agent_get_state(s->self, &b);
        agent_buffer_free(&b);
    }
    if (s->rc != 0) {
        if (s->message != NULL) {
            agent_buffer_copy((const uint8_t *)s->message, strlen(s->message), message);
        }
        return s->rc;
    }
    return agent_buffer_copy((const uint8_t *)s->answer, strlen(s->answer), out);
}

static void step_free(void *user_data)
{
    ((Step *)user_data)->freed++;
}

static void step_init(Step *s, int32_t rc, const char *message, const char *answer)
{
    memset(s, 0, sizeof *s);
    s->rc = rc;
    s->message = message;
    s->answer = answer;
}

/* The schema version handle `h` declares (UINT32_MAX when the call fails). */
static uint32_t schema_of(AgentHandle h)
{
    uint32_t v = UINT32_MAX;
    if (agent_schema_version(h, &v) != AGENT_OK) {
        return UINT32_MAX;
    }
    return v;
}

void test_schema_an_older_state_is_upgraded_on_first_read_as_a_migration(void)
{
    AgentHandle v1 = open_store("schema_read.db", NULL), v2;
    KindSeen k = {0};
    uint64_t id = 0;
    CHECK(schema_of(v1) == 0);
    CHECK_SET(v1, "{\"user\":{\"nick\":\"ada\"}}", "{\"user\":{\"nick\":\"ada\"}}");
    CHECK_STATUS(AGENT_OK, agent_close(v1));

    v2 = open_store("schema_read.db", V2_OPTIONS "}");
    CHECK(schema_of(v2) == 2);
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(v2, kind_hook, &k, NULL, &id));
    /* the first read commits the migration, as a change of its own */
    CHECK_VERSIONED(v2, "{\"user\":{\"name\":\"ada\"},\"messages\":[]}", 2);
    CHECK(k.calls == 1);
    CHECK(k.kind == AGENT_CHANGE_MIGRATION && k.schema == 2 && k.migrated_from == 0);
    CHECK(k.version == 2 && k.patch_null);
    /* once: reading again writes nothing; a write is an ordinary merge under schema 2 */
    CHECK_VERSIONED(v2, "{\"user\":{\"name\":\"ada\"},\"messages\":[]}", 2);
    CHECK(k.calls == 1);
    CHECK_SET(v2, "{\"messages\":[\"hi\"]}", "{\"user\":{\"name\":\"ada\"},\"messages\":[\"hi\"]}");
    CHECK(k.calls == 2 && k.kind == AGENT_CHANGE_MERGE && k.schema == 2 && k.migrated_from == 0);
    CHECK(k.version == 3 && !k.patch_null);
    CHECK_STATUS(AGENT_OK, agent_close(v2));
}

void test_schema_a_write_to_an_older_state_migrates_it_first(void)
{
    AgentHandle v1 = open_store("schema_write.db", NULL), v2;
    KindSeen k = {0};
    uint64_t id = 0, version = 0;
    CHECK_SET(v1, "{\"user\":{\"nick\":\"ada\"}}", "{\"user\":{\"nick\":\"ada\"}}");
    v2 = open_store("schema_write.db", V2_OPTIONS "}");
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(v2, kind_hook, &k, NULL, &id));
    /* a compare-and-set that cannot hold fails before anything is committed: no migration */
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(v2, 7, "{\"messages\":[\"hi\"]}", NULL, &version));
    CHECK(k.calls == 0);
    CHECK_VERSIONED(v1, "{\"user\":{\"nick\":\"ada\"}}", 1);
    /* a compare-and-set at the version read before the migration conflicts: the migration
     * is committed first (the state changed shape under it) */
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(v2, 1, "{\"messages\":[\"hi\"]}", NULL, &version));
    CHECK(k.calls == 1 && k.kind == AGENT_CHANGE_MIGRATION && k.version == 2);
    /* the patch is of the new shape and lands on the upgraded state */
    CHECK_STATUS(AGENT_OK, set_if_s(v2, 2, "{\"messages\":[\"hi\"]}", NULL, &version));
    CHECK(version == 3 && k.calls == 2 && k.kind == AGENT_CHANGE_MERGE && k.schema == 2);
    CHECK_STATE(v2, "{\"user\":{\"name\":\"ada\"},\"messages\":[\"hi\"]}");
    CHECK_STATUS(AGENT_OK, agent_close(v1));
    CHECK_STATUS(AGENT_OK, agent_close(v2));
}

void test_schema_an_older_program_gets_newer_schema_and_writes_nothing(void)
{
    AgentHandle v2 = open_store("schema_newer.db", V2_OPTIONS "}");
    AgentHandle v1 = open_store("schema_newer.db", NULL), ro;
    AgentBuffer out = junk_buffer();
    uint64_t version = 99;
    CHECK_SET(v2, "{\"user\":{\"name\":\"ada\"}}", "{\"user\":{\"name\":\"ada\"}}");

    CHECK_STATUS(AGENT_ERR_NEWER_SCHEMA, agent_get_state(v1, &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_get_state");
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_NEWER_SCHEMA, agent_get_state_versioned(v1, &out, &version));
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_NEWER_SCHEMA, set_s(v1, "{\"user\":null}", &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_set_state");
    CHECK_STATUS(AGENT_ERR_NEWER_SCHEMA, replace_s(v1, "{}", NULL));
    CHECK_STATUS(AGENT_ERR_NEWER_SCHEMA, set_if_s(v1, 1, "{\"x\":1}", NULL, NULL));
    CHECK_VERSIONED(v2, "{\"user\":{\"name\":\"ada\"}}", 1); /* nothing written */

    /* read_only reads every state as stored: a newer one, and an older one without upgrading */
    ro = open_store("schema_newer.db", "{\"read_only\":true}");
    CHECK_VERSIONED(ro, "{\"user\":{\"name\":\"ada\"}}", 1);
    CHECK_STATUS(AGENT_OK, agent_close(ro));
    CHECK_STATUS(AGENT_OK, agent_close(v2));
    CHECK_STATUS(AGENT_OK, agent_close(v1));

    v1 = open_store("schema_newer_old.db", NULL);
    CHECK_SET(v1, "{\"user\":{\"nick\":\"ada\"}}", "{\"user\":{\"nick\":\"ada\"}}");
    ro = open_store("schema_newer_old.db", V2_OPTIONS_WITH("\"read_only\":true"));
    CHECK_VERSIONED(ro, "{\"user\":{\"nick\":\"ada\"}}", 1);
    CHECK_STATUS(AGENT_OK, agent_close(ro));
    CHECK_VERSIONED(v1, "{\"user\":{\"nick\":\"ada\"}}", 1);
    CHECK_STATUS(AGENT_OK, agent_close(v1));
}

void test_schema_a_step_of_code_runs_and_a_failing_step_changes_nothing(void)
{
    AgentHandle v0 = open_store("schema_code.db", NULL);
    AgentHandle v1 = open_store("schema_code.db", "{\"schema_version\":1}");
    Step s;
    AgentBuffer out = junk_buffer();
    CHECK_SET(v0, "{\"status\":\"idle\"}", "{\"status\":\"idle\"}");

    /* no step for 0 -> 1: the migration fails */
    CHECK_STATUS(AGENT_ERR_MIGRATION, agent_get_state(v1, &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_HAS("schema step 0 -> 1");

    /* a failing step, with a message: in agent_last_error; nothing written */
    step_init(&s, 7, "status is unknown: \xc3\xa9", NULL);
    s.self = v1;
    CHECK_STATUS(AGENT_OK, agent_set_schema_step(v1, 0, step_fn, &s, step_free));
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_MIGRATION, agent_get_state(v1, &out));
    CHECK_EMPTY(out);
    CHECK_LAST_ERROR_FROM("agent_get_state");
    CHECK_LAST_ERROR_HAS("schema step 0 -> 1");
    CHECK_LAST_ERROR_HAS("status is unknown: \xc3\xa9");
    CHECK(s.calls == 1 && s.from == 0);
    CHECK(s.saw != NULL && strcmp(s.saw, "{\"status\":\"idle\"}") == 0);
    CHECK(s.self_rc == AGENT_ERR_BUSY); /* its own handle, from inside the step */
    s.self = 0;
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_MIGRATION, set_s(v1, "{\"x\":1}", &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_MIGRATION, replace_s(v1, "{\"x\":1}", NULL));
    CHECK_LAST_ERROR_HAS("status is unknown");
    /* without a message, and with an answer that is not an object */
    s.message = NULL;
    CHECK_STATUS(AGENT_ERR_MIGRATION, agent_get_state(v1, &out));
    CHECK_LAST_ERROR_HAS("schema step 0 -> 1");
    s.rc = 0;
    s.answer = "[1]";
    CHECK_STATUS(AGENT_ERR_MIGRATION, agent_get_state(v1, &out));
    s.answer = "{\"status\":";
    CHECK_STATUS(AGENT_ERR_MIGRATION, agent_get_state(v1, &out));
    CHECK_VERSIONED(v0, "{\"status\":\"idle\"}", 1); /* the stored state is as it was */

    /* a working step: its answer is committed as the migration, then the write */
    s.answer = "{\"status\":{\"name\":\"idle\"}}";
    CHECK_SET(v1, "{\"x\":1}", "{\"status\":{\"name\":\"idle\"},\"x\":1}");
    CHECK_VERSIONED(v1, "{\"status\":{\"name\":\"idle\"},\"x\":1}", 3);
    CHECK_STATUS(AGENT_OK, agent_close(v1));
    CHECK(s.freed == 1);
    CHECK_STATUS(AGENT_OK, agent_close(v0));
    free(s.saw);
}

void test_schema_step_user_data_is_freed_exactly_once(void)
{
    AgentHandle h = open_store("schema_free.db", V2_OPTIONS "}");
    AgentHandle h3 = open_store("schema_free3.db", "{\"schema_version\":3}");
    int a = 0, b = 0, c = 0, d = 0, e = 0, f = 0;
    /* a failing registration frees at once: from not below the version, a step the options
     * give, a bad handle */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_set_schema_step(h, 2, step_fn, &a, count_free));
    CHECK(a == 1);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_set_schema_step(h, 0, step_fn, &b, count_free));
    CHECK(b == 1);
    CHECK_LAST_ERROR_FROM("agent_set_schema_step");
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE,
                 agent_set_schema_step((AgentHandle)0xdeadbeef, 0, step_fn, &c, count_free));
    CHECK(c == 1);
    /* replaced: the old one's; removed; NULL fn with user_data: freed right away */
    CHECK_STATUS(AGENT_OK, agent_set_schema_step(h3, 0, step_fn, &d, count_free));
    CHECK_STATUS(AGENT_OK, agent_set_schema_step(h3, 0, step_fn, &e, count_free));
    CHECK(d == 1 && e == 0);
    CHECK_STATUS(AGENT_OK, agent_set_schema_step(h3, 0, NULL, &f, count_free));
    CHECK(e == 1 && f == 1);
    /* on close */
    CHECK_STATUS(AGENT_OK, agent_set_schema_step(h3, 1, step_fn, &a, count_free));
    CHECK_STATUS(AGENT_OK, agent_set_schema_step(h3, 2, step_fn, &b, count_free));
    CHECK_STATUS(AGENT_OK, agent_close(h3));
    CHECK(a == 2 && b == 2);
    /* after close: a bad handle, freed at once */
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_set_schema_step(h3, 0, step_fn, &c, count_free));
    CHECK(c == 2 && d == 1 && e == 1 && f == 1);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_schema_history_reads_as_stored_and_upgrade_state_upgrades(void)
{
    AgentHandle v1 = open_store("schema_history.db", "{\"change_log\":{\"keep_last\":10}}"), v2;
    AgentBuffer old = {NULL, 0, NULL}, now = {NULL, 0, NULL}, up = junk_buffer(), log = {0};
    uint32_t schema = 99;
    uint64_t version = 0;
    CHECK_SET(v1, "{\"user\":{\"nick\":\"ada\"}}", "{\"user\":{\"nick\":\"ada\"}}");
    v2 = open_store("schema_history.db", V2_OPTIONS "}");
    CHECK_VERSIONED(v2, "{\"user\":{\"name\":\"ada\"},\"messages\":[]}", 2);

    CHECK_STATUS(AGENT_OK, agent_get_state_at_stored(v2, 1, &old, &schema));
    CHECK_BUF(old, "{\"user\":{\"nick\":\"ada\"}}");
    CHECK(schema == 0);
    CHECK_STATUS(AGENT_OK, agent_get_state_at_stored(v2, 2, &now, NULL)); /* out_schema NULL */
    CHECK_BUF(now, "{\"user\":{\"name\":\"ada\"},\"messages\":[]}");
    CHECK_STATUS(AGENT_OK, agent_get_state_at_stored(v2, 0, &up, &schema));
    CHECK(schema == 2); /* the initial state: the handle's own version */
    agent_buffer_free(&up);

    CHECK_STATUS(AGENT_OK, agent_upgrade_state(v2, old.data, old.len, 0, &up));
    CHECK_BUF(up, "{\"user\":{\"name\":\"ada\"},\"messages\":[]}");
    agent_buffer_free(&up);
    CHECK_STATUS(AGENT_OK, agent_upgrade_state(v2, now.data, now.len, 2, &up)); /* as it is */
    CHECK_BUF(up, "{\"user\":{\"name\":\"ada\"},\"messages\":[]}");
    agent_buffer_free(&up);

    CHECK_STATUS(AGENT_OK, agent_changes_since(v2, 1, &log));
    CHECK(log.data != NULL &&
          strstr((const char *)log.data, "\"schema\":2,\"migrated_from\":0,\"patch\":null") != NULL);
    agent_buffer_free(&log);
    CHECK_STATUS(AGENT_OK, agent_changes_since(v2, 0, &log));
    CHECK(log.data != NULL &&
          strstr((const char *)log.data, "\"schema\":0,\"migrated_from\":null,") != NULL);
    agent_buffer_free(&log);

    /* restore writes the old state back upgraded */
    CHECK_SET(v2, "{\"messages\":[\"hi\"]}", "{\"user\":{\"name\":\"ada\"},\"messages\":[\"hi\"]}");
    CHECK_STATUS(AGENT_OK, agent_restore_state(v2, 1, &up, &version));
    CHECK_BUF(up, "{\"user\":{\"name\":\"ada\"},\"messages\":[]}");
    CHECK(version == 4);
    agent_buffer_free(&up);
    CHECK_STATUS(AGENT_OK, agent_get_state_at_stored(v2, version, &up, &schema));
    CHECK(schema == 2);
    agent_buffer_free(&up);

    /* the older program may read the history as stored, not the current state */
    CHECK_STATUS(AGENT_OK, agent_get_state_at_stored(v1, 1, &up, &schema));
    CHECK(schema == 0);
    agent_buffer_free(&up);
    agent_buffer_free(&old);
    agent_buffer_free(&now);
    CHECK_STATUS(AGENT_OK, agent_close(v1));
    CHECK_STATUS(AGENT_OK, agent_close(v2));
}

void test_schema_functions_refuse_bad_arguments(void)
{
    AgentHandle h = open_store("schema_args.db", V2_OPTIONS "}");
    const AgentHandle bad = (AgentHandle)0xdeadbeef;
    AgentBuffer out = junk_buffer();
    uint32_t v = 7;
    static const char state[] = "{\"a\":1}";

    /* open options */
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, tmp_path("schema_args_bad.db"),
                     "{\"schema_version\":1000001}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, tmp_path("schema_args_bad.db"),
                     "{\"schema_version\":-1}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, tmp_path("schema_args_bad.db"),
                     "{\"schema_version\":1,\"schema_steps\":[{\"from\":0,\"ops\":[{\"op\":\"explode\"}]}]}");
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, tmp_path("schema_args_bad.db"),
                     "{\"schema_steps\":{}}");

    /* agent_schema_version */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_schema_version(h, NULL));
    CHECK_LAST_ERROR_FROM("agent_schema_version");
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_schema_version(bad, &v));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_schema_version(0, &v));

    /* agent_get_state_at_stored */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_at_stored(h, 0, NULL, &v));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_get_state_at_stored(bad, 0, &out, &v));
    CHECK_EMPTY(out);
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state_at_stored(h, 5, &out, &v)); /* future */
    CHECK_EMPTY(out);

    /* agent_upgrade_state */
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT,
                 agent_upgrade_state(h, (const uint8_t *)state, strlen(state), 0, NULL));
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_upgrade_state(h, NULL, 3, 0, &out));
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE,
                 agent_upgrade_state(bad, (const uint8_t *)state, strlen(state), 0, &out));
    CHECK_STATUS(AGENT_ERR_NEWER_SCHEMA,
                 agent_upgrade_state(h, (const uint8_t *)state, strlen(state), 3, &out));
    CHECK_LAST_ERROR_FROM("agent_upgrade_state");
    CHECK_EMPTY(out);
    CHECK_STATUS(AGENT_ERR_JSON, agent_upgrade_state(h, (const uint8_t *)"{", 1, 0, &out));
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_upgrade_state(h, (const uint8_t *)"[1]", 3, 0, &out));
    CHECK_EMPTY(out);

    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_schema_version(h, &v));
    CHECK_STATUS(AGENT_ERR_BAD_HANDLE, agent_upgrade_state(h, (const uint8_t *)state, strlen(state), 0, &out));
}
