/*
 * test_natsym.c - native frame names (profiler/sampling/prof_natsym.h) for a library this process
 * loads itself (tests/apps/natlib's libcsburn.so, built beside the test: argv[1] is its natsym
 * directory): an exported function named from the library's symbol table; a library whose file
 * on disk was replaced by another build after it was loaded keeps its module name (its symbols
 * would name other code); an address the maps would give another library's name is not named.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof_natsym.h"
#include "unit_check.h"

static int copy(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    int ok = a && b;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0)
        ok = fwrite(buf, 1, n, b) == n;
    if (a)
        fclose(a);
    if (b && fclose(b))
        ok = 0;
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        printf("usage: test_natsym NATSYM_DIR\n");
        return 2;
    }
    char dir[] = "/tmp/clrscope-natsym-XXXXXX", a[512], b[512], full[512], other[512], tmp[512];
    if (!mkdtemp(dir))
        return 2;
    snprintf(full, sizeof full, "%s/full/libcsburn.so", argv[1]);
    snprintf(other, sizeof other, "%s/build/libcsburn_other.so", argv[1]);
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    mkdir(a, 0700);
    mkdir(b, 0700);
    snprintf(a, sizeof a, "%s/a/libcsburn.so", dir);
    snprintf(b, sizeof b, "%s/b/libcsburn.so", dir);
    CHECK(!copy(full, a) && !copy(full, b), "copies of %s", full);
    void *ha = dlopen(a, RTLD_NOW | RTLD_LOCAL), *hb = dlopen(b, RTLD_NOW | RTLD_LOCAL);
    CHECK(ha && hb && ha != hb, "two copies loaded: %s", dlerror());
    if (!ha || !hb)
        return 1;
    uintptr_t fa = (uintptr_t)dlsym(ha, "csburn_exported"), fb = (uintptr_t)dlsym(hb, "csburn_exported");
    CHECK(fa && fb && fa != fb, "csburn_exported in each");

    const char *mod = "[native libcsburn.so]";
    const char *got = prof_natsym_name(fa + 4, mod);
    CHECK(!strcmp(got, "[native libcsburn.so!csburn_exported]"), "named from .symtab: %s", got);
    CHECK(prof_natsym_name(fa + 8, mod) == got, "the same interned name again");
    /* the maps name another file there (unloaded since, something else loaded): not named */
    got = prof_natsym_name(fa + 4, "[native libother.so]");
    CHECK(!strcmp(got, "[native libother.so]"), "another module's name kept: %s", got);

    /* b's file replaced by another build (an upgrade under a running process), before its
     * symbols were read: they would name other code */
    snprintf(tmp, sizeof tmp, "%s/b/next.so", dir);
    CHECK(!copy(other, tmp) && !rename(tmp, b), "b replaced by %s", other);
    got = prof_natsym_name(fb + 4, mod);
    CHECK(!strcmp(got, mod), "a replaced file's symbols not used: %s", got);
    struct prof_natsym_stats st;
    prof_natsym_get_stats(&st);
    CHECK(st.refused >= 1 && st.with_symtab >= 1 && st.functions >= 2,
          "refused %u, with_symtab %u, functions %llu", st.refused, st.with_symtab,
          (unsigned long long)st.functions);

    unlink(a);
    unlink(b);
    snprintf(tmp, sizeof tmp, "%s/a", dir);
    rmdir(tmp);
    snprintf(tmp, sizeof tmp, "%s/b", dir);
    rmdir(tmp);
    rmdir(dir);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
