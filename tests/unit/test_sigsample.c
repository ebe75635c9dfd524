/*
 * test_sigsample.c - the signal sampler without a runtime: prologue decoding, call-site checks,
 * and the handler itself on real threads (frame-pointer walks, a frameless middle frame, threads
 * that load garbage into rbp, threads that come and go), all in this process. The handler must
 * never fault: a fault here kills the test. The maps snapshot (prof_maps) tells code from data
 * and names code by its module; a refresh asked for comes within 100 ms. Also: code mapped after
 * the maps snapshot is walked through within a fraction of a second, and a walk that ends at an
 * address no refresh explains does not make the sampler re-read /proc/self/maps at every tick.
 * Threads that each burn less CPU than one sampling interval are still sampled (the timers' first
 * expiry is random). A perf event's fd is closed only once no handler may still use it. A wall
 * ask that cuts short a call the kernel does not restart (poll) is seen as such, and the thread
 * that made it is asked no more.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prof_codemap.h"
#include "prof_maps.h"
#include "prof_sighandler.h"
#include "prof_sigsample.h"

#include "unit_check.h"

/* ---- decoding ---- */

static void test_decode(void)
{
    struct prof_frame_shape sh;
    /* framed: push rbp; push r15; push r14; push rbx; sub rsp,0x18; lea rbp,[rsp+0x30]; mov.. */
    static const uint8_t framed[] = {0x55, 0x41, 0x57, 0x41, 0x56, 0x53, 0x48, 0x83, 0xEC, 0x18,
                                     0x48, 0x8D, 0x6C, 0x24, 0x30, 0x48, 0x8B, 0xC7};
    prof_frame_decode(framed, sizeof framed, &sh);
    CHECK(sh.known && sh.framed && sh.fp_ready == 15, "framed: known %d framed %d fp_ready %u",
          sh.known, sh.framed, sh.fp_ready);
    static const uint8_t ret[] = {0xC3};
    static const uint8_t body[] = {0x48, 0x8B, 0xC7};
    CHECK(prof_frame_ra_offset(&sh, 0, framed, sizeof framed) == 0, "framed at entry");
    CHECK(prof_frame_ra_offset(&sh, 1, framed + 1, 4) == 8, "framed after push rbp");
    CHECK(prof_frame_ra_offset(&sh, 6, framed + 6, 4) == 32, "framed before sub rsp");
    CHECK(prof_frame_ra_offset(&sh, 10, framed + 10, 5) == 56, "framed before lea rbp");
    CHECK(prof_frame_ra_offset(&sh, 15, body, sizeof body) == -1, "framed body: rbp frames it");
    CHECK(prof_frame_ra_offset(&sh, 40, ret, 1) == 0, "framed at ret");

    /* mov rbp, rsp right after push rbp */
    static const uint8_t framed2[] = {0x55, 0x48, 0x89, 0xE5, 0x53, 0x50};
    prof_frame_decode(framed2, sizeof framed2, &sh);
    CHECK(sh.known && sh.framed && sh.fp_ready == 4, "push rbp; mov rbp,rsp");

    /* frameless: push rbx; sub rsp,0x10; mov rbx,rdi; call ... */
    static const uint8_t fl[] = {0x53, 0x48, 0x83, 0xEC, 0x10, 0x48, 0x8B, 0xDF, 0xE8, 0, 0, 0, 0};
    prof_frame_decode(fl, sizeof fl, &sh);
    CHECK(sh.known && !sh.framed && sh.frame == 24 && sh.prolog == 5,
          "frameless: known %d framed %d frame %u prolog %u", sh.known, sh.framed, sh.frame,
          sh.prolog);
    CHECK(prof_frame_ra_offset(&sh, 0, fl, sizeof fl) == 0, "frameless at entry");
    CHECK(prof_frame_ra_offset(&sh, 1, fl + 1, 4) == 8, "frameless after push");
    CHECK(prof_frame_ra_offset(&sh, 5, fl + 5, 8) == 24, "frameless body");
    static const uint8_t epi[] = {0x48, 0x83, 0xC4, 0x10, 0x5B, 0xC3};
    CHECK(prof_frame_ra_offset(&sh, 20, epi, sizeof epi) == 24, "frameless at add rsp");
    CHECK(prof_frame_ra_offset(&sh, 24, epi + 4, 2) == 8, "frameless at pop");
    CHECK(prof_frame_ra_offset(&sh, 25, epi + 5, 1) == 0, "frameless at ret");
    static const uint8_t tail[] = {0x48, 0x83, 0xC4, 0x10, 0x5B, 0xE9, 0, 0, 0, 0};
    CHECK(prof_frame_ra_offset(&sh, 20, tail, sizeof tail) == 24, "frameless tail call");

    /* push rax for alignment, then a call */
    static const uint8_t pushrax[] = {0x50, 0xE8, 0, 0, 0, 0};
    prof_frame_decode(pushrax, sizeof pushrax, &sh);
    CHECK(sh.known && !sh.framed && sh.frame == 8, "push rax: frame %u", sh.frame);

    /* no prologue at all: mov eax,[rdi+8]; ret */
    static const uint8_t none[] = {0x8B, 0x47, 0x08, 0xC3};
    prof_frame_decode(none, sizeof none, &sh);
    CHECK(sh.known && !sh.framed && sh.frame == 0 && sh.prolog == 0, "no prologue");

    /* rbp pushed but never set: not a JIT form */
    static const uint8_t odd[] = {0x55, 0x48, 0x8B, 0xC7};
    prof_frame_decode(odd, sizeof odd, &sh);
    CHECK(!sh.known, "push rbp without setting it is unknown");
    /* ran out of bytes inside the prologue */
    prof_frame_decode(framed, 6, &sh);
    CHECK(!sh.known, "truncated prologue is unknown");
    prof_frame_decode(NULL, 0, &sh);
    CHECK(!sh.known, "no bytes");
}

