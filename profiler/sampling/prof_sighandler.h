/*
 * prof_sighandler - the only code clrscope runs inside a signal handler, and the data it shares
 * with prof_sigsample (the rings, the perf events' map) and prof_maps (the maps snapshot and the
 * walk tables), plus the same frame-pointer walk of the calling thread for prof_walk
 * (prof_sig_walk_self).
 *
 * ctx: prof_sig_handler runs on an application thread, at any instruction, when that thread's
 * CPU timer fires. It is async-signal-safe by construction: no calls at all (not even libc), no
 * locks, no allocation, no TLS but the thread's JIT marks (below: initial-exec, defined in the
 * handler's own file, one load at a fixed offset from the thread pointer); it reads only
 * clrscope's own tables and the interrupted thread's own stack between its stack pointer and the
 * top of that stack, proven mapped beforehand (see prof_sighandler.c). tests/unit/check_handler_symbols.cmake checks that the object file
 * references no external symbol. prof_sig_walk_self: any thread, in a runtime callback, under
 * the same rules.
 *
 * Sharing protocol (all hand-offs are single atomic words):
 *   - prof_maps publishes immutable `struct prof_sig_maps` snapshots (and the walk tables) through
 *     g_sig.maps (codes, osr, hidden) and frees a replaced one only after it has seen
 *     g_sig.inflight == 0 after the swap;
 *   - rings live in chunks that are allocated once and never freed; a ring is owned by one
 *     thread at a time (ring->gen changes on every reassignment, and each timer carries the gen
 *     it was armed with in its sigevent value);
 *   - an entry goes EMPTY -> WRITING (handler, CAS) -> FULL (handler, release) -> EMPTY (sampler,
 *     after reading it), so a handler and the sampler never touch one entry at the same time.
 */
#ifndef PROF_SIGHANDLER_H
#define PROF_SIGHANDLER_H

#include <signal.h>
#include <stdint.h>

struct prof_cfi;

#define PROF_SIG_CHUNK 64         /* rings per chunk */
#define PROF_SIG_MAX_CHUNKS 128   /* 8192 rings at most */
#define PROF_SIG_MAX_ENTRIES 64   /* samples buffered per thread between two drains, at most */
#define PROF_SIG_WINDOW 32        /* stack words copied from sp up (the leaf's frame) */
#define PROF_SIG_MAX_HOPS 8       /* frameless callers followed in a row */

enum prof_sig_entry_state { PROF_SIG_EMPTY = 0, PROF_SIG_WRITING = 1, PROF_SIG_FULL = 2 };

/* Why a walk stopped early or did not start (entry->flags). */
enum prof_sig_flag {
    PROF_SIG_F_TRUNCATED = 1 << 0, /* max_frames reached before the end of the chain */
    PROF_SIG_F_NOMAPS = 1 << 1,    /* no maps snapshot yet */
    PROF_SIG_F_NOSTACK = 1 << 2,   /* the stack pointer is in no known stack: leaf only */
    PROF_SIG_F_ALTSTACK = 1 << 3,  /* interrupted on the signal alternate stack: leaf only */
    PROF_SIG_F_NOTCODE = 1 << 4,   /* the chain ended on an address in no executable mapping
                                    * (self-walk: or a hidden record's return address was in none) */
    PROF_SIG_F_STUB_UNKNOWN = 1 << 5, /* self-walk: the hidden-record table does not know the
                                       * runtime stub where the app's frames begin (or is unsure
                                       * of it, or a word there doubts "nothing hidden"): the
                                       * leaf may be missing */
    PROF_SIG_F_NEWCODE = 1 << 6, /* an address on the chain could be code mapped since the
                                  * snapshot (no writable mapping holds it, and it lies at or
                                  * above the lowest code the snapshot knows): the signal walk
                                  * went on through it, a self-walk ended there (with NOTCODE) */
    PROF_SIG_F_CFI = 1 << 7, /* the leaf's first frames were unwound by their CFI (prof_cfi.h):
                              * ips[1] is the leaf's caller, however the leaf used its stack */
    PROF_SIG_F_ROOTED = 1 << 8, /* the walk reached the thread's first frame (a zero frame
                                 * pointer or return address, or CFI that says so) */
    PROF_SIG_F_WALL = 1 << 9,   /* the answer to a wall tick's ask (g_sig.wall_signo), not a
                                 * CPU sample: entry->wall_seq says which ask */
    PROF_SIG_F_EINTR = 1 << 10, /* the signal cut a system call short: it returns EINTR to its
                                 * caller (pc right after a syscall instruction, rax -EINTR) */
    PROF_SIG_F_LR = 1 << 11,    /* arm64: the leaf's caller came from the link register */
};

