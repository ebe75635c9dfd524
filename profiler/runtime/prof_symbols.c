/* prof_symbols.c - see prof_symbols.h. */
#include "prof_symbols.h"
#include "prof_symbols_int.h"
#include "prof_utf8.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_core.h"
#include "prof_intern.h"
#include "prof_unload.h"

#define MAX_CACHE 200000u
#define MAX_MODULES 4096
#define MAX_SCRATCH 16
/* What a record taken before a module unload started gets for a name the caches lack. */
#define UNNAMED_TYPE "[type not named: a module was unloaded]"
#define UNNAMED_FUNCTION "[frame not named: a module was unloaded]"
/* A method the runtime did not name (its metadata not open yet, a lookup refused): not cached
 * with the names, asked again a second later (neg_fn) */
static const char UNKNOWN_MANAGED[] = "[unknown managed]";

struct kv {
    uintptr_t key; /* 0 = empty */
    const char *val;
};

struct cache {
    struct kv *e;
    uint32_t n, cap;
};

#define NAMES_MAX_BYTES (16u << 20)
#define NEG_SLOTS 256

/* A module whose metadata or path was asked for (not collectible: its ID is never reused). */
struct module_entry {
    ModuleID id;
    IMetaDataImport *md;
    int64_t md_retry_ns; /* opening the metadata failed: tried again from then on (monotonic) */
    const char *path; /* the module's file as the runtime names it; NULL until asked */
    int path_tried;
};

/* The module's state: clrscope's own threads (clrscope-agg, clrscope-sample, the heap snapshot
 * thread, API handlers), every field under `lock`. */
static struct symbols_state {
    pthread_mutex_t lock;
    struct cache fn, cls, native;
    /* The same for IDs that belong to collectible code (a collectible module, or a generic
     * instance or array over one of its types): emptied when a module unload starts, since such
     * an ID may then come back as another class or method. The others' IDs are never freed and
     * stay cached. */
    struct cache fn_coll, cls_coll, clsmod_coll;
    int coll; /* the name being built met collectible code */
    /* Every name handed out, once each (names asked again after an unload come from here). */
    struct prof_intern names;
    int names_ready;
    uint32_t epoch; /* prof_unload's epoch the ID caches hold answers for */
    struct module_entry mods[MAX_MODULES];
    int nmods;
    struct cache clsmod; /* ClassID -> module path ("" when the runtime gives none) */
    struct cache jit;    /* a method's interned name -> "[JIT] compiling <name>" */
    /* Metadata of collectible modules, opened for one question and released before the lock
     * is: their ModuleIDs are freed with them and may come back as another module's, so they
     * get no slot. */
    IMetaDataImport *scratch[MAX_SCRATCH];
    int nscratch;
    /* Methods and types the runtime did not name, not cached: each is asked again at most once
     * a second (direct-mapped; emptied with the collectible caches) */
    struct neg_entry {
        uintptr_t key;
        int64_t retry_ns;
        const char *name;
    } neg_fn[NEG_SLOTS], neg_cls[NEG_SLOTS];
} symbols = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The name given last time if `key` failed less than a second ago, else NULL. */
static const char *neg_get(struct neg_entry *t, uintptr_t key)
{
    struct neg_entry *e = &t[(key >> 4) % NEG_SLOTS];
    return e->key == key && prof_now_ns() < e->retry_ns ? e->name : NULL;
}

static void neg_put(struct neg_entry *t, uintptr_t key, const char *name)
{
    t[(key >> 4) % NEG_SLOTS] =
        (struct neg_entry){.key = key, .retry_ns = prof_now_ns() + 1000000000LL, .name = name};
}

static uint32_t hash_ptr(uintptr_t p)
{
    uint64_t x = p * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(x >> 32);
}

static const char *cache_get(struct cache *c, uintptr_t key)
{
    if (!c->cap)
        return NULL;
    for (uint32_t i = hash_ptr(key) & (c->cap - 1);; i = (i + 1) & (c->cap - 1)) {
        if (c->e[i].key == key)
            return c->e[i].val;
        if (!c->e[i].key)
            return NULL;
    }
}

