/*
 * Item 5, resource faults. Each fault must give AGENT_ERR_STORAGE with a clear message (one
 * that names the function and says "storage error"), never a crash, and the last good state must
 * still be readable where the file still holds it.
 *
 * - disk full, two ways: a child process whose file size is capped with RLIMIT_FSIZE (SIGXFSZ
 *   ignored), and, where mounting is permitted, a child in its own mount namespace writing to a
 *   512 KiB tmpfs. The store grows until a write fails; the failed write must be STORAGE, the
 *   state must still be the last acknowledged one (same handle, and after reopening), and once
 *   space is freed writing works again.
 * - a read-only file (made read-only for a non-root user; as root the check runs in a child that
 *   drops to uid/gid 65534).
 * - a deleted directory: opening a store in it, and writing to a store whose directory was
 *   deleted while it was open.
 * - a file that is not a database (text, random bytes), an SQLite file of another application,
 *   a store of a newer schema: refused and left byte-identical.
 * - truncated databases (several cut points), a corrupted page, a corrupted stored value, a
 *   corrupted WAL tail (the last good state must be what reopening shows).
 */
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "common.h"

static char g_dir[4096];

static void path_in(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", g_dir, name); }

/* A storage failure with a message naming the function and the kind of failure. */
static void check_storage(AgentStatus st, const char *fn, const char *what) {
    CHECK_STATUS(st, AGENT_ERR_STORAGE, "%s", what);
    if (st == AGENT_ERR_STORAGE) {
        const char *m = agent_last_error();
        CHECK(strncmp(m, fn, strlen(fn)) == 0 && strstr(m, "storage error") != NULL,
              "%s: unclear message: %s", what, m);
        printf("  %-44s -> %s\n", what, m);
    }
}

static char *state_of(AgentHandle h) {
    AgentStatus st;
    char *s = get_state_str(h, &st);
    return s;
}

/* Writes 8 KiB members until a write fails. Returns the last acknowledged state (malloc'd). */
static char *fill_until_failure(AgentHandle h, AgentStatus *failure, long *writes) {
    static char patch[9000];
    char *last = state_of(h);
    for (long i = 0; i < 100000; i++) {
        int n = snprintf(patch, sizeof patch, "{\"k%ld\":\"", i);
        memset(patch + n, 'a' + (int)(i % 26), 8000);
        memcpy(patch + n + 8000, "\"}", 3);
        AgentBuffer out = {0};
        AgentStatus st = agent_set_state(h, (const uint8_t *)patch, (size_t)n + 8002, &out);
        if (st != AGENT_OK) {
            *failure = st;
            *writes = i;
            CHECK(out.data == NULL, "a failed write left an output buffer");
            return last;
        }
        free(last);
        last = malloc(out.len + 1);
        memcpy(last, out.data, out.len + 1);
        agent_buffer_free(&out);
    }
    *failure = AGENT_OK;
    *writes = 100000;
    return last;
}

/* The disk-full scenario, run in a child; `ballast` is a file to delete to free space again. */
static int disk_full_child(const char *db, const char *ballast, const char *label) {
    AgentHandle h;
    CHECK_STATUS(agent_open(db, NULL, &h), AGENT_OK, "%s: open", label);
    AgentStatus failure;
    long writes;
    char *last = fill_until_failure(h, &failure, &writes);
    char what[200];
    snprintf(what, sizeof what, "%s: write %ld", label, writes);
    check_storage(failure, "agent_set_state", what);
    CHECK(writes > 3, "%s: only %ld writes fit", label, writes);
    char *now = state_of(h);
    CHECK(now && last && strcmp(now, last) == 0, "%s: same handle does not show the last good state", label);
    free(now);
    /* A second failure in a row: still STORAGE, still no crash, state still the same. */
    AgentStatus again = set_str(h, "{\"after_full\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}");
    CHECK(again == AGENT_OK || again == AGENT_ERR_STORAGE, "%s: second write: %s", label, agent_status_name(again));
    if (again == AGENT_OK) {
        free(last);
        last = state_of(h);
    }
    CHECK_STATUS(agent_close(h), AGENT_OK, "%s: close", label);
    /* Reopen while the disk is still full. */
    AgentStatus st = agent_open(db, NULL, &h);
    CHECK_STATUS(st, AGENT_OK, "%s: reopen while full", label);
    if (st == AGENT_OK) {
        now = state_of(h);
        CHECK(now && last && strcmp(now, last) == 0, "%s: reopened store does not show the last good state", label);
        free(now);
        if (ballast) {
            unlink(ballast);
            CHECK_STATUS(set_str(h, "{\"recovered\":true}"), AGENT_OK, "%s: write after space was freed", label);
        }
        agent_close(h);
    }
    /* Hand the last good state to the parent through a file next to the store. */
    if (!ballast) {
        char side[4300];
        snprintf(side, sizeof side, "%s.expected", db);
        write_file(side, last ? last : "", last ? strlen(last) : 0);
    }
    free(last);
    return g_failures ? 1 : 0;
}

static void disk_full_rlimit(void) {
    char db[4200], side[4300];
    path_in(db, sizeof db, "full-rlimit.db");
    remove_store(db);
    snprintf(side, sizeof side, "%s.expected", db);
    unlink(side);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {256 * 1024, 256 * 1024};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) DIE("setrlimit");
        int rc = disk_full_child(db, NULL, "disk full (RLIMIT_FSIZE 256 KiB)");
        fflush(stdout);
        _exit(rc);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "disk full (rlimit) child failed or crashed (status %d)", status);
    /* Without the cap: the store opens, shows the last good state, and takes writes again. */
    size_t n;
    char *expected = (char *)read_file(side, &n);
    AgentHandle h;
    CHECK_STATUS(agent_open(db, NULL, &h), AGENT_OK, "disk full (rlimit): open without the cap");
    char *now = state_of(h);
    CHECK(expected && now && strcmp(now, expected) == 0, "disk full (rlimit): state after lifting the cap is not the last good one");
    CHECK_STATUS(set_str(h, "{\"recovered\":true}"), AGENT_OK, "disk full (rlimit): write after lifting the cap");
    agent_close(h);
    free(now);
    free(expected);
    remove_store(db);
    unlink(side);
}

