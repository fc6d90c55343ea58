/*
 * The C suite (tests/c/main.c runs it): the store files. Foreign and corrupt files,
 * storage errors, persistence and the file's mode, paths, ":memory:", two handles on one file.
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Storage                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* One 512-byte page: a valid, empty SQLite database with the given header fields. */
static void craft_sqlite_file(unsigned char page[512], uint32_t application_id,
                              uint32_t user_version)
{
    static const unsigned char magic[16] = "SQLite format 3";
    memset(page, 0, 512);
    memcpy(page, magic, 16);
    page[16] = 0x02; /* page size 512 */
    page[18] = 1;    /* write version: legacy */
    page[19] = 1;    /* read version */
    page[21] = 64;
    page[22] = 32;
    page[23] = 32;
    page[27] = 1; /* change counter */
    page[31] = 1; /* size in pages */
    page[47] = 4; /* schema format */
    page[59] = 1; /* UTF-8 */
    page[60] = (unsigned char)(user_version >> 24);
    page[61] = (unsigned char)(user_version >> 16);
    page[62] = (unsigned char)(user_version >> 8);
    page[63] = (unsigned char)user_version;
    page[68] = (unsigned char)(application_id >> 24);
    page[69] = (unsigned char)(application_id >> 16);
    page[70] = (unsigned char)(application_id >> 8);
    page[71] = (unsigned char)application_id;
    page[95] = 1;  /* version-valid-for */
    page[100] = 0x0D; /* page 1: an empty leaf table b-tree (sqlite_schema) */
    page[105] = 0x02; /* cell content area starts at 512 */
}

/* Opening `path` fails with AGENT_ERR_STORAGE, and the file and its directory are untouched. */
#define CHECK_REFUSED_FILE(path, bytes, n) check_refused_file_((path), (bytes), (n), __FILE__, __LINE__)

static void check_refused_file_(const char *path, const unsigned char *bytes, size_t n,
                                const char *file, int line)
{
    static unsigned char after[8192];
    char side[600];
    const char *suffix[3] = { "-wal", "-shm", "-journal" };
    AgentHandle h = 77;
    long got;
    int i;
    check_status_(agent_open(path, NULL, &h), AGENT_ERR_STORAGE, file, line, "agent_open(foreign file)");
    check_(h == 0, file, line, "failed open left *out = %llu", (unsigned long long)h);
    check_last_error_from_("agent_open", file, line);
    got = read_file(path, after, sizeof after);
    check_(got == (long)n && memcmp(after, bytes, n) == 0, file, line,
           "%s changed: %ld bytes now, %zu before", path, got, n);
    for (i = 0; i < 3; i++) {
        snprintf(side, sizeof side, "%s%s", path, suffix[i]);
        check_(!file_exists(side), file, line, "opening a foreign file created %s", side);
    }
}

void test_storage_refuses_files_that_are_not_agent_stores(void)
{
    static unsigned char text[4096];
    static unsigned char page[512];
    const char *p;
    size_t i;
    const char *line = "This is a plain text file, not a database. ";
    for (i = 0; i < sizeof text; i++) {
        text[i] = (unsigned char)line[i % strlen(line)];
    }
    p = tmp_path("text_file.db");
    CHECK(write_file(p, text, sizeof text));
    CHECK_REFUSED_FILE(p, text, sizeof text);

    craft_sqlite_file(page, 0x12345678, 0); /* an SQLite database of another application */
    p = tmp_path("foreign_sqlite.db");
    CHECK(write_file(p, page, sizeof page));
    CHECK_REFUSED_FILE(p, page, sizeof page);

    craft_sqlite_file(page, 0x41675374, 99); /* an agent store ("AgSt") of a newer schema */
    p = tmp_path("newer_schema.db");
    CHECK(write_file(p, page, sizeof page));
    CHECK_REFUSED_FILE(p, page, sizeof page);
}

