/*
 * prof_codemap_stack.c - a stack from its addresses, through the code map's lookups: the names of
 * a signal sample (prof_codemap_name_stack: the leaf fix from the copied stack words, OSR frames
 * merged with their Tier0 frame, native runs folded, the thread-start plumbing cut), and the
 * FunctionIDs of a frame-pointer walk's return addresses (prof_codemap_returns). The
 * clrscope-sampler thread and clrscope-agg, under prof_codemap_lock().
 */
#include <stdint.h>
#include <string.h>

#include "clr_abi.h"
#include "prof_codemap_int.h"
#include "prof_maps.h"
#include "prof_natsym.h"
#include "prof_sighandler.h"
#include "prof_stubs.h"
#include "prof_symbols.h"

/* how prof_maps names the JIT's frames ("[native libclrjit.so]", with a function's name
 * "[native libclrjit.so!Compiler::compCompile]" or start "[native libclrjit.so+0x1a2b30]") */
#define JIT_MODULE "[native libclrjit.so"

int prof_codemap_returns(const uintptr_t *ra, int n, uint64_t found, uint64_t hops,
                         uintptr_t *fns, int *src, uintptr_t *inl)
{
    FunctionID fn[PROF_CODEMAP_MAX_RETURNS];
    int code[PROF_CODEMAP_MAX_RETURNS];
    if (n > PROF_CODEMAP_MAX_RETURNS)
        n = PROF_CODEMAP_MAX_RETURNS;
    for (int i = 0; i < n; i++) {
        fn[i] = codemap_lookup(ra[i] - 1, &code[i]);
        if (code[i] >= 0 && codemap.pool[code[i]].dyn) { /* as DoStackSnapshot: none (see .h) */
            fn[i] = 0;
            code[i] = -1;
        }
    }
    int k = 0, prev_code = -1, keep = 1;
    FunctionID prev_fn = 0;
    for (int i = 0; i < n; i++) {
        uint64_t bit = i < 64 ? 1ull << i : 0;
        if (found & bit) {
            /* read from a frame record off the chain where the learned table puts it: still
             * only a frame if it is managed code right after a call instruction */
            keep = fn[i] && codemap_after_call(ra[i]);
            *(keep ? &codemap.st.gap_kept : &codemap.st.gap_dropped) += 1;
            if (!keep)
                continue;
        } else if (hops & bit) {
            if (!keep)
                continue; /* reached from a record that was dropped */
        }
        if (fn[i] && fn[i] == prev_fn && code[i] >= 0 && prev_code >= 0 &&
            code[i] != prev_code && codemap.pool[code[i]].lo != codemap.pool[prev_code].lo) {
            prev_code = code[i]; /* OSR code and the Tier0 frame it runs on: one frame */
            continue;
        }
        if (!fn[i] && !strstr(prof_maps_native_name(ra[i] - 1), ".so"))
            continue; /* runtime-generated code (stubs, dynamic methods): not a frame to the
                       * runtime's own walk either */
        prev_fn = fn[i];
        prev_code = code[i];
        if (!fn[i] && (k == 0 || fns[k - 1] == 0))
            continue; /* leading native frames dropped, runs of them folded into one 0 */
        if (src)
            src[k] = i;
        if (inl) { /* read before fns[k] is written: fns may be ra */
            /* (a method the runtime named but whose code could not be learned has no entry:
             * code -1) */
            FunctionID x = fn[i] && code[i] >= 0
                               ? codemap_inlinee(fn[i], &codemap.pool[code[i]], ra[i] - 1, 1,
                                                 k ? fns[k - 1] : 0)
                               : 0;
            inl[k] = x;
            codemap.st.inline_frames += x != 0;
        }
        fns[k++] = fn[i];
    }
    return k;
}

/* glibc is built without frame pointers: a leaf there leaves rbp to its caller's caller. */
static int is_glibc(const char *module)
{
    static const char *const names[] = {"[native libc.so", "[native libm.so", "[native ld-linux",
                                        "[native libpthread.so"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strncmp(module, names[i], strlen(names[i])))
            return 1;
    return 0;
}

