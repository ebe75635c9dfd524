/*
 * prof_sigsample_wall.c - wall asks: the wall sampler asks a thread whose CPU clock moved since
 * its stack was last walked for that stack by a signal, instead of suspending the runtime. The
 * handler (prof_sighandler.c) walks the thread where it is, as for a CPU sample, into the
 * thread's ring, flagged PROF_SIG_F_WALL; prof_sigsample_wall_collect hands those entries over.
 * The clrscope-sampler thread only (prof_sigsample.h's ctx), but prof_sigsample_wall_install
 * (prof_sampler_start, right after prof_sigsample_start).
 *
 * The signal is a second one of SIGPROF, SIGUSR2 and SIGUSR1 (the CPU sampler's perf events
 * raise theirs again only from the handler: a wall ask on the same signal, pending when the
 * event overflows, would swallow that overflow and stop the thread's CPU samples for good).
 *
 * A signal interrupts a system call the thread is blocked in. With SA_RESTART most are restarted
 * by the kernel, but some always fail with EINTR (epoll_wait, poll, select, nanosleep, waits with
 * a timeout; signal(7)), and native code that does not retry them breaks (an ODBC driver's
 * poll, libssh2). So a thread is asked only when it runs, or waits to run in its own code, or is
 * blocked in a system call that the runtime's own native code made (libcoreclr, libclrjit,
 * libclrgc, the libSystem.*.Native shims): those retry EINTR, since the runtime's own signal
 * handlers (SIGCHLD, SIGCONT, SIGINT, ...) may run on any thread. Which code made the call is
 * read from /proc/self/task/TID/syscall (the call, the user stack pointer and pc) and the
 * caller's frames through libc unwound by their CFI over a copy of the thread's stack
 * (process_vm_readv: the thread may exit meanwhile). A thread blocked in any other code (a
 * P/Invoke into libc or a native library) is left to the stop-the-world walk, and so is it from
 * then on: a thread that runs when it is asked may be entering such a call, in the kernel, where
 * the signal would interrupt it all the same (the window is the few microseconds between the
 * read and the signal's delivery), and the threads that make such calls are those seen in one.
 * For the same reason a thread found running is asked only once it has been seen elsewhere (in
 * user code, or blocked in a call the runtime made) or found running at WALL_PROOF_TICKS ticks:
 * a thread that blocks in a P/Invoke most of the time is found there before it is ever asked.
 * Until then its next CPU sample stands for its wall sample: the CPU sampler's signal reaches a
 * running thread anyway, so taking its stack from there adds no signal and no suspension.
 * What is left of the window is watched: an answer whose signal cut a call short (the handler
 * sees the call return EINTR, PROF_SIG_F_EINTR) and whose caller is not the runtime's code
 * makes that thread fragile at once (`interrupted_outside`): at most one such call per thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>

#include "prof_cfi.h"
#include "prof_log.h"
#include "prof_maps.h"
#include "prof_sigsample_int.h"

#define WALL_STACK_COPY 4096 /* bytes of a blocked thread's stack read to find the call's caller */
#define WALL_PROOF_TICKS 8   /* a thread found running at this many ticks is asked when running */

static struct {
    uint64_t asked, answered, late, blocked_outside, fragile, no_ring, ask_failures, unreadable;
    uint64_t same_wait, unknown, given_up, unproven, by_cpu, interrupted, interrupted_outside;
    int failure_logged, interrupted_logged; /* atomic (prof_log_once) */
} wall;

int prof_sigsample_wall_install(void)
{
    static const int candidates[] = {SIGPROF, SIGUSR2, SIGUSR1};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        int s = candidates[i];
        if (!sig.signo || s == sig.signo || !sigsample_signal_free(s))
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = prof_sig_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(s, &sa, NULL))
            continue;
        g_sig.pid = (int)getpid();
        __atomic_store_n(&g_sig.wall_signo, s, __ATOMIC_RELEASE);
        prof_log(LOG_DEBUG, "wall sampler: asks threads for their stacks on signal %d (%s)", s,
                 sigabbrev_np(s));
        return s;
    }
    if (sig.signo)
        prof_log(LOG_INFO, "wall sampler: no second free signal among SIGPROF, SIGUSR2 and "
                 "SIGUSR1; threads that ran since their last walk are walked with the runtime "
                 "suspended");
    return 0;
}

int prof_sigsample_wall_on(void)
{
    int s = __atomic_load_n(&g_sig.wall_signo, __ATOMIC_ACQUIRE);
    struct sigaction cur;
    return s && !sig.stopped && !sigaction(s, NULL, &cur) && (cur.sa_flags & SA_SIGINFO) &&
           cur.sa_sigaction == prof_sig_handler;
}

static struct sthread *find_thread(uint32_t tid)
{
    size_t lo = 0, hi = sig.nth;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sig.th[mid].tid < tid)
            lo = mid + 1;
        else if (sig.th[mid].tid > tid)
            hi = mid;
        else
            return &sig.th[mid];
    }
    return NULL;
}

/* Whether the system call a thread is blocked in, at user pc and sp, was made by the runtime's
 * own native code: the frames in the CFI-unwound libraries (libc, the loader, ...) are stepped
 * over on a copy of the stack; the first frame that is the runtime's, or past them, decides. 1: the runtime's code, 0:
 * other code, -1: not known (the stack could not be read or unwound). */
static int call_by_runtime(uintptr_t pc, uintptr_t sp, const char **caller)
{
    *caller = NULL;
    const struct prof_sig_maps *m = __atomic_load_n(&g_sig.maps, __ATOMIC_ACQUIRE);
    const struct prof_cfi *t = __atomic_load_n(&g_sig.cfi, __ATOMIC_ACQUIRE);
    if (!m)
        return -1;
    const struct prof_cfi_lib *l = prof_cfi_find(t, pc);
    if (l && !l->leaf_only && !sigsample_wall_runtime_code(prof_maps_native_name(pc))) {
        /* the stack from sp on, a page at a time (a read stops at the first page not mapped:
         * the top of a stack the snapshot may not know yet) */
        uintptr_t buf[WALL_STACK_COPY / sizeof(uintptr_t)];
        struct iovec local = {buf, sizeof buf}, remote[2];
        uintptr_t page_end = (sp | 4095) + 1;
        remote[0] = (struct iovec){(void *)sp, page_end - sp};
        remote[1] = (struct iovec){(void *)page_end, sizeof buf - (page_end - sp)};
        ssize_t got = process_vm_readv(getpid(), &local, 1, remote, remote[1].iov_len ? 2 : 1, 0);
        if (got < 16) {
            if (got < 0)
                prof_log_once(wall.failure_logged, LOG_WARN, "wall sampler: process_vm_readv "
                              "refused (%s): threads blocked in system calls are walked with "
                              "the runtime suspended", strerrordesc_np(errno));
            return -1;
        }
        uintptr_t csp = (uintptr_t)buf, cbp = 0, top = (uintptr_t)buf + (uintptr_t)got;
        for (int step = 0; l && !l->leaf_only; step++) {
            if (step == PROF_CFI_STEPS)
                return -1;
            uintptr_t slot;
            int outermost = 0;
            uintptr_t ra = prof_cfi_step(l, pc, step == 0, &csp, &cbp, top, &slot, &outermost);
            if (!ra)
                return -1;
            pc = ra;
            if (sigsample_wall_runtime_code(prof_maps_native_name(pc)))
                return 1; /* (the framework's shims are CFI-unwound too) */
            l = prof_cfi_find(t, pc);
        }
    }
    if (!prof_maps_is_code(pc)) { /* a library loaded since the snapshot */
        prof_maps_refresh(1);
        return -1;
    }
    *caller = prof_maps_native_name(pc);
    return sigsample_wall_runtime_code(*caller);
}

