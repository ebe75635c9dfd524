/*
 * prof_sampler_wall.c - the stop-the-world walk: with the runtime suspended, every managed
 * thread's stack by DoStackSnapshot into preallocated buffers (and its CPU clock, and for thread
 * dumps the lock it waits for); after the resume, a tick's samples named and recorded, wall time
 * weighed by the time since the previous tick, CPU time by what each thread's clock says it
 * burned since (the CPU sampler CLRSCOPE_CPU_SAMPLER=suspend). The clrscope-sampler thread only.
 *
 * Threads that have not run since their stack was walked are not walked again: a wall tick reads
 * every managed thread's CPU clock first (sampler_wall_prepare), records the kept stack of each
 * thread whose clock has not moved, and suspends the runtime only when one has, to walk those
 * (sampler_capture_all with use_cache). An idle process (threads blocked in waits, sleeps and
 * I/O) costs a clock read per thread and tick, and is never stopped. (The stop-the-world CPU
 * sampler walks every thread at every tick, for their CPU.)
 *
 * A thread that has not moved for QUIET_AFTER ticks (5 s at 5 Hz: blocked for good, like most
 * of an idle service's) costs less still: its clock is read at one tick in QUIET_EVERY (the
 * threads staggered over them) and its kept stack is stored as often, with the wall time of the
 * ticks in between. What that costs in accuracy: when such a thread starts to run, the up to
 * QUIET_EVERY - 1 ticks since its last read go to the stack it had (at 5 Hz, ticks 0.1-0.3 s
 * apart: up to 1.2 s of its wall time, once per wake-up after 5 s asleep); totals unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include "clr_abi.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_lock.h"
#include "prof_codemap.h"
#include "prof_maps.h"
#include "prof_sampler_int.h"
#include "prof_sighandler.h"
#include "prof_sigsample.h"
#include "prof_store.h"
#include "prof_symbols.h"
#include "prof_threads.h"
#include "prof_unload.h"

#define QUIET_AFTER 25
#define QUIET_EVERY 5

struct walk {
    struct frame *frames; /* max_frames entries */
    int n, max, truncated;
};

static HRESULT snapshot_cb(FunctionID fn, UINT_PTR ip, UINT_PTR frame_info, ULONG32 ctx_size,
                           BYTE *ctx, void *data)
{
    (void)frame_info;
    (void)ctx_size;
    (void)ctx;
    struct walk *w = data;
    if (w->n >= w->max) {
        w->truncated = 1;
        return E_FAIL; /* abort the walk; keep what we have (the leaf side) */
    }
    if (!fn && w->n > 0 && !w->frames[w->n - 1].fn)
        return S_OK; /* fold runs of native frames */
    w->frames[w->n].fn = fn;
    w->frames[w->n].ip = ip;
    w->n++;
    return S_OK;
}

int sampler_ensure_capacity(int threads)
{
    if (threads <= sampler.cap_threads)
        return 0;
    int nc = sampler.cap_threads ? sampler.cap_threads : 64;
    while (nc < threads)
        nc *= 2;
    if (nc > g_cfg.max_threads)
        nc = g_cfg.max_threads;
    struct captured *c = realloc(sampler.caps, (size_t)nc * sizeof *c);
    if (!c)
        return -1;
    sampler.caps = c;
    struct frame *f = realloc(sampler.frames, (size_t)nc * (size_t)g_cfg.max_frames * sizeof *f);
    if (!f)
        return -1;
    sampler.frames = f;
    sampler.cap_threads = nc;
    return 0;
}

static struct cpu_seen *seen_slot(uint32_t tid)
{
    uint32_t mask = sampler.nseen - 1;
    for (uint32_t i = (tid * 2654435761u) & mask, k = 0; k < sampler.nseen; i = (i + 1) & mask, k++)
        if (sampler.seen[i].tid == tid || sampler.seen[i].tid == 0)
            return &sampler.seen[i];
    return NULL;
}

/* tid's entry, taken (empty: no CPU seen, no stack) when it had none; NULL when the table is
 * full. */
