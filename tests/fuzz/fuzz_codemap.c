/*
 * fuzz_codemap - the x86-64 decoding the CPU sampler applies to JIT code it reads from the
 * process (prof_codemap): prologue shapes (prof_frame_decode), the return-address offset at any pc
 * inside a method (prof_frame_ra_offset) and call-site recognition (prof_frame_is_call_site), on
 * arbitrary bytes. Reads stay inside the given bytes (ASan); a decoded shape is consistent: its
 * steps are in order and inside the prologue, the prologue inside the bytes, and offsets derived
 * from it are -1 or positive (the sampler bounds them by the stack words it copied). The same
 * bytes as an IL body (prof_codemap_il_calls, which reads the IL of methods the JIT inlined
 * into): reads stay inside, calls come in order, inside the body, each with room for its token.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "prof_codemap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *code = malloc(size ? size : 1); /* exact size for ASan */
    if (!code)
        abort();
    memcpy(code, data, size);
    struct prof_frame_shape sh;
    memset(&sh, 0xa5, sizeof sh);
    if (prof_frame_decode(code, size, &sh) == 0 && sh.known) {
        FUZZ_CHECK(sh.nsteps <= PROF_FRAME_MAX_STEPS, "nsteps %u", sh.nsteps);
        FUZZ_CHECK(sh.prolog <= size, "prologue of %u bytes in %zu", sh.prolog, size);
        for (unsigned i = 0; i < sh.nsteps; i++) {
            FUZZ_CHECK(sh.step[i].off <= sh.prolog, "step %u at %u past the prologue", i,
                       sh.step[i].off);
            if (i)
                FUZZ_CHECK(sh.step[i].off > sh.step[i - 1].off &&
                               sh.step[i].alloc >= sh.step[i - 1].alloc,
                           "steps out of order at %u", i);
        }
        for (size_t off = 0; off <= size && off < 4096; off++) {
            long ra = prof_frame_ra_offset(&sh, (uint32_t)off, code + off, size - off);
            /* the caller checks it against the stack window it copied: any value is safe */
            FUZZ_CHECK(ra >= -1, "ra offset %ld at %zu", ra, off);
        }
    }
    for (size_t n = 0; n <= size && n <= 16; n++)
        (void)prof_frame_is_call_site(code + size - n, n);
    uint32_t offs[64], toks[64];
    int k = prof_codemap_il_calls(code, (uint32_t)size, offs, toks, 64);
    FUZZ_CHECK(k >= -1 && k <= 64, "%d calls", k);
    for (int i = 0; i < k; i++) {
        FUZZ_CHECK(offs[i] + 5 <= size, "call at %u in %zu bytes", offs[i], size);
        if (i)
            FUZZ_CHECK(offs[i] > offs[i - 1], "calls out of order at %d", i);
    }
    free(code);
    return 0;
}
