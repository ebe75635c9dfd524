/*
 * prof_gc_config.c - the GC mode the app asks for, read once at Initialize (prof_gc_init): the
 * DOTNET_/COMPlus_ gcServer and gcConcurrent variables, else the System.GC.Server and
 * System.GC.Concurrent properties of its runtimeconfig.json. prof_gc reports it until GC threads
 * or GCs tell the truth.
 */
#include "prof_gc_int.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* DOTNET_x, then COMPlus_x; CLRConfig reads these numbers as hexadecimal. */
static int env_flag(const char *name, int def)
{
    const char *prefixes[] = {"DOTNET_", "COMPlus_"};
    for (int i = 0; i < 2; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s%s", prefixes[i], name);
        const char *v = getenv(key);
        if (v && *v)
            return strtol(v, NULL, 16) != 0;
    }
    return def;
}

/* The app's runtimeconfig.json: next to the .dll run by `dotnet`, or next to the apphost. */
static cJSON *load_runtimeconfig(void)
{
    char args[4096] = "", path[4200] = "";
    FILE *f = fopen("/proc/self/cmdline", "re");
    size_t n = 0;
    if (f) {
        n = fread(args, 1, sizeof args - 1, f);
        fclose(f);
    }
    args[n] = 0;
    const char *a0 = args, *base = strrchr(a0, '/');
    base = base ? base + 1 : a0;
    if (!strcmp(base, "dotnet")) {
        for (const char *a = args + strlen(args) + 1; a < args + n; a += strlen(a) + 1) {
            size_t l = strlen(a);
            if (l > 4 && !strcmp(a + l - 4, ".dll")) {
                snprintf(path, sizeof path, "%.*s.runtimeconfig.json", (int)(l - 4), a);
                break;
            }
        }
    } else {
        char exe[4096];
        ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (l > 0) {
            exe[l] = 0;
            snprintf(path, sizeof path, "%s.runtimeconfig.json", exe);
        }
    }
    if (!path[0] || !(f = fopen(path, "re")))
        return NULL;
    char *buf = malloc(1 << 20);
    cJSON *root = NULL;
    if (buf) {
        size_t got = fread(buf, 1, (1 << 20) - 1, f);
        buf[got] = 0;
        root = cJSON_Parse(buf);
        free(buf);
    }
    fclose(f);
    return root;
}

static int config_flag(const cJSON *props, const char *key, int def)
{
    const cJSON *v = props ? cJSON_GetObjectItemCaseSensitive(props, key) : NULL;
    if (cJSON_IsBool(v))
        return cJSON_IsTrue(v);
    if (cJSON_IsString(v))
        return !strcmp(v->valuestring, "true") || !strcmp(v->valuestring, "1");
    return def;
}

void gc_config_read(int *server, int *concurrent)
{
    cJSON *rc = load_runtimeconfig();
    const cJSON *opts = rc ? cJSON_GetObjectItemCaseSensitive(rc, "runtimeOptions") : NULL;
    const cJSON *props = opts ? cJSON_GetObjectItemCaseSensitive(opts, "configProperties") : NULL;
    *server = env_flag("gcServer", config_flag(props, "System.GC.Server", 0));
    *concurrent = env_flag("gcConcurrent", config_flag(props, "System.GC.Concurrent", 1));
    cJSON_Delete(rc);
}
