/*
 * Item 4 (quick form, and item 6 under the sanitizers): random sequences of ABI calls.
 *
 * The C twin of the abi_sequence fuzz target, seeded instead of coverage-guided so that it runs
 * in the quick suite without building an instrumented SQLite. Each step picks a call (open,
 * close, get, set, replace, the versioned and compare-and-set forms, poll, changes_since,
 * state_at, restore, state-changed hooks, initial-state hooks, validators, buffers, status
 * names) with arguments drawn from live, closed, forged and zero handles, NULL pointers, valid
 * and broken JSON cut at random lengths, hostile options (change log on and off). Hooks
 * re-enter the library (read, write, remove themselves, close their handle). Then several
 * threads do the same on shared handles while others close them. Before that, fixed scenarios
 * that random runs found; a watchdog turns a deadlock into a failure.
 *
 * Invariants: every status is a documented one and never AGENT_ERR_PANIC; a failed call leaves
 * its output buffer empty; an output is NUL-terminated JSON of the stated length; every hook's
 * user_data is finalized exactly once (counted after all handles are closed); no crash, and
 * under ASan/valgrind no memory error or leak.
 *
 * Usage: abi_random [STEPS] [SEED]
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "common.h"

enum { SLOTS = 8, MAX_UD = 200000 };

struct ud {
    int kind;
    int freed;
    int writes; /* nested writes made by this hook: bounded, or a writing hook would feed itself */
    AgentHandle h;
    uint64_t id;
};

static struct ud g_uds[MAX_UD];
static long g_ud_count;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static long g_panics, g_bad_status, g_bad_buffers, g_double_frees, g_calls;
static char g_paths[4][4300];
static _Thread_local int t_depth;
static int g_trace; /* ABI_TRACE=1: print every step to stderr */

static const char *DOCS[] = {
    "{}", "{\"a\":1}", "{\"a\":null}", "{\"a\":{\"b\":[1,2,{\"c\":true}]}}", "{\"s\":{\"$set\":[1,2]}}",
    "{\"s\":{\"$set\":[1,1]}}", "{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"}}", "{\"d\":{\"$date\":\"no\"}}",
    "{\"n\":1e400}", "{\"a\":1,\"a\":2}", "[1,2]", "\"str\"", "null", "{\"a\":", "{\"a\":\"\\ud800\"}",
    "{\"a\":\"\xff\"}", "{\"big\":123456789012345678901234567890}", "{\"$bigint\":\"12\"}",
    "{\"x\":{\"$map\":[[1,2],[3,4]]}}", "{\"x\":{\"y\":{\"z\":{}}}}", "  {\"ws\" : [ ] }  ", "{\"a\":1}x",
};
static const char *OPTIONS[] = {
    NULL, "{}", "{\"read_only\":true}", "{\"initial_state\":{\"init\":1}}", "{bad", "{\"unknown\":1}",
    "{\"max_value_bytes\":64}", "{\"synchronous\":\"normal\",\"busy_timeout_ms\":50}", "[]",
    "{\"initial_state\":{\"$set\":[1]}}", "{\"initial_state\":[]}", "{\"max_value_bytes\":1}",
    "{\"synchronous\":\"sometimes\"}", "{\"busy_timeout_ms\":-1}", "{\"change_log\":{\"keep_last\":3}}",
    "{\"change_log\":{\"keep_seconds\":1,\"keep_last\":2}}", "{\"change_log\":false}", "{\"change_log\":5}",
    "{\"change_log\":{\"keep_last\":0}}",
};

static void count_status(AgentStatus st) {
    __atomic_add_fetch(&g_calls, 1, __ATOMIC_RELAXED);
    if (st == AGENT_ERR_PANIC) {
        __atomic_add_fetch(&g_panics, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "PANIC status: %s\n", agent_last_error());
    } else if (st < 0 || st > AGENT_ERR_GAP) {
        __atomic_add_fetch(&g_bad_status, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "undocumented status %d\n", st);
    }
}

static void check_buffer_as(AgentStatus st, AgentBuffer *b, char first) {
    int bad;
    if (st == AGENT_OK) bad = !b->data || b->data[b->len] != 0 || strlen((const char *)b->data) != b->len || b->data[0] != first;
    else bad = b->data != NULL || b->len != 0 || b->owner != NULL;
    if (bad) {
        __atomic_add_fetch(&g_bad_buffers, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "bad output buffer after %s\n", agent_status_name(st));
    }
    agent_buffer_free(b);
    agent_buffer_free(b); /* documented as harmless */
}