static void cache_put(struct cache *c, uintptr_t key, const char *val)
{
    if (!key)
        return; /* key 0 is the empty mark */
    if (c->n >= MAX_CACHE) {
        /* full: start again (the names stay interned). A cache that stopped remembering would
         * have every id not in it looked up in the metadata again at each sample, under the
         * lock. */
        memset(c->e, 0, (size_t)c->cap * sizeof *c->e);
        c->n = 0;
    }
    if ((c->n + 1) * 2 > c->cap) {
        uint32_t nc = c->cap ? c->cap * 2 : 1024;
        struct kv *ne = calloc(nc, sizeof *ne);
        if (!ne)
            return;
        for (uint32_t i = 0; i < c->cap; i++)
            if (c->e[i].key)
                for (uint32_t j = hash_ptr(c->e[i].key) & (nc - 1);; j = (j + 1) & (nc - 1))
                    if (!ne[j].key) {
                        ne[j] = c->e[i];
                        break;
                    }
        free(c->e);
        c->e = ne;
        c->cap = nc;
    }
    for (uint32_t i = hash_ptr(key) & (c->cap - 1);; i = (i + 1) & (c->cap - 1))
        if (!c->e[i].key) {
            c->e[i].key = key;
            c->e[i].val = val;
            c->n++;
            return;
        }
}

void prof_symbols_init(void)
{
}

size_t prof_symbols_count(void)
{
    pthread_mutex_lock(&symbols.lock);
    size_t n = symbols.fn.n + symbols.cls.n + symbols.native.n;
    pthread_mutex_unlock(&symbols.lock);
    return n;
}

static IMetaDataImport *open_metadata(ModuleID mod)
{
    void *unk = NULL;
    ICorProfilerInfo15 *info = g_core.info;
    if (info->vt->GetModuleMetaData(info, mod, 0, &IID_IMetaDataImport, &unk) != S_OK)
        unk = NULL;
    return unk;
}

/* The module's slot in symbols.mods (-1 when the table is full); its metadata is opened on first
 * use. */
static int module_slot(ModuleID mod)
{
    for (int i = 0; i < symbols.nmods; i++)
        if (symbols.mods[i].id == mod)
            return i;
    if (symbols.nmods >= MAX_MODULES)
        return -1;
    symbols.mods[symbols.nmods].id = mod;
    symbols.mods[symbols.nmods].md = NULL;
    symbols.mods[symbols.nmods].md_retry_ns = 0;
    return symbols.nmods++;
}

/* Whether the module can be unloaded (or the runtime does not say): it then gets no slot. */
static int module_collectible(ModuleID mod)
{
    for (int i = 0; i < symbols.nmods; i++)
        if (symbols.mods[i].id == mod)
            return 0;
    ICorProfilerInfo15 *info = g_core.info;
    const BYTE *base = NULL;
    ULONG len = 0;
    AssemblyID asm_id = 0;
    DWORD flags = 0;
    if (!info->vt->GetModuleInfo2 ||
        info->vt->GetModuleInfo2(info, mod, &base, 0, &len, NULL, &asm_id, &flags) < 0)
        return 1;
    return (flags & COR_PRF_MODULE_COLLECTIBLE) != 0;
}

/* Releases the collectible modules' metadata opened since the lock was taken. */
static void release_scratch(void)
{
    for (int i = 0; i < symbols.nscratch; i++)
        symbols.scratch[i]->vt->Release(symbols.scratch[i]);
    symbols.nscratch = 0;
}

/* The module's metadata; a collectible module sets symbols.coll (the name being built belongs to
 * collectible code). */
static IMetaDataImport *metadata_for(ModuleID mod)
{
    if (module_collectible(mod)) {
        symbols.coll = 1;
        if (symbols.nscratch >= MAX_SCRATCH)
            return NULL;
        IMetaDataImport *md = open_metadata(mod);
        if (md)
            symbols.scratch[symbols.nscratch++] = md;
        return md;
    }
    int i = module_slot(mod);
    if (i < 0) { /* table full: answer, don't remember */
        IMetaDataImport *md = symbols.nscratch < MAX_SCRATCH ? open_metadata(mod) : NULL;
        if (md)
            symbols.scratch[symbols.nscratch++] = md;
        return md;
    }
    /* the runtime may refuse for a moment (a module just loaded, a GC running): asked again at
     * most once a second, never given up (a module left without names for good was the cost) */
    int64_t now = prof_now_ns();
    if (!symbols.mods[i].md && now >= symbols.mods[i].md_retry_ns) {
        symbols.mods[i].md = open_metadata(mod);
        if (!symbols.mods[i].md)
            symbols.mods[i].md_retry_ns = now + 1000000000LL;
    }
    return symbols.mods[i].md;
}

/* The module's file path (UTF-8), or NULL: dynamic modules have none, a full table remembers
 * none. */
