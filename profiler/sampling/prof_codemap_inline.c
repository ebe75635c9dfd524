/*
 * prof_codemap_inline.c - code the JIT inlined, named as its own frame (see
 * prof_codemap_inlining in prof_codemap.h).
 *
 * The runtime asks a profiler about each inlining the JIT considers (JITInlining: the method
 * being compiled or inlined into, the callee), before the JIT's own heuristics decide: a pair
 * says the callee may have been inlined into the caller, not that it was. Where inlined code is
 * is read from the code itself: the JIT's IL-to-native map (GetILToNativeMapping3, per code
 * version) gives the native code of an inlinee the IL offset of its call site in the method
 * compiled, and the caller's IL from that offset to the map's next one holds the calls of that
 * statement. The map of optimized code is coarse (a range may carry a neighbouring statement's
 * offset, or none), so:
 *   - a return address whose frame above is a method the caller calls itself, anywhere in its
 *     IL, is the caller's own call: no inlinee;
 *   - else the address belongs to the one pair whose callee a call of the statement names, or,
 *     at a statement with a virtual, interface or delegate call and no such match, to the one
 *     pair whose callee no call of the caller names at all (guarded devirtualization inlined the
 *     call's likely target: a lambda into Parallel.For's loop);
 *   - a return address under native code (a runtime helper the caller may call itself: an
 *     allocation, a cast, a lock) is given to such a devirtualized target only;
 *   - more than one candidate: the caller keeps the address (counted as ambiguous).
 * Names are compared as metadata writes them, an explicit interface implementation's
 * ("System.Numerics.IIncrementOperators<System.Int32>.op_Increment") by its last part, as the
 * call names it.
 *
 * Producers of the notes: the JIT's threads, in the runtime's callback (no locks, no
 * allocation); the rest by the code map's owner under prof_codemap_lock(), asking the runtime
 * only inside prof_unload_enter (pairs told before an unload started are dropped, and every pair
 * goes when one starts).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clr_abi.h"
#include "prof_codemap_int.h"
#include "prof_core.h"
#include "prof_symbols.h"
#include "prof_unload.h"

#define IL_NONE 0xffu /* not an opcode */
#define INL_IL_MAX (64u << 10) /* IL bytes of a method read at most (its calls: <= 0.8 MB) */
#define IL_SWITCH 0xfeu

/* Operand bytes of the one-byte opcodes (ECMA-335 III), IL_NONE where there is none. */
static uint8_t il_operand1(uint8_t op)
{
    if (op <= 0x0d || (op >= 0x14 && op <= 0x1e) || op == 0x25 || op == 0x26 || op == 0x2a ||
        (op >= 0x46 && op <= 0x6e) || op == 0x76 || op == 0x7a || (op >= 0x82 && op <= 0x8b) ||
        op == 0x8e || (op >= 0x90 && op <= 0xa2) || (op >= 0xb3 && op <= 0xba) || op == 0xc3 ||
        (op >= 0xd1 && op <= 0xdc) || op == 0xdf || op == 0xe0)
        return 0;
    if ((op >= 0x0e && op <= 0x13) || op == 0x1f || (op >= 0x2b && op <= 0x37) || op == 0xde)
        return 1;
    if (op == 0x21 || op == 0x23)
        return 8;
    if (op == 0x20 || op == 0x22 || (op >= 0x27 && op <= 0x29) || (op >= 0x38 && op <= 0x44) ||
        (op >= 0x6f && op <= 0x75) || op == 0x79 || (op >= 0x7b && op <= 0x81) || op == 0x8c ||
        op == 0x8d || op == 0x8f || (op >= 0xa3 && op <= 0xa5) || op == 0xc2 || op == 0xc6 ||
        op == 0xd0 || op == 0xdd)
        return 4;
    if (op == 0x45)
        return IL_SWITCH;
    return IL_NONE;
}

