/*
 * Item 1, crash safety.
 *
 * A child process loops agent_set_state: patch N sets every member of the state (a counter
 * "n" = N, a string "a" whose length swings between 10 bytes and ~45 KB so that some states span
 * many overflow pages, an array, a nested object), so the state after patch N is exactly the
 * patch's text. After each acknowledged write the child sends N to the parent through a pipe.
 * The parent SIGKILLs the child after a random delay, reopens the store and checks that the file
 * opens and that the state is byte-for-byte the state of the last acknowledged write or of the
 * one in flight (last + 1): never a mix, never older. Then it starts the next child, which goes
 * on from the stored counter.
 *
 * Usage: crash [KILLS]   (default: 40, or $CRASH_KILLS; run.sh: 100 quick, 1200 soak). Rounds alternate synchronous "full"
 * (3 of 4) and "normal" (1 of 4): a process crash must lose nothing acknowledged in either.
 *
 * The store is a scratch file, or $AGENT_STATE_RELIABILITY_STORE (a PostgreSQL URI: one fresh
 * agent of that server; the client is killed, the server keeps running). There a killed
 * client's last COMMIT may still be running in its server process after the kill, so before
 * checking, the parent waits (psql on pg_stat_activity) until no server process of that child
 * (its own application_name) is left: the in-flight write has then landed or not, for good.
 */
#include <signal.h>
#include <sys/wait.h>

#include "common.h"

/* Builds the patch (= the resulting state) number n into buf; returns its length. */
static size_t make_state(long long n, char *buf, size_t cap) {
    size_t alen = (n % 4 == 0) ? 3000 + (size_t)((n * 7919) % 42000) : 10 + (size_t)(n % 50);
    size_t pos = (size_t)snprintf(buf, cap, "{\"n\":%lld,\"a\":\"", n);
    for (size_t i = 0; i < alen && pos + 200 < cap; i++) buf[pos++] = (char)('a' + (n + (long long)i) % 26);
    pos += (size_t)snprintf(buf + pos, cap - pos,
                            "\",\"b\":[%lld,%lld,%lld],\"c\":{\"x\":%lld,\"y\":\"v%lld\",\"z\":[true,null]}}",
                            n, n + 1, n * 2, n, n % 1000);
    return pos;
}

enum { STATE_CAP = 64 * 1024 };

static const char *g_agent; /* agent_id, or NULL */

static void child_main(const char *path, int ackfd, const char *sync) {
    char opts[512], extra[64];
    snprintf(extra, sizeof extra, "\"synchronous\":\"%s\"", sync);
    store_options(opts, sizeof opts, g_agent, extra);
    AgentHandle h;
    if (agent_open(path, opts, &h) != AGENT_OK) {
        fprintf(stderr, "child: open failed: %s\n", agent_last_error());
        _exit(3);
    }
    AgentStatus st;
    char *s = get_state_str(h, &st);
    if (!s) {
        fprintf(stderr, "child: get_state failed: %s\n", agent_last_error());
        _exit(3);
    }
    long long n = 0;
    json_member_int(s, strlen(s), "n", &n);
    free(s);
    static char buf[STATE_CAP];
    for (;;) {
        n++;
        size_t len = make_state(n, buf, sizeof buf);
        if (agent_set_state(h, (const uint8_t *)buf, len, NULL) != AGENT_OK) {
            fprintf(stderr, "child: set_state %lld failed: %s\n", n, agent_last_error());
            _exit(3);
        }
        if (write(ackfd, &n, sizeof n) != (ssize_t)sizeof n) _exit(4);
    }
}

