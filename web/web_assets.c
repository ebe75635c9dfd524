/* web_assets.c - see web_assets.h. */
#include "web_assets.h"

#include <string.h>

const struct web_asset *web_asset_find(const char *path)
{
    if (!path || !strcmp(path, "/"))
        path = "/index.html";
    for (const struct web_asset *a = web_assets; a->path; a++)
        if (!strcmp(a->path, path))
            return a;
    return NULL;
}
