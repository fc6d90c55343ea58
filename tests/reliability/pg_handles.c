/*
 * PostgreSQL: many handles, few connections.
 *
 * One process opens N handles (default 10,000) to N distinct agents of the server at
 * $AGENT_STATE_RELIABILITY_STORE with "max_connections": C (default 4), writes through each one
 * ({"i": k, "name": agent}) from T threads at once (default 8, so that the threads want more
 * connections than the pool may have), and, with all N handles still open, counts the server processes
 * serving this process (its connections carry application_name=rel-handles-<pid>; psql counts
 * them in pg_stat_activity): at most C, and at least 1. Then it reads every agent back through
 * its handle (its own write, nobody else's) and closes them all, and counts again.
 *
 * Usage: pg_handles [N [C [T]]]   (prints a notice and exits 0 when the store is not a PostgreSQL URI)
 */
#include <pthread.h>

#include "common.h"

static AgentHandle *g_hs;
static long g_n, g_threads;
static const char *g_uri, *g_prefix;
static char g_extra[160];

static void *open_and_write(void *arg) {
    long id = (long)(intptr_t)arg;
    char opts[512], agent[400], patch[512];
    for (long k = id; k < g_n; k += g_threads) {
        snprintf(agent, sizeof agent, "%s-%ld", g_prefix, k);
        store_options(opts, sizeof opts, agent, g_extra);
        AgentStatus st = agent_open(g_uri, opts, &g_hs[k]);
        if (st != AGENT_OK) {
            fprintf(stderr, "FAIL: open handle %ld: %s: %s\n", k, agent_status_name(st), agent_last_error());
            g_hs[k] = 0;
            continue;
        }
        int len = snprintf(patch, sizeof patch, "{\"i\":%ld,\"name\":\"%s\"}", k, agent);
        st = agent_set_state(g_hs[k], (const uint8_t *)patch, (size_t)len, NULL);
        if (st != AGENT_OK) {
            fprintf(stderr, "FAIL: write through handle %ld: %s: %s\n", k, agent_status_name(st), agent_last_error());
            agent_close(g_hs[k]);
            g_hs[k] = 0;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10000;
    long cap = argc > 2 ? atol(argv[2]) : 4;
    long threads = argc > 3 ? atol(argv[3]) : 8;
    const char *base = store_override();
    if (!is_pg_uri(base)) {
        printf("pg-handles: skipped: AGENT_STATE_RELIABILITY_STORE is not a PostgreSQL URI\n");
        return 0;
    }
    if (n < 1 || cap < 1 || threads < 1 || threads > 256) DIE("bad arguments");
    char app[64], param[96], prefix[300];
    snprintf(app, sizeof app, "rel-handles-%ld", (long)getpid());
    snprintf(param, sizeof param, "application_name=%s", app);
    char *uri = uri_with_param(base, param);
    store_agent(base, "handles", prefix, sizeof prefix);
    printf("pg-handles: %ld handles, max_connections %ld, %ld threads, agents %s-*\n", n, cap, threads, prefix);

    AgentHandle *hs = calloc((size_t)n, sizeof *hs);
    if (!hs) DIE("out of memory");
    double t0 = now_s();
    long opened = 0, written = 0, read_back = 0;
    char agent[400];
    /* synchronous normal: this test is about connections, not durability (no fsync wait per commit) */
    snprintf(g_extra, sizeof g_extra, "\"max_connections\":%ld,\"busy_timeout_ms\":60000,\"synchronous\":\"normal\"", cap);
    g_hs = hs;
    g_n = n;
    g_threads = threads;
    g_uri = uri;
    g_prefix = prefix;
    pthread_t tids[256];
    for (long t = 0; t < threads; t++)
        if (pthread_create(&tids[t], NULL, open_and_write, (void *)(intptr_t)t) != 0) DIE("pthread_create");
    for (long t = 0; t < threads; t++) pthread_join(tids[t], NULL);
    for (long k = 0; k < n; k++) {
        if (hs[k]) opened++;
    }
    written = opened; /* a handle whose write failed was closed */
    CHECK(opened == n, "%ld of %ld handles opened and written", opened, n);
    double t_open = now_s() - t0;

    long long conns = pg_backends_of(base, app);
    CHECK(conns >= 1 && conns <= cap, "%lld server connections for %ld open handles, want 1..%ld", conns,
          opened, cap);

    for (long k = 0; k < n; k++) {
        if (!hs[k]) continue;
        AgentStatus st;
        char *s = get_state_str(hs[k], &st);
        CHECK(s != NULL, "read back handle %ld: %s", k, agent_status_name(st));
        if (!s) continue;
        long long i = -1;
        json_member_int(s, strlen(s), "i", &i);
        snprintf(agent, sizeof agent, "\"name\":\"%s-%ld\"", prefix, k);
        CHECK(i == k && strstr(s, agent) != NULL, "agent %ld holds %.200s", k, s);
        if (i == k && strstr(s, agent)) read_back++;
        free(s);
    }
    long long conns_after_reads = pg_backends_of(base, app);
    CHECK(conns_after_reads >= 1 && conns_after_reads <= cap, "%lld server connections after the reads, want 1..%ld",
          conns_after_reads, cap);
    for (long k = 0; k < n; k++)
        if (hs[k]) CHECK_STATUS(agent_close(hs[k]), AGENT_OK, "close handle %ld", k);
    double dt = now_s() - t0;
    free(hs);
    free(uri);
    printf("pg-handles: handles=%ld written=%ld read_back=%ld max_connections=%ld server_connections=%lld "
           "in %.1f s (open+write %.1f s)\n",
           opened, written, read_back, cap, conns > conns_after_reads ? conns : conns_after_reads, dt, t_open);
    return finish("pg-handles");
}
