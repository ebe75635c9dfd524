/*
 * prof_natsym.c - see prof_natsym.h. The clrscope-sampler thread only (under prof_codemap_lock).
 *
 * A library is found by the address (dl_iterate_phdr: its executable segments and its load bias),
 * its file read by mmap and parsed with every offset checked against the file's size, and what
 * is kept copied out before the file is unmapped: a sorted array of {address, size, name offset}
 * and the names. A name is demangled and interned the first time a frame needs it.
 */
#include "prof_natsym.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prof_intern.h"
#include "prof_log.h"
#include "prof_maps.h"
#include "prof_stubs.h"
#include "prof_utf8.h"

#define MAX_LIBS 512
#define MAX_SEGS 4         /* executable segments kept per library */
#define BUILD_ID_MAX 64
#define NAME_SHOWN_MAX 512 /* a shown name is cut here */

struct fsym {
    uint64_t addr; /* ELF virtual address (add the load bias for the process's address) */
    uint32_t size;
    uint32_t name; /* offset into lib.names */
};

struct lib {
    char path[PATH_MAX];
    char base[256];     /* the file's own name, links resolved: as the maps snapshot names it */
    unsigned char id[BUILD_ID_MAX]; /* the GNU build id of the code in memory */
    size_t idlen;
    uintptr_t bias;
    uintptr_t lo[MAX_SEGS], hi[MAX_SEGS];
    int nsegs;
    int tried;
    struct fsym *syms;
    uint32_t nsyms;
    char *names;
    const char **shown; /* per symbol: the interned frame name, NULL until asked */
    /* CLRSCOPE_NATIVE_FRAMES=function: the start of every function the library's .eh_frame_hdr
     * lists (symbols or not), sorted, and their names "[native libfoo.so+0x1a2b30]" */
    uint64_t *starts;
    uint32_t nstarts;
    const char **start_shown;
};

static struct natsym_state {
    struct lib libs[MAX_LIBS];
    int nlibs;
    int64_t rescanned_at_s; /* the last dl_iterate_phdr for an address in no known library */
    int configured;
    int by_function;    /* CLRSCOPE_NATIVE_FRAMES=function */
    uint64_t cap_bytes; /* CLRSCOPE_SYMBOLS_MAX_MB */
    char path[4096];    /* CLRSCOPE_SYMBOL_PATH */
    struct prof_intern names;
    int names_ready;
    char *(*demangle)(const char *, char *, size_t *, int *);
    struct prof_natsym_stats st;
} ns;

static void configure(void)
{
    ns.configured = 1;
    ns.cap_bytes = 64ull << 20;
    const char *mb = getenv("CLRSCOPE_SYMBOLS_MAX_MB");
    if (mb && *mb) {
        char *end;
        long v = strtol(mb, &end, 10);
        if (*end || v < 0 || v > 4096)
            prof_log(LOG_WARN, "CLRSCOPE_SYMBOLS_MAX_MB=\"%.40s\" is not 0..4096; using 64", mb);
        else
            ns.cap_bytes = (uint64_t)v << 20;
    }
    const char *nf = getenv("CLRSCOPE_NATIVE_FRAMES");
    if (nf && !strcmp(nf, "function"))
        ns.by_function = 1;
    else if (nf && *nf && strcmp(nf, "module"))
        prof_log(LOG_WARN, "CLRSCOPE_NATIVE_FRAMES=\"%.40s\" is neither module nor function; "
                 "using module", nf);
    const char *p = getenv("CLRSCOPE_SYMBOL_PATH");
    if (p && strlen(p) < sizeof ns.path)
        snprintf(ns.path, sizeof ns.path, "%s", p);
    else if (p)
        prof_log(LOG_WARN, "CLRSCOPE_SYMBOL_PATH is longer than %zu bytes; ignored",
                 sizeof ns.path - 1);
    *(void **)&ns.demangle = dlsym(RTLD_DEFAULT, "__cxa_demangle");
}

/* ---- finding the library of an address ---- */

/* The GNU build id among the ELF notes at p[0..len) into out (its length; 0 when none). */
static size_t notes_build_id(const unsigned char *p, size_t len, unsigned char *out)
{
    const unsigned char *end = p + len;
    while ((size_t)(end - p) >= sizeof(Elf64_Nhdr)) {
        const Elf64_Nhdr *n = (const Elf64_Nhdr *)p;
        size_t name = (n->n_namesz + 3u) & ~3u, desc = (n->n_descsz + 3u) & ~3u;
        if (name > (size_t)(end - p) - sizeof *n || desc > (size_t)(end - p) - sizeof *n - name)
            return 0;
        if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(p + sizeof *n, "GNU", 4) &&
            n->n_descsz && n->n_descsz <= BUILD_ID_MAX) {
            memcpy(out, p + sizeof *n + name, n->n_descsz);
            return n->n_descsz;
        }
        p += sizeof *n + name + desc;
    }
    return 0;
}

static int add_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    if (!info->dlpi_name || info->dlpi_name[0] != '/' || ns.nlibs >= MAX_LIBS)
        return 0;
    for (int i = 0; i < ns.nlibs; i++)
        if (ns.libs[i].bias == info->dlpi_addr && !strcmp(ns.libs[i].path, info->dlpi_name))
            return 0;
    struct lib *l = &ns.libs[ns.nlibs];
    memset(l, 0, sizeof *l);
    for (int i = 0; i < info->dlpi_phnum && l->nsegs < MAX_SEGS; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            l->lo[l->nsegs] = info->dlpi_addr + ph->p_vaddr;
            l->hi[l->nsegs] = l->lo[l->nsegs] + ph->p_memsz;
            l->nsegs++;
        }
    }
    if (!l->nsegs || strlen(info->dlpi_name) >= sizeof l->path)
        return 0;
    snprintf(l->path, sizeof l->path, "%s", info->dlpi_name);
    char real[PATH_MAX];
    const char *rp = realpath(info->dlpi_name, real) ? real : info->dlpi_name;
    const char *slash = strrchr(rp, '/');
    const char *base = slash ? slash + 1 : rp;
    size_t bl = strlen(base);
    if (bl < sizeof l->base) /* else none: a frame there keeps the module's name */
        memcpy(l->base, base, bl + 1);
    /* the build id of what is loaded (read here, under the loader's lock, while it is mapped):
     * the file on disk must be the same build */
    for (int i = 0; i < info->dlpi_phnum && !l->idlen; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        l->idlen = notes_build_id((const unsigned char *)(info->dlpi_addr + ph->p_vaddr),
                                  ph->p_memsz, l->id);
    }
    l->bias = info->dlpi_addr;
    ns.nlibs++;
    return 0;
}

/* The library found for an address is the one the maps snapshot names there: "[native BASE]"
 * (else the library at that address was unloaded since and another loaded there). */
static int names_module(const struct lib *l, const char *module)
{
    size_t bl = strlen(l->base);
    return bl && !strncmp(module + 8, l->base, bl) && module[8 + bl] == ']';
}

static struct lib *lib_of(uintptr_t ip)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < ns.nlibs; i++)
            for (int s = 0; s < ns.libs[i].nsegs; s++)
                if (ip >= ns.libs[i].lo[s] && ip < ns.libs[i].hi[s])
                    return &ns.libs[i];
        /* a library loaded since: look again, at most once a second */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if (pass || ts.tv_sec == ns.rescanned_at_s)
            break;
        ns.rescanned_at_s = ts.tv_sec;
        dl_iterate_phdr(add_lib, NULL);
    }
    return NULL;
}

/* ---- reading a file's symbols ---- */

struct elf_file {
    const unsigned char *p;
    size_t len;
    const Elf64_Shdr *sh;
    unsigned nsh;
};

