/*
 * The C suite (tests/c/main.c runs it): a store's agents as a whole (agent_store_list,
 * agent_store_delete, agent_store_expire). Listing pages and prefixes, the JSON of an entry,
 * deleting an agent an open handle uses (what the handle reads, its hook, compare-and-set
 * afterwards), if_version, erasure from the file and its WAL, expiry and its dry run, and the
 * statuses of bad arguments.
 *
 * On PostgreSQL a test's agents are those of its own namespace (this run's agent prefix, the
 * test's name, '/'), listed with that prefix; the tests of files, of a file's single agent and
 * of expiry by a short idle time (which would reach other programs' agents of the server) are
 * SQLite's only.
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Where a test's agents are                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* The store of test store `name`: its file, or on PostgreSQL the server. */
static const char *store_of(const char *name)
{
    return g_pg ? g_pg_uri : tmp_path(name);
}

/* The prefix of test store `name`'s agent ids: "" in its own file, "<run prefix><name>/" on
 * PostgreSQL. In a static buffer. */
static const char *ns_of(const char *name)
{
    static char ns[200];
    snprintf(ns, sizeof ns, "%s%s%s", g_pg ? g_agent_prefix : "", g_pg ? name : "",
             g_pg ? "/" : "");
    return ns;
}

/* The full id of agent `id` of test store `name`, in `buf`. */
static const char *full_id(char *buf, size_t cap, const char *name, const char *id)
{
    snprintf(buf, cap, "%s%s", ns_of(name), id);
    return buf;
}

/* Opens agent `id` of test store `name`, with `more` options ("" or `,"key":value...`). */
static AgentHandle open_agent(const char *name, const char *id, const char *more)
{
    char options[600], full[300];
    AgentHandle h = 0;
    snprintf(options, sizeof options, "{\"agent_id\":\"%s\"%s}", full_id(full, sizeof full, name, id),
             more);
    if (!CHECK_STATUS(AGENT_OK, agent_open(store_of(name), options, &h))) {
        fprintf(stderr, "    (while opening %s with %s)\n", store_of(name), options);
    }
    return h;
}

