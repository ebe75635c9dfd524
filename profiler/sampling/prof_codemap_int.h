/*
 * prof_codemap_int.h - what the files of the code map share: its state (one struct, defined in
 * prof_codemap.c) and the functions one file calls in another. Not for other modules: their
 * interface is prof_codemap.h.
 *
 * The files: prof_codemap.c (the method table, lookups, the lock, the tick), prof_codemap_stack.c
 * (a sample's or a walk's stack from its addresses), prof_codemap_dyn.c (dynamic methods: the
 * runtime's notes, queued without locks, and their ranges) and prof_codemap_decode.c (x86-64
 * prologue and call-site decoding, pure).
 *
 * ctx: as prof_codemap.h says: everything here under prof_codemap_lock(), by the clrscope-sampler
 * thread or clrscope-agg, but the dynamic methods' queue (producers: runtime callbacks).
 */
#ifndef PROF_CODEMAP_INT_H
#define PROF_CODEMAP_INT_H

#include <pthread.h>
#include <stdint.h>

#include "clr_abi.h"
#include "prof_codemap.h"

#define IPCACHE_SIZE 8192 /* direct-mapped ip -> method cache, power of two */
#define CALLSITE_CACHE 1024 /* return address -> "follows a call" (power of two) */
#define LEAFOFF_CACHE 1024  /* leaf pc -> where its return address is (power of two) */
#define OSR_RETURNS 1024    /* return addresses of OSR frames into Tier0 code, at most */

/* One method's code range (codemap.pool). */
struct code {
    uintptr_t lo, hi;
    uintptr_t start; /* where the code version that holds [lo, hi) starts (0: not known) */
    FunctionID fn;
    uint8_t dyn;  /* a dynamic method's (DynamicMethod, compiled Regex or expression) */
    uint8_t dead; /* that dynamic method was collected: its range names nothing any more */
    struct prof_frame_shape shape;
};

/* Dynamic methods: the runtime's notes, queued without locks, and the ranges applied from them
 * (prof_codemap_dyn.c). */
#define DYN_QUEUE 1024 /* power of two */
#define DYN_MAX 4096   /* dynamic methods' code ranges known at once */

struct dyn_note {
    uint64_t seq;
    uintptr_t lo, hi; /* hi 0: the method was collected */
    FunctionID fn;
    uint32_t entry; /* lo is where the method starts (its prologue is there) */
};

struct dyn_range {
    uintptr_t lo, hi;
    FunctionID fn;
    uint32_t entry;
};

/* The dynamic methods' notes and ranges (a member of struct codemap_state). */
struct codemap_dyn {
    struct dyn_note q[DYN_QUEUE]; /* slots: producers fill them, the owner empties them */
    uint64_t head;    /* atomic: producers (any app thread, in a runtime callback) */
    uint64_t tail;    /* the code map's owner, under the lock */
    uint64_t dropped; /* atomic: notes lost to a full queue (producers) */
    struct dyn_range r[DYN_MAX]; /* under the lock: sorted by lo, never overlapping */
    uint32_t n;
};

/* Inlining (prof_codemap_inline.c): the runtime's JITInlining notes, queued without locks like
 * the dynamic methods' (producers: the JIT's threads), the (caller, callee) pairs applied from
 * them, and per method version the IL-to-native map and calls needed to tell which inlinee an
 * address belongs to. */
#define INL_QUEUE 4096       /* power of two */
#define INL_PAIRS_MAX 65536  /* pairs kept at most (the table grows to it) */
#define INL_BUCKETS 8192     /* power of two */
#define INL_ROOTS 256        /* method versions whose map and calls are kept (direct-mapped) */
#define INL_IPCACHE 4096     /* (address, frame above) -> inlinee (power of two) */
#define INL_CALLEES 1024     /* FunctionID -> module, token, name (direct-mapped) */

struct inl_note {
    uint64_t seq;
    FunctionID caller, callee;
    uint32_t epoch; /* prof_unload's epoch when the JIT told it */
};

struct inl_pair {
    FunctionID caller, callee;
    uint32_t next; /* the next pair of this bucket, +1 (0: none) */
};

struct inl_call {
    uint32_t il;   /* offset of the call instruction */
    uint8_t kind;  /* 1 call, 2 callvirt, 3 calli, 4 newobj */
    uint8_t named; /* name asked (empty: the runtime did not say) */
    mdToken tok;
    char name[48];
};

struct inl_root {
    uintptr_t start; /* 0: empty slot */
    FunctionID fn;
    ModuleID mod;
    uint32_t nmap, ncalls, il_size;
    COR_DEBUG_IL_TO_NATIVE_MAP *map; /* sorted by native start */
    struct inl_call *calls;           /* in IL order */
};

struct inl_callee {
    FunctionID fn; /* 0: empty */
    ModuleID mod;
    mdToken tok;
    char name[48];
};

