/* prof_walk.c - see prof_walk.h. */
#include "prof_walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clr_abi.h"
#include "prof_codemap.h"
#include "prof_core.h"
#include "prof_log.h"
#include "prof_maps.h"
#include "prof_sighandler.h"
#include "prof_symbols.h"

#define CAL_FIRST 256     /* the first frame-pointer samples all calibrate */
#define CAL_EVERY 1024    /* then one in this many (a runtime walk through OSR frames can cost
                           * a hundred microseconds) */
#define VOTES 3           /* agreeing calibrations in a row before a place is published */
#define GIVE_UP 8         /* disagreeing ones (and over a tenth of all) before it is unsure */
#define RECOVER 32        /* agreeing ones in a row that bring an unsure place back */
#define MAX_PLACES 1024   /* places learned at most (runtime stubs and OSR call sites) */

/* What calibration learned. A place is a return address x (into a runtime stub, or into Tier0
 * code under OSR code) and the offset of the record hidden there. */
struct place {
    uintptr_t x;
    int32_t off;       /* candidate offset (0: nothing hidden) */
    uint32_t run;      /* agreeing verdicts in a row for off */
    uint32_t agree, disagree; /* all verdicts */
    int32_t published; /* atomic: offset published, or INT32_MIN when not yet */
};

/* The walks' state. mode and skip are written by prof_walk_init (at Initialize, before any
 * callback walks), read-only after; the counters are atomics (the capture side on any thread,
 * the resolve side on clrscope-agg); the places are clrscope-agg's, under prof_codemap_lock()
 * (prof_walk_begin), but for prof_walk_get_stats, which reads nplaces and published with
 * atomics from any thread. */
struct walk_state {
    int mode;
    struct prof_sig_skip skip;
    int check_logged;          /* clrscope-agg */
    uint64_t seq;              /* atomic: frame-pointer walks started, picks calibrations */
    uint64_t fp, runtime, fallbacks, unknown_stub, not_code, calibrations, resolved, check_same,
        check_differ;
    struct place places[MAX_PLACES];
    uint32_t nplaces;          /* atomic store: places[0..nplaces) are in use */
    int places_dirty;          /* places changed since they were last published */
    int places_full_logged;    /* atomic (prof_log_once) */
};

static struct walk_state walk;

const char *prof_walk_mode_name(int mode)
{
    return mode == PROF_WALK_RUNTIME ? "runtime" : mode == PROF_WALK_CHECK ? "check" : "fp";
}

/* The executable mappings of clrscope itself and of the runtime: the leaf side of a stack taken
 * inside a runtime callback, left out by the frame-pointer walk. The runtime is the mapping that
 * holds the code behind its ICorProfilerInfo (and any of libcoreclr.so): in a self-contained
 * single-file app it is linked into the app's executable, whose other executable mappings are
 * the bundle's ReadyToRun assemblies, managed code that must stay in the stack. */
static void find_skip_ranges(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[1024];
    int n = 0;
    uintptr_t self = (uintptr_t)&find_skip_ranges;
    uintptr_t runtime = g_core.info ? (uintptr_t)g_core.info->vt->DoStackSnapshot : 0;
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
        if (is_coreclr || (self >= lo && self < hi) || (runtime >= lo && runtime < hi)) {
            walk.skip.lo[n] = lo;
            walk.skip.hi[n] = hi;
            n++;
        }
    }
    fclose(f);
}

void prof_walk_init(void)
{
    const char *m = getenv("CLRSCOPE_ALLOC_WALK");
    walk.mode = PROF_WALK_FP;
    if (m && !strcmp(m, "runtime"))
        walk.mode = PROF_WALK_RUNTIME;
    else if (m && !strcmp(m, "check"))
        walk.mode = PROF_WALK_CHECK;
    else if (m && *m && strcmp(m, "fp"))
        prof_log(LOG_WARN, "CLRSCOPE_ALLOC_WALK=\"%.40s\" is none of fp, runtime, check; using fp",
                 m);
    find_skip_ranges();
    for (uint32_t i = 0; i < MAX_PLACES; i++)
        walk.places[i].published = INT32_MIN;
}