static int elf_open(const char *path, struct elf_file *f)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return -1;
    f->p = m;
    f->len = (size_t)st.st_size;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f->p;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff == 0 || eh->e_shnum == 0 ||
        eh->e_shoff > f->len || (size_t)eh->e_shnum > (f->len - eh->e_shoff) / sizeof(Elf64_Shdr)) {
        munmap(m, f->len);
        f->p = NULL;
        return -1;
    }
    f->sh = (const Elf64_Shdr *)(f->p + eh->e_shoff);
    f->nsh = eh->e_shnum;
    return 0;
}

static void elf_close(struct elf_file *f)
{
    if (f->p)
        munmap((void *)f->p, f->len);
    f->p = NULL;
}

static int section_ok(const struct elf_file *f, const Elf64_Shdr *s)
{
    return s->sh_type != SHT_NOBITS && s->sh_offset <= f->len && s->sh_size <= f->len - s->sh_offset;
}

/* The GNU build id (its length, 0 when none) from the file's note sections. */
static size_t build_id(const struct elf_file *f, unsigned char *out)
{
    for (unsigned i = 0; i < f->nsh; i++) {
        const Elf64_Shdr *s = &f->sh[i];
        if (s->sh_type != SHT_NOTE || !section_ok(f, s))
            continue;
        size_t len = notes_build_id(f->p + s->sh_offset, s->sh_size, out);
        if (len)
            return len;
    }
    return 0;
}

/* The section of `type` that holds symbols, or NULL. */
static const Elf64_Shdr *symbols_of(const struct elf_file *f, uint32_t type)
{
    for (unsigned i = 0; i < f->nsh; i++) {
        const Elf64_Shdr *s = &f->sh[i];
        if (s->sh_type == type && s->sh_entsize == sizeof(Elf64_Sym) && s->sh_link < f->nsh &&
            section_ok(f, s) && section_ok(f, &f->sh[s->sh_link]) && s->sh_size >= sizeof(Elf64_Sym))
            return s;
    }
    return NULL;
}

static int by_addr(const void *a, const void *b)
{
    const struct fsym *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr ? 1 : x->size < y->size ? 1 : -1;
}

static uint64_t total_bytes(void)
{
    return ns.st.bytes;
}

/* Copies the sized functions of section `symtab` into l. 0, or -1 (none, out of memory, cap). */
static int take_symbols(struct lib *l, const struct elf_file *f, const Elf64_Shdr *symtab)
{
    const Elf64_Shdr *strs = &f->sh[symtab->sh_link];
    const Elf64_Sym *sym = (const Elf64_Sym *)(f->p + symtab->sh_offset);
    size_t n = symtab->sh_size / sizeof *sym;
    const char *str = (const char *)(f->p + strs->sh_offset);
    size_t slen = strs->sh_size;
    uint32_t count = 0;
    uint64_t name_bytes = 0;
    for (size_t i = 0; i < n; i++)
        if (ELF64_ST_TYPE(sym[i].st_info) == STT_FUNC && sym[i].st_shndx != SHN_UNDEF &&
            sym[i].st_size && sym[i].st_value && sym[i].st_name < slen) {
            count++;
            name_bytes += strnlen(str + sym[i].st_name, slen - sym[i].st_name) + 1;
        }
    if (!count || count > UINT32_MAX / 2 || name_bytes > UINT32_MAX)
        return -1;
    uint64_t need = count * (sizeof(struct fsym) + sizeof(char *)) + name_bytes;
    if (total_bytes() + need > ns.cap_bytes) {
        ns.st.over_cap++;
        static int logged;
        if (!logged) {
            logged = 1;
            prof_log(LOG_WARN, "native symbols: CLRSCOPE_SYMBOLS_MAX_MB (%llu) reached at %s; "
                     "its frames keep the library's name",
                     (unsigned long long)(ns.cap_bytes >> 20), l->path);
        }
        return -1;
    }
    struct fsym *syms = malloc(count * sizeof *syms);
    char *names = malloc(name_bytes);
    const char **shown = calloc(count, sizeof *shown);
    if (!syms || !names || !shown) {
        free(syms);
        free(names);
        free(shown);
        return -1;
    }
    uint32_t k = 0, off = 0;
    for (size_t i = 0; i < n && k < count; i++)
        if (ELF64_ST_TYPE(sym[i].st_info) == STT_FUNC && sym[i].st_shndx != SHN_UNDEF &&
            sym[i].st_size && sym[i].st_value && sym[i].st_name < slen) {
            size_t len = strnlen(str + sym[i].st_name, slen - sym[i].st_name);
            memcpy(names + off, str + sym[i].st_name, len);
            names[off + len] = 0;
            syms[k++] = (struct fsym){.addr = sym[i].st_value,
                                      .size = sym[i].st_size > UINT32_MAX ? UINT32_MAX
                                                                          : (uint32_t)sym[i].st_size,
                                      .name = off};
            off += (uint32_t)len + 1;
        }
    qsort(syms, k, sizeof *syms, by_addr);
    l->syms = syms;
    l->nsyms = k;
    l->names = names;
    l->shown = shown;
    ns.st.functions += k;
    ns.st.bytes += need;
    return 0;
}

