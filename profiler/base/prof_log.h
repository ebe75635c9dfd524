/*
 * prof_log - clrscope's log lines on stderr ("clrscope: ..."), filtered by CLRSCOPE_LOG_LEVEL.
 * Safe from any thread except signal handlers (it formats into a stack buffer and does one write()).
 */
#ifndef PROF_LOG_H
#define PROF_LOG_H

enum prof_log_level { LOG_ALWAYS = -1, LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

void prof_log_set_level(int level);
int prof_log_level(void);
void prof_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Logs at most once per call site: pass a static flag. */
#define prof_log_once(flag, level, ...)                                                            \
    do {                                                                                           \
        if (!__atomic_exchange_n(&(flag), 1, __ATOMIC_RELAXED))                                    \
            prof_log(level, __VA_ARGS__);                                                          \
    } while (0)

#endif
