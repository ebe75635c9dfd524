/*
 * prof_codemap_decode.c - the x86-64 decoding the code map applies to JIT code (see
 * prof_codemap.h): a method's prologue (its frame shape), where the return address lies at any pc
 * inside it, and whether the bytes before a return address end with a call instruction. Pure
 * functions of the bytes given; any thread.
 *
 * On arm64 only the last is decoded (bl, blr); a method's frame shape is not known (the JIT
 * builds a frame record for nearly every method there, and the walk follows it), so every
 * method counts as framed.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "prof_codemap.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#if defined(__aarch64__)

int prof_frame_decode(const uint8_t *c, size_t len, struct prof_frame_shape *sh)
{
    (void)c;
    (void)len;
    memset(sh, 0, sizeof *sh); /* not known */
    return 0;
}

long prof_frame_ra_offset(const struct prof_frame_shape *sh, uint32_t off, const uint8_t *at,
                          size_t len)
{
    (void)sh;
    (void)off;
    (void)at;
    (void)len;
    return -1;
}

int prof_frame_is_call_site(const uint8_t *b, size_t n)
{
    if (n < 4)
        return 0;
    uint32_t w = le32(b + n - 4);
    return (w & 0xFC000000u) == 0x94000000u ||  /* bl imm26 */
           (w & 0xFFFFFC1Fu) == 0xD63F0000u;    /* blr xN */
}

#else

/* Length of one prologue instruction at c[0..len), the bytes it reserves, whether it sets rbp. */
static size_t prolog_insn(const uint8_t *c, size_t len, uint32_t *add, int *sets_fp, int *push_fp)
{
    *add = 0;
    *sets_fp = *push_fp = 0;
    if (len >= 1 && c[0] == 0x55) { /* push rbp */
        *add = 8;
        *push_fp = 1;
        return 1;
    }
    if (len >= 1 && c[0] >= 0x50 && c[0] <= 0x57 && c[0] != 0x54) { /* push reg */
        *add = 8;
        return 1;
    }
    if (len >= 2 && c[0] == 0x41 && c[1] >= 0x50 && c[1] <= 0x57) { /* push r8..r15 */
        *add = 8;
        return 2;
    }
    if (len >= 4 && c[0] == 0x48 && c[1] == 0x83 && c[2] == 0xEC && c[3] < 0x80) {
        *add = c[3]; /* sub rsp, imm8 */
        return 4;
    }
    if (len >= 7 && c[0] == 0x48 && c[1] == 0x81 && c[2] == 0xEC && le32(c + 3) < 0x100000) {
        *add = le32(c + 3); /* sub rsp, imm32 */
        return 7;
    }
    if (len >= 5 && c[0] == 0x48 && c[1] == 0x8D && c[2] == 0x6C && c[3] == 0x24) {
        *sets_fp = 1; /* lea rbp, [rsp + imm8] */
        return 5;
    }
    if (len >= 8 && c[0] == 0x48 && c[1] == 0x8D && c[2] == 0xAC && c[3] == 0x24) {
        *sets_fp = 1; /* lea rbp, [rsp + imm32] */
        return 8;
    }
    if (len >= 3 && c[0] == 0x48 &&
        ((c[1] == 0x8B && c[2] == 0xEC) || (c[1] == 0x89 && c[2] == 0xE5))) {
        *sets_fp = 1; /* mov rbp, rsp */
        return 3;
    }
    if (len >= 3 && c[0] == 0xC5 && c[1] == 0xF8 && c[2] == 0x77)
        return 3; /* vzeroupper */
    if (len >= 1 && c[0] == 0x90)
        return 1; /* nop */
    return 0;
}