/* A separate debug file for l with build id `id` (idlen bytes): 0 and `f` open, or -1. */
static int find_debug_file(const struct lib *l, const unsigned char *id, size_t idlen,
                           struct elf_file *f)
{
    const char *base = strrchr(l->path, '/');
    base = base ? base + 1 : l->path;
    char cand[PATH_MAX + 64];
    char dirs[sizeof ns.path];
    snprintf(dirs, sizeof dirs, "%s", ns.path);
    char *save = NULL;
    const char *exts[] = {".dbg", ".debug", ""};
    /* CLRSCOPE_SYMBOL_PATH's directories, then beside the library, then the build-id tree */
    for (char *d = strtok_r(dirs, ":", &save);; d = strtok_r(NULL, ":", &save)) {
        int beside = !d;
        for (int e = 0; e < 3; e++) {
            if (beside && !*exts[e])
                continue; /* the library itself */
            if (beside)
                snprintf(cand, sizeof cand, "%s%s", l->path, exts[e]);
            else if (*d)
                snprintf(cand, sizeof cand, "%s/%s%s", d, base, exts[e]);
            else
                continue;
            if (elf_open(cand, f))
                continue;
            unsigned char fid[BUILD_ID_MAX];
            size_t flen = build_id(f, fid);
            if (symbols_of(f, SHT_SYMTAB) && idlen && flen == idlen && !memcmp(fid, id, idlen))
                return 0;
            if (symbols_of(f, SHT_SYMTAB)) {
                ns.st.refused++;
                prof_log(LOG_WARN, "native symbols: %s is not a debug file of %s (its build id "
                         "differs, or one of them has none); not used", cand, l->path);
            }
            elf_close(f);
        }
        if (beside)
            break;
    }
    if (!idlen)
        return -1;
    int n = snprintf(cand, sizeof cand, "/usr/lib/debug/.build-id/%02x/", id[0]);
    for (size_t i = 1; i < idlen && n < (int)sizeof cand - 8; i++)
        n += snprintf(cand + n, sizeof cand - (size_t)n, "%02x", id[i]);
    snprintf(cand + n, sizeof cand - (size_t)n, ".debug");
    if (elf_open(cand, f))
        return -1;
    unsigned char fid[BUILD_ID_MAX];
    if (symbols_of(f, SHT_SYMTAB) && build_id(f, fid) == idlen && !memcmp(fid, id, idlen))
        return 0;
    elf_close(f);
    return -1;
}

/* The starts of the functions .eh_frame_hdr's table lists (datarel sdata4 pairs, sorted by the
 * linker), from the file. 0, or -1 (no table, a table of another form, the cap). */
