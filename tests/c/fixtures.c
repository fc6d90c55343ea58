/*
 * The C suite's hook fixtures (declared in check.h): a recorder for on_state_changed,
 * an initial-state hook with a fixed answer, a validation gate.
 */
#include "check.h"

void recorder_init(Recorder *r, const char *name)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    r->name = name;
}

void recorder_destroy(Recorder *r)
{
    free(r->next);
    free(r->prev);
    free(r->patch);
    pthread_mutex_destroy(&r->mu);
}

char g_log[4096]; /* order of events, for the ordering tests (one thread) */

void log_event(const char *fmt, ...)
{
    size_t n = strlen(g_log);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_log + n, sizeof g_log - n, fmt, ap);
    va_end(ap);
}

int views_ok(const AgentStateChange *c)
{
    int ok = c->next != NULL && c->next[c->next_len] == 0 && c->prev != NULL &&
             c->prev[c->prev_len] == 0;
    if (c->patch == NULL) {
        ok = ok && c->patch_len == 0;
    } else {
        ok = ok && c->patch[c->patch_len] == 0;
    }
    return ok;
}

int32_t record_hook(void *user_data, const AgentStateChange *c)
{
    Recorder *r = user_data;
    pthread_mutex_lock(&r->mu);
    r->calls++;
    if (!views_ok(c)) {
        r->bad_views++;
    }
    if (r->next != NULL &&
        (c->prev_len != strlen(r->next) || memcmp(c->prev, r->next, c->prev_len) != 0)) {
        r->chain_breaks++;
    }
    if (r->calls > 1 && c->version != r->version + 1) {
        r->version_breaks++;
    }
    r->version = c->version;
    free(r->next);
    free(r->prev);
    free(r->patch);
    r->next = dup_bytes(c->next, c->next_len);
    r->prev = dup_bytes(c->prev, c->prev_len);
    r->patch = c->patch ? dup_bytes(c->patch, c->patch_len) : NULL;
    if (r->name != NULL) {
        log_event("%s:%s;", r->name, r->next);
    }
    pthread_mutex_unlock(&r->mu);
    return r->rc;
}

void recorder_free(void *user_data)
{
    Recorder *r = user_data;
    pthread_mutex_lock(&r->mu);
    r->freed++;
    pthread_mutex_unlock(&r->mu);
}

uint64_t add_recorder(AgentHandle h, Recorder *r)
{
    uint64_t id = 0;
    CHECK_STATUS(AGENT_OK, agent_on_state_changed(h, record_hook, r, recorder_free, &id));
    CHECK(id != 0);
    return id;
}

int32_t init_hook(void *user_data, AgentBuffer *out)
{
    InitHook *ih = user_data;
    ih->calls++;
    if (ih->answer != NULL) {
        if (ih->use_copy) {
            if (agent_buffer_copy((const uint8_t *)ih->answer, strlen(ih->answer), out) !=
                AGENT_OK) {
                return 99;
            }
        } else {
            out->data = (const uint8_t *)ih->answer;
            out->len = strlen(ih->answer);
        }
    }
    return ih->rc;
}

void init_hook_free(void *user_data)
{
    ((InitHook *)user_data)->freed++;
}

int32_t noop_hook(void *user_data, const AgentStateChange *c)
{
    (void)user_data;
    (void)c;
    return 0;
}

void gate_init(Gate *g, const char *reject_if, const char *message, int32_t rc)
{
    memset(g, 0, sizeof *g);
    g->reject_if = reject_if;
    g->message = message;
    g->rc = rc;
}

void gate_destroy(Gate *g)
{
    free(g->next);
    free(g->prev);
    free(g->patch);
}

int32_t gate_fn(void *user_data, const AgentStateChange *c, AgentBuffer *message)
{
    Gate *g = user_data;
    int reject;
    g->calls++;
    if (!views_ok(c) || message == NULL || !buf_is_empty(message)) {
        g->bad_views++;
    }
    free(g->next);
    free(g->prev);
    free(g->patch);
    g->next = dup_bytes(c->next, c->next_len);
    g->prev = dup_bytes(c->prev, c->prev_len);
    g->patch = c->patch ? dup_bytes(c->patch, c->patch_len) : NULL;
    g->version = c->version;
    if (g->self != 0) {
        AgentBuffer b = { NULL, 0, NULL };
        uint64_t v = 0, id = 0;
        size_t n = 0;
        g->self_get_rc = agent_get_state(g->self, &b);
        agent_buffer_free(&b);
        g->self_get_versioned_rc = agent_get_state_versioned(g->self, &b, &v);
        agent_buffer_free(&b);
        g->self_set_rc = set_s(g->self, "{\"inner\":1}", NULL);
        g->self_set_if_rc = agent_set_state_if(g->self, c->version - 1,
                                               (const uint8_t *)"{\"inner\":1}", 11, NULL, NULL);
        g->self_replace_rc = replace_s(g->self, "{\"inner\":1}", NULL);
        g->self_gate_rc = agent_set_validator(g->self, NULL, NULL, NULL);
        g->self_hook_rc = agent_on_state_changed(g->self, noop_hook, NULL, NULL, &id);
        g->self_poll_rc = agent_poll(g->self, &n);
        g->self_restore_rc = agent_restore_state(g->self, 0, NULL, NULL);
        g->self_close_rc = agent_close(g->self);
    }
    if (g->other != 0) {
        AgentBuffer b = { NULL, 0, NULL };
        g->other_get_rc = agent_get_state(g->other, &b);
        agent_buffer_free(&b);
    }
    reject = g->reject_if != NULL &&
             strstr((const char *)c->next, g->reject_if) != NULL;
    if ((reject || g->message_always) && g->message != NULL) {
        if (agent_buffer_copy((const uint8_t *)g->message, strlen(g->message), message) != AGENT_OK) {
            g->bad_views++;
        }
    }
    return reject ? g->rc : 0;
}

void gate_free(void *user_data)
{
    ((Gate *)user_data)->freed++;
}
