/*
 * The parts of the vector format (tests/conformance/README.md) that the C and C++ runners
 * share: building the bytes of an input or an expected output, and reading which runners a
 * vector is for.
 */
#ifndef CONFORMANCE_VECTOR_TEXT_H
#define CONFORMANCE_VECTOR_TEXT_H

#include "json_reader.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The bytes of `op`'s input: "input" (a JSON value, compacted), "input_text" (a string, or
 * pieces: strings and [string, count] pairs, concatenated) or "input_hex". Malloc'ed,
 * NUL-terminated; NULL when the op has none. */
char *vt_input(const JrNode *op, size_t *out_len);

/* The expected text of `field` in `obj`: `field` as a JSON value (compacted), or
 * `field`_text as text or pieces. Malloc'ed; NULL when neither is there. */
char *vt_expected(const JrNode *obj, const char *field, size_t *out_len);

/* True when `vector` has no "runners" list or names `runner` in it. */
int vt_runs_here(const JrNode *vector, const char *runner);

#ifdef __cplusplus
}
#endif

#endif