/* Recovers the callers of the leaf that rbp does not frame, from the copied stack words. */
static int leaf_fix(const struct prof_sigsample *s, struct frame *out, int cap)
{
    int code;
    const uintptr_t pc = s->ips[0];
    FunctionID fn = codemap_lookup(pc, &code);
    if (!s->nwindow || (s->flags & PROF_SIG_F_CFI)) /* CFI found the leaf's caller already */
        return 0;
    long off;
    if (fn && code >= 0) {
        /* the code at pc stays as it is while its range is in the pool (a flush, which an
         * unload forces, empties the cache): read and decoded once per hot pc, not per sample */
        struct leafoff *e = &codemap.leafoffs[(pc ^ (pc >> 11)) & (LEAFOFF_CACHE - 1)];
        if (e->pc == pc && e->code == code) {
            off = e->off;
        } else {
            const struct code *c = &codemap.pool[code];
            uint8_t at[16];
            size_t len =
                prof_codemap_read_code(pc, at, c->hi - pc < sizeof at ? c->hi - pc : sizeof at);
            off = prof_frame_ra_offset(&c->shape, (uint32_t)(pc - c->lo), at, len);
            *e = (struct leafoff){.pc = pc, .code = code, .off = off};
        }
    } else if (!fn && is_glibc(prof_maps_native_name(pc))) {
        off = 0; /* its hot leaves (memcpy, memset, syscall wrappers) push nothing */
    } else if (!fn && !strcmp(prof_maps_native_name(pc), "[native code]") &&
               prof_maps_is_code(pc) && prof_stubs_name(pc)) {
        /* a runtime stub makes no frame and leaves by a jump: its caller's return address is on
         * top of the stack, or a word or two further where the stub pushed registers (the
         * resolve stub pushes rdx, and rax on its way to the resolver) */
        off = 0;
        while (off < 16 && off / 8 + 1 < s->nwindow &&
               !(prof_maps_is_code(s->window[off / 8]) && codemap_after_call(s->window[off / 8])))
            off += 8;
    } else {
        return 0;
    }
    int n = 0;
    while (off >= 0 && off % 8 == 0 && off / 8 < s->nwindow && n < cap) {
        uintptr_t ra = s->window[off / 8];
        if ((s->n > 1 && ra == s->ips[1]) || !prof_maps_is_code(ra) || !codemap_after_call(ra))
            break; /* already on the chain, or not a return address */
        out[n++] = (struct frame){.ip = ra, .ret = 1};
        /* a frameless caller: its own return address is right above its frame */
        if (!codemap_lookup(ra - 1, &code) || code < 0 || !codemap.pool[code].shape.known ||
            codemap.pool[code].shape.framed)
            break;
        off += 8 + (long)codemap.pool[code].shape.frame;
    }
    codemap.st.leaf_fixes += n > 0;
    return n;
}

/* Remembers that an OSR frame returns to ra (in its Tier0 code), for the handler. */
static void note_osr_return(uintptr_t ra)
{
    uint32_t at = 0;
    while (at < codemap.nosr && codemap.osr_ra[at] < ra)
        at++;
    if ((at < codemap.nosr && codemap.osr_ra[at] == ra) || codemap.nosr >= OSR_RETURNS)
        return;
    memmove(&codemap.osr_ra[at + 1], &codemap.osr_ra[at],
            (codemap.nosr - at) * sizeof *codemap.osr_ra);
    codemap.osr_ra[at] = ra;
    codemap.nosr++;
    codemap.osr_dirty = 1;
    prof_sig_wake_sampler();
    codemap.st.osr_returns = codemap.nosr;
}

/* For a sample taken before the handler knew where this OSR frame returns (x, into its Tier0
 * code): the Tier0 record the chain passed over, if it lies in the stack words copied at the leaf
 * (the OSR frame is the leaf, or under a frameless one). The OSR frame's record holds the caller's
 * rbp and x; the Tier0 record above holds the same rbp and the return into the method's caller. */
static int osr_in_window(const struct prof_sigsample *s, uintptr_t x, uintptr_t *ra)
{
    for (int j = 1; j < s->nwindow; j++) {
        if (s->window[j] != x)
            continue;
        uintptr_t next = s->window[j - 1];
        for (int k = j + 1; k + 1 < s->nwindow; k++) {
            uintptr_t r = s->window[k + 1];
            if (s->window[k] == next && prof_maps_is_code(r) && codemap_after_call(r)) {
                *ra = r;
                return 1;
            }
        }
        return 0;
    }
    return 0;
}

