/*
 * The C runner of the public RFC 6902 suite (tests/conformance/json_patch/cases.py writes the
 * cases from ../shared/corpora/json-patch-tests): each case on a fresh agent, through the C ABI.
 *
 *     json_patch_c CASES_JSON RESULTS_DIR
 *
 * For each case: agent_replace_state(state), then agent_patch_state(patch), with the case's
 * text passed untouched. A case with "expect" must apply; its result must be what the store
 * then holds, and the case's "verify" patch (a `test` of the whole state against "expect",
 * the library's own JSON equality) must hold and commit nothing. A case with "error" must fail
 * with INVALID_ARGUMENT, PATH, TEST_FAILED or CODEC, the state and its version unchanged.
 *
 * Writes RESULTS_DIR/c-BACKEND.txt (BACKEND: AGENT_STATE_TEST_BACKEND, sqlite or postgres), one
 * line per case, "ID STATUS" (agent_status_name of patch_state's status), which compare.py
 * checks against every other language's run. Prints one line per failed case and a last line
 * "N passed, M failed" (cases). Without CASES_JSON (no corpus beside the checkout to make it
 * from) it says it skipped, and fails under CI=true.
 *
 * `make test-c` runs it on both backends (tests/pg/each-backend.sh), `make test-valgrind` on
 * SQLite under valgrind.
 */
#define _GNU_SOURCE

#include "agent_state.h"
#include "json_reader.h"
#include "vector_text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int g_failed;

/* Reports a failed case (the first problem found in it). */
static void case_failed(const char *id, const char *fmt, const char *detail)
{
    printf("FAIL %s: ", id);
    printf(fmt, detail);
    printf("\n");
    g_failed++;
}

/* The state and version, or 0 (with the case failed) when they cannot be read. */
static int read_versioned(AgentHandle h, const char *id, char **state, uint64_t *version)
{
    AgentBuffer b = { NULL, 0, NULL };
    AgentStatus rc = agent_get_state_versioned(h, &b, version);
    if (rc != AGENT_OK) {
        case_failed(id, "agent_get_state_versioned: %s", agent_last_error());
        return 0;
    }
    *state = malloc(b.len + 1);
    if (*state == NULL) {
        perror("malloc");
        exit(2);
    }
    memcpy(*state, b.data, b.len + 1);
    agent_buffer_free(&b);
    return 1;
}

/* Runs one case on the open agent `h`; writes its status's name to `status_out`. */
static void run_case(AgentHandle h, const JrNode *c, const char **status_out)
{
    const char *id = jr_get(c, "id")->str;
    const JrNode *state = jr_get(c, "state"), *patch = jr_get(c, "patch");
    const JrNode *expect = jr_get(c, "expect"), *verify = jr_get(c, "verify");
    const JrNode *error = jr_get(c, "error");
    AgentBuffer out = { NULL, 0, NULL };
    AgentStatus rc;
    char *before = NULL, *after = NULL;
    uint64_t before_version = 0, after_version = 0;

    *status_out = "AGENT_ERR_UNKNOWN";
    rc = agent_replace_state(h, (const uint8_t *)state->str, state->str_len, NULL);
    if (rc != AGENT_OK) {
        case_failed(id, "agent_replace_state(state): %s", agent_last_error());
        return;
    }
    if (!read_versioned(h, id, &before, &before_version)) {
        return;
    }
    rc = agent_patch_state(h, (const uint8_t *)patch->str, patch->str_len, &out);
    *status_out = agent_status_name(rc);
    if (error != NULL) {
        if (rc == AGENT_OK) {
            case_failed(id, "applied as %s, expected an error", (const char *)out.data);
        } else if (rc != AGENT_ERR_INVALID_ARGUMENT && rc != AGENT_ERR_PATH
                   && rc != AGENT_ERR_TEST_FAILED && rc != AGENT_ERR_CODEC) {
            case_failed(id, "refused with another status: %s", agent_last_error());
        } else if (out.data != NULL || out.len != 0 || out.owner != NULL) {
            case_failed(id, "refused, but *out is not the empty buffer%s", "");
        } else if (read_versioned(h, id, &after, &after_version)
                   && (strcmp(before, after) != 0 || before_version != after_version)) {
            case_failed(id, "refused, but the state became %s", after);
        }
    } else if (rc != AGENT_OK) {
        case_failed(id, "refused: %s", agent_last_error());
    } else if (read_versioned(h, id, &after, &after_version)) {
        if (strlen(after) != out.len || memcmp(after, out.data, out.len) != 0) {
            case_failed(id, "the store holds %s, not what agent_patch_state returned", after);
        } else if (expect != NULL) {
            /* The library's own equality: a `test` of the whole state, which commits nothing. */
            AgentStatus vrc = agent_patch_state(h, (const uint8_t *)verify->str, verify->str_len, NULL);
            char *checked = NULL;
            uint64_t checked_version = 0;
            if (vrc != AGENT_OK) {
                case_failed(id, "the result is not the expected one: %s", agent_last_error());
            } else if (read_versioned(h, id, &checked, &checked_version)
                       && checked_version != after_version) {
                case_failed(id, "the verifying test committed a change: %s", checked);
            }
            free(checked);
        }
    }
    agent_buffer_free(&out);
    free(before);
    free(after);
}

