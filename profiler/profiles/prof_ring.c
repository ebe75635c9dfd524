/* prof_ring.c - see prof_ring.h. */
#include "prof_ring.h"

#include <linux/futex.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "prof_unload.h"

struct slot {
    uint64_t seq; /* atomic */
    struct prof_rec rec;
};

struct prof_ring {
    struct slot *slots;
    uint64_t mask;
    uint64_t head __attribute__((aligned(64))); /* producers (atomic) */
    uint64_t tail __attribute__((aligned(64))); /* consumer */
    uint64_t dropped, pushed;                  /* atomic */
    uint64_t bell_at;   /* atomic: the `pushed` count that rings the bell, 0 = none */
    uint32_t bell_word; /* atomic; the futex word the consumer naps on */
};

size_t prof_ring_mem_bytes(const struct prof_ring *r)
{
    return r ? sizeof *r + (size_t)(r->mask + 1) * sizeof *r->slots : 0;
}

struct prof_ring *prof_ring_new(uint32_t slots_pow2)
{
    struct prof_ring *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->slots = calloc(slots_pow2, sizeof *r->slots);
    if (!r->slots || (slots_pow2 & (slots_pow2 - 1))) {
        free(r->slots);
        free(r);
        return NULL;
    }
    r->mask = slots_pow2 - 1;
    for (uint64_t i = 0; i < slots_pow2; i++)
        r->slots[i].seq = i;
    return r;
}

void prof_ring_free(struct prof_ring *r)
{
    if (r) {
        free(r->slots);
        free(r);
    }
}

struct prof_rec *prof_ring_reserve(struct prof_ring *r)
{
    if (!r)
        return NULL;
    uint64_t pos = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
    for (;;) {
        struct slot *s = &r->slots[pos & r->mask];
        uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (__atomic_compare_exchange_n(&r->head, &pos, pos + 1, 1, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED)) {
                /* the slot holds its previous record: the fields that say how to read the
                 * frames start clear, whoever the producer is */
                s->rec.ips = 0;
                s->rec.check = 0;
                s->rec.rt_ips = 0;
                s->rec.epoch = prof_unload_epoch();
                return &s->rec;
            }
        } else if (diff < 0) {
            __atomic_fetch_add(&r->dropped, 1, __ATOMIC_RELAXED);
            return NULL;
        } else {
            pos = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
        }
    }
}

void prof_ring_commit(struct prof_ring *r, struct prof_rec *rec)
{
    struct slot *s = (struct slot *)((char *)rec - offsetof(struct slot, rec));
    uint64_t pos = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
    uint64_t pushed = __atomic_add_fetch(&r->pushed, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->seq, pos + 1, __ATOMIC_RELEASE);
    uint64_t at = __atomic_load_n(&r->bell_at, __ATOMIC_SEQ_CST);
    if (at && pushed >= at && __atomic_exchange_n(&r->bell_at, 0, __ATOMIC_SEQ_CST)) {
        /* the consumer naps long while nothing comes: wake it (once per arming) */
        __atomic_add_fetch(&r->bell_word, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, &r->bell_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}

void prof_ring_arm_bell(struct prof_ring *r, uint32_t n)
{
    if (r)
        __atomic_store_n(&r->bell_at, n ? prof_ring_pushed(r) + n : 0, __ATOMIC_SEQ_CST);
}

uint32_t *prof_ring_bell(struct prof_ring *r)
{
    return r ? &r->bell_word : NULL;
}

struct prof_rec *prof_ring_peek(struct prof_ring *r)
{
    struct slot *s = &r->slots[r->tail & r->mask];
    uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
    if (seq != r->tail + 1)
        return NULL;
    return &s->rec;
}

void prof_ring_release(struct prof_ring *r)
{
    struct slot *s = &r->slots[r->tail & r->mask];
    __atomic_store_n(&s->seq, r->tail + r->mask + 1, __ATOMIC_RELEASE);
    r->tail++;
}

uint64_t prof_ring_dropped(const struct prof_ring *r)
{
    return r ? __atomic_load_n(&r->dropped, __ATOMIC_RELAXED) : 0;
}

uint64_t prof_ring_pushed(const struct prof_ring *r)
{
    return r ? __atomic_load_n(&r->pushed, __ATOMIC_RELAXED) : 0;
}
