/* prof_codemap.c - see prof_codemap.h. */
#include "prof_codemap.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "prof_agg.h"
#include "clr_abi.h"
#include "prof_core.h"
#include "prof_log.h"
#include "prof_maps.h"
#include "prof_sighandler.h"
#include "prof_symbols.h"
#include "prof_unload.h"

#define CODEMAP_MAX_CODES 32768
#define CODEMAP_FLUSH_NS (600LL * 1000000000LL)
#define IPCACHE_SIZE 8192 /* direct-mapped ip -> method cache, power of two */
#define PROLOG_BYTES 64
#define CALLSITE_CACHE 1024 /* return address -> "follows a call" (power of two) */
#define OSR_RETURNS 1024    /* return addresses of OSR frames into Tier0 code, at most */

struct code {
    uintptr_t lo, hi;
    FunctionID fn;
    uint8_t dyn;  /* a dynamic method's (DynamicMethod, compiled Regex or expression) */
    uint8_t dead; /* that dynamic method was collected: its range names nothing any more */
    struct prof_frame_shape shape;
};

/* Dynamic methods (LCG: DynamicMethod, compiled Regex and expression trees) have no metadata, so
 * GetFunctionFromIP2 does not answer for their code. The runtime tells each one's compilation
 * (DynamicMethodJITCompilationFinished, on the compiling thread) and collection
 * (DynamicMethodUnloaded); the callbacks queue those notes without locks (Vyukov's bounded queue,
 * slot sequence numbers stored relative to the slot so that zeroed memory is the empty queue)
 * and the code map's owner applies them before its next lookup. */
#define DYN_QUEUE 1024 /* power of two */
#define DYN_MAX 4096   /* dynamic methods' code ranges known at once */

struct dyn_note {
    uint64_t seq;
    uintptr_t lo, hi; /* hi 0: the method was collected */
    FunctionID fn;
    uint32_t entry; /* lo is where the method starts (its prologue is there) */
};

struct dyn_range {
    uintptr_t lo, hi;
    FunctionID fn;
    uint32_t entry;
};

/* The dynamic methods' notes and ranges (a member of struct codemap_state). */
struct codemap_dyn {
    struct dyn_note q[DYN_QUEUE]; /* slots: producers fill them, the owner empties them */
    uint64_t head;    /* atomic: producers (any app thread, in a runtime callback) */
    uint64_t tail;    /* the code map's owner, under the lock */
    uint64_t dropped; /* atomic: notes lost to a full queue (producers) */
    struct dyn_range r[DYN_MAX]; /* under the lock: sorted by lo, never overlapping */
    uint32_t n;
};

struct ipc {
    uintptr_t key; /* 0 = empty */
    FunctionID fn;
    int32_t code; /* index into pool, -1 = none */
};

struct frame {
    uintptr_t ip;
    int ret;   /* a return address (looked up at ip - 1) */
    int found; /* read off the chain by the handler (an OSR method's Tier0 record) */
};

struct callsite {
    uintptr_t ra; /* 0 = empty */
    int ok;
};

/* The code map's state. Everything but where noted is written and read under `lock`, by the
 * clrscope-sampler thread and clrscope-agg (prof_codemap_init's allocations happen before either
 * looks: prof_sampler_start); prof_codemap_get_stats and prof_codemap_mem_bytes read the
 * counters without it. */
struct codemap_state {
    pthread_mutex_t lock; /* prof_codemap_lock() */
    struct code *pool; /* append-only until a flush */
    uint32_t npool, cap;
    uint32_t ndyn; /* of which dynamic methods' */
    uint32_t *order; /* pool indices sorted by lo */
    struct ipc *cache;
    struct frame *frames;
    int max_frames;
    int frameless_dirty;
    /* where OSR frames return into Tier0 code, sorted: kept across the periodic flush (Tier0
     * code stays where it is), dropped at an unload (which may free it) */
    uintptr_t osr_ra[OSR_RETURNS];
    uint32_t nosr;
    int osr_dirty;
    int64_t flushed_at;
    uint32_t epoch; /* prof_unload's epoch the tables were learned in */
    int no_code_reads; /* atomic, any thread: process_vm_readv is refused here */
    struct callsite callsites[CALLSITE_CACHE];
    struct codemap_dyn dyn;
    struct prof_codemap_stats st;
};