static void check_buffer(AgentStatus st, AgentBuffer *b) { check_buffer_as(st, b, '{'); }

static void free_ud(void *p) {
    struct ud *u = p;
    if (__atomic_add_fetch(&u->freed, 1, __ATOMIC_SEQ_CST) != 1) {
        __atomic_add_fetch(&g_double_frees, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "user_data finalized twice\n");
    }
}

static struct ud *new_ud(int kind, AgentHandle h) {
    pthread_mutex_lock(&g_mu);
    struct ud *u = g_ud_count < MAX_UD ? &g_uds[g_ud_count++] : NULL;
    pthread_mutex_unlock(&g_mu);
    if (u) {
        u->kind = kind;
        u->h = h;
    }
    return u;
}

static int32_t on_changed(void *p, const AgentStateChange *c) {
    struct ud *u = p;
    if (!c->next || c->next[c->next_len] != 0 || !c->prev || c->prev[c->prev_len] != 0 ||
        (c->patch == NULL) != (c->patch_len == 0)) {
        __atomic_add_fetch(&g_bad_buffers, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "bad change view\n");
    }
    if (t_depth > 2) return 0;
    t_depth++;
    AgentBuffer b = {0};
    AgentStatus st;
    switch (u->kind) {
    case 1: return t_depth--, 7; /* failing hook: the writer gets AGENT_ERR_HOOK */
    case 2:
        st = agent_get_state(u->h, &b);
        count_status(st);
        check_buffer(st, &b);
        break;
    case 3:
        if (__atomic_add_fetch(&u->writes, 1, __ATOMIC_RELAXED) > 2) break;
        st = agent_set_state(u->h, (const uint8_t *)"{\"nested\":1}", 12, &b);
        count_status(st);
        check_buffer(st, &b);
        break;
    case 4: count_status(agent_remove_hook(u->h, u->id)); break;
    case 5: count_status(agent_close(u->h)); break;
    default: break;
    }
    t_depth--;
    return 0;
}

static int32_t initial_hook(void *p, AgentBuffer *out) {
    struct ud *u = p;
    static const char answer[] = "{\"from\":\"static\"}";
    switch (u->kind) {
    case 0: return agent_buffer_copy((const uint8_t *)"{\"from\":\"hook\"}", 15, out);
    case 1: out->data = (const uint8_t *)answer; out->len = sizeof answer - 1; return 0;
    case 2: return agent_buffer_copy((const uint8_t *)"[not json", 9, out);
    case 3: return 5;
    case 4: return 0; /* success, but nothing filled in */
    case 5: { /* calls its own handle: must be BUSY, not a deadlock */
        AgentBuffer b = {0};
        AgentStatus st = agent_get_state(u->h, &b);
        count_status(st);
        if (st != AGENT_ERR_BUSY) fprintf(stderr, "own handle from the initial-state hook: %s\n", agent_status_name(st));
        g_bad_status += st != AGENT_ERR_BUSY;
        agent_buffer_free(&b);
        return agent_buffer_copy((const uint8_t *)"{}", 2, out);
    }
    default: return agent_buffer_copy((const uint8_t *)"{\"a\":{\"$set\":[1,1]}}", 20, out);
    }
}

static int32_t validator(void *p, const AgentStateChange *c, AgentBuffer *message) {
    struct ud *u = p;
    if (!c->next || c->next[c->next_len] != 0 || !c->prev || c->prev[c->prev_len] != 0) {
        __atomic_add_fetch(&g_bad_buffers, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "bad change view in the validator\n");
    }
    switch (u->kind) {
    case 0: return 0;
    case 1: return agent_buffer_copy((const uint8_t *)"no, because", 11, message), 1;
    case 2: return 3; /* rejected without a reason */
    case 3: { /* calls its own handle: must be BUSY, not a deadlock */
        AgentBuffer b = {0};
        AgentStatus st = agent_get_state(u->h, &b);
        count_status(st);
        if (st != AGENT_ERR_BUSY) {
            g_bad_status++;
            fprintf(stderr, "own handle from the validator: %s\n", agent_status_name(st));
        }
        agent_buffer_free(&b);
        return 0;
    }
    case 4: /* rejects what contains "a" */
        return memmem(c->next, c->next_len, "\"a\"", 3) != NULL;
    default: return 0;
    }
}

/* A handle: live, closed, zero or forged. */
static AgentHandle pick_handle(uint64_t *rng, AgentHandle *slots) {
    switch (rng_below(rng, 10)) {
    case 0: return 0;
    case 1: return rng_next(rng);
    case 2: return slots[rng_below(rng, SLOTS)] + 1;
    default: return __atomic_load_n(&slots[rng_below(rng, SLOTS)], __ATOMIC_RELAXED);
    }
}

