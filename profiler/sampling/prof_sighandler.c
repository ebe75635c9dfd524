/*
 * prof_sighandler.c - see prof_sighandler.h. Everything in this file may run in signal context.
 *
 * The walk follows the frame-pointer chain: on x86-64 Linux the JIT keeps RBP as a frame pointer
 * for every method that has loops, more than one call, or more than three basic blocks
 * (ETW_EBP_FRAMED in the JIT), and libcoreclr is built with frame pointers, so [rbp] holds the
 * caller's rbp and [rbp + 8] the return address. Each step is checked before any load:
 *   - the frame must lie in [sp, top) of the interrupted thread's own stack, where top is the
 *     thread pointer (glibc puts struct pthread at the top of the mapping that holds the thread's
 *     stack, so the whole of [sp, tp) is that one live mapping) or, for the main thread, the end
 *     of the "[stack]" mapping; the snapshot of /proc/self/maps must show sp and top in one
 *     mapping, which rules out foreign stacks (sigaltstack, coroutines) where [sp, tp) could
 *     cross a hole;
 *   - frame pointers must be 8-aligned and strictly increase, so the walk ends;
 *   - every return address must fall in an executable mapping, or the walk stops there.
 * A method the JIT compiled without a frame pointer (small methods: no loop, at most one call,
 * at most three basic blocks) leaves rbp to its caller, so the chain alone skips that caller.
 * The sampler publishes the frame size of such methods as it learns them (g_sig.codes); for a
 * return address into one of them the walk reads the caller's return address `frame` bytes
 * further up the stack, under the same bounds, and keeps rbp. The words right above sp are
 * copied too, so that the sampler can do the same for the leaf frame (prologue, epilogue).
 * Frames in the libraries that keep no frame pointers (glibc, the loader, libgcc_s, libstdc++,
 * preloaded malloc replacements) are unwound by their CFI instead (cfi_frames, prof_cfi.h): the
 * leaf's, and a return into one of them further up the chain; the chain goes on from the first
 * frame outside them with the rbp the CFI recovered.
 * A load therefore never faults: faulting here would run CoreCLR's SIGSEGV handler, which would
 * take the process down.
 */
#include "prof_sighandler.h"

#include <linux/futex.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>

#include "prof_arch.h"
#include "prof_cfi.h"

struct prof_sig_shared g_sig;
__thread __attribute__((tls_model("initial-exec"))) struct prof_sig_jit_marks prof_sig_jit;

/* A system call without libc (this file references no outside symbol) and without errno. */
#define raw_syscall3 prof_arch_syscall3

/* Wakes the sampler if it naps through idle ticks with its doorbell armed (once per arming):
 * new samples to drain, or a walk that found the maps snapshot behind. */
static void wake_sampler(void)
{
    if (__atomic_load_n(&g_sig.bell_at, __ATOMIC_SEQ_CST) &&
        __atomic_exchange_n(&g_sig.bell_at, 0, __ATOMIC_SEQ_CST)) {
        __atomic_add_fetch(&g_sig.bell_word, 1, __ATOMIC_SEQ_CST);
        raw_syscall3(SYS_futex, (long)&g_sig.bell_word, FUTEX_WAKE_PRIVATE, 1);
    }
}

void prof_sig_wake_sampler(void)
{
    wake_sampler();
}

static const struct prof_sig_range *find_range(const struct prof_sig_range *r, uint32_t n,
                                               uintptr_t addr)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (addr < r[mid].lo)
            hi = mid;
        else if (addr >= r[mid].hi)
            lo = mid + 1;
        else
            return &r[mid];
    }
    return NULL;
}

static const struct prof_sig_code *find_code(const struct prof_sig_codes *c, uintptr_t addr)
{
    if (!c)
        return NULL;
    uint32_t lo = 0, hi = c->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (addr < c->c[mid].lo)
            hi = mid;
        else if (addr >= c->c[mid].hi)
            lo = mid + 1;
        else
            return &c->c[mid];
    }
    return NULL;
}

static uintptr_t load_word(uintptr_t addr)
{
    return *(const volatile uintptr_t *)addr;
}

static uintptr_t thread_pointer(void)
{
    return prof_arch_thread_pointer(); /* (near the top of the thread's stack mapping) */
}

