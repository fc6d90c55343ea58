/*
 * The C suite (tests/c/main.c runs it): the inputs the library refuses (non-objects,
 * malformed JSON, what the codec cannot store, sizes), tagged values, the JSONTestSuite corpus.
 */
#include "check.h"
#include "tests.h"

/* ------------------------------------------------------------------------------------------ */
/* Refused inputs                                                                             */
/* ------------------------------------------------------------------------------------------ */

void test_patch_must_be_a_json_object(void)
{
    AgentHandle h = open_store("not_object.db", NULL);
    AgentBuffer out = junk_buffer();
    CHECK_SET(h, "{\"keep\":1}", "{\"keep\":1}");
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "[1]");
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "\"x\"");
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "1");
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "null");
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "true");
    /* a tagged value is a leaf, not a plain object: it cannot be the state */
    CHECK_REJECTED_S(h, AGENT_ERR_INVALID_ARGUMENT, "{\"$date\":\"2026-11-30T03:06:44.123Z\"}");
    CHECK_REJECTED(h, AGENT_ERR_INVALID_ARGUMENT, NULL, 5);
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_get_state(h, NULL));
    CHECK_LAST_ERROR_FROM("agent_get_state");
    CHECK_STATUS(AGENT_ERR_INVALID_ARGUMENT, agent_set_state(h, NULL, 0, &out));
    CHECK_EMPTY(out);
    CHECK_STATE(h, "{\"keep\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_malformed_json_is_refused(void)
{
    static const char nul_inside[] = "{\"a\":\"x\0y\"}";
    static const char nul_after[] = "{\"a\":1}\0";
    AgentHandle h = open_store("bad_json.db", NULL);
    char *deep;
    CHECK_SET(h, "{\"keep\":1}", "{\"keep\":1}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":1,}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{'a':1}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":01}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":NaN}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{} x");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{}{}");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "");
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":\"\xff\"}");          /* invalid UTF-8 byte */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"\xc3\":1}");              /* truncated sequence */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":\"\xc0\xaf\"}");      /* overlong encoding */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":\"\xed\xa0\x80\"}");  /* UTF-8 encoded surrogate */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":\"\\ud800\"}");       /* lone high surrogate */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"a\":\"\\udc00x\"}");      /* lone low surrogate */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, "{\"\\ud800\":1}");           /* ... in a name */
    CHECK_REJECTED(h, AGENT_ERR_JSON, nul_inside, sizeof nul_inside - 1); /* NUL inside a string */
    CHECK_REJECTED(h, AGENT_ERR_JSON, nul_after, sizeof nul_after - 1);   /* NUL after the object */
    CHECK_REJECTED(h, AGENT_ERR_JSON, "{\"a\":1}", 4);                    /* length cuts it short */
    deep = nested_document(200, 1);
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, deep);
    free(deep);
    deep = nested_document(129, 0); /* "nesting of 128 levels or more" is AGENT_ERR_JSON */
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, deep);
    free(deep);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_codec_refuses_what_it_cannot_store(void)
{
    AgentHandle h = open_store("codec.db", NULL);
    char *deep;
    CHECK_SET(h, "{\"keep\":1}", "{\"keep\":1}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"a\":1,\"a\":2}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"a\":1,\"\\u0061\":2}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"x\":{\"b\":[{\"c\":1,\"c\":2}]}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"a\":null,\"a\":null}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"n\":1e400}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"n\":-1e400}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"n\":[1e309]}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"d\":{\"$date\":\"yesterday\"}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"d\":{\"$date\":\"2026-13-01T00:00:00.000Z\"}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"d\":{\"$date\":1764471604123}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"b\":{\"$bigint\":\"12a\"}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"b\":{\"$bigint\":12}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"m\":{\"$map\":[[1]]}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"m\":{\"$map\":{\"a\":1}}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"s\":{\"$set\":5}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"s\":{\"$set\":[1,1]}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"ab\":{\"$arraybuffer\":\"!!\"}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC,
                     "{\"t\":{\"$typedarray\":{\"type\":\"Float32Array\",\"base64\":\"AAA=\"}}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC,
                     "{\"t\":{\"$typedarray\":{\"type\":\"Float99Array\",\"base64\":\"\"}}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"r\":{\"$regexp\":{\"source\":\"a+b\"}}}");
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, "{\"r\":{\"$regexp\":\"a+b\"}}");
    deep = nested_document(70, 0);
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, deep);
    free(deep);
    deep = nested_document(70, 1);
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, deep);
    free(deep);
    /* the edges: 64 levels are stored, 65 to 127 are refused by the codec; at 128 levels the
     * parser stops (the header: "nesting of 128 levels or more" is AGENT_ERR_JSON) */
    deep = nested_document(65, 0);
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, deep);
    free(deep);
    deep = nested_document(127, 0);
    CHECK_REJECTED_S(h, AGENT_ERR_CODEC, deep);
    free(deep);
    deep = nested_document(128, 0);
    CHECK_REJECTED_S(h, AGENT_ERR_JSON, deep);
    free(deep);
    deep = nested_document(64, 0);
    CHECK_STATUS(AGENT_OK, replace_s(h, deep, NULL));
    CHECK_STATE(h, deep);
    free(deep);
    deep = nested_document(64, 1);
    CHECK_STATUS(AGENT_OK, replace_s(h, deep, NULL));
    CHECK_STATE(h, deep);
    free(deep);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_merge_result_must_be_storable(void)
{
    AgentHandle h = open_store("merge_codec.db", NULL);
    AgentStatus rc;
    /* {"$set":5,"y":1} is a plain object (two members); deleting y would leave a malformed
     * tagged value. */
    CHECK_REPLACE(h, "{\"x\":{\"$set\":5,\"y\":1}}", "{\"x\":{\"$set\":5,\"y\":1}}");
    CHECK_STATUS(AGENT_ERR_CODEC, set_s(h, "{\"x\":{\"y\":null}}", NULL));
    CHECK_STATE(h, "{\"x\":{\"$set\":5,\"y\":1}}");
    /* ...while leaving a well-formed one is fine */
    CHECK_REPLACE(h, "{\"x\":{\"$bigint\":\"12\",\"y\":1}}", "{\"x\":{\"$bigint\":\"12\",\"y\":1}}");
    CHECK_SET(h, "{\"x\":{\"y\":null}}", "{\"x\":{\"$bigint\":\"12\"}}");
    /* a merge may not turn the state itself into a tagged value */
    CHECK_REPLACE(h, "{\"$date\":\"2026-11-30T03:06:44.123Z\",\"a\":1}",
                  "{\"$date\":\"2026-11-30T03:06:44.123Z\",\"a\":1}");
    rc = set_s(h, "{\"a\":null}", NULL);
    check_(rc != AGENT_OK, __FILE__, __LINE__, "a merge left a tagged value as the state");
    CHECK_STATE(h, "{\"$date\":\"2026-11-30T03:06:44.123Z\",\"a\":1}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_too_large_state_is_refused_and_nothing_written(void)
{
    char big[2100];
    char edge[1100];
    AgentHandle h = open_store("too_large.db", "{\"max_value_bytes\":1024}");
    memset(big, 0, sizeof big);
    strcpy(big, "{\"s\":\"");
    memset(big + 6, 'x', 2000);
    strcpy(big + 2006, "\"}");
    CHECK_REJECTED_S(h, AGENT_ERR_TOO_LARGE, big);
    CHECK_STATE(h, "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("too_large.db", "{\"max_value_bytes\":1024,\"initial_state\":{\"fresh\":true}}");
    CHECK_STATE(h, "{\"fresh\":true}"); /* nothing was stored */

    /* A state exactly max_value_bytes long is accepted; one byte more is refused, also when
     * it only grows that large through a merge of small patches. */
    memset(edge, 0, sizeof edge);
    strcpy(edge, "{\"s\":\"");
    memset(edge + 6, 'y', 1016);
    strcpy(edge + 1022, "\"}"); /* 1024 bytes */
    CHECK_REPLACE(h, edge, edge);
    CHECK_PATCH_REJECTED_S(h, AGENT_ERR_TOO_LARGE, "{\"t\":1}"); /* 1030 bytes merged */
    CHECK_REPLACE(h, "{\"s\":\"\"}", "{\"s\":\"\"}");
    {
        /* each patch adds 517 bytes: 8 + 517 = 525 fits, 525 + 517 = 1042 does not */
        char patch[600];
        memset(patch, 0, sizeof patch);
        strcpy(patch, "{\"a\":\"");
        memset(patch + 6, 'a', 510);
        strcpy(patch + 516, "\"}");
        CHECK_STATUS(AGENT_OK, set_s(h, patch, NULL));
        patch[2] = 'b';
        CHECK_PATCH_REJECTED_S(h, AGENT_ERR_TOO_LARGE, patch);
        patch[2] = 'a';
        {
            char expected[700];
            snprintf(expected, sizeof expected, "{\"s\":\"\",%s", patch + 1);
            CHECK_STATE(h, expected);
        }
    }
    CHECK_STATUS(AGENT_OK, agent_close(h));

    {
        /* the default max_value_bytes is 2097152 */
        size_t n = 2097152 + 1;
        char *huge = malloc(n + 1);
        memset(huge, 'z', n);
        memcpy(huge, "{\"s\":\"", 6);
        memcpy(huge + n - 2, "\"}", 2);
        huge[n] = 0;
        h = open_at(":memory:", NULL);
        CHECK_REJECTED_S(h, AGENT_ERR_TOO_LARGE, huge);
        CHECK_STATUS(AGENT_OK, agent_close(h));
        free(huge);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Tagged values                                                                              */
/* ------------------------------------------------------------------------------------------ */

void test_tagged_values_are_accepted_and_round_trip(void)
{
    const char *all =
        "{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"},"
        "\"b\":{\"$bigint\":\"-1234567890123456789012\"},"
        "\"m\":{\"$map\":[[1,\"a\"]]},"
        "\"s\":{\"$set\":[1,2]},"
        "\"ab\":{\"$arraybuffer\":\"AAEC\"},"
        "\"ta\":{\"$typedarray\":{\"type\":\"Float32Array\",\"base64\":\"AAAAAA==\"}},"
        "\"re\":{\"$regexp\":{\"source\":\"a+b\",\"flags\":\"gi\"}},"
        "\"nested\":[{\"$set\":[]},{\"$map\":[]}]}";
    AgentHandle h = open_store("tagged.db", NULL);
    CHECK_SET(h, all, all);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("tagged.db", NULL);
    CHECK_STATE(h, all);
    CHECK_STATUS(AGENT_OK, agent_close(h));
    h = open_store("tagged_initial.db", "{\"initial_state\":{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"}}}");
    CHECK_STATE(h, "{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"}}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

void test_tagged_values_are_leaves_for_merge(void)
{
    AgentHandle h = open_store("tagged_merge.db", NULL);
    /* a tagged patch member replaces a plain object whole (no member of it survives) */
    CHECK_REPLACE(h, "{\"s\":{\"a\":1,\"b\":2}}", "{\"s\":{\"a\":1,\"b\":2}}");
    CHECK_SET(h, "{\"s\":{\"$set\":[1]}}", "{\"s\":{\"$set\":[1]}}");
    /* a plain patch object replaces a tagged target instead of merging into it */
    CHECK_REPLACE(h, "{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"}}",
                  "{\"d\":{\"$date\":\"2026-11-30T03:06:44.123Z\"}}");
    CHECK_SET(h, "{\"d\":{\"x\":1}}", "{\"d\":{\"x\":1}}");
    /* tagged over tagged: whole replacement, no merging of entries */
    CHECK_REPLACE(h, "{\"m\":{\"$map\":[[1,\"a\"]]}}", "{\"m\":{\"$map\":[[1,\"a\"]]}}");
    CHECK_SET(h, "{\"m\":{\"$map\":[[2,\"b\"]]}}", "{\"m\":{\"$map\":[[2,\"b\"]]}}");
    CHECK_REPLACE(h, "{\"t\":{\"$typedarray\":{\"type\":\"Float32Array\",\"base64\":\"AAAAAA==\"}}}",
                  "{\"t\":{\"$typedarray\":{\"type\":\"Float32Array\",\"base64\":\"AAAAAA==\"}}}");
    CHECK_SET(h, "{\"t\":{\"$regexp\":{\"source\":\"x\",\"flags\":\"\"}}}",
              "{\"t\":{\"$regexp\":{\"source\":\"x\",\"flags\":\"\"}}}");
    /* deleting a tagged member */
    CHECK_SET(h, "{\"t\":null}", "{}");
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* ------------------------------------------------------------------------------------------ */
/* JSONTestSuite corpus                                                                       */
/* ------------------------------------------------------------------------------------------ */

void test_json_test_suite_corpus(void)
{
    static const char *const dirs[] = { "../shared/corpora/json-test-suite",
                                        "/work/shared/corpora/json-test-suite" };
    static unsigned char text[300000];
    const char *dirname = NULL;
    DIR *d = NULL;
    struct dirent *e;
    AgentHandle h;
    int files = 0;
    size_t i;
    for (i = 0; i < sizeof dirs / sizeof dirs[0] && d == NULL; i++) {
        d = opendir(dirs[i]);
        dirname = dirs[i];
    }
    if (d == NULL) {
        printf("    (JSONTestSuite corpus not found: skipped)\n");
        return;
    }
    h = open_at(":memory:", NULL);
    while ((e = readdir(d)) != NULL) {
        char path[1024];
        long n;
        AgentStatus rc;
        AgentBuffer out = junk_buffer();
        char kind = e->d_name[0];
        if ((kind != 'y' && kind != 'n' && kind != 'i') || e->d_name[1] != '_') {
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dirname, e->d_name);
        n = read_file(path, text, sizeof text);
        if (!check_(n >= 0 && n < (long)sizeof text, __FILE__, __LINE__, "cannot read %s", path)) {
            continue;
        }
        files++;
        rc = agent_set_state(h, text, (size_t)n, &out);
        if (rc == AGENT_OK) {
            CHECK(out.data != NULL && out.data[out.len] == 0);
        } else {
            CHECK_EMPTY(out);
        }
        agent_buffer_free(&out);
        if (kind == 'y') {
            /* well-formed: an object is stored (or refused by the codec), anything else is
             * not an object; never a JSON error */
            check_(rc == AGENT_OK || rc == AGENT_ERR_CODEC || rc == AGENT_ERR_INVALID_ARGUMENT,
                   __FILE__, __LINE__, "%s: %s (%s)", e->d_name, agent_status_name(rc),
                   agent_last_error());
        } else if (kind == 'n') {
            check_(rc == AGENT_ERR_JSON, __FILE__, __LINE__, "%s: %s, expected AGENT_ERR_JSON",
                   e->d_name, agent_status_name(rc));
        } else {
            check_(rc != AGENT_ERR_PANIC && strcmp(agent_status_name(rc), "AGENT_ERR_UNKNOWN") != 0,
                   __FILE__, __LINE__, "%s: %s", e->d_name, agent_status_name(rc));
        }
    }
    closedir(d);
    CHECK(files > 300);
    CHECK_STATUS(AGENT_OK, agent_close(h));
}

/* A store remembers the cap it was given (store_max_value_bytes): a handle opened later with
 * the defaults writes the state a larger-capped handle stored; a handle's own smaller cap
 * refuses, naming that cap and how to raise it. */
void test_the_store_remembers_its_size_cap(void)
{
    /* 3,000,011 bytes: {"s":"zzz...z"} */
    size_t n = 3000011;
    char *big = malloc(n + 1);
    AgentHandle a, b, c;
    AgentBuffer out;
    uint64_t v = 0;
    memset(big, 'z', n);
    memcpy(big, "{\"s\":\"", 6);
    memcpy(big + n - 2, "\"}", 2);
    big[n] = 0;
    a = open_store("store_cap.db", "{\"store_max_value_bytes\":10000000}");
    CHECK_STATUS(AGENT_OK, replace_s(a, big, NULL));
    CHECK_STATUS(AGENT_OK, agent_close(a));
    b = open_store("store_cap.db", NULL); /* the defaults: the store's cap */
    CHECK_STATUS(AGENT_OK, set_s(b, "{\"small\":1}", NULL));
    CHECK_STATUS(AGENT_OK, agent_get_state_versioned(b, &out, &v));
    CHECK(v == 2 && out.len == n + 10);
    agent_buffer_free(&out);
    c = open_store("store_cap.db", "{\"max_value_bytes\":1000000}");
    CHECK_STATUS(AGENT_ERR_TOO_LARGE, set_s(c, "{\"small\":2}", NULL));
    CHECK_LAST_ERROR_HAS("this handle's max_value_bytes (1000000)");
    CHECK_LAST_ERROR_HAS("store_max_value_bytes");
    CHECK_STATUS(AGENT_OK, set_s(c, "{\"small\":1}", NULL)); /* changes nothing: not too large */
    CHECK_STATUS(AGENT_OK, agent_get_state_versioned(c, &out, &v));
    CHECK(v == 2);
    agent_buffer_free(&out);
    CHECK_OPEN_FAILS(AGENT_ERR_INVALID_ARGUMENT, tmp_path("store_cap.db"),
                     "{\"read_only\":true,\"store_max_value_bytes\":100}");
    CHECK_STATUS(AGENT_OK, agent_close(b));
    CHECK_STATUS(AGENT_OK, agent_close(c));
    free(big);
}