static const char *module_path(ModuleID mod)
{
    if (module_collectible(mod))
        return NULL; /* (its ID may name another module later) */
    int i = module_slot(mod);
    if (i < 0 || symbols.mods[i].path_tried)
        return i < 0 ? NULL : symbols.mods[i].path;
    symbols.mods[i].path_tried = 1;
    ULONG len = 0, got = 0; /* characters with the terminating 0 */
    const BYTE *base = NULL;
    AssemblyID asm_id = 0;
    ICorProfilerInfo15 *info = g_core.info;
    if (info->vt->GetModuleInfo(info, mod, &base, 0, &len, NULL, &asm_id) < 0 || len < 2 ||
        len > 32768)
        return NULL;
    WCHAR *w = malloc((size_t)len * sizeof *w);
    char *path = malloc((size_t)len * 3);
    if (w && path && info->vt->GetModuleInfo(info, mod, &base, len, &got, w, &asm_id) == S_OK &&
        got == len) {
        prof_utf16_to_utf8(w, len - 1, path, (size_t)len * 3);
        symbols.mods[i].path = path[0] ? path : NULL;
        if (symbols.mods[i].path)
            path = NULL; /* kept */
    }
    free(w);
    free(path);
    return symbols.mods[i].path;
}

/* Full metadata name of a typedef, nested types joined with '+', like the runtime prints them. */
static void typedef_name(IMetaDataImport *md, mdTypeDef td, char *out, size_t cap)
{
    char parts[8][160];
    int np = 0;
    out[0] = 0;
    for (int depth = 0; depth < 8 && td; depth++) {
        WCHAR w[160];
        ULONG got = 0;
        DWORD flags = 0;
        mdToken ext = 0;
        if (md->vt->GetTypeDefProps(md, td, w, 160, &got, &flags, &ext) < 0)
            break;
        prof_utf16_to_utf8(w, got, parts[np++], sizeof parts[0]);
        mdTypeDef outer = 0;
        if (md->vt->GetNestedClassProps(md, td, &outer) != S_OK)
            break;
        td = outer;
    }
    size_t len = 0;
    for (int i = np - 1; i >= 0; i--) {
        int w = snprintf(out + len, cap - len, "%s%s", i == np - 1 ? "" : "+", parts[i]);
        if (w < 0 || (size_t)w >= cap - len)
            break;
        len += (size_t)w;
    }
}

static const char *elem_type_name(CorElementType t)
{
    static const char *const names[] = {
        [0x2] = "System.Boolean", [0x3] = "System.Char",   [0x4] = "System.SByte",
        [0x5] = "System.Byte",    [0x6] = "System.Int16",  [0x7] = "System.UInt16",
        [0x8] = "System.Int32",   [0x9] = "System.UInt32", [0xa] = "System.Int64",
        [0xb] = "System.UInt64",  [0xc] = "System.Single", [0xd] = "System.Double",
        [0xe] = "System.String",  [0x18] = "System.IntPtr", [0x19] = "System.UIntPtr",
        [0x1c] = "System.Object",
    };
    return t < sizeof names / sizeof names[0] && names[t] ? names[t] : NULL;
}

static const char *intern_copy(const char *s)
{
    if (!symbols.names_ready && prof_intern_init(&symbols.names, NAMES_MAX_BYTES) == 0)
        symbols.names_ready = 1;
    if (!symbols.names_ready)
        return "[out of memory]";
    /* a name is cut at its buffer's size, which can fall inside a character (long non-ASCII
     * identifiers, deep nesting): JSON and pprof get whole characters only, a cut one is '?' */
    char whole[1024];
    snprintf(whole, sizeof whole, "%s", s);
    prof_utf8_clean(whole);
    return prof_intern_str(&symbols.names, prof_intern(&symbols.names, whole));
}

static void cache_clear(struct cache *c)
{
    if (c->e)
        memset(c->e, 0, (size_t)c->cap * sizeof *c->e);
    c->n = 0;
}

/* Under the lock, before any ID cache is read: forgets what IDs meant before a module unload. */
static void sync_epoch(void)
{
    uint32_t e = prof_unload_epoch();
    if (e == symbols.epoch)
        return;
    symbols.epoch = e;
    cache_clear(&symbols.fn_coll);
    cache_clear(&symbols.cls_coll);
    cache_clear(&symbols.clsmod_coll);
    memset(symbols.neg_fn, 0, sizeof symbols.neg_fn);
    memset(symbols.neg_cls, 0, sizeof symbols.neg_cls);
}

/* A cached answer for key, from either tier; a collectible one sets symbols.coll. */
static const char *cache_get2(struct cache *kept, struct cache *coll, uintptr_t key)
{
    const char *hit = cache_get(kept, key);
    if (!hit && (hit = cache_get(coll, key)))
        symbols.coll = 1;
    return hit;
}

static void class_name_locked(ClassID cls, char *out, size_t cap, int depth);

/* "Ns.Outer`2+Inner" with its type arguments as C# writes it: each part takes as many arguments
 * as its own arity ("`N"), in order (a nested type's parameters start with its outer type's):
 * Dictionary`2+Entry with <K,V> is "Ns.Dictionary<K,V>.Entry". Arguments no part claims (not
 * expected) go to the last part. Parts the cleaner drops (display classes) drop theirs too. */
