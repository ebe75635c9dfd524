/*
 * test_names.c - clrscope's spelling of runtime type names (prof_symbols): for frames,
 * compiler-generated nested types fold into what they implement; for the types of objects they
 * stay (a closure is an object of its display class, not of the class that declares the lambda).
 */
#include <string.h>

#include "prof_symbols.h"

#include "unit_check.h"

static void both(const char *raw, const char *frame, const char *object)
{
    char a[256], b[256];
    prof_symbols_clean_type(raw, a, sizeof a);
    prof_symbols_clean_typename(raw, b, sizeof b);
    CHECK(!strcmp(a, frame), "frame %s -> %s, want %s", raw, a, frame);
    CHECK(!strcmp(b, object), "object %s -> %s, want %s", raw, b, object);
}

int main(void)
{
    both("Probe.Widget+<>c__DisplayClass1_0", "Probe.Widget", "Probe.Widget.<>c__DisplayClass1_0");
    both("Probe.Program+<>c", "Probe.Program", "Probe.Program.<>c");
    both("Ns.C+<Run>d__5", "Ns.C.Run", "Ns.C.<Run>d__5");
    both("System.Collections.Generic.List`1[System.Int32]", "System.Collections.Generic.List<System.Int32>",
         "System.Collections.Generic.List<System.Int32>");
    both("Ns.Outer+Inner[]", "Ns.Outer.Inner[]", "Ns.Outer.Inner[]");
    both("Ns.Outer+<>c__DisplayClass2_0[]", "Ns.Outer[]", "Ns.Outer.<>c__DisplayClass2_0[]");
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
