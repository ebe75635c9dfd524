/* prof_config.c - see prof_config.h. */
#include "prof_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "prof_files.h"
#include "prof_log.h"

struct prof_config g_cfg;

static const char *const profile_names[] = {"cpu", "wall", "alloc", "live",
                                            "gc", "exceptions", "lock", "heap"};

const char *prof_profile_name(unsigned bit)
{
    for (int i = 0; i < 8; i++)
        if (bit == (1u << i))
            return profile_names[i];
    return "?";
}

long prof_env_long(const char *name, long def, long min, long max)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end || v < min || v > max) {
        prof_log(LOG_WARN, "%s=\"%.40s\" is not a whole number in %ld..%ld; using %ld", name, s,
                 min, max, def);
        return def;
    }
    return v;
}

double prof_env_double(const char *name, double def, double min, double max)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || !end || *end || !(v >= min && v <= max)) {
        prof_log(LOG_WARN, "%s=\"%.40s\" is not a number in %g..%g; using %g", name, s, min, max,
                 def);
        return def;
    }
    return v;
}

/* A percentage written "1%", "0.5 %" or "1" (percent either way), 0..100. */
static double env_percent(const char *name, double def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    while (end && (*end == ' ' || *end == '%'))
        end++;
    if (errno || !end || end == s || *end || !(v >= 0 && v <= 100)) {
        prof_log(LOG_WARN, "%s=\"%.40s\" is not a percentage in 0..100 (\"1%%\"); using %g%%",
                 name, s, def);
        return def;
    }
    return v;
}

int prof_env_bool(const char *name, int def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    if (!strcasecmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") ||
        !strcasecmp(s, "on"))
        return 1;
    if (!strcasecmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") ||
        !strcasecmp(s, "off"))
        return 0;
    prof_log(LOG_WARN, "%s=\"%.40s\" is not a boolean (1/0/true/false); using %d", name, s, def);
    return def;
}

static void copy_env(const char *name, char *dst, size_t cap, const char *def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        s = def;
    if (strlen(s) >= cap) {
        prof_log(LOG_WARN, "%s is longer than %zu characters; using \"%s\"", name, cap - 1, def);
        s = def;
    }
    snprintf(dst, cap, "%s", s);
}

static void random_token(char *dst, size_t cap)
{
    unsigned char raw[16] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, raw, sizeof raw) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof raw) {
        /* Fall back to weaker entropy rather than running with a guessable empty token. */
        unsigned long x = (unsigned long)getpid() ^ (unsigned long)(uintptr_t)&raw;
        for (size_t i = 0; i < sizeof raw; i++) {
            x = x * 6364136223846793005ul + 1442695040888963407ul;
            raw[i] ^= (unsigned char)(x >> 56);
        }
    }
    static const char hex[] = "0123456789abcdef";
    size_t j = 0;
    for (size_t i = 0; i < sizeof raw && j + 2 < cap; i++) {
        dst[j++] = hex[raw[i] >> 4];
        dst[j++] = hex[raw[i] & 15];
    }
    dst[j] = 0;
}

/* A comma or space separated list, read in place (no copy, so no length limit): profile names,
 * "all", and "none" (clrscope loaded with every profile off). Unknown words are logged. */
static unsigned parse_profiles(void)
{
    const char *s = getenv("CLRSCOPE_PROFILES");
    if (!s || !*s)
        return PROFILE_ALL;
    const char *all = s;
    unsigned mask = 0;
    int words = 0, known = 0;
    static const char sep[] = ",; \t";
    s += strspn(s, sep);
    while (*s) {
        size_t n = strcspn(s, sep);
        int found = 0;
        words++;
        if (n == 3 && !strncasecmp(s, "all", 3)) {
            mask |= PROFILE_ALL;
            found = 1;
        } else if (n == 4 && !strncasecmp(s, "none", 4)) {
            found = 1;
        }
        for (int i = 0; i < 8; i++)
            if (strlen(profile_names[i]) == n && !strncasecmp(s, profile_names[i], n)) {
                mask |= 1u << i;
                found = 1;
            }
        known += found;
        if (!found)
            prof_log(LOG_WARN, "CLRSCOPE_PROFILES: unknown profile \"%.*s\" ignored (known: "
                     "cpu, wall, alloc, live, gc, exceptions, lock, heap, all, none)",
                     (int)(n > 40 ? 40 : n), s);
        s += n;
        s += strspn(s, sep);
    }
    /* blanks and separators alone are no setting; words that are all typos must not turn every
     * profile off without a word: the default stays, and says so */
    if (!words)
        return PROFILE_ALL;
    if (!known) {
        prof_log(LOG_WARN, "CLRSCOPE_PROFILES=\"%.60s\" names no known profile; using all (write "
                 "none to turn every profile off)", all);
        return PROFILE_ALL;
    }
    return mask;
}