static struct codemap_state codemap = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- x86-64 prologue and call-site decoding (pure) ---- */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

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

/* ---- the method table ---- */

/* Reads code bytes without trusting that they are mapped (a failed read is an error, not a
 * fault): clrscope's threads must not crash the process either. */
size_t prof_codemap_read_code(uintptr_t addr, uint8_t *buf, size_t len)
{
    if (__atomic_load_n(&codemap.no_code_reads, __ATOMIC_RELAXED) || !addr)
        return 0;
    struct iovec local = {buf, len}, remote = {(void *)addr, len};
    ssize_t got = process_vm_readv(g_core.pid, &local, 1, &remote, 1, 0);
    if (got < 0 && (errno == EPERM || errno == ENOSYS) &&
        !__atomic_exchange_n(&codemap.no_code_reads, 1, __ATOMIC_RELAXED))
        prof_log(LOG_INFO, "process_vm_readv is not allowed here; frames of methods without a "
                 "frame pointer may miss their caller");
    return got > 0 ? (size_t)got : 0;
}

static int find_code(uintptr_t key)
{
    uint32_t lo = 0, hi = codemap.npool;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const struct code *c = &codemap.pool[codemap.order[mid]];
        if (key < c->lo)
            hi = mid;
        else if (key >= c->hi)
            lo = mid + 1;
        else
            return (int)codemap.order[mid];
    }
    return -1;
}

static void flush(int64_t now)
{
    codemap.npool = 0;
    codemap.ndyn = 0;
    memset(codemap.cache, 0, IPCACHE_SIZE * sizeof *codemap.cache);
    memset(codemap.callsites, 0, sizeof codemap.callsites);
    codemap.flushed_at = now;
    codemap.frameless_dirty = 1;
}

/* Adds the code range [lo, hi) of `fn` to the pool (sorted by lo); `entry`: the method starts at
 * lo, where its prologue tells its frame shape. Returns its index, -1 when the pool is full. */
static int add_code(uintptr_t lo, uintptr_t hi, FunctionID fn, int entry, int dyn)
{
    if (codemap.npool >= CODEMAP_MAX_CODES)
        return -1;
    struct code c = {.lo = lo, .hi = hi, .fn = fn, .dyn = (uint8_t)dyn};
    if (entry) {
        uint8_t bytes[PROLOG_BYTES];
        size_t want = hi - lo < sizeof bytes ? hi - lo : sizeof bytes;
        size_t len = prof_codemap_read_code(lo, bytes, want);
        prof_frame_decode(bytes, len, &c.shape);
    }
    codemap.pool[codemap.npool] = c;
    codemap.ndyn += (uint32_t)dyn;
    uint32_t at = 0; /* sorted insert */
    while (at < codemap.npool && codemap.pool[codemap.order[at]].lo < lo)
        at++;
    memmove(&codemap.order[at + 1], &codemap.order[at],
            (codemap.npool - at) * sizeof *codemap.order);
    codemap.order[at] = codemap.npool;
    if (c.shape.known && !c.shape.framed && c.shape.frame % 16 == 8)
        codemap.frameless_dirty = 1;
    return (int)codemap.npool++;
}

/* Learns the native code range and frame shape of the code of `fn` that contains `key`. */
static int learn(FunctionID fn, UINT_PTR rejit, uintptr_t key)
{
    ICorProfilerInfo15 *info = g_core.info;
    if (codemap.npool >= CODEMAP_MAX_CODES || g_core.info_version < 9)
        return -1;
    UINT_PTR starts[16];
    ULONG32 nstarts = 0;
    if (info->vt->GetNativeCodeStartAddresses(info, fn, rejit, 16, &nstarts, starts) != S_OK)
        return -1;
    for (ULONG32 i = 0; i < nstarts && i < 16; i++) {
        COR_PRF_CODE_INFO ci[4];
        ULONG32 nci = 0;
        if (info->vt->GetCodeInfo4(info, starts[i], 4, &nci, ci) != S_OK)
            continue;
        for (ULONG32 j = 0; j < nci && j < 4; j++) {
            uintptr_t lo = ci[j].startAddress, hi = lo + ci[j].size;
            if (key >= lo && key < hi)
                return add_code(lo, hi, fn, lo == starts[i], 0);
        }
    }
    return -1;
}

/* ---- dynamic methods ---- */

static void dyn_push(uintptr_t lo, uintptr_t hi, FunctionID fn, int entry)
{
    uint64_t pos = __atomic_load_n(&codemap.dyn.head, __ATOMIC_RELAXED);
    struct dyn_note *n;
    for (;;) {
        uint64_t at = pos & (DYN_QUEUE - 1);
        n = &codemap.dyn.q[at];
        int64_t dif = (int64_t)(__atomic_load_n(&n->seq, __ATOMIC_ACQUIRE) + at - pos);
        if (dif == 0) {
            if (__atomic_compare_exchange_n(&codemap.dyn.head, &pos, pos + 1, 1, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                break;
        } else if (dif < 0) { /* full: the owner has not looked up anything for a while */
            __atomic_fetch_add(&codemap.dyn.dropped, 1, __ATOMIC_RELAXED);
            return;
        } else {
            pos = __atomic_load_n(&codemap.dyn.head, __ATOMIC_RELAXED);
        }
    }
    n->lo = lo;
    n->hi = hi;
    n->fn = fn;
    n->entry = (uint32_t)entry;
    __atomic_store_n(&n->seq, pos + 1 - (pos & (DYN_QUEUE - 1)), __ATOMIC_RELEASE);
}

static int dyn_pop(struct dyn_note *out)
{
    uint64_t at = codemap.dyn.tail & (DYN_QUEUE - 1);
    struct dyn_note *n = &codemap.dyn.q[at];
    if ((int64_t)(__atomic_load_n(&n->seq, __ATOMIC_ACQUIRE) + at - (codemap.dyn.tail + 1)) < 0)
        return 0;
    *out = *n;
    __atomic_store_n(&n->seq, codemap.dyn.tail + DYN_QUEUE - at, __ATOMIC_RELEASE);
    codemap.dyn.tail++;
    return 1;
}

void prof_codemap_dynamic_compiled(uintptr_t fn)
{
    ICorProfilerInfo15 *info = g_core.info;
    if (!info || !fn)
        return;
    COR_PRF_CODE_INFO ci[4];
    ULONG32 nci = 0;
    if (g_core.info_version >= 9) {
        UINT_PTR start = 0;
        ULONG32 nstarts = 0;
        if (info->vt->GetNativeCodeStartAddresses(info, fn, 0, 1, &nstarts, &start) == S_OK &&
            nstarts && info->vt->GetCodeInfo4(info, start, 4, &nci, ci) == S_OK) {
            for (ULONG32 j = 0; j < nci && j < 4; j++)
                if (ci[j].size)
                    dyn_push(ci[j].startAddress, ci[j].startAddress + ci[j].size, fn,
                             ci[j].startAddress == start);
            return;
        }
    }
    nci = 0;
    if (info->vt->GetCodeInfo2(info, fn, 4, &nci, ci) == S_OK)
        for (ULONG32 j = 0; j < nci && j < 4; j++)
            if (ci[j].size)
                dyn_push(ci[j].startAddress, ci[j].startAddress + ci[j].size, fn, j == 0);
}

void prof_codemap_dynamic_unloaded(uintptr_t fn)
{
    if (fn)
        dyn_push(0, 0, fn, 0);
}

/* Forgets the ip cache's answers for [lo, hi) and for method fn. */
static void forget_cached(uintptr_t lo, uintptr_t hi, FunctionID fn)
{
    for (uint32_t i = 0; i < IPCACHE_SIZE; i++) {
        struct ipc *e = &codemap.cache[i];
        if (e->key && ((e->key >= lo && e->key < hi) || (fn && e->fn == fn)))
            e->key = 0;
    }
}

static void dyn_add(const struct dyn_note *n)
{
    uint32_t at = 0, keep = 0;
    /* code freed by a collected method is reused: what overlaps is gone */
    for (uint32_t i = 0; i < codemap.dyn.n; i++)
        if (codemap.dyn.r[i].hi <= n->lo || codemap.dyn.r[i].lo >= n->hi)
            codemap.dyn.r[keep++] = codemap.dyn.r[i];
    codemap.dyn.n = keep;
    /* learned from the code that was there before: the ranges do not overlap one another, so
     * the one with the highest start below n->hi overlaps if any does */
    uint32_t lo = 0, hi = codemap.npool;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (codemap.pool[codemap.order[mid]].lo < n->hi)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && codemap.pool[codemap.order[lo - 1]].hi > n->lo) {
        flush(codemap.flushed_at);
        codemap.st.dynamic_flushes++;
    }
    forget_cached(n->lo, n->hi, 0);
    if (codemap.dyn.n >= DYN_MAX) {
        codemap.st.dynamic_dropped++;
        return;
    }
    while (at < codemap.dyn.n && codemap.dyn.r[at].lo < n->lo)
        at++;
    memmove(&codemap.dyn.r[at + 1], &codemap.dyn.r[at],
            (codemap.dyn.n - at) * sizeof *codemap.dyn.r);
    codemap.dyn.r[at] =
        (struct dyn_range){.lo = n->lo, .hi = n->hi, .fn = n->fn, .entry = n->entry};
    codemap.dyn.n++;
}

static void dyn_remove(FunctionID fn)
{
    uint32_t keep = 0;
    for (uint32_t i = 0; i < codemap.dyn.n; i++)
        if (codemap.dyn.r[i].fn != fn)
            codemap.dyn.r[keep++] = codemap.dyn.r[i];
    codemap.dyn.n = keep;
    for (uint32_t i = 0; codemap.ndyn && i < codemap.npool; i++)
        if (codemap.pool[i].dyn && codemap.pool[i].fn == fn) {
            codemap.pool[i].dead = 1;
            codemap.frameless_dirty = 1; /* its frame shape no longer describes that memory */
        }
    forget_cached(0, 0, fn);
    prof_symbols_forget_dynamic();
}

/* Applies the queued notes (under prof_codemap_lock, before a lookup). */
static void dyn_apply(void)
{
    struct dyn_note n;
    while (dyn_pop(&n)) {
        if (n.hi) {
            dyn_add(&n);
            codemap.st.dynamic_compiled++;
        } else {
            dyn_remove(n.fn);
            codemap.st.dynamic_unloaded++;
        }
    }
    codemap.st.dynamic_methods = codemap.dyn.n;
    codemap.st.dynamic_dropped_notes = __atomic_load_n(&codemap.dyn.dropped, __ATOMIC_RELAXED);
}

static int dyn_find(uintptr_t key)
{
    uint32_t lo = 0, hi = codemap.dyn.n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (key < codemap.dyn.r[mid].lo)
            hi = mid;
        else if (key >= codemap.dyn.r[mid].hi)
            lo = mid + 1;
        else
            return (int)mid;
    }
    return -1;
}

/* The method of an address (fn 0: not managed code); *code = its range entry or -1. */
static FunctionID lookup(uintptr_t key, int *code)
{
    uint32_t epoch = prof_unload_epoch();
    if (epoch != codemap.epoch) {
        /* a module unload started: its code may be gone, its range reused */
        codemap.epoch = epoch;
        flush(codemap.flushed_at);
        codemap.st.unload_flushes++;
        codemap.nosr = 0;
        codemap.st.osr_returns = 0;
        codemap.osr_dirty = 1;
    }
    if (__atomic_load_n(&codemap.dyn.head, __ATOMIC_ACQUIRE) != codemap.dyn.tail)
        dyn_apply();
    struct ipc *e = &codemap.cache[(key ^ (key >> 13)) & (IPCACHE_SIZE - 1)];
    if (e->key == key) {
        *code = e->code;
        return e->fn;
    }
    FunctionID fn = 0;
    int idx = find_code(key), d;
    const char *module = prof_maps_native_name(key);
    if (idx >= 0 && codemap.pool[idx].dead) {
        idx = -1; /* a collected dynamic method's: nothing there now */
    } else if (idx >= 0) {
        fn = codemap.pool[idx].fn;
    } else if ((d = dyn_find(key)) >= 0) {
        fn = codemap.dyn.r[d].fn;
        idx = add_code(codemap.dyn.r[d].lo, codemap.dyn.r[d].hi, fn,
                       (int)codemap.dyn.r[d].entry, 1);
    } else if (!strstr(module, ".so") && !prof_unload_may_query()) {
        *code = -1; /* taken before an unload started: not asked, not remembered */
        return 0;
    } else if (!strstr(module, ".so")) { /* shared libraries hold no managed code */
        ICorProfilerInfo15 *info = g_core.info;
        UINT_PTR rejit = 0;
        codemap.st.clr_lookups++;
        if (info->vt->GetFunctionFromIP2(info, (const BYTE *)key, &fn, &rejit) != S_OK)
            fn = 0;
        if (fn)
            idx = learn(fn, rejit, key);
    }
    if (!fn && !prof_maps_is_code(key)) {
        prof_maps_refresh(1); /* code mapped after the snapshot: ask again later */
        *code = -1;
        return 0;
    }
    *e = (struct ipc){.key = key, .fn = fn, .code = idx};
    *code = idx;
    return fn;
}

