/* prof_core.c - see prof_core.h. */
#include "prof_core.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prof_utf8.h"

struct prof_core g_core;

int64_t prof_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

uint32_t prof_self_tid(void)
{
    static PROF_TLS uint32_t tid;
    if (!tid)
        tid = (uint32_t)gettid();
    return tid;
}

static double frozen_unix; /* set before other threads start (clrscope serve), then read-only */

void prof_core_freeze_clock(double t)
{
    frozen_unix = t;
}

double prof_unix_now(void)
{
    if (frozen_unix > 0)
        return frozen_unix;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t prof_thread_cpu_ns(pid_t tid)
{
    /* The kernel's per-thread CPU clock id: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED). */
    clockid_t cid = (clockid_t)((~(unsigned)tid << 3) | 6u);
    struct timespec ts;
    if (clock_gettime(cid, &ts))
        return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t prof_process_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void prof_core_disable(unsigned profile_bit)
{
    __atomic_fetch_and(&g_core.profiles, ~profile_bit, __ATOMIC_RELAXED);
}

int prof_core_stopping(void)
{
    return __atomic_load_n(&g_core.stopping, __ATOMIC_ACQUIRE);
}

/* Naps: a condition variable on CLOCK_MONOTONIC, broadcast when Shutdown begins and at each
 * nudge. Shared by clrscope's napping threads and whoever nudges or stops them (any thread). */
static struct nap_state {
    pthread_mutex_t lock; /* held by nappers only to enter and leave their wait */
    pthread_cond_t cond;  /* made once, by the first nap, nudge or stop (`once`) */
    pthread_once_t once;
    uint32_t nudges;      /* atomic; changed under `lock` */
} naps = {.lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static void nap_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&naps.cond, &a);
    pthread_condattr_destroy(&a);
}

static int nap(int64_t deadline_ns, int nudgeable, uint32_t seen)
{
    pthread_once(&naps.once, nap_init);
    if (deadline_ns < 0)
        deadline_ns = 0;
    struct timespec ts = {(time_t)(deadline_ns / 1000000000LL), (long)(deadline_ns % 1000000000LL)};
    pthread_mutex_lock(&naps.lock);
    /* a wake-up without the flag (or a nudge) is spurious: nap on until the deadline */
    while (!prof_core_stopping() &&
           !(nudgeable && __atomic_load_n(&naps.nudges, __ATOMIC_ACQUIRE) != seen) &&
           pthread_cond_timedwait(&naps.cond, &naps.lock, &ts) != ETIMEDOUT)
        ;
    int stop = prof_core_stopping();
    pthread_mutex_unlock(&naps.lock);
    return stop;
}

/* The words threads nap on with a futex (prof_core_nap_word): a nudge or the stop bumps and
 * wakes each, as the condition variable wakes the others. */
#define NAP_WORDS 4
static uint32_t *nap_words[NAP_WORDS]; /* atomic pointers, set once each under naps.lock */

static void bump_words(void)
{
    for (int i = 0; i < NAP_WORDS; i++) {
        uint32_t *w = __atomic_load_n(&nap_words[i], __ATOMIC_ACQUIRE);
        if (!w)
            break;
        __atomic_add_fetch(w, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    }
}

static int watch_word(uint32_t *word)
{
    for (int i = 0; i < NAP_WORDS; i++)
        if (__atomic_load_n(&nap_words[i], __ATOMIC_ACQUIRE) == word)
            return 0;
    pthread_once(&naps.once, nap_init);
    pthread_mutex_lock(&naps.lock);
    int i = 0;
    while (i < NAP_WORDS && nap_words[i] && nap_words[i] != word)
        i++;
    if (i < NAP_WORDS && !nap_words[i])
        __atomic_store_n(&nap_words[i], word, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&naps.lock);
    return i < NAP_WORDS ? 0 : -1;
}

int prof_core_nap_word(uint32_t *word, uint32_t seen, int64_t deadline_ns, uint32_t nudges_seen)
{
    if (watch_word(word)) /* no room: a nudge could not reach it, so nap as before */
        return prof_core_nap_nudged(deadline_ns, nudges_seen);
    for (;;) {
        if (prof_core_stopping())
            return 1;
        if (__atomic_load_n(&naps.nudges, __ATOMIC_SEQ_CST) != nudges_seen ||
            __atomic_load_n(word, __ATOMIC_SEQ_CST) != seen || prof_now_ns() >= deadline_ns)
            return 0;
        struct timespec ts = {(time_t)(deadline_ns / 1000000000LL),
                              (long)(deadline_ns % 1000000000LL)};
        /* absolute, on CLOCK_MONOTONIC (prof_now_ns); returns at once if the word moved */
        syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, seen, &ts, NULL,
                FUTEX_BITSET_MATCH_ANY);
    }
}

int prof_core_nap_until(int64_t deadline_ns)
{
    return nap(deadline_ns, 0, 0);
}

int prof_core_nap_nudged(int64_t deadline_ns, uint32_t seen)
{
    return nap(deadline_ns, 1, seen);
}

uint32_t prof_core_nudges(void)
{
    return __atomic_load_n(&naps.nudges, __ATOMIC_ACQUIRE);
}

void prof_core_nudge(void)
{
    pthread_once(&naps.once, nap_init);
    pthread_mutex_lock(&naps.lock);
    __atomic_add_fetch(&naps.nudges, 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&naps.cond);
    pthread_mutex_unlock(&naps.lock);
    bump_words();
}

void prof_core_begin_stopping(void)
{
    pthread_once(&naps.once, nap_init);
    pthread_mutex_lock(&naps.lock);
    __atomic_store_n(&g_core.stopping, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&naps.cond);
    pthread_mutex_unlock(&naps.lock);
    bump_words();
}

static PROF_TLS int own_thread;

int prof_core_on_own_thread(void)
{
    return own_thread;
}

static uint32_t own_threads_named;

void prof_name_thread(const char *what)
{
    own_thread = 1;
    char name[16];
    snprintf(name, sizeof name, "clrscope-%s", what);
    pthread_setname_np(pthread_self(), name);
    __atomic_add_fetch(&own_threads_named, 1, __ATOMIC_RELEASE);
}

uint32_t prof_own_threads_named(void)
{
    return __atomic_load_n(&own_threads_named, __ATOMIC_ACQUIRE);
}

void prof_core_read_process_facts(void)
{
    g_core.pid = getpid();
    FILE *f = fopen("/proc/self/comm", "re");
    if (f) {
        if (fgets(g_core.process_name, sizeof g_core.process_name, f))
            g_core.process_name[strcspn(g_core.process_name, "\n")] = 0;
        fclose(f);
    }
    f = fopen("/proc/self/cmdline", "re");
    if (f) {
        size_t n = fread(g_core.cmdline, 1, sizeof g_core.cmdline - 1, f);
        for (size_t i = 0; i + 1 < n; i++)
            if (!g_core.cmdline[i])
                g_core.cmdline[i] = ' ';
        g_core.cmdline[n] = 0;
        fclose(f);
    }
    /* both reach JSON and pprof labels: a name the kernel cut inside a character, arguments in
     * any bytes, the command line cut at its buffer */
    prof_utf8_clean(g_core.process_name);
    prof_utf8_clean(g_core.cmdline);
    /* "dotnet app.dll": name the process after the app, as users think of it */
    if (!strcmp(g_core.process_name, "dotnet")) {
        const char *dll = strstr(g_core.cmdline, ".dll");
        if (dll) {
            const char *start = dll;
            while (start > g_core.cmdline && start[-1] != ' ' && start[-1] != '/')
                start--;
            snprintf(g_core.process_name, sizeof g_core.process_name, "%.*s", (int)(dll - start),
                     start);
        }
    }
}

int prof_core_attach(void *unk)
{
    struct {
        const void *const *vt;
    } *obj = unk;
    typedef HRESULT (*qi_fn)(void *, REFIID, void **);
    qi_fn qi = (qi_fn)obj->vt[0];
    for (int v = 15; v >= 1; v--) {
        void *p = NULL;
        if (qi(unk, &IID_ICorProfilerInfo[v], &p) == S_OK && p) {
            g_core.info = p;
            g_core.info_version = v;
            return v;
        }
    }
    return 0;
}

void prof_core_read_runtime_version(void)
{
    ICorProfilerInfo15 *info = g_core.info;
    USHORT clr = 0, major = 0, minor = 0, build = 0, qfe = 0;
    DWORD type = 0;
    WCHAR w[64];
    ULONG got = 0;
    if (info->vt->GetRuntimeInformation(info, &clr, &type, &major, &minor, &build, &qfe, 64, &got,
                                        w) >= 0) {
        g_core.runtime_major = major;
        snprintf(g_core.runtime_version, sizeof g_core.runtime_version, "%u.%u.%u", major, minor,
                 build);
    }
    /* The build number reported is the runtime's own; prefer the framework directory's version
     * (the one users see in `dotnet --list-runtimes`), found from libcoreclr's path. */
    char path[512];
    FILE *maps = fopen("/proc/self/maps", "re");
    if (maps) {
        char line[768];
        while (fgets(line, sizeof line, maps)) {
            char *p = strstr(line, "/libcoreclr.so");
            if (!p)
                continue;
            char *start = strchr(line, '/');
            if (!start || start > p)
                continue;
            snprintf(path, sizeof path, "%.*s", (int)(p - start), start);
            const char *ver = strrchr(path, '/');
            if (ver && ver[1] >= '0' && ver[1] <= '9' && strchr(ver, '.')) {
                snprintf(g_core.runtime_version, sizeof g_core.runtime_version, "%.31s", ver + 1);
            } else {
                /* self-contained app: read the version from the .deps or version file if any */
                char vf[600];
                snprintf(vf, sizeof vf, "%.500s/Microsoft.NETCore.App.deps.json", path);
                FILE *d = fopen(vf, "re");
                if (d) {
                    char buf[4096];
                    size_t n = fread(buf, 1, sizeof buf - 1, d);
                    buf[n] = 0;
                    char *k = strstr(buf, "Microsoft.NETCore.App.Runtime.linux-x64/");
                    if (k) {
                        k += strlen("Microsoft.NETCore.App.Runtime.linux-x64/");
                        size_t len = strcspn(k, "\"");
                        snprintf(g_core.runtime_version, sizeof g_core.runtime_version, "%.*s",
                                 (int)(len < 31 ? len : 31), k);
                    }
                    fclose(d);
                }
            }
            break;
        }
        fclose(maps);
    }
}