void prof_config_load(void)
{
    struct prof_config *c = &g_cfg;
    memset(c, 0, sizeof *c);
    const char *lvl = getenv("CLRSCOPE_LOG_LEVEL");
    c->log_level = LOG_INFO;
    if (lvl && *lvl) {
        if (!strcasecmp(lvl, "error"))
            c->log_level = LOG_ERROR;
        else if (!strcasecmp(lvl, "warn") || !strcasecmp(lvl, "warning"))
            c->log_level = LOG_WARN;
        else if (!strcasecmp(lvl, "info"))
            c->log_level = LOG_INFO;
        else if (!strcasecmp(lvl, "debug"))
            c->log_level = LOG_DEBUG;
        else
            prof_log(LOG_WARN, "CLRSCOPE_LOG_LEVEL=\"%.20s\" unknown (error, warn, info, debug); "
                     "using info", lvl);
    }
    prof_log_set_level(c->log_level);
    c->dashboard = prof_env_bool("CLRSCOPE_DASHBOARD", 1);
    c->profile_sdk = prof_env_bool("CLRSCOPE_PROFILE_SDK", 0);
    c->port = (int)prof_env_long("CLRSCOPE_PORT", 6060, 0, 65535);
    copy_env("CLRSCOPE_BIND", c->bind, sizeof c->bind, "127.0.0.1");
    /* A token that cannot be used must not leave the dashboard open: it stays off instead. */
    const char *tok = getenv("CLRSCOPE_TOKEN");
    size_t tlen = tok ? strlen(tok) : 0, tok_ok = tlen < sizeof c->token;
    for (size_t i = 0; tok_ok && i < tlen; i++)
        tok_ok = (tok[i] >= '0' && tok[i] <= '9') || (tok[i] >= 'A' && tok[i] <= 'Z') ||
                 (tok[i] >= 'a' && tok[i] <= 'z') || strchr("-._~/=", tok[i]);
    if (tlen && !tok_ok) {
        prof_log(LOG_ERROR, "CLRSCOPE_TOKEN must be 1 to %zu characters of A-Z a-z 0-9 - . _ ~ / "
                 "=; the dashboard stays off", sizeof c->token - 1);
        c->token_bad = 1;
        tlen = 0;
    }
    snprintf(c->token, sizeof c->token, "%.*s", (int)tlen, tlen ? tok : "");
    if (!strcmp(c->token, "auto")) {
        random_token(c->token, sizeof c->token);
        c->token_auto = 1;
    }
    c->sampling_hz = (int)prof_env_long("CLRSCOPE_SAMPLING_HZ", 100, 1, 1000);
    c->history_s = (int)prof_env_long("CLRSCOPE_HISTORY_S", 900, 10, 86400);
    c->max_frames = (int)prof_env_long("CLRSCOPE_MAX_FRAMES", 128, 8, 512);
    c->live_max = (int)prof_env_long("CLRSCOPE_LIVE_MAX", 4096, 0, 1 << 20);
    c->max_stack_nodes = (int)prof_env_long("CLRSCOPE_MAX_STACK_NODES", 200000, 1000, 1 << 24);
    c->max_name_bytes = (size_t)prof_env_long("CLRSCOPE_MAX_NAME_BYTES", 16L << 20, 64L << 10,
                                              1L << 30);
    c->max_threads = (int)prof_env_long("CLRSCOPE_MAX_THREADS", 4096, 1, 1 << 16);
    c->gc_warn = prof_env_double("CLRSCOPE_GC_WARN", 0.30, 0.0, 1.0);
    c->profiles = parse_profiles();
    const char *rt = prof_runtime_dir();
    char defdir[400];
    if (rt)
        snprintf(defdir, sizeof defdir, "%s/clrscope/dumps", rt);
    else /* per user: another user's 0700 directory must not break our snapshots */
        snprintf(defdir, sizeof defdir, "/tmp/clrscope-dumps-%u", (unsigned)getuid());
    copy_env("CLRSCOPE_DUMP_DIR", c->dump_dir, sizeof c->dump_dir, defdir);
    if (c->dump_dir[0] != '/') { /* relative: it would land in whatever the app's cwd is */
        prof_log(LOG_WARN, "CLRSCOPE_DUMP_DIR=\"%.60s\" is not an absolute path; using \"%s\"",
                 c->dump_dir, defdir);
        snprintf(c->dump_dir, sizeof c->dump_dir, "%s", defdir);
    }
    c->dump_dir_default = !strcmp(c->dump_dir, defdir);
    c->dump_keep = (int)prof_env_long("CLRSCOPE_DUMP_KEEP", 5, 1, 1000);
    c->dump_max_heap = prof_env_long("CLRSCOPE_DUMP_MAX_HEAP_MB", 4096, 1, 1L << 30) * 1048576L;
    c->dump_min_interval_s = (int)prof_env_long("CLRSCOPE_DUMP_MIN_INTERVAL_S", 30, 0, 86400);
    c->exception_rate = (int)prof_env_long("CLRSCOPE_EXCEPTION_SAMPLES_PER_S", 100, 1, 100000);
    c->lock_rate = (int)prof_env_long("CLRSCOPE_LOCK_SAMPLES_PER_S", 100, 1, 100000);
    c->alloc_stack_rate = (int)prof_env_long("CLRSCOPE_ALLOC_STACKS_PER_S", 200, 1, 1000000);
    c->cpu_timer_budget = prof_env_double("CLRSCOPE_CPU_TIMER_BUDGET", 0.5, 0, 100) / 100;
    c->overhead_budget = env_percent("CLRSCOPE_OVERHEAD_BUDGET", 1.0) / 100;
    c->overhead_floor = env_percent("CLRSCOPE_OVERHEAD_FLOOR", 1.0) / 100;
}