static void step(uint64_t *rng, AgentHandle *slots) {
    AgentHandle h = pick_handle(rng, slots);
    AgentBuffer b = {0};
    AgentStatus st;
    const char *doc = DOCS[rng_below(rng, sizeof DOCS / sizeof DOCS[0])];
    size_t len = strlen(doc);
    if (rng_below(rng, 4) == 0) len = rng_below(rng, len + 1); /* cut at a random length */
    const uint8_t *ptr = (const uint8_t *)doc;
    if (rng_below(rng, 20) == 0) ptr = NULL;
    AgentBuffer *out = rng_below(rng, 5) == 0 ? NULL : &b;
    uint64_t version = rng_below(rng, 4) == 0 ? rng_next(rng) : rng_below(rng, 12), got_version = 0;
    unsigned op = (unsigned)rng_below(rng, 24);
    if (g_trace) fprintf(stderr, "op %u h=%llx len=%zu doc=%.40s\n", op, (unsigned long long)h, len, ptr ? doc : "(null)");
    switch (op) {
    case 0: case 1: {
        const char *path;
        switch (rng_below(rng, 8)) {
        case 0: path = NULL; break;
        case 1: path = ""; break;
        case 2: path = g_paths[3]; break; /* missing directory */
        case 3: case 4: path = ":memory:"; break;
        default: path = g_paths[rng_below(rng, 3)]; break;
        }
        AgentHandle nh = 12345;
        const char *opts = OPTIONS[rng_below(rng, sizeof OPTIONS / sizeof OPTIONS[0])];
        st = agent_open(path, opts, rng_below(rng, 30) ? &nh : NULL);
        count_status(st);
        if (g_trace) fprintf(stderr, "   open(%s, %s) -> %s %llx\n", path ? path : "NULL", opts ? opts : "NULL", agent_status_name(st), (unsigned long long)nh);
        if (st == AGENT_OK) {
            AgentHandle old = __atomic_exchange_n(&slots[rng_below(rng, SLOTS)], nh, __ATOMIC_SEQ_CST);
            if (old && rng_below(rng, 2)) count_status(agent_close(old)); /* else: left closed-by-nobody until the end */
            else if (old) count_status(agent_close(old));
        } else if (nh != 12345 && nh != 0) {
            g_bad_status++;
            fprintf(stderr, "failed open left handle %llu\n", (unsigned long long)nh);
        }
        break;
    }
    case 2: count_status(agent_close(h)); break;
    case 3: case 4:
        st = agent_get_state(h, out);
        count_status(st);
        if (out) check_buffer(st, out);
        break;
    case 5: case 6: case 7:
        st = agent_set_state(h, ptr, len, out);
        count_status(st);
        if (out) check_buffer(st, out);
        break;
    case 8:
        st = agent_replace_state(h, ptr, len, out);
        count_status(st);
        if (out) check_buffer(st, out);
        break;
    case 9: case 10: {
        struct ud *u = new_ud((int)rng_below(rng, 7), h);
        if (!u) break;
        uint64_t id = 777;
        st = agent_on_state_changed(h, rng_below(rng, 20) ? on_changed : NULL, u, free_ud,
                                    rng_below(rng, 20) ? &id : NULL);
        count_status(st);
        if (st == AGENT_OK) __atomic_store_n(&u->id, id, __ATOMIC_SEQ_CST);
        if (g_trace) fprintf(stderr, "   on_state_changed kind %d -> %s id %llu\n", u->kind, agent_status_name(st), (unsigned long long)id);
        break;
    }
    case 11: count_status(agent_remove_hook(h, rng_below(rng, 6))); break;
    case 12: {
        struct ud *u = new_ud((int)rng_below(rng, 7), h);
        if (!u) break;
        st = agent_set_initial_state_hook(h, rng_below(rng, 6) ? initial_hook : NULL, u, free_ud);
        count_status(st);
        if (g_trace) fprintf(stderr, "   initial hook kind %d -> %s\n", u->kind, agent_status_name(st));
        break;
    }
    case 13:
        st = agent_buffer_copy(ptr, len, rng_below(rng, 10) ? &b : NULL);
        count_status(st);
        if (st == AGENT_OK && (!b.data || b.len != len || b.data[len] != 0 || (len && memcmp(b.data, ptr, len) != 0))) {
            g_bad_buffers++;
            fprintf(stderr, "agent_buffer_copy made a bad copy\n");
        }
        agent_buffer_free(&b);
        agent_buffer_free(NULL);
        break;
    case 14: {
        const char *name = agent_status_name((AgentStatus)rng_next(rng));
        const char *e = agent_last_error();
        const char *v = agent_version();
        if (!name || !e || !v || strncmp(name, "AGENT_", 6) != 0) g_bad_status++;
        break;
    }
    case 16:
        st = agent_get_state_versioned(h, out, rng_below(rng, 3) ? &got_version : NULL);
        count_status(st);
        if (out) check_buffer(st, out);
        break;
    case 17: case 18:
        if (rng_below(rng, 2)) {
            /* A real compare-and-set round: read the version, write on it. */
            AgentBuffer cur = {0};
            if (agent_get_state_versioned(h, &cur, &version) != AGENT_OK) version = 0;
            agent_buffer_free(&cur);
        }
        st = rng_below(rng, 3) ? agent_set_state_if(h, version, ptr, len, out, &got_version)
                               : agent_replace_state_if(h, version, ptr, len, out, NULL);
        count_status(st);
        if (out) check_buffer(st, out);
        break;
    case 19: {
        size_t delivered = 0;
        count_status(agent_poll(h, rng_below(rng, 4) ? &delivered : NULL));
        break;
    }
    case 20:
        st = agent_changes_since(h, version, out);
        count_status(st);
        if (out) check_buffer_as(st, out, '[');
        break;
    case 21:
        st = rng_below(rng, 2) ? agent_get_state_at(h, version, out) : agent_restore_state(h, version, out, &got_version);
        count_status(st);
        if (out) check_buffer(st, out);
        break;
    case 22: {
        struct ud *u = new_ud((int)rng_below(rng, 6), h);
        if (!u) break;
        st = agent_set_validator(h, rng_below(rng, 6) ? validator : NULL, u, free_ud);
        count_status(st);
        if (g_trace) fprintf(stderr, "   validator kind %d -> %s\n", u->kind, agent_status_name(st));
        break;
    }
    default:
        /* Same handle, many calls: get/set alternately. */
        for (int i = 0; i < 3; i++) {
            st = agent_set_state(h, (const uint8_t *)"{\"loop\":[1]}", 12, NULL);
            count_status(st);
            st = agent_get_state(h, &b);
            count_status(st);
            check_buffer(st, &b);
        }
        break;
    }
}