/* Writes `state` (a replacement) to agent `id` of store `name`, and closes the handle. */
static void write_agent(const char *name, const char *id, const char *state)
{
    AgentHandle h = open_agent(name, id, "");
    CHECK_STATUS(AGENT_OK, replace_s(h, state, NULL));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* One page of store `name`'s agents, `prefix` within its namespace (NULL: all of them),
 * `after` a local id (NULL: from the first). The caller frees the buffer. */
static AgentStatus list_page(const char *name, const char *prefix, const char *after,
                             uint32_t limit, AgentBuffer *out)
{
    char full_prefix[300], full_after[300];
    full_id(full_prefix, sizeof full_prefix, name, prefix ? prefix : "");
    return agent_store_list(store_of(name), NULL, g_pg || prefix ? full_prefix : NULL,
                            after ? full_id(full_after, sizeof full_after, name, after) : NULL,
                            limit, out);
}

/*
 * The ids of a listing's JSON text, without the namespace `ns`, each followed by a space, in
 * `ids` (empty for "[]"); entries outside the namespace (other agents of a server) are
 * skipped. Returns the number of entries in the text.
 */
static int ids_of(const AgentBuffer *b, const char *ns, char *ids, size_t cap)
{
    const char *p = (const char *)b->data;
    size_t n_ns = strlen(ns), used = 0;
    int count = 0;
    ids[0] = 0;
    if (p == NULL) {
        return 0;
    }
    while ((p = strstr(p, "{\"id\":\"")) != NULL) {
        const char *id = p + 7;
        const char *end = strchr(id, '"');
        if (end == NULL) {
            break;
        }
        count++;
        if ((size_t)(end - id) >= n_ns && strncmp(id, ns, n_ns) == 0) {
            int wrote = snprintf(ids + used, cap - used, "%.*s ", (int)(end - id - (long)n_ns),
                                 id + n_ns);
            if (wrote > 0 && used + (size_t)wrote < cap) {
                used += (size_t)wrote;
            }
        }
        p = end;
    }
    return count;
}

#define CHECK_IDS(buf, ns, want) check_ids_(&(buf), (ns), (want), __FILE__, __LINE__)

static void check_ids_(const AgentBuffer *b, const char *ns, const char *want, const char *file,
                       int line)
{
    char ids[8192];
    ids_of(b, ns, ids, sizeof ids);
    check_(strcmp(ids, want) == 0, file, line, "listed \"%s\", expected \"%s\" (%.*s)", ids, want,
           b->data ? (int)(b->len > 300 ? 300 : b->len) : 6, b->data ? (const char *)b->data : "(NULL)");
}

/* The listing of every agent of test store `name` (one page of up to 10000), as ids. */
#define CHECK_LISTED(name, want) check_listed_((name), (want), __FILE__, __LINE__)

static void check_listed_(const char *name, const char *want, const char *file, int line)
{
    AgentBuffer b = { NULL, 0, NULL };
    AgentStatus rc = list_page(name, NULL, NULL, 10000, &b);
    check_(rc == AGENT_OK, file, line, "agent_store_list: %s (%s)", agent_status_name(rc),
           error_if_failed(rc));
    check_ids_(&b, ns_of(name), want, file, line);
    agent_buffer_free(&b);
}

/* Whether the buffer's text starts with `text`. */
static int starts_with(const AgentBuffer *b, const char *text)
{
    return b->data != NULL && b->len >= strlen(text) &&
           strncmp((const char *)b->data, text, strlen(text)) == 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------------------------ */
/* Listing                                                                                    */
/* ------------------------------------------------------------------------------------------ */

void test_store_list_pages_by_id_and_filters_by_prefix(void)
{
    const char *name = "store_list.db";
    const char *ns = ns_of(name);
    char ns_copy[200], id[32], want[4096], got[4096], after[64], text[512], full[300];
    AgentBuffer page = junk_buffer();
    long long t0 = now_ms(), t1;
    size_t used = 0;
    int i, pages = 0, total = 0;
    AgentHandle h;
    snprintf(ns_copy, sizeof ns_copy, "%s", ns);
    /* 25 agents written out of id order, and two under "b/". */
    for (i = 24; i >= 0; i--) {
        snprintf(id, sizeof id, "a%02d", i);
        write_agent(name, id, "{\"n\":1}");
    }
    h = open_agent(name, "b/1", "");
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"x\":\"0123456789\"}", NULL));
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"y\":true}", NULL));
    CHECK_STATUS(AGENT_OK, agent_close(h));
    write_agent(name, "b/2", "{}");
    /* Opened but never written: not listed. */
    h = open_agent(name, "c", "");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    t1 = now_ms();

    /* Pages of 10 ids, each after the last id of the one before, until one holds fewer. */
    for (i = 0; i < 25; i++) {
        used += (size_t)snprintf(want + used, sizeof want - used, "a%02d ", i);
    }
    snprintf(want + used, sizeof want - used, "b/1 b/2 ");
    got[0] = 0;
    after[0] = 0;
    for (;;) {
        char ids[2048];
        int n;
        CHECK_STATUS(AGENT_OK, list_page(name, NULL, after[0] ? after : NULL, 10, &page));
        CHECK(page.data != NULL && page.data[page.len] == 0 && page.data[0] == '[' &&
              page.data[page.len - 1] == ']');
        n = ids_of(&page, ns_copy, ids, sizeof ids);
        pages++;
        total += n;
        strncat(got, ids, sizeof got - strlen(got) - 1);
        if (n > 0) {
            /* the last id of the page: its last word */
            char *last = ids + strlen(ids) - 1;
            *last = 0;
            last = strrchr(ids, ' ');
            snprintf(after, sizeof after, "%.60s", last ? last + 1 : ids);
        }
        agent_buffer_free(&page);
        if (n < 10 || pages > 10) {
            break;
        }
    }
    CHECK(strcmp(got, want) == 0);
    CHECK(pages == 3);
    CHECK(total == 27);

    /* One entry's JSON: id, version, bytes (the stored state's size), written_at (ms). */
    CHECK_STATUS(AGENT_OK, list_page(name, "b/", NULL, 100, &page));
    CHECK_IDS(page, ns_copy, "b/1 b/2 ");
    snprintf(text, sizeof text, "[{\"id\":\"%s\",\"version\":2,\"bytes\":%zu,\"written_at\":",
             full_id(full, sizeof full, name, "b/1"), strlen("{\"x\":\"0123456789\",\"y\":true}"));
    CHECK(starts_with(&page, text));
    if (page.data != NULL) {
        const char *at = strstr((const char *)page.data, "\"written_at\":");
        long long written = at ? strtoll(at + 13, NULL, 10) : 0;
        CHECK(written >= t0 - 1000 && written <= t1 + 1000);
        snprintf(text, sizeof text, "},{\"id\":\"%s\",\"version\":1,\"bytes\":2,\"written_at\":",
                 full_id(full, sizeof full, name, "b/2"));
        CHECK(strstr((const char *)page.data, text) != NULL);
        CHECK(strstr((const char *)page.data, "}]") == (const char *)page.data + page.len - 2);
    }
    agent_buffer_free(&page);

    /* A prefix with a page limit, a prefix with after, a prefix nothing has. */
    CHECK_STATUS(AGENT_OK, list_page(name, "a1", NULL, 3, &page));
    CHECK_IDS(page, ns_copy, "a10 a11 a12 ");
    agent_buffer_free(&page);
    CHECK_STATUS(AGENT_OK, list_page(name, "a1", "a18", 3, &page));
    CHECK_IDS(page, ns_copy, "a19 ");
    agent_buffer_free(&page);
    CHECK_STATUS(AGENT_OK, list_page(name, "zz", NULL, 10000, &page));
    CHECK_BUF(page, "[]");
    agent_buffer_free(&page);
    /* The options of agent_open are taken (and their agent's own ignored). */
    snprintf(text, sizeof text, "{\"busy_timeout_ms\":100,\"read_only\":true,\"agent_id\":\"x\"}");
    CHECK_STATUS(AGENT_OK, agent_store_list(store_of(name), text, full_id(full, sizeof full, name, "b/"),
                                            NULL, 1, &page));
    CHECK_IDS(page, ns_copy, "b/1 ");
    agent_buffer_free(&page);
}

