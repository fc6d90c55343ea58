/*
 * A small JSON reader for the conformance runners in C and C++ (tests/conformance/run_c.c,
 * tests/cpp/conformance.cpp): it reads the vector files into a tree that keeps, for every
 * value, the exact text it was written with. The runners hand that text to the library
 * untouched (numbers keep their digits, strings their escapes), so a vector tests the library
 * and not this reader.
 *
 * It is not the library's parser and is not meant for untrusted input: it accepts RFC 8259
 * JSON, refuses anything else with a message, and keeps duplicate member names (the vector
 * files have none; jr_get returns the first).
 */
#ifndef CONFORMANCE_JSON_READER_H
#define CONFORMANCE_JSON_READER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum JrKind { JR_NULL, JR_BOOL, JR_NUMBER, JR_STRING, JR_ARRAY, JR_OBJECT } JrKind;

typedef struct JrNode {
    JrKind kind;
    /* The value's text as written in the file (a view into the parsed text, not terminated). */
    const char *raw;
    size_t raw_len;
    /* JR_STRING: the decoded UTF-8 bytes (NUL-terminated; may hold NUL bytes before str_len). */
    char *str;
    size_t str_len;
    /* JR_BOOL: 1 for true. */
    int truth;
    /* JR_ARRAY / JR_OBJECT: n items; keys[i] (decoded, NUL-terminated) for objects. */
    size_t n;
    struct JrNode **items;
    char **keys;
} JrNode;

/* Parses `len` bytes of `text` (which must outlive the tree). NULL on error, with a message in
 * err (at most errlen bytes). */
JrNode *jr_parse(const char *text, size_t len, char *err, size_t errlen);

/* Frees a tree from jr_parse (NULL-safe). */
void jr_free(JrNode *node);

/* The member `key` of an object, or NULL (also when `obj` is NULL or not an object). */
const JrNode *jr_get(const JrNode *obj, const char *key);

/* The value's text without the whitespace between tokens: its compact form, as the library
 * writes it when the vector wrote strings in the library's escaping. Malloc'ed,
 * NUL-terminated; the length goes to *out_len. */
char *jr_compact(const JrNode *node, size_t *out_len);

/* Reads a whole file; NULL on error. Malloc'ed, NUL-terminated; the length goes to *out_len. */
char *jr_read_file(const char *path, size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif
