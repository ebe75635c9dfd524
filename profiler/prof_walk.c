/* prof_walk.c - see prof_walk.h. */
#include "prof_walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clr_abi.h"
#include "prof_codemap.h"
#include "prof_core.h"
#include "prof_log.h"
#include "prof_sighandler.h"
#include "prof_symbols.h"

static struct {
    int mode;
    struct prof_sig_skip skip; /* read-only after prof_walk_init */
    int check_logged;
    /* counters: capture side atomic, clrscope-agg side plain but read with relaxed loads */
    uint64_t fp, runtime, fallbacks, resolved, check_same, check_differ;
} W;

const char *prof_walk_mode_name(int mode)
{
    return mode == PROF_WALK_RUNTIME ? "runtime" : mode == PROF_WALK_CHECK ? "check" : "fp";
}

/* The executable mappings of clrscope itself and of libcoreclr: the leaf side of a stack taken
 * inside a runtime callback, left out by the frame-pointer walk. */
static void find_skip_ranges(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[1024];
    int n = 0;
    uintptr_t self = (uintptr_t)&find_skip_ranges;
    while (n < PROF_SIG_SKIP_RANGES && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &path_at) < 3 ||
            perms[2] != 'x')
            continue;
        const char *path = path_at > 0 ? line + path_at : "";
        size_t len = strcspn(path, "\n");
        static const char coreclr[] = "/libcoreclr.so";
        int is_coreclr = len >= sizeof coreclr - 1 &&
                         !memcmp(path + len - (sizeof coreclr - 1), coreclr, sizeof coreclr - 1);
        if (is_coreclr || (self >= lo && self < hi)) {
            W.skip.lo[n] = lo;
            W.skip.hi[n] = hi;
            n++;
        }
    }
    fclose(f);
}

void prof_walk_init(void)
{
    const char *m = getenv("CLRSCOPE_ALLOC_WALK");
    W.mode = PROF_WALK_RUNTIME;
    if (m && !strcmp(m, "fp"))
        W.mode = PROF_WALK_FP;
    else if (m && !strcmp(m, "check"))
        W.mode = PROF_WALK_CHECK;
    else if (m && *m && strcmp(m, "runtime"))
        prof_log(LOG_WARN, "CLRSCOPE_ALLOC_WALK=\"%.40s\" is none of runtime, fp, check; using "
                 "runtime", m);
    find_skip_ranges();
}

/* ---- the runtime's walk ---- */

struct cur_walk {
    uintptr_t *frames;
    int n, max;
    uint32_t truncated;
};

static HRESULT cur_cb(FunctionID fn, UINT_PTR ip, UINT_PTR frame_info, ULONG32 ctx_size, BYTE *ctx,
                      void *data)
{
    (void)ip;
    (void)frame_info;
    (void)ctx_size;
    (void)ctx;
    struct cur_walk *w = data;
    if (w->n >= w->max) {
        w->truncated = 1;
        return E_FAIL;
    }
    if (!fn && w->n > 0 && w->frames[w->n - 1] == 0)
        return S_OK;
    w->frames[w->n++] = fn;
    return S_OK;
}

int prof_walk_current(uintptr_t *frames, int max, uint32_t *truncated)
{
    ICorProfilerInfo15 *info = g_core.info;
    struct cur_walk w = {.frames = frames, .max = max};
    if (!info)
        return 0;
    info->vt->DoStackSnapshot(info, 0, cur_cb, COR_PRF_SNAPSHOT_DEFAULT, &w, NULL, 0);
    /* Drop leading native frames: they are the runtime's event plumbing, not the app's code. */
    int skip = 0;
    while (skip < w.n && frames[skip] == 0)
        skip++;
    for (int i = skip; i < w.n; i++)
        frames[i - skip] = frames[i];
    if (truncated)
        *truncated = w.truncated;
    return w.n - skip;
}

/* ---- capture ---- */

