/*
 * prof_gc_cpu.c - the CPU of the runtime's dedicated GC threads (".NET Server GC", ".NET BGC"),
 * found by name under /proc/self/task and read with their thread CPU clocks once a second, on
 * clrscope-agg (prof_gc_tick). The directory is listed (each new thread's name read) every
 * FULL_SCAN_S seconds, at the tick after a collection (the runtime creates its background GC
 * thread at the first background GC), and every tick while a new thread's name may still change
 * (a thread is named after it starts); between listings only the GC threads found are read,
 * so an idle process pays one clock read per GC thread a second, not a directory of every
 * thread. A GC thread first found late loses nothing: its first reading counts all its CPU.
 * The thread table is allocated at Initialize and freed at Shutdown under gc.lock, after
 * clrscope-agg has stopped.
 */
#include "prof_gc.h"
#include "prof_gc_int.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_store.h"

#define NAME_CHECKS 3  /* listings during which a new thread's name is re-read */
#define FULL_SCAN_S 10 /* seconds between listings while no collection happens */
#define KNOWN_MAX 512  /* GC threads read without a listing; more: every tick lists */

struct thr {
    uint32_t tid; /* 0 = empty */
    uint8_t kind, checks;
    int64_t cpu; /* last reading, -1 = none yet */
};

/* The threads seen at the last scan: clrscope-agg only (rebuilt every tick into the other
 * table, then swapped). */
static struct gc_cpu_state {
    struct thr *tab, *tab2;
    uint32_t tab_cap;
    /* the GC threads of the last listing (their entries in tab), for the ticks between */
    uint32_t known[KNOWN_MAX];
    int n_known;
    int ticks_to_list; /* <= 0: list at the next tick */
    uint64_t gcs_listed; /* collections started at the last listing */
    uint64_t untracked;  /* threads left out of the table at the last listing */
} gc_cpu;

int gc_cpu_start(int max_threads)
{
    gc_cpu.tab_cap = 256;
    while (gc_cpu.tab_cap < (uint32_t)max_threads * 2u && gc_cpu.tab_cap < (1u << 20))
        gc_cpu.tab_cap <<= 1;
    gc_cpu.tab = calloc(gc_cpu.tab_cap, sizeof *gc_cpu.tab);
    gc_cpu.tab2 = calloc(gc_cpu.tab_cap, sizeof *gc_cpu.tab2);
    gc_cpu.n_known = 0;
    gc_cpu.ticks_to_list = 0;
    return gc_cpu.tab && gc_cpu.tab2 ? 0 : -1;
}

void gc_cpu_stop(void)
{
    free(gc_cpu.tab);
    free(gc_cpu.tab2);
    gc_cpu.tab = gc_cpu.tab2 = NULL;
}

