/*
 * test_scratch - working memory that goes back to the system (prof_scratch): small and large
 * blocks come zeroed and aligned, keep their bytes when they grow (a large one across mremap,
 * with the bytes a shrink left behind read as zero), large ones leave the process's mappings
 * when freed, and releasing an arena unmaps everything it held (its own count, the process's,
 * and the kernel's count of the process's mappings all go back). The sort is ordered and stable
 * and keeps nothing; a moved arena keeps its blocks until dropped.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_scratch.h"
#include "unit_check.h"

/* The process's mapped address space in kB (VmSize), as the kernel counts it. */
static long vm_size_kb(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static void test_small_blocks(void)
{
    struct prof_scratch s = {0};
    unsigned char *a = prof_scratch_alloc(&s, 100), *b = prof_scratch_calloc(&s, 10, 3);
    CHECK(a && b && a != b, "two small blocks");
    CHECK(((uintptr_t)a & 15) == 0 && ((uintptr_t)b & 15) == 0, "16-byte aligned");
    CHECK(all_zero(a, 100) && all_zero(b, 30), "zeroed");
    CHECK(b >= a + 100 || a >= b + 30, "they do not overlap");
    memset(a, 0xab, 100);
    unsigned char *c = prof_scratch_realloc(&s, a, 5000);
    CHECK(c && c[0] == 0xab && c[99] == 0xab && all_zero(c + 100, 4900), "grown: bytes kept, rest 0");
    CHECK(prof_scratch_realloc(&s, c, 10) == c, "shrunk in place");
    CHECK(s.mapped == (1u << 20), "one chunk mapped: %zu", s.mapped);
    prof_scratch_free(&s, b); /* waits for the release */
    prof_scratch_release(&s);
    CHECK(s.mapped == 0 && !s.chunks && !s.large, "released");
    CHECK(prof_scratch_calloc(&s, SIZE_MAX / 4, 8) == NULL, "an overflowing size is refused");
}

static void test_large_blocks(void)
{
    size_t base = prof_scratch_mapped_bytes();
    long vm0 = vm_size_kb();
    struct prof_scratch s = {0};
    size_t n = 64u << 20;
    unsigned char *a = prof_scratch_alloc(&s, n);
    CHECK(a && all_zero(a, 4096) && all_zero(a + n - 4096, 4096), "a large block, zeroed");
    CHECK(prof_scratch_mapped_bytes() - base >= n, "counted by the process");
    CHECK(vm_size_kb() - vm0 >= (long)(n >> 10), "a mapping of the process");
    memset(a, 0x5a, n);
    unsigned char *b = prof_scratch_realloc(&s, a, 2 * n);
    CHECK(b && b[0] == 0x5a && b[n - 1] == 0x5a && all_zero(b + n, n), "grown by mremap: bytes kept");
    b = prof_scratch_realloc(&s, b, 100000); /* shrink: the last page keeps stale bytes... */
    CHECK(b && b[99999] == 0x5a, "shrunk: the bytes within kept");
    b = prof_scratch_realloc(&s, b, 300000); /* ...which must read as zero when it grows again */
    CHECK(b && b[99999] == 0x5a && all_zero(b + 100000, 200000), "regrown: the tail is zero");
    unsigned char *c = prof_scratch_alloc(&s, 1u << 20);
    CHECK(c && s.large, "a second large block");
    prof_scratch_free(&s, b);
    CHECK(s.mapped < (2u << 20), "a freed large block is unmapped at once: %zu held", s.mapped);
    prof_scratch_release(&s);
    CHECK(s.mapped == 0 && prof_scratch_mapped_bytes() == base, "all given back");
    CHECK(vm_size_kb() - vm0 < 1024, "the mappings are gone: %ld kB left", vm_size_kb() - vm0);
}

struct kv {
    uint32_t key, pos;
};

static int cmp_key(const void *a, const void *b)
{
    const struct kv *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* The sort: ordered, stable (equal keys keep their order), every size, no memory left held. */
static void test_sort(void)
{
    struct prof_scratch s = {0};
    static const size_t sizes[] = {0, 1, 2, 3, 7, 8, 9, 1000, 100000};
    uint32_t seed = 12345;
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        size_t n = sizes[t];
        struct kv *v = malloc((n ? n : 1) * sizeof *v);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            v[i] = (struct kv){.key = (seed >> 16) % (n / 4 + 1), .pos = (uint32_t)i};
        }
        prof_scratch_sort(&s, v, n, sizeof *v, cmp_key);
        int ok = 1;
        for (size_t i = 1; i < n; i++)
            ok &= v[i - 1].key < v[i].key || (v[i - 1].key == v[i].key && v[i - 1].pos < v[i].pos);
        CHECK(ok, "%zu elements sorted, equal keys in their first order", n);
        free(v);
    }
    CHECK(!s.large, "its buffer is given back: %zu bytes held", s.mapped);
    prof_scratch_release(&s);
}

/* A moved arena holds what the old one did, its home included; dropping it unmaps it all. */
static void test_move(void)
{
    size_t base = prof_scratch_mapped_bytes();
    struct prof_scratch s = {0};
    char *small = prof_scratch_alloc(&s, 100), *large = prof_scratch_alloc(&s, 1u << 20);
    CHECK(small && large, "two blocks");
    strcpy(small, "kept");
    large[(1u << 20) - 1] = 7;
    void *moved = prof_scratch_move(&s);
    CHECK(moved && !s.large && !s.chunks && s.mapped == 0, "moved: the old arena is empty");
    CHECK(!strcmp(small, "kept") && large[(1u << 20) - 1] == 7, "the blocks stay where they were");
    CHECK(prof_scratch_mapped_bytes() - base >= (1u << 20), "still mapped");
    prof_scratch_drop(moved);
    CHECK(prof_scratch_mapped_bytes() == base, "dropped: all given back");
    prof_scratch_drop(NULL);
    /* the realloc-style shape (the pprof encoder's allocator) */
    char *p = prof_scratch_resize(&s, NULL, 200000);
    p = p ? prof_scratch_resize(&s, p, 400000) : NULL;
    CHECK(p && s.large, "resize allocates and grows");
    CHECK(prof_scratch_resize(&s, p, 0) == NULL && !s.large, "resize to 0 frees");
    prof_scratch_release(&s);
}

int main(void)
{
    test_small_blocks();
    test_large_blocks();
    test_sort();
    test_move();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