static void generic_name(const char *raw, const ClassID *args, ULONG32 nargs, int depth,
                         char *out, size_t cap)
{
    size_t len = 0;
    ULONG32 used = 0;
    out[0] = 0;
    const char *p = raw;
    while (*p) {
        size_t n = strcspn(p, "+");
        int last = p[n] == 0;
        char part[NAME_MAX_LEN], cleaned[NAME_MAX_LEN];
        snprintf(part, sizeof part, "%.*s", (int)(n < sizeof part ? n : sizeof part - 1), p);
        prof_symbols_clean_typename(part, cleaned, sizeof cleaned);
        const char *bt = strrchr(part, '`');
        ULONG32 arity = bt ? (ULONG32)strtoul(bt + 1, NULL, 10) : 0;
        if (last || used + arity > nargs)
            arity = nargs - used;
        if (cleaned[0]) {
            if (len)
                symbols_put(out, cap, &len, ".", 1);
            symbols_put(out, cap, &len, cleaned, strlen(cleaned));
            if (arity) {
                symbols_put(out, cap, &len, "<", 1);
                for (ULONG32 i = 0; i < arity; i++) {
                    char a[NAME_MAX_LEN];
                    class_name_locked(args[used + i], a, sizeof a, depth + 1);
                    if (i)
                        symbols_put(out, cap, &len, ",", 1);
                    symbols_put(out, cap, &len, a, strlen(a));
                }
                symbols_put(out, cap, &len, ">", 1);
            }
        }
        used += arity;
        p += n;
        if (*p == '+')
            p++;
    }
}

/* Bounded recursion (depth <= 4) for generic arguments; runs on clrscope threads only. */
static void class_name_locked(ClassID cls, char *out, size_t cap, int depth)
{
    ICorProfilerInfo15 *info = g_core.info;
    out[0] = 0;
    if (!cls) {
        snprintf(out, cap, "[unknown type]");
        return;
    }
    const char *hit = cache_get2(&symbols.cls, &symbols.cls_coll, cls);
    if (hit) {
        snprintf(out, cap, "%s", hit);
        return;
    }
    if (!prof_unload_may_query()) {
        snprintf(out, cap, "%s", UNNAMED_TYPE);
        return;
    }
    CorElementType et = 0;
    ClassID elem = 0;
    ULONG rank = 0;
    if (info->vt->IsArrayClass(info, cls, &et, &elem, &rank) == S_OK) {
        char inner[NAME_MAX_LEN];
        const char *prim = elem_type_name(et);
        if (elem && depth < 4)
            class_name_locked(elem, inner, sizeof inner, depth + 1);
        else
            snprintf(inner, sizeof inner, "%s", prim ? prim : "[unknown type]");
        char commas[32] = "";
        for (ULONG i = 1; i < rank && i < sizeof commas - 1; i++)
            strcat(commas, ",");
        if (snprintf(out, cap, "%s[%s]", inner, commas) < 0)
            out[0] = 0;
        return;
    }
    ModuleID mod = 0;
    mdTypeDef td = 0;
    ClassID parent = 0;
    ClassID args[8];
    ULONG32 nargs = 0;
    if (info->vt->GetClassIDInfo2(info, cls, &mod, &td, &parent, 8, &nargs, args) < 0) {
        snprintf(out, cap, "[unknown type]");
        return;
    }
    IMetaDataImport *md = metadata_for(mod);
    char raw[NAME_MAX_LEN] = "";
    if (md)
        typedef_name(md, td, raw, sizeof raw);
    if (!raw[0])
        snprintf(raw, sizeof raw, "[unknown type]");
    char clean[NAME_MAX_LEN];
    if (nargs > 0 && nargs <= 8 && depth < 4)
        generic_name(raw, args, nargs, depth, clean, sizeof clean);
    else
        prof_symbols_clean_typename(raw, clean, sizeof clean);
    snprintf(out, cap, "%s", clean);
}

/* Under the lock: the name of cls, cached in the tier it belongs to; *coll: collectible code. */
static const char *class_locked(ClassID cls, int *coll)
{
    int saved = symbols.coll;
    symbols.coll = 0;
    const char *hit = cache_get2(&symbols.cls, &symbols.cls_coll, cls);
    if (!hit && !prof_unload_may_query()) {
        hit = UNNAMED_TYPE; /* not remembered: asked again from a newer record */
    } else if (!hit && !(hit = neg_get(symbols.neg_cls, cls))) {
        char buf[NAME_MAX_LEN];
        class_name_locked(cls, buf, sizeof buf, 0);
        hit = intern_copy(buf);
        /* a type the runtime did not name yet (its module's metadata refused for a moment) is
         * asked again a second later, as methods are */
        if (!strstr(buf, "[unknown type]"))
            cache_put(symbols.coll ? &symbols.cls_coll : &symbols.cls, cls, hit);
        else
            neg_put(symbols.neg_cls, cls, hit);
    }
    *coll = symbols.coll;
    symbols.coll |= saved;
    return hit;
}