/* The top of the stack that holds sp, if sp lies on the calling thread's own stack in the
 * snapshot (see the top of the file); 0 otherwise, after counting why. */
static uintptr_t stack_top(const struct prof_sig_maps *m, uintptr_t sp, uint32_t *flags)
{
    const struct prof_sig_range *stack = find_range(m->rw, m->nrw, sp);
    uintptr_t tp = thread_pointer();
    if (stack && tp > sp && tp <= stack->hi)
        return tp;
    if (stack && (stack->flags & PROF_SIG_R_MAIN_STACK))
        return stack->hi;
    *flags |= PROF_SIG_F_NOSTACK;
    __atomic_add_fetch(&g_sig.no_stack, 1, __ATOMIC_RELAXED);
    if (!stack) {
        __atomic_add_fetch(&g_sig.maps_miss, 1, __ATOMIC_RELAXED);
        wake_sampler();
    }
    return 0;
}

static int skipped(const struct prof_sig_skip *skip, uintptr_t ra)
{
    for (int i = 0; i < PROF_SIG_SKIP_RANGES; i++)
        if (ra >= skip->lo[i] && ra < skip->hi[i])
            return 1;
    return 0;
}

static const struct prof_sig_hidden *find_hidden(const struct prof_sig_hiddens *t, uintptr_t ra)
{
    if (!t)
        return NULL;
    uint32_t lo = 0, hi = t->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ra < t->h[mid].ra)
            hi = mid;
        else if (ra > t->h[mid].ra)
            lo = mid + 1;
        else
            return &t->h[mid];
    }
    return NULL;
}

/* Whether w could be the return address of a frame record: code the snapshot knows, or an
 * address no writable mapping holds (code mapped since the snapshot) at or above the lowest code
 * the snapshot knows and below m->new_code_hi. A saved copy of rbp followed by a register holding
 * a stack or heap pointer or a number is no record: the runtime's allocation helper on .NET 8 and
 * 9 keeps such copies in its own frame (with byte counts such as 0x82ed6c after them), and every
 * walk through it doubted its leaf. New code cannot lie below all the code already mapped: the
 * kernel places new mappings next to the shared libraries' (top-down below them, toward the
 * program's image and heap far below, or bottom-up above them in the legacy layout), and both
 * layouts stay below the main thread's stack (which rules out hashes and other large numbers);
 * qemu-user's guests map upward from above their stack, bounded by user space alone. */
static int could_return(const struct prof_sig_maps *m, uintptr_t w)
{
    if (find_range(m->exec, m->nexec, w))
        return 1;
    return m->nexec && w >= m->exec[0].lo && w < m->new_code_hi && !find_range(m->rw, m->nrw, w);
}

/* Appends the return address ra, read at stack address slot, then, while it returns into a
 * frameless method, that method's own return address `frame` bytes above (below `limit`).
 * `found` (NULL for the chain's own addresses) gets the bit of a hidden record's address, `hops`
 * those its hops add. Returns the hops made, or -1 when the walk must end here. */
static int push(uintptr_t *ips, uint32_t *n, uint32_t max, uintptr_t slot, uintptr_t ra,
                uintptr_t limit, uintptr_t top, const struct prof_sig_maps *m,
                const struct prof_sig_codes *codes, uint64_t *found, uint64_t *hops,
                uint32_t *flags)
{
    for (int hop = 0;; hop++) {
        if (!find_range(m->exec, m->nexec, ra)) {
            if (ra) {
                *flags |= PROF_SIG_F_NOTCODE;
                if (could_return(m, ra)) {
                    *flags |= PROF_SIG_F_NEWCODE;
                    __atomic_store_n(&g_sig.miss_ra, ra, __ATOMIC_RELAXED);
                }
            } else {
                *flags |= PROF_SIG_F_ROOTED; /* 0 ends a chain on purpose (thread start) */
            }
            return -1;
        }
        if (*n >= max) {
            *flags |= PROF_SIG_F_TRUNCATED;
            return -1;
        }
        if (found && *n < 64)
            *(hop ? hops : found) |= 1ull << *n;
        ips[(*n)++] = ra;
        const struct prof_sig_code *f = find_code(codes, ra - 1);
        if (!f || hop >= PROF_SIG_MAX_HOPS)
            return hop;
        /* ra returns into a frameless method: its own return address is above its frame */
        uintptr_t up = slot + 8 + f->frame;
        if (up < slot || up > top - 8 || (up & 7) || up >= limit)
            return -1; /* out of bounds, or past the next frame: the table is stale */
        slot = up;
        ra = load_word(slot);
    }
}

