/*
 * prof_alloc.c - see prof_alloc.h.
 *
 * Method per runtime:
 *   .NET 10+  AllocationSampled (event 303, keyword 0x80000000000, Informational). Each thread
 *             samples bytes as Bernoulli trials with p = 1/102400; a sampled object of size s
 *             stands for 1/(1 - q^s) objects and s/(1 - q^s) bytes (q = 1 - p), the runtime design
 *             doc's "weighted" estimator, unbiased per type and per stack. Per second we also keep
 *             the sample count and u = sum(size - SampledByteOffset), from which the design doc's
 *             "failed trials" model gives a 95% interval for the total (prof_alloc_total_ci).
 *   .NET 8/9  GCAllocationTick (event 10, keyword GC, Verbose): one event about every 100 KB
 *             allocated per heap and kind; the object that crossed the threshold gets the whole
 *             AllocationAmount (bytes) and AllocationAmount / ObjectSize (count). Not random:
 *             periodic allocation patterns can bias the split by type. The total is the GC's own
 *             counter of bytes handed to allocation contexts.
 *   CLRSCOPE_ALLOC_METHOD=tick forces GCAllocationTick on .NET 10 too (for comparisons).
 *
 * Stack-walk budget: walking the allocating thread's stack is the dear part of a sample (with
 * the live-object tracking and the naming of its frames on clrscope-agg that follow), so at
 * most about CLRSCOPE_ALLOC_STACKS_PER_S samples a second are walked. Sample i of a second is
 * walked with probability p_i = min(1, budget / max(samples last second, samples so far this
 * second)), fixed before its coin is flipped, and a walked sample stands for 1/p_i samples in
 * the stacks (Horvitz-Thompson): every per-stack figure stays unbiased, only noisier. A surge
 * walks at most budget * (1 + ln(surge / budget)) stacks in its first second. The table by type
 * (PK_ALLOC_TYPE) counts every sample at its own weight, walked or not: the event names the type
 * anyway, and a left-out sample costs only its ring record.
 *
 * The exact total the estimate is checked against is not ours: it is the runtime's
 * GC.GetTotalAllocatedBytes, delivered once a second by the System.Runtime alloc-rate counter
 * (prof_counters). GCAllocationTick amounts could not serve: on .NET 8/9 they are the estimate
 * itself, and .NET 10 does not deliver GCAllocationTick to a session that also enables
 * AllocationSampled (observed on 10.0.12).
 */
#include "prof_agg.h"
#include "prof_alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_esamp.h"
#include "prof_live.h"
#include "prof_store.h"
#include "prof_typename.h"
#include "prof_walk.h"

#define KW_GC 0x1ull
#define KW_ALLOCATION_SAMPLING 0x80000000000ull
#define SAMPLING_P (1.0 / 102400.0)

/* Per-second counters: (second & 0xffffff) << 40 | value, updated lock-free by the callbacks. */
#define SEC_TAG_BITS 24
#define SEC_VALUE_BITS 40
#define SEC_VALUE_MASK ((1ull << SEC_VALUE_BITS) - 1)
#define SEC_TAG_MASK ((1ull << SEC_TAG_BITS) - 1)

/* The module's state. `method` and the per-second arrays are set at Initialize
 * (prof_alloc_session_needs), before the session delivers any event; everything else is written
 * by the allocating threads in the event callback, lock-free, and read by any thread. */
