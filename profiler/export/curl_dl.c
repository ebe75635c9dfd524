/* curl_dl.c - see curl_dl.h. */
#include "curl_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct curl_api CU;

static const char *const g_sonames[] = {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl.so"};

int curl_dl_load(char *err, size_t cap)
{
    if (CU.multi_cleanup)
        return 0;
    void *lib = NULL;
    const char *own = getenv("CLRSCOPE_CURL_LIBRARY");
    if (own && own[0])
        lib = dlopen(own, RTLD_NOW | RTLD_LOCAL); /* that one, or none */
    for (size_t i = 0; !(own && own[0]) && !lib && i < sizeof g_sonames / sizeof g_sonames[0]; i++)
        lib = dlopen(g_sonames[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(err, cap, "libcurl could not be loaded (%s)", why ? why : "not found");
        return -1;
    }
    struct curl_api api;
    memset(&api, 0, sizeof api);
    void *sym;
#define CURL_DL_RESOLVE(name, ret, params)                                                         \
    if (!(sym = dlsym(lib, "curl_" #name))) {                                                      \
        snprintf(err, cap, "libcurl lacks curl_" #name " (too old?)");                             \
        dlclose(lib);                                                                              \
        return -1;                                                                                 \
    }                                                                                              \
    memcpy(&api.name, &sym, sizeof sym);
    CURL_DL_FUNCTIONS(CURL_DL_RESOLVE)
#undef CURL_DL_RESOLVE
    const curl_version_info_data *v = api.version_info(CURLVERSION_NOW);
    api.version_num = v ? v->version_num : 0;
    CU = api;
    return 0;
}
