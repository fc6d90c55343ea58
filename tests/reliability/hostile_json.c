/*
 * Item 3, hostile JSON.
 *
 * Every file of the JSONTestSuite parsing corpus goes to agent_set_state as (pointer, length):
 * - n_ files (must be rejected): the raw bytes, and the bytes wrapped as {"v":<doc>}, to
 *   set_state and replace_state: each must be AGENT_ERR_JSON. The store they are sent to holds a
 *   known state that must stay byte-identical (read through a second handle after every file,
 *   and the file's bytes hashed before and after the sweep).
 * - y_ files (must be accepted): {"v":<doc>}, and the raw bytes when the document is an object,
 *   must be AGENT_OK, except those that are not codec-safe (duplicate member names), which may
 *   only be AGENT_ERR_CODEC and must be the expected ones. Each accepted state is read back
 *   through a second handle and must round-trip: replace_state(output) returns the same bytes.
 * - i_ files: what happens is recorded (the report file given as the second argument), and must
 *   be an orderly status (never a crash, never AGENT_ERR_PANIC); a rejection leaves the state as
 *   it was.
 * Then, corpus or not: 100,000 levels of nesting, the 64/65 and 127/128 nesting boundaries, 10 MiB strings,
 * a state growing past max_value_bytes, empty input.
 *
 * Usage: hostile_json CORPUS_DIR|- REPORT_FILE
 */
#include <dirent.h>

#include "common.h"

static AgentHandle g_w;      /* writer of the n_ store */
static AgentHandle g_v;      /* second handle on the n_ store, reads what is on disk */
static AgentHandle g_yw, g_yv; /* writer and reader of the y_/i_ store */
static char *g_base;         /* the n_ store's state */
static const char *BASE = "{\"base\":{\"k\":[1,2.5,-3e+2],\"s\":\"\\u00e9\\n\"},\"n\":1}";

/* Documents whose codec refusal is expected (duplicate member names, per I-JSON). */
static const char *Y_NOT_CODEC_SAFE[] = {"y_object_duplicated_key.json",
                                         "y_object_duplicated_key_and_value.json", NULL};

static int in_list(const char *name, const char **list) {
    for (; *list; list++)
        if (strcmp(name, *list) == 0) return 1;
    return 0;
}

static int is_object_doc(const unsigned char *b, size_t n) {
    size_t i = 0;
    while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r')) i++;
    return i < n && b[i] == '{';
}

static unsigned char *wrap(const unsigned char *doc, size_t n, size_t *out_len) {
    unsigned char *w = malloc(n + 7);
    if (!w) DIE("out of memory");
    memcpy(w, "{\"v\":", 5);
    memcpy(w + 5, doc, n);
    w[n + 5] = '}';
    w[n + 6] = 0;
    *out_len = n + 6;
    return w;
}

