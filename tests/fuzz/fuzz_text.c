/*
 * fuzz_text - everything that parses text from outside the process: clrscope's configuration
 * (every CLRSCOPE_* and DD_* variable set to input bytes, then prof_config_load and
 * dd_config_load + dd_config_resolve_agent), Datadog tag lists (dd_tags_parse), /proc cgroup text
 * (dd_parse_cgroup), and the runtime's type and method names turned into frame names
 * (prof_symbols_clean_type / clean_typename / clean_method, dd_frame_structured). Every output must stay in its
 * buffer, be NUL-terminated, and every parsed setting must lie within its documented range.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_config.h"
#include "fuzz_input.h"
#include "prof_config.h"
#include "prof_symbols.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const vars[] = {
    "CLRSCOPE_BIND", "CLRSCOPE_DASHBOARD", "CLRSCOPE_DUMP_DIR", "CLRSCOPE_DUMP_KEEP",
    "CLRSCOPE_DUMP_MAX_HEAP_MB", "CLRSCOPE_EXCEPTION_SAMPLES_PER_S", "CLRSCOPE_EXPORT_DIR",
    "CLRSCOPE_EXPORT_DIR_KEEP", "CLRSCOPE_EXPORT_FRAMES", "CLRSCOPE_EXPORT_QUEUE",
    "CLRSCOPE_EXPORT_TIMEOUT_S", "CLRSCOPE_GC_WARN", "CLRSCOPE_HISTORY_S", "CLRSCOPE_LIVE_MAX",
    "CLRSCOPE_LOCK_SAMPLES_PER_S", "CLRSCOPE_LOG_LEVEL", "CLRSCOPE_MAX_FRAMES",
    "CLRSCOPE_MAX_STACK_NODES", "CLRSCOPE_MAX_THREADS", "CLRSCOPE_PORT", "CLRSCOPE_PROFILES",
    "CLRSCOPE_SAMPLING_HZ", "CLRSCOPE_TOKEN", "DD_AGENT_HOST", "DD_API_KEY", "DD_ENV",
    "DD_EXTERNAL_ENV", "DD_HOSTNAME", "DD_INTERNAL_PROFILING_OUTPUT_DIR", "DD_PROFILING_AGENTLESS",
    "DD_PROFILING_ENABLED", "DD_PROFILING_UPLOAD_PERIOD", "DD_SERVICE", "DD_SITE", "DD_TAGS",
    "DD_TRACE_AGENT_PORT", "DD_TRACE_AGENT_URL", "DD_VERSION"};
#define NVARS (sizeof vars / sizeof vars[0])

#define TERMINATED(field) FUZZ_CHECK(memchr((field), 0, sizeof(field)) != NULL, #field " not terminated")

static void check_config(void)
{
    const struct prof_config *c = &g_cfg;
    FUZZ_CHECK(c->port >= 0 && c->port <= 65535, "port %d", c->port);
    FUZZ_CHECK(c->sampling_hz >= 1 && c->sampling_hz <= 1000, "sampling_hz %d", c->sampling_hz);
    FUZZ_CHECK(c->history_s >= 10 && c->history_s <= 86400, "history_s %d", c->history_s);
    FUZZ_CHECK(c->max_frames >= 8 && c->max_frames <= 512, "max_frames %d", c->max_frames);
    FUZZ_CHECK(c->max_threads >= 1 && c->max_threads <= 65536, "max_threads");
    FUZZ_CHECK(c->gc_warn >= 0 && c->gc_warn <= 1, "gc_warn %g", c->gc_warn);
    FUZZ_CHECK(c->dump_keep >= 1 && c->dump_keep <= 1000, "dump_keep");
    FUZZ_CHECK(c->dump_max_heap >= 1048576, "dump_max_heap");
    FUZZ_CHECK((c->profiles & ~(unsigned)PROFILE_ALL) == 0, "profiles %#x", c->profiles);
    TERMINATED(c->bind);
    TERMINATED(c->token);
    TERMINATED(c->dump_dir);
    FUZZ_CHECK(c->dump_dir[0] == '/', "dump_dir not absolute: %s", c->dump_dir);
    /* a non-loopback bind without a token is only allowed when the web server refuses it */
}

static void check_dd(const struct dd_config *d)
{
    TERMINATED(d->url);
    TERMINATED(d->unix_socket);
    TERMINATED(d->endpoint);
    TERMINATED(d->api_key);
    TERMINATED(d->site);
    TERMINATED(d->service);
    TERMINATED(d->env);
    TERMINATED(d->version);
    TERMINATED(d->host);
    TERMINATED(d->user_tags);
    TERMINATED(d->output_dir);
    FUZZ_CHECK(d->period_s >= 1 && d->period_s <= 86400, "period %d", d->period_s);
    FUZZ_CHECK(d->queue_cap >= 1 && d->queue_cap <= 64, "queue %d", d->queue_cap);
    FUZZ_CHECK(d->timeout_s >= 1 && d->timeout_s <= 600, "timeout %d", d->timeout_s);
    /* the key never shows in what status reports (a short "key" may match by chance) */
    FUZZ_CHECK(strlen(d->api_key) < 8 || !strstr(d->endpoint, d->api_key), "API key in the endpoint");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fin in = {data, size};
    uint64_t set = fin_u64(&in);
    for (size_t i = 0; i < NVARS; i++) {
        if (set >> i & 1) {
            char *v = fin_str(&in, 300);
            setenv(vars[i], v, 1);
            free(v);
        } else {
            unsetenv(vars[i]);
        }
    }
    setenv("CLRSCOPE_LOG_LEVEL", "error", 1); /* bad values log warnings: keep the run quiet */
    prof_config_load();
    check_config();
    static struct dd_config d;
    memset(&d, 0x5a, sizeof d);
    dd_config_load(&d, "fuzz");
    dd_config_resolve_agent(&d, fin_u8(&in) & 1);
    check_dd(&d);

    char *text = fin_str(&in, 4096);
    char tags[512], service[64], env[64], version[64];
    memset(tags, 'Z', sizeof tags);
    tags[0] = 0;
    service[0] = env[0] = version[0] = 0;
    dd_tags_parse(text, tags, 100, service, env, version, sizeof service, NULL);
    FUZZ_CHECK(memchr(tags, 0, 100) && tags[100] == 'Z' && memchr(service, 0, sizeof service) &&
                   memchr(env, 0, sizeof env) && memchr(version, 0, sizeof version),
               "dd_tags_parse");
    char cid[80], out[300];
    memset(cid, 'Z', sizeof cid);
    dd_parse_cgroup(text, cid, 70);
    FUZZ_CHECK(memchr(cid, 0, 70) && cid[70] == 'Z', "dd_parse_cgroup");
    for (size_t cap = 1; cap <= 257; cap += 64) {
        memset(out, 'Z', sizeof out);
        prof_symbols_clean_type(text, out, cap);
        FUZZ_CHECK(memchr(out, 0, cap) && out[cap] == 'Z', "clean_type cap %zu", cap);
        memset(out, 'Z', sizeof out);
        prof_symbols_clean_typename(text, out, cap);
        FUZZ_CHECK(memchr(out, 0, cap) && out[cap] == 'Z', "clean_typename cap %zu", cap);
        memset(out, 'Z', sizeof out);
        char *method = fin_str(&in, 200);
        prof_symbols_clean_method(text, method, out, cap);
        FUZZ_CHECK(memchr(out, 0, cap) && out[cap] == 'Z', "clean_method cap %zu", cap);
        free(method);
        memset(out, 'Z', sizeof out);
        dd_frame_structured(text, out, cap);
        FUZZ_CHECK(memchr(out, 0, cap) && out[cap] == 'Z', "frame_structured cap %zu",
                   cap);
    }
    free(text);
    return 0;
}