static struct cpu_seen *seen_take(uint32_t tid)
{
    struct cpu_seen *s = seen_slot(tid);
    if (s && s->tid != tid) {
        free(s->stack); /* (a free slot holds none; see sampler_seen_sweep) */
        *s = (struct cpu_seen){.tid = tid, .cpu_ns = -1, .stack_cpu = -1, .now_cpu = -1};
    }
    return s;
}

/* tid's entry, or NULL. */
static struct cpu_seen *seen_find(uint32_t tid)
{
    struct cpu_seen *s = seen_slot(tid);
    return s && s->tid == tid ? s : NULL;
}

/* Stores the ticks a quiet thread's kept stack was not stored at (see the top), at the middle of
 * the time they stand for: stored at its end, up to a second of wall time moved forward, so a
 * window that ended in the past lost that much at its end and got nothing back at its start
 * where the thread was not quiet yet (blocked threads read 0.93 of their time in a window
 * starting 3 s after them, 0.81 on a loaded machine, whose ticks come further apart). */
static void flush_quiet(struct cpu_seen *s, double now_unix)
{
    if (s->quiet_n > 0 && s->k > 0 && (g_core.profiles & PROFILE_WALL)) {
        int64_t v[PROF_NVALUES] = {s->quiet_n, s->quiet_ns, 0};
        double at = s->quiet_n > 1 ? now_unix - (double)s->quiet_ns / 2e9 : now_unix;
        prof_store_add(PK_WALL, at, s->stack, s->k, s->tid, NULL, v);
    }
    s->quiet_n = 0;
    s->quiet_ns = 0;
}

/* The tick at which a quiet thread's clock is read and its ticks stored: the threads staggered
 * over QUIET_EVERY ticks, so that a window's edges cut each thread's pending ticks at another
 * place (stored all at one tick, every thread's would be in or out of a window together). */
static int quiet_visit(uint32_t tid)
{
    return (sampler.prep + tid) % QUIET_EVERY == 0;
}

/* Records a wall tick of a thread that has not run since its stack was kept: at once, or for a
 * quiet thread at its visits, with the ticks in between. */
static void record_kept(struct cpu_seen *s, double now_unix, int64_t wall_ns)
{
    if (!(g_core.profiles & PROFILE_WALL) || s->k <= 0)
        return;
    s->quiet_n++;
    s->quiet_ns += wall_ns;
    if (s->quiet < QUIET_AFTER || quiet_visit(s->tid) || s->quiet_n >= QUIET_EVERY)
        flush_quiet(s, now_unix);
}

void sampler_flush_quiet(void)
{
    double now = prof_unix_now();
    for (uint32_t i = 0; i < sampler.nseen; i++)
        if (sampler.seen[i].tid)
            flush_quiet(&sampler.seen[i], now);
}

/* Drops threads not seen for a while so the table never fills with dead tids. */
void sampler_seen_sweep(uint32_t max_age)
{
    for (uint32_t i = 0; i < sampler.nseen; i++)
        if (sampler.seen[i].tid && sampler.clock - sampler.seen[i].gen > max_age) {
            flush_quiet(&sampler.seen[i], prof_unix_now());
            free(sampler.seen[i].stack);
            sampler.seen[i] = (struct cpu_seen){0};
        }
    /* rebuild probe chains */
    struct cpu_seen *old = malloc(sampler.nseen * sizeof *old);
    if (!old)
        return;
    memcpy(old, sampler.seen, sampler.nseen * sizeof *old);
    memset(sampler.seen, 0, sampler.nseen * sizeof *old);
    for (uint32_t i = 0; i < sampler.nseen; i++)
        if (old[i].tid) {
            struct cpu_seen *s = seen_slot(old[i].tid);
            if (s)
                *s = old[i];
        }
    free(old);
}