/* A wall ask's signal value: (gen << 32) | PROF_SIG_WALL_TAG | (seq << 13) | ring index (ring
 * indexes stay below 1 << 13); sent by the sampler with rt_tgsigqueueinfo (SI_QUEUE, our pid). */
#define PROF_SIG_WALL_TAG 0x80000000u
#define PROF_SIG_WALL_SEQ_SHIFT 13
#define PROF_SIG_WALL_SEQ_MASK 0x3FFFFu

struct prof_sig_entry {
    uint32_t state;   /* atomic, enum prof_sig_entry_state */
    uint32_t n;       /* ips[0..n) valid: ips[0] = interrupted pc, then return addresses */
    uint32_t flags;   /* enum prof_sig_flag */
    uint32_t overrun; /* timer expirations folded into this one by the kernel */
    uint32_t nwindow; /* window[0..nwindow) = the words at sp, sp + 8, ... */
    uint32_t epoch;   /* g_sig.unload_epoch when the sample was taken (prof_unload.h) */
    uint64_t found;   /* bit i: ips[i] was read off the chain (an OSR method's Tier0 record) */
    uint64_t fresh;   /* bit i: ips[i] is in no mapping the snapshot knows, where code mapped
                       * since could be (PROF_SIG_F_NEWCODE): the naming keeps it and the frames
                       * after it only if it is the JIT's code */
    uintptr_t jit;    /* the method the thread's JIT was compiling (prof_sig_jit_top), or 0 */
    uint64_t cycles;  /* prof_sig_cycles() when the handler began: when the sample was taken */
    uint32_t wall_seq; /* PROF_SIG_F_WALL: the ask's sequence number (PROF_SIG_WALL_SEQ_MASK) */
    uint32_t pad;
    int64_t cpu_end;   /* PROF_SIG_F_WALL: the thread's CPU clock at the end of its walk (ns),
                        * -1 unread */
    uintptr_t window[PROF_SIG_WINDOW];
    uintptr_t ips[];  /* g_sig.max_frames entries */
};

struct prof_sig_ring {
    uint32_t gen;  /* atomic: bumped by the sampler whenever the ring changes owner */
    uint32_t tid;  /* owner (informational for the handler) */
    uint64_t lost; /* atomic: expirations dropped because every entry was full */
    uint32_t perf_first; /* atomic: its perf event still runs its random first period */
    /* then g_sig.entries entries of g_sig.entry_size bytes */
};

/* An address range of the process, [lo, hi). */
struct prof_sig_range {
    uintptr_t lo, hi;
    uint32_t flags;   /* PROF_SIG_R_* */
    const char *name; /* exec ranges: "[native libfoo.so]" (sampler only; the handler ignores it) */
};

enum { PROF_SIG_R_MAIN_STACK = 1 };

/* A managed method without a frame pointer: its return address sits `frame` bytes above the
 * stack pointer of its body, and it leaves rbp to its caller. */
struct prof_sig_code {
    uintptr_t lo, hi;
    uintptr_t frame;
};

/* An immutable, sorted set of such methods (learned by the sampler as it names frames). */
struct prof_sig_codes {
    uint32_t n;
    struct prof_sig_code c[];
};

