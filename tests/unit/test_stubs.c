/*
 * test_stubs.c - the runtime's stubs named by kind from their bytes (prof_stubs_classify), on
 * bytes read from .NET 8, 9 and 10's stubs on x86-64: the precodes and call counting stubs by
 * their slot in an interleaved page and the displacement that reaches their data, the interface
 * dispatch stubs by their first bytes before the address; and what must not be named: managed
 * code, a displacement that lands elsewhere, an address past the nearest stub's length.
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prof_core.h"
#include "prof_stubs.h"
#include "unit_check.h"

static int is(const char *got, const char *want)
{
    return got == want || (got && want && !strcmp(got, want));
}

/* b placed at address `at`, asked about at + off, without slots */
static const char *code_at(const uint8_t *b, size_t n, size_t off)
{
    uintptr_t at = 0x7f0000001000u;
    return prof_stubs_classify(at + off, b, n, at, NULL, NULL);
}

int main(void)
{
    /* jmp [rip+0x3ffa]; mov r10, [rip+0x3ffb]; jmp [rip+0x3ffb]: a FixupPrecode, 16 KB pages */
    const uint8_t fixup[24] = {0xff, 0x25, 0xfa, 0x3f, 0x00, 0x00, 0x4c, 0x8b, 0x15, 0xfb, 0x3f,
                               0x00, 0x00, 0xff, 0x25, 0xfb, 0x3f, 0x00, 0x00};
    /* mov r10, [rip+0x3ff9]; jmp [rip+0x3ffb]: a StubPrecode */
    const uint8_t stubp[24] = {0x4c, 0x8b, 0x15, 0xf9, 0x3f, 0x00, 0x00, 0xff, 0x25, 0xfb, 0x3f,
                               0x00, 0x00};
    /* mov rax, [rip+0x3ff9]; dec word [rax]; je +6; jmp [rip+...]: a CallCountingStub */
    const uint8_t count[24] = {0x48, 0x8b, 0x05, 0xf9, 0x3f, 0x00, 0x00, 0x66, 0xff, 0x08, 0x74,
                               0x06, 0xff, 0x25, 0xf9, 0x3f, 0x00, 0x00};
    uintptr_t ip = 0x7f0000004010u;
    CHECK(is(prof_stubs_classify(ip, NULL, 0, 0, fixup, NULL), "[native stub FixupPrecode]"),
          "FixupPrecode");
    CHECK(is(prof_stubs_classify(ip, NULL, 0, 0, stubp, NULL), "[native stub StubPrecode]"),
          "StubPrecode");
    CHECK(is(prof_stubs_classify(ip, NULL, 0, 0, count, NULL), "[native stub CallCountingStub]"),
          "CallCountingStub");
    CHECK(is(prof_stubs_classify(ip, NULL, 0, 0, NULL, fixup), NULL),
          "a 16 KB page's displacement is not a 4 KB page's");
    uint8_t fixup4[24];
    memcpy(fixup4, fixup, sizeof fixup4);
    fixup4[2] = 0xfa, fixup4[3] = 0x0f; /* jmp [rip+0xffa]: data 4 KB on */
    CHECK(is(prof_stubs_classify(ip, NULL, 0, 0, NULL, fixup4), "[native stub FixupPrecode]"),
          "FixupPrecode in 4 KB pages");
    uint8_t far[24];
    memcpy(far, fixup, sizeof far);
    far[3] = 0x7f; /* the same opcodes, data elsewhere: not a precode's */
    CHECK(is(prof_stubs_classify(ip, NULL, 0, 0, far, far), NULL), "displacement elsewhere");

    /* two dispatch stubs (mov rax, MT; cmp [rdi], rax; nop; mov rax, target; jne; jmp rax) */
    const uint8_t dispatch[64] = {
        0x48, 0xb8, 0xf0, 0xad, 0x2b, 0x2e, 0xb5, 0x7f, 0x00, 0x00, 0x48, 0x39, 0x07, 0x90, 0x48,
        0xb8, 0x28, 0x20, 0x55, 0x2e, 0xb5, 0x7f, 0x00, 0x00, 0x0f, 0x85, 0x17, 0xfc, 0xff, 0xff,
        0xff, 0xe0, 0x48, 0xb8, 0xf0, 0xad, 0x2b, 0x2e, 0xb5, 0x7f, 0x00, 0x00, 0x48, 0x39, 0x07,
        0x90, 0x48, 0xb8, 0xa0, 0x20, 0x55, 0x2e, 0xb5, 0x7f, 0x00, 0x00, 0x0f, 0x85, 0x67, 0xfc,
        0xff, 0xff, 0xff, 0xe0};
    CHECK(is(code_at(dispatch, sizeof dispatch, 0), "[native stub VSD_DispatchStub]"),
          "a dispatch stub's first byte");
    CHECK(is(code_at(dispatch, sizeof dispatch, 30), "[native stub VSD_DispatchStub]"),
          "its jmp rax");
    CHECK(is(code_at(dispatch, sizeof dispatch, 45), "[native stub VSD_DispatchStub]"),
          "the next one's nop");
    /* the JIT's guess of a type (mov rax, MT; cmp [rdi], rax; jne; call) is no dispatch stub */
    const uint8_t guess[48] = {0x48, 0xb8, 0xf0, 0xad, 0x2b, 0x2e, 0xb5, 0x7f, 0x00, 0x00, 0x48,
                               0x39, 0x07, 0x0f, 0x85, 0x20, 0x00, 0x00, 0x00, 0xe8, 0x10, 0x20,
                               0x30, 0x40};
    CHECK(is(code_at(guess, sizeof guess, 15), NULL), "a guarded devirtualization");

    /* a resolve stub (112 bytes), then the next one's start */
    const uint8_t resolve[128] = {
        0x48, 0x8b, 0x07, 0x52, 0x49, 0xba, 0x60, 0xc1, 0x59, 0x23, 0x79, 0x55, 0x00, 0x00, 0x48,
        0x8b, 0xd0, 0x48, 0xc1, 0xe8, 0x0c, 0x48, 0x03, 0xc2, 0x48, 0x35, 0xb8, 0x39, 0x00, 0x00,
        0x48, 0x25, 0xf8, 0x7f, 0x00, 0x00, 0x4a, 0x8b, 0x04, 0x10, 0x49, 0xba, 0x01, 0x00, 0x00,
        0x00, 0x02, 0x00, 0x00, 0x00, 0x48, 0x3b, 0x50, 0x00, 0x75, 0x2b, 0x4c, 0x3b, 0x50, 0x08,
        0x75, 0x25, 0x48, 0x8b, 0x40, 0x10, 0x5a, 0xff, 0xe0, 0x48, 0xb8, 0xfc, 0x59, 0x56, 0x23,
        0x79, 0x55, 0x00, 0x00, 0x83, 0x00, 0xff, 0x7d, 0xac, 0x49, 0x83, 0xcb, 0x01, 0x52, 0x49,
        0xba, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x50, 0x48, 0xb8, 0x55, 0xf7, 0x69,
        0x5c, 0xcb, 0x7f, 0x00, 0x00, 0xff, 0xe0, 0x48, 0x8b, 0x07, 0x52, 0x49, 0xba, 0x60, 0xc1,
        0x59, 0x23, 0x79, 0x55, 0x00, 0x00, 0x48, 0x8b};
    CHECK(is(code_at(resolve, sizeof resolve, 40), "[native stub VSD_ResolveStub]"),
          "inside a resolve stub's cache lookup");
    CHECK(is(code_at(resolve, sizeof resolve, 110), "[native stub VSD_ResolveStub]"),
          "its slow entry's jmp rax (the resolver's address holds no other stub's bytes)");

    /* a lookup stub (nop; mov rax, token; push rax; mov rax, resolver; jmp rax), zeros after */
    uint8_t lookup[48] = {0x90, 0x48, 0xb8, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
                          0x50, 0x48, 0xb8, 0x98, 0xf6, 0x69, 0x1c, 0xee, 0x7f, 0x00, 0x00,
                          0xff, 0xe0};
    CHECK(is(code_at(lookup, sizeof lookup, 22), "[native stub VSD_LookupStub]"), "lookup");
    CHECK(is(code_at(lookup, sizeof lookup, 30), NULL), "past the lookup stub's length");

    /* mov rax, [rdi]; mov rax, [rax+0x40]; jmp [rax+0x38]: a vtable call stub */
    const uint8_t vtable[32] = {0x48, 0x8b, 0x07, 0x48, 0x8b, 0x40, 0x40, 0xff, 0x60, 0x38};
    CHECK(is(code_at(vtable, sizeof vtable, 7), "[native stub VSD_VTableStub]"), "vtable");

    /* a managed method's prologue and body (push rbp; sub rsp; lea rbp; ...) */
    const uint8_t managed[48] = {0x55, 0x48, 0x83, 0xec, 0x10, 0x48, 0x8d, 0x6c, 0x24, 0x10,
                                 0x48, 0x89, 0x7d, 0xf8, 0x48, 0x8b, 0x7d, 0xf8, 0xe8, 0x41,
                                 0x00, 0x00, 0x00, 0x90, 0x48, 0x83, 0xc4, 0x10, 0x5d, 0xc3};
    CHECK(is(code_at(managed, sizeof managed, 20), NULL), "managed code is no stub");
    CHECK(is(prof_stubs_classify(ip, NULL, 0, 0, managed, managed), NULL),
          "nor at a slot of either page");

#if defined(__x86_64__) /* (elsewhere prof_stubs_name names nothing) */
    /* prof_stubs_name on memory: a FixupPrecode at a slot of a 16 KB-aligned page */
    g_core.pid = getpid();
    size_t len = 3 * 16384;
    uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED, "mmap");
    if (m != MAP_FAILED) {
        uint8_t *page = (uint8_t *)(((uintptr_t)m + 16383) & ~(uintptr_t)16383);
        memcpy(page + 3 * 24, fixup, 19);
        struct prof_stubs_stats s0, s1, s2;
        prof_stubs_get_stats(&s0);
        CHECK(is(prof_stubs_name((uintptr_t)page + 3 * 24 + 8), "[native stub FixupPrecode]"),
              "a precode in memory");
        CHECK(is(prof_stubs_name((uintptr_t)page + 3 * 24 + 8), "[native stub FixupPrecode]"),
              "again, from the table");
        prof_stubs_get_stats(&s1);
        CHECK(s1.named - s0.named == 1, "looked at once: %llu",
              (unsigned long long)(s1.named - s0.named));
        CHECK(is(prof_stubs_name((uintptr_t)page + 200 * 24), NULL), "zeros are no stub");
        prof_stubs_get_stats(&s2);
        CHECK(s2.unknown - s1.unknown == 1, "counted as unknown");
        munmap(m, len);
    }
#endif

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