struct inl_ipc {
    uintptr_t key; /* 0 = empty */
    FunctionID above, inlinee;
};

struct codemap_inl {
    struct inl_note q[INL_QUEUE];
    uint64_t head;    /* atomic: producers */
    uint64_t tail;    /* the owner, under the lock */
    uint64_t dropped; /* atomic: notes lost to a full queue */
    struct inl_pair *pairs;
    uint32_t npairs, cap;
    uint32_t *buckets; /* INL_BUCKETS heads, pair index + 1 */
    struct inl_root roots[INL_ROOTS];
    struct inl_callee callees[INL_CALLEES];
    struct inl_ipc *ipc;
    size_t root_bytes;
};

struct ipc {
    uintptr_t key; /* 0 = empty */
    FunctionID fn;
    int32_t code; /* index into pool, -1 = none */
    /* fn 0 from a runtime that did not answer: the monotonic second from which it is asked
     * again (a lookup during a GC fails, and that code must not stay unnamed); 0 = for good */
    uint32_t retry_s;
};

struct frame {
    uintptr_t ip;
    int ret;   /* a return address (looked up at ip - 1) */
    int found; /* read off the chain by the handler (an OSR method's Tier0 record) */
    int fresh; /* in no mapping the handler's snapshot knew (struct prof_sig_entry) */
};

struct callsite {
    uintptr_t ra; /* 0 = empty */
    int ok;
};

struct leafoff {
    uintptr_t pc; /* 0 = empty */
    int code;     /* the pool entry it was read for (a flush empties the cache) */
    long off;     /* prof_frame_ra_offset's answer */
};

/* The code map's state. Everything but where noted is written and read under `lock`, by the
 * clrscope-sampler thread and clrscope-agg (prof_codemap_init's allocations happen before either
 * looks: prof_sampler_start); prof_codemap_get_stats and prof_codemap_mem_bytes read the
 * counters without it. */
struct codemap_state {
    pthread_mutex_t lock; /* prof_codemap_lock() */
    struct code *pool; /* append-only until a flush */
    uint32_t npool, cap;
    uint32_t ndyn; /* of which dynamic methods' */
    uint32_t *order; /* pool indices sorted by lo */
    struct ipc *cache;
    struct frame *frames;
    int max_frames;
    int frameless_dirty;
    /* where OSR frames return into Tier0 code, sorted: kept across the periodic flush (Tier0
     * code stays where it is), dropped at an unload (which may free it) */
    uintptr_t osr_ra[OSR_RETURNS];
    uint32_t nosr;
    int osr_dirty;
    int64_t flushed_at;
    uint32_t epoch; /* prof_unload's epoch the tables were learned in */
    int no_code_reads; /* atomic, any thread: process_vm_readv is refused here */
    struct callsite callsites[CALLSITE_CACHE];
    struct leafoff leafoffs[LEAFOFF_CACHE];
    struct codemap_dyn dyn;
    struct codemap_inl inl;
    struct prof_codemap_stats st;
};

extern struct codemap_state codemap;

/* prof_codemap.c */
/* The method of an address (fn 0: not managed code); *code = its range entry or -1. Applies the
 * queued dynamic-method notes and an unload's flush first. */
FunctionID codemap_lookup(uintptr_t key, int *code);
/* The same for a return address a walk marked fresh (struct prof_sig_entry): asks no refresh. */
FunctionID codemap_lookup_fresh(uintptr_t key, int *code);
/* Whether the bytes before ra end with a call instruction (cached per address). */
int codemap_after_call(uintptr_t ra);
/* Forgets every learned range and the caches (OSR return addresses are kept); `now` becomes the
 * time of the last flush. */
void codemap_flush(int64_t now);

/* prof_codemap_inline.c */
/* The method the JIT inlined into `fn` (code range `c`) that the address `key` belongs to, or 0;
 * `above` is the frame called from there (0: none, the leaf, or native code), `ret` whether key
 * is a return address's (key = ra - 1). */
FunctionID codemap_inlinee(FunctionID fn, const struct code *c, uintptr_t key, int ret,
                           FunctionID above);
/* Applies the queued JITInlining notes (also done at each lookup). */
void codemap_inline_apply(void);
/* Forgets the per-version tables (with codemap_flush); the pairs stay. */
void codemap_inline_flush(void);
/* A module unload started: its methods' IDs may name other methods next, so every pair goes
 * (the runtime does not say which were the unloaded module's without being asked about them). */
void codemap_inline_forget_pairs(void);
size_t codemap_inline_mem_bytes(void);

/* prof_codemap_dyn.c */
/* Applies the queued notes (before a lookup). */
void codemap_dyn_apply(void);
/* The dynamic method's range that holds key (index into codemap.dyn.r), or -1. */
int codemap_dyn_find(uintptr_t key);

#endif
