/*
 * dd_config - the Datadog side of the exporter: DD_* variables, the agent or intake address, the
 * profile tags, the process's container identity, and Datadog's structured frame names.
 *
 * Pure functions over the environment and strings, so the unit tests can drive every rule
 * (tests/unit/test_dd_config.c). dd_config_load() runs once on the clrscope-export thread; the
 * struct it fills is read-only afterwards. Bad values log one warning each and take the default.
 */
#ifndef DD_CONFIG_H
#define DD_CONFIG_H

#include <stddef.h>

#define DD_AGENT_SOCKET "/var/run/datadog/apm.socket"
#define DD_AGENT_PATH "/profiling/v1/input"
#define DD_DEFAULT_SITE "datadoghq.com"
#define DD_DEFAULT_ENV "Unspecified-Environment"
#define DD_DEFAULT_VERSION "Unspecified-Version"
#define DD_MAX_TAG_LEN 200 /* Datadog truncates tags at 200 characters */

struct dd_config {
    int enabled;            /* DD_PROFILING_ENABLED: 1/true/yes/on/auto */
    int auto_enabled;       /* it said "auto" (reported as activation "auto") */
    int beside_datadog;     /* off because Datadog's own profiler exports from this process */
    int agentless;          /* DD_PROFILING_AGENTLESS with DD_API_KEY set */
    int period_s;           /* DD_PROFILING_UPLOAD_PERIOD (60, 1..86400) */
    char url[1024];         /* full request URL ("http://localhost/profiling/v1/input" for UDS) */
    char unix_socket[512];  /* "" = TCP */
    char endpoint[1100];    /* what status shows: "unix:///x.sock", "http://h:p/...", never a key */
    char api_key[128];      /* agentless only */
    char site[128];         /* DD_SITE (datadoghq.com) */
    char service[128];      /* DD_SERVICE, DD_TAGS service:, else the process name */
    char env[128];          /* DD_ENV, DD_TAGS env:, else Unspecified-Environment */
    char version[128];      /* DD_VERSION, DD_TAGS version:, else Unspecified-Version */
    char host[256];         /* DD_HOSTNAME, else gethostname() */
    char user_tags[2048];   /* DD_TAGS normalised: "k:v,k:v" without service/env/version */
    char external_env[256]; /* DD_EXTERNAL_ENV, sent as Datadog-External-Env */
    char container_id[80];  /* from /proc/self/cgroup, "" when not in a container */
    char entity_id[96];     /* "ci-<container id>" or "in-<cgroup inode>", "" when unknown */
    char runtime_id[40];    /* random UUID v4, one per process */
    char output_dir[512];   /* CLRSCOPE_EXPORT_DIR, else DD_INTERNAL_PROFILING_OUTPUT_DIR */
    int dir_keep;           /* CLRSCOPE_EXPORT_DIR_KEEP (50, 1..100000) files we keep */
    int queue_cap;          /* CLRSCOPE_EXPORT_QUEUE (4, 1..64) profiles waiting to upload */
    int timeout_s;          /* CLRSCOPE_EXPORT_TIMEOUT_S (10, 1..600) per request */
    int structured_frames;  /* CLRSCOPE_EXPORT_FRAMES: structured (1, default) or plain (0) */
};

/* Reads the environment into `c`. `process_name` is the DD_SERVICE default. ctx: any thread;
 * logs one warning per bad value. Returns 0 (there is always a usable configuration). */
int dd_config_load(struct dd_config *c, const char *process_name);

/* Resolves the agent address (DD_TRACE_AGENT_URL, else the default socket when `socket_exists`,
 * else DD_AGENT_HOST:DD_TRACE_AGENT_PORT) into c->url/unix_socket/endpoint. Exposed for tests. */
void dd_config_resolve_agent(struct dd_config *c, int socket_exists);

/* Whether `u` is an http:// or https:// URL whose host is this machine's loopback address
 * (127.x.y.z, [::1], localhost), with no user part and at most a port: the only place
 * CLRSCOPE_INTERNAL_INTAKE_URL, a test setting that gets the agentless request and its API key,
 * may name. Exposed for tests. */
int dd_loopback_url(const char *u);

/* Appends the tags in `in` ("k:v,k:v" or "k:v k:v") to `out` (cap bytes, "k:v,k:v"), normalised:
 * trimmed, commas in values replaced by '_'; entries without ':', with an empty key or value,
 * with a key clrscope sets itself (host, process_id, language, runtime-id, ...) or repeated
 * exactly are skipped (counted in the return value); keys service/env/version are copied to the
 * given buffers instead when those are empty. Values are cut to DD_MAX_TAG_LEN, counted in *cut
 * (may be NULL). Returns the number of skipped entries. */
int dd_tags_parse(const char *in, char *out, size_t cap, char *service, char *env,
                  char *version, size_t field_cap, int *cut);

/*
 * Turns a clrscope frame name into Datadog's .NET frame form
 * "|lm:<assembly> |ns:<namespace> |ct:<type> |cg:<type generics> |fn:<method> |fg: |sg:".
 * clrscope names are "Namespace.Type.Method" (nested types joined with '.', generic arguments in
 * <>, lambdas as "Method.{lambda}"); which dots separate namespace from type is not recorded, so:
 * the last dot-separated part (outside <>) is the method (".ctor"/".cctor" and a trailing
 * ".{lambda}" stay with it), the part before it is the type (its <...> goes to cg), the rest is
 * the namespace. A nested type therefore shows its outer type in the namespace. The assembly is
 * not known here, so |lm: is left out (as Datadog does when it has none). Native frames
 * "[native libx.so]" become "|lm:libx.so |ns:NativeCode |ct:libx.so |fn:Function", and with
 * their function's name "[native libx.so!fn]" (or start "[native libx.so+0x1a2b30]") the same
 * with "|fn:fn" ("|fn:0x1a2b30"); other
 * bracketed names ("[unknown]") become "|ns: |ct: |fn:[unknown]".
 * Writes at most cap bytes (always terminated); returns the length it needed.
 */
size_t dd_frame_structured(const char *name, char *out, size_t cap);

/* Writes `unix_s` as RFC 3339 UTC with nanoseconds ("YYYY-MM-DDThh:mm:ss.nnnnnnnnnZ"). */
void dd_rfc3339(double unix_s, char *out, size_t cap);

/* Reads the container id (64 hex digits, or a 32-hex-dash-UUID task id) and the entity id from
 * /proc/self/cgroup-style text; exposed for tests. Empty strings when none is found. */
void dd_parse_cgroup(const char *text, char *container_id, size_t cap);

#endif