/* Walks all managed threads while the runtime is suspended. No malloc, no locks, no logging. */
int sampler_capture_all(ICorProfilerInfo15 *info, int *overflow, int read_cpu, int read_locks,
                        int use_cache, int only_marked)
{
    ICorProfilerThreadEnum *en = NULL;
    int n = 0;
    if (info->vt->EnumThreads(info, &en) != S_OK || !en)
        return 0;
    ThreadID ids[64];
    ULONG got = 0;
    while (en->vt->Next(en, 64, ids, &got) >= 0 && got > 0) {
        for (ULONG i = 0; i < got; i++) {
            if (n >= sampler.cap_threads) {
                (*overflow)++;
                continue;
            }
            DWORD os_tid = 0;
            if (info->vt->GetThreadInfo(info, ids[i], &os_tid) != S_OK || !os_tid ||
                prof_threads_is_own(os_tid))
                continue; /* not started, or clrscope's own */
            struct cpu_seen *s = use_cache ? seen_find(os_tid) : NULL;
            if (only_marked && !(s && s->prep == sampler.prep && s->walk_prep == sampler.prep))
                continue; /* recorded by sampler_wall_by_signal */
            if (s && s->prep == sampler.prep && s->stack_cpu >= 0 && s->now_cpu == s->stack_cpu) {
                sampler.caps[n] = (struct captured){.os_tid = os_tid, .cached = 1, .cpu_ns = -1};
                n++;
                continue;
            }
            struct walk w = {.frames = &sampler.frames[(size_t)n * (size_t)g_cfg.max_frames],
                             .max = g_cfg.max_frames};
            HRESULT hr = info->vt->DoStackSnapshot(info, ids[i], snapshot_cb,
                                                   COR_PRF_SNAPSHOT_DEFAULT, &w, NULL, 0);
            if (hr < 0 && hr != CORPROF_E_STACKSNAPSHOT_ABORTED && w.n == 0) {
                sampler.st.walk_failures++;
                /* still record the thread: its wall and CPU time count, under "[unknown]" */
            }
            sampler.caps[n].os_tid = os_tid;
            sampler.caps[n].cached = 0;
            sampler.caps[n].nframes = w.n;
            sampler.caps[n].truncated = w.truncated;
            /* here, not after the resume: the CPU a thread burns once resumed belongs to what
             * it runs next, not to the stack just walked (read later, a busy machine's delay
             * before this thread ran again would move CPU from one caller to the other); only
             * when the tick samples CPU, so that a wall tick without it suspends no longer */
            sampler.caps[n].cpu_ns = read_cpu ? prof_thread_cpu_ns((pid_t)os_tid) : -1;
            sampler.caps[n].wait_since = 0;
            if (read_locks &&
                !prof_lock_waiting(os_tid, &sampler.caps[n].lock_id, &sampler.caps[n].lock_owner,
                                   &sampler.caps[n].wait_since))
                sampler.caps[n].wait_since = 0;
            n++;
        }
        if (got < 64)
            break;
    }
    en->vt->Release(en);
    return n;
}

/* Keeps the stack just walked of thread c->os_tid for the next wall ticks, stamped with the CPU
 * clock read before the walk (a thread that ran in between is walked again at the next tick). */
static void keep_stack(const struct captured *c, const char **names, int k)
{
    struct cpu_seen *s = seen_take(c->os_tid);
    if (!s)
        return;
    flush_quiet(s, prof_unix_now()); /* (its ticks were the old stack's) */
    if (!s->stack)
        s->stack = malloc((size_t)(g_cfg.max_frames + 2) * sizeof *s->stack);
    if (!s->stack) {
        s->stack_cpu = -1;
        return;
    }
    memcpy(s->stack, names, (size_t)k * sizeof *names);
    s->k = k;
    s->kept_at.kind = 0;
    if (s->prep == sampler.prep && s->now_cpu >= 0) {
        s->stack_cpu = s->now_cpu;
    } else { /* not among the threads read before the walk: the thread list missed it */
        s->stack_cpu = -1;
        sampler.wall_unlisted = 1;
    }
}