static void test_call_sites(void)
{
    struct {
        uint8_t b[8];
        int is_call;
        const char *what;
    } cases[] = {
        {{0x90, 0x90, 0x90, 0xE8, 1, 2, 3, 4}, 1, "call rel32"},
        {{0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xFF, 0xD0}, 1, "call rax"},
        {{0x90, 0x90, 0x90, 0x90, 0x90, 0x41, 0xFF, 0xD3}, 1, "call r11"},
        {{0x90, 0x90, 0x90, 0x90, 0x90, 0xFF, 0x50, 0x08}, 1, "call [rax+8]"},
        {{0x90, 0x90, 0xFF, 0x15, 1, 2, 3, 4}, 1, "call [rip+disp32]"},
        {{0x90, 0x90, 0x90, 0x90, 0xFF, 0x54, 0x24, 0x08}, 1, "call [rsp+8]"},
        {{0x90, 0x90, 0x90, 0x90, 0x41, 0xFF, 0x52, 0x10}, 1, "call [r10+16]"},
        {{0x90, 0x41, 0xFF, 0x93, 1, 2, 3, 4}, 1, "call [r11+disp32]"},
        {{0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90}, 0, "nops"},
        {{0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xFF, 0xE0}, 0, "jmp rax"},
        {{0x90, 0x90, 0x90, 0x90, 0x48, 0x8B, 0x45, 0x08}, 0, "mov rax,[rbp+8]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECK(prof_frame_is_call_site(cases[i].b, 8) == cases[i].is_call, "%s", cases[i].what);
}

/* ---- the handler on live threads ---- */

struct got {
    pthread_mutex_t lock;
    uint32_t tid;         /* only samples of this thread are checked (0 = any) */
    uintptr_t lo[3], hi[3]; /* code ranges to look for, innermost first */
    int samples, complete, any_frames;
    int mine; /* samples of `tid` */
    int64_t cpu_ns;
};

static int in(uintptr_t ip, uintptr_t lo, uintptr_t hi)
{
    return ip >= lo && ip < hi;
}

static void on_sample(void *arg, const struct prof_sigsample *s)
{
    struct got *g = arg;
    pthread_mutex_lock(&g->lock);
    g->samples++;
    g->cpu_ns += s->cpu_ns;
    g->any_frames += s->n > 1;
    if (!g->tid || s->tid == g->tid) {
        g->mine++;
        /* innermost range first, the others must follow in order */
        int want = 0;
        for (int i = 0; i < s->n && want < 3; i++) {
            uintptr_t ip = i ? s->ips[i] - 1 : s->ips[i];
            if (g->hi[want] && in(ip, g->lo[want], g->hi[want]))
                want++;
        }
        if (want == 3 || (want && !g->hi[want]))
            g->complete++;
    }
    pthread_mutex_unlock(&g->lock);
}

static volatile int stop_threads;
static volatile uint64_t sink;

__attribute__((noinline)) static void publish(uint64_t x)
{
    sink = x;
}

/* not a leaf, so that it keeps its frame pointer whatever -momit-leaf-frame-pointer says */
__attribute__((noinline)) static void inner_spin(volatile int *stop)
{
    uint64_t x = 88172645463325252ULL;
    while (!*stop) {
        for (int i = 0; i < 100000; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        publish(x);
    }
}

/* compiled without a frame pointer: the chain skips its caller unless the table says its size */
__attribute__((noinline, optimize("omit-frame-pointer"))) static void middle(volatile int *stop)
{
    inner_spin(stop);
    sink++;
}

__attribute__((noinline)) static void outer(volatile int *stop)
{
    middle(stop);
    sink++;
}

static void end_marker(void)
{
}

struct spin_arg {
    volatile uint32_t tid;
    volatile int stop;
};

static void *spin_thread(void *arg)
{
    struct spin_arg *a = arg;
    a->tid = (uint32_t)syscall(SYS_gettid);
    outer(&a->stop);
    return NULL;
}

/* Spins ~300,000 iterations with rbp = v: every sample taken meanwhile walks from v. */
__attribute__((always_inline)) static inline void spin_with_rbp(uintptr_t v)
{
    __asm__ volatile("sub $128, %%rsp\n\t" /* keep out of the red zone */
                     "push %%rbp\n\t"
                     "mov %0, %%rbp\n\t"
                     "mov $300000, %%ecx\n\t"
                     "1: dec %%ecx\n\t"
                     "jnz 1b\n\t"
                     "pop %%rbp\n\t"
                     "add $128, %%rsp"
                     :
                     : "r"(v)
                     : "rcx", "memory", "cc");
}

/* rbp set to hostile values while spinning: the walk must stop, never fault */
static void *garbage_thread(void *arg)
{
    *(volatile uint32_t *)arg = (uint32_t)syscall(SYS_gettid);
    uintptr_t fake[64]; /* a "frame chain" on the stack pointing wherever */
    for (int i = 0; i < 64; i++)
        fake[i] = i % 2 ? (uintptr_t)&fake[i + 1] : (uintptr_t)0x10;
    fake[62] = (uintptr_t)&fake[63] + (1u << 20); /* far above the stack top */
    uintptr_t vals[] = {0, 1, 8, 0x1000, (uintptr_t)-16, (uintptr_t)0x7ffffffff000ULL,
                        (uintptr_t)&fake[0], (uintptr_t)&fake[1], (uintptr_t)&fake[62],
                        (uintptr_t)end_marker, (uintptr_t)&vals, 0xdeadbeefcafebabeULL};
    while (!stop_threads)
        for (size_t i = 0; i < sizeof vals / sizeof *vals && !stop_threads; i++) {
            spin_with_rbp(vals[i]);
        }
    return NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void pump(uint32_t *tids, size_t n, struct got *g, int ms)
{
    for (int t = 0; t < ms; t += 10) {
        sleep_ms(10);
        uint32_t copy[16];
        if (n)
            memcpy(copy, tids, n * sizeof *tids);
        prof_sigsample_sync(copy, n, on_sample, g);
        prof_sigsample_drain(on_sample, g);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        prof_sigsample_maintain((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    }
}

/* ---- a runtime stub that hides its caller's frame record ---- */

/* Two stand-ins for the runtime's allocation stubs, in a section of their own that plays the
 * runtime (the self-walk leaves it out). hiding_stub(arg, fn) pushes rbp (and rbx, and leaves a
 * 40-byte hole) without making rbp its frame pointer, as the runtime's stubs do: the frames it
 * calls chain straight past its caller, whose record lies 64 bytes above stub_inner's frame.
 * framed_stub(arg, fn) makes its own frame (and zeroes its hole): nothing is hidden.
 * copying_stub(arg, fn) makes its own frame too, but keeps a copy of its rbp in its hole followed
 * by a stack pointer, as the runtime's allocation helper on .NET 8 and 9 keeps saved registers:
 * no record, nothing hidden. counting_stub(arg, fn) keeps a copy of its rbp followed by a number
 * (0x82ed6c, a byte count as that helper keeps), which no code mapping holds: no record either. */
/* framed_stub's shape, with the words at 16 and 24 above its stack pointer given */
#define FRAMED_STUB(name, put16, put24)                                                           \
    ".p2align 4\n" name ":\n"                                                                    \
    "  push %rbp\n"                                                                              \
    "  mov %rsp, %rbp\n"                                                                         \
    "  sub $48, %rsp\n"                                                                          \
    "  movq $0, (%rsp)\n"                                                                        \
    "  movq $0, 8(%rsp)\n"                                                                       \
    "  " put16 ", 16(%rsp)\n"                                                                    \
    "  " put24 ", 24(%rsp)\n"                                                                    \
    "  movq $0, 32(%rsp)\n"                                                                      \
    "  movq $0, 40(%rsp)\n"                                                                      \
    "  call *%rsi\n"                                                                             \
    "  leave\n"                                                                                  \
    "  ret\n"
__asm__(".pushsection clrscope_fake_runtime,\"ax\",@progbits\n"
        ".p2align 4\n"
        "hiding_stub:\n"
        "  push %rbp\n"
        "  push %rbx\n"
        "  sub $40, %rsp\n"
        "  call *%rsi\n"
        "  add $40, %rsp\n"
        "  pop %rbx\n"
        "  pop %rbp\n"
        "  ret\n"
        FRAMED_STUB("framed_stub", "movq $0", "movq $0")
        FRAMED_STUB("copying_stub", "mov %rbp", "mov %rsp")
        FRAMED_STUB("counting_stub", "mov %rbp", "movq $0x82ed6c")
        ".popsection\n");
void hiding_stub(void *arg, void (*fn)(void *));
void framed_stub(void *arg, void (*fn)(void *));
void copying_stub(void *arg, void (*fn)(void *));
void counting_stub(void *arg, void (*fn)(void *));
extern const char __start_clrscope_fake_runtime[], __stop_clrscope_fake_runtime[];

struct self_case {
    struct prof_sig_skip skip;
    int calibrate;
    uint32_t n, flags;
    struct prof_sig_self out;
    uintptr_t ips[64];
};

/* the runtime's code the stubs call, which walks its own thread (as the allocation callback) */
__attribute__((noinline, section("clrscope_fake_runtime"))) static void stub_inner(void *arg)
{
    struct self_case *c = arg;
    c->n = prof_sig_walk_self(c->ips, 64, &c->skip, c->calibrate, &c->out, &c->flags);
    sink++;
}

/* the app's method that calls a stub: 0 framed_stub, 1 hiding_stub, 2 copying_stub,
 * 3 counting_stub */
__attribute__((noinline)) static void app_frame(struct self_case *c, int hiding)
{
    if (hiding == 1)
        hiding_stub(c, stub_inner);
    else if (hiding == 2)
        copying_stub(c, stub_inner);
    else if (hiding == 3)
        counting_stub(c, stub_inner);
    else
        framed_stub(c, stub_inner);
    sink++;
}

static int in_app_frame(uintptr_t ra)
{
    return ra > (uintptr_t)app_frame && ra < (uintptr_t)app_frame + 128;
}

static void self_walk(struct self_case *c, int hiding, int calibrate)
{
    memset(c, 0, sizeof *c);
    c->skip.lo[0] = (uintptr_t)__start_clrscope_fake_runtime;
    c->skip.hi[0] = (uintptr_t)__stop_clrscope_fake_runtime;
    c->calibrate = calibrate;
    app_frame(c, hiding);
}

/* A stub of kind `hiding` that hides no record chains to the app's frame, and once published
 * "nothing hidden" (offset 0) the walk trusts it (replaces what was published before). */
static void trusted_when_published(struct self_case *c, int hiding, const char *what)
{
    self_walk(c, hiding, 1);
    CHECK(c->n > 0 && in_app_frame(c->ips[0]), "%s chains to the app's frame", what);
    struct prof_sig_hidden h = {.ra = c->out.stub, .off = 0};
    prof_maps_set_hidden(&h, 1);
    self_walk(c, hiding, 0);
    CHECK(!(c->flags & PROF_SIG_F_STUB_UNKNOWN) && c->n > 0 && in_app_frame(c->ips[0]),
          "\"nothing hidden\" published for %s: trusted (flags %#x)", what, c->flags);
}

/* The allocation walk's view of a stub that hides a record: unknown to the table it is flagged
 * (and probed); with the offset published the hidden frame is found; published "nothing hidden"
 * it is still flagged (the check each walk makes), while a stub that really hides nothing is
 * not. Needs prof_sigsample_start (the maps snapshot). */
static void test_hidden_stub(void)
{
    struct self_case c;
    struct prof_sig_hidden h = {0};
    prof_maps_set_hidden(&h, 0);
    self_walk(&c, 1, 1);
    CHECK(c.n > 0 && c.out.stub != 0, "self-walk through the hiding stub: %u frames", c.n);
    uintptr_t x = c.out.stub;
    CHECK(c.flags & PROF_SIG_F_STUB_UNKNOWN, "a stub the table does not know is flagged");
    CHECK(c.n > 0 && !in_app_frame(c.ips[0]), "the chain passes over the app's frame");
    int probed = 0;
    for (uint32_t i = 0; i < c.out.nprobes; i++)
        probed |= c.out.probes[i].step == 0 && c.out.probes[i].x == x &&
                  c.out.probes[i].off == 64 && in_app_frame(c.out.probes[i].ra);
    CHECK(probed, "a probe places the hidden record 64 bytes above the frame (%u probes)",
          c.out.nprobes);

    h = (struct prof_sig_hidden){.ra = x, .off = 64};
    prof_maps_set_hidden(&h, 1);
    self_walk(&c, 1, 0);
    CHECK(!(c.flags & PROF_SIG_F_STUB_UNKNOWN) && c.n > 0 && in_app_frame(c.ips[0]) &&
              (c.out.found & 1),
          "offset published: the app's frame is found (flags %#x)", c.flags);

    h.off = 0; /* wrong: "nothing hidden" */
    prof_maps_set_hidden(&h, 1);
    self_walk(&c, 1, 0);
    CHECK(c.flags & PROF_SIG_F_STUB_UNKNOWN,
          "\"nothing hidden\" published for a stub that hides a record: the walk doubts it");

    trusted_when_published(&c, 0, "a framed stub that hides nothing");
    /* a copy of rbp followed by a stack pointer is no record: "nothing hidden" stays trusted */
    trusted_when_published(&c, 2, "a stub keeping a copy of rbp and a stack pointer");
    /* nor by a number below all code: new code is mapped among the mappings, never down there */
    trusted_when_published(&c, 3, "a stub keeping a copy of rbp and a number");
    prof_maps_set_hidden(&h, 0);
}

/* ---- code mapped after the snapshot ---- */

/* A trampoline written into a fresh executable page: tramp(stop, fn) makes a frame and calls
 * fn(stop), as JIT'd code mapped after the snapshot calls back into known code. */
static const uint8_t tramp_code[] = {
    0x55,             /* push %rbp */
    0x48, 0x89, 0xe5, /* mov %rsp, %rbp */
    0xff, 0xd6,       /* call *%rsi */
    0x5d,             /* pop %rbp */
    0xc3,             /* ret */
};
typedef void (*tramp_fn)(volatile int *stop, void (*fn)(volatile int *));

struct late_arg {
    volatile uint32_t tid;
    volatile int go, stop;
    volatile tramp_fn tramp;
};

__attribute__((noinline)) static void late_caller(struct late_arg *a)
{
    a->tramp(&a->stop, inner_spin);
    sink++;
}

static void *late_thread(void *arg)
{
    struct late_arg *a = arg;
    a->tid = (uint32_t)syscall(SYS_gettid);
    while (!a->go)
        sleep_ms(1);
    late_caller(a);
    return NULL;
}

/* A frame record whose return address lies in a PROT_NONE reservation: it looks like code mapped
 * since the snapshot, and no refresh will ever show it. */
static void *phantom_thread(void *arg)
{
    struct late_arg *a = arg;
    a->tid = (uint32_t)syscall(SYS_gettid);
    uintptr_t rec[4] = {0, (uintptr_t)a->tramp, 0, 0};
    rec[0] = (uintptr_t)&rec[2];
    while (!a->stop) {
        spin_with_rbp((uintptr_t)&rec[0]);
    }
    return NULL;
}

/* Needs the sampler started, and no other sampled thread. */
static void test_late_code(void)
{
    struct prof_sigsample_stats st0, st1, st2;
    /* a thread whose walks end at a phantom: one refresh finds no code there, and the page is
     * not asked about again (at 100 ms, 17 refreshes in 1.7 s) */
    void *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(none != MAP_FAILED, "reserve a page");
    struct late_arg ph = {.tramp = (tramp_fn)none};
    prof_sigsample_get_stats(&st0);
    pthread_t pt;
    pthread_create(&pt, NULL, phantom_thread, &ph);
    while (!ph.tid)
        sleep_ms(1);
    struct got g = {.lock = PTHREAD_MUTEX_INITIALIZER};
    uint32_t one[1] = {ph.tid};
    pump(one, 1, &g, 1700);
    prof_sigsample_get_stats(&st1);
    ph.stop = 1;
    pthread_join(pt, NULL);
    uint64_t asked = st1.new_code - st0.new_code;
    uint64_t refreshes = st1.maps_refreshes - st0.maps_refreshes;
    CHECK(asked >= 20, "walks ended at the phantom: %llu", (unsigned long long)asked);
    CHECK(refreshes >= 1 && refreshes <= 3, "refreshes while the phantom asks for them: %llu "
          "(its thread's stack, then one for the phantom)", (unsigned long long)refreshes);

    /* code mapped after the snapshot: walked through at once (the walks ask for a refresh, and
     * one follows within ~0.1 s), and after the refresh shows it */
    struct late_arg a = {0};
    pthread_t lt;
    pthread_create(&lt, NULL, late_thread, &a);
    while (!a.tid)
        sleep_ms(1);
    uint32_t tid[1] = {a.tid};
    pump(tid, 1, &g, 300); /* armed, and its stack in a snapshot; the page is not */
    uint8_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED, "map a page");
    memcpy(page, tramp_code, sizeof tramp_code);
    CHECK(mprotect(page, 4096, PROT_READ | PROT_EXEC) == 0, "make it executable");
    a.tramp = (tramp_fn)page;
    prof_sigsample_get_stats(&st1);
    struct got warm = {.lock = PTHREAD_MUTEX_INITIALIZER, .tid = a.tid};
    warm.lo[0] = (uintptr_t)inner_spin, warm.hi[0] = (uintptr_t)inner_spin + 256;
    warm.lo[1] = (uintptr_t)page, warm.hi[1] = (uintptr_t)page + sizeof tramp_code;
    warm.lo[2] = (uintptr_t)late_caller, warm.hi[2] = (uintptr_t)late_caller + 64;
    struct got late = warm;
    a.go = 1;
    for (int i = 0; i < 4; i++) { /* drained without prof_sigsample_maintain: no refresh */
        sleep_ms(10);
        prof_sigsample_drain(on_sample, &warm);
    }
    pump(tid, 1, &late, 800);
    prof_sigsample_get_stats(&st2);
    a.stop = 1;
    pthread_join(lt, NULL);
    pump(NULL, 0, &g, 20);
    CHECK(st2.new_code > st1.new_code, "walks into the new page asked for a refresh: %llu",
          (unsigned long long)(st2.new_code - st1.new_code));
    CHECK(warm.mine >= 3 && warm.complete * 10 >= warm.mine * 8, "inner <- new page <- caller in "
          "%d of %d samples before a refresh could show the page", warm.complete, warm.mine);
    CHECK(late.mine >= 20 && late.complete * 10 >= late.mine * 8, "inner <- new page <- caller in "
          "%d of %d samples after those", late.complete, late.mine);
    munmap(page, 4096);
    munmap(none, 4096);
}

/* ---- threads shorter than an interval ---- */

struct brief_arg {
    volatile uint32_t tid;
    volatile int go;
    int64_t burn_ns;
};

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *brief_thread(void *arg)
{
    struct brief_arg *a = arg;
    a->tid = (uint32_t)syscall(SYS_gettid);
    while (!a->go)
        sleep_ms(1);
    int64_t end = thread_cpu_ns() + a->burn_ns;
    uint64_t x = 88172645463325252ULL;
    while (thread_cpu_ns() < end) {
        for (int i = 0; i < 1000; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        publish(x);
    }
    return NULL;
}

/* 200 threads, each armed before it starts to burn 0.9 ms of CPU (the interval is 1 ms) and
 * disarmed after it ends: with the first expiry one whole interval away no such thread was ever
 * sampled; drawn within the first interval, some are. The kernel checks CPU timers at its tick
 * (every 1-10 ms), so far fewer than 90 % of them are: a thread must still run at a tick after
 * its expiry. */
static void test_brief_threads(void)
{
    struct got g = {.lock = PTHREAD_MUTEX_INITIALIZER};
    int sampled = 0;
    for (int i = 0; i < 200; i++) {
        struct brief_arg a = {.burn_ns = 900000};
        pthread_t t;
        pthread_create(&t, NULL, brief_thread, &a);
        while (!a.tid)
            sleep_ms(1);
        uint32_t one[1] = {a.tid};
        prof_sigsample_sync(one, 1, on_sample, &g);
        int before = g.samples;
        a.go = 1;
        pthread_join(t, NULL);
        prof_sigsample_sync(NULL, 0, on_sample, &g); /* disarms and drains */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        prof_sigsample_maintain((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec); /* frees rings */
        sampled += g.samples > before;
    }
    struct prof_sigsample_stats st;
    prof_sigsample_get_stats(&st);
    CHECK(st.timer_failures == 0, "every brief thread armed: %llu failures",
          (unsigned long long)st.timer_failures);
    CHECK(sampled >= 3, "threads burning 0.9 ms at a 1 ms interval: %d of 200 sampled", sampled);
}

/* The maps snapshot's lookups (prof_maps): code and its module's name; a page of code mapped
 * after the snapshot is unknown until a refresh asked for (prof_maps_refresh) comes, and it
 * comes within the 100 ms a sure request waits at most. Needs prof_sigsample_start. */
static void test_maps_lookups(void)
{
    int local = 0;
    CHECK(prof_maps_is_code((uintptr_t)outer), "this test's code is code");
    CHECK(!prof_maps_is_code((uintptr_t)&local), "its stack is not");
    const char *own = prof_maps_native_name((uintptr_t)outer);
    CHECK(!strcmp(own, "[native test_sigsample]"), "its code is named %s", own);
    const char *libc = prof_maps_native_name((uintptr_t)nanosleep);
    CHECK(!strncmp(libc, "[native libc", 12), "nanosleep's code is named %s", libc);
    CHECK(!strcmp(prof_maps_native_name((uintptr_t)&local), "[native code]"),
          "an address in no code mapping is \"[native code]\"");

    uint8_t *page = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED, "map a page of code");
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    prof_maps_maintain((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    CHECK(!prof_maps_is_code((uintptr_t)page), "code mapped after the snapshot is unknown");
    prof_maps_refresh(1);
    sleep_ms(110);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    prof_maps_maintain((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    CHECK(prof_maps_is_code((uintptr_t)page), "known after the refresh it asked for");
    CHECK(!strcmp(prof_maps_native_name((uintptr_t)page), "[native code]"),
          "anonymous code is \"[native code]\"");
    munmap(page, 4096);
}

/* perf events open now: the fds of /proc/self/fd that are perf events */
static int perf_fds(void)
{
    int n = 0;
    char path[64], target[64];
    for (int fd = 0; fd < 4096; fd++) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t l = readlink(path, target, sizeof target - 1);
        if (l <= 0)
            continue;
        target[l] = 0;
        n += !strcmp(target, "anon_inode:[perf_event]");
    }
    return n;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A handler that read a perf event's fd from the map may still ioctl it after the sampler let the
 * event go (a clock change, a thread gone): the fd is closed only once no handler runs, else the
 * handler's ioctl could reach whatever file the app opens next under that number. A handler in
 * flight is played by raising the count the handlers keep. Then back to perf events. */
static void test_perf_fds_retired(struct got *g, uint32_t armed_threads)
{
    struct prof_sigsample_stats st;
    prof_sigsample_get_stats(&st);
    if (!st.perf_threads) {
        printf("skip: no perf events here (%s), their fds not checked\n",
               st.timer_off ? st.timer_off : "?");
        return;
    }
    /* an event let go earlier (a thread that ended) is closed by a maintain with no handler in
     * flight: done first, so that what follows counts only this change's events */
    prof_sigsample_maintain(now_ns());
    int before = perf_fds();
    CHECK(before >= (int)st.perf_threads, "%d perf fds open for %llu threads on perf events",
          before, (unsigned long long)st.perf_threads);
    __atomic_add_fetch(&g_sig.inflight, 1, __ATOMIC_SEQ_CST);
    prof_sigsample_use_perf(0, now_ns(), on_sample, g);
    prof_sigsample_maintain(now_ns());
    struct prof_sigsample_stats mid;
    prof_sigsample_get_stats(&mid);
    CHECK(mid.perf_threads == 0 && mid.threads == armed_threads,
          "POSIX timers on all %u threads: %llu armed, %llu on perf events", armed_threads,
          (unsigned long long)mid.threads, (unsigned long long)mid.perf_threads);
    int during = perf_fds();
    CHECK(during == before, "perf fds while a handler runs: %d, before the change %d (closed "
          "under a handler that may still use them)", during, before);
    __atomic_sub_fetch(&g_sig.inflight, 1, __ATOMIC_SEQ_CST);
    prof_sigsample_maintain(now_ns());
    int after = perf_fds();
    /* (at most: one more let go meanwhile, a thread that ended, is closed with them) */
    CHECK(after <= before - (int)st.perf_threads, "perf fds once no handler runs: %d (%d before, "
          "%llu let go)", after, before, (unsigned long long)st.perf_threads);
    prof_sigsample_use_perf(1, now_ns(), on_sample, g);
    prof_sigsample_get_stats(&mid);
    CHECK(mid.perf_threads == st.perf_threads, "perf events again: %llu threads (were %llu)",
          (unsigned long long)mid.perf_threads, (unsigned long long)st.perf_threads);
}

/* ---- a wall ask that cuts a poll short ---- */

struct poller {
    volatile uint32_t tid;
    volatile int stop, polls, eintr;
    int cpu_signo; /* the CPU sampler's signal, blocked on the poller */
};

static void *poll_thread(void *arg)
{
    struct poller *p = arg;
    /* a CPU sample that falls in the kernel's part of the call (perf events count it; ASan's
     * poll interceptor adds to it) would cut it short too: this thread is about the wall ask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, p->cpu_signo);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    p->tid = (uint32_t)syscall(SYS_gettid);
    while (!p->stop) {
        int r = poll(NULL, 0, 100); /* libc's poll, called by this test's code */
        p->eintr += r < 0 && errno == EINTR;
        p->polls++;
    }
    return NULL;
}

struct wall_got {
    int answers, interrupted;
};

static int on_wall(void *arg, const struct prof_sigsample *s)
{
    struct wall_got *w = arg;
    w->answers++;
    w->interrupted += (s->flags & PROF_SIG_F_EINTR) != 0;
    return 1;
}

/* The thread is blocked in poll; it is asked anyway (its state given as "in user code", which is
 * what a thread entering the call looks like a moment before): the answer says the call was cut
 * short, the thread's poll returned EINTR once, and the next ask is refused (fragile). */
static void test_wall_interrupt(struct got *g)
{
    if (!prof_sigsample_wall_install()) {
        printf("SKIP wall asks: no second free signal\n");
        return;
    }
    pthread_t th;
    struct prof_sigsample_stats cs;
    prof_sigsample_get_stats(&cs);
    struct poller p = {.cpu_signo = cs.signo};
    pthread_create(&th, NULL, poll_thread, &p);
    while (!p.tid)
        sleep_ms(1);
    uint32_t one[1] = {p.tid};
    pump(one, 1, g, 30); /* armed: it has a ring */
    struct prof_wall_state st;
    int blocked = 0;
    for (int i = 0; i < 200 && !blocked; i++) {
        blocked = !prof_sigsample_wall_state(p.tid, &st) && st.kind == PROF_WALL_BLOCKED;
        if (!blocked)
            sleep_ms(1);
    }
    CHECK(blocked, "the poller is found blocked in its call");
    struct prof_sigsample_wall_stats s0, s1;
    prof_sigsample_wall_get_stats(&s0);
    struct prof_wall_state user = {.kind = PROF_WALL_USER};
    struct prof_wall_state running = {.kind = PROF_WALL_RUNNING};
    prof_sigsample_wall_begin();
    /* seen only running so far: not asked, its next CPU sample stands for it */
    CHECK(prof_sigsample_wall_ask(p.tid, 1, &running) == 2, "left to its CPU samples");
    CHECK(__atomic_load_n(&g_sig.wall_left, __ATOMIC_SEQ_CST) == 0, "no signal sent");
    CHECK(prof_sigsample_wall_ask(p.tid, 1, &user) == 1, "asked");
    prof_sigsample_wall_wait(500000000LL);
    struct wall_got w = {0};
    prof_sigsample_wall_collect(on_wall, &w);
    sleep_ms(20); /* the poll's return reaches the counter */
    prof_sigsample_wall_get_stats(&s1);
    CHECK(w.answers == 1 && w.interrupted == 1, "one answer, flagged as cutting a call short: "
          "%d, %d", w.answers, w.interrupted);
    CHECK(p.eintr == 1, "the poll returned EINTR once: %d", p.eintr);
    CHECK(s1.interrupted - s0.interrupted == 1 &&
          s1.interrupted_outside - s0.interrupted_outside == 1,
          "counted as made outside the runtime: %llu, %llu",
          (unsigned long long)(s1.interrupted - s0.interrupted),
          (unsigned long long)(s1.interrupted_outside - s0.interrupted_outside));
    prof_sigsample_wall_begin();
    CHECK(prof_sigsample_wall_ask(p.tid, 2, &user) == 0, "not asked again: fragile");
    p.stop = 1;
    pthread_join(th, NULL);
    CHECK(p.eintr == 1, "no other poll was cut short: %d of %d", p.eintr, p.polls);
    pump(NULL, 0, g, 20);
}

static void test_walks(void)
{
    CHECK(prof_sigsample_start(1000, 64, 64, 2) == 0, "start");
    CHECK(prof_sigsample_intact(), "our handler is installed");
    test_maps_lookups();
    test_hidden_stub();

    /* publish `middle` as frameless with the frame size its own prologue declares */
    struct prof_frame_shape sh;
    prof_frame_decode((const uint8_t *)middle, 32, &sh);
    CHECK(sh.known && !sh.framed && sh.frame % 16 == 8, "middle decodes as frameless: known %d "
          "framed %d frame %u (compiler prologue not understood?)", sh.known, sh.framed, sh.frame);
    uintptr_t ranges[1][3] = {{(uintptr_t)middle, (uintptr_t)middle + 64, sh.frame}};
    prof_maps_set_frameless((const uintptr_t(*)[3])ranges, 1);

    pthread_t th[2];
    struct spin_arg spin = {0, 0};
    volatile uint32_t tid[2] = {0, 0};
    pthread_create(&th[0], NULL, spin_thread, &spin);
    pthread_create(&th[1], NULL, garbage_thread, (void *)&tid[1]);
    while (!spin.tid || !tid[1])
        sleep_ms(1);
    tid[0] = spin.tid;

    struct got g = {.lock = PTHREAD_MUTEX_INITIALIZER, .tid = tid[0]};
    g.lo[0] = (uintptr_t)inner_spin, g.hi[0] = (uintptr_t)inner_spin + 256;
    g.lo[1] = (uintptr_t)middle, g.hi[1] = (uintptr_t)middle + 64;
    g.lo[2] = (uintptr_t)outer, g.hi[2] = (uintptr_t)outer + 64;
    uint32_t tids[2] = {tid[0], tid[1]};
    pump(tids, 2, &g, 1500);

    struct prof_sigsample_stats st;
    prof_sigsample_get_stats(&st);
    CHECK(g.samples >= 50, "samples: %d", g.samples);
    /* the two threads' shares of the CPU depend on the machine's load: count the spinner's own */
    CHECK(g.mine >= 20 && g.complete * 10 >= g.mine * 8, "inner <- middle <- outer in %d of %d "
          "samples of the spinning thread", g.complete, g.mine);
    CHECK(g.any_frames > 0, "some walks found frames");
    CHECK(st.threads == 2, "2 threads armed, got %llu", (unsigned long long)st.threads);
    /* CPU weights: ~1 ms each at 1000 Hz */
    CHECK(g.cpu_ns >= (int64_t)g.samples * 1000000, "cpu weight %lld ns for %d samples",
          (long long)g.cpu_ns, g.samples);

    /* threads come and go while sampled: disarm, recycle, re-arm */
    for (int round = 0; round < 20; round++) {
        pthread_t t;
        struct spin_arg a = {0, 0};
        pthread_create(&t, NULL, spin_thread, &a);
        while (!a.tid)
            sleep_ms(1);
        uint32_t three[3] = {tid[0], tid[1], a.tid};
        pump(three, 3, &g, 30);
        a.stop = 1; /* exits while still armed half the time: the timer outlives the thread */
        if (round % 2)
            pthread_join(t, NULL);
        uint32_t two[2] = {tid[0], tid[1]};
        pump(two, 2, &g, 10);
        if (!(round % 2))
            pthread_join(t, NULL);
    }
    test_perf_fds_retired(&g, 2);
    spin.stop = 1;
    stop_threads = 1;
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    pump(NULL, 0, &g, 20);
    prof_sigsample_get_stats(&st);
    CHECK(st.threads == 0, "all disarmed: %llu", (unsigned long long)st.threads);
    test_late_code();
    test_brief_threads();
    test_wall_interrupt(&g);
    prof_sigsample_stop();
    CHECK(prof_sigsample_intact(), "the handler stays installed after stop");
}

int main(void)
{
    test_decode();
    test_call_sites();
    test_walks();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