void test_store_list_shows_a_files_single_agent_as_the_empty_id(void)
{
    const char *path = tmp_path("store_single.db");
    AgentHandle single = open_at(path, NULL);
    AgentBuffer page = { NULL, 0, NULL };
    uint64_t deleted = 99;
    CHECK_STATUS(AGENT_OK, set_s(single, "{\"single\":1}", NULL));
    write_agent("store_single.db", "x", "{\"named\":1}");
    CHECK_STATUS(AGENT_OK, agent_store_list(path, NULL, NULL, NULL, 10, &page));
    CHECK_IDS(page, "", " x "); /* the id "" first */
    CHECK(starts_with(&page, "[{\"id\":\"\",\"version\":1,\"bytes\":12,\"written_at\":"));
    agent_buffer_free(&page);
    CHECK_STATUS(AGENT_OK, agent_store_delete(path, NULL, "", -1, &deleted));
    CHECK(deleted == 1);
    CHECK_VERSIONED(single, "{}", 0);
    CHECK_LISTED("store_single.db", "x ");
    CHECK_STATUS(AGENT_OK, agent_close(single));
}

/* ------------------------------------------------------------------------------------------ */
/* Deleting                                                                                   */
/* ------------------------------------------------------------------------------------------ */

void test_store_delete_of_an_open_handles_agent(void)
{
    const char *name = "store_delete.db";
    char full[300];
    AgentHandle h = open_agent(name, "x", ",\"change_log\":{\"keep_last\":10}");
    AgentHandle other;
    AgentBuffer out = junk_buffer();
    uint64_t deleted = 99, v = 99;
    size_t delivered = 99;
    Recorder r;
    recorder_init(&r, NULL);
    add_recorder(h, &r);
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"n\":1}", NULL));
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"n\":2}", NULL));
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"n\":3,\"last\":true}", NULL));
    CHECK_VERSIONED(h, "{\"n\":3,\"last\":true}", 3);
    write_agent(name, "y", "{\"keep\":1}");
    CHECK_LISTED(name, "x y ");

    CHECK_STATUS(AGENT_OK, agent_store_delete(store_of(name), NULL, full_id(full, sizeof full, name, "x"),
                                              -1, &deleted));
    CHECK(deleted == 3);
    CHECK_LISTED(name, "y ");
    /* The open handle finds it gone: the initial state at version 0. */
    CHECK_VERSIONED(h, "{}", 0);
    /* Its hook gets the deletion as one change, from the last state to the initial state. */
    r.calls = 0;
    CHECK_STATUS(AGENT_OK, agent_poll(h, &delivered));
    CHECK(delivered == 1);
    CHECK(r.calls == 1);
    CHECK(r.version == 0);
    CHECK(r.prev != NULL && strcmp(r.prev, "{\"n\":3,\"last\":true}") == 0);
    CHECK(r.next != NULL && strcmp(r.next, "{}") == 0);
    CHECK(r.patch == NULL);
    CHECK(r.bad_views == 0);
    /* A compare-and-set against the version read before never succeeds ... */
    out = junk_buffer();
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, 3, "{\"n\":4}", &out, &v));
    CHECK_LAST_ERROR_FROM("agent_set_state_if");
    CHECK_EMPTY(out);
    CHECK_VERSIONED(h, "{}", 0);
    /* ... and the next write continues above the deleted versions. */
    CHECK_STATUS(AGENT_OK, set_if_s(h, 0, "{\"again\":1}", &out, &v));
    CHECK_BUF(out, "{\"again\":1}");
    CHECK(v > 3);
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_ERR_CONFLICT, set_if_s(h, 3, "{\"n\":4}", NULL, NULL));
    other = open_agent(name, "x", "");
    CHECK_VERSIONED(other, "{\"again\":1}", v);
    CHECK_STATUS(AGENT_OK, agent_close(other));
    /* Deleting what is not stored does nothing, and is no error; the version out may be NULL. */
    CHECK_STATUS(AGENT_OK, agent_store_delete(store_of(name), NULL, full_id(full, sizeof full, name, "x"),
                                              -1, NULL));
    deleted = 99;
    CHECK_STATUS(AGENT_OK, agent_store_delete(store_of(name), NULL, full_id(full, sizeof full, name, "x"),
                                              -1, &deleted));
    CHECK(deleted == 0);
    CHECK_LISTED(name, "y ");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(r.freed == 1);
    recorder_destroy(&r);
}

