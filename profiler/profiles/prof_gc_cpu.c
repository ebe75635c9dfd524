/*
 * prof_gc_cpu.c - the CPU of the runtime's dedicated GC threads (".NET Server GC", ".NET BGC"),
 * found by name under /proc/self/task and read with their thread CPU clocks once a second, on
 * clrscope-agg (prof_gc_tick). The thread table is allocated at Initialize and freed at Shutdown
 * under gc.lock, after clrscope-agg has stopped.
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

#define NAME_CHECKS 3 /* ticks during which a new thread's name is re-read */

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
} gc_cpu;

int gc_cpu_start(int max_threads)
{
    gc_cpu.tab_cap = 256;
    while (gc_cpu.tab_cap < (uint32_t)max_threads * 2u && gc_cpu.tab_cap < (1u << 20))
        gc_cpu.tab_cap <<= 1;
    gc_cpu.tab = calloc(gc_cpu.tab_cap, sizeof *gc_cpu.tab);
    gc_cpu.tab2 = calloc(gc_cpu.tab_cap, sizeof *gc_cpu.tab2);
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

/* Threads that exited since the last tick take their last second of CPU with them (not
 * counted). */
int64_t gc_cpu_scan(double now_unix, int *n_gc, int *server_seen, uint64_t *untracked)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    memset(gc_cpu.tab2, 0, gc_cpu.tab_cap * sizeof *gc_cpu.tab2);
    int64_t total = 0;
    int gc_threads = 0, server = 0;
    uint32_t used = 0;
    uint64_t skipped = 0;
    const int64_t period = 1000000000LL / (g_cfg.sampling_hz > 0 ? g_cfg.sampling_hz : 100);
    const int cpu_on = (__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_CPU) != 0;
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
        }
        if (t->kind == THR_OTHER)
            continue;
        gc_threads++;
        server += t->kind == THR_SERVER_GC;
        int64_t cpu = prof_thread_cpu_ns((pid_t)tid);
        if (cpu < 0)
            continue;
        /* a GC thread seen for the first time was created after clrscope started: all its CPU
         * is new */
        int64_t delta = t->cpu >= 0 ? cpu - t->cpu : cpu;
        t->cpu = cpu;
        if (delta <= 0)
            continue;
        total += delta;
        if (cpu_on) {
            static const char *const frame[] = {"Garbage Collector"};
            int64_t samples = delta / period;
            int64_t v[PROF_NVALUES] = {samples > 0 ? samples : 1, delta, 0};
            prof_store_add(PK_CPU, now_unix, frame, 1, tid, NULL, v);
        }
    }
    closedir(d);
    struct thr *swap = gc_cpu.tab;
    gc_cpu.tab = gc_cpu.tab2;
    gc_cpu.tab2 = swap;
    *n_gc = gc_threads;
    *server_seen = server;
    *untracked = skipped;
    return total;
}
