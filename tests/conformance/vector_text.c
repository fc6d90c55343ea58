/* See vector_text.h. */
#define _POSIX_C_SOURCE 200809L /* strdup, getpid */

#include "vector_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Appends `n` bytes to a growing buffer; 0 when out of memory. */
static int append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t want = (*len + n + 1) * 2;
        char *bigger = realloc(*buf, want);
        if (bigger == NULL) {
            return 0;
        }
        *buf = bigger;
        *cap = want;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = 0;
    return 1;
}

/* A text form: a string, or an array of strings and [string, count] pairs. */
static char *text_form(const JrNode *node, size_t *out_len)
{
    char *buf = NULL;
    size_t len = 0, cap = 0, k;
    if (node->kind == JR_STRING) {
        if (!append(&buf, &len, &cap, node->str, node->str_len)) {
            return NULL;
        }
    } else if (node->kind == JR_ARRAY) {
        if (!append(&buf, &len, &cap, "", 0)) {
            return NULL;
        }
        for (k = 0; k < node->n; k++) {
            const JrNode *piece = node->items[k];
            const JrNode *text = piece->kind == JR_ARRAY && piece->n == 2 ? piece->items[0] : piece;
            unsigned long count = piece->kind == JR_ARRAY && piece->n == 2
                                      ? strtoul(piece->items[1]->raw, NULL, 10)
                                      : 1;
            if (text->kind != JR_STRING) {
                free(buf);
                return NULL;
            }
            while (count-- > 0) {
                if (!append(&buf, &len, &cap, text->str, text->str_len)) {
                    free(buf);
                    return NULL;
                }
            }
        }
    } else {
        return NULL;
    }
    *out_len = len;
    return buf;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

char *vt_input(const JrNode *op, size_t *out_len)
{
    const JrNode *hex = jr_get(op, "input_hex");
    if (hex != NULL && hex->kind == JR_STRING && hex->str_len % 2 == 0) {
        char *out = malloc(hex->str_len / 2 + 1);
        size_t k;
        for (k = 0; out != NULL && k < hex->str_len / 2; k++) {
            int hi = hex_digit(hex->str[2 * k]), lo = hex_digit(hex->str[2 * k + 1]);
            if (hi < 0 || lo < 0) {
                free(out);
                return NULL;
            }
            out[k] = (char)(hi * 16 + lo);
        }
        if (out != NULL) {
            out[k] = 0;
            *out_len = k;
        }
        return out;
    }
    return vt_expected(op, "input", out_len);
}

char *vt_expected(const JrNode *obj, const char *field, size_t *out_len)
{
    char name[64];
    const JrNode *value = jr_get(obj, field);
    const JrNode *text;
    if (value != NULL) {
        return jr_compact(value, out_len);
    }
    strncpy(name, field, sizeof name - 6);
    name[sizeof name - 6] = 0;
    strcat(name, "_text");
    text = jr_get(obj, name);
    return text != NULL ? text_form(text, out_len) : NULL;
}

int vt_runs_here(const JrNode *vector, const char *runner)
{
    const JrNode *runners = jr_get(vector, "runners");
    size_t k;
    if (runners == NULL) {
        return 1;
    }
    for (k = 0; k < runners->n; k++) {
        if (runners->items[k]->kind == JR_STRING && strcmp(runners->items[k]->str, runner) == 0) {
            return 1;
        }
    }
    return 0;
}

const char *vt_backend(const char **pg_uri, char *why, size_t why_len)
{
    const char *backend = getenv("AGENT_STATE_TEST_BACKEND");
    *pg_uri = NULL;
    if (backend == NULL || backend[0] == 0 || strcmp(backend, "sqlite") == 0) {
        return "sqlite";
    }
    if (strcmp(backend, "postgres") != 0) {
        snprintf(why, why_len, "AGENT_STATE_TEST_BACKEND=%s: want sqlite or postgres", backend);
        return NULL;
    }
    *pg_uri = getenv("AGENT_STATE_TEST_PG_URI");
    if (*pg_uri == NULL || (*pg_uri)[0] == 0) {
        snprintf(why, why_len, "AGENT_STATE_TEST_BACKEND=postgres needs AGENT_STATE_TEST_PG_URI");
        return NULL;
    }
    if (strncmp(*pg_uri, "postgres://", 11) != 0 && strncmp(*pg_uri, "postgresql://", 13) != 0) {
        snprintf(why, why_len, "AGENT_STATE_TEST_PG_URI=%.100s is not a postgres:// or postgresql:// URI",
                 *pg_uri);
        return NULL;
    }
    return "postgres";
}

int vt_backend_ok(const JrNode *vector, const char *backend)
{
    const JrNode *backends = jr_get(vector, "backends");
    size_t k;
    if (backends == NULL) {
        return 1;
    }
    for (k = 0; k < backends->n; k++) {
        if (backends->items[k]->kind == JR_STRING && strcmp(backends->items[k]->str, backend) == 0) {
            return 1;
        }
    }
    return 0;
}

void vt_agent_id(const char *runner, char *out, size_t cap)
{
    static unsigned counter;
    static long started;
    if (started == 0) {
        started = (long)time(NULL);
    }
    counter++;
    snprintf(out, cap, "%s_%ld_%lx_%u", runner, (long)getpid(), started, counter);
}

char *vt_with_agent_id(const char *options, const char *agent_id)
{
    const char *rest = "}";
    size_t cap;
    char *out;
    if (options != NULL) {
        const char *p = options;
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            p++;
        }
        if (*p != '{') {
            return strdup(options);
        }
        p++;
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            p++;
        }
        rest = p;
    }
    cap = strlen(agent_id) + strlen(rest) + 32;
    out = malloc(cap);
    if (out != NULL) {
        snprintf(out, cap, "{\"agent_id\":\"%s\"%s%s", agent_id, *rest == '}' ? "" : ",", rest);
    }
    return out;
}
