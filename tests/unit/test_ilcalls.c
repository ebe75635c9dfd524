/*
 * test_ilcalls.c - the IL decoding that tells which calls a statement of a method makes
 * (prof_codemap_il_calls, used to name code the JIT inlined): every operand size of the one- and
 * two-byte opcodes, a switch table, the calls' offsets and tokens, and IL that does not decode
 * (an unknown opcode, an operand or a switch table cut by the end of the body).
 */
#include <stdint.h>

#include "prof_codemap.h"
#include "unit_check.h"

int main(void)
{
    uint32_t off[16], tok[16];
    /* ldarg.0; ldc.i4.s 7; ldc.i4 1; ldc.i8 2; ldc.r4; ldc.r8; call 0x0600000a; br.s +0;
     * switch (2) [0 0]; callvirt 0x0a000011; ldarg 1 (fe 09); ldftn 0x06000001 (fe 06, not a
     * call); newobj 0x06000002; calli 0x11000001; constrained. 0x1b000001 (fe 16); callvirt
     * 0x2b000003; ret */
    static const uint8_t il[] = {
        0x02, 0x1f, 0x07, 0x20, 1, 0, 0, 0, 0x21, 2, 0, 0, 0, 0, 0, 0, 0, 0x22, 0, 0, 0, 0,
        0x23, 0, 0, 0, 0, 0, 0, 0, 0,
        0x28, 0x0a, 0, 0, 0x06,                   /* call at 31 */
        0x2b, 0x00,                               /* br.s */
        0x45, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* switch with two targets */
        0x6f, 0x11, 0, 0, 0x0a,                   /* callvirt at 51 */
        0xfe, 0x09, 1, 0,                         /* ldarg 1 */
        0xfe, 0x06, 1, 0, 0, 0x06,                /* ldftn */
        0x73, 2, 0, 0, 0x06,                      /* newobj at 66 */
        0x29, 1, 0, 0, 0x11,                      /* calli at 71 */
        0xfe, 0x16, 1, 0, 0, 0x1b,                /* constrained. */
        0x6f, 3, 0, 0, 0x2b,                      /* callvirt at 82 */
        0x2a};
    int n = prof_codemap_il_calls(il, sizeof il, off, tok, 16);
    CHECK(n == 5, "5 calls, got %d", n);
    static const uint32_t want_off[] = {31, 51, 66, 71, 82};
    static const uint32_t want_tok[] = {0x0600000a, 0x0a000011, 0x06000002, 0x11000001,
                                        0x2b000003};
    for (int i = 0; i < n && i < 5; i++) {
        CHECK(off[i] == want_off[i], "call %d at %u, not %u", i, off[i], want_off[i]);
        CHECK(tok[i] == want_tok[i], "call %d token %#x, not %#x", i, tok[i], want_tok[i]);
    }
    CHECK(prof_codemap_il_calls(il, sizeof il, off, tok, 2) == 2, "room for two: two");

    /* what does not decode */
    static const uint8_t unknown[] = {0x00, 0x24, 0x2a};        /* 0x24 is no opcode */
    static const uint8_t cut[] = {0x28, 0x0a, 0, 0};           /* a call's token cut short */
    static const uint8_t cut2[] = {0x00, 0xfe};                /* a two-byte opcode cut */
    static const uint8_t table[] = {0x45, 0xff, 0xff, 0, 0, 0}; /* a switch table past the end */
    static const uint8_t fe_bad[] = {0xfe, 0x08, 0x2a};        /* 0xfe 0x08 is no opcode */
    CHECK(prof_codemap_il_calls(unknown, sizeof unknown, off, tok, 16) == -1, "unknown opcode");
    CHECK(prof_codemap_il_calls(cut, sizeof cut, off, tok, 16) == -1, "cut operand");
    CHECK(prof_codemap_il_calls(cut2, sizeof cut2, off, tok, 16) == -1, "cut opcode");
    CHECK(prof_codemap_il_calls(table, sizeof table, off, tok, 16) == -1, "switch table");
    CHECK(prof_codemap_il_calls(fe_bad, sizeof fe_bad, off, tok, 16) == -1, "unknown fe opcode");
    CHECK(prof_codemap_il_calls(il, 0, off, tok, 16) == 0, "an empty body has no calls");
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