static void disk_full_tmpfs(void) {
    char mnt[4200];
    path_in(mnt, sizeof mnt, "small-tmpfs");
    make_dirs(mnt);
    int pfd[2];
    if (pipe(pfd) != 0) DIE("pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        char verdict = 'S';
        if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("tmpfs", mnt, "tmpfs", 0, "size=512k,mode=0755") != 0) {
            printf("  SKIP disk full (512 KiB tmpfs): mounting not permitted here (%s)\n", strerror(errno));
            fflush(stdout);
            if (write(pfd[1], &verdict, 1) != 1) _exit(3);
            _exit(0);
        }
        verdict = 'R';
        if (write(pfd[1], &verdict, 1) != 1) _exit(3);
        char db[4300], ballast[4300];
        snprintf(db, sizeof db, "%s/full.db", mnt);
        snprintf(ballast, sizeof ballast, "%s/ballast", mnt);
        static char zeros[96 * 1024];
        write_file(ballast, zeros, sizeof zeros);
        int rc = disk_full_child(db, ballast, "disk full (512 KiB tmpfs)");
        fflush(stdout);
        _exit(rc);
    }
    close(pfd[1]);
    char verdict = 0;
    if (read(pfd[0], &verdict, 1) != 1) verdict = 0;
    close(pfd[0]);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "disk full (tmpfs) child failed or crashed (status %d)", status);
    if (verdict == 'R') printf("  disk full on a real small file system: checked\n");
}

/* The store at `db` with a known state; returns that state (malloc'd). */
static char *make_store(const char *db, const char *state) {
    remove_store(db);
    AgentHandle h;
    if (agent_open(db, NULL, &h) != AGENT_OK) DIE("open %s: %s", db, agent_last_error());
    if (set_str(h, state) != AGENT_OK) DIE("write %s: %s", db, agent_last_error());
    char *s = state_of(h);
    agent_close(h); /* the last connection checkpoints: everything is in the main file */
    return s;
}

