/*
 * The C suite's checks (declared in check.h): each counts one pass or one failure; a
 * failure prints file:line, the running test and what was wrong.
 */
#include "check.h"

static pthread_mutex_t g_check_mu = PTHREAD_MUTEX_INITIALIZER;
int g_passed, g_failed;
const char *g_test = "";
int g_quick; /* AGENT_TEST_QUICK: fewer iterations (valgrind) */

/* Counts one check; on failure prints file:line, the running test and the message. */
int check_(int ok, const char *file, int line, const char *fmt, ...)
{
    pthread_mutex_lock(&g_check_mu);
    if (ok) {
        g_passed++;
    } else {
        va_list ap;
        g_failed++;
        fprintf(stderr, "%s:%d: [%s] FAILED: ", file, line, g_test);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
    pthread_mutex_unlock(&g_check_mu);
    return ok;
}

int check_status_(AgentStatus got, AgentStatus want, const char *file, int line,
                  const char *call)
{
    return check_(got == want, file, line, "%s returned %s (%d), expected %s (%d); last error: %s",
                  call, agent_status_name(got), (int)got, agent_status_name(want), (int)want,
                  got == AGENT_OK ? "no error" : agent_last_error());
}

/* A buffer holds exactly `text` (compact JSON), NUL-terminated at data[len]. */
int buf_is(const AgentBuffer *b, const char *text)
{
    size_t n = strlen(text);
    return b->data != NULL && b->len == n && memcmp(b->data, text, n) == 0 && b->data[n] == 0;
}

int buf_is_empty(const AgentBuffer *b)
{
    return b->data == NULL && b->len == 0 && b->owner == NULL;
}

int check_last_error_from_(const char *fn, const char *file, int line)
{
    const char *msg = agent_last_error();
    size_t n = strlen(fn);
    return check_(msg != NULL && strncmp(msg, fn, n) == 0 && msg[n] == ':' && strlen(msg) > n + 2,
                  file, line, "last error \"%s\" does not start with \"%s: \"", msg ? msg : "(NULL)",
                  fn);
}

int check_state_(AgentHandle h, const char *text, const char *file, int line)
{
    AgentBuffer b = { NULL, 0, NULL };
    AgentStatus rc = agent_get_state(h, &b);
    int ok = check_(rc == AGENT_OK && buf_is(&b, text), file, line,
                    "state is %.*s (status %s, %s), expected %s", b.data ? (int)b.len : 6,
                    b.data ? (const char *)b.data : "(NULL)", agent_status_name(rc),
                    error_if_failed(rc), text);
    agent_buffer_free(&b);
    return ok;
}

int check_write_(AgentHandle h, int replace, const char *in, const char *text,
                 const char *file, int line)
{
    AgentBuffer out = { NULL, 0, NULL };
    AgentStatus rc = replace ? replace_s(h, in, &out) : set_s(h, in, &out);
    int ok = check_(rc == AGENT_OK && buf_is(&out, text), file, line,
                    "%s(%s) gave %.*s (status %s, %s), expected %s",
                    replace ? "agent_replace_state" : "agent_set_state", in,
                    out.data ? (int)out.len : 6, out.data ? (const char *)out.data : "(NULL)",
                    agent_status_name(rc), error_if_failed(rc), text);
    agent_buffer_free(&out);
    return ok && check_state_(h, text, file, line);
}

void check_rejected_(AgentHandle h, int ops, AgentStatus want, const uint8_t *in,
                     size_t len, const char *file, int line, const char *what)
{
    char *before = state_copy(h);
    int op;
    for (op = 0; op < ops; op++) {
        const char *fn = op == 0 ? "agent_set_state" : "agent_replace_state";
        AgentBuffer out = junk_buffer();
        AgentStatus rc = op == 0 ? agent_set_state(h, in, len, &out)
                                 : agent_replace_state(h, in, len, &out);
        check_(rc == want, file, line, "%s(%s) returned %s, expected %s; last error: %s", fn,
               what, agent_status_name(rc), agent_status_name(want), error_if_failed(rc));
        check_(buf_is_empty(&out), file, line, "%s(%s) failed but left *out non-empty", fn, what);
        if (rc != AGENT_OK) {
            check_last_error_from_(fn, file, line);
        }
        agent_buffer_free(&out);
    }
    {
        char *after = state_copy(h);
        check_(before != NULL && after != NULL && strcmp(before, after) == 0, file, line,
               "refusing %s changed the state from %s to %s", what, before ? before : "(NULL)",
               after ? after : "(NULL)");
        free(after);
    }
    free(before);
}

void check_open_fails_(AgentStatus want, const char *path, const char *options,
                       const char *file, int line)
{
    AgentHandle h = 77;
    AgentStatus rc = store_open(path, options, &h);
    check_(rc == want, file, line, "agent_open(%s, %s) returned %s, expected %s; last error: %s",
           path ? path : "NULL", options ? options : "NULL", agent_status_name(rc),
           agent_status_name(want), agent_last_error());
    check_(h == 0, file, line, "agent_open failed but *out is %llu, not 0", (unsigned long long)h);
    if (rc != AGENT_OK) {
        check_last_error_from_("agent_open", file, line);
    } else {
        agent_close(h);
    }
}

int check_versioned_(AgentHandle h, const char *text, uint64_t version, const char *file,
                     int line)
{
    AgentBuffer b = junk_buffer();
    uint64_t v = 12345;
    AgentStatus rc = agent_get_state_versioned(h, &b, &v);
    int ok = check_(rc == AGENT_OK && buf_is(&b, text) && v == version, file, line,
                    "agent_get_state_versioned gave %.*s at version %llu (status %s, %s), "
                    "expected %s at version %llu",
                    b.data ? (int)b.len : 6, b.data ? (const char *)b.data : "(NULL)",
                    (unsigned long long)v, agent_status_name(rc), error_if_failed(rc), text,
                    (unsigned long long)version);
    agent_buffer_free(&b);
    return ok;
}

void check_unchanged_(AgentHandle h, const char *before, uint64_t version, const char *file,
                      int line)
{
    char *after = state_copy(h);
    check_(before != NULL && after != NULL && strcmp(before, after) == 0, file, line,
           "the state changed from %s to %s", before ? before : "(NULL)",
           after ? after : "(NULL)");
    free(after);
    check_versioned_(h, before ? before : "", version, file, line);
}