/* A self-walk's view of the hidden-record table (see prof_sighandler.h). */
struct self_walk {
    const struct prof_sig_hiddens *hidden;
    const struct prof_sig_skip *skip;
    struct prof_sig_self *out;
    int calibrate;
};

/* The first frame record at or above `a`, word by word, at most `words` of them and below end: a
 * word that holds next followed by a code address outside skip (NULL: none). Its address, or 0. */
static uintptr_t record_from(uintptr_t a, uint32_t words, uintptr_t end, uintptr_t next,
                             const struct prof_sig_maps *m, const struct prof_sig_skip *skip)
{
    for (uint32_t i = 0; i < words && a + 16 <= end; i++, a += 8) {
        if (load_word(a) != next)
            continue;
        uintptr_t ra = load_word(a + 8);
        if (find_range(m->exec, m->nexec, ra) && !(skip && skipped(skip, ra)))
            return a;
    }
    return 0;
}

/* The frame at bp returns to x and its caller's frame is at next (> bp): appends the record the
 * chain passes over there if the table places one, or, where the table is silent and the walk
 * calibrates (or `probe` asks it to), notes the records that could be it (probes). Returns -1
 * when the walk must end. */
static int hidden_after(uintptr_t *ips, uint32_t *n, uint32_t max, uintptr_t bp, uintptr_t x,
                        uintptr_t next, uintptr_t top, const struct prof_sig_maps *m,
                        const struct prof_sig_codes *codes, struct self_walk *sw, int probe,
                        uint32_t *flags)
{
    uintptr_t end = next < top ? next : top;
    const struct prof_sig_hidden *h = find_hidden(sw->hidden, x);
    if (h && h->off > 0) {
        uintptr_t a = bp + (uintptr_t)h->off;
        if (a >= bp + 16 && a + 16 <= end && load_word(a) == next) {
            uintptr_t ra = load_word(a + 8);
            if (find_range(m->exec, m->nexec, ra) && !skipped(sw->skip, ra))
                return push(ips, n, max, a + 8, ra, next, top, m, codes, &sw->out->found,
                            &sw->out->hops, flags) < 0
                           ? -1
                           : 0;
            /* a record, but its return address is in no mapping the snapshot knows (code
             * mapped since): the frame would be missing */
            *flags |= PROF_SIG_F_NOTCODE;
        } else if (probe) {
            /* the leaf stub's record is not where it always was: the leaf may be missing */
            *flags |= PROF_SIG_F_STUB_UNKNOWN;
        } else {
            return 0; /* an OSR call site reached without OSR: nothing hidden this time */
        }
    }
    if (h && h->off == 0) {
        if (!probe)
            return 0;
        /* "nothing hidden" at the leaf stub is checked every time: a word there that could be a
         * hidden record (the saved rbp a record there would hold) makes the leaf unsure, and the
         * runtime walks the sample too. A stub reached both ways is never trusted blindly */
        int seen = 0;
        for (uint32_t i = 0; i < PROF_SIG_PROBE_WORDS && !seen; i++) {
            uintptr_t a = bp + 16 + 8 * i;
            if (a + 16 > end)
                break;
            seen = load_word(a) == next && could_return(m, load_word(a + 8));
        }
        if (!seen)
            return 0;
        *flags |= PROF_SIG_F_STUB_UNKNOWN;
    }
    /* probe where the table is silent, unsure, or just failed (or doubts "nothing hidden") */
    if (!(sw->calibrate || probe))
        return 0;
    const uintptr_t lim = bp + 16 + 8 * PROF_SIG_PROBE_WORDS;
    for (uintptr_t a = bp + 16; sw->out->nprobes < PROF_SIG_PROBES && a < lim; a += 8) {
        a = record_from(a, (uint32_t)((lim - a) / 8), end, next, m, sw->skip);
        if (!a)
            break;
        sw->out->probes[sw->out->nprobes++] = (struct prof_sig_probe){
            .step = *n, .off = (int32_t)(a - bp), .x = x, .ra = load_word(a + 8)};
    }
    return 0;
}

/* Whether an OSR frame returns to ra (see struct prof_sig_osrs). */
static int osr_returns(const struct prof_sig_osrs *t, uintptr_t ra)
{
    if (!t)
        return 0;
    uint32_t lo = 0, hi = t->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ra < t->ra[mid])
            hi = mid;
        else if (ra > t->ra[mid])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

/* The OSR frame at bp returned into its Tier0 code and chains to next: appends the Tier0 frame's
 * record between the two (the first word up from bp that holds next, followed by a code
 * address), marked in *found. Returns -1 when the walk must end. */
static int osr_record(uintptr_t *ips, uint32_t *n, uint32_t max, uintptr_t bp, uintptr_t next,
                      uintptr_t top, const struct prof_sig_maps *m,
                      const struct prof_sig_codes *codes, uint64_t *found, uint32_t *flags)
{
    uintptr_t a = record_from(bp + 16, PROF_SIG_OSR_SCAN, next < top ? next : top, next, m, NULL);
    if (!a)
        return 0;
    return push(ips, n, max, a + 8, load_word(a + 8), next, top, m, codes, found, found, flags) < 0
               ? -1
               : 0;
}

/* Frames in libraries without frame pointers (see prof_cfi.h), unwound by their CFI from pc (the
 * interrupted pc when `leaf`, else a return address already appended): appends each caller's
 * return address and leaves *sp and *bp those of the first frame outside such libraries (managed
 * code, libcoreclr), whose return address goes through push (which hops over frameless managed
 * callers), for the frame-pointer chain to go on from. Returns the steps made (0: none could be,
 * *sp and *bp untouched), or -1 when the walk ends here (PROF_SIG_F_ROOTED: at the thread's first
 * frame). */
static int cfi_frames(uintptr_t *ips, uint32_t *n, uint32_t max, uintptr_t pc, int leaf,
                      uintptr_t *sp, uintptr_t *bp, uintptr_t top, const struct prof_sig_maps *m,
                      uint32_t *flags)
{
    const struct prof_cfi *t = __atomic_load_n(&g_sig.cfi, __ATOMIC_ACQUIRE);
    const struct prof_cfi_lib *l = prof_cfi_find(t, pc);
    if (l && l->leaf_only && !leaf)
        l = NULL;
    int steps = 0;
    uintptr_t csp = *sp, cbp = *bp;
    while (l && steps < PROF_CFI_STEPS) {
        int outermost = 0;
        uintptr_t slot, ra = prof_cfi_step(l, pc, leaf && !steps, &csp, &cbp, top, &slot,
                                           &outermost);
        if (!ra) {
            if (!outermost)
                break;
            *flags |= PROF_SIG_F_ROOTED | (leaf && steps ? PROF_SIG_F_CFI : 0);
            return -1;
        }
        steps++;
        if (leaf)
            *flags |= PROF_SIG_F_CFI;
        *sp = csp;
        *bp = cbp;
        pc = ra;
        l = prof_cfi_find(t, ra);
        if (l && l->leaf_only)
            l = NULL; /* frame pointers from here */
        if (!l) {
            const struct prof_sig_codes *codes = __atomic_load_n(&g_sig.codes, __ATOMIC_SEQ_CST);
            return push(ips, n, max, slot, ra, top, top, m, codes, NULL, NULL, flags) < 0 ? -1
                                                                                         : steps;
        }
        if (*n >= max) {
            *flags |= PROF_SIG_F_TRUNCATED;
            return -1;
        }
        ips[(*n)++] = ra;
    }
    return steps;
}

/* Follows the frame-pointer chain from bp on the stack [sp, top), appending return addresses to
 * ips[n..max); returns the new count. Every load is a stack word inside [sp, top). A self-walk
 * (sw, NULL in the signal handler) leaves out the leading return addresses inside sw->skip, and
 * adds the frame records the chain passes over (hidden_after): where the skipped frames end (the
 * runtime stub the app's code called) and after each kept frame (OSR). */