void sampler_record(int n, double now_unix, int64_t wall_ns, int do_cpu, int do_wall, int use_cache)
{
    const char **names = malloc((size_t)(g_cfg.max_frames + 1) * sizeof *names);
    if (!names)
        return;
    if (use_cache)
        sampler.wall_unlisted = 0; /* keep_stack says whether this walk found one */
    for (int t = 0; t < n; t++) {
        struct captured *c = &sampler.caps[t];
        struct frame *f = &sampler.frames[(size_t)t * (size_t)g_cfg.max_frames];
        if (c->cached) { /* not walked: its kept stack, for wall time only */
            struct cpu_seen *s = seen_find(c->os_tid);
            if (s && s->k > 0 && do_wall && (g_core.profiles & PROFILE_WALL)) {
                record_kept(s, now_unix, wall_ns);
                sampler.st.samples++;
                sampler.st.wall_cached_samples++;
            }
            continue;
        }
        int k = 0;
        if (c->truncated)
            names[k++] = "[truncated]";
        for (int i = c->nframes - 1; i >= 0; i--) /* leaf-first -> root-first */
            names[k++] = f[i].fn ? prof_symbols_function(f[i].fn) : prof_symbols_native(f[i].ip);
        if (k == 0)
            names[k++] = "[no managed frames]";
        if (c->truncated)
            sampler.st.truncated_stacks++;
        int64_t cpu = c->cpu_ns;
        int64_t delta = 0;
        struct cpu_seen *s = cpu >= 0 ? seen_take(c->os_tid) : NULL;
        if (s) {
            if (s->cpu_ns >= 0 && cpu >= s->cpu_ns)
                delta = cpu - s->cpu_ns;
            s->cpu_ns = cpu;
            s->gen = sampler.clock;
        }
        if (do_cpu && (g_core.profiles & PROFILE_CPU) && delta > 0) {
            int64_t v[PROF_NVALUES] = {1, delta, 0};
            prof_store_add(PK_CPU, now_unix, names, k, c->os_tid, NULL, v);
        }
        if (do_wall && (g_core.profiles & PROFILE_WALL)) {
            /* and the time an unanswered wall ask left owed (which holds this tick's when
             * sampler_wall_by_signal left the thread to this walk) */
            struct cpu_seen *ws = use_cache ? seen_find(c->os_tid) : NULL;
            int64_t w = wall_ns;
            if (ws && ws->owed_ns > 0)
                w = ws->owed_ns + (ws->walk_prep == sampler.prep ? 0 : wall_ns);
            if (ws) {
                ws->owed_ns = 0;
                ws->by_cpu = 0;
                ws->retry = 0;
                ws->deferred = 0;
            }
            int64_t v[PROF_NVALUES] = {1, w, 0};
            prof_store_add(PK_WALL, now_unix, names, k, c->os_tid, NULL, v);
        }
        if (use_cache)
            keep_stack(c, names, k);
        sampler.st.samples++;
    }
    free(names);
    if (!use_cache)
        return;
    /* threads read before the walk that it did not find (gone, or not yet running managed
     * code): nothing to record for them until their clock moves */
    for (size_t i = 0; i < sampler.wall_ntids; i++) {
        struct cpu_seen *s = seen_find(sampler.wall_tids[i]);
        if (s && s->prep == sampler.prep && s->stack_cpu < 0 && s->now_cpu >= 0 &&
            s->owed_ns <= 0) {
            s->stack_cpu = s->now_cpu;
            s->k = 0;
        }
    }
}

int sampler_wall_prepare(void)
{
    sampler.prep++;
    sampler.wall_ntids = prof_threads_tids(sampler.wall_tids, (size_t)g_cfg.max_threads);
    int idle = !sampler.wall_unlisted && sampler.wall_ntids > 0;
    int swept = 0;
    uint64_t skipped = 0;
    for (size_t i = 0; i < sampler.wall_ntids; i++) {
        uint32_t tid = sampler.wall_tids[i];
        struct cpu_seen *s = seen_take(tid);
        if (!s && !swept) { /* full of threads gone since the last tick (thread churn) */
            swept = 1;
            sampler_seen_sweep(1);
            s = seen_take(tid);
        }
        if (!s) {
            idle = 0;
            continue;
        }
        s->prep = sampler.prep;
        s->gen = sampler.clock;
        if (s->quiet >= QUIET_AFTER && s->stack_cpu >= 0 && s->owed_ns <= 0 &&
            !quiet_visit(tid)) {
            s->now_cpu = s->stack_cpu; /* not read at this tick: taken as unmoved */
            skipped++;
            continue;
        }
        s->now_cpu = prof_thread_cpu_ns((pid_t)tid);
        if (s->now_cpu >= 0 && s->now_cpu == s->stack_cpu) {
            if (s->quiet < QUIET_AFTER)
                s->quiet++;
        } else {
            flush_quiet(s, prof_unix_now()); /* the ticks it was quiet, at the stack it had */
            s->quiet = 0;
        }
        if (s->now_cpu >= 0 && s->now_cpu != s->stack_cpu)
            idle = 0;
    }
    if (skipped) {
        pthread_mutex_lock(&sampler.st_lock);
        sampler.st.wall_quiet_skipped += skipped;
        pthread_mutex_unlock(&sampler.st_lock);
    }
    return idle;
}

