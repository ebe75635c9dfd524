/*
 * musl_stub.c - libclrscope.so for processes whose C library is musl (Alpine): clrscope needs
 * glibc, and the glibc library cannot even load there, which the runtime does not report (the
 * app just runs unprofiled). Clrscope.Native ships this file for the linux-musl-x64 runtime
 * identifier, so that an app published for it says why at its start, in one line, and runs
 * unprofiled as before. Built with musl-gcc: it needs musl's libc alone.
 *
 * ctx: the runtime calls DllGetClassObject once, at its start, on its main thread.
 */
#include <string.h>
#include <unistd.h>

#define CLASS_E_CLASSNOTAVAILABLE ((int)0x80040111)

__attribute__((visibility("default"))) int DllGetClassObject(const void *clsid, const void *iid,
                                                             void **out)
{
    static const char line[] =
        "clrscope: warning: this process's C library is musl (Alpine): clrscope needs glibc "
        "(2.34 or newer) and stays out; the app runs unprofiled (docs/deploying.md)\n";
    (void)clsid;
    (void)iid;
    if (out)
        *out = NULL;
    ssize_t w = write(STDERR_FILENO, line, strlen(line));
    (void)w;
    return CLASS_E_CLASSNOTAVAILABLE;
}