static void read_only_file(void) {
    char sub[4200], db[4300];
    int as_root = geteuid() == 0;
    if (as_root) {
        /* The unprivileged user must reach the file wherever the checkout lies (a clone under a
         * private 0700 home directory is common): a directory of its own under /tmp, which
         * every user can traverse. */
        snprintf(sub, sizeof sub, "/tmp/agent-state-ro-XXXXXX");
        if (!mkdtemp(sub)) DIE("mkdtemp");
    } else {
        path_in(sub, sizeof sub, "ro-file");
        make_dirs(sub);
    }
    snprintf(db, sizeof db, "%s/ro.db", sub);
    char *good = make_store(db, "{\"last\":\"good\",\"n\":42}");
    if (as_root) {
        if (chown(sub, 65534, 65534) != 0 || chown(db, 65534, 65534) != 0) DIE("chown");
    }
    if (chmod(db, 0400) != 0) DIE("chmod");
    uint64_t before = file_hash(db);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (as_root && (setgid(65534) != 0 || setuid(65534) != 0)) DIE("drop privileges");
        AgentHandle h;
        AgentStatus st = agent_open(db, NULL, &h);
        if (st == AGENT_OK) {
            char *now = state_of(h);
            CHECK(now && strcmp(now, good) == 0, "read-only file: state is not the last good one");
            free(now);
            check_storage(set_str(h, "{\"n\":43}"), "agent_set_state", "read-only file: set_state");
            check_storage(agent_replace_state(h, (const uint8_t *)"{}", 2, NULL), "agent_replace_state",
                          "read-only file: replace_state");
            agent_close(h);
        } else {
            check_storage(st, "agent_open", "read-only file: open for writing");
        }
        /* Opening it read_only shows the last good state. */
        st = agent_open(db, "{\"read_only\":true}", &h);
        CHECK_STATUS(st, AGENT_OK, "read-only file: open read_only");
        if (st == AGENT_OK) {
            char *now = state_of(h);
            CHECK(now && strcmp(now, good) == 0, "read-only file (read_only): not the last good state");
            free(now);
            agent_close(h);
        }
        fflush(stdout);
        _exit(g_failures ? 1 : 0);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "read-only file: child failed or crashed (status %d)", status);
    CHECK(file_hash(db) == before, "read-only file: the file changed");
    chmod(db, 0600);
    free(good);
    remove_store(db);
    if (as_root) rmdir(sub);
}

static void deleted_directory(void) {
    char sub[4200], db[4300];
    path_in(sub, sizeof sub, "gone");
    make_dirs(sub);
    snprintf(db, sizeof db, "%s/store.db", sub);
    remove_store(db);
    rmdir(sub);
    AgentHandle h;
    check_storage(agent_open(db, NULL, &h), "agent_open", "directory deleted before open");
    CHECK(!file_exists(sub), "opening created the deleted directory");

    /* Deleted while the store is open: the write cannot be made durable anywhere, so it must
     * not be acknowledged. */
    make_dirs(sub);
    CHECK_STATUS(agent_open(db, NULL, &h), AGENT_OK, "open in a fresh directory");
    CHECK_STATUS(set_str(h, "{\"n\":1}"), AGENT_OK, "first write");
    remove_store(db);
    if (rmdir(sub) != 0) DIE("rmdir");
    AgentStatus st = set_str(h, "{\"n\":2}");
    check_storage(st, "agent_set_state", "directory deleted while open: set_state");
    if (st == AGENT_OK)
        fprintf(stderr, "  (the write was acknowledged although its file and directory no longer exist: it is lost)\n");
    char *now = state_of(h); /* reading must not crash */
    free(now);
    CHECK_STATUS(agent_close(h), AGENT_OK, "close after the directory was deleted");
    CHECK(!file_exists(sub), "the deleted directory came back");
}