static uint32_t chain(uintptr_t *ips, uint32_t n, uint32_t max, uintptr_t sp, uintptr_t bp,
                      uintptr_t top, const struct prof_sig_maps *m, struct self_walk *sw,
                      uint64_t *found, uint64_t *fresh, uint32_t *flags)
{
    const struct prof_sig_codes *codes = __atomic_load_n(&g_sig.codes, __ATOMIC_SEQ_CST);
    const struct prof_sig_osrs *osrs = __atomic_load_n(&g_sig.osr, __ATOMIC_SEQ_CST);
    int leading = sw != NULL;         /* still in clrscope's and the runtime's frames */
    uintptr_t last_bp = 0, last_x = 0; /* the last of those */
    while (bp >= sp && bp <= top - 16 && !(bp & 7)) {
        uintptr_t slot = bp + 8, ra = load_word(slot);
        uintptr_t next = load_word(bp);
        uintptr_t limit = next > bp ? next : top;
        if (leading && skipped(sw->skip, ra)) {
            if (!find_range(m->exec, m->nexec, ra))
                return n;
            last_bp = bp;
            last_x = ra;
        } else {
            if (leading && last_x) {
                const struct prof_sig_hidden *h = find_hidden(sw->hidden, last_x);
                sw->out->stub = last_x;
                sw->out->stub_off = h ? h->off : 0;
                if (!h || h->off == PROF_SIG_HIDDEN_UNSURE)
                    *flags |= PROF_SIG_F_STUB_UNKNOWN;
                /* an unknown stub is probed always: its sample is walked both ways anyway */
                if (hidden_after(ips, &n, max, last_bp, last_x, bp, top, m, codes, sw, 1,
                                 flags) < 0)
                    return n;
            }
            leading = 0;
            int hops;
            if (fresh && n < 64 && ra && !find_range(m->exec, m->nexec, ra) &&
                could_return(m, ra)) {
                /* a return into code mapped since the snapshot (the JIT's, at start-up and on
                 * tier-up): the record is kept, marked, and the chain goes on through it while
                 * the sampler takes a new snapshot; the naming keeps it (and what follows) if
                 * the JIT's own table knows it, else cuts the stack there as a word that only
                 * looked like code. Cut here, every sample until the refresh would lose its
                 * callers (under qemu-user, where code is mapped in small pieces, that was 2-6 %
                 * of a thread's first seconds) */
                *flags |= PROF_SIG_F_NEWCODE;
                __atomic_store_n(&g_sig.miss_ra, ra, __ATOMIC_RELAXED);
                if (n >= max) {
                    *flags |= PROF_SIG_F_TRUNCATED;
                    return n;
                }
                *fresh |= 1ull << n;
                ips[n++] = ra;
                hops = 0; /* (and no CFI knows it: the chain goes on from next) */
            } else {
                hops = push(ips, &n, max, slot, ra, limit, top, m, codes, NULL, NULL, flags);
            }
            if (hops < 0)
                return n;
            if (!sw && !hops) {
                /* a return into a library without frame pointers (a thread's start in libc, a
                 * callback from libc): its frames by their CFI; the frame returning to ra kept
                 * that code's rbp (next) and its sp is right above the record */
                uintptr_t csp = bp + 16, cbp = next;
                int k = cfi_frames(ips, &n, max, ra, 0, &csp, &cbp, top, m, flags);
                if (k < 0)
                    return n;
                if (k > 0) {
                    if (!cbp) { /* the frame reached is the thread's first (_start) */
                        *flags |= PROF_SIG_F_ROOTED;
                        return n;
                    }
                    sp = csp;
                    bp = cbp;
                    continue;
                }
            }
            uint32_t had = n;
            if (sw && !hops && next > bp &&
                hidden_after(ips, &n, max, bp, ra, next, top, m, codes, sw, 0, flags) < 0)
                return n;
            /* an OSR frame's Tier0 record, unless the self-walk's calibrated table just found it;
             * n < 64: the found frame must get its bit (the sampler checks it) */
            if (osrs && !hops && n == had && next > bp && n < 64 && osr_returns(osrs, ra) &&
                osr_record(ips, &n, max, bp, next, top, m, codes, sw ? &sw->out->found : found,
                           flags) < 0)
                return n;
        }
        if (next <= bp) {
            if (!next) /* rbp 0: the thread's first frame (clone and _start clear it) */
                *flags |= PROF_SIG_F_ROOTED;
            break;
        }
        bp = next;
    }
    return n;
}

