/*
 * curl_dl - libcurl for the Datadog exporter, loaded with dlopen("libcurl.so.4") the first time
 * an export starts, so that a profiled process that does not export never maps libcurl and its
 * ~30 dependencies (TLS, Kerberos, LDAP, ...), and a machine without libcurl loses the export
 * only, not the profiler.
 *
 * CLRSCOPE_CURL_LIBRARY names another library file (then only that one is tried); otherwise
 * libcurl.so.4, libcurl-gnutls.so.4 and libcurl.so are tried in that order.
 *
 * Compiled against curl/curl.h for the types and constants; every function the exporter calls is
 * reached through CU, the table curl_dl_load() fills. Once loaded, the library stays loaded.
 * curl_dl_load runs on clrscope-export only; CU is read by that thread only.
 */
#ifndef CURL_DL_H
#define CURL_DL_H

#include <curl/curl.h>
#include <stddef.h>

/* X(field, return type, parameters): the libcurl entry points the exporter uses. */
#define CURL_DL_FUNCTIONS(X)                                                                     \
    X(global_init, CURLcode, (long))                                                             \
    X(version_info, curl_version_info_data *, (CURLversion))                                     \
    X(easy_init, CURL *, (void))                                                                 \
    X(easy_setopt, CURLcode, (CURL *, CURLoption, ...))                                          \
    X(easy_getinfo, CURLcode, (CURL *, CURLINFO, ...))                                           \
    X(easy_cleanup, void, (CURL *))                                                              \
    X(easy_strerror, const char *, (CURLcode))                                                   \
    X(mime_init, curl_mime *, (CURL *))                                                          \
    X(mime_addpart, curl_mimepart *, (curl_mime *))                                              \
    X(mime_name, CURLcode, (curl_mimepart *, const char *))                                      \
    X(mime_filename, CURLcode, (curl_mimepart *, const char *))                                  \
    X(mime_type, CURLcode, (curl_mimepart *, const char *))                                      \
    X(mime_data, CURLcode, (curl_mimepart *, const char *, size_t))                              \
    X(mime_data_cb, CURLcode, (curl_mimepart *, curl_off_t, curl_read_callback,                  \
                               curl_seek_callback, curl_free_callback, void *))                  \
    X(mime_free, void, (curl_mime *))                                                            \
    X(slist_append, struct curl_slist *, (struct curl_slist *, const char *))                    \
    X(slist_free_all, void, (struct curl_slist *))                                               \
    X(multi_init, CURLM *, (void))                                                               \
    X(multi_add_handle, CURLMcode, (CURLM *, CURL *))                                            \
    X(multi_remove_handle, CURLMcode, (CURLM *, CURL *))                                         \
    X(multi_perform, CURLMcode, (CURLM *, int *))                                                \
    X(multi_poll, CURLMcode, (CURLM *, struct curl_waitfd *, unsigned int, int, int *))          \
    X(multi_info_read, CURLMsg *, (CURLM *, int *))                                              \
    X(multi_cleanup, CURLMcode, (CURLM *))

struct curl_api {
#define CURL_DL_FIELD(name, ret, params) ret(*name) params;
    CURL_DL_FUNCTIONS(CURL_DL_FIELD)
#undef CURL_DL_FIELD
    unsigned version_num; /* the loaded library's LIBCURL_VERSION_NUM */
};

extern struct curl_api CU;

/* Loads libcurl and fills CU. 0 on success; -1 with a reason in err[cap] otherwise (the caller
 * logs it). Loading again after a success is a no-op. */
int curl_dl_load(char *err, size_t cap);

#endif
