/*
 * evcounter - reads one "EventCounters" event of an EventSource (System.Runtime) as EventPipe
 * delivers it: a self-describing event whose metadata blob lists the payload's fields.
 *
 * Metadata (V1, as EventPipe defines it for EventSource events): EventID u32, EventName UTF-16z,
 * Keywords u64, Version u32, Level u32, ParameterCount u32, then per parameter TypeCode u32 and,
 * for TypeCode Object (1), FieldCount u32 + the fields (recursively) before the name; every name is
 * UTF-16z. The payload holds the primitive values in the same depth-first order (strings UTF-16z).
 *
 * Pure function: no allocation, no recursion, bounded by the two lengths; any input that does not
 * describe an EventCounters payload with a Name field is refused (-1).
 *
 * ctx: any thread (prof_counters calls it on the runtime's counter poller thread).
 */
#ifndef EVCOUNTER_H
#define EVCOUNTER_H

#include <stddef.h>
#include <stdint.h>

struct evc_value {
    char name[64];      /* counter name, e.g. "alloc-rate" (truncated to fit) */
    char units[16];     /* DisplayUnits ("" when absent) */
    double value;       /* Increment (incrementing counters) or Mean (the others) */
    double interval_s;  /* IntervalSec: the polling interval the value covers (0 when absent) */
    int incrementing;   /* 1 when the payload carried Increment */
};

/* 0 and *out filled, or -1 (not an EventCounters event, or malformed). */
int evc_parse(const uint8_t *meta, size_t meta_len, const uint8_t *data, size_t data_len,
              struct evc_value *out);

#endif
