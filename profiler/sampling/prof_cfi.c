/*
 * prof_cfi.c - see prof_cfi.h: the table of libraries whose frames the signal handler unwinds by
 * their CFI. The clrscope-sampler thread (and tests); never in signal context.
 */
#include "prof_cfi.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

/* The libraries built without frame pointers that a .NET process always has (libcoreclr's and
 * the host's dependencies): the C library and the loader, libm, and the C++ runtime whose
 * unwinder runs the exceptions of .NET 8; and the malloc replacements preloaded in the C
 * library's place (jemalloc, tcmalloc, mimalloc, the sanitizers' runtimes), where the runtime's
 * allocations then run. They are never unloaded (and are pinned below). Other libraries keep the
 * frame-pointer walk: libcoreclr, libclrjit and the framework's native libraries are built with
 * frame pointers. */
static const char *const listed[] = {
    "libc.so.",     "ld-linux-",     "libm.so.",     "libgcc_s.so.", "libstdc++.so.",
    "libpthread.so.", "libdl.so.",   "librt.so.",    "libjemalloc.so", "libtcmalloc",
    "libmimalloc.so", "libasan.so", "libubsan.so",
    /* the framework's native shims (libSystem.Native.so, ...), which the BCL's P/Invokes call:
     * built without frame pointers, between the app's frames and libc's system calls; loaded
     * after start-up (prof_cfi_count) */
    "libSystem."};

/* Libraries built with frame pointers whose leaf functions may still set up none (compilers
 * leave leaf frames out at -O2 even with frame pointers on, and a sample may fall in a
 * prologue): the frame a signal interrupts there is unwound by its CFI, so that its caller is
 * not skipped (a managed method calling the runtime's FCALLs: Thread.SpinWait, Monitor.Enter's
 * spin), and the chain goes on by frame pointers. */
static const char *const leaf_listed[] = {"libcoreclr.so"};

/* 1: listed, 2: leaf_listed, 0: neither. */
static int is_listed(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < sizeof listed / sizeof *listed; i++)
        if (!strncmp(base, listed[i], strlen(listed[i])))
            return 1;
    for (size_t i = 0; i < sizeof leaf_listed / sizeof *leaf_listed; i++)
        if (!strcmp(base, leaf_listed[i]))
            return 2;
    return 0;
}

struct build {
    struct prof_cfi *t;
    int all;
    /* each entry's name and load bias, for the pin after the walk */
    char (*names)[256];
    uintptr_t *bias;
};

static int add_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct build *b = arg;
    const char *name = info->dlpi_name;
    if (!name || b->t->n >= PROF_CFI_LIBS || (!b->all && (!*name || !is_listed(name))))
        return 0; /* (the program itself has no name: tests take it) */
    struct prof_cfi_lib l = {0};
    l.leaf_only = !b->all && is_listed(name) == 2;
    const ElfW(Phdr) *eh = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (ph->p_type == PT_GNU_EH_FRAME)
            eh = ph;
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R))
            continue;
        if ((ph->p_flags & PF_X) && !l.lo) {
            l.lo = lo;
            l.hi = hi;
        }
        if (l.nseg < PROF_CFI_SEGS) {
            l.seg_lo[l.nseg] = lo;
            l.seg_hi[l.nseg] = hi;
            l.nseg++;
        }
    }
    if (!eh || !l.lo)
        return 0;
    l.hdr = info->dlpi_addr + eh->p_vaddr;
    /* .eh_frame_hdr: version 1, eh_frame_ptr's encoding, fde_count's, the table's; then
     * eh_frame_ptr and fde_count. The table must be datarel sdata4 pairs (what binutils, gold,
     * lld and mold write) */
    if (!prof_cfi_readable(&l, l.hdr, 12))
        return 0;
    const uint8_t *h = (const uint8_t *)l.hdr;
    if (h[0] != 1 || h[2] != 0x03 || h[3] != 0x3b)
        return 0;
    uintptr_t at = l.hdr + 4;
    switch (h[1] & 0x0f) { /* eh_frame_ptr: skip it */
    case 0x03: case 0x0b: at += 4; break;
    case 0x00: case 0x04: case 0x0c: at += 8; break;
    default: return 0;
    }
    uint32_t count;
    if (!prof_cfi_readable(&l, at, 4))
        return 0;
    memcpy(&count, (const void *)at, 4);
    l.table = at + 4;
    l.nfde = count;
    if (!count || !prof_cfi_readable(&l, l.table, 8 * (uintptr_t)count))
        return 0;
    if (!b->all && strlen(name) >= sizeof b->names[0])
        return 0;
    /* (pinned after the walk: dlopen takes the loader's lock, and a thread in dlopen holds it
     * while it waits for the lock dl_iterate_phdr holds here: a deadlock with the app's own
     * dlopen, seen as an app stuck before its first line) */
    if (!b->all) {
        memcpy(b->names[b->t->n], name, strlen(name) + 1);
        b->bias[b->t->n] = info->dlpi_addr;
    }
    b->t->lib[b->t->n++] = l;
    return 0;
}

/* Pins each library of the table (never unloaded from now on: the signal handler may read its
 * CFI at any time), outside dl_iterate_phdr; drops those gone meanwhile or loaded again at
 * another address. */
static void pin_libs(struct build *b)
{
    uint32_t keep = 0;
    for (uint32_t i = 0; i < b->t->n; i++) {
        void *pin = dlopen(b->names[i], RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
        if (!pin)
            continue;
        struct link_map *lm = NULL;
        int same = dlinfo(pin, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_addr == b->bias[i];
        dlclose(pin); /* drops the count NOLOAD took; NODELETE stays */
        if (same)
            b->t->lib[keep++] = b->t->lib[i];
    }
    b->t->n = keep;
}

static int cmp_lib(const void *a, const void *b)
{
    const struct prof_cfi_lib *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int count_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (info->dlpi_name && *info->dlpi_name && is_listed(info->dlpi_name))
        ++*(int *)arg;
    return 0;
}

int prof_cfi_count(void)
{
    int n = 0;
    dl_iterate_phdr(count_lib, &n);
    return n;
}

struct prof_cfi *prof_cfi_build(int all)
{
    struct prof_cfi *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    struct build b = {.t = t, .all = all};
    if (!all) {
        b.names = malloc(PROF_CFI_LIBS * sizeof *b.names);
        b.bias = malloc(PROF_CFI_LIBS * sizeof *b.bias);
        if (!b.names || !b.bias) {
            free(b.names);
            free(b.bias);
            free(t);
            return NULL;
        }
    }
    dl_iterate_phdr(add_lib, &b);
    if (!all)
        pin_libs(&b);
    free(b.names);
    free(b.bias);
    if (!t->n) {
        free(t);
        return NULL;
    }
    qsort(t->lib, t->n, sizeof *t->lib, cmp_lib);
    return t;
}