void test_store_delete_if_version_deletes_only_at_that_version(void)
{
    const char *name = "store_delete_if.db";
    const char *path = store_of(name);
    char full[300];
    const char *a = full_id(full, sizeof full, name, "a");
    AgentHandle h = open_agent(name, "a", "");
    uint64_t deleted = 99;
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"v\":1}", NULL));
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"v\":2}", NULL));
    /* A stale, a future and the "nothing stored" version: CONFLICT, nothing deleted. */
    CHECK_STATUS(AGENT_ERR_CONFLICT, agent_store_delete(path, NULL, a, 1, &deleted));
    CHECK_LAST_ERROR_FROM("agent_store_delete");
    CHECK_LAST_ERROR_HAS("version");
    CHECK(deleted == 0);
    CHECK_STATUS(AGENT_ERR_CONFLICT, agent_store_delete(path, NULL, a, 3, &deleted));
    CHECK_STATUS(AGENT_ERR_CONFLICT, agent_store_delete(path, NULL, a, 0, &deleted));
    CHECK_VERSIONED(h, "{\"v\":2}", 2);
    CHECK_LISTED(name, "a ");
    /* The current version: deleted. */
    CHECK_STATUS(AGENT_OK, agent_store_delete(path, NULL, a, 2, &deleted));
    CHECK(deleted == 2);
    CHECK_VERSIONED(h, "{}", 0);
    CHECK_LISTED(name, "");
    /* Nothing stored is version 0: if_version 0 matches it (and deletes nothing). */
    deleted = 99;
    CHECK_STATUS(AGENT_OK, agent_store_delete(path, NULL, a, 0, &deleted));
    CHECK(deleted == 0);
    CHECK_STATUS(AGENT_ERR_CONFLICT, agent_store_delete(path, NULL, a, 2, &deleted));
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* Whether `marker` is in the bytes of `path` and of its WAL. */
static int marker_in_files(const char *path, const char *marker)
{
    const size_t cap = 64u << 20;
    char *buf = malloc(cap);
    char wal[600];
    long n;
    int found = 0;
    if (buf == NULL) {
        perror("malloc");
        exit(2);
    }
    n = read_file(path, buf, cap);
    CHECK(n > 0 && (size_t)n < cap);
    if (n > 0 && memmem(buf, (size_t)n, marker, strlen(marker)) != NULL) {
        found = 1;
    }
    snprintf(wal, sizeof wal, "%s-wal", path);
    n = file_exists(wal) ? read_file(wal, buf, cap) : 0;
    CHECK(n >= 0 && (size_t)n < cap);
    if (n > 0 && memmem(buf, (size_t)n, marker, strlen(marker)) != NULL) {
        found = 1;
    }
    free(buf);
    return found;
}

