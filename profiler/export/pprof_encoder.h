/*
 * pprof - a small encoder for google/pprof profile.proto, gzip-compressed through zlib (-lz).
 *
 * A builder collects samples (stacks of frame names, one value per sample type, labels), interns
 * every string, gives each distinct frame name one Function and one line-less Location (same id),
 * and points every Location at a single dummy Mapping (id 1, has_functions = true) so that
 * `go tool pprof` never tries to symbolize. Samples are encoded as they are added, so the builder
 * holds roughly the uncompressed protobuf; pprof_finish streams it through deflate.
 *
 * Bounded: at most max_samples samples and max_bytes of builder memory; past either cap a sample
 * is dropped and counted (the count goes into the profile as a comment). Nothing aborts: an
 * allocation failure returns -1 (or NULL) and leaves the builder usable.
 *
 * ctx: any thread; a builder is not thread-safe (one owner, e.g. one civetweb worker building
 * from a snapshot). No recursion; no global state.
 */
#ifndef PPROF_H
#define PPROF_H

#include <stddef.h>
#include <stdint.h>

#define PPROF_DEFAULT_MAX_SAMPLES 1000000u
#define PPROF_DEFAULT_MAX_BYTES ((size_t)512 << 20)
#define PPROF_MAX_TYPES 64
#define PPROF_UNKNOWN_FRAME "[unknown]"
#define PPROF_MAPPING_FILE "clrscope"

typedef struct pprof_builder pprof_builder;
typedef struct {
    const char *type; /* e.g. "samples", "cpu", "alloc-size" */
    const char *unit; /* e.g. "count", "nanoseconds", "bytes" */
} pprof_value_type;

/* Optional knobs for pprof_new_opts(); zero fields take the defaults. */
struct pprof_opts {
    size_t max_samples; /* 0 = PPROF_DEFAULT_MAX_SAMPLES */
    size_t max_bytes;   /* cap on the builder's own heap (tables, encoded samples); 0 = default */
    int gzip_level;     /* 1..9; 0 = zlib's default (6) */
    /* realloc-style allocator: alloc(ctx, NULL, n) allocates, alloc(ctx, p, n) resizes,
     * alloc(ctx, p, 0) frees and returns NULL. NULL = libc realloc/free. Used for everything,
     * including zlib's state and the buffer pprof_finish returns. */
    void *(*alloc)(void *ctx, void *ptr, size_t size);
    void *alloc_ctx;
};

struct pprof_stats {
    size_t samples;   /* samples held */
    size_t dropped;   /* samples rejected by max_samples or max_bytes */
    size_t functions; /* distinct frame names (= locations) */
    size_t strings;   /* string_table entries, "" included */
    size_t bytes;     /* builder heap in use (what max_bytes bounds) */
};

/*
 * Creates a builder. types[0..ntypes) are the sample types ({"samples","count"},
 * {"cpu","nanoseconds"}); period_type and period as in profile.proto. NULL strings become "".
 * Returns an owned builder, free with pprof_free(); NULL on allocation failure or when ntypes is
 * not in 1..PPROF_MAX_TYPES.
 */
pprof_builder *pprof_new(const pprof_value_type *types, int ntypes, pprof_value_type period_type,
                         int64_t period);
/* Same, with options (opts may be NULL). */
pprof_builder *pprof_new_opts(const pprof_value_type *types, int ntypes,
                              pprof_value_type period_type, int64_t period,
                              const struct pprof_opts *opts);

/* time_nanos: collection start, ns since the Unix epoch; duration_nanos: its length. */
void pprof_set_time(pprof_builder *b, int64_t time_nanos, int64_t duration_nanos);

/* Changes the sample cap for later pprof_add_sample() calls (0 = default). */
void pprof_set_max_samples(pprof_builder *b, size_t max_samples);

/*
 * Adds one sample. frames[0] is the LEAF (innermost), frames[nframes-1] the root; each is a full
 * frame string ("MyApp.Orders.Widget.Compute", "libc.so.6"); NULL or "" becomes "[unknown]", and
 * nframes == 0 becomes the one-frame stack "[unknown]". values has one entry per sample type.
 * Label i has key label_keys[i] (labels with a NULL or "" key are skipped) and the string value
 * label_strs[i] when label_strs && label_strs[i] != NULL, else the number label_nums[i] (0 when
 * label_nums is NULL). Note pprof readers ignore a numeric label whose value is 0.
 * Borrows every argument for the duration of the call only.
 * Returns 0 when added, 1 when dropped by a cap (counted), -1 on allocation failure or bad
 * arguments (the builder stays valid; the sample is not added).
 */
int pprof_add_sample(pprof_builder *b, const char *const *frames, int nframes,
                     const int64_t *values, const char *const *label_keys,
                     const char *const *label_strs, const int64_t *label_nums, int nlabels);
/* Same, plus label_units[i] (may be NULL, or hold NULL entries) = num_unit of a numeric label,
 * e.g. "bytes" or "nanoseconds". Ignored for string labels. */
int pprof_add_sample_ex(pprof_builder *b, const char *const *frames, int nframes,
                        const int64_t *values, const char *const *label_keys,
                        const char *const *label_strs, const int64_t *label_nums,
                        const char *const *label_units, int nlabels);

/* Appends a comment (NULL is ignored). On allocation failure pprof_finish() returns -1. */
void pprof_add_comment(pprof_builder *b, const char *comment);

/* Sets default_sample_type; `type` must equal one of the builder's sample type names, anything
 * else (or NULL) clears it, since go tool pprof rejects a default that names no sample type. */
void pprof_set_default_sample_type(pprof_builder *b, const char *type);

/*
 * Serialises and gzips the profile. On success returns 0 and stores an owned buffer in *out and
 * its length in *outlen: free it with free(), or with opts.alloc(ctx, p, 0) when a custom
 * allocator was given. Returns -1 on allocation or zlib failure, or when an earlier
 * pprof_add_comment/pprof_set_default_sample_type failed to allocate; *out is then untouched.
 * The builder is not modified and may be finished again or extended.
 */
int pprof_finish(pprof_builder *b, unsigned char **out, size_t *outlen);

/* Counters of the builder (see struct pprof_stats). */
void pprof_get_stats(const pprof_builder *b, struct pprof_stats *st);

/* Frees the builder; NULL is a no-op. */
void pprof_free(pprof_builder *b);

#endif /* PPROF_H */