const char *prof_symbols_class(ClassID cls)
{
    if (!cls) /* 0 marks an empty cache slot: it can be neither cached nor looked up */
        return "[unknown type]";
    pthread_mutex_lock(&symbols.lock);
    sync_epoch();
    int coll;
    const char *hit = class_locked(cls, &coll);
    release_scratch();
    pthread_mutex_unlock(&symbols.lock);
    return hit;
}

/* The field's offset in cls's own layout, or 0. */
static ULONG field_offset_locked(ClassID cls, IMetaDataImport *md, const char *field)
{
    ICorProfilerInfo15 *info = g_core.info;
    COR_FIELD_OFFSET offs[64];
    ULONG n = 0, size = 0;
    if (info->vt->GetClassLayout(info, cls, offs, 64, &n, &size) < 0)
        return 0;
    for (ULONG i = 0; i < n && i < 64; i++) {
        WCHAR w[64];
        char name[192];
        ULONG got = 0, cbsig = 0;
        mdTypeDef owner = 0;
        const BYTE *sig = NULL;
        if (md->vt->GetFieldProps(md, offs[i].ridOfField, &owner, w, 64, &got, NULL, &sig, &cbsig,
                                  NULL, NULL, NULL) < 0)
            continue;
        prof_utf16_to_utf8(w, got, name, sizeof name);
        if (strcmp(name, field))
            continue;
        /* a string field (signature FIELD, ELEMENT_TYPE_STRING), aligned, past the MethodTable
         * pointer and a word short of the size the runtime gives (whether that counts the
         * object's header word or not, the field then lies inside the object) */
        ULONG off = offs[i].ulOffset;
        if (sig && cbsig >= 2 && sig[0] == 0x06 && sig[1] == 0x0e && off >= sizeof(void *) &&
            off % sizeof(void *) == 0 && off + 2 * sizeof(void *) <= size)
            return off;
        return 0;
    }
    return 0;
}

ULONG prof_symbols_field_offset(ClassID cls, const char *declaring, const char *field)
{
    ICorProfilerInfo15 *info = g_core.info;
    ULONG off = 0;
    if (!prof_unload_may_query())
        return 0;
    pthread_mutex_lock(&symbols.lock);
    /* the base class nearest System.Object of that name: a type of the app that borrowed the
     * name cannot stand in for the runtime's */
    ClassID found = 0;
    IMetaDataImport *found_md = NULL;
    for (int depth = 0; cls && depth < 64; depth++) {
        ModuleID mod = 0;
        mdTypeDef td = 0;
        ClassID parent = 0;
        ClassID args[8];
        ULONG32 nargs = 0;
        if (info->vt->GetClassIDInfo2(info, cls, &mod, &td, &parent, 8, &nargs, args) < 0)
            break;
        IMetaDataImport *md = metadata_for(mod);
        char raw[NAME_MAX_LEN] = "";
        if (md)
            typedef_name(md, td, raw, sizeof raw);
        if (md && !strcmp(raw, declaring)) {
            found = cls;
            found_md = md;
        }
        cls = parent;
    }
    if (found)
        off = field_offset_locked(found, found_md, field);
    release_scratch();
    pthread_mutex_unlock(&symbols.lock);
    return off;
}

/* Whether the module is System.Private.CoreLib. Asks the runtime each time instead of going
 * through module_path: a module enumerated while it loads may not say its name yet, and
 * module_path would remember that silence for good. */
static int is_corelib(ModuleID mod)
{
    static const char tail[] = "System.Private.CoreLib.dll";
    ICorProfilerInfo15 *info = g_core.info;
    WCHAR w[512];
    char path[1024];
    ULONG len = 0;
    const BYTE *base = NULL;
    AssemblyID asm_id = 0;
    if (info->vt->GetModuleInfo(info, mod, &base, 512, &len, w, &asm_id) != S_OK || len < 2 ||
        len > 512)
        return 0;
    size_t n = prof_utf16_to_utf8(w, len - 1, path, sizeof path);
    return n >= sizeof tail - 1 && !strcmp(path + n - (sizeof tail - 1), tail) &&
           (n == sizeof tail - 1 || path[n - sizeof tail] == '/');
}