/* Fills e->ips from the interrupted context; returns the number of frames. */
static uint32_t walk(struct prof_sig_entry *e, const ucontext_t *uc)
{
    const uint32_t max = (uint32_t)g_sig.max_frames;
    const uintptr_t pc = prof_arch_pc(uc);
    const uintptr_t sp = prof_arch_sp(uc);
    const uintptr_t bp = prof_arch_fp(uc);
    uint32_t n = 0;
    e->ips[n++] = pc;

    if (uc->uc_stack.ss_flags & SS_ONSTACK) {
        e->flags |= PROF_SIG_F_ALTSTACK;
        __atomic_add_fetch(&g_sig.altstack, 1, __ATOMIC_RELAXED);
        return n;
    }
    const struct prof_sig_maps *m = __atomic_load_n(&g_sig.maps, __ATOMIC_SEQ_CST);
    if (!m) {
        e->flags |= PROF_SIG_F_NOMAPS;
        return n;
    }
    /* A signal that lands in a system call the kernel does not restart (poll, epoll_wait,
     * nanosleep, ...; signal(7)) makes it return EINTR: the handler then sees the pc right after
     * the system call instruction (x86-64 syscall, arm64 svc #0) and -EINTR in the result
     * register. A restarted call has its pc moved back onto the instruction, and is not
     * counted. The instruction's bytes are read only where the snapshot knows code. */
    if (prof_arch_ret(uc) == -4 && pc >= PROF_ARCH_SYSCALL_LEN &&
        find_range(m->exec, m->nexec, pc - PROF_ARCH_SYSCALL_LEN) &&
        find_range(m->exec, m->nexec, pc - 1) &&
        prof_arch_is_syscall((const volatile uint8_t *)(pc - PROF_ARCH_SYSCALL_LEN)))
        e->flags |= PROF_SIG_F_EINTR;
    uint32_t flags = 0;
    uintptr_t top = stack_top(m, sp, &flags);
    if (!top) {
        e->flags |= flags;
        return n;
    }
    uint32_t w = 0;
    for (uintptr_t a = sp; w < PROF_SIG_WINDOW && a <= top - 8; a += 8)
        e->window[w++] = load_word(a);
    e->nwindow = w;
    uintptr_t csp = sp, cbp = bp;
    /* arm64: a function that calls nothing may keep its return address in the link register
     * and make no frame record, so the record at fp is its caller's, whose own return address
     * the chain reads next. A link register into another mapping than the pc's (the code that
     * called into a library: managed code, or another library) is that missing caller, unless
     * the record holds it already (the function made its record and has called nothing yet).
     * One into the pc's own mapping is left alone: it may be the function's own, after a call. */
    uintptr_t lr = prof_arch_lr(uc);
    if (lr && n < max) {
        const struct prof_sig_range *rp = find_range(m->exec, m->nexec, pc);
        const struct prof_sig_range *rl = find_range(m->exec, m->nexec, lr);
        uintptr_t ra0 = cbp >= sp && cbp <= top - 16 ? load_word(cbp + 8) : 0;
        if (rp && rl && rp != rl && lr != ra0) {
            e->ips[n++] = lr;
            e->flags |= PROF_SIG_F_LR;
        }
    }
    if (cfi_frames(e->ips, &n, max, pc, 1, &csp, &cbp, top, m, &flags) >= 0)
        n = chain(e->ips, n, max, csp, cbp, top, m, NULL, &e->found, &e->fresh, &flags);
    e->flags |= flags & (PROF_SIG_F_TRUNCATED | PROF_SIG_F_NEWCODE | PROF_SIG_F_CFI |
                         PROF_SIG_F_ROOTED);
    if (flags & PROF_SIG_F_NEWCODE) { /* the JIT may have mapped code since the snapshot */
        __atomic_add_fetch(&g_sig.code_miss, 1, __ATOMIC_RELAXED);
        wake_sampler();
    }
    return n;
}

/* Not in signal context, but under the same rules: no calls, no locks, loads only inside the
 * caller's own stack. noinline: the walk starts from this function's own frame. */