/* noinline: keeps this frame (and so the walk's first return address) in clrscope's code. */
__attribute__((noinline)) void prof_walk_fast(struct prof_rec *r)
{
    r->ips = 0;
    r->check = 0;
    if (W.mode != PROF_WALK_RUNTIME) {
        uint32_t flags = 0;
        uint32_t max = W.mode == PROF_WALK_CHECK ? REC_CHECK_AT : REC_MAX_FRAMES;
        uint32_t n = prof_sig_walk_self(r->frames, max, &W.skip, &r->maybe, &r->cont, r->slots,
                                        &flags);
        if (n) {
            __atomic_fetch_add(&W.fp, 1, __ATOMIC_RELAXED);
            r->nframes = n;
            r->truncated = (flags & PROF_SIG_F_TRUNCATED) != 0;
            r->ips = 1;
            if (W.mode == PROF_WALK_CHECK) {
                uint32_t t = 0;
                int k = prof_walk_current(r->frames + REC_CHECK_AT,
                                          REC_MAX_FRAMES - REC_CHECK_AT, &t);
                r->check = (uint32_t)(k > 0 ? k : 0) | (t ? 0x80000000u : 0);
            }
            return;
        }
        __atomic_fetch_add(&W.fallbacks, 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&W.runtime, 1, __ATOMIC_RELAXED);
    int n = prof_walk_current(r->frames, REC_MAX_FRAMES, &r->truncated);
    r->nframes = (uint32_t)(n > 0 ? n : 0);
}

/* ---- clrscope-agg ---- */

/* Stacks are equal when their managed frames agree leaf first, up to where either walk was cut
 * (a trailing native run, where the walks stop differently, is not compared). */
static int same_stack(const uintptr_t *a, uint32_t na, int a_cut, const uintptr_t *b, uint32_t nb,
                      int b_cut)
{
    while (na && !a[na - 1])
        na--;
    while (nb && !b[nb - 1])
        nb--;
    if (a_cut || b_cut) {
        uint32_t m = na < nb ? na : nb;
        na = nb = m ? m - 1 : 0; /* the last frame kept by a cut walk may differ in kind */
    }
    if (na != nb)
        return 0;
    return !memcmp(a, b, na * sizeof *a);
}

static void log_difference(const uintptr_t *a, uint32_t na, const uintptr_t *b, uint32_t nb)
{
    char buf[1024];
    size_t len = 0;
    for (int side = 0; side < 2; side++) {
        const uintptr_t *f = side ? b : a;
        uint32_t n = side ? nb : na;
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s", side ? " | runtime:" : "fp:");
        for (uint32_t i = 0; i < n && i < 8 && len < sizeof buf - 1; i++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, " %s",
                                    f[i] ? prof_symbols_function(f[i]) : "[native]");
        if (len >= sizeof buf)
            len = sizeof buf - 1;
    }
    prof_log(LOG_DEBUG, "stack walks differ (leaf first): %s", buf);
}

void prof_walk_resolve(struct prof_rec *r)
{
    if (!r->ips)
        return;
    uint32_t max = r->check ? REC_CHECK_AT : REC_MAX_FRAMES;
    uint32_t n = r->nframes < max ? r->nframes : max;
    /* in place: the k-th FunctionID is written after the k-th address was read */
    prof_codemap_lock();
    int k = prof_codemap_returns(r->frames, r->slots, (int)n, r->maybe, r->cont, r->frames);
    prof_codemap_unlock();
    __atomic_fetch_add(&W.resolved, n, __ATOMIC_RELAXED);
    r->nframes = (uint32_t)(k > 0 ? k : 0);
    r->ips = 0;
    if (!r->check)
        return;
    uint32_t nb = r->check & 0x7fffffffu;
    int b_cut = (r->check & 0x80000000u) != 0;
    const uintptr_t *b = r->frames + REC_CHECK_AT;
    if (nb > REC_MAX_FRAMES - REC_CHECK_AT)
        nb = REC_MAX_FRAMES - REC_CHECK_AT;
    if (same_stack(r->frames, r->nframes, (int)r->truncated, b, nb, b_cut)) {
        __atomic_fetch_add(&W.check_same, 1, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_add(&W.check_differ, 1, __ATOMIC_RELAXED);
        /* the first 20, then one in 500: warm-up and steady state both show */
        if (prof_log_level() >= LOG_DEBUG && (W.check_logged++ < 20 || W.check_logged % 500 == 0))
            log_difference(r->frames, r->nframes, b, nb);
    }
    /* the profile gets the runtime's walk: check mode is for doubting the other one */
    memmove(r->frames, b, nb * sizeof *b);
    r->nframes = nb;
    r->truncated = (uint32_t)b_cut;
    r->check = 0;
}

int prof_walk_names(const uintptr_t *frames, int n, int truncated, const char **names, int cap)
{
    int k = 0;
    if (truncated && k < cap)
        names[k++] = "[truncated]";
    for (int i = n - 1; i >= 0 && k < cap; i--)
        names[k++] = frames[i] ? prof_symbols_function(frames[i]) : "[native code]";
    if (k == 0 && cap > 0)
        names[k++] = "[no managed frames]";
    return k;
}

void prof_walk_get_stats(struct prof_walk_stats *out)
{
    out->mode = W.mode;
    out->fp = __atomic_load_n(&W.fp, __ATOMIC_RELAXED);
    out->runtime = __atomic_load_n(&W.runtime, __ATOMIC_RELAXED);
    out->fallbacks = __atomic_load_n(&W.fallbacks, __ATOMIC_RELAXED);
    out->resolved = __atomic_load_n(&W.resolved, __ATOMIC_RELAXED);
    out->check_same = __atomic_load_n(&W.check_same, __ATOMIC_RELAXED);
    out->check_differ = __atomic_load_n(&W.check_differ, __ATOMIC_RELAXED);
}
