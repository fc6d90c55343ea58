/* coexist.c: one program that uses agent_state's static archive and the system's SQLite.
 *
 * tests/install/run.sh links it four ways, with the installed libagent_state.a and the system's
 * libsqlite3 (static libsqlite3.a and shared -lsqlite3, each before and after the archive).
 * Each side must get its own SQLite: the program's sqlite3_* calls the system's library, whose
 * version must be the one its header announces, while the store agent_state writes must be
 * written by the SQLite bundled in the archive (BUNDLED_SQLITE_VERSION_NUMBER, passed with -D).
 * A database file records the SQLITE_VERSION_NUMBER of the library that last wrote it (header
 * offset 96), which tells the two apart.
 *
 * Usage: coexist DIR. Exit 0: both sides worked with their own SQLite; 77: the two SQLite
 * versions are equal, so they cannot be told apart; anything else: a failure. */
#include <agent_state.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#ifndef BUNDLED_SQLITE_VERSION_NUMBER
#error "compile with -DBUNDLED_SQLITE_VERSION_NUMBER=<the bundled SQLite's SQLITE_VERSION_NUMBER>"
#endif

static int failures;

#define EXPECT(cond)                                                                  \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "coexist.c:%d: expected %s\n", __LINE__, #cond);        \
            failures++;                                                               \
        }                                                                             \
    } while (0)

/* The SQLITE_VERSION_NUMBER of the library that last wrote the database file, or -1. */
static long writer_version(const char *path)
{
    unsigned char header[100];
    FILE *f = fopen(path, "rb");
    size_t n;
    if (f == NULL) {
        return -1;
    }
    n = fread(header, 1, sizeof header, f);
    fclose(f);
    if (n != sizeof header) {
        return -1;
    }
    return ((long)header[96] << 24) | ((long)header[97] << 16) | ((long)header[98] << 8) |
           (long)header[99];
}

static void use_agent_state(const char *path)
{
    AgentHandle h;
    AgentBuffer state = { NULL, 0, NULL };
    const char *patch = "{\"side\":\"agent_state\"}";
    remove(path);
    if (agent_open(path, NULL, &h) != AGENT_OK) {
        fprintf(stderr, "agent_open: %s\n", agent_last_error());
        failures++;
        return;
    }
    EXPECT(agent_set_state(h, (const uint8_t *)patch, strlen(patch), &state) == AGENT_OK);
    EXPECT(state.data != NULL && strcmp((const char *)state.data, patch) == 0);
    agent_buffer_free(&state);
    EXPECT(agent_close(h) == AGENT_OK);
}

static int count_rows(void *user_data, int columns, char **values, char **names)
{
    (void)names;
    if (columns == 1 && values[0] != NULL) {
        sscanf(values[0], "%d", (int *)user_data);
    }
    return 0;
}

static void use_system_sqlite(const char *path)
{
    sqlite3 *db = NULL;
    int rows = -1;
    remove(path);
    EXPECT(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) ==
           SQLITE_OK);
    EXPECT(sqlite3_exec(db, "CREATE TABLE t(side TEXT); INSERT INTO t VALUES ('system')", NULL,
                        NULL, NULL) == SQLITE_OK);
    EXPECT(sqlite3_exec(db, "SELECT count(*) FROM t", count_rows, &rows, NULL) == SQLITE_OK);
    EXPECT(rows == 1);
    EXPECT(sqlite3_close(db) == SQLITE_OK);
}

int main(int argc, char **argv)
{
    char agent_db[4096], system_db[4096];
    long agent_writer, system_writer;
    if (argc != 2) {
        fprintf(stderr, "usage: coexist DIR\n");
        return 2;
    }
    snprintf(agent_db, sizeof agent_db, "%s/agent.db", argv[1]);
    snprintf(system_db, sizeof system_db, "%s/system.db", argv[1]);

    use_agent_state(agent_db);
    use_system_sqlite(system_db);
    agent_writer = writer_version(agent_db);
    system_writer = writer_version(system_db);

    printf("agent_state %s wrote its store with SQLite %ld (bundled: %d); "
           "the program's SQLite is %s (%d; its header says %d) and wrote %ld\n",
           agent_version(), agent_writer, BUNDLED_SQLITE_VERSION_NUMBER, sqlite3_libversion(),
           sqlite3_libversion_number(), SQLITE_VERSION_NUMBER, system_writer);

    /* The program's calls reach the system's SQLite, not the copy inside agent_state. */
    EXPECT(sqlite3_libversion_number() == SQLITE_VERSION_NUMBER);
    EXPECT(strcmp(sqlite3_sourceid(), SQLITE_SOURCE_ID) == 0);
    EXPECT(system_writer == SQLITE_VERSION_NUMBER);
    /* agent_state's calls reach its bundled SQLite, not the system's. */
    EXPECT(agent_writer == BUNDLED_SQLITE_VERSION_NUMBER);
    if (failures) {
        return 1;
    }
    if (BUNDLED_SQLITE_VERSION_NUMBER == SQLITE_VERSION_NUMBER) {
        printf("the system's SQLite is the bundled version: the two cannot be told apart\n");
        return 77;
    }
    return 0;
}