struct thread_arg {
    uint64_t seed;
    long steps;
    AgentHandle *slots;
};

static void *thread_main(void *p) {
    struct thread_arg *a = p;
    for (long i = 0; i < a->steps; i++) step(&a->seed, a->slots);
    return NULL;
}

/*
 * A fixed scenario the random runs ran into: with the change log on, a write (or a poll) through
 * handle A delivers the changes other handles committed since A's last delivery, then A's own;
 * A's hook makes a nested write through A (which the header allows: "the nested change is
 * delivered after the running hook returns"). Every delivery must happen, in version order, and
 * nothing may hang. Run in a child with an alarm, so a deadlock is a failure, not a stuck suite.
 */
static AgentHandle s_a;
static uint64_t s_versions[32];
static int s_seen, s_nested;

static int32_t scenario_hook(void *ud, const AgentStateChange *c) {
    (void)ud;
    if (s_seen < 32) s_versions[s_seen++] = c->version;
    if (!s_nested) {
        s_nested = 1;
        if (set_str(s_a, "{\"nested\":1}") != AGENT_OK) s_nested = -1;
    }
    return 0;
}

static void scenario_nested_write_with_change_log(int use_poll) {
    char path[4300];
    snprintf(path, sizeof path, "%s/abi/nested-%d.db", scratch_dir(), use_poll);
    remove_store(path);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(120); /* a deadlock never returns; valgrind on a loaded machine is merely slow */
        AgentHandle b;
        uint64_t id;
        const char *opts = "{\"change_log\":{\"keep_last\":100}}";
        if (agent_open(path, opts, &s_a) != AGENT_OK || agent_open(path, opts, &b) != AGENT_OK ||
            agent_on_state_changed(s_a, scenario_hook, NULL, NULL, &id) != AGENT_OK)
            _exit(3);
        set_str(b, "{\"b\":1}");
        set_str(b, "{\"b\":2}");
        AgentStatus st = use_poll ? agent_poll(s_a, NULL) : set_str(s_a, "{\"a\":1}");
        int ok = st == AGENT_OK && s_nested == 1;
        /* Versions delivered: 1, 2 (b's), 3 (a's or none for poll), then the nested one. */
        uint64_t want_set[] = {1, 2, 3, 4}, want_poll[] = {1, 2, 3};
        uint64_t *want = use_poll ? want_poll : want_set;
        int n = use_poll ? 3 : 4;
        ok = ok && s_seen == n;
        for (int i = 0; ok && i < n; i++) ok = s_versions[i] == want[i];
        if (!ok) fprintf(stderr, "nested write (%s): status %s, %d deliveries\n", use_poll ? "poll" : "set", agent_status_name(st), s_seen);
        agent_close(s_a);
        agent_close(b);
        _exit(ok ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a hook's nested write through its own handle, with the change log on and another handle's "
          "changes pending, %s (%s)",
          WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? "DEADLOCKS: no return in 120 s" : "fails",
          use_poll ? "agent_poll" : "agent_set_state");
    remove_store(path);
}