void prof_codemap_lock(void)
{
    pthread_mutex_lock(&codemap.lock);
}

void prof_codemap_unlock(void)
{
    pthread_mutex_unlock(&codemap.lock);
}

/* Whether the bytes before ra end with a call instruction (cached per address). */
static int after_call(uintptr_t ra)
{
    struct callsite *e = &codemap.callsites[(ra ^ (ra >> 11)) & (CALLSITE_CACHE - 1)];
    if (e->ra == ra)
        return e->ok;
    uint8_t before[8];
    int ok = prof_codemap_read_code(ra - 8, before, sizeof before) == sizeof before &&
             prof_frame_is_call_site(before, sizeof before);
    *e = (struct callsite){.ra = ra, .ok = ok};
    return ok;
}

uintptr_t prof_codemap_function(uintptr_t ra)
{
    int code;
    return lookup(ra - 1, &code);
}

int prof_codemap_returns(const uintptr_t *ra, int n, uint64_t found, uint64_t hops,
                         uintptr_t *fns, int *src)
{
    FunctionID fn[PROF_CODEMAP_MAX_RETURNS];
    int code[PROF_CODEMAP_MAX_RETURNS];
    if (n > PROF_CODEMAP_MAX_RETURNS)
        n = PROF_CODEMAP_MAX_RETURNS;
    for (int i = 0; i < n; i++) {
        fn[i] = lookup(ra[i] - 1, &code[i]);
        if (code[i] >= 0 && codemap.pool[code[i]].dyn) { /* as DoStackSnapshot: none (see .h) */
            fn[i] = 0;
            code[i] = -1;
        }
    }
    int k = 0, prev_code = -1, keep = 1;
    FunctionID prev_fn = 0;
    for (int i = 0; i < n; i++) {
        uint64_t bit = i < 64 ? 1ull << i : 0;
        if (found & bit) {
            /* read from a frame record off the chain where the learned table puts it: still
             * only a frame if it is managed code right after a call instruction */
            keep = fn[i] && after_call(ra[i]);
            *(keep ? &codemap.st.gap_kept : &codemap.st.gap_dropped) += 1;
            if (!keep)
                continue;
        } else if (hops & bit) {
            if (!keep)
                continue; /* reached from a record that was dropped */
        }
        if (fn[i] && fn[i] == prev_fn && code[i] >= 0 && prev_code >= 0 &&
            code[i] != prev_code && codemap.pool[code[i]].lo != codemap.pool[prev_code].lo) {
            prev_code = code[i]; /* OSR code and the Tier0 frame it runs on: one frame */
            continue;
        }
        if (!fn[i] && !strstr(prof_maps_native_name(ra[i] - 1), ".so"))
            continue; /* runtime-generated code (stubs, dynamic methods): not a frame to the
                       * runtime's own walk either */
        prev_fn = fn[i];
        prev_code = code[i];
        if (!fn[i] && (k == 0 || fns[k - 1] == 0))
            continue; /* leading native frames dropped, runs of them folded into one 0 */
        if (src)
            src[k] = i;
        fns[k++] = fn[i];
    }
    return k;
}

