/*
 * prof_cfi - unwinding native frames that keep no frame pointer, by the call frame information
 * their libraries carry for C++ exceptions (.eh_frame, found through .eh_frame_hdr's sorted
 * table). glibc, libgcc_s and libstdc++ are built without frame pointers: a CPU sample taken in
 * them (a .NET 8 exception's two-pass unwind runs in libgcc_s, malloc and memcpy in libc) holds
 * no frame record for the chain to follow, and rbp there may be any value. One CFI step gives the
 * frame's caller: its return address, its stack pointer (the canonical frame address) and the
 * rbp it had; from the first frame back in managed code or in libcoreclr (which keeps frame
 * pointers) the frame-pointer chain goes on.
 *
 * Two halves:
 *   - prof_cfi_build (prof_cfi.c, the clrscope-sampler thread, under prof_codemap_lock): finds the
 *     libraries listed in prof_cfi.c that are loaded (dl_iterate_phdr), pins each one loaded for
 *     good (RTLD_NODELETE), and returns the table the handler reads: per library its code range,
 *     the ranges its loaded segments cover (every CFI read must lie in one) and its search table.
 *   - prof_cfi_step (static inline, here): signal context. It calls nothing and reads only the
 *     library's segments and the stack words in [sp, top); it supports the rules compilers emit
 *     for ordinary functions (CFA = rsp or rbp + offset; return address and rbp saved at CFA +
 *     offset, or rbp unchanged) and gives up on anything else (expressions, a CFA in another
 *     register, signal frames, 64-bit lengths, indirect pointers): the walk then goes on as it
 *     would have without CFI.
 *
 * DWARF: "DWARF Debugging Information Format", version 4, 6.4 (Call Frame Information); the
 * .eh_frame and .eh_frame_hdr layouts: the Linux Standard Base Core Specification, 10.6.
 */
#ifndef PROF_CFI_H
#define PROF_CFI_H

#include <stdint.h>

#define PROF_CFI_LIBS 16     /* libraries in a table, at most */
#define PROF_CFI_SEGS 6      /* loaded segments of one library, at most */
#define PROF_CFI_STEPS 64    /* CFI steps in one walk, at most */
#define PROF_CFI_INSNS 512   /* bytes of CFA program run for one frame, at most */
#define PROF_CFI_STATES 4    /* DW_CFA_remember_state nesting */

struct prof_cfi_lib {
    uintptr_t lo, hi;                 /* its executable segment */
    uintptr_t seg_lo[PROF_CFI_SEGS];  /* its loaded segments: where CFI may be read */
    uintptr_t seg_hi[PROF_CFI_SEGS];
    uint32_t nseg;
    uint32_t nfde;                    /* entries in the search table */
    uintptr_t hdr;                    /* .eh_frame_hdr: the table's entries are relative to it */
    uintptr_t table;                  /* nfde pairs (int32 initial location, int32 FDE address) */
    uint32_t leaf_only;               /* a library with frame pointers (libcoreclr): its CFI
                                       * unwinds only an interrupted leaf frame, which may be a
                                       * function that sets up none (or not yet: a prologue) */
};

/* Immutable once published (g_sig.cfi), sorted by lo. */
struct prof_cfi {
    uint32_t n;
    struct prof_cfi_lib lib[PROF_CFI_LIBS];
};

/* The sampler thread: a table of the listed libraries that are loaded now (malloc'd; NULL when
 * none is, or on failure). `all` (tests) takes every loaded library that has a search table. */
struct prof_cfi *prof_cfi_build(int all);
/* The sampler thread: how many of the listed libraries are loaded now (a table with fewer is
 * built again: the framework's shims load after start-up). */
int prof_cfi_count(void);

/* ---- signal context from here on: no calls, no globals ---- */

static inline const struct prof_cfi_lib *prof_cfi_find(const struct prof_cfi *t, uintptr_t pc)
{
    if (!t)
        return 0;
    for (uint32_t i = 0; i < t->n; i++)
        if (pc >= t->lib[i].lo && pc < t->lib[i].hi)
            return &t->lib[i];
    return 0;
}

