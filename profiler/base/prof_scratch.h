/*
 * prof_scratch - working memory that goes back to the system when the work is done.
 *
 * A heap snapshot needs hundreds of megabytes for a few seconds (the graph's index, dominators,
 * root paths, the file's buffers). Taken from malloc on clrscope's own thread, that memory lands
 * in a glibc arena of that thread, and freed it mostly stays there: measured, a 3-million-object
 * heap's process grew by tens of megabytes per snapshot and never shrank. Scratch memory comes
 * from anonymous mappings the arena owns: a large block (64 KiB and more) is a mapping of its
 * own, unmapped when freed or grown by mremap; small blocks are carved from 1 MiB chunks and
 * given back all at once when the arena is released. Nothing here depends on the C library's
 * allocator.
 *
 * The answers made for a moment (views of the store and their trees, pprof encodings, thread
 * dumps, JSON and text replies) take theirs from here too: a civetweb worker's malloc arena
 * would keep each worker's largest answer.
 *
 * ctx: an arena has one owner thread at a time (no locking; a moved arena passes to the thread
 * that drops it); prof_scratch_mapped_bytes from any thread. Never from a signal handler or a
 * runtime callback.
 */
#ifndef PROF_SCRATCH_H
#define PROF_SCRATCH_H

#include <stddef.h>

struct scratch_block;
struct scratch_chunk;

struct prof_scratch {
    struct scratch_block *large;  /* the large blocks still mapped (a list) */
    struct scratch_chunk *chunks; /* the chunks small blocks are carved from (a list) */
    size_t mapped;                /* bytes this arena holds mapped */
};

/* A zeroed block of n bytes (16-byte aligned), or NULL (out of memory, or n too large). An
 * empty arena is all zero: `struct prof_scratch s = {0};`. */
void *prof_scratch_alloc(struct prof_scratch *s, size_t n);
/* A zeroed array of n elements of `size` bytes, or NULL (also when n * size overflows). */
void *prof_scratch_calloc(struct prof_scratch *s, size_t n, size_t size);
/* p's block grown or shrunk to n bytes (bytes past the old size zeroed), or NULL with p
 * untouched. p NULL: as prof_scratch_alloc. */
void *prof_scratch_realloc(struct prof_scratch *s, void *p, size_t n);
/* A large block is unmapped at once; a small one waits for its arena's release. NULL: nothing. */
void prof_scratch_free(struct prof_scratch *s, void *p);
/* Unmaps everything the arena holds; it is empty (and usable) again. */
void prof_scratch_release(struct prof_scratch *s);

/* The realloc-style shape of an allocator callback (struct pprof_opts.alloc), `arena` a struct
 * prof_scratch: (arena, NULL, n) allocates, (arena, p, n) resizes, (arena, p, 0) frees and
 * returns NULL. */
void *prof_scratch_resize(void *arena, void *p, size_t n);

/* qsort with its working memory in `s` (glibc's qsort takes a buffer as large as the array from
 * malloc): a stable merge sort, iterative, the buffer freed before it returns. Out of memory, it
 * is qsort. */
void prof_scratch_sort(struct prof_scratch *s, void *base, size_t n, size_t size,
                       int (*cmp)(const void *, const void *));

/* Hands what the arena holds over to whoever outlives its owner (a reply sent after its handler
 * returned): the arena moves into one of its own blocks and *s is empty again. Returns that
 * block, released with everything it holds by prof_scratch_drop; NULL (s untouched) when out of
 * memory. */
void *prof_scratch_move(struct prof_scratch *s);
/* Unmaps a moved arena (a release callback's shape); NULL: nothing. */
void prof_scratch_drop(void *moved);

/* Bytes mapped by every arena of the process now. */
size_t prof_scratch_mapped_bytes(void);

struct prof_kind;
/* The aggregator's row: scratch memory held now (/api/v1/status self.mem.scratch). */
extern const struct prof_kind prof_scratch_kind;

#endif