void test_store_delete_erases_the_agent_from_the_file_and_its_wal(void)
{
    const char *path = tmp_path("store_erase.db");
    const char *marker = "MARKER-c-5e1f-erase-me";
    AgentHandle h = open_agent("store_erase.db", "victim", ",\"change_log\":{\"keep_last\":100}");
    AgentHandle bystander = open_agent("store_erase.db", "bystander", "");
    char patch[200];
    uint64_t deleted = 0;
    int i;
    for (i = 0; i < 20; i++) {
        snprintf(patch, sizeof patch, "{\"secret\":\"%s-%d\",\"i\":%d}", marker, i, i);
        CHECK_STATUS(AGENT_OK, set_s(h, patch, NULL));
    }
    CHECK_STATUS(AGENT_OK, set_s(bystander, "{\"harmless\":true}", NULL));
    CHECK(marker_in_files(path, marker)); /* the state and the history hold it */
    CHECK_STATUS(AGENT_OK, agent_store_delete(path, NULL, "victim", -1, &deleted));
    CHECK(deleted == 20);
    CHECK(!marker_in_files(path, marker));
    /* The handle to it is still open and reads nothing stored; the other agent is intact. */
    CHECK_VERSIONED(h, "{}", 0);
    CHECK_VERSIONED(bystander, "{\"harmless\":true}", 1);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK_STATUS(AGENT_OK, agent_close(bystander));
    CHECK(!marker_in_files(path, marker));
}

/* ------------------------------------------------------------------------------------------ */
/* Expiry                                                                                     */
/* ------------------------------------------------------------------------------------------ */

void test_store_expire_dry_run_lists_and_deletes_in_batches(void)
{
    const char *name = "store_expire.db";
    const char *path = tmp_path(name);
    const uint64_t ten_years = 10ull * 365 * 86400000;
    AgentBuffer out = junk_buffer();
    AgentHandle h;
    write_agent(name, "a", "{\"a\":1}");
    write_agent(name, "b", "{\"b\":1}");
    write_agent(name, "c", "{\"c\":1}");
    sleep_ms(20);

    /* Nothing idle for ten years. */
    CHECK_STATUS(AGENT_OK, agent_store_expire(path, NULL, ten_years, 100, 1, &out));
    CHECK_BUF(out, "[]");
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_store_expire(path, NULL, ten_years, 100, 0, &out));
    CHECK_BUF(out, "[]");
    agent_buffer_free(&out);
    /* A dry run lists (the JSON of agent_store_list) and deletes nothing, also read-only. */
    CHECK_STATUS(AGENT_OK, agent_store_expire(path, "{\"read_only\":true}", 10, 100, 1, &out));
    CHECK_IDS(out, "", "a b c ");
    CHECK(starts_with(&out, "[{\"id\":\"a\",\"version\":1,\"bytes\":7,\"written_at\":"));
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_store_expire(path, NULL, 10, 2, 1, &out));
    CHECK_IDS(out, "", "a b ");
    agent_buffer_free(&out);
    CHECK_LISTED(name, "a b c ");
    /* A real run deletes one bounded batch per call. */
    CHECK_STATUS(AGENT_OK, agent_store_expire(path, NULL, 10, 2, 0, &out));
    CHECK_IDS(out, "", "a b ");
    agent_buffer_free(&out);
    CHECK_LISTED(name, "c ");
    /* Written again: not idle. */
    h = open_agent(name, "c", "");
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"again\":1}", NULL));
    CHECK_STATUS(AGENT_OK, agent_store_expire(path, NULL, 60000, 2, 0, &out));
    CHECK_BUF(out, "[]");
    agent_buffer_free(&out);
    CHECK_VERSIONED(h, "{\"c\":1,\"again\":1}", 2);
    sleep_ms(20);
    CHECK_STATUS(AGENT_OK, agent_store_expire(path, NULL, 10, 2, 0, &out));
    CHECK_IDS(out, "", "c ");
    agent_buffer_free(&out);
    CHECK_VERSIONED(h, "{}", 0);
    CHECK_LISTED(name, "");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* ------------------------------------------------------------------------------------------ */