int prof_codemap_init(int max_frames)
{
    if (codemap.pool) /* already (the signal sampler, then the maps keeper); all four or none */
        return 0;
    codemap.max_frames = max_frames;
    codemap.cap = CODEMAP_MAX_CODES;
    codemap.pool = malloc(codemap.cap * sizeof *codemap.pool);
    codemap.order = malloc(codemap.cap * sizeof *codemap.order);
    codemap.cache = calloc(IPCACHE_SIZE, sizeof *codemap.cache);
    codemap.frames = malloc((size_t)(max_frames + PROF_SIG_MAX_HOPS + 1) * sizeof *codemap.frames);
    if (!codemap.pool || !codemap.order || !codemap.cache || !codemap.frames) {
        free(codemap.pool);
        free(codemap.order);
        free(codemap.cache);
        free(codemap.frames);
        codemap.pool = NULL;
        codemap.order = NULL;
        codemap.cache = NULL;
        codemap.frames = NULL;
        return -ENOMEM;
    }
    codemap.flushed_at = prof_now_ns();
    return 0;
}

/* glibc is built without frame pointers: a leaf there leaves rbp to its caller's caller. */
static int is_glibc(const char *module)
{
    static const char *const names[] = {"[native libc.so", "[native libm.so", "[native ld-linux",
                                        "[native libpthread.so"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strncmp(module, names[i], strlen(names[i])))
            return 1;
    return 0;
}

/* Recovers the callers of the leaf that rbp does not frame, from the copied stack words. */
static int leaf_fix(const struct prof_sigsample *s, struct frame *out, int cap)
{
    int code;
    const uintptr_t pc = s->ips[0];
    FunctionID fn = lookup(pc, &code);
    if (!s->nwindow)
        return 0;
    long off;
    if (fn && code >= 0) {
        const struct code *c = &codemap.pool[code];
        uint8_t at[16];
        size_t len =
            prof_codemap_read_code(pc, at, c->hi - pc < sizeof at ? c->hi - pc : sizeof at);
        off = prof_frame_ra_offset(&c->shape, (uint32_t)(pc - c->lo), at, len);
    } else if (!fn && is_glibc(prof_maps_native_name(pc))) {
        off = 0; /* its hot leaves (memcpy, memset, syscall wrappers) push nothing */
    } else {
        return 0;
    }
    int n = 0;
    while (off >= 0 && off % 8 == 0 && off / 8 < s->nwindow && n < cap) {
        uintptr_t ra = s->window[off / 8];
        if ((s->n > 1 && ra == s->ips[1]) || !prof_maps_is_code(ra) || !after_call(ra))
            break; /* already on the chain, or not a return address */
        out[n++] = (struct frame){.ip = ra, .ret = 1};
        /* a frameless caller: its own return address is right above its frame */
        if (!lookup(ra - 1, &code) || code < 0 || !codemap.pool[code].shape.known ||
            codemap.pool[code].shape.framed)
            break;
        off += 8 + (long)codemap.pool[code].shape.frame;
    }
    codemap.st.leaf_fixes += n > 0;
    return n;
}