static int state_is(AgentHandle h, const char *want) {
    AgentStatus st;
    char *s = get_state_str(h, &st);
    int same = s && strcmp(s, want) == 0;
    free(s);
    return same;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sends a y_ document; returns the status. On success checks persistence and the round trip. */
static AgentStatus send_y(const char *name, const char *how, const unsigned char *doc, size_t n) {
    AgentBuffer out = {0};
    AgentStatus st = agent_set_state(g_yw, doc, n, &out);
    if (st == AGENT_OK) {
        CHECK(out.data && out.data[out.len] == 0, "%s (%s): output not NUL-terminated", name, how);
        char *seen = get_state_str(g_yv, NULL);
        CHECK(seen && strlen(seen) == out.len && memcmp(seen, out.data, out.len) == 0,
              "%s (%s): the second handle reads another state", name, how);
        free(seen);
        AgentBuffer again = {0};
        CHECK_STATUS(agent_replace_state(g_yw, out.data, out.len, &again), AGENT_OK,
                     "%s (%s): the library's own output is refused as input", name, how);
        CHECK(again.len == out.len && memcmp(again.data, out.data, out.len) == 0,
              "%s (%s): output changes on a round trip:\n  %s\n  %s", name, how, (const char *)out.data,
              again.data ? (const char *)again.data : "(none)");
        agent_buffer_free(&again);
    } else {
        CHECK(out.data == NULL && out.len == 0, "%s (%s): failed call left a buffer", name, how);
    }
    agent_buffer_free(&out);
    return st;
}

static void corpus(const char *dir, const char *report_path) {
    DIR *d = opendir(dir);
    if (!d) DIE("cannot open corpus %s", dir);
    char *names[1024];
    size_t count = 0;
    struct dirent *e;
    while ((e = readdir(d)) && count < 1024) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0 && e->d_name[1] == '_') names[count++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, count, sizeof *names, cmp_names);
    FILE *report = fopen(report_path, "w");
    if (!report) DIE("cannot write %s", report_path);
    fprintf(report, "# file\tas {\"v\":doc}\tas raw bytes\n");

    char db_path[4200], wal_path[4300];
    snprintf(db_path, sizeof db_path, "%s/hostile/n.db", scratch_dir());
    snprintf(wal_path, sizeof wal_path, "%s-wal", db_path);
    uint64_t db_before = file_hash(db_path), wal_before = file_hash(wal_path);

    long n_files = 0, n_ok = 0, y_files = 0, y_ok = 0, y_codec = 0, i_files = 0;
    for (size_t k = 0; k < count; k++) {
        const char *name = names[k];
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        size_t n;
        unsigned char *doc = read_file(path, &n);
        if (!doc) DIE("cannot read %s", path);
        size_t wn;
        unsigned char *wrapped = wrap(doc, n, &wn);
        if (name[0] == 'n') {
            n_files++;
            long before = g_failures;
            CHECK_STATUS(agent_set_state(g_w, doc, n, NULL), AGENT_ERR_JSON, "%s set_state(raw)", name);
            CHECK_STATUS(agent_set_state(g_w, wrapped, wn, NULL), AGENT_ERR_JSON, "%s set_state({\"v\":doc})", name);
            CHECK_STATUS(agent_replace_state(g_w, doc, n, NULL), AGENT_ERR_JSON, "%s replace_state(raw)", name);
            CHECK(state_is(g_v, g_base), "%s: the stored state changed", name);
            CHECK(state_is(g_w, g_base), "%s: the writer's state changed", name);
            if (g_failures == before) n_ok++;
        } else if (name[0] == 'y') {
            y_files++;
            int codec_unsafe = in_list(name, Y_NOT_CODEC_SAFE);
            AgentStatus st = send_y(name, "{\"v\":doc}", wrapped, wn);
            AgentStatus raw = AGENT_OK;
            if (is_object_doc(doc, n)) raw = send_y(name, "raw", doc, n);
            if (codec_unsafe) {
                CHECK(st == AGENT_ERR_CODEC && raw == AGENT_ERR_CODEC,
                      "%s (not codec-safe): got %s / %s, want AGENT_ERR_CODEC", name, agent_status_name(st),
                      agent_status_name(raw));
                y_codec++;
            } else {
                CHECK(st == AGENT_OK, "%s: {\"v\":doc} refused with %s: %s", name, agent_status_name(st),
                      agent_last_error());
                CHECK(raw == AGENT_OK, "%s: raw object refused with %s: %s", name, agent_status_name(raw),
                      agent_last_error());
                if (st == AGENT_OK && raw == AGENT_OK) y_ok++;
            }
        } else if (name[0] == 'i') {
            i_files++;
            char *before = get_state_str(g_yv, NULL);
            AgentStatus st = send_y(name, "{\"v\":doc}", wrapped, wn);
            if (st != AGENT_OK) CHECK(state_is(g_yv, before), "%s: rejected but the state changed", name);
            char msg[300];
            snprintf(msg, sizeof msg, "%s", st == AGENT_OK ? "" : agent_last_error());
            AgentStatus raw = agent_set_state(g_yw, doc, n, NULL);
            CHECK(st != AGENT_ERR_PANIC && raw != AGENT_ERR_PANIC && st <= AGENT_ERR_TOO_LARGE &&
                      raw <= AGENT_ERR_TOO_LARGE,
                  "%s: unexpected statuses %s / %s", name, agent_status_name(st), agent_status_name(raw));
            fprintf(report, "%s\t%s\t%s\t%s\n", name, agent_status_name(st), agent_status_name(raw), msg);
            free(before);
        }
        free(wrapped);
        free(doc);
        free(names[k]);
    }
    fclose(report);
    CHECK(file_hash(db_path) == db_before && file_hash(wal_path) == wal_before,
          "the n_ store's files changed during the n_ sweep");
    CHECK(n_files > 150 && y_files > 80 && i_files > 20, "corpus looks incomplete (%ld n_, %ld y_, %ld i_)",
          n_files, y_files, i_files);
    printf("hostile-json corpus: n_ %ld files, %ld rejected with AGENT_ERR_JSON and state unchanged; "
           "y_ %ld files, %ld accepted, %ld not codec-safe (AGENT_ERR_CODEC); i_ %ld files recorded in %s\n",
           n_files, n_ok, y_files, y_ok, y_codec, i_files, report_path);
}

