/* prof_typename.c - see prof_typename.h. Runs on clrscope-agg only. */
#include "prof_typename.h"

#include <stdio.h>
#include <string.h>

#include "prof_intern.h"
#include "prof_log.h"
#include "prof_ring.h"
#include "prof_symbols.h"
#include "prof_unload.h"

#define TYPE_CACHE 8192u /* power of two */
#define TYPE_NAMES_MAX_BYTES (4u << 20)

/* TypeID -> name, and the names themselves: clrscope-agg only. The cache is emptied when a module
 * unload starts; the names stay, once each, in `names` (prof_live keeps pointers to them). */
static struct typename_state {
    uint64_t id[TYPE_CACHE];
    const char *name[TYPE_CACHE];
    uint32_t n;
    uint32_t epoch; /* prof_unload's epoch the cache holds answers for */
    int full_logged;
    int names_ready;
    struct prof_intern names;
} typenames;

static const char *type_name_copy(const char *s)
{
    if (!typenames.names_ready && prof_intern_init(&typenames.names, TYPE_NAMES_MAX_BYTES) == 0)
        typenames.names_ready = 1;
    return typenames.names_ready
               ? prof_intern_str(&typenames.names, prof_intern(&typenames.names, s))
               : NULL;
}

const char *prof_typename_of(uint64_t type_id, const char *raw_name)
{
    uint32_t epoch = prof_unload_epoch();
    if (epoch != typenames.epoch) {
        typenames.epoch = epoch;
        memset(typenames.id, 0, sizeof typenames.id);
        memset(typenames.name, 0, sizeof typenames.name);
        typenames.n = 0;
    }
    uint32_t h = (uint32_t)((type_id * 0x9E3779B97F4A7C15ull) >> 40) & (TYPE_CACHE - 1);
    for (uint32_t i = 0; i < TYPE_CACHE; i++) {
        uint32_t k = (h + i) & (TYPE_CACHE - 1);
        if (typenames.id[k] == type_id && typenames.name[k])
            return typenames.name[k];
        if (!typenames.name[k]) {
            if (typenames.n >= TYPE_CACHE * 3 / 4) {
                /* Full: start again (the names stay interned; the types still allocated come
                 * back one sample each). A cache that stopped taking names would call every
                 * type first sampled after the 6,144th "[other types]" for the process's life. */
                memset(typenames.id, 0, sizeof typenames.id);
                memset(typenames.name, 0, sizeof typenames.name);
                typenames.n = 0;
                prof_log_once(typenames.full_logged, LOG_INFO, "more than %u allocated types: "
                              "the type cache starts again", TYPE_CACHE * 3 / 4);
                k = h;
            }
            char clean[REC_TEXT + 64];
            const char *raw = raw_name && raw_name[0] ? raw_name : "[unknown type]";
            prof_symbols_clean_typename(raw, clean, sizeof clean);
            /* The event names a nested type by its own name only ("Entry[System.Int32,...][]"
             * for Dictionary`2+Entry[]): without a namespace, ask the metadata. TypeID is the
             * ClassID, alive when the sample was taken; prof_symbols asks about it only while
             * no module unload has started since (clrscope-agg entered with its epoch). */
            size_t base = strcspn(raw, "[<");
            int keep = 1;
            if (!memchr(raw, '.', base)) {
                const char *full = prof_symbols_class((ClassID)type_id);
                if (full && full[0] && full[0] != '[')
                    snprintf(clean, sizeof clean, "%s", full);
                /* a sample taken before a module unload started: the event's own name for now,
                 * the full one from the next sample */
                keep = prof_unload_may_query();
            }
            const char *copy = type_name_copy(clean[0] ? clean : "[unknown type]");
            if (!copy)
                return "[unknown type]";
            if (!keep)
                return copy;
            typenames.id[k] = type_id;
            typenames.name[k] = copy;
            typenames.n++;
            return copy;
        }
    }
    return "[other types]"; /* not reached: the cache never holds more than 3/4 */
}