static struct alloc_state {
    int method; /* enum prof_alloc_method */
    /* AllocationSampled, per second (their slots: atomic): samples, and the sums the interval
     * needs weighed as the totals weigh them, by the governor's scale w when each came: sum(w)
     * and sum(w^2) in thousandths, sum(w (size - offset)) (prof_alloc_total_ci) */
    uint64_t *sec_samples, *sec_w, *sec_w2, *sec_wu;
    /* the share of each second the allocation events were on, and the share planned for it,
     * in millionths, set by the governor (prof_alloc_note_coverage); a second without a slot
     * was fully on */
    uint64_t *sec_on, *sec_plan;
    int64_t last_noted; /* atomic: the newest second noted there (0: none) */
    uint32_t nsec;
    /* atomic: the weight every sample gets on top of its own, 1 / the share of time the
     * governor keeps the allocation events on (prof_alloc_set_scale); a double's bits */
    uint64_t scale_bits;
    uint64_t samples, dropped, tick_events; /* atomic */
    /* The stack-walk budget (all atomic; see the top of the file). */
    struct {
        int64_t period;              /* the monotonic second being counted */
        uint32_t seen, prev_seen;    /* samples this second, in the previous one */
        uint64_t coin;               /* counter feeding the coin flips */
        uint64_t walked, thinned;    /* samples walked, samples left out, since start */
    } walks;
} alloc;

void prof_alloc_session_needs(UINT64 *keywords, UINT32 *level)
{
    *keywords = 0;
    *level = EP_LEVEL_INFORMATIONAL;
    const char *force = getenv("CLRSCOPE_ALLOC_METHOD"); /* auto (default), tick, sampled */
    int want_tick = force && !strcmp(force, "tick");
    if (g_core.runtime_major >= 10 && !want_tick) {
        alloc.method = ALLOC_METHOD_SAMPLED;
        *keywords = KW_ALLOCATION_SAMPLING;
        if (!alloc.sec_samples) {
            alloc.nsec = (uint32_t)g_cfg.history_s + 16;
            alloc.sec_samples = calloc(alloc.nsec, sizeof *alloc.sec_samples);
            alloc.sec_on = calloc(alloc.nsec, sizeof *alloc.sec_on);
            alloc.sec_plan = calloc(alloc.nsec, sizeof *alloc.sec_plan);
            alloc.sec_w = calloc(alloc.nsec, sizeof *alloc.sec_w);
            alloc.sec_w2 = calloc(alloc.nsec, sizeof *alloc.sec_w2);
            alloc.sec_wu = calloc(alloc.nsec, sizeof *alloc.sec_wu);
            if (!alloc.sec_samples || !alloc.sec_on || !alloc.sec_plan || !alloc.sec_w ||
                !alloc.sec_w2 || !alloc.sec_wu) {
                free(alloc.sec_samples);
                free(alloc.sec_on);
                free(alloc.sec_plan);
                free(alloc.sec_w);
                free(alloc.sec_w2);
                free(alloc.sec_wu);
                alloc.sec_samples = alloc.sec_on = alloc.sec_plan = NULL; /* no interval */
                alloc.sec_w = alloc.sec_w2 = alloc.sec_wu = NULL;
            }
        }
        if (alloc.sec_on) {
            prof_store_set_scale(PK_ALLOC, 3, prof_alloc_second_factor);
            prof_store_set_scale(PK_ALLOC_TYPE, 3, prof_alloc_second_factor);
            prof_live_set_factor(prof_alloc_second_factor_settled);
        }
    } else {
        alloc.method = ALLOC_METHOD_TICK;
        *keywords = KW_GC;
        *level = EP_LEVEL_VERBOSE; /* GCAllocationTick is a Verbose event */
    }
}

/* ---- payload reading (unaligned, bounded) ---- */

static int rd_u32(const BYTE *d, ULONG len, size_t off, uint32_t *v)
{
    if (off + 4 > len)
        return -1;
    memcpy(v, d + off, 4);
    return 0;
}

static int rd_u64(const BYTE *d, ULONG len, size_t off, uint64_t *v)
{
    if (off + 8 > len)
        return -1;
    memcpy(v, d + off, 8);
    return 0;
}

/* Converts the UTF-16LE, NUL-terminated field at d[off] into bounded UTF-8. Returns the offset
 * just past the terminator, or 0 when the field is not terminated inside the payload. */
