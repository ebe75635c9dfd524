/*
 * test_jitmarks.c - the thread's JIT marks (profiler/sampling/prof_sighandler.h), which label CPU
 * samples with the method the JIT compiles: nested compilations, a compilation that threw (the
 * runtime then skips its Finished callback: its mark must never hide a newer one), more nesting
 * than the marks hold.
 */
#include <stdint.h>

#include "prof_sighandler.h"
#include "unit_check.h"

int main(void)
{
    CHECK(prof_sig_jit_top() == 0, "no mark at the start");
    prof_sig_jit_push(0x100);
    CHECK(prof_sig_jit_top() == 0x100, "one compilation: %#lx", (unsigned long)prof_sig_jit_top());
    prof_sig_jit_push(0x200); /* compiling 0x200 while 0x100 is compiled */
    CHECK(prof_sig_jit_top() == 0x200, "nested: the inner one");
    prof_sig_jit_pop(0x200);
    CHECK(prof_sig_jit_top() == 0x100, "back to the outer one");
    prof_sig_jit_pop(0x100);
    CHECK(prof_sig_jit_top() == 0, "none after both: %#lx", (unsigned long)prof_sig_jit_top());

    /* 0x300 threw: no pop. The next compilations are named by their own marks. */
    prof_sig_jit_push(0x300);
    prof_sig_jit_push(0x400);
    CHECK(prof_sig_jit_top() == 0x400, "a newer compilation above a stale mark");
    prof_sig_jit_pop(0x400);
    prof_sig_jit_push(PROF_SIG_JIT_DYNAMIC);
    CHECK(prof_sig_jit_top() == PROF_SIG_JIT_DYNAMIC, "a dynamic method");
    prof_sig_jit_pop(PROF_SIG_JIT_DYNAMIC);
    /* an outer compilation that ends pops what threw inside it too */
    prof_sig_jit_push(0x500);
    prof_sig_jit_push(0x600); /* throws inside 0x500, which catches and finishes */
    prof_sig_jit_pop(0x500);
    CHECK(prof_sig_jit_top() == 0x300, "0x500's end pops 0x600: %#lx",
          (unsigned long)prof_sig_jit_top());
    prof_sig_jit_pop(0x999); /* a Finished with no mark: nothing changes */
    CHECK(prof_sig_jit_top() == 0x300, "unknown pop ignored");

    /* more than the marks hold: the newest are kept */
    for (uintptr_t i = 1; i <= 3 * PROF_SIG_JIT_MARKS; i++)
        prof_sig_jit_push(0x1000 + i * 8);
    CHECK(prof_sig_jit.depth == PROF_SIG_JIT_MARKS, "depth capped: %u", prof_sig_jit.depth);
    CHECK(prof_sig_jit_top() == 0x1000 + 3 * PROF_SIG_JIT_MARKS * 8, "the newest on top");
    prof_sig_jit_pop(0x1000 + 3 * PROF_SIG_JIT_MARKS * 8);
    CHECK(prof_sig_jit_top() == 0x1000 + (3 * PROF_SIG_JIT_MARKS - 1) * 8, "then the one before");
    CHECK(prof_sig_jit.fn[0] == 0x1000 + (2 * PROF_SIG_JIT_MARKS + 1) * 8, "the oldest forgotten");

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