int prof_codemap_name_stack(const struct prof_sigsample *s, const char **names,
                            unsigned char *managed, int cap)
{
    int nf = 0;
    if (s->n > 0) {
        codemap.frames[nf++] = (struct frame){.ip = s->ips[0], .ret = 0};
        nf += leaf_fix(s, &codemap.frames[nf], PROF_SIG_MAX_HOPS);
    }
    for (int i = 1; i < s->n && nf < codemap.max_frames + PROF_SIG_MAX_HOPS + 1; i++)
        codemap.frames[nf++] = (struct frame){.ip = s->ips[i], .ret = 1,
                                        .found = i < 64 && (s->found >> i & 1),
                                        .fresh = i < 64 && (s->fresh >> i & 1)};

    int k = 0, outer = -1, prev_code = -1;
    FunctionID prev_fn = 0, above = 0; /* above: the frame last written (0: native) */
    for (int i = 0; i < nf && k < cap; i++) {
        uintptr_t key = codemap.frames[i].ret ? codemap.frames[i].ip - 1 : codemap.frames[i].ip;
        int code;
        FunctionID fn;
        if (codemap.frames[i].fresh) {
            /* the walk went on through an address its snapshot did not know: the JIT's new
             * code, or a word that only looked like code (then what follows is no stack) */
            fn = codemap_lookup_fresh(key, &code);
            if (!fn && !prof_maps_is_code(key)) {
                codemap.st.new_code_cut++;
                break;
            }
            codemap.st.new_code_named += fn != 0;
        } else {
            fn = codemap_lookup(key, &code);
        }
        /* a Tier0 record found behind an OSR frame is a frame only if it is managed code right
         * after a call instruction */
        if (codemap.frames[i].found && !(fn && codemap_after_call(codemap.frames[i].ip))) {
            codemap.st.gap_dropped++;
            continue;
        }
        codemap.st.gap_kept += codemap.frames[i].found;
        if (fn && fn == prev_fn && code >= 0 && prev_code >= 0 && code != prev_code &&
            codemap.pool[code].lo != codemap.pool[prev_code].lo) {
            /* OSR code and the Tier0 frame it runs on: one frame. The handler is told where the
             * OSR frame returns, so that it finds the Tier0 record passed over there. */
            prev_code = code;
            if (!codemap.frames[i].ret)
                continue;
            note_osr_return(codemap.frames[i].ip);
            /* the handler did not know it yet: the caller from the copied words, if there */
            uintptr_t ra;
            int code2;
            FunctionID fn2;
            if (!(i + 1 < nf && codemap.frames[i + 1].found) && k < cap &&
                osr_in_window(s, codemap.frames[i].ip, &ra) &&
                !(i + 1 < nf && codemap.frames[i + 1].ip == ra) &&
                (fn2 = codemap_lookup(ra - 1, &code2)) && fn2 != fn) {
                names[k] = prof_symbols_function(fn2);
                managed[k] = 1;
                outer = k++;
                prev_fn = fn2;
                prev_code = code2;
                codemap.st.osr_window_fixes++;
            }
            continue;
        }
        const char *name = fn ? prof_symbols_function(fn)
                              : prof_natsym_name(key, prof_maps_native_name(key));
        prev_fn = fn;
        prev_code = code;
        if (!fn && k > 0 && !managed[k - 1] && names[k - 1] == name)
            continue; /* one frame per run of native code in one module */
        FunctionID x = fn && code >= 0 ? codemap_inlinee(fn, &codemap.pool[code], key,
                                                         codemap.frames[i].ret, above)
                                       : 0;
        above = fn;
        if (x && k + 1 < cap) { /* the inlinee: a frame of its own, above its caller's */
            names[k] = prof_symbols_function(x);
            managed[k++] = 1;
            codemap.st.inline_frames++;
        }
        names[k] = name;
        managed[k] = fn != 0;
        if (fn)
            outer = k;
        k++;
    }
    /* Below the outermost managed frame is thread-start plumbing (libc, libcoreclr): keep one
     * native frame there, as DoStackSnapshot reports it, so both samplers draw the same roots. */
    if (outer >= 0 && k > outer + 2)
        k = outer + 2;
    /* A managed thread starts in native code: a walk that ends on a managed frame stopped at a
     * return address into code newer than the maps snapshot (or at a frame without rbp). */
    if (outer >= 0 && outer == k - 1 && !(s->flags & PROF_SIG_F_TRUNCATED))
        prof_maps_refresh(0);
    /* Compilation: the method the JIT compiles, named right above the outermost of the JIT's
     * own frames at the leaf (under it the JIT and the runtime's answers to it; above it what
     * asked for the code: the caller's prestub, a tiering worker). Only with the JIT's code on
     * the stack: a mark a failed compilation left behind names nothing. */
    if (s->jit && k < cap) {
        int j = -1;
        for (int i = 0; i < k && !managed[i]; i++)
            if (!strncmp(names[i], JIT_MODULE, sizeof JIT_MODULE - 1) &&
                strchr("]!+", names[i][sizeof JIT_MODULE - 1]))
                j = i;
        if (j >= 0) {
            memmove(&names[j + 2], &names[j + 1], (size_t)(k - j - 1) * sizeof *names);
            memmove(&managed[j + 2], &managed[j + 1], (size_t)(k - j - 1));
            names[j + 1] = prof_symbols_jit(s->jit);
            managed[j + 1] = 0;
            k++;
            codemap.st.jit++;
        }
    }
    codemap.st.named++;
    codemap.st.cfi_leaf += (s->flags & PROF_SIG_F_CFI) != 0;
    codemap.st.link_register += (s->flags & PROF_SIG_F_LR) != 0;
    if (!(s->flags & (PROF_SIG_F_ROOTED | PROF_SIG_F_TRUNCATED))) {
        codemap.st.unrooted++;
        codemap.st.unrooted_native += outer < 0;
    }
    return k;
}