int sampler_wall_from_cache(double now_unix, int64_t wall_ns)
{
    int n = 0;
    for (size_t i = 0; i < sampler.wall_ntids; i++) {
        struct cpu_seen *s = seen_find(sampler.wall_tids[i]);
        if (!s || s->prep != sampler.prep || s->now_cpu < 0 || s->k <= 0)
            continue;
        record_kept(s, now_unix, wall_ns);
        n++;
    }
    return n;
}

/* ---- wall asks ---- */

/* How long a wall tick waits for the answers of the threads it asked: a thread that runs takes
 * the signal at once, one blocked in the runtime's wait at its wake-up; one waiting for a CPU
 * answers when it gets one, which on a loaded machine may take longer (it is then recorded at a
 * later tick, with the time it owes). */
#define WALL_ANSWER_WAIT_NS 20000000LL
/* How long an ask may stay unanswered before it is given up on (the thread walked with the
 * runtime suspended that time): the answer lost, or the signal kept blocked; long enough for a
 * thread that waits for a CPU on a loaded machine. */
#define WALL_ASK_PATIENCE_NS 1000000000LL
/* Ticks in a row a thread may put off its wall sample (an answer that held a leaf alone, a wait
 * whose caller is not known yet) before it is walked with the runtime suspended: most are a
 * moment (a stack or a library mapped since the maps snapshot, which the deferral refreshes). */
#define WALL_DEFER_TICKS 2
/* Bytes of frame names the kept stacks of signal walks may hold. */
#define WALL_NAMES_MAX (8u << 20)

/* The same system call, with the same arguments, from the same place on the stack. */
static int same_place(const struct prof_wall_state *a, const struct prof_wall_state *b)
{
    return a->kind == PROF_WALL_BLOCKED && b->kind == PROF_WALL_BLOCKED && a->nr == b->nr &&
           a->sp == b->sp && a->pc == b->pc && !memcmp(a->args, b->args, sizeof a->args);
}

struct wall_answer_ctx {
    double now_unix;
    int answers, cached, failed, deferred;
};

/* Keeps the answer's names (root first) as thread s's stack; 0 when the names table is full. */
static int keep_answer(struct cpu_seen *s, const char **names, int k)
{
    if (!sampler.wall_names_ready) {
        if (prof_intern_init(&sampler.wall_names, WALL_NAMES_MAX))
            return 0;
        sampler.wall_names_ready = 1;
    }
    flush_quiet(s, prof_unix_now()); /* (its ticks were the old stack's) */
    if (!s->stack)
        s->stack = malloc((size_t)(g_cfg.max_frames + 2) * sizeof *s->stack);
    if (!s->stack)
        return 0;
    uint64_t dropped = sampler.wall_names.dropped;
    for (int i = 0; i < k; i++)
        s->stack[i] = prof_intern_str(&sampler.wall_names, prof_intern(&sampler.wall_names,
                                                                       names[i]));
    if (sampler.wall_names.dropped != dropped)
        return 0;
    s->k = k;
    return 1;
}

