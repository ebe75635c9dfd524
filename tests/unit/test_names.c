/*
 * test_names.c - clrscope's spelling of runtime type names (prof_symbols): for frames,
 * compiler-generated nested types fold into what they implement; for the types of objects they
 * stay (a closure is an object of its display class, not of the class that declares the lambda).
 * And names read from the system (/proc's comm, the command line) made valid UTF-8 before they
 * reach JSON or pprof (prof_utf8), and JSON strings written with whole characters only
 * (api_json's jb_str: a name cut inside a character, a path in another encoding).
 */
#include <stdio.h>
#include <string.h>

#include "api_json.h"
#include "prof_symbols.h"
#include "prof_utf8.h"

#include "unit_check.h"

static void both(const char *raw, const char *frame, const char *object)
{
    char a[256], b[256];
    prof_symbols_clean_type(raw, a, sizeof a);
    prof_symbols_clean_typename(raw, b, sizeof b);
    CHECK(!strcmp(a, frame), "frame %s -> %s, want %s", raw, a, frame);
    CHECK(!strcmp(b, object), "object %s -> %s, want %s", raw, b, object);
}

static void clean(const char *in, const char *want)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", in);
    prof_utf8_clean(buf);
    CHECK(!strcmp(buf, want), "utf8 clean: got '%s', want '%s'", buf, want);
}

static void test_utf8_clean(void)
{
    clean("", "");
    clean("worker-7", "worker-7");
    clean("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80");
    /* a comm the kernel cut at 15 bytes inside the eighth Cyrillic letter */
    clean("\xd0\xa0\xd0\xb0\xd0\xb1\xd0\xbe\xd1\x82\xd0\xbd\xd0", "\xd0\xa0\xd0\xb0\xd0\xb1\xd0\xbe\xd1\x82\xd0\xbd?");
    clean("ab\xe2\x82", "ab??");              /* a three-byte character cut after two */
    clean("\x80x\xbf", "?x?");                /* stray continuation bytes */
    clean("\xc0\xaf\xc1\xbf", "????");        /* overlong forms */
    clean("\xe0\x80\xaf", "???");             /* overlong in three bytes */
    clean("\xed\xa0\x80", "???");             /* a UTF-16 surrogate */
    clean("\xf4\x90\x80\x80", "????");        /* above U+10FFFF */
    clean("\xf5\xff\xfe", "???");             /* bytes UTF-8 never has */
    clean("\xe2x\x82\xac", "?x??");           /* a lead byte, then no continuation */
    clean("\xf4\x8f\xbf\xbf.", "\xf4\x8f\xbf\xbf."); /* U+10FFFF itself */
}

static void json(const char *in, const char *want)
{
    struct jbuf b;
    jb_init(&b, 1024);
    jb_str(&b, in);
    jb_raw(&b, "", 1);
    CHECK(b.p && !strcmp(b.p, want), "jb_str: got '%s', want '%s'", b.p ? b.p : "(null)", want);
    jb_free(&b);
}

static void test_json_whole_characters(void)
{
    json("Ns.\xd0\x96\xd0\x96.Run", "\"Ns.\xd0\x96\xd0\x96.Run\"");
    json("Ns.\xd0\x96\xd0", "\"Ns.\xd0\x96?\""); /* cut inside the second letter */
    json("/tmp/x\xe9/y", "\"/tmp/x?/y\"");          /* Latin-1 bytes in a path */
    json("a\"b\\c\n\x01\xf0\x9f\x98\x80", "\"a\\\"b\\\\c\\n\\u0001\xf0\x9f\x98\x80\"");
    json("\xed\xa0\x80\xc0\xaf", "\"?????\"");     /* a surrogate, an overlong form */
}

/* A frame's name from its metadata type and method names and its type arguments. */
static void frame(const char *type, const char *const *targs, unsigned nt, const char *method,
                  const char *const *margs, unsigned nm, const char *want)
{
    char out[256];
    prof_symbols_clean_frame(type, targs, nt, method, margs, nm, out, sizeof out);
    CHECK(!strcmp(out, want), "frame %s %s -> %s, want %s", type, method, out, want);
}

static void generic_frames(void)
{
    static const char *const t[] = {"T"}, *const tkey[] = {"TKey"};
    static const char *const i32[] = {"System.Int32"};
    static const char *const kv[] = {"System.String", "Ns.Order"};
    /* each part of a nested chain takes its own arity's arguments, the method its own */
    frame("Ns.Cruncher`1+Nested", t, 1, "Spin", tkey, 1, "Ns.Cruncher<T>.Nested.Spin<TKey>");
    frame("Ns.Cruncher`1+Nested", i32, 1, "Spin", i32, 1,
          "Ns.Cruncher<System.Int32>.Nested.Spin<System.Int32>");
    frame("System.Collections.Generic.List`1", kv + 1, 1, "Add", NULL, 0,
          "System.Collections.Generic.List<Ns.Order>.Add");
    frame("System.Collections.Generic.Dictionary`2+Enumerator", kv, 2, "MoveNext", NULL, 0,
          "System.Collections.Generic.Dictionary<System.String,Ns.Order>.Enumerator.MoveNext");
    frame("Ns.Outer`1+Inner`1", kv, 2, ".ctor", NULL, 0,
          "Ns.Outer<System.String>.Inner<Ns.Order>..ctor");
    /* a generic method's async state machine: its own parameter is the method's */
    frame("Ns.Outer`1+<Run>d__3`1", kv, 2, "MoveNext", NULL, 0,
          "Ns.Outer<System.String>.Run<Ns.Order>");
    /* a display class drops its arguments with itself; a lambda keeps the method's name */
    frame("Ns.Outer`1+<>c__DisplayClass2_0`1", kv, 2, "<Run>b__0", NULL, 0,
          "Ns.Outer<System.String>.Run.{lambda}");
    frame("Ns.C", NULL, 0, "<Main>g__Local|0_0", t, 1, "Ns.C.Main.Local<T>");
    frame("Ns.Util", NULL, 0, "Max", t, 1, "Ns.Util.Max<T>");
    /* no arguments: the name prof_symbols_clean_method gives */
    frame("Ns.C+<Run>d__5", NULL, 0, "MoveNext", NULL, 0, "Ns.C.Run");
    char out[64];
    prof_symbols_clean_method("Ns.C", "Go", out, sizeof out);
    CHECK(!strcmp(out, "Ns.C.Go"), "clean_method %s", out);
}

int main(void)
{
    generic_frames();
    test_utf8_clean();
    test_json_whole_characters();
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