static int read_comm(uint32_t tid, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int ok = fgets(out, (int)cap, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    out[strcspn(out, "\n")] = 0;
    return 0;
}

static int classify(uint32_t tid)
{
    char comm[32];
    if (read_comm(tid, comm, sizeof comm))
        return THR_OTHER;
    if (!strncmp(comm, ".NET Server GC", 14))
        return THR_SERVER_GC;
    if (!strncmp(comm, ".NET BGC", 8))
        return THR_BGC;
    return THR_OTHER;
}

static struct thr *tab_find(struct thr *tab, uint32_t tid, int insert)
{
    uint32_t mask = gc_cpu.tab_cap - 1;
    for (uint32_t i = (tid * 2654435761u) & mask, k = 0; k < gc_cpu.tab_cap;
         i = (i + 1) & mask, k++) {
        if (tab[i].tid == tid)
            return &tab[i];
        if (!tab[i].tid)
            return insert ? &tab[i] : NULL;
    }
    return NULL;
}

/* Reads a GC thread's CPU clock and books what it used since the last reading (all of it at
 * the first: a GC thread first seen was created after clrscope started) under a "Garbage
 * Collector" frame. -1: the thread is gone. */
static int read_thread(struct thr *t, double now_unix, int64_t *total)
{
    int64_t cpu = prof_thread_cpu_ns((pid_t)t->tid);
    if (cpu < 0)
        return -1;
    int64_t delta = t->cpu >= 0 ? cpu - t->cpu : cpu;
    t->cpu = cpu;
    if (delta <= 0)
        return 0;
    *total += delta;
    if (__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_CPU) {
        static const char *const frame[] = {"Garbage Collector"};
        const int64_t period = 1000000000LL / (g_cfg.sampling_hz > 0 ? g_cfg.sampling_hz : 100);
        int64_t samples = delta / period;
        int64_t v[PROF_NVALUES] = {samples > 0 ? samples : 1, delta, 0};
        prof_store_add(PK_CPU, now_unix, frame, 1, t->tid, NULL, v);
    }
    return 0;
}

/* Lists /proc/self/task. Threads that exited since the last tick take their last second of
 * CPU with them (not counted). */
static int64_t list_threads(double now_unix, int *n_gc, int *server_seen, uint64_t *untracked)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    memset(gc_cpu.tab2, 0, gc_cpu.tab_cap * sizeof *gc_cpu.tab2);
    int64_t total = 0;
    int gc_threads = 0, server = 0, n_known = 0, gone = 0, unsettled = 0;
    uint32_t used = 0;
    uint64_t skipped = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        uint32_t tid = (uint32_t)strtoul(e->d_name, NULL, 10);
        if (!tid)
            continue;
        if (used + 1 >= gc_cpu.tab_cap / 2) {
            skipped++;
            continue;
        }
        struct thr *old = tab_find(gc_cpu.tab, tid, 0);
        struct thr *t = tab_find(gc_cpu.tab2, tid, 1);
        if (!t)
            continue;
        used++;
        if (old) {
            *t = *old;
        } else {
            t->tid = tid;
            t->kind = THR_OTHER;
            t->checks = 0;
            t->cpu = -1;
        }
        if (t->kind == THR_OTHER && t->checks < NAME_CHECKS) {
            t->kind = (uint8_t)classify(tid);
            t->checks++;
            unsettled |= t->kind == THR_OTHER && t->checks < NAME_CHECKS;
        }
        if (t->kind == THR_OTHER)
            continue;
        gc_threads++;
        server += t->kind == THR_SERVER_GC;
        if (n_known < KNOWN_MAX)
            gc_cpu.known[n_known] = tid;
        n_known++;
        if (read_thread(t, now_unix, &total) < 0)
            gone = 1;
    }
    closedir(d);
    struct thr *swap = gc_cpu.tab;
    gc_cpu.tab = gc_cpu.tab2;
    gc_cpu.tab2 = swap;
    /* too many to keep, or one gone: list again at the next tick */
    gc_cpu.n_known = n_known <= KNOWN_MAX && !gone ? n_known : -1;
    /* a new thread may not have its name yet: list again next tick until each has been read
     * NAME_CHECKS times */
    gc_cpu.ticks_to_list = unsettled ? 0 : FULL_SCAN_S - 1;
    gc_cpu.untracked = skipped;
    *n_gc = gc_threads;
    *server_seen = server;
    *untracked = skipped;
    return total;
}

/* Between listings: the GC threads of the last one, their CPU added to *total. -1 when one of
 * them is gone (the caller lists then: the threads read before it have their new readings, so
 * the listing finds nothing more of theirs to add). */
static int read_known(double now_unix, int *n_gc, int *server_seen, int64_t *total)
{
    int server = 0;
    for (int i = 0; i < gc_cpu.n_known; i++) {
        struct thr *t = tab_find(gc_cpu.tab, gc_cpu.known[i], 0);
        if (!t)
            return -1;
        server += t->kind == THR_SERVER_GC;
        if (read_thread(t, now_unix, total) < 0)
            return -1;
    }
    *n_gc = gc_cpu.n_known;
    *server_seen = server;
    return 0;
}

int64_t gc_cpu_scan(double now_unix, uint64_t gcs_started, int *n_gc, int *server_seen,
                    uint64_t *untracked)
{
    *untracked = gc_cpu.untracked;
    int64_t known = 0;
    if (gc_cpu.n_known >= 0 && gcs_started == gc_cpu.gcs_listed && gc_cpu.ticks_to_list-- > 0 &&
        read_known(now_unix, n_gc, server_seen, &known) == 0)
        return known;
    gc_cpu.gcs_listed = gcs_started;
    return known + list_threads(now_unix, n_gc, server_seen, untracked);
}
