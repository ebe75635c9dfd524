/*
 * test_exc.c - prof_exc's rethrow check: the same exception object thrown again before a GC is a
 * rethrow; after a GC (which may move objects and reuse addresses) it is not, however many GCs
 * came between (an entry keyed by 16 bits of a GC count would match again 65,536 GCs later).
 */
#include "prof_exc.h"

#include "unit_check.h"

int main(void)
{
    ObjectID a = (ObjectID)0x7f1234560010ull, b = (ObjectID)0x7f1234560040ull;
    CHECK(!prof_exc_thrown_before(a), "first throw of a");
    CHECK(prof_exc_thrown_before(a), "a again, no GC between: a rethrow");
    CHECK(!prof_exc_thrown_before(b), "first throw of b");
    prof_exc_gc_started();
    CHECK(!prof_exc_thrown_before(a), "a after a GC: a first throw");
    CHECK(prof_exc_thrown_before(a), "a again after that");

    /* a new object at a remembered address 65,536 GCs later (nothing thrown between) */
    prof_exc_gc_started();
    CHECK(!prof_exc_thrown_before(b), "b after a GC");
    for (int i = 0; i < 65536; i++)
        prof_exc_gc_started();
    CHECK(!prof_exc_thrown_before(b), "b 65,536 GCs later is a first throw");
    for (int i = 0; i < 3 * 65536; i++)
        prof_exc_gc_started();
    CHECK(!prof_exc_thrown_before(b), "b 196,608 GCs later is a first throw");

    /* 256 objects remembered: the 257th pushes the oldest out */
    prof_exc_gc_started();
    for (uint64_t i = 0; i < 257; i++)
        prof_exc_thrown_before((ObjectID)(0x10000 + 16 * i));
    CHECK(!prof_exc_thrown_before((ObjectID)0x10000), "the oldest of 257 forgotten");
    CHECK(prof_exc_thrown_before((ObjectID)(0x10000 + 16 * 256)), "the newest remembered");
    CHECK(!prof_exc_thrown_before(0), "no object: never a rethrow");

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