__attribute__((noinline)) uint32_t prof_sig_walk_self(uintptr_t *ips, uint32_t max,
                                                      const struct prof_sig_skip *skip,
                                                      int calibrate, struct prof_sig_self *out,
                                                      uint32_t *flags)
{
    static const struct prof_sig_skip none;
    uint32_t n = 0;
    *flags = 0;
    out->found = out->hops = 0;
    out->stub = 0;
    out->stub_off = 0;
    out->nprobes = 0;
    __atomic_add_fetch(&g_sig.inflight, 1, __ATOMIC_SEQ_CST);
    const struct prof_sig_maps *m = __atomic_load_n(&g_sig.maps, __ATOMIC_SEQ_CST);
    if (!m || !__atomic_load_n(&g_sig.self_walk, __ATOMIC_ACQUIRE)) {
        *flags |= PROF_SIG_F_NOMAPS;
    } else {
        struct self_walk sw = {.hidden = __atomic_load_n(&g_sig.hidden, __ATOMIC_SEQ_CST),
                               .skip = skip ? skip : &none,
                               .out = out,
                               .calibrate = calibrate};
        uintptr_t sp = prof_arch_stack_pointer(), bp = (uintptr_t)__builtin_frame_address(0);
        uintptr_t top = stack_top(m, sp, flags);
        if (top)
            n = chain(ips, 0, max, sp, bp, top, m, &sw, NULL, NULL, flags);
        if (*flags & PROF_SIG_F_NOTCODE) {
            __atomic_add_fetch(&g_sig.maps_miss, 1, __ATOMIC_RELAXED); /* new code? */
            wake_sampler();
        }
    }
    __atomic_sub_fetch(&g_sig.inflight, 1, __ATOMIC_SEQ_CST);
    return n;
}