void test_storage_errors_for_missing_directory_and_read_only(void)
{
    AgentHandle h = 77;
    const char *missing = tmp_path("no/such/dir/x.db");
    const char *absent = tmp_path("absent_read_only.db");
    const char *p = tmp_path("read_only.db");

    CHECK_STATUS(AGENT_ERR_STORAGE, agent_open(missing, NULL, &h));
    CHECK(h == 0);
    CHECK_LAST_ERROR_FROM("agent_open");

    h = 77;
    CHECK_STATUS(AGENT_ERR_STORAGE, agent_open(absent, "{\"read_only\":true}", &h));
    CHECK(h == 0);
    CHECK(!file_exists(absent)); /* read-only never creates */

    h = open_at(p, NULL);
    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, "{\"read_only\":true,\"initial_state\":{\"x\":1}}");
    CHECK_STATE(h, "{\"a\":1}");
    CHECK_REJECTED_S(h, AGENT_ERR_STORAGE, "{\"b\":2}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, NULL);
    CHECK_STATE(h, "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_state_persists_and_new_store_file_is_private(void)
{
    const char *p = tmp_path("mode.db");
    struct stat st;
    AgentHandle h;
    mode_t old = umask(022);
    h = open_at(p, NULL);
    umask(old);
    CHECK(stat(p, &st) == 0);
    check_((st.st_mode & 0777) == 0600, __FILE__, __LINE__, "new store file has mode %03o, expected 600",
           (unsigned)(st.st_mode & 0777));
    CHECK_SET(h, "{\"n\":1,\"s\":\"kept\"}", "{\"n\":1,\"s\":\"kept\"}");
    CHECK_SET(h, "{\"n\":2}", "{\"n\":2,\"s\":\"kept\"}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, "{\"initial_state\":{\"other\":1}}");
    CHECK_STATE(h, "{\"n\":2,\"s\":\"kept\"}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
}

/* Checks that `name` (relative to the current directory) exists with mode 0600. */
static void check_private_file(const char *name, int line)
{
    struct stat st;
    int ok = stat(name, &st) == 0 && (st.st_mode & 0777) == 0600;
    check_(ok, __FILE__, line, "%s: %s", name,
           ok ? "" : (access(name, F_OK) == 0 ? "mode is not 0600" : "missing"));
}

/* The bundled SQLite reads names starting with "file:" as URIs; a path is a file name. */
void test_uri_looking_paths_open_exactly_the_named_file(void)
{
    static const char *const names[] = {"file:notes.db", "file:z.db#frag",
                                        "file:q.db?mode=memory&cache=shared"};
    char cwd[4096];
    size_t i;
    mode_t old = umask(022);
    if (getcwd(cwd, sizeof cwd) == NULL || chdir(g_dir) != 0) {
        check_(0, __FILE__, __LINE__, "cannot enter %s", g_dir);
        umask(old);
        return;
    }
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        char side[600];
        AgentHandle h = open_at(names[i], NULL);
        CHECK_SET(h, "{\"n\":1}", "{\"n\":1}");
        check_private_file(names[i], __LINE__);
        snprintf(side, sizeof side, "%s-wal", names[i]);
        check_private_file(side, __LINE__);
        snprintf(side, sizeof side, "%s-shm", names[i]);
        check_private_file(side, __LINE__);
        CHECK_STATUS(AGENT_OK, agent_close(h));
        h = open_at(names[i], NULL);
        CHECK_STATE(h, "{\"n\":1}");
        CHECK_STATUS(AGENT_OK, agent_close(h));
    }
    /* ... and no file the user never named. */
    CHECK(!file_exists("notes.db") && !file_exists("z.db") && !file_exists("q.db"));
    umask(old);
    CHECK(chdir(cwd) == 0);
}

void test_path_is_taken_as_raw_bytes(void)
{
    const char *p = tmp_path("caf\xe9 \xff.db"); /* not UTF-8: the OS takes bytes */
    AgentHandle h = open_at(p, NULL);
    CHECK(file_exists(p));
    CHECK_SET(h, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_at(p, NULL);
    CHECK_STATE(h, "{\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_memory_store_is_private_to_its_handle(void)
{
    AgentHandle a = open_at(":memory:", NULL);
    AgentHandle b = open_at(":memory:", NULL);
    CHECK_SET(a, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATE(b, "{}");
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK_STATUS(AGENT_OK, agent_close(b));
    a = open_at(":memory:", NULL);
    CHECK_STATE(a, "{}");
    CHECK_STATUS(AGENT_OK, agent_close(a));
}

void test_two_handles_on_one_file_see_each_others_commits(void)
{
    AgentHandle a = open_store("two_handles.db", NULL);
    AgentHandle b = open_store("two_handles.db", NULL);
    CHECK_STATE(b, "{}");
    CHECK_SET(a, "{\"a\":1}", "{\"a\":1}");
    CHECK_STATE(b, "{\"a\":1}");
    CHECK_SET(b, "{\"b\":2}", "{\"a\":1,\"b\":2}"); /* starts from a's commit */
    CHECK_STATE(a, "{\"a\":1,\"b\":2}");
    CHECK_REPLACE(a, "{\"c\":3}", "{\"c\":3}");
    CHECK_SET(b, "{\"d\":4}", "{\"c\":3,\"d\":4}");
    CHECK_STATUS(AGENT_OK, agent_close(a));
    CHECK_STATE(b, "{\"c\":3,\"d\":4}");
    CHECK_STATUS(AGENT_OK, agent_close(b));
}