ClassID prof_symbols_corelib_class(const char *name)
{
    ICorProfilerInfo15 *info = g_core.info;
    ICorProfilerModuleEnum *e = NULL;
    if (!prof_unload_may_query() || info->vt->EnumModules(info, &e) < 0 || !e)
        return 0;
    WCHAR w[128];
    size_t n = strlen(name);
    if (n >= 128) {
        e->vt->Release(e);
        return 0;
    }
    for (size_t i = 0; i <= n; i++)
        w[i] = (unsigned char)name[i];
    ClassID cls = 0;
    ModuleID ids[32];
    ULONG got = 0;
    pthread_mutex_lock(&symbols.lock);
    while (!cls && e->vt->Next(e, 32, ids, &got) >= 0 && got > 0 && got <= 32) {
        for (ULONG i = 0; i < got && !cls; i++) {
            if (!is_corelib(ids[i]))
                continue;
            IMetaDataImport *md = metadata_for(ids[i]);
            mdTypeDef td = 0;
            ClassID c = 0;
            /* before the runtime's own classes are loaded this answers
             * CORPROF_E_RUNTIME_UNINITIALIZED; after, it finds them in the module's map */
            if (md && md->vt->FindTypeDefByName(md, w, 0, &td) == S_OK &&
                info->vt->GetClassFromToken(info, ids[i], td, &c) == S_OK)
                cls = c;
        }
    }
    release_scratch();
    pthread_mutex_unlock(&symbols.lock);
    e->vt->Release(e);
    return cls;
}

/* Arrays belong to their element type's module (System.Byte[] to System.Private.CoreLib), as in
 * the runtime's own type events; a generic instance to its definition's module. */
const char *prof_symbols_class_module(ClassID cls)
{
    if (!cls)
        return NULL;
    ICorProfilerInfo15 *info = g_core.info;
    pthread_mutex_lock(&symbols.lock);
    sync_epoch();
    const char *hit = cache_get2(&symbols.clsmod, &symbols.clsmod_coll, cls);
    if (!hit && !prof_unload_may_query()) {
        hit = "";
    } else if (!hit) {
        int coll;
        class_locked(cls, &coll);
        ClassID c = cls;
        CorElementType et = 0;
        ClassID elem = 0;
        ULONG rank = 0;
        for (int depth = 0; c && depth < 4 &&
                            info->vt->IsArrayClass(info, c, &et, &elem, &rank) == S_OK;
             depth++)
            c = elem;
        ModuleID mod = 0;
        mdTypeDef td = 0;
        const char *path = NULL;
        if (c && info->vt->GetClassIDInfo(info, c, &mod, &td) >= 0 && mod)
            path = module_path(mod);
        hit = path ? path : "";
        cache_put(coll ? &symbols.clsmod_coll : &symbols.clsmod, cls, hit);
        release_scratch();
    }
    pthread_mutex_unlock(&symbols.lock);
    return hit[0] ? hit : NULL;
}

#define MAX_TYPE_ARGS 8

/* The names of a typedef's or method's generic parameters ("T", "TKey"), by position (a typedef
 * nested in a generic type lists its outer types' first); how many. */
static unsigned param_names(IMetaDataImport *md, mdToken owner, char names[][64], unsigned max)
{
    IMetaDataImport2 *md2 = NULL;
    if (md->vt->QueryInterface(md, &IID_IMetaDataImport2, (void **)&md2) != S_OK || !md2)
        return 0;
    HCORENUM e = NULL;
    mdToken gp[MAX_TYPE_ARGS];
    ULONG got = 0;
    unsigned n = 0;
    if (md2->vt->EnumGenericParams(md2, &e, owner, gp, MAX_TYPE_ARGS, &got) >= 0) {
        for (ULONG i = 0; i < got && i < MAX_TYPE_ARGS; i++) {
            WCHAR w[64];
            ULONG cch = 0, seq = 0;
            DWORD flags = 0;
            mdToken own = 0;
            if (md2->vt->GetGenericParamProps(md2, gp[i], &seq, &flags, &own, NULL, w, 64, &cch) <
                    0 ||
                seq >= max)
                continue;
            prof_utf16_to_utf8(w, cch, names[seq], 64);
            if (seq + 1 > n)
                n = seq + 1;
        }
    }
    if (e)
        md2->vt->base.CloseEnum(md2, e);
    md2->vt->base.Release(md2);
    for (unsigned i = 0; i < n; i++)
        if (!names[i][0]) /* a position the metadata left unnamed */
            snprintf(names[i], 64, "T%u", i);
    return n;
}

/* The names of `n` type arguments (ClassIDs, 0 = unknown) as the type names elsewhere read
 * ("System.Int32"); shared code's System.__Canon, or an unknown one, reads as the generic
 * parameter it stands for (`params`, or "__Canon" past them). */
static unsigned arg_names(const ClassID *ids, unsigned n, char params[][64], unsigned nparams,
                          const char **out)
{
    for (unsigned i = 0; i < n; i++) {
        int coll;
        const char *name = ids[i] ? class_locked(ids[i], &coll) : NULL;
        if (!name || !strcmp(name, "System.__Canon") || name[0] == '[')
            name = i < nparams ? params[i] : "__Canon";
        out[i] = name;
    }
    return n;
}