int prof_frame_decode(const uint8_t *c, size_t len, struct prof_frame_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    size_t i = 0;
    uint32_t alloc = 0;
    int framed = 0;
    for (;;) {
        uint32_t add;
        int sets_fp, push_fp;
        size_t l = prolog_insn(c + i, len - i, &add, &sets_fp, &push_fp);
        if (!l) {
            if (i >= len || framed)
                return 0; /* out of bytes, or rbp pushed but never set: not a form we know */
            break;        /* first body instruction of a frameless method */
        }
        if (sh->nsteps >= PROF_FRAME_MAX_STEPS || (sets_fp && !framed) || alloc + add > 0xFFFF)
            return 0;
        sh->step[sh->nsteps].off = (uint16_t)i;
        sh->step[sh->nsteps].alloc = (uint16_t)alloc;
        sh->nsteps++;
        framed |= push_fp;
        alloc += add;
        i += l;
        if (sets_fp) {
            sh->fp_ready = (uint16_t)i;
            break;
        }
    }
    sh->prolog = (uint16_t)i;
    sh->frame = alloc;
    sh->framed = (uint8_t)framed;
    sh->known = 1;
    return 0;
}

static int is_terminator(const uint8_t *b, size_t n)
{
    if (n >= 1 && (b[0] == 0xC3 || b[0] == 0xE9 || b[0] == 0xEB))
        return 1; /* ret, jmp rel32, jmp rel8 */
    size_t k = n >= 1 && b[0] >= 0x40 && b[0] <= 0x4F ? 1 : 0;
    return n >= k + 2 && b[k] == 0xFF && ((b[k + 1] >> 3) & 7) == 4; /* jmp r/m */
}

long prof_frame_ra_offset(const struct prof_frame_shape *sh, uint32_t off, const uint8_t *at,
                          size_t len)
{
    if (!sh->known)
        return -1;
    uint32_t limit = sh->framed ? sh->fp_ready : sh->prolog;
    if (off < limit) {
        for (int i = 0; i < sh->nsteps; i++)
            if (sh->step[i].off == off)
                return sh->step[i].alloc;
        return -1;
    }
    if (len >= 1 && at[0] == 0xC3)
        return 0; /* at ret: every register is restored, sp points at the return address */
    if (sh->framed)
        return -1; /* body: rbp frames it (until `pop rbp`, which only `ret` follows) */
    size_t i = 0;
    long extra = 0;
    if (len >= 4 && at[0] == 0x48 && at[1] == 0x83 && at[2] == 0xC4 && at[3] < 0x80) {
        extra = at[3];
        i = 4;
    } else if (len >= 7 && at[0] == 0x48 && at[1] == 0x81 && at[2] == 0xC4) {
        extra = (long)le32(at + 3);
        i = 7;
    }
    int pops = 0;
    for (;;) {
        if (i < len && at[i] >= 0x58 && at[i] <= 0x5F && at[i] != 0x5C) {
            pops++;
            i += 1;
        } else if (i + 1 < len && at[i] == 0x41 && at[i + 1] >= 0x58 && at[i + 1] <= 0x5F) {
            pops++;
            i += 2;
        } else {
            break;
        }
    }
    if ((extra || pops) && is_terminator(at + i, len - i))
        return extra + 8L * pops; /* frameless epilogue */
    return (long)sh->frame;
}

int prof_frame_is_call_site(const uint8_t *b, size_t n)
{
    if (n >= 5 && b[n - 5] == 0xE8)
        return 1; /* call rel32 */
    for (size_t len = 2; len <= 8 && len <= n; len++) { /* [rex] FF /2 modrm [sib] [disp] */
        size_t s = n - len, k = s;
        if (b[k] >= 0x40 && b[k] <= 0x4F)
            k++;
        if (k + 2 > n || b[k] != 0xFF || ((b[k + 1] >> 3) & 7) != 2)
            continue;
        uint8_t m = b[k + 1];
        int mod = m >> 6, rm = m & 7;
        size_t need = k + 2 - s;
        if (mod != 3 && rm == 4) {
            if (k + 2 >= n)
                continue;
            need++;
            if (mod == 0 && (b[k + 2] & 7) == 5)
                need += 4;
        }
        if (mod == 0 && rm == 5)
            need += 4;
        else if (mod == 1)
            need += 1;
        else if (mod == 2)
            need += 4;
        if (need == len)
            return 1;
    }
    return 0;
}

#endif