static int wall_answer(void *arg, const struct prof_sigsample *smp)
{
    struct wall_answer_ctx *c = arg;
    struct cpu_seen *s = seen_find(smp->tid);
    if (!s || s->owed_ns <= 0 || smp->wall_seq != s->asked_seq)
        return 0; /* an answer to an ask given up on (asked again, walked, or gone) */
    if (smp->flags & (PROF_SIG_F_NOMAPS | PROF_SIG_F_NOSTACK | PROF_SIG_F_ALTSTACK)) {
        /* a leaf alone (its stack newer than the maps snapshot, or on a signal stack): asked
         * again at the next tick with the snapshot refreshed, and after WALL_DEFER_TICKS such
         * ticks walked with the runtime suspended (it owes what the ask did) */
        prof_maps_refresh(1);
        s->asked_seq = 0; /* (no answer to this ask is waited for any more) */
        if (s->deferred < WALL_DEFER_TICKS) {
            s->deferred++;
            s->retry = 1;
            c->deferred++;
            return 1;
        }
        s->walk_prep = sampler.prep;
        c->failed++;
        return 1;
    }
    struct sig_names *sn = &sampler.sn;
    int m = sampler_name_sample(sn, smp);
    if (g_core.profiles & PROFILE_WALL) {
        int64_t v[PROF_NVALUES] = {1, s->owed_ns, 0};
        prof_store_add(PK_WALL, c->now_unix, sn->root, m, smp->tid, NULL, v);
    }
    s->owed_ns = 0;
    s->deferred = 0;
    /* kept with the CPU clock the handler read after its walk, and where the thread was
     * blocked when asked: taking the signal costs the thread CPU of its own (the return, the
     * wait begun again), so its clock moves; found blocked at the same place at the next tick,
     * it has not run since (sampler_wall_by_signal) */
    s->stack_cpu = keep_answer(s, sn->root, m) ? (smp->cpu_end >= 0 ? smp->cpu_end
                                                                      : s->asked_cpu)
                                                : -1;
    /* a walk that stopped short of the thread's first frame is not kept for the waits to
     * come: it is asked again (each such walk a sample, not a thousand) */
    s->kept_at = s->asked_at;
    if (!(smp->flags & PROF_SIG_F_ROOTED))
        s->kept_at.kind = 0;
    c->answers++;
    return 1;
}

void sampler_wall_cpu_sample(double when_unix, const struct prof_sigsample *smp,
                             const char **root, int m)
{
    struct cpu_seen *s = seen_find(smp->tid);
    if (!s || !s->by_cpu || s->owed_ns <= 0 || smp->cycles < s->asked_cycles)
        return; /* not waited for, or taken before the tick that asked for it */
    if (smp->flags & (PROF_SIG_F_NOMAPS | PROF_SIG_F_NOSTACK | PROF_SIG_F_ALTSTACK))
        return; /* a leaf alone: the next one, or the next tick's ask */
    if (g_core.profiles & PROFILE_WALL) {
        int64_t v[PROF_NVALUES] = {1, s->owed_ns, 0};
        prof_store_add(PK_WALL, when_unix, root, m, smp->tid, NULL, v);
    }
    s->owed_ns = 0;
    s->by_cpu = 0;
    if (sampler.wall_by_cpu)
        sampler.wall_by_cpu--;
    prof_sigsample_wall_by_cpu();
    pthread_mutex_lock(&sampler.st_lock);
    sampler.st.samples++;
    sampler.st.wall_signal_samples++;
    pthread_mutex_unlock(&sampler.st_lock);
}