/* {"v": <depth-1 levels of arrays around 0>}: total nesting `depth` counting the outer object. */
static unsigned char *nested(size_t depth, int objects, int closed, size_t *len) {
    size_t inner = depth - 1;
    size_t cap = 16 + inner * 6 + 2;
    unsigned char *b = malloc(cap);
    if (!b) DIE("out of memory");
    size_t p = 0;
    memcpy(b, "{\"v\":", 5);
    p = 5;
    for (size_t i = 0; i < inner; i++) {
        if (objects) {
            memcpy(b + p, "{\"a\":", 5);
            p += 5;
        } else {
            b[p++] = '[';
        }
    }
    b[p++] = '0';
    if (closed) {
        for (size_t i = 0; i < inner; i++) b[p++] = objects ? '}' : ']';
        b[p++] = '}';
    }
    *len = p;
    return b;
}

static void limits(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/hostile/limits.db", scratch_dir());
    remove_store(path);
    AgentHandle h;
    CHECK_STATUS(agent_open(path, NULL, &h), AGENT_OK, "open limits store");
    CHECK_STATUS(set_str(h, "{\"keep\":1}"), AGENT_OK, "baseline");
    const char *base = "{\"keep\":1}";

    struct { size_t depth; int objects, closed; AgentStatus want; } cases[] = {
        {100000, 0, 1, AGENT_ERR_JSON}, {100000, 1, 1, AGENT_ERR_JSON}, {100000, 0, 0, AGENT_ERR_JSON},
        {100000, 1, 0, AGENT_ERR_JSON}, {64, 0, 1, AGENT_OK},            {64, 1, 1, AGENT_OK},
        /* The header: CODEC beyond 64 levels, JSON from 128 levels on (where the parser stops). */
        {65, 0, 1, AGENT_ERR_CODEC},    {65, 1, 1, AGENT_ERR_CODEC},     {127, 0, 1, AGENT_ERR_CODEC},
        {127, 1, 1, AGENT_ERR_CODEC},   {128, 0, 1, AGENT_ERR_JSON},     {128, 1, 1, AGENT_ERR_JSON},
        {129, 0, 1, AGENT_ERR_JSON},    {129, 1, 1, AGENT_ERR_JSON},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        unsigned char *doc = nested(cases[i].depth, cases[i].objects, cases[i].closed, &len);
        CHECK_STATUS(agent_set_state(h, doc, len, NULL), cases[i].want, "nesting %zu levels of %s%s",
                     cases[i].depth, cases[i].objects ? "objects" : "arrays", cases[i].closed ? "" : " (unclosed)");
        CHECK_STATUS(agent_replace_state(h, doc, len, NULL), cases[i].want, "replace: nesting %zu levels of %s",
                     cases[i].depth, cases[i].objects ? "objects" : "arrays");
        free(doc);
        if (cases[i].want == AGENT_OK) CHECK_STATUS(agent_replace_state(h, (const uint8_t *)base, strlen(base), NULL), AGENT_OK, "restore");
        else CHECK(state_is(h, base), "nesting %zu: the state changed", cases[i].depth);
    }
    /* 100,000 '[' without the object wrapper (not even an object: still a JSON error first). */
    {
        size_t n = 100000;
        unsigned char *b = malloc(n);
        memset(b, '[', n);
        CHECK_STATUS(agent_set_state(h, b, n, NULL), AGENT_ERR_JSON, "100,000 bare '['");
        free(b);
    }

    /* 10 MiB strings: over the default max_value_bytes (2 MiB), refused before parsing. */
    size_t big = 10u << 20;
    unsigned char *s = malloc(big + 16);
    memcpy(s, "{\"v\":\"", 6);
    memset(s + 6, 'x', big);
    memcpy(s + 6 + big, "\"}", 2);
    CHECK_STATUS(agent_set_state(h, s, big + 8, NULL), AGENT_ERR_TOO_LARGE, "10 MiB string");
    CHECK_STATUS(agent_replace_state(h, s, big + 8, NULL), AGENT_ERR_TOO_LARGE, "10 MiB string (replace)");
    s[6 + big / 2] = 0xff; /* invalid UTF-8 too: the size check comes first */
    CHECK_STATUS(agent_set_state(h, s, big + 8, NULL), AGENT_ERR_TOO_LARGE, "10 MiB string with bad UTF-8");
    /* A 10 MiB string as a member name. */
    memcpy(s, "{\"", 2);
    memset(s + 2, 'k', big);
    memcpy(s + 2 + big, "\":1}", 4);
    CHECK_STATUS(agent_set_state(h, s, big + 6, NULL), AGENT_ERR_TOO_LARGE, "10 MiB member name");
    CHECK(state_is(h, base), "10 MiB inputs: the state changed");

    /* The state growing past max_value_bytes through patches that are each small enough. */
    size_t part = 1500000;
    memcpy(s, "{\"a\":\"", 6);
    memset(s + 6, 'y', part);
    memcpy(s + 6 + part, "\"}", 2);
    CHECK_STATUS(agent_set_state(h, s, part + 8, NULL), AGENT_OK, "1.5 MB member");
    char *before = get_state_str(h, NULL);
    s[2] = 'b';
    CHECK_STATUS(agent_set_state(h, s, part + 8, NULL), AGENT_ERR_TOO_LARGE, "second 1.5 MB member: 3 MB state");
    CHECK(before && state_is(h, before), "state changed by a refused oversized merge");
    free(before);
    free(s);

    /* Empty and whitespace-only input; NUL inside a string. */
    CHECK_STATUS(agent_set_state(h, (const uint8_t *)"", 0, NULL), AGENT_ERR_JSON, "empty input");
    CHECK_STATUS(agent_set_state(h, (const uint8_t *)" \n", 2, NULL), AGENT_ERR_JSON, "whitespace only");
    CHECK_STATUS(agent_set_state(h, (const uint8_t *)"{\"a\":\"x\0y\"}", 11, NULL), AGENT_ERR_JSON, "raw NUL in a string");
    CHECK_STATUS(agent_set_state(h, (const uint8_t *)"{\"a\":1}\0", 8, NULL), AGENT_ERR_JSON, "trailing NUL byte");
    CHECK_STATUS(agent_set_state(h, (const uint8_t *)"{\"a\":\"\\u0000\"}", 14, NULL), AGENT_OK, "escaped NUL is fine");
    agent_close(h);
    remove_store(path);
    printf("hostile-json limits: 100,000-level nesting, 64/65 and 127/128 boundaries, 10 MiB strings, "
           "growth past max_value_bytes checked\n");
}