static size_t rd_utf16z(const BYTE *d, ULONG len, size_t off, char *out, size_t cap)
{
    size_t j = 0;
    while (off + 2 <= len) {
        uint32_t c = (uint32_t)d[off] | (uint32_t)d[off + 1] << 8;
        off += 2;
        if (!c) {
            out[j < cap ? j : cap - 1] = 0;
            return off;
        }
        if (c >= 0xD800 && c <= 0xDBFF && off + 2 <= len) {
            uint32_t lo = (uint32_t)d[off] | (uint32_t)d[off + 1] << 8;
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                off += 2;
            }
        }
        char b[4];
        size_t n;
        if (c < 0x80) {
            b[0] = (char)c;
            n = 1;
        } else if (c < 0x800) {
            b[0] = (char)(0xC0 | c >> 6);
            b[1] = (char)(0x80 | (c & 0x3F));
            n = 2;
        } else if (c < 0x10000) {
            b[0] = (char)(0xE0 | c >> 12);
            b[1] = (char)(0x80 | ((c >> 6) & 0x3F));
            b[2] = (char)(0x80 | (c & 0x3F));
            n = 3;
        } else {
            b[0] = (char)(0xF0 | c >> 18);
            b[1] = (char)(0x80 | ((c >> 12) & 0x3F));
            b[2] = (char)(0x80 | ((c >> 6) & 0x3F));
            b[3] = (char)(0x80 | (c & 0x3F));
            n = 4;
        }
        if (j + n < cap) {
            memcpy(out + j, b, n);
            j += n;
        }
    }
    out[j < cap ? j : cap - 1] = 0;
    return 0;
}

/* ---- per-second counters (AllocationSampled) ---- */