/* Whether [a, a + len) lies in one of the library's loaded segments. */
static inline int prof_cfi_readable(const struct prof_cfi_lib *l, uintptr_t a, uintptr_t len)
{
    for (uint32_t i = 0; i < l->nseg; i++)
        if (a >= l->seg_lo[i] && a + len >= a && a + len <= l->seg_hi[i])
            return 1;
    return 0;
}

/* A reader over [p, end), a range checked to lie in one of the library's segments before the
 * reader is made; `bad` is set on any read past end. */
struct prof_cfi_rd {
    uintptr_t p, end;
    int bad;
};

static inline uint64_t prof_cfi_u(struct prof_cfi_rd *r, int bytes)
{
    if (r->bad || r->p > r->end || (uintptr_t)bytes > r->end - r->p) {
        r->bad = 1;
        return 0;
    }
    const volatile uint8_t *b = (const volatile uint8_t *)r->p;
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | b[i];
    r->p += (uintptr_t)bytes;
    return v;
}

static inline uint64_t prof_cfi_uleb(struct prof_cfi_rd *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint64_t b = prof_cfi_u(r, 1);
        v |= (b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

static inline int64_t prof_cfi_sleb(struct prof_cfi_rd *r)
{
    uint64_t v = 0;
    int shift = 0;
    uint64_t b;
    do {
        b = prof_cfi_u(r, 1);
        if (shift < 64)
            v |= (b & 0x7f) << shift;
        shift += 7;
        if (shift > 70) {
            r->bad = 1;
            return 0;
        }
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

/* A pointer in DW_EH_PE encoding `enc` (absolute or pc-relative; anything else is refused). */
static inline uintptr_t prof_cfi_ptr(struct prof_cfi_rd *r, uint8_t enc)
{
    uintptr_t at = r->p;
    uint64_t v;
    if (enc == 0xff) { /* DW_EH_PE_omit */
        r->bad = 1;
        return 0;
    }
    switch (enc & 0x0f) {
    case 0x00: v = prof_cfi_u(r, 8); break;                        /* absptr */
    case 0x01: v = prof_cfi_uleb(r); break;                        /* uleb128 */
    case 0x02: v = prof_cfi_u(r, 2); break;                        /* udata2 */
    case 0x03: v = prof_cfi_u(r, 4); break;                        /* udata4 */
    case 0x04: v = prof_cfi_u(r, 8); break;                        /* udata8 */
    case 0x09: v = (uint64_t)prof_cfi_sleb(r); break;              /* sleb128 */
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)prof_cfi_u(r, 2); break; /* sdata2 */
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)prof_cfi_u(r, 4); break; /* sdata4 */
    case 0x0c: v = prof_cfi_u(r, 8); break;                        /* sdata8 */
    default: r->bad = 1; return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;                  /* absolute */
    case 0x10: v += at; break;         /* pc-relative */
    default: r->bad = 1; return 0;     /* text/data/func-relative, aligned: not emitted here */
    }
    if (enc & 0x80) /* indirect */
        r->bad = 1;
    return (uintptr_t)v;
}

/* The length of an encoded value's fixed-size form (for pc_range, which is never relative). */
static inline uintptr_t prof_cfi_range(struct prof_cfi_rd *r, uint8_t enc)
{
    return prof_cfi_ptr(r, (uint8_t)(enc & 0x0f));
}

enum { PROF_CFI_SAME = 0, PROF_CFI_AT = 1, PROF_CFI_UNDEF = 2, PROF_CFI_OTHER = 3 };

struct prof_cfi_row {
    int32_t cfa_reg;       /* 6 rbp or 7 rsp; anything else: unsupported */
    int64_t cfa_off;
    uint8_t bp_how, ra_how; /* PROF_CFI_* */
    int64_t bp_off, ra_off; /* PROF_CFI_AT: saved at CFA + off */
    int bad;                /* an expression for the CFA, or another unsupported rule */
};

/* Runs CFA instructions [p, end) from `loc` while the row is for addresses <= target.
 * Returns 0, or -1 when the program cannot be followed. */
static inline int prof_cfi_run(struct prof_cfi_rd *r, uintptr_t end, uintptr_t loc,
                               uintptr_t target, uint64_t code_align, int64_t data_align,
                               uint64_t ra_reg, struct prof_cfi_row *row,
                               const struct prof_cfi_row *init)
{
    struct prof_cfi_row saved[PROF_CFI_STATES];
    int depth = 0;
    if (end < r->end)
        r->end = end;
    uintptr_t start = r->p;
    while (r->p < end && !r->bad) {
        if (r->p - start > PROF_CFI_INSNS)
            return -1;
        uint8_t op = (uint8_t)prof_cfi_u(r, 1);
        uint64_t reg = op & 0x3f;
        int64_t off;
        uint64_t delta = 0;
        switch (op & 0xc0) {
        case 0x40: /* DW_CFA_advance_loc */
            delta = reg * code_align;
            goto advance;
        case 0x80: /* DW_CFA_offset */
            off = (int64_t)prof_cfi_uleb(r) * data_align;
            goto offset;
        case 0xc0: /* DW_CFA_restore */
            goto restore;
        }
        switch (op) {
        case 0x00: break; /* nop */
        case 0x01: /* set_loc: an absolute address (pc-relative encodings do not use it) */
            loc = (uintptr_t)prof_cfi_u(r, 8);
            if (loc > target)
                return 0;
            break;
        case 0x02: delta = prof_cfi_u(r, 1) * code_align; goto advance;
        case 0x03: delta = prof_cfi_u(r, 2) * code_align; goto advance;
        case 0x04: delta = prof_cfi_u(r, 4) * code_align; goto advance;
        case 0x05: /* offset_extended */
            reg = prof_cfi_uleb(r);
            off = (int64_t)prof_cfi_uleb(r) * data_align;
            goto offset;
        case 0x11: /* offset_extended_sf */
            reg = prof_cfi_uleb(r);
            off = prof_cfi_sleb(r) * data_align;
            goto offset;
        case 0x06: /* restore_extended */
            reg = prof_cfi_uleb(r);
            goto restore;
        case 0x07: /* undefined */
        case 0x08: /* same_value */
            reg = prof_cfi_uleb(r);
            if (reg == 6)
                row->bp_how = op == 0x07 ? PROF_CFI_UNDEF : PROF_CFI_SAME;
            if (reg == ra_reg)
                row->ra_how = op == 0x07 ? PROF_CFI_UNDEF : PROF_CFI_OTHER;
            break;
        case 0x09: /* register: reg saved in another register */
            reg = prof_cfi_uleb(r);
            (void)prof_cfi_uleb(r);
            if (reg == 6)
                row->bp_how = PROF_CFI_OTHER;
            if (reg == ra_reg)
                row->ra_how = PROF_CFI_OTHER;
            break;
        case 0x0a: /* remember_state */
            if (depth >= PROF_CFI_STATES)
                return -1;
            saved[depth++] = *row;
            break;
        case 0x0b: /* restore_state */
            if (!depth)
                return -1;
            *row = saved[--depth];
            break;
        case 0x0c: /* def_cfa */
            row->cfa_reg = (int32_t)prof_cfi_uleb(r);
            row->cfa_off = (int64_t)prof_cfi_uleb(r);
            row->bad = 0;
            break;
        case 0x12: /* def_cfa_sf */
            row->cfa_reg = (int32_t)prof_cfi_uleb(r);
            row->cfa_off = prof_cfi_sleb(r) * data_align;
            row->bad = 0;
            break;
        case 0x0d: /* def_cfa_register */
            row->cfa_reg = (int32_t)prof_cfi_uleb(r);
            break;
        case 0x0e: /* def_cfa_offset */
            row->cfa_off = (int64_t)prof_cfi_uleb(r);
            break;
        case 0x13: /* def_cfa_offset_sf */
            row->cfa_off = prof_cfi_sleb(r) * data_align;
            break;
        case 0x0f: /* def_cfa_expression: the rows that follow have no CFA we can compute */
            r->p += (uintptr_t)prof_cfi_uleb(r);
            row->bad = 1;
            break;
        case 0x10: /* expression */
        case 0x16: /* val_expression */
            reg = prof_cfi_uleb(r);
            r->p += (uintptr_t)prof_cfi_uleb(r);
            if (reg == 6)
                row->bp_how = PROF_CFI_OTHER;
            if (reg == ra_reg)
                row->ra_how = PROF_CFI_OTHER;
            break;
        case 0x14: /* val_offset */
            reg = prof_cfi_uleb(r);
            (void)prof_cfi_uleb(r);
            goto other;
        case 0x15: /* val_offset_sf */
            reg = prof_cfi_uleb(r);
            (void)prof_cfi_sleb(r);
            goto other;
        case 0x2e: /* GNU_args_size */
            (void)prof_cfi_uleb(r);
            break;
        case 0x2f: /* GNU_negative_offset_extended */
            reg = prof_cfi_uleb(r);
            off = -(int64_t)prof_cfi_uleb(r) * data_align;
            goto offset;
        default:
            return -1;
        }
        continue;
    advance:
        loc += (uintptr_t)delta;
        if (loc > target)
            return 0;
        continue;
    offset:
        if (reg == 6) {
            row->bp_how = PROF_CFI_AT;
            row->bp_off = off;
        }
        if (reg == ra_reg) {
            row->ra_how = PROF_CFI_AT;
            row->ra_off = off;
        }
        continue;
    restore:
        if (reg == 6) {
            row->bp_how = init->bp_how;
            row->bp_off = init->bp_off;
        }
        if (reg == ra_reg) {
            row->ra_how = init->ra_how;
            row->ra_off = init->ra_off;
        }
        continue;
    other:
        if (reg == 6)
            row->bp_how = PROF_CFI_OTHER;
        if (reg == ra_reg)
            row->ra_how = PROF_CFI_OTHER;
        continue;
    }
    return r->bad ? -1 : 0;
}

/* The row that holds at `target` (the interrupted pc of the leaf, a return address - 1 above it)
 * in library l. 0, or -1 when there is none we can use. */
static inline int prof_cfi_row_at(const struct prof_cfi_lib *l, uintptr_t target,
                                  struct prof_cfi_row *row)
{
    /* the search table (checked readable when the table was built): the last entry whose
     * initial location is <= target */
    const volatile int32_t *tab = (const volatile int32_t *)l->table;
    uint32_t lo = 0, hi = l->nfde;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (l->hdr + (uintptr_t)(int64_t)tab[2 * (uintptr_t)mid] <= target)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return -1;
    uintptr_t fde = l->hdr + (uintptr_t)(int64_t)tab[2 * (uintptr_t)(lo - 1) + 1];

    /* the FDE: length, CIE pointer, then (after the CIE is read) pc_begin, pc_range */
    if (!prof_cfi_readable(l, fde, 8))
        return -1;
    struct prof_cfi_rd r = {.p = fde, .end = fde + 8};
    uint32_t flen = (uint32_t)prof_cfi_u(&r, 4);
    if (flen < 4 || flen == 0xffffffffu || !prof_cfi_readable(l, fde, 4 + (uintptr_t)flen))
        return -1;
    uintptr_t fde_end = fde + 4 + flen;
    r.end = fde_end;
    uintptr_t cie_at = r.p;
    uint32_t cie_off = (uint32_t)prof_cfi_u(&r, 4);
    if (r.bad || !cie_off || cie_off > cie_at)
        return -1;
    uintptr_t fde_body = r.p;

    uintptr_t cie = cie_at - cie_off;
    if (!prof_cfi_readable(l, cie, 8))
        return -1;
    struct prof_cfi_rd c = {.p = cie, .end = cie + 8};
    uint32_t clen = (uint32_t)prof_cfi_u(&c, 4);
    if (clen < 4 || clen == 0xffffffffu || prof_cfi_u(&c, 4) != 0 ||
        !prof_cfi_readable(l, cie, 4 + (uintptr_t)clen))
        return -1;
    uintptr_t cie_end = cie + 4 + clen;
    c.end = cie_end;
    uint8_t version = (uint8_t)prof_cfi_u(&c, 1);
    char aug[8];
    int na = 0;
    for (;;) {
        char ch = (char)prof_cfi_u(&c, 1);
        if (c.bad || na >= (int)sizeof aug - 1)
            return -1;
        if (!ch)
            break;
        aug[na++] = ch;
    }
    aug[na] = 0;
    if (version != 1 && version != 3)
        return -1;
    uint64_t code_align = prof_cfi_uleb(&c);
    int64_t data_align = prof_cfi_sleb(&c);
    uint64_t ra_reg = version == 1 ? prof_cfi_u(&c, 1) : prof_cfi_uleb(&c);
    uint8_t fde_enc = 0; /* DW_EH_PE_absptr */
    int has_z = na > 0 && aug[0] == 'z';
    if (na > 0 && !has_z)
        return -1;
    if (has_z) {
        uint64_t alen = prof_cfi_uleb(&c);
        uintptr_t aend = c.p + (uintptr_t)alen;
        for (int i = 1; i < na && !c.bad; i++) {
            switch (aug[i]) {
            case 'R': fde_enc = (uint8_t)prof_cfi_u(&c, 1); break;
            case 'L': (void)prof_cfi_u(&c, 1); break;
            case 'P': {
                uint8_t penc = (uint8_t)prof_cfi_u(&c, 1);
                /* the personality routine's pointer: skip it whatever its application */
                (void)prof_cfi_ptr(&c, (uint8_t)(penc & 0x0f));
                break;
            }
            case 'S': return -1; /* a signal frame (the kernel's trampoline) */
            case 'B': break;
            default: return -1;
            }
        }
        c.p = aend;
    }
    if (c.bad || code_align == 0)
        return -1;

    r.p = fde_body;
    r.end = fde_end;
    uintptr_t pc_begin = prof_cfi_ptr(&r, fde_enc);
    uintptr_t pc_range = prof_cfi_range(&r, fde_enc);
    if (r.bad || target < pc_begin || target - pc_begin >= pc_range)
        return -1;
    if (has_z)
        r.p += (uintptr_t)prof_cfi_uleb(&r);

    struct prof_cfi_row init = {.cfa_reg = -1};
    if (prof_cfi_run(&c, cie_end, pc_begin, ~(uintptr_t)0, code_align, data_align, ra_reg, &init,
                     &init) < 0)
        return -1;
    *row = init;
    if (prof_cfi_run(&r, fde_end, pc_begin, target, code_align, data_align, ra_reg, row, &init) < 0)
        return -1;
    return row->bad ? -1 : 0;
}

/* One step from a frame of library l: pc (exact for the leaf, else a return address: looked up
 * at pc - 1), *sp and *bp its registers. On success returns the caller's return address and sets
 * *sp to the caller's stack pointer (the CFA), *bp to the caller's rbp and *slot to the stack
 * address the return address was read from; returns 0 when the step cannot be made, and then sets
 * *outermost when the frame is the thread's first (its return address undefined: glibc's clone
 * and _start say so). Every stack read lies in [*sp, top). */
static inline uintptr_t prof_cfi_step(const struct prof_cfi_lib *l, uintptr_t pc, int leaf,
                                      uintptr_t *sp, uintptr_t *bp, uintptr_t top,
                                      uintptr_t *slot, int *outermost)
{
    struct prof_cfi_row row;
    if (prof_cfi_row_at(l, leaf ? pc : pc - 1, &row) < 0)
        return 0;
    if (row.ra_how == PROF_CFI_UNDEF) { /* the thread's first frame (clone, _start) */
        *outermost = 1;
        return 0;
    }
    uintptr_t base;
    if (row.cfa_reg == 7)
        base = *sp;
    else if (row.cfa_reg == 6)
        base = *bp;
    else
        return 0;
    uintptr_t cfa = base + (uintptr_t)row.cfa_off;
    if (cfa <= *sp || cfa > top || (cfa & 7) || row.ra_how != PROF_CFI_AT)
        return 0;
    uintptr_t ra_at = cfa + (uintptr_t)row.ra_off;
    if (ra_at < *sp || ra_at + 8 > top || (ra_at & 7))
        return 0;
    uintptr_t ra = *(const volatile uintptr_t *)ra_at;
    uintptr_t nbp = *bp;
    if (row.bp_how == PROF_CFI_AT) {
        uintptr_t bp_at = cfa + (uintptr_t)row.bp_off;
        if (bp_at < *sp || bp_at + 8 > top || (bp_at & 7))
            return 0;
        nbp = *(const volatile uintptr_t *)bp_at;
    } else if (row.bp_how != PROF_CFI_SAME) {
        nbp = 0;
    }
    *sp = cfa;
    *bp = nbp;
    *slot = ra_at;
    return ra;
}

#endif