int main(int argc, char **argv) {
    long kills = argc > 1 ? strtol(argv[1], NULL, 10) : env_long("CRASH_KILLS", 40);
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/crash", scratch_dir());
    make_dirs(dir);
    snprintf(path, sizeof path, "%s/crash.db", dir);
    const char *loc = store_location(path);
    char agent_buf[300], reopen[512];
    g_agent = store_agent(loc, "crash", agent_buf, sizeof agent_buf);
    store_options(reopen, sizeof reopen, g_agent, NULL);

    uint64_t seed = (uint64_t)env_long("RELIABILITY_SEED", (long)time(NULL)) * 2654435761u + 1;
    printf("crash: %ld kills, seed %llu, store %s\n", kills, (unsigned long long)seed, store_kind(loc));
    static char expect[STATE_CAP];
    long long last_acked = 0;
    long at_acked = 0, at_inflight = 0, violations = 0, kills_full = 0, kills_normal = 0;
    long long total_acks = 0;
    double t0 = now_s();

    for (long round = 0; round < kills; round++) {
        const char *sync = (round % 4 == 3) ? "normal" : "full";
        int fds[2];
        if (pipe(fds) != 0) DIE("pipe");
        /* On PostgreSQL each child names its connections, for the wait after the kill. */
        char app[64], param[96];
        snprintf(app, sizeof app, "rel-crash-%ld-%ld", (long)getpid(), round);
        snprintf(param, sizeof param, "application_name=%s", app);
        char *child_loc = is_pg_uri(loc) ? uri_with_param(loc, param) : strdup(loc);
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) DIE("fork");
        if (pid == 0) {
            close(fds[0]);
            child_main(child_loc, fds[1], sync);
        }
        close(fds[1]);
        free(child_loc);
        /* Random moment: anywhere in the first 40 ms (opening, mid-commit, mid-checkpoint...). */
        useconds_t delay = (useconds_t)rng_below(&seed, 40000);
        usleep(delay);
        kill(pid, SIGKILL);
        long long n;
        ssize_t r;
        while ((r = read(fds[0], &n, sizeof n)) == (ssize_t)sizeof n) {
            if (n != last_acked + 1) {
                violations++;
                fprintf(stderr, "VIOLATION round %ld: child acknowledged %lld after %lld\n", round, n,
                        last_acked);
            }
            last_acked = n;
            total_acks++;
        }
        close(fds[0]);
        int status;
        if (waitpid(pid, &status, 0) != pid) DIE("waitpid");
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
            violations++;
            fprintf(stderr, "VIOLATION round %ld: child ended by itself (status %d) before the kill\n",
                    round, status);
        }
        if (is_pg_uri(loc)) {
            /* Wait until the server is done with the killed child's connections. */
            double w0 = now_s();
            long long left;
            while ((left = pg_backends_of(loc, app)) != 0) {
                if (left < 0) DIE("psql could not count the server's connections");
                if (now_s() - w0 > 60) DIE("the killed child's server processes are still there after 60 s");
                usleep(2000);
            }
        }
        if (strcmp(sync, "full") == 0) kills_full++;
        else kills_normal++;

        /* Reopen and check. */
        AgentHandle h;
        AgentStatus st = agent_open(loc, reopen, &h);
        if (st != AGENT_OK) {
            violations++;
            fprintf(stderr, "VIOLATION round %ld: the store does not open after the kill: %s\n", round,
                    agent_last_error());
            break;
        }
        char *got = get_state_str(h, &st);
        if (!got) {
            violations++;
            fprintf(stderr, "VIOLATION round %ld: get_state failed after the kill: %s\n", round,
                    agent_last_error());
            agent_close(h);
            break;
        }
        size_t glen = strlen(got);
        int ok = 0;
        if (last_acked == 0 && strcmp(got, "{}") == 0) {
            ok = 1; /* nothing acknowledged yet, first write not stored */
            at_acked++;
        }
        if (!ok) {
            size_t elen = last_acked ? make_state(last_acked, expect, sizeof expect) : 0;
            if (last_acked && elen == glen && memcmp(expect, got, glen) == 0) {
                ok = 1;
                at_acked++;
            }
        }
        if (!ok) {
            size_t elen = make_state(last_acked + 1, expect, sizeof expect);
            if (elen == glen && memcmp(expect, got, glen) == 0) {
                ok = 1;
                at_inflight++;
                last_acked++; /* the in-flight write is now the stored one */
            }
        }
        if (!ok) {
            violations++;
            long long n_got = -1;
            json_member_int(got, glen, "n", &n_got);
            fprintf(stderr,
                    "VIOLATION round %ld (%s): state is neither write %lld (last acknowledged) nor %lld "
                    "(in flight); it has n=%lld, %zu bytes: %.120s\n",
                    round, sync, last_acked, last_acked + 1, n_got, glen, got);
            if (n_got > last_acked) last_acked = n_got;
        }
        free(got);
        agent_close(h);
        g_checks++;
    }
    g_failures += violations;
    double dt = now_s() - t0;
    printf("crash: kills=%ld (synchronous full %ld, normal %ld) acknowledged_writes=%lld "
           "state_at_last_ack=%ld state_at_in_flight=%ld violations=%ld in %.1f s\n",
           kills_full + kills_normal, kills_full, kills_normal, total_acks, at_acked, at_inflight,
           violations, dt);
    if (g_failures == 0 && !store_override()) remove_store(path);
    return finish("crash");
}
