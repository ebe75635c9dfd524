/*
 * web_assets - the dashboard's files, compiled into the library (static/embed.cmake generates the
 * table); served with their MIME type, a strong ETag and a gzip'd variant. Nothing is read from
 * disk at run time.
 * ctx: constant data; web_asset_find on any thread (civetweb workers).
 */
#ifndef WEB_ASSETS_H
#define WEB_ASSETS_H

#include <stddef.h>

struct web_asset {
    const char *path; /* "/index.html" */
    const char *mime;
    const unsigned char *data;
    size_t len;
    const unsigned char *gz;
    size_t gz_len;
    const char *etag; /* quoted */
};

extern const struct web_asset web_assets[]; /* terminated by path == NULL */

const struct web_asset *web_asset_find(const char *path);

#endif