static AgentHandle open_or_die(const char *path) {
    AgentHandle h;
    if (agent_open(path, "{\"synchronous\":\"normal\"}", &h) != AGENT_OK) DIE("open %s: %s", path, agent_last_error());
    return h;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: hostile_json CORPUS_DIR|- REPORT_FILE\n");
        return 2;
    }
    char dir[4200], n_path[4300], y_path[4300];
    snprintf(dir, sizeof dir, "%s/hostile", scratch_dir());
    make_dirs(dir);
    limits();
    if (strcmp(argv[1], "-") != 0) {
        snprintf(n_path, sizeof n_path, "%s/n.db", dir);
        snprintf(y_path, sizeof y_path, "%s/y.db", dir);
        remove_store(n_path);
        remove_store(y_path);
        g_w = open_or_die(n_path);
        g_v = open_or_die(n_path);
        g_yw = open_or_die(y_path);
        g_yv = open_or_die(y_path);
        if (set_str(g_w, BASE) != AGENT_OK) DIE("baseline: %s", agent_last_error());
        g_base = get_state_str(g_w, NULL);
        corpus(argv[1], argv[2]);
        free(g_base);
        agent_close(g_w);
        agent_close(g_v);
        agent_close(g_yw);
        agent_close(g_yv);
        if (g_failures == 0) {
            remove_store(n_path);
            remove_store(y_path);
        }
    }
    return finish("hostile-json");
}
