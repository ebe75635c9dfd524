/* prof_scratch.c - see prof_scratch.h. */
#include "prof_scratch.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "prof_agg.h"

#define LARGE_MIN (64u << 10) /* a block this size or larger is a mapping of its own */
#define CHUNK_LEN (1u << 20)  /* small blocks are carved from mappings of this size */
#define PAGE 4096u

/* Before every block: its size and, for a large one, its mapping and its place in the list. */
struct scratch_block {
    size_t size;    /* bytes asked for */
    size_t map_len; /* large: the mapping's length (the header included); small: 0 */
    struct scratch_block *prev, *next;
};

struct scratch_chunk {
    struct scratch_chunk *next;
    size_t len, used; /* used: bytes carved so far, this header included */
    size_t pad;       /* keeps the blocks after the header 16-byte aligned */
};

_Static_assert(sizeof(struct scratch_block) % 16 == 0, "blocks must stay 16-byte aligned");
_Static_assert(sizeof(struct scratch_chunk) % 16 == 0, "blocks must stay 16-byte aligned");

static size_t g_mapped; /* atomic: every arena's mapped bytes */

static void *map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void count(struct prof_scratch *s, size_t add, size_t sub)
{
    s->mapped = s->mapped + add - sub;
    if (add)
        __atomic_add_fetch(&g_mapped, add, __ATOMIC_RELAXED);
    if (sub)
        __atomic_sub_fetch(&g_mapped, sub, __ATOMIC_RELAXED);
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static struct scratch_block *block_of(void *p)
{
    return (struct scratch_block *)p - 1;
}

static void *alloc_large(struct prof_scratch *s, size_t n)
{
    size_t len = round_up(n + sizeof(struct scratch_block), PAGE);
    struct scratch_block *b = map(len);
    if (!b)
        return NULL;
    *b = (struct scratch_block){.size = n, .map_len = len, .prev = NULL, .next = s->large};
    if (s->large)
        s->large->prev = b;
    s->large = b;
    count(s, len, 0);
    return b + 1;
}

static void *alloc_small(struct prof_scratch *s, size_t n)
{
    size_t need = sizeof(struct scratch_block) + round_up(n ? n : 1, 16);
    struct scratch_chunk *c = s->chunks;
    if (!c || c->len - c->used < need) {
        c = map(CHUNK_LEN);
        if (!c)
            return NULL;
        *c = (struct scratch_chunk){.next = s->chunks, .len = CHUNK_LEN,
                                    .used = sizeof(struct scratch_chunk)};
        s->chunks = c;
        count(s, CHUNK_LEN, 0);
    }
    struct scratch_block *b = (struct scratch_block *)((char *)c + c->used);
    c->used += need;
    *b = (struct scratch_block){.size = n};
    return b + 1; /* a chunk's bytes are never handed out twice: still zero */
}

void *prof_scratch_alloc(struct prof_scratch *s, size_t n)
{
    if (n > SIZE_MAX / 2)
        return NULL;
    return n >= LARGE_MIN ? alloc_large(s, n) : alloc_small(s, n);
}

void *prof_scratch_calloc(struct prof_scratch *s, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / 2 / size)
        return NULL;
    return prof_scratch_alloc(s, n * size); /* mappings start zeroed */
}