int sampler_wall_by_signal(double now_unix, int64_t wall_ns, int *answers, int *cached,
                           int *leaf)
{
    struct wall_answer_ctx c = {.now_unix = now_unix};
    int marked = 0, asked = 0;
    prof_codemap_lock(); /* naming takes the code map */
    prof_sigsample_wall_collect(wall_answer, &c); /* late answers of earlier ticks */
    prof_codemap_unlock();
    /* The asks read /proc and copy blocked threads' stacks (tens of microseconds each) without
     * the code map's lock, which clrscope-agg needs to name allocation and lock stacks: they
     * read only the maps snapshot and the CFI tables, which this thread alone replaces. */
    prof_sigsample_wall_begin();
    uint32_t seq = ++sampler.wall_seq & PROF_SIG_WALL_SEQ_MASK;
    int64_t now_ns = prof_now_ns();
    for (size_t i = 0; i < sampler.wall_ntids; i++) {
        struct cpu_seen *s = seen_find(sampler.wall_tids[i]);
        if (!s || s->prep != sampler.prep || s->now_cpu < 0)
            continue;
        if (s->owed_ns > 0 && (s->by_cpu || s->retry)) {
            /* no whole CPU sample since the last tick (it stopped running before its next one,
             * or the sample was lost), or put off: what it owes goes with this tick's, asked as
             * it is now */
            s->owed_ns += wall_ns;
            s->by_cpu = 0;
            s->retry = 0;
        } else if (s->owed_ns > 0) { /* its answer has not come yet */
            s->owed_ns += wall_ns;
            if (now_ns - s->asked_ns < WALL_ASK_PATIENCE_NS)
                continue;
            /* lost, or the thread keeps the signal blocked: walked with the runtime suspended
             * (what it owes with it), and asked again when it next runs */
            prof_sigsample_wall_give_up();
            s->walk_prep = sampler.prep;
            marked++;
            continue;
        }
        struct prof_wall_state st;
        int read = 0, readable = 0;
        if (s->owed_ns <= 0 && s->stack_cpu >= 0 && s->now_cpu != s->stack_cpu &&
            s->kept_at.kind == PROF_WALL_BLOCKED) {
            read = 1;
            readable = prof_sigsample_wall_state(s->tid, &st) == 0;
            if (readable && same_place(&st, &s->kept_at)) {
                /* it ran only to take a signal (ours, or another's) and went back to its wait */
                s->stack_cpu = s->now_cpu;
                prof_sigsample_wall_same();
            }
        }
        if (s->owed_ns <= 0 && s->stack_cpu >= 0 && s->now_cpu == s->stack_cpu) {
            if (s->k > 0 && (g_core.profiles & PROFILE_WALL)) { /* has not run: its kept stack */
                record_kept(s, now_unix, wall_ns);
                c.cached++;
            }
            continue;
        }
        if (!read)
            readable = prof_sigsample_wall_state(s->tid, &st) == 0;
        int how = prof_sigsample_wall_ask(s->tid, seq, readable ? &st : NULL);
        if (how == 1) {
            if (s->owed_ns <= 0)
                s->owed_ns = wall_ns;
            s->asked_seq = seq;
            s->asked_cpu = s->now_cpu;
            s->asked_ns = now_ns;
            s->asked_at = st;
            s->by_cpu = 0;
            asked++;
        } else if (how == 2) { /* its next CPU sample stands for it (sampler_wall_cpu_sample) */
            if (s->owed_ns <= 0)
                s->owed_ns = wall_ns;
            s->by_cpu = 1;
            s->asked_cycles = prof_sig_cycles();
            s->asked_ns = now_ns;
        } else if (how == 3 && s->deferred < WALL_DEFER_TICKS) {
            /* where it waits is not known yet: asked again at the next tick */
            if (s->owed_ns <= 0)
                s->owed_ns = wall_ns;
            s->by_cpu = 0;
            s->retry = 1;
            s->deferred++;
            c.deferred++;
        } else {
            s->by_cpu = 0;
            s->walk_prep = sampler.prep; /* the walk records what it owes, too */
            marked++;
        }
    }
    uint32_t by_cpu = 0;
    for (size_t i = 0; i < sampler.wall_ntids; i++) {
        struct cpu_seen *s = seen_find(sampler.wall_tids[i]);
        by_cpu += s && s->by_cpu && s->owed_ns > 0;
    }
    sampler.wall_by_cpu = by_cpu;
    if (asked) {
        prof_sigsample_wall_wait(WALL_ANSWER_WAIT_NS);
        prof_codemap_lock();
        prof_sigsample_wall_collect(wall_answer, &c);
        prof_codemap_unlock();
    }
    *answers = c.answers;
    *cached = c.cached;
    *leaf = c.failed;
    if (c.deferred) {
        pthread_mutex_lock(&sampler.st_lock);
        sampler.st.wall_deferred += (uint64_t)c.deferred;
        pthread_mutex_unlock(&sampler.st_lock);
    }
    return marked + c.failed;
}