int prof_sigsample_wall_state(uint32_t tid, struct prof_wall_state *st)
{
    memset(st, 0, sizeof *st);
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%u/syscall", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0)
        return -1;
    buf[k] = 0;
    if (!strncmp(buf, "running", 7)) {
        st->kind = PROF_WALL_RUNNING;
        return 0;
    }
    char *p;
    long nr = strtol(buf, &p, 10);
    if (p == buf)
        return -1;
    if (nr == -1) { /* "-1 sp pc": in user code, not in a system call */
        st->kind = PROF_WALL_USER;
        return 0;
    }
    for (int i = 0; i < 8; i++) { /* six arguments, the stack pointer, the pc */
        char *q;
        unsigned long long v = strtoull(p, &q, 16);
        if (q == p)
            return -1;
        if (i < 6)
            st->args[i] = (uintptr_t)v;
        else if (i == 6)
            st->sp = (uintptr_t)v;
        else
            st->pc = (uintptr_t)v;
        p = q;
    }
    st->kind = PROF_WALL_BLOCKED;
    st->nr = nr;
    return 0;
}

void prof_sigsample_wall_give_up(void)
{
    wall.given_up++;
}

void prof_sigsample_wall_by_cpu(void)
{
    wall.by_cpu++;
}

void prof_sigsample_wall_same(void)
{
    wall.same_wait++;
}

void prof_sigsample_wall_begin(void)
{
    __atomic_store_n(&g_sig.wall_left, 0, __ATOMIC_SEQ_CST);
}

int prof_sigsample_wall_ask(uint32_t tid, uint32_t seq, const struct prof_wall_state *st)
{
    struct sthread *t = find_thread(tid);
    if (!t || !sigsample_armed(t)) {
        wall.no_ring++;
        return -1;
    }
    if (t->wall_fragile) {
        wall.fragile++;
        return 0;
    }
    if (!st) {
        wall.unreadable++;
        return 0;
    }
    if (st->kind == PROF_WALL_RUNNING && !t->wall_proven) {
        /* it may be about to block in a call other code makes: not asked until seen elsewhere
         * (or running at WALL_PROOF_TICKS ticks); its next CPU sample stands for it */
        if (++t->wall_running < WALL_PROOF_TICKS) {
            wall.unproven++;
            return 2;
        }
        t->wall_proven = 1;
    }
    if (st->kind == PROF_WALL_BLOCKED) {
        const char *caller;
        int by = call_by_runtime(st->pc, st->sp, &caller);
        if (by < 0) { /* not known (yet: a library mapped since the snapshot): asked again */
            wall.unknown++;
            return 3;
        }
        if (!by) {
            prof_log(LOG_DEBUG, "wall sampler: thread %u is blocked in system call %ld made by "
                     "%s: walked with the runtime suspended from now on", tid, st->nr,
                     caller ? caller : "?");
            wall.blocked_outside++;
            t->wall_fragile = 1;
            return 0;
        }
    }
    if (st->kind != PROF_WALL_RUNNING)
        t->wall_proven = 1;
    struct prof_sig_ring *r = sigsample_ring_at((int)t->ring);
    uint64_t v = (uint64_t)__atomic_load_n(&r->gen, __ATOMIC_ACQUIRE) << 32 | PROF_SIG_WALL_TAG |
                 (uint64_t)(seq & PROF_SIG_WALL_SEQ_MASK) << PROF_SIG_WALL_SEQ_SHIFT | t->ring;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = g_sig.wall_signo;
    si.si_code = SI_QUEUE;
    si.si_pid = g_sig.pid;
    si.si_uid = getuid();
    si.si_value.sival_ptr = (void *)(uintptr_t)v;
    __atomic_add_fetch(&g_sig.wall_left, 1, __ATOMIC_SEQ_CST);
    if (syscall(SYS_rt_tgsigqueueinfo, g_sig.pid, (pid_t)tid, g_sig.wall_signo, &si)) {
        __atomic_sub_fetch(&g_sig.wall_left, 1, __ATOMIC_SEQ_CST);
        wall.ask_failures++; /* the thread is gone, or the queue of signals is full */
        return -1;
    }
    wall.asked++;
    return 1;
}

