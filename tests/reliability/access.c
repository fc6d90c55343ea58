/*
 * Item 7, access.
 *
 * - A new store file and its WAL and shared-memory files are mode 0600, whatever the umask
 *   (022, 002, 000).
 * - A store opened read_only refuses set_state and replace_state with AGENT_ERR_STORAGE and a
 *   message that says read_only, reads the stored state (also one still in another connection's
 *   WAL, and later commits of that connection), and never modifies the store file or its WAL
 *   (hashed before and after). A read_only open of a missing or empty file is refused and
 *   creates or changes nothing.
 */
#include "common.h"

static char g_dir[4096];

static int mode_of(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (int)(st.st_mode & 07777);
}

static void modes(void) {
    mode_t masks[] = {022, 002, 000};
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        char db[4200], wal[4300], shm[4300];
        snprintf(db, sizeof db, "%s/mode-%03o.db", g_dir, (unsigned)masks[i]);
        snprintf(wal, sizeof wal, "%s-wal", db);
        snprintf(shm, sizeof shm, "%s-shm", db);
        remove_store(db);
        mode_t old = umask(masks[i]);
        AgentHandle h;
        CHECK_STATUS(agent_open(db, NULL, &h), AGENT_OK, "open (umask %03o)", (unsigned)masks[i]);
        CHECK_STATUS(set_str(h, "{\"secret\":\"s3cr3t\"}"), AGENT_OK, "write (umask %03o)", (unsigned)masks[i]);
        /* A second connection keeps the WAL and SHM files in place while we look. */
        int m_db = mode_of(db), m_wal = mode_of(wal), m_shm = mode_of(shm);
        CHECK(m_db == 0600, "umask %03o: store file mode %03o, want 600", (unsigned)masks[i], (unsigned)m_db);
        CHECK(m_wal == 0600, "umask %03o: WAL file mode %03o, want 600", (unsigned)masks[i], (unsigned)m_wal);
        CHECK(m_shm == 0600, "umask %03o: SHM file mode %03o, want 600", (unsigned)masks[i], (unsigned)m_shm);
        agent_close(h);
        umask(old);
        printf("  umask %03o: store %03o, wal %03o, shm %03o\n", (unsigned)masks[i], (unsigned)m_db,
               (unsigned)m_wal, (unsigned)m_shm);
        remove_store(db);
    }
}

static void refuses_writes(AgentHandle h, const char *what) {
    AgentStatus st = set_str(h, "{\"n\":999}");
    CHECK_STATUS(st, AGENT_ERR_STORAGE, "%s: set_state", what);
    CHECK(strstr(agent_last_error(), "agent_set_state") && strstr(agent_last_error(), "read_only"),
          "%s: unclear message: %s", what, agent_last_error());
    AgentBuffer out = {0};
    st = agent_replace_state(h, (const uint8_t *)"{\"n\":0}", 7, &out);
    CHECK_STATUS(st, AGENT_ERR_STORAGE, "%s: replace_state", what);
    CHECK(strstr(agent_last_error(), "agent_replace_state") && strstr(agent_last_error(), "read_only"),
          "%s: unclear message: %s", what, agent_last_error());
    CHECK(out.data == NULL, "%s: refused write left an output buffer", what);
    CHECK_STATUS(set_str(h, "{\"a\":{\"$set\":[1,1]}}"), AGENT_ERR_CODEC, "%s: input errors still come first", what);
}