/* Remembers that an OSR frame returns to ra (in its Tier0 code), for the handler. */
static void note_osr_return(uintptr_t ra)
{
    uint32_t at = 0;
    while (at < codemap.nosr && codemap.osr_ra[at] < ra)
        at++;
    if ((at < codemap.nosr && codemap.osr_ra[at] == ra) || codemap.nosr >= OSR_RETURNS)
        return;
    memmove(&codemap.osr_ra[at + 1], &codemap.osr_ra[at],
            (codemap.nosr - at) * sizeof *codemap.osr_ra);
    codemap.osr_ra[at] = ra;
    codemap.nosr++;
    codemap.osr_dirty = 1;
    codemap.st.osr_returns = codemap.nosr;
}

/* For a sample taken before the handler knew where this OSR frame returns (x, into its Tier0
 * code): the Tier0 record the chain passed over, if it lies in the stack words copied at the leaf
 * (the OSR frame is the leaf, or under a frameless one). The OSR frame's record holds the caller's
 * rbp and x; the Tier0 record above holds the same rbp and the return into the method's caller. */
static int osr_in_window(const struct prof_sigsample *s, uintptr_t x, uintptr_t *ra)
{
    for (int j = 1; j < s->nwindow; j++) {
        if (s->window[j] != x)
            continue;
        uintptr_t next = s->window[j - 1];
        for (int k = j + 1; k + 1 < s->nwindow; k++) {
            uintptr_t r = s->window[k + 1];
            if (s->window[k] == next && prof_maps_is_code(r) && after_call(r)) {
                *ra = r;
                return 1;
            }
        }
        return 0;
    }
    return 0;
}

