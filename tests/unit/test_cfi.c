/*
 * test_cfi.c - the CFI unwinder of the signal walk (profiler/sampling/prof_cfi.h) on this
 * process's own stack: from a context taken inside a chain of functions compiled without frame
 * pointers, and inside a function that glibc's pthread_once calls (glibc keeps no frame pointers;
 * qsort would do, but the sanitizers' runtime intercepts it), the
 * steps must give the return addresses the compiler reports (__builtin_return_address), in order,
 * and the stack pointers must rise.
 */
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "prof_cfi.h"
#include "unit_check.h"

static const struct prof_cfi *table;
static uintptr_t stack_top;
static ucontext_t uc;
static uintptr_t want[4];
static uintptr_t libc_fn;

#define NOFP __attribute__((noinline, optimize("omit-frame-pointer")))
#define FP __attribute__((noinline, optimize("no-omit-frame-pointer")))

/* Unwinds from uc by CFI alone; returns the return addresses found (at most cap). */
static int unwind(uintptr_t *out, int cap)
{
    uintptr_t pc = (uintptr_t)uc.uc_mcontext.gregs[REG_RIP];
    uintptr_t sp = (uintptr_t)uc.uc_mcontext.gregs[REG_RSP];
    uintptr_t bp = (uintptr_t)uc.uc_mcontext.gregs[REG_RBP];
    int n = 0;
    for (int leaf = 1; n < cap; leaf = 0) {
        const struct prof_cfi_lib *l = prof_cfi_find(table, pc);
        if (!l)
            break;
        uintptr_t slot, before = sp;
        int outermost = 0;
        uintptr_t ra = prof_cfi_step(l, pc, leaf, &sp, &bp, stack_top, &slot, &outermost);
        if (!ra)
            break;
        CHECK(sp > before && slot >= before && slot < sp, "step %d: sp %lx -> %lx, slot %lx", n,
              (unsigned long)before, (unsigned long)sp, (unsigned long)slot);
        out[n++] = ra;
        pc = ra;
    }
    return n;
}

static int sink;
static uintptr_t got[16];
static int ngot;

NOFP static void inner(void)
{
    getcontext(&uc);
    ngot = unwind(got, 16); /* deeper on the stack: the frames above stay as they are */
    want[0] = (uintptr_t)__builtin_return_address(0);
    sink++;
}

FP static void middle(void)
{
    char pad[200];
    memset(pad, sink, sizeof pad);
    inner();
    want[1] = (uintptr_t)__builtin_return_address(0);
    sink += pad[sink % 200];
}

NOFP static void outer(void)
{
    volatile char pad[72];
    pad[0] = (char)sink;
    middle();
    want[2] = (uintptr_t)__builtin_return_address(0);
    sink += pad[0];
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void in_once(void)
{
    getcontext(&uc);
    ngot = unwind(got, 16);
}

NOFP static void caller(void)
{
    pthread_once(&once, in_once);
    want[0] = (uintptr_t)__builtin_return_address(0);
    sink++;
}

static int loading = 1, done;
static long loads;

static void *load_loop(void *arg)
{
    (void)arg;
    static const char *const libs[] = {"libanl.so.1", "libutil.so.1", "libnss_files.so.2"};
    while (__atomic_load_n(&loading, __ATOMIC_ACQUIRE)) {
        for (size_t i = 0; i < sizeof libs / sizeof *libs; i++) {
            void *h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
            if (h) {
                dlclose(h);
                loads++;
            }
        }
    }
    return NULL;
}

static void *watchdog(void *arg)
{
    (void)arg;
    for (int i = 0; i < 600 && !__atomic_load_n(&done, __ATOMIC_ACQUIRE); i++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
        fprintf(stderr, "FAIL: prof_cfi_build beside dlopen did not finish in 60 s (deadlock)\n");
        _exit(1);
    }
    return NULL;
}

int main(void)
{
    pthread_attr_t a;
    void *addr;
    size_t size;
    CHECK(!pthread_getattr_np(pthread_self(), &a), "pthread_getattr_np");
    pthread_attr_getstack(&a, &addr, &size);
    stack_top = (uintptr_t)addr + size;
    pthread_attr_destroy(&a);

    /* a function of libc's own that no sanitizer intercepts */
    libc_fn = (uintptr_t)gnu_get_libc_version;
    table = prof_cfi_build(1);
    CHECK(table && table->n > 1, "a table of this process's libraries");
    CHECK(prof_cfi_find(table, libc_fn) != NULL, "libc is in the table");

    /* three frames of this program's own code: rsp-based and rbp-based CFAs */
    outer();
    int n = ngot;
    CHECK(n >= 3, "%d steps", n);
    for (int i = 0; i < 3 && i < n; i++)
        CHECK(got[i] == want[i], "frame %d: %lx, want %lx", i, (unsigned long)got[i],
              (unsigned long)want[i]);

    /* through glibc's pthread_once: the callback's caller chain reaches caller's return into
     * main, right after the return address into caller */
    caller();
    n = ngot;
    int at = -1;
    for (int i = 0; i < n && at < 0; i++)
        if (got[i] == want[0])
            at = i;
    CHECK(at >= 2, "reached caller's caller through pthread_once's frames (%d steps, at %d)", n,
          at);
    uintptr_t call = at > 0 ? got[at - 1] : 0;
    CHECK(call > (uintptr_t)caller && call < (uintptr_t)caller + 512,
          "the frame before it returns into caller (%lx, caller at %lx)", (unsigned long)call,
          (unsigned long)(uintptr_t)caller);
    CHECK(at >= 2 && prof_cfi_find(table, got[at - 2]) == prof_cfi_find(table, libc_fn),
          "and the one before that into libc");

    /* the only listed libraries (what the sampler builds) are never unloaded: libc is one */
    struct prof_cfi *listed = prof_cfi_build(0);
    CHECK(listed && prof_cfi_find(listed, libc_fn), "libc is listed");
    CHECK(listed && !prof_cfi_find(listed, (uintptr_t)main), "this program is not");
    free(listed);
    free((void *)table);

    /* built while another thread loads and unloads a library over and over (the app's own
     * dlopen): pinning a library inside dl_iterate_phdr took the loader's lock in the opposite
     * order and both threads stopped for good */
    pthread_t loader, dog;
    CHECK(pthread_create(&dog, NULL, watchdog, NULL) == 0, "watchdog started");
    CHECK(pthread_create(&loader, NULL, load_loop, NULL) == 0, "loader started");
    int built = 0;
    for (int i = 0; i < 3000; i++) {
        struct prof_cfi *t = prof_cfi_build(0);
        built += t != NULL;
        free(t);
    }
    __atomic_store_n(&loading, 0, __ATOMIC_RELEASE);
    pthread_join(loader, NULL);
    CHECK(built == 3000, "3000 tables built beside %ld dlopen/dlclose pairs", loads);
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