static int take_starts(struct lib *l, const struct elf_file *f)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f->p;
    if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > f->len ||
        (size_t)eh->e_phnum > (f->len - eh->e_phoff) / sizeof(Elf64_Phdr))
        return -1;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(f->p + eh->e_phoff);
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_GNU_EH_FRAME || ph[i].p_offset > f->len ||
            ph[i].p_filesz > f->len - ph[i].p_offset || ph[i].p_filesz < 12)
            continue;
        const uint8_t *h = f->p + ph[i].p_offset;
        size_t len = ph[i].p_filesz;
        if (h[0] != 1 || h[2] != 0x03 || h[3] != 0x3b)
            return -1;
        size_t at = 4;
        switch (h[1] & 0x0f) { /* eh_frame_ptr: skipped */
        case 0x03: case 0x0b: at += 4; break;
        case 0x00: case 0x04: case 0x0c: at += 8; break;
        default: return -1;
        }
        uint32_t count;
        if (at + 4 > len)
            return -1;
        memcpy(&count, h + at, 4);
        at += 4;
        if (!count || count > (len - at) / 8)
            return -1;
        uint64_t need = (uint64_t)count * (sizeof(uint64_t) + sizeof(char *));
        if (total_bytes() + need > ns.cap_bytes) {
            ns.st.over_cap++;
            return -1;
        }
        uint64_t *starts = malloc(count * sizeof *starts);
        const char **shown = calloc(count, sizeof *shown);
        if (!starts || !shown) {
            free(starts);
            free(shown);
            return -1;
        }
        for (uint32_t k = 0; k < count; k++) {
            int32_t loc;
            memcpy(&loc, h + at + 8 * (size_t)k, 4);
            starts[k] = ph[i].p_vaddr + (uint64_t)(int64_t)loc;
        }
        l->starts = starts;
        l->start_shown = shown;
        l->nstarts = count;
        ns.st.bytes += need;
        return 0;
    }
    return -1;
}

static void load(struct lib *l)
{
    l->tried = 1;
    ns.st.libraries++;
    struct elf_file f, dbg;
    if (elf_open(l->path, &f))
        return;
    unsigned char fid[BUILD_ID_MAX];
    size_t fidlen = build_id(&f, fid);
    if (l->idlen != fidlen || memcmp(l->id, fid, fidlen)) {
        /* the file was replaced since it was loaded (an upgrade under a running process): its
         * symbols would name other code */
        ns.st.refused++;
        prof_log(LOG_WARN, "native symbols: %s on disk is not the build loaded; its frames "
                 "keep the library's name", l->path);
        elf_close(&f);
        return;
    }
    if (ns.by_function)
        take_starts(l, &f);
    const Elf64_Shdr *s = symbols_of(&f, SHT_SYMTAB);
    if (s && !take_symbols(l, &f, s)) {
        ns.st.with_symtab++;
        elf_close(&f);
        return;
    }
    unsigned char id[BUILD_ID_MAX];
    size_t idlen = build_id(&f, id);
    if (!find_debug_file(l, id, idlen, &dbg)) {
        int ok = !take_symbols(l, &dbg, symbols_of(&dbg, SHT_SYMTAB));
        elf_close(&dbg);
        if (ok) {
            ns.st.with_symtab++;
            ns.st.debug_files++;
            prof_log(LOG_INFO, "native symbols: %s named from its debug file (%u functions)",
                     l->path, l->nsyms);
            elf_close(&f);
            return;
        }
    }
    s = symbols_of(&f, SHT_DYNSYM);
    if (s && !take_symbols(l, &f, s))
        ns.st.dynsym_only++;
    elf_close(&f);
}

/* ---- names ---- */

/* "ns::Type::method" out of a demangled "ns::Type::method(int, char*) const": the parameters
 * and what follows them go (a template's angle brackets stay). */
static void cut_parameters(char *s)
{
    int depth = 0;
    for (char *p = s; *p; p++) {
        if (*p == '<')
            depth++;
        else if (*p == '>' && depth > 0)
            depth--;
        else if (*p == '(' && depth == 0 && p != s && strncmp(p, "(anonymous", 10)) {
            *p = 0;
            return;
        }
    }
}

