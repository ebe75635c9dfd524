/*
 * prof_sigsample_caller.c - whose code made a system call: the runtime's own native code
 * (which retries EINTR), or other code (a P/Invoke, a native library), from a walk's frames.
 * Used by the wall asks and by the drain of CPU samples; the clrscope-sampler thread only. It
 * reads the maps snapshot and the CFI table, which only that thread replaces.
 */
#include <stdint.h>
#include <string.h>

#include "prof_cfi.h"
#include "prof_maps.h"
#include "prof_sigsample_int.h"

int sigsample_wall_runtime_code(const char *name)
{
    /* (and clrscope's own: on the app's threads, in the runtime's callbacks, it waits only on
     * mutexes and in back-off sleeps, which a signal at most cuts short) */
    static const char *const libs[] = {"[native libcoreclr.so]", "[native libclrjit.so]",
                                       "[native libclrgc.so]", "[native libclrgcexp.so]",
                                       "[native libclrscope.so]"};
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++)
        if (!strcmp(name, libs[i]))
            return 1;
    /* libSystem.Native.so, libSystem.Net.Security.Native.so, ...: the BCL's shims */
    size_t n = strlen(name);
    return !strncmp(name, "[native libSystem.", 18) && n > 12 &&
           !strcmp(name + n - 11, ".Native.so]");
}

const char *sigsample_cut_call_outside(const uintptr_t *ips, uint32_t n)
{
    const struct prof_cfi *cfi = __atomic_load_n(&g_sig.cfi, __ATOMIC_ACQUIRE);
    const char *caller = NULL;
    for (uint32_t i = 0; i < n && !caller; i++) {
        uintptr_t pc = i ? ips[i] - 1 : ips[i];
        const struct prof_cfi_lib *l = prof_cfi_find(cfi, pc);
        if (!l || l->leaf_only || sigsample_wall_runtime_code(prof_maps_native_name(pc)))
            caller = prof_maps_native_name(pc);
    }
    /* the runtime's own code retries EINTR; a walk that did not get past libc (a stack the maps
     * snapshot did not know yet) does not say */
    return caller && !sigsample_wall_runtime_code(caller) ? caller : NULL;
}
