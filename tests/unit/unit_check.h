/*
 * unit_check.h - the one assertion macro of the C unit tests: CHECK(cond, fmt, ...) counts a pass
 * or prints "FAIL file:line: message" and counts a failure; each test ends by printing
 * "N passed, N failed" from `passed` and `failed` and returns failed != 0.
 */
#ifndef UNIT_CHECK_H
#define UNIT_CHECK_H

#include <stdio.h>

static int failed, passed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            passed++;                                                                              \
        } else {                                                                                   \
            failed++;                                                                              \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

#endif