/* Bad arguments                                                                              */
/* ------------------------------------------------------------------------------------------ */

/* `call` returns `want`, and the last error names `fn` and holds `text`. */
#define CHECK_REFUSED(want, fn, text, call) \
    do { \
        if (CHECK_STATUS((want), (call))) { \
            CHECK_LAST_ERROR_FROM(fn); \
            CHECK_LAST_ERROR_HAS(text); \
        } \
    } while (0)

/* The same for a call given &out, which it leaves the empty buffer. */
#define CHECK_REFUSED_OUT(want, fn, text, call) \
    do { \
        out = junk_buffer(); \
        CHECK_REFUSED((want), (fn), (text), (call)); \
        CHECK_EMPTY(out); \
    } while (0)

void test_store_functions_refuse_bad_arguments(void)
{
    const char *name = "store_bad.db";
    const char *path = store_of(name);
    char full[300], long_id[300], before[8192], after_text[8192];
    const char *a = full_id(full, sizeof full, name, "a");
    AgentBuffer out = junk_buffer();
    AgentBuffer listed = { NULL, 0, NULL };
    uint64_t deleted = 99;
    AgentHandle h = open_agent(name, "a", "");
    CHECK_STATUS(AGENT_OK, set_s(h, "{\"keep\":true}", NULL));
    memset(long_id, 'x', 256);
    long_id[256] = 0;
    CHECK_STATUS(AGENT_OK, list_page(name, NULL, NULL, 10000, &listed));
    snprintf(before, sizeof before, "%.*s", listed.data ? (int)listed.len : 0,
             listed.data ? (const char *)listed.data : "");
    agent_buffer_free(&listed);

    /* agent_store_list */
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_list", "path is NULL",
                  agent_store_list(NULL, NULL, NULL, NULL, 10, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_list", "path is empty",
                  agent_store_list("", NULL, NULL, NULL, 10, &out));
    CHECK_REFUSED(AGENT_ERR_INVALID_ARGUMENT, "agent_store_list", "out is NULL",
                  agent_store_list(path, NULL, NULL, NULL, 10, NULL));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_list", "limit must be from 1 to 10000, got 0",
                  agent_store_list(path, NULL, NULL, NULL, 0, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_list", "got 10001",
                  agent_store_list(path, NULL, NULL, NULL, 10001, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_list", "prefix",
                  agent_store_list(path, NULL, long_id, NULL, 10, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_list", "after",
                  agent_store_list(path, NULL, NULL, long_id, 10, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_list", "prefix is not UTF-8",
                  agent_store_list(path, NULL, "\xff", NULL, 10, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_JSON, "agent_store_list", "options",
                  agent_store_list(path, "{", NULL, NULL, 10, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_list", "unknown option",
                  agent_store_list(path, "{\"nope\":1}", NULL, NULL, 10, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_list", "busy_timeout_ms",
                  agent_store_list(path, "{\"busy_timeout_ms\":-1}", NULL, NULL, 10, &out));
    /* The limits themselves are accepted. */
    CHECK_STATUS(AGENT_OK, agent_store_list(path, NULL, NULL, NULL, 1, &out));
    agent_buffer_free(&out);
    CHECK_STATUS(AGENT_OK, agent_store_list(path, NULL, NULL, NULL, 10000, &out));
    agent_buffer_free(&out);
    out = junk_buffer();

    /* agent_store_delete: *out_deleted_version is 0 after a failure. */
    CHECK_REFUSED(AGENT_ERR_INVALID_ARGUMENT, "agent_store_delete", "path is NULL",
                  agent_store_delete(NULL, NULL, a, -1, &deleted));
    CHECK(deleted == 0);
    deleted = 99;
    CHECK_REFUSED(AGENT_ERR_INVALID_ARGUMENT, "agent_store_delete", "path is empty",
                  agent_store_delete("", NULL, a, -1, &deleted));
    CHECK(deleted == 0);
    CHECK_REFUSED(AGENT_ERR_INVALID_ARGUMENT, "agent_store_delete", "agent_id is NULL",
                  agent_store_delete(path, NULL, NULL, -1, &deleted));
    CHECK_REFUSED(AGENT_ERR_INVALID_ARGUMENT, "agent_store_delete",
                  "if_version must be -1 (any) or a version, got -2",
                  agent_store_delete(path, NULL, a, -2, &deleted));
    CHECK_REFUSED(AGENT_ERR_INVALID_ARGUMENT, "agent_store_delete", "got -9223372036854775808",
                  agent_store_delete(path, NULL, a, INT64_MIN, &deleted));
    CHECK_REFUSED(AGENT_ERR_INVALID_ARGUMENT, "agent_store_delete", "agent id",
                  agent_store_delete(path, NULL, long_id, -1, &deleted));
    CHECK_REFUSED(AGENT_ERR_INVALID_ARGUMENT, "agent_store_delete", "agent_id is not UTF-8",
                  agent_store_delete(path, NULL, "\xc3", -1, &deleted));
    CHECK_REFUSED(AGENT_ERR_JSON, "agent_store_delete", "options",
                  agent_store_delete(path, "{\"busy_timeout_ms\":", a, -1, &deleted));
    CHECK_REFUSED(AGENT_ERR_INVALID_ARGUMENT, "agent_store_delete", "unknown option",
                  agent_store_delete(path, "{\"nope\":1}", a, -1, &deleted));
    CHECK_REFUSED(AGENT_ERR_STORAGE, "agent_store_delete", "",
                  agent_store_delete(path, "{\"read_only\":true}", a, -1, &deleted));
    CHECK(deleted == 0);

    /* agent_store_expire (a year: nothing of this run is that idle) */
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_expire", "path is NULL",
                  agent_store_expire(NULL, NULL, 0, 10, 1, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_expire", "path is empty",
                  agent_store_expire("", NULL, 0, 10, 1, &out));
    CHECK_REFUSED(AGENT_ERR_INVALID_ARGUMENT, "agent_store_expire", "out is NULL",
                  agent_store_expire(path, NULL, 0, 10, 0, NULL));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_expire", "got 0",
                  agent_store_expire(path, NULL, 0, 0, 0, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_expire", "got 10001",
                  agent_store_expire(path, NULL, 0, 10001, 0, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_JSON, "agent_store_expire", "options",
                  agent_store_expire(path, "nope", 0, 10, 0, &out));
    CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_expire", "max_connections",
                  agent_store_expire(path, "{\"max_connections\":0}", 0, 10, 0, &out));
    CHECK_STATUS(AGENT_OK, agent_store_expire(path, NULL, 365ull * 86400000, 10000, 1, &out));
    agent_buffer_free(&out);
    out = junk_buffer();

    if (!g_pg) {
        /* No store there: STORAGE, and none is created; ":memory:" has no agents to list. */
        const char *missing = tmp_path("store_missing.db");
        CHECK_REFUSED_OUT(AGENT_ERR_STORAGE, "agent_store_list", "no agent store",
                      agent_store_list(missing, NULL, NULL, NULL, 10, &out));
        CHECK_REFUSED(AGENT_ERR_STORAGE, "agent_store_delete", "no agent store",
                      agent_store_delete(missing, NULL, "a", -1, &deleted));
        CHECK_REFUSED_OUT(AGENT_ERR_STORAGE, "agent_store_expire", "no agent store",
                      agent_store_expire(missing, NULL, 0, 10, 0, &out));
        CHECK(!file_exists(missing));
        CHECK_REFUSED_OUT(AGENT_ERR_INVALID_ARGUMENT, "agent_store_list", "in-memory",
                      agent_store_list(":memory:", NULL, NULL, NULL, 10, &out));
        CHECK_REFUSED(AGENT_ERR_INVALID_ARGUMENT, "agent_store_delete", "in-memory",
                      agent_store_delete(":memory:", NULL, "a", -1, &deleted));
    }

    /* Nothing changed. */
    CHECK_VERSIONED(h, "{\"keep\":true}", 1);
    CHECK_STATUS(AGENT_OK, list_page(name, NULL, NULL, 10000, &listed));
    snprintf(after_text, sizeof after_text, "%.*s", listed.data ? (int)listed.len : 0,
             listed.data ? (const char *)listed.data : "");
    agent_buffer_free(&listed);
    CHECK(strcmp(before, after_text) == 0);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}
