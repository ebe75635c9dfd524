/*
 * prof_stubs.c - the runtime's stubs named by kind from their bytes (prof_stubs.h).
 */
#include <string.h>

#include "prof_codemap.h"
#include "prof_stubs.h"
#include "prof_unload.h"

#define STUB_SLOT 24       /* a precode's or call counting stub's code, and its data's, size */
#define STUB_BACK 128      /* how far before an address an interface stub may start */
#define STUB_AHEAD 32      /* bytes read past the address: a stub's whole first 32 bytes */
#define STUB_CACHE 1024    /* addresses whose answer is kept (a power of two) */

enum {
    K_NONE, K_FIXUP, K_STUBPRECODE, K_CALLCOUNT, K_DISPATCH, K_RESOLVE, K_LOOKUP, K_VTABLE,
    K_COUNT
};

static const char *const names[K_COUNT] = {
    NULL,
    "[native stub FixupPrecode]",
    "[native stub StubPrecode]",
    "[native stub CallCountingStub]",
    "[native stub VSD_DispatchStub]",
    "[native stub VSD_ResolveStub]",
    "[native stub VSD_LookupStub]",
    "[native stub VSD_VTableStub]",
};

struct stub_entry {
    uintptr_t ip;
    uint8_t kind;
    uint8_t used;
};

static struct {
    struct stub_entry cache[STUB_CACHE];
    uint32_t epoch;
    uint64_t named, unknown, unread; /* written under prof_codemap_lock; read relaxed */
} stubs;

static int32_t le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* The RIP-relative displacement at s[at], in an instruction that ends at s[end], reaches the
 * same slot of the page `page` bytes on: the template's data. */
static int to_data(const uint8_t *s, int at, int end, uint32_t page)
{
    int64_t off = (int64_t)end + le32(s + at) - (int64_t)page;
    return off >= 0 && off < STUB_SLOT;
}

static int precode_kind(const uint8_t *s, uint32_t page)
{
    if (!s)
        return K_NONE;
    /* jmp [rip+Target]; mov r10, [rip+MethodDesc]; jmp [rip+PrecodeFixupThunk] */
    if (s[0] == 0xFF && s[1] == 0x25 && s[6] == 0x4C && s[7] == 0x8B && s[8] == 0x15 &&
        s[13] == 0xFF && s[14] == 0x25 && to_data(s, 2, 6, page))
        return K_FIXUP;
    /* mov r10, [rip+SecretParam]; jmp [rip+Target] */
    if (s[0] == 0x4C && s[1] == 0x8B && s[2] == 0x15 && s[7] == 0xFF && s[8] == 0x25 &&
        to_data(s, 3, 7, page))
        return K_STUBPRECODE;
    /* mov rax, [rip+RemainingCallCountCell]; dec word [rax]; je ...; jmp [rip+TargetForMethod] */
    if (s[0] == 0x48 && s[1] == 0x8B && s[2] == 0x05 && s[7] == 0x66 && s[8] == 0xFF &&
        s[9] == 0x08 && to_data(s, 3, 7, page))
        return K_CALLCOUNT;
    return K_NONE;
}

/* The interface stub starting at p (with at least STUB_AHEAD bytes from p), and how long it is. */
static int vsd_at(const uint8_t *p, size_t *len)
{
    /* mov rax, [rdi]; push rdx; mov r10, imm64 (the cache) */
    if (p[0] == 0x48 && p[1] == 0x8B && p[2] == 0x07 && p[3] == 0x52 && p[4] == 0x49 &&
        p[5] == 0xBA) {
        *len = 112;
        return K_RESOLVE;
    }
    /* mov rax, [rdi]; mov rax, [rax+disp8|disp32]; jmp [rax+disp8|disp32] */
    if (p[0] == 0x48 && p[1] == 0x8B && p[2] == 0x07 && p[3] == 0x48 && p[4] == 0x8B &&
        ((p[5] == 0x40 && p[7] == 0xFF && (p[8] == 0x60 || p[8] == 0xA0)) ||
         (p[5] == 0x80 && p[10] == 0xFF && (p[11] == 0x60 || p[11] == 0xA0)))) {
        *len = 17;
        return K_VTABLE;
    }
    /* mov rax, imm64 (the expected type); cmp [rdi], rax; nop; mov rax, imm64 (the target);
     * jne rel32 (the resolve stub); jmp rax */
    if (p[0] == 0x48 && p[1] == 0xB8 && p[10] == 0x48 && p[11] == 0x39 && p[12] == 0x07 &&
        p[13] == 0x90 && p[14] == 0x48 && p[15] == 0xB8 && p[24] == 0x0F && p[25] == 0x85 &&
        p[30] == 0xFF && p[31] == 0xE0) {
        *len = 32;
        return K_DISPATCH;
    }
    /* nop; mov rax, imm64 (the token); push rax; mov rax, imm64 (the resolver) */
    if (p[0] == 0x90 && p[1] == 0x48 && p[2] == 0xB8 && p[11] == 0x50 && p[12] == 0x48 &&
        p[13] == 0xB8) {
        *len = 24;
        return K_LOOKUP;
    }
    return K_NONE;
}