/* The same for the two-byte opcodes 0xfe xx. */
static uint8_t il_operand2(uint8_t op)
{
    if (op <= 0x05 || op == 0x0f || op == 0x11 || op == 0x13 || op == 0x14 || op == 0x17 ||
        op == 0x18 || op == 0x1a || op == 0x1d || op == 0x1e)
        return 0;
    if (op == 0x12 || op == 0x19)
        return 1;
    if (op >= 0x09 && op <= 0x0e)
        return 2;
    if (op == 0x06 || op == 0x07 || op == 0x15 || op == 0x16 || op == 0x1c)
        return 4;
    return IL_NONE;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The calls of an IL body (call, callvirt, calli, newobj), in IL order: how many were written
 * to out[0..cap), or -1 when the IL does not decode. Pure. */
static int il_calls(const uint8_t *il, uint32_t n, struct inl_call *out, int cap)
{
    int k = 0;
    uint32_t at = 0;
    while (at < n) {
        uint32_t start = at;
        uint8_t op = il[at++], len;
        int two = op == 0xfe;
        if (two) {
            if (at >= n)
                return -1;
            len = il_operand2(il[at++]);
        } else {
            len = il_operand1(op);
        }
        if (len == IL_NONE)
            return -1;
        if (len == IL_SWITCH) {
            if (n - at < 4)
                return -1;
            uint32_t cases = rd32(il + at);
            if (cases > (n - at - 4) / 4)
                return -1;
            at += 4 + cases * 4;
            continue;
        }
        if (n - at < len)
            return -1;
        if (!two && (op == 0x28 || op == 0x6f || op == 0x29 || op == 0x73) && k < cap)
            out[k++] = (struct inl_call){
                .il = start,
                .kind = op == 0x28 ? 1 : op == 0x6f ? 2 : op == 0x29 ? 3 : 4,
                .tok = rd32(il + at)};
        at += len;
    }
    return k;
}

int prof_codemap_il_calls(const uint8_t *il, uint32_t n, uint32_t *offsets, uint32_t *tokens,
                          int cap)
{
    struct inl_call *c = cap > 0 ? malloc((size_t)cap * sizeof *c) : NULL;
    int k = c ? il_calls(il, n, c, cap) : -1;
    for (int i = 0; i < k; i++) {
        offsets[i] = c[i].il;
        tokens[i] = c[i].tok;
    }
    free(c);
    return k;
}

/* ---- the notes and the pairs ---- */

void prof_codemap_inlining(uintptr_t caller, uintptr_t callee)
{
    struct codemap_inl *m = &codemap.inl;
    if (!caller || !callee || caller == callee)
        return;
    uint64_t pos = __atomic_load_n(&m->head, __ATOMIC_RELAXED);
    struct inl_note *n;
    for (;;) {
        uint64_t at = pos & (INL_QUEUE - 1);
        n = &m->q[at];
        int64_t dif = (int64_t)(__atomic_load_n(&n->seq, __ATOMIC_ACQUIRE) + at - pos);
        if (dif == 0) {
            if (__atomic_compare_exchange_n(&m->head, &pos, pos + 1, 1, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                break;
        } else if (dif < 0) {
            __atomic_fetch_add(&m->dropped, 1, __ATOMIC_RELAXED);
            return;
        } else {
            pos = __atomic_load_n(&m->head, __ATOMIC_RELAXED);
        }
    }
    n->caller = caller;
    n->callee = callee;
    n->epoch = prof_unload_epoch();
    __atomic_store_n(&n->seq, pos + 1 - (pos & (INL_QUEUE - 1)), __ATOMIC_RELEASE);
}

static uint32_t bucket_of(FunctionID caller)
{
    uint64_t h = (uint64_t)caller * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 40) & (INL_BUCKETS - 1);
}

static void add_pair(FunctionID caller, FunctionID callee)
{
    struct codemap_inl *m = &codemap.inl;
    if (!m->buckets && !(m->buckets = calloc(INL_BUCKETS, sizeof *m->buckets))) {
        __atomic_fetch_add(&m->dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    uint32_t b = bucket_of(caller);
    for (uint32_t i = m->buckets[b]; i; i = m->pairs[i - 1].next)
        if (m->pairs[i - 1].caller == caller && m->pairs[i - 1].callee == callee)
            return;
    if (m->npairs == m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 1024;
        struct inl_pair *p;
        if (cap > INL_PAIRS_MAX || !(p = realloc(m->pairs, cap * sizeof *p))) {
            __atomic_fetch_add(&m->dropped, 1, __ATOMIC_RELAXED);
            return;
        }
        m->pairs = p;
        m->cap = cap;
    }
    m->pairs[m->npairs] = (struct inl_pair){.caller = caller, .callee = callee,
                                            .next = m->buckets[b]};
    m->buckets[b] = ++m->npairs;
}

static void apply_notes(void)
{
    struct codemap_inl *m = &codemap.inl;
    for (;;) {
        uint64_t at = m->tail & (INL_QUEUE - 1);
        struct inl_note *n = &m->q[at];
        if ((int64_t)(__atomic_load_n(&n->seq, __ATOMIC_ACQUIRE) + at - (m->tail + 1)) < 0)
            break;
        FunctionID caller = n->caller, callee = n->callee;
        uint32_t epoch = n->epoch;
        __atomic_store_n(&n->seq, m->tail + INL_QUEUE - at, __ATOMIC_RELEASE);
        m->tail++;
        if (epoch == prof_unload_epoch())
            add_pair(caller, callee);
        else
            /* told before an unload started: the IDs may be gone */
            __atomic_fetch_add(&m->dropped, 1, __ATOMIC_RELAXED);
    }
    codemap.st.inline_pairs = m->npairs;
    codemap.st.inline_dropped = __atomic_load_n(&m->dropped, __ATOMIC_RELAXED);
}

void codemap_inline_apply(void)
{
    if (__atomic_load_n(&codemap.inl.head, __ATOMIC_ACQUIRE) != codemap.inl.tail)
        apply_notes();
}

/* ---- per code version: the map and the calls ---- */

static void root_free(struct inl_root *r)
{
    codemap.inl.root_bytes -= r->nmap * sizeof *r->map + r->ncalls * sizeof *r->calls;
    free(r->map);
    free(r->calls);
    memset(r, 0, sizeof *r);
}

void codemap_inline_forget_pairs(void)
{
    struct codemap_inl *m = &codemap.inl;
    m->npairs = 0;
    if (m->buckets)
        memset(m->buckets, 0, INL_BUCKETS * sizeof *m->buckets);
    codemap.st.inline_pairs = 0;
}

void codemap_inline_flush(void)
{
    for (int i = 0; i < INL_ROOTS; i++)
        if (codemap.inl.roots[i].start)
            root_free(&codemap.inl.roots[i]);
    memset(codemap.inl.callees, 0, sizeof codemap.inl.callees);
    if (codemap.inl.ipc)
        memset(codemap.inl.ipc, 0, INL_IPCACHE * sizeof *codemap.inl.ipc);
}

static int by_native(const void *a, const void *b)
{
    const COR_DEBUG_IL_TO_NATIVE_MAP *x = a, *y = b;
    return x->nativeStartOffset < y->nativeStartOffset ? -1 : x->nativeStartOffset > y->nativeStartOffset;
}

/* The map and calls of the code version starting at `start` (NULL: the runtime does not say,
 * or the IL does not decode; asked again after the next flush). */
static struct inl_root *root_for(FunctionID fn, uintptr_t start)
{
    struct codemap_inl *m = &codemap.inl;
    struct inl_root *r = &m->roots[(start >> 4 ^ start >> 14) & (INL_ROOTS - 1)];
    if (r->start == start && r->fn == fn)
        return r->map ? r : NULL;
    if (r->start)
        root_free(r);
    r->start = start;
    r->fn = fn;
    ICorProfilerInfo15 *info = g_core.info;
    ClassID cls = 0;
    mdToken tok = 0;
    const BYTE *hdr = NULL;
    ULONG size = 0;
    ULONG32 nmap = 0;
    if (g_core.info_version < 9 || info->vt->GetFunctionInfo(info, fn, &cls, &r->mod, &tok) < 0 ||
        (tok >> 24) != 0x06 ||
        info->vt->GetILFunctionBody(info, r->mod, tok, &hdr, &size) < 0 || !hdr || !size ||
        info->vt->GetILToNativeMapping3(info, start, 0, &nmap, NULL) < 0 || !nmap ||
        nmap > 65536)
        return NULL;
    const uint8_t *il;
    uint32_t il_size;
    if ((hdr[0] & 3) == 2) { /* tiny header */
        il = hdr + 1;
        il_size = hdr[0] >> 2;
    } else if ((hdr[0] & 3) == 3 && size >= 12) { /* fat header */
        uint32_t hsize = (uint32_t)(hdr[1] >> 4) * 4;
        il = hdr + hsize;
        il_size = rd32(hdr + 4);
        if (hsize < 12 || hsize > size || il_size > size - hsize)
            return NULL;
    } else {
        return NULL;
    }
    if (il_size > (size_t)size || il_size > INL_IL_MAX)
        return NULL;
    int cap = (int)(il_size / 5) + 1; /* a call instruction takes five bytes */
    struct inl_call *c = malloc((size_t)cap * sizeof *c);
    COR_DEBUG_IL_TO_NATIVE_MAP *map = malloc(nmap * sizeof *map);
    int ncalls = c ? il_calls(il, il_size, c, cap) : -1;
    ULONG32 got = 0;
    if (ncalls <= 0 || !map || info->vt->GetILToNativeMapping3(info, start, nmap, &got, map) < 0 ||
        !got) {
        free(map);
        free(c);
        return NULL;
    }
    if (got < nmap)
        nmap = got;
    qsort(map, nmap, sizeof *map, by_native);
    r->map = map;
    r->nmap = nmap;
    r->calls = c;
    r->ncalls = (uint32_t)ncalls;
    r->il_size = il_size;
    m->root_bytes += nmap * sizeof *map + (size_t)ncalls * sizeof *c;
    return r;
}

/* A method's name as a call names it: an explicit interface implementation's last part. */
static const char *simple_name(const char *n)
{
    const char *dot = strrchr(n, '.');
    return dot && dot != n && dot[-1] != '.' ? dot + 1 : n;
}

/* The name of the method `tok` names in `mod`, as a call names it, into out[0..cap). */
static void token_name(ModuleID mod, mdToken tok, char *out, size_t cap)
{
    char full[256];
    if (prof_symbols_method_token_name(mod, tok, full, sizeof full))
        full[0] = 0;
    snprintf(out, cap, "%s", simple_name(full));
}

/* A call's target name (asked once). */
static const char *call_name(const struct inl_root *r, struct inl_call *c)
{
    if (!c->named) {
        c->named = 1;
        if (c->kind == 3)
            c->name[0] = 0;
        else
            token_name(r->mod, c->tok, c->name, sizeof c->name);
    }
    return c->name;
}

static const struct inl_callee *callee_info(FunctionID fn)
{
    struct inl_callee *e = &codemap.inl.callees[(fn >> 4 ^ fn >> 16) & (INL_CALLEES - 1)];
    if (e->fn == fn)
        return e;
    ICorProfilerInfo15 *info = g_core.info;
    ClassID cls = 0;
    *e = (struct inl_callee){.fn = fn};
    if (info->vt->GetFunctionInfo(info, fn, &cls, &e->mod, &e->tok) < 0)
        e->name[0] = 0;
    else
        token_name(e->mod, e->tok, e->name, sizeof e->name);
    return e;
}

/* Whether call c of root r names the method x. */
static int names(const struct inl_root *r, struct inl_call *c, const struct inl_callee *x)
{
    if (c->kind == 3)
        return 0;
    if ((c->tok >> 24) == 0x06) /* a method of the caller's own module */
        return r->mod == x->mod && c->tok == x->tok;
    const char *n = call_name(r, c);
    return n[0] && x->name[0] && !strcmp(n, x->name);
}

static FunctionID decide(FunctionID fn, const struct code *c, uintptr_t key, int ret,
                         FunctionID above)
{
    struct codemap_inl *m = &codemap.inl;
    uint32_t first = m->buckets ? m->buckets[bucket_of(fn)] : 0;
    int any = 0;
    for (uint32_t i = first; i && !any; i = m->pairs[i - 1].next)
        any = m->pairs[i - 1].caller == fn;
    if (!any || !c->start || key < c->start)
        return 0;
    struct inl_root *r = root_for(fn, c->start);
    if (!r)
        return 0;
    uint64_t off = key - c->start;
    const COR_DEBUG_IL_TO_NATIVE_MAP *hit = NULL;
    for (uint32_t i = 0; i < r->nmap && r->map[i].nativeStartOffset <= off; i++)
        if (off < r->map[i].nativeEndOffset)
            hit = &r->map[i];
    if (!hit || hit->ilOffset >= r->il_size)
        return 0; /* no mapping, prologue, epilogue */
    uint32_t from = hit->ilOffset, to = r->il_size;
    for (uint32_t i = 0; i < r->nmap; i++)
        if (r->map[i].ilOffset > from && r->map[i].ilOffset < to)
            to = r->map[i].ilOffset;
    uint32_t s0 = 0, s1 = 0; /* the statement's calls: r->calls[s0..s1) */
    while (s0 < r->ncalls && r->calls[s0].il < from)
        s0++;
    for (s1 = s0; s1 < r->ncalls && r->calls[s1].il < to; s1++)
        ;
    if (s0 == s1)
        return 0;
    int indirect = 0;
    if (above) { /* the frame above is one the caller calls itself: not inlined code (the map
                  * is coarse in optimized code: a call's address may carry a neighbouring
                  * statement's IL offset) */
        const struct inl_callee *a = callee_info(above);
        for (uint32_t j = 0; j < r->ncalls; j++)
            if (names(r, &r->calls[j], a))
                return 0;
    }
    for (uint32_t j = s0; j < s1; j++)
        indirect |= r->calls[j].kind == 2 || r->calls[j].kind == 3;
    FunctionID direct = 0, gdv = 0;
    int ndirect = 0, ngdv = 0;
    for (uint32_t i = first; i; i = m->pairs[i - 1].next) {
        if (m->pairs[i - 1].caller != fn || m->pairs[i - 1].callee == above)
            continue;
        FunctionID x = m->pairs[i - 1].callee;
        const struct inl_callee *xi = callee_info(x);
        int here = 0;
        for (uint32_t j = s0; j < s1 && !here; j++)
            here = names(r, &r->calls[j], xi);
        if (here) {
            if (x != direct)
                ndirect++;
            direct = x;
            continue;
        }
        if (!indirect || ndirect)
            continue;
        int named = 0;
        for (uint32_t j = 0; j < r->ncalls && !named; j++)
            named = names(r, &r->calls[j], xi);
        if (!named) {
            if (x != gdv)
                ngdv++;
            gdv = x;
        }
    }
    /* a return address under native code: the call may be the runtime's helper's, made by the
     * caller itself (an allocation, a cast) at a statement that also calls an inlinee */
    if (ndirect == 1 && !(ret && !above))
        return direct;
    if (ndirect == 0 && ngdv == 1)
        return gdv;
    codemap.st.inline_ambiguous += ndirect > 1 || ngdv > 1;
    return 0;
}

FunctionID codemap_inlinee(FunctionID fn, const struct code *c, uintptr_t key, int ret,
                           FunctionID above)
{
    struct codemap_inl *m = &codemap.inl;
    codemap_inline_apply();
    if (!m->npairs || !fn || !c || c->dyn || !prof_unload_may_query())
        return 0; /* (not cached: asked again once the runtime may be asked) */
    if (!m->ipc && !(m->ipc = calloc(INL_IPCACHE, sizeof *m->ipc)))
        return 0;
    uintptr_t k = key << 1 | (uintptr_t)(ret != 0);
    struct inl_ipc *e = &m->ipc[(key ^ key >> 12 ^ above >> 4) & (INL_IPCACHE - 1)];
    if (e->key == k && e->above == above)
        return e->inlinee;
    FunctionID x = decide(fn, c, key, ret, above);
    *e = (struct inl_ipc){.key = k, .above = above, .inlinee = x};
    return x;
}

uintptr_t prof_codemap_inlinee(uintptr_t fn, uintptr_t ra, uintptr_t above)
{
    int code;
    if (!codemap.pool || !fn || ra < 2 || codemap_lookup(ra - 1, &code) != fn || code < 0)
        return 0; /* (no code map: neither sampler nor the allocation walk runs) */
    FunctionID x = codemap_inlinee(fn, &codemap.pool[code], ra - 1, 1, above);
    codemap.st.inline_frames += x != 0;
    return x;
}

size_t codemap_inline_mem_bytes(void)
{
    const struct codemap_inl *m = &codemap.inl;
    return m->cap * sizeof *m->pairs + (m->buckets ? INL_BUCKETS * sizeof *m->buckets : 0) +
           (m->ipc ? INL_IPCACHE * sizeof *m->ipc : 0) + m->root_bytes;
}