static void read_only(void) {
    char db[4200], wal[4300], shm[4300];
    snprintf(db, sizeof db, "%s/ro.db", g_dir);
    snprintf(wal, sizeof wal, "%s-wal", db);
    snprintf(shm, sizeof shm, "%s-shm", db);
    remove_store(db);

    /* 1. A closed store (everything checkpointed into the main file). */
    AgentHandle w, r;
    CHECK_STATUS(agent_open(db, NULL, &w), AGENT_OK, "create");
    CHECK_STATUS(set_str(w, "{\"n\":1,\"doc\":{\"title\":\"x\"}}"), AGENT_OK, "write");
    char *stored = get_state_str(w, NULL);
    agent_close(w);
    uint64_t h_db = file_hash(db);
    int had_wal = file_exists(wal), had_shm = file_exists(shm);
    CHECK_STATUS(agent_open(db, "{\"read_only\":true}", &r), AGENT_OK, "open read_only");
    char *seen = get_state_str(r, NULL);
    CHECK(seen && stored && strcmp(seen, stored) == 0, "read_only reads %s, want %s", seen ? seen : "(none)", stored);
    free(seen);
    refuses_writes(r, "read_only, closed store");
    uint64_t hook_id;
    AgentStatus hs = agent_on_state_changed(r, (AgentStateChangedFn)NULL, NULL, NULL, &hook_id);
    CHECK_STATUS(hs, AGENT_ERR_INVALID_ARGUMENT, "NULL hook on a read_only handle");
    CHECK_STATUS(agent_close(r), AGENT_OK, "close read_only");
    CHECK(file_hash(db) == h_db, "read_only session modified the store file");
    printf("  read_only on a closed store: file unchanged; side files before: wal %s, shm %s; after: wal %s, shm %s\n",
           had_wal ? "yes" : "no", had_shm ? "yes" : "no", file_exists(wal) ? "yes" : "no",
           file_exists(shm) ? "yes" : "no");
    if (file_exists(wal)) CHECK(mode_of(wal) == 0600, "WAL left by read_only has mode %03o", (unsigned)mode_of(wal));
    if (file_exists(shm)) CHECK(mode_of(shm) == 0600, "SHM left by read_only has mode %03o", (unsigned)mode_of(shm));

    /* 2. A live store: the writer's latest commit is still in its WAL. */
    CHECK_STATUS(agent_open(db, NULL, &w), AGENT_OK, "writer reopen");
    CHECK_STATUS(set_str(w, "{\"n\":2}"), AGENT_OK, "writer: second write");
    char *latest = get_state_str(w, NULL);
    h_db = file_hash(db);
    uint64_t h_wal = file_hash(wal);
    CHECK(h_wal != 0, "the writer's WAL is missing");
    CHECK_STATUS(agent_open(db, "{\"read_only\":true}", &r), AGENT_OK, "open read_only beside a writer");
    seen = get_state_str(r, NULL);
    CHECK(seen && latest && strcmp(seen, latest) == 0, "read_only beside a writer reads %s, want %s", seen ? seen : "(none)", latest);
    free(seen);
    refuses_writes(r, "read_only beside a writer");
    CHECK_STATUS(agent_close(r), AGENT_OK, "close read_only");
    CHECK(file_hash(db) == h_db && file_hash(wal) == h_wal, "read_only session modified the store or its WAL");
    /* Later commits of the writer are visible to a read_only handle. */
    CHECK_STATUS(agent_open(db, "{\"read_only\":true}", &r), AGENT_OK, "open read_only again");
    CHECK_STATUS(set_str(w, "{\"n\":3}"), AGENT_OK, "writer: third write");
    char *third = get_state_str(w, NULL);
    seen = get_state_str(r, NULL);
    CHECK(seen && third && strcmp(seen, third) == 0, "read_only does not see a later commit: %s", seen ? seen : "(none)");
    free(seen);
    agent_close(r);
    agent_close(w);
    free(stored);
    free(latest);
    free(third);
    remove_store(db);

    /* 3. Nothing there: refused, nothing created. */
    AgentStatus st = agent_open(db, "{\"read_only\":true}", &r);
    CHECK_STATUS(st, AGENT_ERR_STORAGE, "read_only open of a missing file");
    CHECK(!file_exists(db), "read_only open created the store file");
    write_file(db, "", 0);
    st = agent_open(db, "{\"read_only\":true}", &r);
    CHECK_STATUS(st, AGENT_ERR_STORAGE, "read_only open of an empty file");
    size_t n;
    unsigned char *b = read_file(db, &n);
    CHECK(b && n == 0, "read_only open wrote into an empty file (%zu bytes)", n);
    free(b);
    remove_store(db);
    printf("  read_only: writes refused, reads current, files unchanged\n");
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s/access", scratch_dir());
    make_dirs(g_dir);
    printf("access:\n");
    modes();
    read_only();
    return finish("access");
}