static int classify(uintptr_t ip, const uint8_t *b, size_t n, uintptr_t at, const uint8_t *slot16,
                    const uint8_t *slot4)
{
    int k = precode_kind(slot16, 16384);
    if (k == K_NONE)
        k = precode_kind(slot4, 4096);
    if (k != K_NONE || !b || ip < at || ip >= at + n)
        return k;
    /* the nearest interface stub that starts before ip decides */
    size_t i = ip - at;
    for (size_t back = 0; back <= i && back < STUB_BACK; back++) {
        size_t o = i - back;
        if (n - o < STUB_AHEAD)
            continue;
        size_t len;
        int kind = vsd_at(b + o, &len);
        if (kind != K_NONE)
            return back < len ? kind : K_NONE;
    }
    return K_NONE;
}

const char *prof_stubs_classify(uintptr_t ip, const uint8_t *b, size_t n, uintptr_t at,
                                const uint8_t *slot16, const uint8_t *slot4)
{
    return names[classify(ip, b, n, at, slot16, slot4)];
}

#if defined(__x86_64__)
/* The 24 bytes of ip's slot in its page of `page` bytes, into s; s or NULL. */
static const uint8_t *read_slot(uintptr_t ip, uintptr_t page, uint8_t *s)
{
    uintptr_t base = ip & ~(page - 1);
    uintptr_t slot = base + (ip - base) / STUB_SLOT * STUB_SLOT;
    return prof_codemap_read_code(slot, s, STUB_SLOT) == STUB_SLOT ? s : NULL;
}
#endif

const char *prof_stubs_name(uintptr_t ip)
{
#if defined(__x86_64__)
    uint32_t epoch = prof_unload_epoch();
    if (epoch != stubs.epoch) { /* a module unload started: its stubs may be gone, reused */
        memset(stubs.cache, 0, sizeof stubs.cache);
        stubs.epoch = epoch;
    }
    struct stub_entry *e = &stubs.cache[(ip ^ (ip >> 12)) & (STUB_CACHE - 1)];
    if (e->used && e->ip == ip)
        return names[e->kind];
    uint8_t s16[STUB_SLOT], s4[STUB_SLOT], win[STUB_BACK + STUB_AHEAD];
    const uint8_t *p16 = read_slot(ip, 16384, s16), *p4 = read_slot(ip, 4096, s4);
    uintptr_t at = ip >= STUB_BACK ? ip - STUB_BACK : 0;
    size_t n = prof_codemap_read_code(at, win, sizeof win);
    if (!n && (ip & 4095) < STUB_BACK) { /* the page before may be unmapped: from ip's on */
        at = ip & ~(uintptr_t)4095;
        n = prof_codemap_read_code(at, win, (size_t)(ip - at) + STUB_AHEAD);
    }
    int k = K_NONE;
    if (!p16 && !p4 && !n) {
        __atomic_add_fetch(&stubs.unread, 1, __ATOMIC_RELAXED);
        return NULL; /* not kept: asked again next time */
    }
    k = classify(ip, n ? win : NULL, n, at, p16, p4);
    __atomic_add_fetch(k != K_NONE ? &stubs.named : &stubs.unknown, 1, __ATOMIC_RELAXED);
    *e = (struct stub_entry){.ip = ip, .kind = (uint8_t)k, .used = 1};
    return names[k];
#else
    (void)ip;
    return NULL;
#endif
}

void prof_stubs_get_stats(struct prof_stubs_stats *out)
{
    out->named = __atomic_load_n(&stubs.named, __ATOMIC_RELAXED);
    out->unknown = __atomic_load_n(&stubs.unknown, __ATOMIC_RELAXED);
    out->unread = __atomic_load_n(&stubs.unread, __ATOMIC_RELAXED);
}
