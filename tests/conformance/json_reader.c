/*
 * The conformance runners' JSON reader (see json_reader.h). Recursive descent with a depth
 * cap: the vector files nest a few levels; deep test inputs are written as text pieces.
 */
#include "json_reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JR_MAX_DEPTH 200

typedef struct Parser {
    const char *s;
    size_t n, i;
    char *err;
    size_t errlen;
    int failed;
} Parser;

static void fail(Parser *p, const char *what)
{
    if (!p->failed) {
        p->failed = 1;
        snprintf(p->err, p->errlen, "%s at byte %lu", what, (unsigned long)p->i);
    }
}

static void ws(Parser *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r')) {
        p->i++;
    }
}

static JrNode *node_new(Parser *p, JrKind kind)
{
    JrNode *node = calloc(1, sizeof *node);
    if (node == NULL) {
        fail(p, "out of memory");
        return NULL;
    }
    node->kind = kind;
    node->raw = p->s + p->i;
    return node;
}

static int hex4(Parser *p, unsigned *out)
{
    unsigned v = 0;
    int k;
    for (k = 0; k < 4; k++) {
        char c = p->i < p->n ? p->s[p->i++] : 0;
        v <<= 4;
        if (c >= '0' && c <= '9') {
            v |= (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            v |= (unsigned)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            v |= (unsigned)(c - 'A' + 10);
        } else {
            fail(p, "bad \\u escape");
            return 0;
        }
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the string at p->i (on its opening quote) into a malloc'ed buffer. A lone surrogate
 * escape is written as its 3-byte (invalid UTF-8) form: vectors never need it decoded. */
static char *string_body(Parser *p, size_t *out_len)
{
    size_t start = ++p->i, cap, len = 0;
    char *out;
    while (p->i < p->n && p->s[p->i] != '"') {
        if (p->s[p->i] == '\\') {
            p->i++;
        }
        p->i++;
    }
    if (p->i >= p->n) {
        fail(p, "unterminated string");
        return NULL;
    }
    cap = p->i - start + 1;
    out = malloc(cap);
    if (out == NULL) {
        fail(p, "out of memory");
        return NULL;
    }
    p->i = start;
    while (p->s[p->i] != '"') {
        unsigned char c = (unsigned char)p->s[p->i++];
        unsigned cp, lo;
        if (c < 0x20) {
            fail(p, "control character in a string");
            free(out);
            return NULL;
        }
        if (c != '\\') {
            out[len++] = (char)c;
            continue;
        }
        c = (unsigned char)p->s[p->i++];
        switch (c) {
        case '"': case '\\': case '/': out[len++] = (char)c; break;
        case 'b': out[len++] = '\b'; break;
        case 'f': out[len++] = '\f'; break;
        case 'n': out[len++] = '\n'; break;
        case 'r': out[len++] = '\r'; break;
        case 't': out[len++] = '\t'; break;
        case 'u':
            if (!hex4(p, &cp)) {
                free(out);
                return NULL;
            }
            if (cp >= 0xD800 && cp < 0xDC00 && p->i + 6 <= p->n && p->s[p->i] == '\\' &&
                p->s[p->i + 1] == 'u') {
                size_t save = p->i;
                p->i += 2;
                if (hex4(p, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else {
                    p->i = save;
                    p->failed = 0;
                }
            }
            len += put_utf8(out + len, cp);
            break;
        default:
            fail(p, "bad escape");
            free(out);
            return NULL;
        }
    }
    p->i++; /* closing quote */
    out[len] = 0;
    *out_len = len;
    return out;
}

static JrNode *value(Parser *p, int depth);

static int push(Parser *p, JrNode *node, JrNode *item, char *key)
{
    JrNode **items = realloc(node->items, (node->n + 1) * sizeof *items);
    if (items == NULL) {
        fail(p, "out of memory");
        return 0;
    }
    node->items = items;
    if (node->kind == JR_OBJECT) {
        char **keys = realloc(node->keys, (node->n + 1) * sizeof *keys);
        if (keys == NULL) {
            fail(p, "out of memory");
            return 0;
        }
        node->keys = keys;
        keys[node->n] = key;
    }
    items[node->n++] = item;
    return 1;
}

static JrNode *container(Parser *p, int depth, JrKind kind)
{
    char close = kind == JR_ARRAY ? ']' : '}';
    JrNode *node = node_new(p, kind);
    if (node == NULL) {
        return NULL;
    }
    p->i++;
    ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        node->raw_len = (size_t)(p->s + p->i - node->raw);
        return node;
    }
    for (;;) {
        char *key = NULL;
        JrNode *item;
        ws(p);
        if (kind == JR_OBJECT) {
            size_t key_len;
            if (p->i >= p->n || p->s[p->i] != '"') {
                fail(p, "expected a member name");
                break;
            }
            if ((key = string_body(p, &key_len)) == NULL) {
                break;
            }
            ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') {
                fail(p, "expected ':'");
                free(key);
                break;
            }
            p->i++;
        }
        item = value(p, depth + 1);
        if (item == NULL || !push(p, node, item, key)) {
            jr_free(item);
            free(key);
            break;
        }
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            node->raw_len = (size_t)(p->s + p->i - node->raw);
            return node;
        }
        fail(p, "expected ',' or a closing bracket");
        break;
    }
    jr_free(node);
    return NULL;
}

static JrNode *value(Parser *p, int depth)
{
    JrNode *node;
    char c;
    ws(p);
    if (depth > JR_MAX_DEPTH) {
        fail(p, "nesting too deep for the vector reader");
        return NULL;
    }
    if (p->i >= p->n) {
        fail(p, "unexpected end of input");
        return NULL;
    }
    c = p->s[p->i];
    if (c == '{') {
        return container(p, depth, JR_OBJECT);
    }
    if (c == '[') {
        return container(p, depth, JR_ARRAY);
    }
    if (c == '"') {
        if ((node = node_new(p, JR_STRING)) == NULL) {
            return NULL;
        }
        if ((node->str = string_body(p, &node->str_len)) == NULL) {
            jr_free(node);
            return NULL;
        }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        if ((node = node_new(p, JR_NUMBER)) == NULL) {
            return NULL;
        }
        while (p->i < p->n && strchr("+-.eE0123456789", p->s[p->i]) != NULL && p->s[p->i]) {
            p->i++;
        }
    } else {
        static const char *const words[] = {"null", "true", "false"};
        int k;
        for (k = 0; k < 3; k++) {
            size_t wl = strlen(words[k]);
            if (p->n - p->i >= wl && memcmp(p->s + p->i, words[k], wl) == 0) {
                break;
            }
        }
        if (k == 3) {
            fail(p, "unexpected character");
            return NULL;
        }
        if ((node = node_new(p, k == 0 ? JR_NULL : JR_BOOL)) == NULL) {
            return NULL;
        }
        node->truth = k == 1;
        p->i += strlen(words[k]);
    }
    node->raw_len = (size_t)(p->s + p->i - node->raw);
    return node;
}

JrNode *jr_parse(const char *text, size_t len, char *err, size_t errlen)
{
    Parser p;
    JrNode *root;
    p.s = text;
    p.n = len;
    p.i = 0;
    p.err = err;
    p.errlen = errlen;
    p.failed = 0;
    root = value(&p, 0);
    ws(&p);
    if (root != NULL && p.i != p.n) {
        fail(&p, "unexpected data after the value");
        jr_free(root);
        return NULL;
    }
    return root;
}

void jr_free(JrNode *node)
{
    size_t k;
    if (node == NULL) {
        return;
    }
    for (k = 0; k < node->n; k++) {
        jr_free(node->items[k]);
        if (node->keys != NULL) {
            free(node->keys[k]);
        }
    }
    free(node->items);
    free(node->keys);
    free(node->str);
    free(node);
}

const JrNode *jr_get(const JrNode *obj, const char *key)
{
    size_t k;
    if (obj == NULL || obj->kind != JR_OBJECT) {
        return NULL;
    }
    for (k = 0; k < obj->n; k++) {
        if (strcmp(obj->keys[k], key) == 0) {
            return obj->items[k];
        }
    }
    return NULL;
}

char *jr_compact(const JrNode *node, size_t *out_len)
{
    char *out = malloc(node->raw_len + 1);
    size_t k, len = 0;
    int in_string = 0;
    if (out == NULL) {
        return NULL;
    }
    for (k = 0; k < node->raw_len; k++) {
        char c = node->raw[k];
        if (in_string) {
            if (c == '\\') {
                out[len++] = c;
                c = node->raw[++k];
            } else if (c == '"') {
                in_string = 0;
            }
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        } else if (c == '"') {
            in_string = 1;
        }
        out[len++] = c;
    }
    out[len] = 0;
    *out_len = len;
    return out;
}

char *jr_read_file(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    char *out = NULL;
    size_t cap = 0, len = 0, got;
    if (f == NULL) {
        return NULL;
    }
    do {
        if (cap - len < 4096) {
            char *bigger = realloc(out, cap = cap * 2 + 8192);
            if (bigger == NULL) {
                free(out);
                fclose(f);
                return NULL;
            }
            out = bigger;
        }
        got = fread(out + len, 1, cap - len - 1, f);
        len += got;
    } while (got > 0);
    fclose(f);
    out[len] = 0;
    *out_len = len;
    return out;
}
