/*
 * test_config.c - reading the configuration variables (prof_config): CLRSCOPE_PROFILES of any
 * length, with "all", "none", empty items, unknown words and nothing but typos.
 */
#include <stdlib.h>
#include <string.h>

#include "prof_config.h"

#include "unit_check.h"

static unsigned profiles_of(const char *value)
{
    if (value)
        setenv("CLRSCOPE_PROFILES", value, 1);
    else
        unsetenv("CLRSCOPE_PROFILES");
    prof_config_load();
    return g_cfg.profiles;
}

int main(void)
{
    setenv("CLRSCOPE_LOG_LEVEL", "error", 1); /* the unknown words' warnings are expected */
    CHECK(profiles_of(NULL) == PROFILE_ALL, "unset: all");
    CHECK(profiles_of("all") == PROFILE_ALL, "all");
    CHECK(profiles_of("none") == 0, "none: 0x%x", profiles_of("none"));
    CHECK(profiles_of("cpu") == PROFILE_CPU, "cpu");
    CHECK(profiles_of(" CPU,,wall ,") == (PROFILE_CPU | PROFILE_WALL), "case, empty items, spaces");
    CHECK(profiles_of("cpux,cp,cpu") == PROFILE_CPU, "only whole words count");
    CHECK(profiles_of("none,lock") == PROFILE_LOCK, "none beside a profile");
    CHECK(profiles_of("gc,all") == PROFILE_ALL, "all in a list");
    CHECK(profiles_of("cpu;wall") == (PROFILE_CPU | PROFILE_WALL), "semicolons separate too");
    /* nothing but typos or separators: the default, not every profile off */
    CHECK(profiles_of("cpx") == PROFILE_ALL, "typo: all");
    CHECK(profiles_of(" ") == PROFILE_ALL, "blank: all");
    CHECK(profiles_of(",") == PROFILE_ALL, "separator: all");
    /* a long list: before, it was cut at 255 characters without a word and heap was lost */
    char big[1200] = "";
    for (int i = 0; i < 40; i++)
        strcat(big, "cpu, wall, ");
    strcat(big, "heap");
    CHECK(strlen(big) > 400, "long list");
    CHECK(profiles_of(big) == (PROFILE_CPU | PROFILE_WALL | PROFILE_HEAP), "long list: 0x%x",
          profiles_of(big));
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
