/*
 * prof_ring - the bounded, lock-free, multi-producer / single-consumer hand-off from runtime
 * callbacks (app threads, GC threads) to clrscope's aggregator thread.
 *
 * Producers never block and never allocate: prof_ring_reserve() claims a preallocated slot or
 * fails (the drop is counted); the producer fills it and publishes with prof_ring_commit().
 * The consumer (clrscope-agg only) reads in order with prof_ring_peek()/prof_ring_release().
 * Algorithm: Vyukov's bounded queue with per-slot sequence numbers. The process has one ring,
 * which prof_agg makes and drains (prof_agg_ring).
 *
 * ctx: prof_ring_new/free by the ring's owner; prof_ring_reserve/commit any thread, runtime
 * callbacks included (lock-free, no allocation; reserve takes a NULL ring and fails);
 * prof_ring_peek/release the one consumer; the counters and prof_ring_mem_bytes any thread.
 */
#ifndef PROF_RING_H
#define PROF_RING_H

#include <stddef.h>
#include <stdint.h>

#define REC_MAX_FRAMES 64
#define REC_TEXT 256
#define REC_CHECK_AT REC_MAX_FRAMES      /* where a second walk of the same stack goes */
#define REC_FRAMES_CAP (2 * REC_MAX_FRAMES)
#define REC_PROBES 8

enum prof_rec_kind {
    REC_ALLOC = 1,     /* a: ClassID/TypeID, b: object size, c: weight-bytes (upscaled), text: type */
    REC_EXCEPTION = 2, /* text: "type\0message" */
    REC_LOCK = 3,      /* a: wait ns, b: lock id, c: owner thread id */
    REC_LIVE = 4,      /* a REC_ALLOC whose object the live table tracks: d = slot + 1 | seq << 32 */
    REC_USER = 5,      /* free for modules: a..d, text */
    REC_ALLOC_TYPE = 6, /* an allocation sample whose stack was not walked (no frames): a: TypeID,
                         * b: object size, wcount/wbytes, text: type */
};

struct prof_rec {
    uint32_t kind;
    uint32_t nframes;   /* frames[0] = leaf */
    uint32_t os_tid;
    uint32_t truncated;
    uint32_t ips;       /* 1: frames are return addresses, for prof_walk_resolve on clrscope-agg */
    uint32_t check;     /* nonzero: frames[REC_CHECK_AT..] hold the runtime's own walk of the same
                         * stack (check = count | 0x80000000 when cut), for prof_walk */
    uint32_t rt_ips;    /* 1: frames are the runtime's walk's FunctionIDs and frames[REC_CHECK_AT..]
                         * their addresses, for prof_walk_resolve (the frames of inlined code) */
    /* with `ips` (prof_sig_walk_self's report, see prof_sighandler.h) */
    uint64_t found, hops;
    uint64_t stub;
    int32_t stub_off;
    uint32_t nprobes;
    uint32_t calibrating; /* the walk probed everywhere the table is silent (not only the leaf) */
    uint32_t epoch;       /* the unload epoch at prof_ring_reserve (prof_unload.h) */
    struct {
        uint32_t step;
        int32_t off;
        uint64_t x, ra;
    } probes[REC_PROBES];
    double t_unix;
    uint64_t a, b, c, d;
    double x;           /* kind-specific weight */
    double wcount, wbytes; /* REC_ALLOC, REC_LIVE, REC_ALLOC_TYPE: the sample's own weights,
                            * before the stack budget's upscaling (x and c) */
    double wscale;      /* those: the governor's weight (1 / the share planned) */
    uint64_t wu;        /* those: the object's bytes from the sampled one on (0: not known) */
    char text[REC_TEXT];
    uintptr_t frames[REC_FRAMES_CAP]; /* [0..REC_MAX_FRAMES): FunctionIDs (0 = a run of native
                                       * frames), or return addresses when `ips` */
};

struct prof_ring;

struct prof_ring *prof_ring_new(uint32_t slots_pow2);
void prof_ring_free(struct prof_ring *r);
struct prof_rec *prof_ring_reserve(struct prof_ring *r); /* NULL when full (counted) */
void prof_ring_commit(struct prof_ring *r, struct prof_rec *rec);
struct prof_rec *prof_ring_peek(struct prof_ring *r);     /* consumer; NULL when empty */
void prof_ring_release(struct prof_ring *r);
uint64_t prof_ring_dropped(const struct prof_ring *r);
/* Bytes the ring holds (its slots). */
size_t prof_ring_mem_bytes(const struct prof_ring *r);
uint64_t prof_ring_pushed(const struct prof_ring *r);
/* The consumer's doorbell while it naps long (prof_core_nap_word on prof_ring_bell's word):
 * arm(n) makes the producer that commits the n-th record from now bump the word and wake its
 * futex, once; arm(0) disarms. A committing producer pays one atomic load while unarmed. */
void prof_ring_arm_bell(struct prof_ring *r, uint32_t n);
uint32_t *prof_ring_bell(struct prof_ring *r);

#endif