/* Removes the SQLite store file and its WAL companions, then the directory. */
static void remove_store(const char *dir, const char *path)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    char name[4200];
    size_t k;
    for (k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "%s%s", path, suffixes[k]);
        unlink(name);
    }
    rmdir(dir);
}

int main(int argc, char **argv)
{
    const char *backend, *pg_uri = NULL, *ci = getenv("CI");
    char why[256], err[256], dir[] = "/tmp/agent_state_json_patch_XXXXXX", path[4096];
    char out_path[4096], agent_id[128], options[256];
    char *text;
    size_t len, i;
    JrNode *root;
    const JrNode *cases;
    FILE *results;
    int passed = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: json_patch_c CASES_JSON RESULTS_DIR\n");
        return 2;
    }
    backend = vt_backend(&pg_uri, why, sizeof why);
    if (backend == NULL) {
        fprintf(stderr, "json_patch_c: %s\n", why);
        return 2;
    }
    text = jr_read_file(argv[1], &len);
    if (text == NULL) {
        int under_ci = ci != NULL && strcmp(ci, "true") == 0;
        printf("json_patch_c: no RFC 6902 cases at %s (tests/conformance/json_patch/cases.py "
               "makes them from ../shared/corpora/json-patch-tests): %s\n0 passed, %d failed\n",
               argv[1], under_ci ? "a failure under CI=true" : "skipped", under_ci);
        return under_ci ? 1 : 0;
    }
    root = jr_parse(text, len, err, sizeof err);
    cases = jr_get(root, "cases");
    if (root == NULL || cases == NULL || cases->kind != JR_ARRAY) {
        fprintf(stderr, "json_patch_c: %s is not a file of cases: %s\n", argv[1], err);
        return 2;
    }
    if (strcmp(backend, "postgres") == 0) {
        snprintf(path, sizeof path, "%s", pg_uri);
    } else {
        if (mkdtemp(dir) == NULL) {
            perror("mkdtemp");
            return 2;
        }
        snprintf(path, sizeof path, "%s/cases.db", dir);
    }
    if (mkdir(argv[2], 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "json_patch_c: cannot create %s: %s\n", argv[2], strerror(errno));
        return 2;
    }
    snprintf(out_path, sizeof out_path, "%s/c-%s.txt", argv[2], backend);
    results = fopen(out_path, "w");
    if (results == NULL) {
        fprintf(stderr, "json_patch_c: cannot write %s: %s\n", out_path, strerror(errno));
        return 2;
    }
    printf("agent_state %s: the RFC 6902 suite's %zu cases through the C ABI on %s\n",
           agent_version(), cases->n, backend);
    for (i = 0; i < cases->n; i++) {
        const JrNode *c = cases->items[i];
        const char *status = "AGENT_ERR_UNKNOWN";
        AgentHandle h = 0;
        AgentStatus rc;
        int failed_before = g_failed;
        /* A fresh agent per case: its own agent_id in the run's one store (on PostgreSQL,
         * unique among runs and runners sharing the server). */
        vt_agent_id("cpatch", agent_id, sizeof agent_id);
        snprintf(options, sizeof options, "{\"agent_id\":\"%s\"}", agent_id);
        rc = agent_open(path, options, &h);
        if (rc != AGENT_OK) {
            case_failed(jr_get(c, "id")->str, "agent_open: %s", agent_last_error());
        } else {
            run_case(h, c, &status);
            if (agent_close(h) != AGENT_OK) {
                case_failed(jr_get(c, "id")->str, "agent_close: %s", agent_last_error());
            }
        }
        fprintf(results, "%s %s\n", jr_get(c, "id")->str, status);
        if (g_failed == failed_before) {
            passed++;
        }
    }
    if (fclose(results) != 0) {
        fprintf(stderr, "json_patch_c: cannot write %s: %s\n", out_path, strerror(errno));
        g_failed++;
    }
    if (strcmp(backend, "sqlite") == 0) {
        remove_store(dir, path);
    }
    jr_free(root);
    free(text);
    printf("wrote %s\n%d passed, %d failed\n", out_path, passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