/* A frame's name with its type arguments. The sampled code is one FunctionID, and the runtime
 * tells its instantiation through ICorProfilerInfo2::GetFunctionInfo2 without a frame: exact for
 * code compiled for one instantiation (Cruncher<int>: value types get their own code), and for
 * code shared by reference-type instantiations (Cruncher<string> and Cruncher<Order> run the
 * same System.__Canon code) no class and System.__Canon method arguments: those read as the
 * generic parameters' own names (Cruncher<T>.Spin<TKey>). Which instantiation ran shared code is
 * known only from the frame's generic context (its `this` or hidden argument), which a sampled
 * stack does not give. */
static const char *function_name_locked(FunctionID fn)
{
    ICorProfilerInfo15 *info = g_core.info;
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    char out[NAME_MAX_LEN];
    /* a dynamic method (DynamicMethod, compiled Regex or expression) has no metadata token, and
     * GetFunctionInfo may still answer for it (with the module that hosts such methods) */
    BOOL dyn = 0;
    if (g_core.info_version >= 9 && info->vt->IsFunctionDynamic(info, fn, &dyn) == S_OK && dyn) {
        symbols.coll = 1; /* dynamic methods are collected one by one */
        WCHAR w[200];
        ULONG got = 0;
        ModuleID dm = 0;
        if (info->vt->GetDynamicFunctionInfo(info, fn, &dm, NULL, NULL, 200, &got, w) >= 0 && got) {
            char n[256];
            prof_utf16_to_utf8(w, got, n, sizeof n);
            snprintf(out, sizeof out, "[dynamic] %s", n);
            return intern_copy(out);
        }
        return "[dynamic]";
    }
    ClassID margs[MAX_TYPE_ARGS];
    ULONG32 nmargs = 0;
    if (info->vt->GetFunctionInfo2(info, fn, 0, &cls, &mod, &tok, MAX_TYPE_ARGS, &nmargs, margs) <
        0) {
        nmargs = 0;
        if (info->vt->GetFunctionInfo(info, fn, &cls, &mod, &tok) < 0) {
            symbols.coll = 1;
            return UNKNOWN_MANAGED;
        }
    }
    if (nmargs > MAX_TYPE_ARGS)
        nmargs = 0; /* more than we asked for: the names would be cut, so none */
    IMetaDataImport *md = metadata_for(mod);
    /* a generic instance over collectible types lives and dies with them */
    if (!symbols.coll && cls) {
        int coll;
        class_locked(cls, &coll);
    }
    if (!md)
        return UNKNOWN_MANAGED;
    mdTypeDef td = 0;
    WCHAR w[256];
    ULONG got = 0;
    DWORD attr = 0, impl = 0;
    ULONG rva = 0, cbsig = 0;
    const BYTE *sig = NULL;
    if (md->vt->GetMethodProps(md, tok, &td, w, 256, &got, &attr, &sig, &cbsig, &rva, &impl) < 0)
        return UNKNOWN_MANAGED;
    char method[256];
    prof_utf16_to_utf8(w, got, method, sizeof method);
    char type[NAME_MAX_LEN] = "";
    typedef_name(md, td, type, sizeof type);

    /* the type's arguments: the instantiation's when the runtime gives its class, else the
     * parameters' names; the method's: the runtime's, System.__Canon as the parameter */
    char tparams[MAX_TYPE_ARGS][64], mparams[MAX_TYPE_ARGS][64];
    memset(tparams, 0, sizeof tparams);
    memset(mparams, 0, sizeof mparams);
    unsigned ntparams = param_names(md, td, tparams, MAX_TYPE_ARGS);
    unsigned nmparams = nmargs ? param_names(md, tok, mparams, MAX_TYPE_ARGS) : 0;
    ClassID targs[MAX_TYPE_ARGS];
    ULONG32 ntargs = 0;
    ModuleID cmod = 0;
    mdTypeDef ctd = 0;
    ClassID parent = 0;
    if (!cls || info->vt->GetClassIDInfo2(info, cls, &cmod, &ctd, &parent, MAX_TYPE_ARGS, &ntargs,
                                          targs) < 0 ||
        ctd != td || ntargs > MAX_TYPE_ARGS || (ntparams && ntargs != ntparams))
        ntargs = 0; /* not the method's own class, or shared code: the parameters */
    const char *tnames[MAX_TYPE_ARGS], *mnames[MAX_TYPE_ARGS];
    unsigned nt = ntargs ? ntargs : ntparams;
    if (ntargs)
        arg_names(targs, ntargs, tparams, ntparams, tnames);
    else
        for (unsigned i = 0; i < nt; i++)
            tnames[i] = tparams[i];
    unsigned nm = arg_names(margs, nmargs, mparams, nmparams, mnames);
    prof_symbols_clean_frame(type, tnames, nt, method, mnames, nm, out, sizeof out);
    return intern_copy(out);
}