void prof_sig_handler(int sig, siginfo_t *si, void *ucv)
{
    /* No call below can change errno: the handler calls nothing but raw system calls. */
    __atomic_add_fetch(&g_sig.inflight, 1, __ATOMIC_SEQ_CST);
    uint64_t c0 = prof_sig_cycles();
    int perf_fd = -1, wall = 0;
    uint32_t wall_seq = 0;
    uint64_t v;
    if (!si || !ucv)
        goto out;
    if (si->si_code == SI_TIMER) {
        v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
    } else if (si->si_code == SI_QUEUE) {
        /* a wall ask: only from this process, on the wall signal, with the tag */
        v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
        if (!g_sig.wall_signo || sig != g_sig.wall_signo || si->si_pid != g_sig.pid ||
            !((uint32_t)v & PROF_SIG_WALL_TAG))
            goto out;
        wall = 1;
        wall_seq = ((uint32_t)v >> PROF_SIG_WALL_SEQ_SHIFT) & PROF_SIG_WALL_SEQ_MASK;
        v &= ~(uint64_t)(PROF_SIG_WALL_TAG |
                         (PROF_SIG_WALL_SEQ_MASK << PROF_SIG_WALL_SEQ_SHIFT));
    } else if (si->si_code == POLL_HUP || si->si_code == POLL_IN) {
        /* a perf task-clock event's overflow: which one says si_fd; a late signal for an event
         * closed since (its fd maybe reused) maps to nothing or to another thread's ring */
        uint64_t *map = __atomic_load_n(&g_sig.fdmap, __ATOMIC_ACQUIRE);
        int fd = si->si_fd;
        if (!map || fd < 0 || fd >= g_sig.fdmap_len)
            goto out;
        v = __atomic_load_n(&map[fd], __ATOMIC_ACQUIRE);
        if (!v)
            goto out;
        perf_fd = fd;
    } else {
        goto out;
    }
    uint32_t idx = (uint32_t)v, gen = (uint32_t)(v >> 32);
    if (idx >= PROF_SIG_CHUNK * PROF_SIG_MAX_CHUNKS)
        goto out;
    char *chunk = (char *)__atomic_load_n(&g_sig.chunks[idx / PROF_SIG_CHUNK], __ATOMIC_ACQUIRE);
    if (!chunk)
        goto out;
    struct prof_sig_ring *r = (struct prof_sig_ring *)(chunk + (size_t)(idx % PROF_SIG_CHUNK) *
                                                                   g_sig.ring_size);
    if (__atomic_load_n(&r->gen, __ATOMIC_ACQUIRE) != gen ||
        ((perf_fd >= 0 || wall) && r->tid != (uint32_t)raw_syscall3(SYS_gettid, 0, 0, 0))) {
        __atomic_add_fetch(&g_sig.stale, 1, __ATOMIC_RELAXED);
        if (wall)
            goto answered; /* (with nothing: the sampler walks it another way) */
        goto out;
    }
    if (perf_fd < 0)
        goto sample;
    /* the first period was drawn at random (a thread that lives less than one is sampled with
     * the chance its CPU time says); the rest are whole */
    if (__atomic_load_n(&r->perf_first, __ATOMIC_RELAXED)) {
        __atomic_store_n(&r->perf_first, 0, __ATOMIC_RELAXED);
        raw_syscall3(SYS_ioctl, perf_fd, (long)PERF_EVENT_IOC_PERIOD, (long)&g_sig.perf_period);
    }
    /* the event disabled itself at the overflow: one more period, whatever becomes of this one */
    if (raw_syscall3(SYS_ioctl, perf_fd, (long)PERF_EVENT_IOC_REFRESH, 1) < 0)
        __atomic_add_fetch(&g_sig.rearm_failures, 1, __ATOMIC_RELAXED);
sample:;
    /* a perf signal's siginfo has no overrun (that field is its si_band) */
    uint32_t expirations =
        1u + (uint32_t)(perf_fd < 0 && !wall && si->si_overrun > 0 ? si->si_overrun : 0);
    struct prof_sig_entry *e = NULL;
    /* with wall asks on, CPU samples leave one entry free for an answer */
    uint32_t usable = wall || !__atomic_load_n(&g_sig.wall_signo, __ATOMIC_RELAXED)
                          ? g_sig.entries
                          : g_sig.entries - 1;
    for (uint32_t i = 0; i < usable && !e; i++) {
        struct prof_sig_entry *c = prof_sig_entry_at(r, i);
        uint32_t want = PROF_SIG_EMPTY;
        if (__atomic_compare_exchange_n(&c->state, &want, PROF_SIG_WRITING, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            e = c;
    }
    if (!e) {
        if (wall) {
            __atomic_add_fetch(&g_sig.wall_full, 1, __ATOMIC_RELAXED);
            goto answered;
        }
        __atomic_add_fetch(&r->lost, expirations, __ATOMIC_RELAXED);
        __atomic_add_fetch(&g_sig.ring_full, 1, __ATOMIC_RELAXED);
        goto out;
    }
    e->flags = wall ? PROF_SIG_F_WALL : 0;
    e->wall_seq = wall_seq;
    e->found = 0;
    e->fresh = 0;
    e->nwindow = 0;
    e->epoch = __atomic_load_n(&g_sig.unload_epoch, __ATOMIC_ACQUIRE);
    e->overrun = expirations - 1;
    e->jit = prof_sig_jit_top();
    e->cycles = c0;
    e->n = walk(e, ucv);
    e->cpu_end = -1;
    if (wall) { /* what the thread's clock says once it has walked (see prof_sampler_wall.c) */
        struct timespec ts;
        if (!raw_syscall3(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, (long)&ts, 0))
            e->cpu_end = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    }
    if ((e->flags & PROF_SIG_F_EINTR) && !wall)
        __atomic_add_fetch(&g_sig.interrupted, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&e->state, PROF_SIG_FULL, __ATOMIC_RELEASE);
    if (wall)
        goto answered;
    uint64_t handled = __atomic_add_fetch(&g_sig.handled, 1, __ATOMIC_SEQ_CST);
    uint64_t bell_at = __atomic_load_n(&g_sig.bell_at, __ATOMIC_SEQ_CST);
    if (bell_at && handled >= bell_at) /* half a ring's samples since the sampler's last drain */
        wake_sampler();
    goto out;
answered: /* the sampler may wait for the round's last answer */
    if (__atomic_sub_fetch(&g_sig.wall_left, 1, __ATOMIC_SEQ_CST) == 0)
        raw_syscall3(SYS_futex, (long)&g_sig.wall_left, FUTEX_WAKE_PRIVATE, 1);
out:
    __atomic_add_fetch(&g_sig.handler_cycles, prof_sig_cycles() - c0, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&g_sig.inflight, 1, __ATOMIC_SEQ_CST);
}