/* Return addresses into Tier0 code that OSR frames return to. OSR code runs on its Tier0 frame,
 * and its own frame record copies the Tier0 frame's saved rbp (so it chains to the method's
 * caller) with the return address of the patchpoint call into the Tier0 code: the Tier0 record,
 * which holds the return address into the method's caller, is passed over. Where the chain meets
 * one of these addresses the signal walk looks for that record between the two frames (at most
 * PROF_SIG_OSR_SCAN words). Learned by the sampler as it names frames (OSR code followed by
 * Tier0 code of the same method). */
struct prof_sig_osrs {
    uint32_t n;
    uintptr_t ra[]; /* sorted */
};
#define PROF_SIG_OSR_SCAN 256

/* An immutable picture of /proc/self/maps, sorted by address. */
struct prof_sig_maps {
    const struct prof_sig_range *rw;   /* readable and writable mappings (thread stacks) */
    const struct prof_sig_range *exec; /* executable mappings (return address check) */
    uint32_t nrw, nexec;
    uintptr_t new_code_hi; /* code mapped later lies below this: the main thread's stack, when
                            * it lies above all code; else the top of user space */
};

/* Return addresses a self-walk leaves out while they lead the stack: [lo, hi) ranges (unused
 * ones empty), e.g. clrscope's own code and the runtime's. */
#define PROF_SIG_SKIP_RANGES 4
struct prof_sig_skip {
    uintptr_t lo[PROF_SIG_SKIP_RANGES], hi[PROF_SIG_SKIP_RANGES];
};

/* Where a frame record the chain passes over lies, for the frame whose return address is `ra`:
 * the record (saved rbp == that frame's saved rbp, return address) is `off` bytes above the
 * frame pointer. off 0: nothing is hidden there (published only for the leaf stub, and checked
 * at each walk: a word that could be a hidden record makes the leaf unsure);
 * PROF_SIG_HIDDEN_UNSURE: the place could not be
 * learned (a self-walk through it is not trusted). Learned by prof_walk (comparing with the
 * runtime's walk), published immutable and sorted by ra. Two things hide records:
 *   - the runtime's allocation stubs push rbp (with other registers, and leave a hole) but do
 *     not make it the frame pointer, so the runtime's frames below them chain straight to the
 *     allocating method's caller: the key is the return address into the stub;
 *   - OSR code copies its Tier0 frame's saved rbp instead of chaining to that frame, so the
 *     Tier0 record, with the return address into the method's caller, is passed over: the key is
 *     the return address into the Tier0 code. */
#define PROF_SIG_HIDDEN_UNSURE (-1)
struct prof_sig_hidden {
    uintptr_t ra;
    int32_t off;
    int32_t pad;
};
struct prof_sig_hiddens {
    uint32_t n;
    struct prof_sig_hidden h[];
};

/* A record a calibrating self-walk saw between a frame and the next one while the table said
 * nothing of that frame: it would be inserted at ips[step]. */
#define PROF_SIG_PROBES 8
#define PROF_SIG_PROBE_WORDS 48 /* words searched above a frame for such records */
struct prof_sig_probe {
    uint32_t step;
    int32_t off;   /* from the frame pointer of the frame whose return address is x */
    uintptr_t x;   /* that return address */
    uintptr_t ra;  /* the record's return address */
};

/* What a self-walk reports besides the addresses. */
struct prof_sig_self {
    uint64_t found;          /* bit i: ips[i] came from a hidden record (the table) */
    uint64_t hops;           /* bit i: ips[i] was reached from such a record by frameless hops */
    uintptr_t stub;          /* return address into the runtime where the app's frames begin */
    int32_t stub_off;        /* what the table says of it (0 unknown to the table: see flags) */
    uint32_t nprobes;        /* calibrating walks: probes[0..nprobes) */
    struct prof_sig_probe probes[PROF_SIG_PROBES];
};