/* Turns a hang of the random run into a failure with a message: no call returned for 60 s (a
 * generous bound: under valgrind on a loaded machine one open with fsyncs takes seconds). */
static int g_done;

static void *watchdog(void *arg) {
    (void)arg;
    long last = -1;
    for (int still = 0; !__atomic_load_n(&g_done, __ATOMIC_SEQ_CST); sleep(1)) {
        long now = __atomic_load_n(&g_calls, __ATOMIC_RELAXED);
        still = now == last ? still + 1 : 0;
        last = now;
        if (still >= 60) {
            fprintf(stderr, "FAIL: no agent_* call returned for 60 s: deadlock (run with ABI_TRACE=1 and "
                            "ABI_NO_THREADS=1 to see the last call)\n");
            fflush(stdout);
            _exit(3);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 20000;
    g_trace = getenv("ABI_TRACE") != NULL;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t)time(NULL);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/abi", scratch_dir());
    make_dirs(dir);
    for (int i = 0; i < 3; i++) {
        snprintf(g_paths[i], sizeof g_paths[i], "%s/abi%d.db", dir, i);
        remove_store(g_paths[i]);
    }
    snprintf(g_paths[3], sizeof g_paths[3], "%s/missing-dir/x.db", dir);
    printf("abi-random: %ld steps single-threaded + %ld on 4 threads, seed %llu\n", steps, steps, (unsigned long long)seed);

    scenario_nested_write_with_change_log(0);
    scenario_nested_write_with_change_log(1);

    pthread_t dog;
    pthread_create(&dog, NULL, watchdog, NULL);
    AgentHandle slots[SLOTS] = {0};
    uint64_t rng = seed * 2654435761u + 7;
    for (long i = 0; i < steps; i++) step(&rng, slots);

    pthread_t tids[4];
    struct thread_arg args[4];
    if (g_trace) fprintf(stderr, "---- threads\n");
    for (int t = 0; t < (getenv("ABI_NO_THREADS") ? 0 : 4); t++) {
        args[t] = (struct thread_arg){.seed = seed + 1000003u * (uint64_t)(t + 1), .steps = steps / 4, .slots = slots};
        pthread_create(&tids[t], NULL, thread_main, &args[t]);
    }
    for (int t = 0; t < (getenv("ABI_NO_THREADS") ? 0 : 4); t++) pthread_join(tids[t], NULL);

    for (int i = 0; i < SLOTS; i++)
        if (slots[i]) agent_close(slots[i]);
    __atomic_store_n(&g_done, 1, __ATOMIC_SEQ_CST);
    pthread_join(dog, NULL);
    /* Handles overwritten in a slot while open were closed at the time; every user_data must now
     * have been finalized exactly once. */
    long unfreed = 0;
    for (long i = 0; i < g_ud_count; i++) unfreed += g_uds[i].freed == 0;
    CHECK(g_panics == 0, "%ld calls returned AGENT_ERR_PANIC", g_panics);
    CHECK(g_bad_status == 0, "%ld undocumented statuses or wrong results", g_bad_status);
    CHECK(g_bad_buffers == 0, "%ld bad output buffers", g_bad_buffers);
    CHECK(g_double_frees == 0, "%ld user_data finalized twice", g_double_frees);
    CHECK(unfreed == 0, "%ld of %ld user_data never finalized", unfreed, g_ud_count);
    printf("abi-random: calls=%ld hooks_registered=%ld panics=%ld\n", g_calls, g_ud_count, g_panics);
    for (int i = 0; i < 3; i++) remove_store(g_paths[i]);
    return finish("abi-random");
}