void prof_sigsample_wall_wait(int64_t max_ns)
{
    int64_t end = sigsample_mono_ns() + max_ns;
    for (;;) {
        int32_t left = __atomic_load_n(&g_sig.wall_left, __ATOMIC_SEQ_CST);
        int64_t now = sigsample_mono_ns();
        if (left <= 0 || now >= end)
            return;
        struct timespec ts = {.tv_sec = (end - now) / 1000000000LL,
                              .tv_nsec = (end - now) % 1000000000LL};
        syscall(SYS_futex, &g_sig.wall_left, FUTEX_WAIT_PRIVATE, left, &ts, NULL, 0);
    }
}

/* An answer's signal cut a system call short: when code outside the runtime made the call, the
 * thread is asked no more (one log line the first time). */
static void interrupted(struct sthread *t, const uintptr_t *ips, uint32_t n)
{
    wall.interrupted++;
    const char *caller = sigsample_cut_call_outside(ips, n);
    if (!caller)
        return;
    wall.interrupted_outside++;
    t->wall_fragile = 1;
    prof_log_once(wall.interrupted_logged, LOG_INFO, "wall sampler: an ask cut short a system "
                  "call made by %s on thread %u (it returned EINTR); that thread is walked with "
                  "the runtime suspended from now on (status: wall_asks.interrupted_outside)",
                  caller, t->tid);
}

int prof_sigsample_wall_collect(prof_sigsample_wall_fn fn, void *arg)
{
    int got = 0;
    for (size_t i = 0; i < sig.nth; i++) {
        struct sthread *t = &sig.th[i];
        if (!sigsample_armed(t))
            continue;
        struct prof_sig_ring *r = sigsample_ring_at((int)t->ring);
        for (uint32_t j = 0; j < g_sig.entries; j++) {
            struct prof_sig_entry *e = prof_sig_entry_at(r, j);
            if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != PROF_SIG_FULL ||
                !(e->flags & PROF_SIG_F_WALL))
                continue;
            uint32_t n = e->n <= (uint32_t)g_sig.max_frames ? e->n : (uint32_t)g_sig.max_frames;
            uint32_t nw = e->nwindow <= PROF_SIG_WINDOW ? e->nwindow : PROF_SIG_WINDOW;
            struct prof_sigsample smp = {.tid = t->tid, .flags = (int)e->flags, .n = (int)n,
                                         .nwindow = (int)nw, .ips = e->ips, .window = e->window,
                                         .epoch = e->epoch, .found = e->found, .fresh = e->fresh, .jit = e->jit,
                                         .wall_seq = e->wall_seq, .cpu_end = e->cpu_end};
            if (e->flags & PROF_SIG_F_EINTR)
                interrupted(t, e->ips, n);
            if (fn(arg, &smp) > 0)
                wall.answered++;
            else
                wall.late++;
            __atomic_store_n(&e->state, PROF_SIG_EMPTY, __ATOMIC_RELEASE);
            got++;
        }
    }
    return got;
}

void prof_sigsample_wall_get_stats(struct prof_sigsample_wall_stats *out)
{
    out->signo = __atomic_load_n(&g_sig.wall_signo, __ATOMIC_ACQUIRE);
    out->asked = wall.asked;
    out->answered = wall.answered;
    out->late = wall.late;
    out->blocked_outside = wall.blocked_outside;
    out->fragile = wall.fragile;
    out->no_ring = wall.no_ring;
    out->ask_failures = wall.ask_failures;
    out->unreadable = wall.unreadable;
    out->same_wait = wall.same_wait;
    out->unknown = wall.unknown;
    out->given_up = wall.given_up;
    out->unproven = wall.unproven;
    out->by_cpu = wall.by_cpu;
    out->interrupted = wall.interrupted;
    out->interrupted_outside = wall.interrupted_outside;
    out->ring_full = __atomic_load_n(&g_sig.wall_full, __ATOMIC_RELAXED);
}