/* What the handler shares (g_sig, defined in prof_sighandler.c, where it stays reachable from the
 * signal without any indirection). Writers: prof_sigsample_start, before the handler is
 * installed (max_frames, entry_size, entries, ring_size, fdmap_len, perf_period, fdmap itself);
 * the clrscope-sampler thread after (chunks, fdmap's entries); prof_maps, under
 * prof_codemap_lock() (maps, codes, hidden, osr, self_walk); prof_unload (unload_epoch); the
 * handlers and self-walks, on the sampled threads (inflight and the counters, which the sampler
 * thread reads for its stats). */
struct prof_sig_shared {
    int max_frames;     /* written before the handler is installed, then read-only */
    int self_walk;      /* atomic: maps (and codes) are kept current: self-walks may use them */
    uint32_t entry_size;
    uint32_t entries;   /* per ring (enough for a thread burning a core between two drains) */
    uint32_t ring_size;
    /* perf task-clock events (prof_sigsample.c): the ring of each event's fd, (gen << 32 |
     * ring index), 0 = not ours; fdmap_len entries, set before the handler can see them */
    uint64_t *fdmap; /* atomic entries */
    int fdmap_len;
    uint64_t perf_period; /* the events' period (ns of CPU), after their first */
    struct prof_sig_ring *chunks[PROF_SIG_MAX_CHUNKS]; /* atomic pointers, set once each */
    struct prof_sig_maps *maps;                         /* atomic */
    struct prof_sig_codes *codes;                       /* atomic, may be NULL */
    struct prof_sig_hiddens *hidden;                    /* atomic, may be NULL (self-walks) */
    struct prof_sig_osrs *osr;                          /* atomic, may be NULL (signal walks) */
    struct prof_cfi *cfi;       /* atomic, may be NULL: never freed, replaced when a listed library loads later (prof_cfi.h) */
    int inflight;                                       /* atomic: handlers running now */
    /* atomic counters (handler side) */
    uint64_t handled, stale, ring_full, no_stack, altstack, maps_miss;
    uint64_t interrupted; /* atomic: CPU samples that cut a system call short (EINTR) */
    uint64_t rearm_failures; /* atomic: perf events the handler could not re-enable */
    uint64_t code_miss; /* atomic: signal walks cut at an address that could be new code */
    uintptr_t miss_ra;  /* atomic: the last such address (NEWCODE) */
    uint32_t unload_epoch; /* atomic: prof_unload's epoch, copied there by prof_unload_started */
    uint64_t handler_cycles; /* atomic: time spent in the handler, in prof_sig_cycles() units */
    /* The sampler's doorbell while it naps through idle ticks (prof_sigsample_arm_bell): once
     * `handled` reaches bell_at (nonzero), or a walk finds the maps snapshot behind, whoever got
     * there clears it, bumps bell_word and wakes the futex on it: samples never wait long enough
     * to fill a ring, and a refresh of the snapshot never waits for the next wall tick. */
    uint64_t bell_at;   /* atomic */
    uint32_t bell_word; /* atomic; a futex word */
    /* Wall asks (prof_sigsample_wall.c): the signal they come on (0: none), the process they
     * must come from (a queued signal from elsewhere is ignored), and the asks of the current
     * round not yet answered, a futex word the answering handler wakes at 0 (late answers of an
     * earlier round may take it below). wall_full: answers that found the ring full. */
    int wall_signo;
    int pid;
    int32_t wall_left; /* atomic */
    uint64_t wall_full; /* atomic */
};

extern struct prof_sig_shared g_sig;

/* Wakes the sampler napping through idle ticks (prof_sigsample_arm_bell), once per arming: any
 * thread, signal handlers and runtime callbacks included (atomics and one raw system call). */
void prof_sig_wake_sampler(void);

/* The CPU's cycle counter (x86-64: the invariant TSC; arm64: the virtual counter), one
 * instruction and no call, for timing the handler; 0 elsewhere. Its rate is measured against
 * CLOCK_MONOTONIC by whoever converts it (prof_budget). */
static inline uint64_t prof_sig_cycles(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return 0;
#endif
}

