/* prof_threads.c - see prof_threads.h. */
#include "prof_threads.h"
#include "prof_core.h"
#include "prof_utf8.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct thread_entry {
    ThreadID id; /* 0 = free */
    uint32_t os_tid;
    int own; /* one of clrscope's threads that the runtime made managed: not the app's */
    char name[48];
};

/* Names of the managed threads that ended, newest last (a ring): samples of a thread outlive it
 * in the history, and a pprof built later still labels them with its name. */
#define GONE_MAX 1024

struct gone_entry {
    uint32_t os_tid;
    char name[48];
};

#define OWN_MAX 16 /* clrscope starts fewer threads than this */

/* The module's state: written by the runtime's thread callbacks (any app thread), read by
 * clrscope's threads and API handlers, every field under `lock` (held for a table scan at most,
 * never by clrscope while the runtime is suspended). */
static struct threads_state {
    pthread_mutex_t lock;
    struct thread_entry *tab; /* cap entries, allocated at Initialize */
    int cap;
    size_t count;         /* the app's managed threads */
    size_t own;           /* clrscope's threads that the runtime made managed */
    uint32_t own_tids[OWN_MAX]; /* their OS tids (0 = free): read without the lock */
    uint64_t dropped;
    struct gone_entry gone[GONE_MAX];
    uint32_t gone_next; /* total ever added; the ring holds the last GONE_MAX */
} threads = {.lock = PTHREAD_MUTEX_INITIALIZER};

void prof_threads_init(int cap)
{
    pthread_mutex_lock(&threads.lock);
    if (!threads.tab) {
        threads.tab = calloc((size_t)cap, sizeof *threads.tab);
        threads.cap = threads.tab ? cap : 0;
    }
    pthread_mutex_unlock(&threads.lock);
}

/* Linear scan: thread callbacks are rare and the table is small (thousands at most). */
static struct thread_entry *find_locked(ThreadID t)
{
    for (int i = 0; i < threads.cap; i++)
        if (threads.tab[i].id == t)
            return &threads.tab[i];
    return NULL;
}

void prof_threads_created(ThreadID t)
{
    pthread_mutex_lock(&threads.lock);
    if (threads.tab && !find_locked(t)) {
        struct thread_entry *e = find_locked(0);
        if (e) {
            memset(e, 0, sizeof *e);
            e->id = t;
            threads.count++;
        } else {
            threads.dropped++;
        }
    }
    pthread_mutex_unlock(&threads.lock);
}

uint32_t prof_threads_destroyed(ThreadID t)
{
    uint32_t os_tid = 0;
    pthread_mutex_lock(&threads.lock);
    struct thread_entry *e = threads.tab ? find_locked(t) : NULL;
    if (e) {
        os_tid = e->os_tid;
        if (e->os_tid && e->name[0]) {
            struct gone_entry *g = &threads.gone[threads.gone_next++ % GONE_MAX];
            g->os_tid = e->os_tid;
            memcpy(g->name, e->name, sizeof g->name);
        }
        e->id = 0;
        if (e->own) {
            threads.own--;
            for (int i = 0; i < OWN_MAX; i++)
                if (threads.own_tids[i] == e->os_tid)
                    __atomic_store_n(&threads.own_tids[i], 0, __ATOMIC_RELEASE);
        } else
            threads.count--;
    }
    pthread_mutex_unlock(&threads.lock);
    return os_tid;
}

void prof_threads_assigned(ThreadID t, DWORD os_tid)
{
    prof_threads_created(t);
    pthread_mutex_lock(&threads.lock);
    struct thread_entry *e = threads.tab ? find_locked(t) : NULL;
    if (e) {
        e->os_tid = os_tid;
        /* the runtime tells on the thread itself (SetupThread, a thread's start) */
        if (prof_core_on_own_thread() && !e->own) {
            e->own = 1;
            threads.count--;
            threads.own++;
            for (int i = 0; i < OWN_MAX; i++)
                if (!threads.own_tids[i]) {
                    __atomic_store_n(&threads.own_tids[i], os_tid, __ATOMIC_RELEASE);
                    break;
                }
        }
    }
    pthread_mutex_unlock(&threads.lock);
}

void prof_threads_named(ThreadID t, ULONG cch, const WCHAR *name)
{
    char utf8[48];
    prof_utf16_to_utf8(name, name ? cch : 0, utf8, sizeof utf8);
    prof_threads_created(t);
    pthread_mutex_lock(&threads.lock);
    struct thread_entry *e = threads.tab ? find_locked(t) : NULL;
    if (e)
        memcpy(e->name, utf8, sizeof e->name);
    pthread_mutex_unlock(&threads.lock);
}

const char *prof_threads_name_of(uint32_t os_tid, char *buf, size_t cap)
{
    buf[0] = 0;
    pthread_mutex_lock(&threads.lock);
    for (int i = 0; i < threads.cap; i++)
        if (threads.tab[i].id && threads.tab[i].os_tid == os_tid && threads.tab[i].name[0]) {
            snprintf(buf, cap, "%s", threads.tab[i].name);
            break;
        }
    /* a thread that ended: the newest with that tid (the kernel reuses tids only after it has
     * gone round its whole range) */
    uint32_t n = threads.gone_next < GONE_MAX ? threads.gone_next : GONE_MAX;
    for (uint32_t k = 1; !buf[0] && k <= n; k++) {
        const struct gone_entry *g = &threads.gone[(threads.gone_next - k) % GONE_MAX];
        if (g->os_tid == os_tid)
            snprintf(buf, cap, "%s", g->name);
    }
    pthread_mutex_unlock(&threads.lock);
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

int prof_threads_is_own(uint32_t os_tid)
{
    for (int i = 0; i < OWN_MAX; i++)
        if (os_tid && __atomic_load_n(&threads.own_tids[i], __ATOMIC_ACQUIRE) == os_tid)
            return 1;
    return 0;
}

size_t prof_threads_count(void)
{
    pthread_mutex_lock(&threads.lock);
    size_t n = threads.count;
    pthread_mutex_unlock(&threads.lock);
    return n;
}

size_t prof_threads_tids(uint32_t *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&threads.lock);
    for (int i = 0; i < threads.cap && n < cap; i++)
        if (threads.tab[i].id && threads.tab[i].os_tid && !threads.tab[i].own)
            out[n++] = threads.tab[i].os_tid;
    pthread_mutex_unlock(&threads.lock);
    return n;
}