/* Opening `db` must fail with STORAGE and leave the file byte-identical. */
static void refused_untouched(const char *db, const char *what) {
    uint64_t before = file_hash(db);
    AgentHandle h = 0;
    AgentStatus st = agent_open(db, NULL, &h);
    check_storage(st, "agent_open", what);
    if (st == AGENT_OK) agent_close(h);
    CHECK(h == 0 || st == AGENT_OK, "%s: failed open left a handle", what);
    CHECK(file_hash(db) == before, "%s: the file was modified", what);
    st = agent_open(db, "{\"read_only\":true}", &h);
    check_storage(st, "agent_open", what);
    if (st == AGENT_OK) agent_close(h);
    CHECK(file_hash(db) == before, "%s: the file was modified by a read_only open", what);
}

static void foreign_files(void) {
    char db[4200];
    path_in(db, sizeof db, "foreign.txt");
    remove_store(db);
    const char *text = "This is a plain text file, not a database.\nline two\n";
    write_file(db, text, strlen(text));
    refused_untouched(db, "text file");
    remove_store(db);

    path_in(db, sizeof db, "random.bin");
    remove_store(db);
    unsigned char rnd[8192];
    uint64_t seed = 12345;
    for (size_t i = 0; i < sizeof rnd; i++) rnd[i] = (unsigned char)rng_next(&seed);
    write_file(db, rnd, sizeof rnd);
    refused_untouched(db, "random bytes");
    remove_store(db);

    /* A valid SQLite file of another application: an agent store whose application_id (header
     * offset 68) is changed; and one with a newer schema version (user_version, offset 60). */
    path_in(db, sizeof db, "other-app.db");
    free(make_store(db, "{\"a\":1}"));
    size_t n;
    unsigned char *b = read_file(db, &n);
    memcpy(b + 68, "\x12\x34\x56\x78", 4);
    write_file(db, b, n);
    free(b);
    refused_untouched(db, "SQLite file of another application");
    remove_store(db);

    path_in(db, sizeof db, "newer.db");
    free(make_store(db, "{\"a\":1}"));
    b = read_file(db, &n);
    memcpy(b + 60, "\x00\x00\x00\x07", 4);
    write_file(db, b, n);
    free(b);
    refused_untouched(db, "store of a newer schema (7)");
    remove_store(db);
}

/* Opening and reading a damaged store: STORAGE at open or at the read; never another state. */
static void damaged(const char *db, const char *good, const char *what) {
    AgentHandle h;
    AgentStatus st = agent_open(db, NULL, &h);
    if (st != AGENT_OK) {
        check_storage(st, "agent_open", what);
        return;
    }
    AgentStatus gs;
    char *now = get_state_str(h, &gs);
    if (gs == AGENT_OK) {
        CHECK(good && now && strcmp(now, good) == 0,
              "%s: read succeeded with a state that is not the stored one: %.80s", what, now ? now : "");
    } else {
        check_storage(gs, "agent_get_state", what);
        /* Writing over a damaged store must not claim success either. */
        AgentStatus ws = set_str(h, "{\"x\":1}");
        CHECK(ws == AGENT_ERR_STORAGE, "%s: write on a damaged store: %s", what, agent_status_name(ws));
    }
    free(now);
    agent_close(h);
}