void *prof_scratch_realloc(struct prof_scratch *s, void *p, size_t n)
{
    if (!p)
        return prof_scratch_alloc(s, n);
    if (n > SIZE_MAX / 2)
        return NULL;
    struct scratch_block *b = block_of(p);
    if (b->map_len) { /* a mapping of its own: mremap keeps the bytes, adds zeroed pages */
        size_t len = round_up(n + sizeof *b, PAGE);
        size_t old_size = b->size, old_cap = b->map_len - sizeof *b;
        struct scratch_block *nb = b;
        if (len != b->map_len) {
            nb = mremap(b, b->map_len, len, MREMAP_MAYMOVE);
            if (nb == MAP_FAILED)
                return NULL;
            count(s, len, nb->map_len);
            nb->map_len = len;
            if (nb->prev)
                nb->prev->next = nb;
            else
                s->large = nb;
            if (nb->next)
                nb->next->prev = nb;
        }
        /* what the old mapping held past the old size (a block that shrank) reads as zero */
        if (n > old_size)
            memset((char *)(nb + 1) + old_size, 0, (n < old_cap ? n : old_cap) - old_size);
        nb->size = n;
        return nb + 1;
    }
    if (n <= b->size) {
        b->size = n;
        return p;
    }
    void *np = prof_scratch_alloc(s, n); /* zeroed */
    if (!np)
        return NULL;
    memcpy(np, p, b->size);
    return np; /* the small block stays in its chunk until the arena is released */
}

void prof_scratch_free(struct prof_scratch *s, void *p)
{
    if (!p)
        return;
    struct scratch_block *b = block_of(p);
    if (!b->map_len)
        return;
    if (b->prev)
        b->prev->next = b->next;
    else
        s->large = b->next;
    if (b->next)
        b->next->prev = b->prev;
    count(s, 0, b->map_len);
    munmap(b, b->map_len);
}

void prof_scratch_release(struct prof_scratch *s)
{
    while (s->large)
        prof_scratch_free(s, s->large + 1);
    while (s->chunks) {
        struct scratch_chunk *c = s->chunks;
        s->chunks = c->next;
        count(s, 0, c->len);
        munmap(c, c->len);
    }
}

void *prof_scratch_resize(void *arena, void *p, size_t n)
{
    struct prof_scratch *s = arena;
    if (p && !n) {
        prof_scratch_free(s, p);
        return NULL;
    }
    return prof_scratch_realloc(s, p, n);
}

void prof_scratch_sort(struct prof_scratch *s, void *base, size_t n, size_t size,
                       int (*cmp)(const void *, const void *))
{
    if (n < 2 || !size)
        return;
    char *tmp = n <= SIZE_MAX / size ? prof_scratch_alloc(s, n * size) : NULL;
    if (!tmp) {
        qsort(base, n, size, cmp);
        return;
    }
    char *src = base, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) { /* sorted runs of w, merged pairwise */
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = n - lo > w ? lo + w : n;
            size_t hi = n - mid > w ? mid + w : n;
            size_t i = lo, j = mid;
            char *out = dst + lo * size;
            while (i < mid && j < hi) { /* ties from the left run first: stable */
                const char *take = cmp(src + j * size, src + i * size) < 0 ? src + j++ * size
                                                                          : src + i++ * size;
                memcpy(out, take, size);
                out += size;
            }
            memcpy(out, src + i * size, (mid - i) * size);
            out += (mid - i) * size;
            memcpy(out, src + j * size, (hi - j) * size);
        }
        char *t = src;
        src = dst;
        dst = t;
        if (w > n / 2) /* one run now */
            break;
    }
    if (src != base)
        memcpy(base, src, n * size);
    prof_scratch_free(s, tmp);
}

void *prof_scratch_move(struct prof_scratch *s)
{
    struct prof_scratch *home = prof_scratch_alloc(s, sizeof *home);
    if (!home)
        return NULL;
    *home = *s; /* after the allocation: the arena as it holds its own home too */
    *s = (struct prof_scratch){0};
    return home;
}

void prof_scratch_drop(void *moved)
{
    if (!moved)
        return;
    struct prof_scratch s = *(struct prof_scratch *)moved; /* the home goes with the rest */
    prof_scratch_release(&s);
}

size_t prof_scratch_mapped_bytes(void)
{
    return __atomic_load_n(&g_mapped, __ATOMIC_RELAXED);
}

const struct prof_kind prof_scratch_kind = {
    .name = "scratch",
    .mem_bytes = prof_scratch_mapped_bytes,
    .mem_name = "scratch",
};