static const char *shown_name(struct lib *l, uint32_t i, const char *module)
{
    /* the module's name is the same text from every maps snapshot: a name made once stays */
    if (l->shown[i])
        return l->shown[i];
    if (!ns.names_ready && prof_intern_init(&ns.names, 16u << 20) == 0)
        ns.names_ready = 1;
    if (!ns.names_ready)
        return module;
    const char *raw = l->names + l->syms[i].name;
    char *dem = NULL;
    int status = -1;
    if (ns.demangle && raw[0] == '_' && raw[1] == 'Z')
        dem = ns.demangle(raw, NULL, NULL, &status);
    if (dem && status == 0)
        cut_parameters(dem);
    const char *fn = dem && status == 0 ? dem : raw;
    /* "[native libfoo.so]" -> "[native libfoo.so!fn]" */
    size_t ml = strlen(module);
    char buf[NAME_SHOWN_MAX];
    if (ml >= 2 && module[ml - 1] == ']')
        snprintf(buf, sizeof buf, "%.*s!%s]", (int)(ml - 1), module, fn);
    else
        snprintf(buf, sizeof buf, "%s!%s", module, fn);
    if (strlen(buf) == sizeof buf - 1)
        buf[sizeof buf - 2] = ']';
    free(dem);
    prof_utf8_clean(buf);
    uint32_t id = prof_intern(&ns.names, buf);
    if (!id || id == ns.names.overflow_id)
        return module; /* the names' cap: the library's name, asked again next time */
    l->shown[i] = prof_intern_str(&ns.names, id);
    return l->shown[i];
}

/* "[native libfoo.so+0x1a2b30]": the function that holds a, by its start, where no symbol
 * names it (CLRSCOPE_NATIVE_FRAMES=function); else the module's name. */
static const char *by_start(struct lib *l, uint64_t a, const char *module)
{
    uint32_t lo = 0, hi = l->nstarts;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (l->starts[mid] <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return module;
    if (l->start_shown[lo - 1])
        return l->start_shown[lo - 1];
    if (!ns.names_ready && prof_intern_init(&ns.names, 16u << 20) == 0)
        ns.names_ready = 1;
    size_t ml = strlen(module);
    if (!ns.names_ready || ml < 2 || module[ml - 1] != ']')
        return module;
    char buf[NAME_SHOWN_MAX];
    snprintf(buf, sizeof buf, "%.*s+0x%llx]", (int)(ml - 1), module,
             (unsigned long long)l->starts[lo - 1]);
    uint32_t id = prof_intern(&ns.names, buf);
    if (!id || id == ns.names.overflow_id)
        return module;
    l->start_shown[lo - 1] = prof_intern_str(&ns.names, id);
    return l->start_shown[lo - 1];
}

const char *prof_natsym_name(uintptr_t ip, const char *module)
{
    if (!ns.configured)
        configure();
    if (module && !strcmp(module, "[native code]")) { /* no library's: a runtime stub's? */
        const char *stub = prof_maps_is_code(ip) ? prof_stubs_name(ip) : NULL;
        return stub ? stub : module;
    }
    if (!ns.cap_bytes || !module || strncmp(module, "[native ", 8))
        return module;
    struct lib *l = lib_of(ip);
    if (l && !names_module(l, module)) {
        l->nsegs = 0; /* unloaded: another library is there now */
        l = lib_of(ip);
    }
    if (!l || !names_module(l, module))
        return module;
    if (!l->tried)
        load(l);
    uint64_t a = (uint64_t)(ip - l->bias);
    uint32_t lo = 0, hi = l->nsyms;
    while (lo < hi) { /* the last function starting at or below a */
        uint32_t mid = lo + (hi - lo) / 2;
        if (l->syms[mid].addr <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* in a function with a symbol: its name; between functions, or in one without a symbol:
     * its start (CLRSCOPE_NATIVE_FRAMES=function), else the module's name */
    if (lo && a - l->syms[lo - 1].addr < l->syms[lo - 1].size)
        return shown_name(l, lo - 1, module);
    return l->nstarts ? by_start(l, a, module) : module;
}

void prof_natsym_get_stats(struct prof_natsym_stats *out)
{
    *out = ns.st; /* torn reads of counters are harmless here */
}
