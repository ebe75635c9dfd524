/* prof_log.c - see prof_log.h. */
#include "prof_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static int g_level = LOG_INFO;

void prof_log_set_level(int level)
{
    __atomic_store_n(&g_level, level, __ATOMIC_RELAXED);
}

int prof_log_level(void)
{
    return __atomic_load_n(&g_level, __ATOMIC_RELAXED);
}

void prof_log(int level, const char *fmt, ...)
{
    static const char *const names[] = {"error: ", "warning: ", "", "debug: "};
    if (level > prof_log_level())
        return;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "clrscope: %s", level < 0 ? "" : names[level & 3]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + ((size_t)m < sizeof buf - (size_t)n - 1 ? (size_t)m : sizeof buf - (size_t)n - 2);
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}
