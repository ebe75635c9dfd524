/*
 * prof_natsym - the names of native functions, for frames in libraries: "[native libfoo.so!func]"
 * where a symbol table of the library covers the address, else the library's name as prof_maps
 * gives it ("[native libfoo.so]").
 *
 * Each library's symbols are read once, the first time one of its frames is named: its own
 * .symtab, else a separate debug file with one (CLRSCOPE_SYMBOL_PATH's directories, then
 * NAME.dbg or NAME.debug beside the library, as `dotnet-symbol` puts the runtime's, then
 * /usr/lib/debug/.build-id/) whose GNU build id is the library's, else its .dynsym (exported
 * functions only). A file whose build id is not the one of the code in memory (a library
 * replaced on disk since it was loaded) is not used. Functions with a size only: an address between two functions keeps the
 * library's name, never the nearest name below it. C++ names are shown demangled, without their
 * parameters ("MethodDesc::DoPrestub"). The runtime ships without symbol tables: its frames stay
 * "[native libcoreclr.so]" until its debug files are there. Executable memory of no library
 * ("[native code]") is named by prof_stubs where it holds one of the runtime's stubs.
 *
 * Memory: the functions' addresses and names, CLRSCOPE_SYMBOLS_MAX_MB in all (past it a library
 * keeps its module name; counted). ctx: the clrscope-sampler thread, under prof_codemap_lock(),
 * like prof_maps_native_name; prof_natsym_get_stats from any thread.
 */
#ifndef PROF_NATSYM_H
#define PROF_NATSYM_H

#include <stdint.h>

/* The frame name of native address ip, whose module name (prof_maps_native_name) is `module`.
 * The string stays valid until exit. */
const char *prof_natsym_name(uintptr_t ip, const char *module);

struct prof_natsym_stats {
    uint32_t libraries;    /* libraries whose symbols were looked for */
    uint32_t with_symtab;  /* of those, named from a full symbol table (their own or a debug file's) */
    uint32_t debug_files;  /* of those, from a separate debug file */
    uint32_t dynsym_only;  /* named from their exported functions only */
    uint32_t refused;      /* files found whose build id was not the loaded library's */
    uint64_t functions;    /* functions known */
    uint64_t bytes;        /* memory they take */
    uint64_t over_cap;     /* libraries left unnamed: CLRSCOPE_SYMBOLS_MAX_MB reached */
};
void prof_natsym_get_stats(struct prof_natsym_stats *out);

#endif