static void sec_add(uint64_t *arr, uint64_t value, double t_unix)
{
    if (!arr)
        return;
    uint64_t sec = (uint64_t)t_unix;
    uint64_t *slot = &arr[sec % alloc.nsec];
    uint64_t tag = (sec & SEC_TAG_MASK) << SEC_VALUE_BITS;
    uint64_t old = __atomic_load_n(slot, __ATOMIC_RELAXED), want;
    do {
        uint64_t have = (old & ~SEC_VALUE_MASK) == tag ? old & SEC_VALUE_MASK : 0;
        uint64_t sum = have + value;
        want = tag | (sum > SEC_VALUE_MASK ? SEC_VALUE_MASK : sum);
    } while (!__atomic_compare_exchange_n(slot, &old, want, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
}

static uint64_t sec_sum(const uint64_t *arr, int64_t from_s, int64_t to_s)
{
    uint64_t sum = 0;
    if (to_s - from_s >= (int64_t)alloc.nsec)
        from_s = to_s - (int64_t)alloc.nsec + 1;
    for (int64_t s = from_s; s <= to_s; s++) {
        uint64_t v = __atomic_load_n(&arr[(uint64_t)s % alloc.nsec], __ATOMIC_RELAXED);
        if ((v >> SEC_VALUE_BITS) == ((uint64_t)s & SEC_TAG_MASK))
            sum += v & SEC_VALUE_MASK;
    }
    return sum;
}

static double current_scale(void)
{
    uint64_t bits = __atomic_load_n(&alloc.scale_bits, __ATOMIC_RELAXED);
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return scale >= 1 ? scale : 1; /* 0 bits (never set) read as 0.0 */
}

/* The share of from_s..to_s the allocation events were on (1 without a governor). */
static double coverage(int64_t from_s, int64_t to_s)
{
    if (!alloc.sec_on || to_s < from_s)
        return 1;
    if (to_s - from_s >= (int64_t)alloc.nsec)
        from_s = to_s - (int64_t)alloc.nsec + 1;
    /* seconds not noted yet (the current one) count at the share they are planned at;
     * older ones without a note were fully on (no governor then) */
    int64_t noted = __atomic_load_n(&alloc.last_noted, __ATOMIC_RELAXED);
    double on = 0;
    for (int64_t s = from_s; s <= to_s; s++) {
        uint64_t v = __atomic_load_n(&alloc.sec_on[(uint64_t)s % alloc.nsec], __ATOMIC_RELAXED);
        if ((v >> SEC_VALUE_BITS) == ((uint64_t)s & SEC_TAG_MASK))
            on += (double)(v & SEC_VALUE_MASK) / 1e6;
        else
            on += noted && s > noted ? 1 / current_scale() : 1.0;
    }
    return on / (double)(to_s - from_s + 1);
}

static uint64_t sec_tagged(int64_t sec, double share)
{
    double f = share < 0 ? 0 : share > 1 ? 1 : share;
    return ((uint64_t)sec & SEC_TAG_MASK) << SEC_VALUE_BITS | (uint64_t)llround(f * 1e6);
}

/* The millionths noted for second s in arr, or -1. */
static int64_t sec_noted(const uint64_t *arr, int64_t s)
{
    uint64_t v = __atomic_load_n(&arr[(uint64_t)s % alloc.nsec], __ATOMIC_RELAXED);
    return (v >> SEC_VALUE_BITS) == ((uint64_t)s & SEC_TAG_MASK) ? (int64_t)(v & SEC_VALUE_MASK)
                                                                 : -1;
}

void prof_alloc_note_coverage(int64_t sec, double on_fraction, double planned)
{
    if (!alloc.sec_on || sec < 0)
        return;
    __atomic_store_n(&alloc.sec_plan[(uint64_t)sec % alloc.nsec], sec_tagged(sec, planned),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&alloc.sec_on[(uint64_t)sec % alloc.nsec], sec_tagged(sec, on_fraction),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&alloc.last_noted, sec, __ATOMIC_RELAXED);
}

double prof_alloc_second_factor(int64_t sec)
{
    if (!alloc.sec_on || sec < 0)
        return 1;
    int64_t plan = sec_noted(alloc.sec_plan, sec), on = sec_noted(alloc.sec_on, sec);
    if (plan <= 0 || on <= 0 || plan >= 1000000)
        return 1; /* unknown, nothing flowed (no samples to weigh), or not governed */
    double f = (double)plan / (double)on;
    return f < 0.02 ? 0.02 : f > 50 ? 50 : f;
}

int prof_alloc_second_factor_settled(int64_t sec, double *factor)
{
    *factor = prof_alloc_second_factor(sec);
    int64_t last = __atomic_load_n(&alloc.last_noted, __ATOMIC_RELAXED);
    return alloc.sec_on && last > 0 && sec <= last;
}

double prof_alloc_coverage(int64_t from_s, int64_t to_s)
{
    return coverage(from_s, to_s);
}

void prof_alloc_set_scale(double scale)
{
    if (!(scale >= 1))
        scale = 1;
    uint64_t bits;
    memcpy(&bits, &scale, sizeof bits);
    __atomic_store_n(&alloc.scale_bits, bits, __ATOMIC_RELAXED);
}

/* The parts of the total's interval over [from_s, to_s] (see prof_alloc_total_ci): the weighted
 * failed trials' mean and the bytes past the sampled ones (wu), the sampling's variance, and the
 * spread of the governed seconds' estimates with the neighbour pairs behind it (0: none). */
struct total_parts {
    double mean, wu, var, spread;
    int pairs;
    uint64_t samples;
};

static int total_parts(int64_t from_s, int64_t to_s, struct total_parts *tp)
{
    if (alloc.method != ALLOC_METHOD_SAMPLED || !alloc.sec_samples)
        return -1;
    memset(tp, 0, sizeof *tp);
    tp->samples = sec_sum(alloc.sec_samples, from_s, to_s);
    double q = 1 - SAMPLING_P;
    double w = 0, w2 = 0, prev = 0, d2 = 0;
    int governed = 0, prev_governed = 0;
    if (to_s - from_s >= (int64_t)alloc.nsec)
        from_s = to_s - (int64_t)alloc.nsec + 1;
    for (int64_t sec = from_s; sec <= to_s; sec++) { /* each second at its measured share */
        double f = prof_alloc_second_factor(sec);
        double sw = f * (double)sec_sum(alloc.sec_w, sec, sec) / 1000.0;
        double swu = f * (double)sec_sum(alloc.sec_wu, sec, sec);
        w += sw;
        w2 += f * f * (double)sec_sum(alloc.sec_w2, sec, sec) / 1000.0;
        tp->wu += swu;
        int64_t plan = sec_noted(alloc.sec_plan, sec);
        int is_governed = plan > 0 && plan < 1000000;
        double x = sw * q / SAMPLING_P + swu;
        if (is_governed) {
            governed++;
            if (prev_governed) {
                d2 += (x - prev) * (x - prev);
                tp->pairs++;
            }
        }
        prev = x;
        prev_governed = is_governed;
    }
    tp->mean = w * q / SAMPLING_P;
    tp->var = w2 * q / (SAMPLING_P * SAMPLING_P);
    if (governed >= 3 && tp->pairs >= 2)
        tp->spread = governed * d2 / (2.0 * tp->pairs);
    else
        tp->pairs = 0;
    return 0;
}

/* Each sample ends a run of failed trials ~ Geometric(p): mean q/p, variance q/p^2; the total
 * weighs sample i's run and its bytes past the sampled one (u_i) by the weight w_i the governor
 * gave it (1 / the share of time the events were on when it came, as measured once its second
 * ended: prof_alloc_second_factor), so the total is sum w_i (failures_i + u_i): mean
 * q/p sum w + sum w u, sd sqrt(q sum w^2)/p, normal approximation (within ~0.01 of the exact
 * quantiles from 30 samples on).
 *
 * That is the sampling's error alone. A governed second saw only the part of it the events were
 * on, and an app that allocates in bursts allocates more in some parts than in others: the
 * second's estimate errs by which part was seen, beyond the samples' count. The spread of
 * neighbouring governed seconds' estimates measures both errors together (half the mean squared
 * difference of neighbours, so that a rate that drifts over the window is not taken for error;
 * a rate that truly changes from second to second is, which widens the interval rather than
 * narrows it): n governed seconds add n times that spread, and the interval takes the larger of
 * the two variances, the spread's with Student's t for its neighbour pairs (Cornish-Fisher's
 * first term). Returns the half-width over the sampling's own (>= 1) through *widened. */
static void total_interval(const struct total_parts *tp, double *lo, double *hi, double *widened)
{
    double var = tp->var, z = 1.96;
    if (tp->pairs && tp->spread > var) {
        var = tp->spread;
        z = 1.96 + 2.37 / tp->pairs;
    }
    double sd = sqrt(var);
    *lo = (tp->mean - z * sd > 0 ? tp->mean - z * sd : 0) + tp->wu;
    *hi = tp->mean + z * sd + tp->wu;
    *widened = tp->var > 0 ? z * sd / (1.96 * sqrt(tp->var)) : 1;
}

int prof_alloc_total_ci(int64_t from_s, int64_t to_s, double *lo, double *hi, uint64_t *samples)
{
    struct total_parts tp;
    double widened;
    if (total_parts(from_s, to_s, &tp))
        return -1;
    total_interval(&tp, lo, hi, &widened);
    *samples = tp.samples;
    return 0;
}

double prof_alloc_time_widening(int64_t from_s, int64_t to_s)
{
    struct total_parts tp;
    double lo, hi, widened;
    if (total_parts(from_s, to_s, &tp))
        return 1;
    total_interval(&tp, &lo, &hi, &widened);
    return widened > 1 ? widened : 1;
}

/* ---- samples ---- */

/* The probability of walking this sample (1 under the budget); see the top of the file. The
 * second is the monotonic clock's: with the wall clock's, a step back (NTP, a VM restored) kept
 * counting into one window for the length of the step, and the walks fell towards none. */
static double walk_probability(void)
{
    int64_t sec = prof_now_ns() / 1000000000LL;
    int64_t cur = __atomic_load_n(&alloc.walks.period, __ATOMIC_ACQUIRE);
    if (sec > cur && __atomic_compare_exchange_n(&alloc.walks.period, &cur, sec, 0,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        uint32_t last = __atomic_exchange_n(&alloc.walks.seen, 0, __ATOMIC_ACQ_REL);
        __atomic_store_n(&alloc.walks.prev_seen, sec == cur + 1 ? last : 0, __ATOMIC_RELEASE);
    }
    uint32_t seen = __atomic_add_fetch(&alloc.walks.seen, 1, __ATOMIC_ACQ_REL);
    uint32_t prev = __atomic_load_n(&alloc.walks.prev_seen, __ATOMIC_ACQUIRE);
    uint32_t load = prev > seen ? prev : seen;
    uint32_t budget = (uint32_t)g_cfg.alloc_stack_rate;
    return load <= budget ? 1.0 : (double)budget / (double)load;
}

/* Runs on the allocating thread: everything here is bounded and lock-free. `u` (AllocationSampled:
 * the object's bytes from the sampled one on; 0: none) and the weight ride in the record to
 * clrscope-agg, which adds them to the per-second sums of prof_alloc_total_ci as it adds the
 * sample's row to the store (add_type_row), so that the interval describes the samples the
 * totals are made of: a sample dropped for a full ring is in neither, and one still in the ring
 * when a reader asks is in neither yet. */
static void take_sample(uint64_t type_id, const BYTE *d, ULONG len, size_t name_off,
                        uint64_t size, int kind, uintptr_t address, double count_w,
                        double bytes_w, double t_unix, double scale, uint64_t u)
{
    struct prof_ring *ring = prof_agg_ring();
    if (!ring)
        return;
    count_w *= scale;
    bytes_w *= scale;
    /* alloc.samples is counted next to the walked/thinned/dropped counter of the sample, so
     * that a reader of the stats (any thread) finds them apart only for an instant */
    double p = walk_probability();
    int walk = 1;
    if (p < 1) {
        uint64_t z = esamp_mix(__atomic_fetch_add(&alloc.walks.coin, 1, __ATOMIC_RELAXED) +
                               0x9E3779B97F4A7C15ull);
        walk = (double)(z >> 11) * 0x1.0p-53 < p;
    }
    if (!walk && !(g_core.profiles & PROFILE_ALLOC)) { /* live objects alone: nothing to add */
        __atomic_fetch_add(&alloc.walks.thinned, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&alloc.samples, 1, __ATOMIC_RELAXED);
        return;
    }
    struct prof_rec *r = prof_ring_reserve(ring);
    if (!r) {
        __atomic_fetch_add(&alloc.dropped, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&alloc.samples, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_fetch_add(walk ? &alloc.walks.walked : &alloc.walks.thinned, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&alloc.samples, 1, __ATOMIC_RELAXED);
    r->wscale = scale;
    r->wu = u;
    r->kind = walk ? REC_ALLOC : REC_ALLOC_TYPE;
    r->a = type_id;
    r->b = size;
    r->c = (uint64_t)llround(walk ? bytes_w / p : bytes_w); /* a walk means p > 0 */
    r->d = 0;
    r->x = walk ? count_w / p : count_w;
    r->wcount = count_w;
    r->wbytes = bytes_w;
    r->t_unix = t_unix;
    r->os_tid = prof_self_tid();
    if (!rd_utf16z(d, len, name_off, r->text, sizeof r->text))
        r->text[0] = 0;
    if (!walk) { /* the type table's row only: no stack, no live tracking */
        r->nframes = 0;
        r->truncated = 0;
        prof_ring_commit(ring, r);
        return;
    }
    prof_walk_fast(r);
    count_w /= p;
    bytes_w /= p;
    if (address && (g_core.profiles & PROFILE_LIVE)) {
        uint32_t seq = 0;
        int slot = prof_live_track(address, size, kind, count_w, bytes_w, t_unix, &seq);
        if (slot >= 0) {
            r->kind = REC_LIVE;
            r->d = ((uint64_t)(uint32_t)slot + 1) | (uint64_t)seq << 32;
        }
    }
    prof_ring_commit(ring, r);
}

/* AllocationSampled: Kind u32 @0, ClrInstanceID u16 @4, TypeID ptr @6, TypeName utf16z @14,
 * then Address ptr, ObjectSize u64, SampledByteOffset u64. */
static void on_sampled(const BYTE *d, ULONG len)
{
    uint32_t kind;
    uint64_t type_id, address = 0, size = 0, offset = 0;
    char skip[8];
    if (rd_u32(d, len, 0, &kind) || rd_u64(d, len, 6, &type_id))
        return;
    size_t after = rd_utf16z(d, len, 14, skip, sizeof skip);
    if (!after || rd_u64(d, len, after, &address) || rd_u64(d, len, after + 8, &size) || !size)
        return;
    (void)rd_u64(d, len, after + 16, &offset);
    /* P(sampled) = 1 - q^size; weight = 1 / P. -expm1(size * log1p(-p)) keeps precision. */
    double prob = -expm1((double)size * log1p(-SAMPLING_P));
    if (!(prob > 0))
        return;
    double count_w = 1.0 / prob, now = prof_unix_now(), scale = current_scale();
    uint64_t u = offset < size ? size - offset : 1;
    take_sample(type_id, d, len, 14, size, (int)kind, (uintptr_t)address, count_w,
                (double)size * count_w, now, scale, u);
}

/* GCAllocationTick: Amount u32 @0, Kind u32 @4, ClrInstanceID u16 @8; V2+: Amount64 u64 @10,
 * TypeID ptr @18, TypeName utf16z @26, HeapIndex u32; V3+: Address ptr; V4+: ObjectSize u64. */
static void on_tick(DWORD version, const BYTE *d, ULONG len)
{
    uint32_t amount32, kind;
    uint64_t amount = 0, type_id = 0, address = 0, size = 0;
    if (rd_u32(d, len, 0, &amount32) || rd_u32(d, len, 4, &kind))
        return;
    amount = amount32;
    if (version >= 2 && rd_u64(d, len, 10, &amount))
        return;
    double now = prof_unix_now();
    __atomic_fetch_add(&alloc.tick_events, 1, __ATOMIC_RELAXED);
    if (alloc.method != ALLOC_METHOD_TICK || version < 2 || rd_u64(d, len, 18, &type_id))
        return;
    char skip[8];
    size_t after = rd_utf16z(d, len, 26, skip, sizeof skip);
    if (!after)
        return;
    if (version >= 3)
        (void)rd_u64(d, len, after + 4, &address);
    if (version >= 4)
        (void)rd_u64(d, len, after + 12, &size);
    double count_w = size ? (double)amount / (double)size : 1.0;
    if (count_w < 1)
        count_w = 1;
    take_sample(type_id, d, len, 26, size, (int)kind, (uintptr_t)address, count_w,
                (double)amount, now, current_scale(), 0);
}

void prof_alloc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len)
{
    if (!(g_core.profiles & (PROFILE_ALLOC | PROFILE_LIVE)))
        return;
    if (id == 303 && alloc.method == ALLOC_METHOD_SAMPLED)
        on_sampled(data, len);
    else if (id == 10 && alloc.method != ALLOC_METHOD_NONE)
        on_tick(version, data, len);
}

/* ---- clrscope-agg side ---- */

/* A sample's count weight as a whole number that is right on average: 1.17 (an object of
 * 200 KB) is 2 in 17 % of samples and 1 otherwise. Rounding to nearest made every such object
 * count once, 14 % too few, while its bytes were right. */
static int64_t count_units(double w)
{
    static PROF_TLS uint64_t seq;
    if (!(w > 0))
        return 0;
    if (w >= (double)PROF_VALUE_MAX) /* garbage in a payload; the store clamps there anyway */
        return PROF_VALUE_MAX;
    double whole = floor(w);
    double frac = w - whole;
    if (frac > 0) {
        uint64_t z = esamp_mix(++seq + (uint64_t)prof_self_tid() * 0x9E3779B97F4A7C15ull);
        if ((double)(z >> 11) * 0x1.0p-53 < frac)
            whole += 1;
    }
    return (int64_t)whole;
}

/* The table by type's row of a sample, walked or not, at its own weight (no stack, no thread). */
static void add_type_row(const struct prof_rec *rec, const char *label)
{
    if (rec->wu) { /* with the row: the total's interval (prof_alloc_total_ci) */
        sec_add(alloc.sec_samples, 1, rec->t_unix);
        sec_add(alloc.sec_w, (uint64_t)llround(rec->wscale * 1000.0), rec->t_unix);
        sec_add(alloc.sec_w2, (uint64_t)llround(rec->wscale * rec->wscale * 1000.0),
                rec->t_unix);
        sec_add(alloc.sec_wu, (uint64_t)llround(rec->wscale * (double)rec->wu), rec->t_unix);
    }
    double bytes = rec->wbytes < (double)PROF_VALUE_MAX ? rec->wbytes : (double)PROF_VALUE_MAX;
    int64_t v[PROF_NVALUES] = {count_units(rec->wcount), bytes > 0 ? (int64_t)llround(bytes) : 0, 1};
    prof_store_add(PK_ALLOC_TYPE, rec->t_unix, NULL, 0, 0, label, v);
}

void prof_alloc_consume(const struct prof_rec *rec, const char **names, int n)
{
    if (!(g_core.profiles & PROFILE_ALLOC))
        return;
    const char *label = prof_typename_of(rec->a, rec->text);
    int64_t v[PROF_NVALUES] = {count_units(rec->x), (int64_t)rec->c, 1};
    prof_store_add(PK_ALLOC, rec->t_unix, names, n, rec->os_tid, label, v);
    add_type_row(rec, label);
}

void prof_alloc_consume_type(const struct prof_rec *rec)
{
    if (g_core.profiles & PROFILE_ALLOC)
        add_type_row(rec, prof_typename_of(rec->a, rec->text));
}

void prof_alloc_get_stats(struct prof_alloc_stats *out)
{
    out->method = alloc.method;
    out->samples = __atomic_load_n(&alloc.samples, __ATOMIC_RELAXED);
    out->dropped = __atomic_load_n(&alloc.dropped, __ATOMIC_RELAXED);
    out->tick_events = __atomic_load_n(&alloc.tick_events, __ATOMIC_RELAXED);
    out->walked = __atomic_load_n(&alloc.walks.walked, __ATOMIC_RELAXED);
    out->thinned = __atomic_load_n(&alloc.walks.thinned, __ATOMIC_RELAXED);
}

const char *prof_alloc_bias_note(void)
{
    switch (alloc.method) {
    case ALLOC_METHOD_SAMPLED:
        return "AllocationSampled: every allocated byte is a Bernoulli trial with p = 1/102400 on "
               "its thread; a sampled object of s bytes stands for 1/(1-q^s) objects and "
               "s/(1-q^s) bytes (q = 1-p). Unbiased per type and per stack; the relative error "
               "of a figure built from k samples is roughly 1/sqrt(k).";
    case ALLOC_METHOD_TICK:
        return "GCAllocationTick (.NET 8/9): one event about every 100 KB allocated per heap and "
               "kind, charged in full to the object that crossed the threshold (count = amount / "
               "object size). The total is the runtime's own counter, but the split by type and "
               "stack is not a random sample: allocation patterns that repeat in step with the "
               "100 KB stride, and types allocated in large batches, can be over- or "
               "under-represented.";
    default:
        return "allocation sampling is off";
    }
}

static void alloc_consume(const struct prof_rec *rec, const char **names, int n)
{
    if (rec->kind == REC_ALLOC_TYPE) {
        prof_alloc_consume_type(rec);
        return;
    }
    prof_alloc_consume(rec, names, n);
    if (rec->kind == REC_LIVE) /* a sample whose object prof_live tracks: the rest is its */
        prof_live_consume(rec, names, n);
}

const struct prof_kind prof_alloc_kind = {
    .name = "alloc",
    .profile = PROFILE_ALLOC,
    .records = 1u << REC_ALLOC | 1u << REC_LIVE,
    .bare = 1u << REC_ALLOC_TYPE,
    .consume = alloc_consume,
};