/* The SA_SIGINFO handler. From a POSIX CPU timer (SI_TIMER) si->si_value carries (gen << 32 |
 * ring index); from a perf event (POLL_HUP) si->si_fd names the event, which g_sig.fdmap maps
 * to the same, and the handler re-enables the event for one more period; from a wall ask
 * (SI_QUEUE from this process, g_sig.wall_signo) the value above with PROF_SIG_WALL_TAG, and the
 * entry it writes is flagged PROF_SIG_F_WALL. */
void prof_sig_handler(int sig, siginfo_t *si, void *uc);

/* The calling thread's own frame-pointer chain, with the handler's checks, for runtime callbacks
 * that run on the thread an event is about (allocations): return addresses into ips[0..max),
 * leaf first, after leaving out the leading ones inside `skip` (may be NULL). Frame records the
 * chain passes over are added where g_sig.hidden says they are (out->found, out->hops). With
 * `calibrate`, records seen where the table is silent are reported as probes. Returns how many;
 * 0 with PROF_SIG_F_NOMAPS in *flags while no current maps snapshot exists (the caller falls
 * back to another walk). Calls nothing, takes no lock, allocates nothing; never faults. */
uint32_t prof_sig_walk_self(uintptr_t *ips, uint32_t max, const struct prof_sig_skip *skip,
                            int calibrate, struct prof_sig_self *out, uint32_t *flags);

/* The thread's JIT marks: the methods the runtime told it is compiling (JITCompilationStarted and
 * DynamicMethodJITCompilationStarted push the FunctionID, or PROF_SIG_JIT_DYNAMIC; the Finished
 * callbacks pop back to it), newest last, the newest PROF_SIG_JIT_MARKS kept. The runtime skips
 * the Finished callback when a compilation throws: a mark left behind sits under the newer ones
 * and names nothing while no compilation runs above it, since a sample is labelled only while the
 * JIT's own code is on its stack (prof_codemap_name_stack). Written by the runtime's callbacks on
 * the thread itself and read by its signal handler: the top entry is written before the depth
 * that shows it. */
#define PROF_SIG_JIT_MARKS 8
#define PROF_SIG_JIT_DYNAMIC ((uintptr_t)1) /* a dynamic method (no metadata, may be collected) */
struct prof_sig_jit_marks {
    uintptr_t fn[PROF_SIG_JIT_MARKS];
    uint32_t depth;
};
extern __thread __attribute__((tls_model("initial-exec"))) struct prof_sig_jit_marks prof_sig_jit;

static inline void prof_sig_jit_push(uintptr_t fn)
{
    struct prof_sig_jit_marks *m = &prof_sig_jit;
    uint32_t d = m->depth;
    if (d == PROF_SIG_JIT_MARKS) { /* forget the oldest */
        __atomic_store_n(&m->depth, d - 1, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        for (uint32_t i = 1; i < d; i++)
            m->fn[i - 1] = m->fn[i];
        d--;
    }
    m->fn[d] = fn;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&m->depth, d + 1, __ATOMIC_RELAXED);
}

static inline void prof_sig_jit_pop(uintptr_t fn)
{
    struct prof_sig_jit_marks *m = &prof_sig_jit;
    for (uint32_t i = m->depth; i-- > 0;)
        if (m->fn[i] == fn) {
            __atomic_store_n(&m->depth, i, __ATOMIC_RELAXED);
            return;
        }
}

/* The newest mark, or 0: the handler's read, on the same thread. */
static inline uintptr_t prof_sig_jit_top(void)
{
    uint32_t d = __atomic_load_n(&prof_sig_jit.depth, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return d && d <= PROF_SIG_JIT_MARKS ? prof_sig_jit.fn[d - 1] : 0;
}

static inline struct prof_sig_entry *prof_sig_entry_at(struct prof_sig_ring *r, int i)
{
    return (struct prof_sig_entry *)((char *)r + sizeof *r + (uint64_t)i * g_sig.entry_size);
}

#endif
