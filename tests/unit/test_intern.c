/*
 * test_intern - the interned-string table behind every stored frame name (prof_intern): ids are
 * dense and stable across growth, strings that differ only in one byte (anywhere in a long shared
 * prefix, or in the tail after the last whole 8-byte word) get different ids, lookups find what
 * was interned and nothing else, and the byte cap turns further strings into "[overflow]".
 */
#include <stdlib.h>
#include <string.h>

#include "prof_intern.h"
#include "unit_check.h"

#define N 20000

static void name_of(char *buf, size_t cap, int i)
{
    /* a long shared prefix, like namespaces of .NET frames, and a varying length */
    snprintf(buf, cap, "Microsoft.AspNetCore.Server.Kestrel.Core.Internal.Http.M%d%.*s", i,
             i % 13, "abcdefghijklm");
}

static void test_ids_dense_and_stable(void)
{
    struct prof_intern t;
    CHECK(prof_intern_init(&t, 64u << 20) == 0, "init");
    CHECK(prof_intern(&t, "") == 0, "the empty string is id 0");
    CHECK(prof_intern(&t, NULL) == 0, "NULL interns as the empty string");
    static uint32_t ids[N];
    static const char *ptrs[N];
    char buf[160];
    uint32_t first = t.n;
    for (int i = 0; i < N; i++) {
        name_of(buf, sizeof buf, i);
        ids[i] = prof_intern(&t, buf);
        ptrs[i] = prof_intern_str(&t, ids[i]);
    }
    int dense = 1, same = 1, found = 1, stable = 1;
    for (int i = 0; i < N; i++) {
        name_of(buf, sizeof buf, i);
        dense &= ids[i] == first + (uint32_t)i;
        same &= prof_intern(&t, buf) == ids[i];
        found &= prof_intern_find(&t, buf) == ids[i];
        stable &= prof_intern_str(&t, ids[i]) == ptrs[i] && strcmp(ptrs[i], buf) == 0;
    }
    CHECK(dense, "new strings get consecutive ids");
    CHECK(same, "interning again returns the first id");
    CHECK(found, "find returns the interned id");
    CHECK(stable, "string pointers stay valid and unchanged while the table grows");
    CHECK(prof_intern_find(&t, "Microsoft.AspNetCore.Server.Kestrel.Core.Internal.Http.M") ==
              UINT32_MAX,
          "a prefix of interned strings is not found");
    CHECK(t.dropped == 0, "nothing dropped under the cap (%llu)", (unsigned long long)t.dropped);
    prof_intern_free(&t);
}

/* Every length 1..40 (tails of 0..7 bytes after whole words), one byte changed at each position. */
static void test_one_byte_differences(void)
{
    struct prof_intern t;
    CHECK(prof_intern_init(&t, 64u << 20) == 0, "init");
    char base[41], v[41];
    int distinct = 1, found = 1;
    for (int len = 1; len <= 40; len++) {
        memset(base, 'x', (size_t)len);
        base[len] = 0;
        uint32_t b = prof_intern(&t, base);
        for (int pos = 0; pos < len; pos++) {
            memcpy(v, base, (size_t)len + 1);
            v[pos] = 'y';
            uint32_t id = prof_intern(&t, v);
            distinct &= id != b && strcmp(prof_intern_str(&t, id), v) == 0;
            found &= prof_intern_find(&t, base) == b;
        }
    }
    CHECK(distinct, "strings one byte apart get their own ids");
    CHECK(found, "and the base string is still found");
    prof_intern_free(&t);
}

static void test_byte_cap(void)
{
    struct prof_intern t;
    CHECK(prof_intern_init(&t, 4096) == 0, "init");
    char buf[160];
    int i;
    uint32_t id = 0;
    for (i = 0; i < 1000; i++) {
        name_of(buf, sizeof buf, i);
        id = prof_intern(&t, buf);
        if (id == t.overflow_id)
            break;
    }
    CHECK(i > 10 && i < 1000, "the cap is reached after some strings (%d)", i);
    CHECK(strcmp(prof_intern_str(&t, t.overflow_id), "[overflow]") == 0, "overflow name");
    CHECK(t.dropped == 1, "the refused string is counted (%llu)", (unsigned long long)t.dropped);
    CHECK(t.bytes <= t.max_bytes, "bytes stay under the cap (%zu)", t.bytes);
    name_of(buf, sizeof buf, 0);
    CHECK(prof_intern(&t, buf) != t.overflow_id, "strings interned before the cap still resolve");
    prof_intern_free(&t);
}

int main(void)
{
    test_ids_dense_and_stable();
    test_one_byte_differences();
    test_byte_cap();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
