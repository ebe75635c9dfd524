/* prof_threads.c - see prof_threads.h. */
#include "prof_threads.h"
#include "prof_utf8.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct thread_entry {
    ThreadID id; /* 0 = free */
    uint32_t os_tid;
    char name[48];
};

/* Names of the managed threads that ended, newest last (a ring): samples of a thread outlive it
 * in the history, and a pprof built later still labels them with its name. */
#define GONE_MAX 1024

struct gone_entry {
    uint32_t os_tid;
    char name[48];
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct thread_entry *g_tab;
static int g_cap;
static size_t g_count;
static uint64_t g_dropped;
static struct gone_entry g_gone[GONE_MAX];
static uint32_t g_gone_next; /* total ever added; the ring holds the last GONE_MAX */

void prof_threads_init(int cap)
{
    pthread_mutex_lock(&g_lock);
    if (!g_tab) {
        g_tab = calloc((size_t)cap, sizeof *g_tab);
        g_cap = g_tab ? cap : 0;
    }
    pthread_mutex_unlock(&g_lock);
}

/* Linear scan: thread callbacks are rare and the table is small (thousands at most). */
static struct thread_entry *find_locked(ThreadID t)
{
    for (int i = 0; i < g_cap; i++)
        if (g_tab[i].id == t)
            return &g_tab[i];
    return NULL;
}

void prof_threads_created(ThreadID t)
{
    pthread_mutex_lock(&g_lock);
    if (g_tab && !find_locked(t)) {
        struct thread_entry *e = find_locked(0);
        if (e) {
            memset(e, 0, sizeof *e);
            e->id = t;
            g_count++;
        } else {
            g_dropped++;
        }
    }
    pthread_mutex_unlock(&g_lock);
}

uint32_t prof_threads_destroyed(ThreadID t)
{
    uint32_t os_tid = 0;
    pthread_mutex_lock(&g_lock);
    struct thread_entry *e = g_tab ? find_locked(t) : NULL;
    if (e) {
        os_tid = e->os_tid;
        if (e->os_tid && e->name[0]) {
            struct gone_entry *g = &g_gone[g_gone_next++ % GONE_MAX];
            g->os_tid = e->os_tid;
            memcpy(g->name, e->name, sizeof g->name);
        }
        e->id = 0;
        g_count--;
    }
    pthread_mutex_unlock(&g_lock);
    return os_tid;
}

void prof_threads_assigned(ThreadID t, DWORD os_tid)
{
    prof_threads_created(t);
    pthread_mutex_lock(&g_lock);
    struct thread_entry *e = g_tab ? find_locked(t) : NULL;
    if (e)
        e->os_tid = os_tid;
    pthread_mutex_unlock(&g_lock);
}

void prof_threads_named(ThreadID t, ULONG cch, const WCHAR *name)
{
    char utf8[48];
    prof_utf16_to_utf8(name, name ? cch : 0, utf8, sizeof utf8);
    prof_threads_created(t);
    pthread_mutex_lock(&g_lock);
    struct thread_entry *e = g_tab ? find_locked(t) : NULL;
    if (e)
        memcpy(e->name, utf8, sizeof e->name);
    pthread_mutex_unlock(&g_lock);
}

const char *prof_threads_name_of(uint32_t os_tid, char *buf, size_t cap)
{
    buf[0] = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_cap; i++)
        if (g_tab[i].id && g_tab[i].os_tid == os_tid && g_tab[i].name[0]) {
            snprintf(buf, cap, "%s", g_tab[i].name);
            break;
        }
    /* a thread that ended: the newest with that tid (the kernel reuses tids only after it has
     * gone round its whole range) */
    uint32_t n = g_gone_next < GONE_MAX ? g_gone_next : GONE_MAX;
    for (uint32_t k = 1; !buf[0] && k <= n; k++) {
        const struct gone_entry *g = &g_gone[(g_gone_next - k) % GONE_MAX];
        if (g->os_tid == os_tid)
            snprintf(buf, cap, "%s", g->name);
    }
    pthread_mutex_unlock(&g_lock);
    if (buf[0])
        return buf;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", os_tid);
    FILE *f = fopen(path, "re");
    if (f) {
        if (fgets(buf, (int)cap, f))
            buf[strcspn(buf, "\n")] = 0;
        fclose(f);
        prof_utf8_clean(buf);
    }
    return buf;
}

size_t prof_threads_count(void)
{
    pthread_mutex_lock(&g_lock);
    size_t n = g_count;
    pthread_mutex_unlock(&g_lock);
    return n;
}

size_t prof_threads_tids(uint32_t *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_cap && n < cap; i++)
        if (g_tab[i].id && g_tab[i].os_tid)
            out[n++] = g_tab[i].os_tid;
    pthread_mutex_unlock(&g_lock);
    return n;
}