const char *prof_symbols_function(FunctionID fn)
{
    if (!fn)
        return UNKNOWN_MANAGED;
    pthread_mutex_lock(&symbols.lock);
    sync_epoch();
    symbols.coll = 0;
    const char *hit = cache_get2(&symbols.fn, &symbols.fn_coll, fn);
    if (!hit && !prof_unload_may_query()) {
        hit = UNNAMED_FUNCTION; /* not remembered: asked again from a newer record */
    } else if (!hit && !(hit = neg_get(symbols.neg_fn, fn))) {
        hit = function_name_locked(fn);
        if (hit != UNKNOWN_MANAGED)
            cache_put(symbols.coll ? &symbols.fn_coll : &symbols.fn, fn, hit);
        else
            neg_put(symbols.neg_fn, fn, hit);
        release_scratch();
    }
    pthread_mutex_unlock(&symbols.lock);
    return hit;
}

int prof_symbols_method_token_name(ModuleID mod, mdToken tok, char *out, size_t cap)
{
    if (!cap)
        return -1;
    out[0] = 0;
    int rc = -1;
    pthread_mutex_lock(&symbols.lock);
    IMetaDataImport *md = prof_unload_may_query() ? metadata_for(mod) : NULL;
    WCHAR w[256];
    ULONG got = 0;
    if (md && (tok >> 24) == 0x2b) { /* MethodSpec: the method it instantiates */
        IMetaDataImport2 *md2 = NULL;
        mdToken parent = 0;
        const BYTE *sig = NULL;
        ULONG cb = 0;
        if (md->vt->QueryInterface(md, &IID_IMetaDataImport2, (void **)&md2) == S_OK && md2) {
            if (md2->vt->GetMethodSpecProps(md2, tok, &parent, &sig, &cb) < 0)
                parent = 0;
            md2->vt->base.Release(md2);
        }
        tok = parent;
    }
    if (md && (tok >> 24) == 0x06) {
        mdTypeDef td = 0;
        DWORD attr = 0, impl = 0;
        ULONG rva = 0, cbsig = 0;
        const BYTE *sig = NULL;
        if (md->vt->GetMethodProps(md, tok, &td, w, 256, &got, &attr, &sig, &cbsig, &rva, &impl) >=
            0)
            rc = 0;
    } else if (md && (tok >> 24) == 0x0a) {
        mdToken parent = 0;
        const BYTE *sig = NULL;
        ULONG cbsig = 0;
        if (md->vt->GetMemberRefProps(md, tok, &parent, w, 256, &got, &sig, &cbsig) >= 0)
            rc = 0;
    }
    if (!rc)
        prof_utf16_to_utf8(w, got, out, cap);
    release_scratch();
    pthread_mutex_unlock(&symbols.lock);
    return rc;
}

const char *prof_symbols_jit(uintptr_t fn)
{
    if (fn == 1)
        return "[JIT] compiling a dynamic method";
    const char *name = prof_symbols_function((FunctionID)fn);
    pthread_mutex_lock(&symbols.lock);
    const char *hit = cache_get(&symbols.jit, (uintptr_t)name);
    if (!hit) {
        char buf[NAME_MAX_LEN + 32];
        snprintf(buf, sizeof buf, "[JIT] compiling %s", name);
        hit = intern_copy(buf);
        cache_put(&symbols.jit, (uintptr_t)name, hit);
    }
    pthread_mutex_unlock(&symbols.lock);
    return hit;
}

void prof_symbols_forget_dynamic(void)
{
    pthread_mutex_lock(&symbols.lock);
    cache_clear(&symbols.fn_coll);
    pthread_mutex_unlock(&symbols.lock);
}

const char *prof_symbols_native(uintptr_t ip)
{
    Dl_info dl;
    const char *mod = NULL;
    if (ip && dladdr((void *)ip, &dl) && dl.dli_fname) {
        const char *slash = strrchr(dl.dli_fname, '/');
        mod = slash ? slash + 1 : dl.dli_fname;
    }
    uintptr_t key = mod ? (uintptr_t)dl.dli_fbase : 1;
    pthread_mutex_lock(&symbols.lock);
    const char *hit = cache_get(&symbols.native, key);
    if (!hit) {
        char buf[300];
        snprintf(buf, sizeof buf, "[native %s]", mod ? mod : "code");
        hit = intern_copy(buf);
        cache_put(&symbols.native, key, hit);
    }
    pthread_mutex_unlock(&symbols.lock);
    return hit;
}
