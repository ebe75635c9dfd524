/*
 * libcsburn: native work a .NET app calls (TestApp native-burn), for the tests of native frame
 * names (test_frames.NativeSymbols): csburn_run spends the same work in an exported function and
 * in a static one, which only a full symbol table names. Built with frame pointers, as the walk
 * needs to reach the app's frames above it; CSBURN_OTHER builds a twin with another build id.
 */
#include <stdint.h>

#ifdef CSBURN_OTHER
#define ROUNDS_SALT 7
#else
#define ROUNDS_SALT 0
#endif

__attribute__((noipa, visibility("default"))) uint64_t csburn_exported(uint64_t x, int n)
{
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

__attribute__((noipa)) static uint64_t csburn_local(uint64_t x, int n)
{
    for (int i = 0; i < n + ROUNDS_SALT; i++) {
        x ^= x << 11;
        x ^= x >> 9;
        x ^= x << 23;
    }
    return x;
}

__attribute__((visibility("default"))) uint64_t csburn_run(int n)
{
    return csburn_exported((uint64_t)n * 0x9E3779B97F4A7C15ull, n) ^
           csburn_local((uint64_t)n * 0xBF58476D1CE4E5B9ull, n);
}