static void truncated_and_corrupted(void) {
    char db[4200];
    path_in(db, sizeof db, "damaged.db");
    /* A state of ~200 KB: it spans dozens of overflow pages. */
    size_t big = 200000;
    char *state = malloc(big + 64);
    int p = snprintf(state, 64, "{\"marker\":\"MARK");
    for (size_t i = 0; i < big; i++) state[p + i] = (char)('a' + i % 23);
    strcpy(state + p + big, "\"}");
    char *good = make_store(db, state);
    size_t n;
    unsigned char *orig = read_file(db, &n);
    CHECK(n > 100000, "store file unexpectedly small (%zu bytes)", n);

    size_t cuts[] = {0, 50, 100, 4096, 8192, n / 2, n - 4096, n - 1};
    const char *names[] = {"truncated to 0 bytes", "truncated to 50 bytes", "truncated to 100 bytes",
                           "truncated to 1 page",  "truncated to 2 pages",  "truncated to half",
                           "truncated by one page", "truncated by one byte"};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        remove_store(db);
        write_file(db, orig, cuts[i]);
        if (cuts[i] == 0) {
            /* An empty file is a new, empty store: the state is simply gone, which it is. */
            AgentHandle h;
            CHECK_STATUS(agent_open(db, NULL, &h), AGENT_OK, "empty file opens as a new store");
            agent_close(h);
            continue;
        }
        damaged(db, good, names[i]);
    }

    /* Corrupted pages: garbage over page 2 (the table's root), then over the header magic. */
    unsigned char *b = malloc(n);
    memcpy(b, orig, n);
    uint64_t seed = 99;
    for (size_t i = 4096; i < 8192 && i < n; i++) b[i] = (unsigned char)rng_next(&seed);
    remove_store(db);
    write_file(db, b, n);
    damaged(db, good, "garbage over page 2");
    memcpy(b, orig, n);
    memcpy(b, "SQLite format 2", 15);
    remove_store(db);
    write_file(db, b, n);
    damaged(db, good, "damaged header magic");

    /* The stored value itself: valid SQLite, but its JSON is no longer valid UTF-8. */
    memcpy(b, orig, n);
    int hits = 0;
    for (size_t i = 0; i + 4 < n; i++)
        if (memcmp(b + i, "MARK", 4) == 0) {
            b[i] = 0xff;
            hits++;
        }
    CHECK(hits > 0, "marker not found in the store file");
    remove_store(db);
    write_file(db, b, n);
    damaged(db, NULL, "stored value corrupted (bad UTF-8)");
    /* ... and no longer an object. */
    memcpy(b, orig, n);
    for (size_t i = 0; i + 12 < n; i++)
        if (memcmp(b + i, "{\"marker\":", 10) == 0) b[i] = '[';
    remove_store(db);
    write_file(db, b, n);
    damaged(db, NULL, "stored value corrupted (not an object)");
    free(b);
    free(orig);
    free(state);
    free(good);
    remove_store(db);

    /* A corrupted WAL tail: state A is checkpointed; state B is committed into the WAL by a
     * process that dies without closing; B's last frame is damaged. Reopening must show A. */
    path_in(db, sizeof db, "wal-tail.db");
    char *a = make_store(db, "{\"v\":\"A\"}");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        AgentHandle h;
        if (agent_open(db, NULL, &h) != AGENT_OK) _exit(3);
        if (set_str(h, "{\"v\":\"B\"}") != AGENT_OK) _exit(4);
        _exit(0); /* no close: the WAL keeps B, uncheckpointed */
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "WAL writer failed (status %d)", status);
    char wal[4300];
    snprintf(wal, sizeof wal, "%s-wal", db);
    unsigned char *w = read_file(wal, &n);
    CHECK(w && n >= 32 + 24 + 4096, "no WAL frame to corrupt (%zu bytes)", w ? n : 0);
    if (w && n >= 32 + 24 + 4096) {
        for (size_t i = n - 2048; i < n - 1024; i++) w[i] ^= 0x5a; /* inside the last frame's page */
        write_file(wal, w, n);
        AgentHandle h;
        CHECK_STATUS(agent_open(db, NULL, &h), AGENT_OK, "open with a corrupted WAL tail");
        char *now = state_of(h);
        CHECK(now && strcmp(now, a) == 0, "corrupted WAL tail: state is %s, want the last good %s", now ? now : "(none)", a);
        CHECK_STATUS(set_str(h, "{\"v\":\"C\"}"), AGENT_OK, "write after a corrupted WAL tail");
        free(now);
        agent_close(h);
    }
    free(w);
    free(a);
    remove_store(db);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s/faults", scratch_dir());
    make_dirs(g_dir);
    chmod(g_dir, 0755);
    printf("faults:\n");
    disk_full_rlimit();
    disk_full_tmpfs();
    read_only_file();
    deleted_directory();
    foreign_files();
    truncated_and_corrupted();
    return finish("faults");
}