/* ---- the runtime's walk ---- */

struct cur_walk {
    uintptr_t *frames, *ips;
    int n, max;
    uint32_t truncated;
};

static HRESULT cur_cb(FunctionID fn, UINT_PTR ip, UINT_PTR frame_info, ULONG32 ctx_size, BYTE *ctx,
                      void *data)
{
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
    if (w->ips)
        w->ips[w->n] = ip;
    w->frames[w->n++] = fn;
    return S_OK;
}

int prof_walk_current(uintptr_t *frames, int max, uint32_t *truncated, uintptr_t *ips)
{
    ICorProfilerInfo15 *info = g_core.info;
    struct cur_walk w = {.frames = frames, .ips = ips, .max = max};
    if (!info)
        return 0;
    info->vt->DoStackSnapshot(info, 0, cur_cb, COR_PRF_SNAPSHOT_DEFAULT, &w, NULL, 0);
    /* Drop leading native frames: they are the runtime's event plumbing, not the app's code. */
    int skip = 0;
    while (skip < w.n && frames[skip] == 0)
        skip++;
    for (int i = skip; i < w.n; i++) {
        frames[i - skip] = frames[i];
        if (ips)
            ips[i - skip] = ips[i];
    }
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
    if (walk.mode != PROF_WALK_RUNTIME) {
        uint64_t seq = __atomic_fetch_add(&walk.seq, 1, __ATOMIC_RELAXED);
        int cal = walk.mode == PROF_WALK_CHECK || seq < CAL_FIRST || seq % CAL_EVERY == 0;
        uint32_t flags = 0;
        struct prof_sig_self out;
        uint32_t n = prof_sig_walk_self(r->frames, REC_MAX_FRAMES, &walk.skip, cal, &out, &flags);
        if (n) {
            r->nframes = n;
            r->truncated = (flags & PROF_SIG_F_TRUNCATED) != 0;
            r->ips = 1;
            r->found = out.found;
            r->hops = out.hops;
            r->stub = out.stub;
            r->stub_off = out.stub_off;
            r->nprobes = out.nprobes;
            for (uint32_t i = 0; i < out.nprobes && i < REC_PROBES; i++) {
                r->probes[i].step = out.probes[i].step;
                r->probes[i].off = out.probes[i].off;
                r->probes[i].x = out.probes[i].x;
                r->probes[i].ra = out.probes[i].ra;
            }
            int unknown = (flags & PROF_SIG_F_STUB_UNKNOWN) != 0;
            int notcode = (flags & PROF_SIG_F_NOTCODE) != 0;
            if (!cal && !unknown && !notcode) {
                __atomic_fetch_add(&walk.fp, 1, __ATOMIC_RELAXED);
                return;
            }
            /* the leaf is unsure, the chain met code the maps snapshot does not know yet, or
             * this one calibrates: the runtime walks it too, and the profile takes the
             * runtime's stack */
            __atomic_fetch_add(cal       ? &walk.calibrations
                               : unknown ? &walk.unknown_stub
                                         : &walk.not_code,
                               1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&walk.runtime, 1, __ATOMIC_RELAXED);
            uint32_t t = 0;
            int k = prof_walk_current(r->frames + REC_CHECK_AT, REC_MAX_FRAMES, &t, NULL);
            r->check = (uint32_t)(k > 0 ? k : 0) | (t ? 0x80000000u : 0) | 0x40000000u;
            r->calibrating = (uint32_t)cal;
            return;
        }
        __atomic_fetch_add(&walk.fallbacks, 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&walk.runtime, 1, __ATOMIC_RELAXED);
    int n = prof_walk_current(r->frames, REC_MAX_FRAMES, &r->truncated, r->frames + REC_CHECK_AT);
    r->nframes = (uint32_t)(n > 0 ? n : 0);
    r->rt_ips = 1;
}

/* ---- clrscope-agg: what calibration learns ---- */

static struct place *place_of(uintptr_t x)
{
    for (uint32_t i = 0; i < walk.nplaces; i++)
        if (walk.places[i].x == x)
            return &walk.places[i];
    if (walk.nplaces >= MAX_PLACES) {
        prof_log_once(walk.places_full_logged, LOG_INFO, "stack walks: more than %d runtime "
                      "stubs and OSR call sites; the others keep the runtime's walk", MAX_PLACES);
        return NULL;
    }
    walk.places[walk.nplaces] = (struct place){.x = x, .off = 0, .published = INT32_MIN};
    __atomic_store_n(&walk.nplaces, walk.nplaces + 1, __ATOMIC_RELEASE);
    return &walk.places[walk.nplaces - 1];
}

/* One calibration's verdict for place x: the record is `off` bytes above the frame (0: nothing
 * hidden), or, with ok == 0, the runtime's walk showed a frame no record there explained. */
static void vote(uintptr_t x, int32_t off, int ok)
{
    struct place *p = place_of(x);
    if (!p)
        return;
    int unsure = p->published == PROF_SIG_HIDDEN_UNSURE;
    if (ok && (p->run == 0 || p->off == off)) {
        p->off = off;
        p->agree++;
        /* an unsure place (its samples keep being walked both ways) comes back after a longer
         * run of agreement, with a clean slate. Both kinds of verdict are checked where they are
         * used: an offset by the saved rbp found there, "nothing hidden" (0, only ever voted for
         * the leaf stub) by the absence of any word that could be a hidden record
         * (prof_sighandler's hidden_after) */
        if (++p->run >= (unsure ? RECOVER : VOTES) && p->published != off) {
            if (unsure) {
                p->agree = p->run;
                p->disagree = 0;
            }
            __atomic_store_n(&p->published, off, __ATOMIC_RELAXED);
            walk.places_dirty = 1;
            if (off)
                prof_log(LOG_DEBUG, "stack walks: the record behind %#lx is %d bytes above its "
                         "frame", (unsigned long)x, off);
            else
                prof_log(LOG_DEBUG, "stack walks: nothing is hidden behind %#lx (checked at each "
                         "walk)", (unsigned long)x);
        }
        return;
    }
    /* a disagreement: start over, and after too many, give the place up */
    p->run = 0;
    if (unsure)
        return;
    if (++p->disagree >= GIVE_UP && p->disagree * 10 > p->agree + p->disagree) {
        __atomic_store_n(&p->published, PROF_SIG_HIDDEN_UNSURE, __ATOMIC_RELAXED);
        walk.places_dirty = 1;
        prof_log(LOG_DEBUG, "stack walks: no record found behind %#lx; its samples keep the "
                 "runtime's walk", (unsigned long)x);
    }
}

/* codemap lock held */
static void publish_places(void)
{
    if (!walk.places_dirty)
        return;
    walk.places_dirty = 0;
    struct prof_sig_hidden *h = malloc((walk.nplaces ? walk.nplaces : 1) * sizeof *h);
    if (!h)
        return;
    size_t n = 0;
    for (uint32_t i = 0; i < walk.nplaces; i++)
        if (walk.places[i].published != INT32_MIN)
            h[n++] = (struct prof_sig_hidden){.ra = walk.places[i].x,
                                              .off = walk.places[i].published};
    prof_maps_set_hidden(h, n);
    free(h);
}

/* Compares the frame-pointer stack f (FunctionIDs; src[i] = the address each came from) with
 * the runtime's d, and votes: where the runtime shows one frame more, the probe (a record the
 * walk saw where the table is silent) that names it tells where that record lives. codemap lock
 * held (probe addresses are resolved). */
static void calibrate(const struct prof_rec *r, const uintptr_t *f, const int *src, int nf,
                      const uintptr_t *d, int nd)
{
    /* the leaf: the runtime stub the app's frames called. Only evidence counts: both walks
     * agree from the second frame on (the runtime leaves out frames of its own making, such as
     * generated request delegates, which makes other differences) */
    if (r->stub && (r->found & 1)) {
        /* the table placed the leaf: right if it is the runtime's */
        if (nf > 1 && nd > 1 && f[1] == d[1])
            vote(r->stub, r->stub_off, f[0] == d[0]);
    } else if (r->stub) {
        if (nf > 0 && nd > 0 && f[0] == d[0] && (nf < 2 || nd < 2 || f[1] == d[1])) {
            vote(r->stub, 0, 1); /* nothing hidden there */
        } else if (nf > 0 && nd > 1 && f[0] == d[1]) {
            /* the runtime shows one frame more: the probe that names it places the record. No
             * probe naming it is evidence against the place only when the code map could name
             * the probes (code it has not seen yet names nothing, and proves nothing) */
            int got = 0, named = 0;
            for (uint32_t i = 0; i < r->nprobes && i < REC_PROBES && !got; i++) {
                if (r->probes[i].step != 0 || r->probes[i].x != r->stub)
                    continue;
                uintptr_t fn = prof_codemap_function(r->probes[i].ra);
                named |= fn != 0;
                if (fn == d[0]) {
                    vote(r->stub, r->probes[i].off, 1);
                    got = 1;
                }
            }
            if (!got && named)
                vote(r->stub, 0, 0);
        }
    }
    /* further up: a frame the runtime shows between two of ours (OSR hides its caller); only
     * calibrating walks probed there */
    if (!r->calibrating)
        return;
    int i = 0, j = 0;
    if (nf > 0 && nd > 1 && f[0] != d[0] && f[0] == d[1])
        j = 1; /* the leaf, handled above */
    while (i < nf && j < nd) {
        if (f[i] == d[j]) {
            i++;
            j++;
            continue;
        }
        if (i == 0 || j + 1 >= nd || f[i] != d[j + 1])
            return; /* another kind of difference: nothing to learn from this one */
        uint32_t step = (uint32_t)src[i];
        int got = 0;
        for (uint32_t k = 0; k < r->nprobes && k < REC_PROBES && !got; k++)
            if (r->probes[k].step == step && prof_codemap_function(r->probes[k].ra) == d[j]) {
                vote(r->probes[k].x, r->probes[k].off, 1);
                got = 1;
            }
        if (!got)
            return;
        j++;
    }
}

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

void prof_walk_begin(void)
{
    prof_codemap_lock();
}

void prof_walk_end(void)
{
    prof_codemap_unlock();
}

/* Adds the frames of code the JIT inlined (inl[i]: the inlinee of frames[i], above it); the
 * outermost frames give way when REC_MAX_FRAMES would be passed. */
static void add_inlinees(struct prof_rec *r, const uintptr_t *inl)
{
    uint32_t n = r->nframes, extra = 0;
    for (uint32_t i = 0; i < n; i++)
        extra += inl[i] != 0;
    if (!extra)
        return;
    uintptr_t out[REC_MAX_FRAMES];
    uint32_t k = 0;
    for (uint32_t i = 0; i < n && k < REC_MAX_FRAMES; i++) {
        if (inl[i] && k + 1 < REC_MAX_FRAMES)
            out[k++] = inl[i];
        out[k++] = r->frames[i];
    }
    if (k < n + extra)
        r->truncated = 1;
    memcpy(r->frames, out, k * sizeof *out);
    r->nframes = k;
}

/* The runtime's walk with each frame's address (r->rt_ips): the frames of code the JIT inlined
 * added (every managed frame there returns into code it called: the runtime's event code is the
 * leaf). */
static void resolve_runtime_walk(struct prof_rec *r)
{
    uint32_t n = r->nframes < REC_MAX_FRAMES ? r->nframes : REC_MAX_FRAMES;
    const uintptr_t *ip = r->frames + REC_CHECK_AT;
    uintptr_t inl[REC_MAX_FRAMES];
    for (uint32_t i = 0; i < n; i++)
        inl[i] = r->frames[i] && ip[i] ? prof_codemap_inlinee(r->frames[i], ip[i],
                                                              i ? r->frames[i - 1] : 0)
                                       : 0;
    r->rt_ips = 0;
    add_inlinees(r, inl);
}

void prof_walk_resolve(struct prof_rec *r)
{
    if (r->rt_ips && !r->ips) {
        resolve_runtime_walk(r);
        return;
    }
    if (!r->ips)
        return;
    uint32_t n = r->nframes < REC_MAX_FRAMES ? r->nframes : REC_MAX_FRAMES;
    int src[REC_MAX_FRAMES];
    uintptr_t inl[REC_MAX_FRAMES];
    /* in place: the k-th FunctionID is written after the k-th address was read */
    int k = prof_codemap_returns(r->frames, (int)n, r->found, r->hops, r->frames, src,
                                 r->check ? NULL : inl);
    r->nframes = (uint32_t)(k > 0 ? k : 0);
    r->ips = 0;
    if (!r->check && k > 0)
        add_inlinees(r, inl);
    if (r->check) {
        uint32_t nb = r->check & 0x3fffffffu;
        int b_cut = (r->check & 0x80000000u) != 0;
        const uintptr_t *b = r->frames + REC_CHECK_AT;
        if (nb > REC_MAX_FRAMES)
            nb = REC_MAX_FRAMES;
        uintptr_t d[REC_MAX_FRAMES];
        uint32_t nd = 0;
        for (uint32_t i = 0; i < nb; i++) /* the runtime's, trailing native run dropped */
            d[nd++] = b[i];
        while (nd && !d[nd - 1])
            nd--;
        calibrate(r, r->frames, src, (int)r->nframes, d, (int)nd);
        publish_places();
        if (walk.mode == PROF_WALK_CHECK) {
            if (same_stack(r->frames, r->nframes, (int)r->truncated, b, nb, b_cut)) {
                __atomic_fetch_add(&walk.check_same, 1, __ATOMIC_RELAXED);
            } else {
                __atomic_fetch_add(&walk.check_differ, 1, __ATOMIC_RELAXED);
                /* the first 20, then one in 500: warm-up and steady state both show */
                if (prof_log_level() >= LOG_DEBUG &&
                    (walk.check_logged++ < 20 || walk.check_logged % 500 == 0))
                    log_difference(r->frames, r->nframes, b, nb);
            }
        }
        /* the profile takes the runtime's walk whenever it was taken */
        memmove(r->frames, b, nb * sizeof *b);
        r->nframes = nb;
        r->truncated = (uint32_t)b_cut;
        r->check = 0;
    }
    __atomic_fetch_add(&walk.resolved, n, __ATOMIC_RELAXED);
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
    out->mode = walk.mode;
    out->fp = __atomic_load_n(&walk.fp, __ATOMIC_RELAXED);
    out->runtime = __atomic_load_n(&walk.runtime, __ATOMIC_RELAXED);
    out->fallbacks = __atomic_load_n(&walk.fallbacks, __ATOMIC_RELAXED);
    out->unknown_stub = __atomic_load_n(&walk.unknown_stub, __ATOMIC_RELAXED);
    out->not_code = __atomic_load_n(&walk.not_code, __ATOMIC_RELAXED);
    out->calibrations = __atomic_load_n(&walk.calibrations, __ATOMIC_RELAXED);
    out->resolved = __atomic_load_n(&walk.resolved, __ATOMIC_RELAXED);
    out->check_same = __atomic_load_n(&walk.check_same, __ATOMIC_RELAXED);
    out->check_differ = __atomic_load_n(&walk.check_differ, __ATOMIC_RELAXED);
    uint32_t learned = 0, unsure = 0;
    for (uint32_t i = 0; i < __atomic_load_n(&walk.nplaces, __ATOMIC_ACQUIRE) && i < MAX_PLACES;
         i++) {
        int32_t p = __atomic_load_n(&walk.places[i].published, __ATOMIC_RELAXED);
        learned += p != INT32_MIN && p != PROF_SIG_HIDDEN_UNSURE;
        unsure += p == PROF_SIG_HIDDEN_UNSURE;
    }
    out->places_learned = learned;
    out->places_unsure = unsure;
}