int prof_codemap_name_stack(const struct prof_sigsample *s, const char **names,
                            unsigned char *managed, int cap)
{
    int nf = 0;
    if (s->n > 0) {
        codemap.frames[nf++] = (struct frame){.ip = s->ips[0], .ret = 0};
        nf += leaf_fix(s, &codemap.frames[nf], PROF_SIG_MAX_HOPS);
    }
    for (int i = 1; i < s->n && nf < codemap.max_frames + PROF_SIG_MAX_HOPS + 1; i++)
        codemap.frames[nf++] = (struct frame){.ip = s->ips[i], .ret = 1,
                                        .found = i < 64 && (s->found >> i & 1)};

    int k = 0, outer = -1, prev_code = -1;
    FunctionID prev_fn = 0;
    for (int i = 0; i < nf && k < cap; i++) {
        uintptr_t key = codemap.frames[i].ret ? codemap.frames[i].ip - 1 : codemap.frames[i].ip;
        int code;
        FunctionID fn = lookup(key, &code);
        /* a Tier0 record found behind an OSR frame is a frame only if it is managed code right
         * after a call instruction */
        if (codemap.frames[i].found && !(fn && after_call(codemap.frames[i].ip))) {
            codemap.st.gap_dropped++;
            continue;
        }
        codemap.st.gap_kept += codemap.frames[i].found;
        if (fn && fn == prev_fn && code >= 0 && prev_code >= 0 && code != prev_code &&
            codemap.pool[code].lo != codemap.pool[prev_code].lo) {
            /* OSR code and the Tier0 frame it runs on: one frame. The handler is told where the
             * OSR frame returns, so that it finds the Tier0 record passed over there. */
            prev_code = code;
            if (!codemap.frames[i].ret)
                continue;
            note_osr_return(codemap.frames[i].ip);
            /* the handler did not know it yet: the caller from the copied words, if there */
            uintptr_t ra;
            int code2;
            FunctionID fn2;
            if (!(i + 1 < nf && codemap.frames[i + 1].found) && k < cap &&
                osr_in_window(s, codemap.frames[i].ip, &ra) &&
                !(i + 1 < nf && codemap.frames[i + 1].ip == ra) && (fn2 = lookup(ra - 1, &code2)) &&
                fn2 != fn) {
                names[k] = prof_symbols_function(fn2);
                managed[k] = 1;
                outer = k++;
                prev_fn = fn2;
                prev_code = code2;
                codemap.st.osr_window_fixes++;
            }
            continue;
        }
        const char *name = fn ? prof_symbols_function(fn) : prof_maps_native_name(key);
        prev_fn = fn;
        prev_code = code;
        if (!fn && k > 0 && !managed[k - 1] && names[k - 1] == name)
            continue; /* one frame per run of native code in one module */
        names[k] = name;
        managed[k] = fn != 0;
        if (fn)
            outer = k;
        k++;
    }
    /* Below the outermost managed frame is thread-start plumbing (libc, libcoreclr): keep one
     * native frame there, as DoStackSnapshot reports it, so both samplers draw the same roots. */
    if (outer >= 0 && k > outer + 2)
        k = outer + 2;
    /* A managed thread starts in native code: a walk that ends on a managed frame stopped at a
     * return address into code newer than the maps snapshot (or at a frame without rbp). */
    if (outer >= 0 && outer == k - 1 && !(s->flags & PROF_SIG_F_TRUNCATED))
        prof_maps_refresh(0);
    return k;
}

void prof_codemap_tick(int64_t now)
{
    if (now - codemap.flushed_at >= CODEMAP_FLUSH_NS)
        flush(now);
    if (codemap.osr_dirty) { /* the return addresses of OSR frames (prof_sig_osrs) */
        codemap.osr_dirty = 0;
        prof_maps_set_osr(codemap.osr_ra, codemap.nosr);
    }
    if (!codemap.frameless_dirty)
        return;
    codemap.frameless_dirty = 0;
    uintptr_t(*r)[3] = malloc((codemap.npool ? codemap.npool : 1) * sizeof *r);
    if (!r)
        return;
    size_t n = 0;
    for (uint32_t i = 0; i < codemap.npool; i++) {
        const struct code *c = &codemap.pool[codemap.order[i]];
        /* a method that calls keeps sp 16-aligned at the call: frame % 16 == 8; anything else
         * is not a frameless caller (the handler only needs callers) */
        if (c->shape.known && !c->shape.framed && c->shape.frame % 16 == 8 && !c->dead) {
            r[n][0] = c->lo;
            r[n][1] = c->hi;
            r[n][2] = c->shape.frame;
            n++;
        }
    }
    prof_maps_set_frameless((const uintptr_t(*)[3])r, n);
    free(r);
    codemap.st.frameless = n;
}

void prof_codemap_get_stats(struct prof_codemap_stats *out)
{
    *out = codemap.st;
    out->methods = codemap.npool;
}

size_t prof_codemap_mem_bytes(void)
{
    if (!codemap.pool)
        return 0;
    return (size_t)codemap.cap * (sizeof *codemap.pool + sizeof *codemap.order) +
           IPCACHE_SIZE * sizeof *codemap.cache +
           (size_t)(codemap.max_frames + PROF_SIG_MAX_HOPS + 1) * sizeof *codemap.frames;
}

const struct prof_kind prof_codemap_kind = {
    .name = "code-map",
    .mem_bytes = prof_codemap_mem_bytes,
    .mem_name = "code_map",
};
