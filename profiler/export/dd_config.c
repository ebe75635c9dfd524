/* dd_config.c - see dd_config.h. */
#include "dd_config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prof_config.h"
#include "prof_utf8.h"
#include "prof_log.h"

/* ---- small string helpers ---- */

/* Copies `src` trimmed of surrounding blanks; says (once per name) when it had to cut. */
static void copy_trim(char *dst, size_t cap, const char *src, const char *what)
{
    while (*src && isspace((unsigned char)*src))
        src++;
    size_t n = strlen(src);
    while (n && isspace((unsigned char)src[n - 1]))
        n--;
    if (n >= cap) {
        prof_log(LOG_WARN, "export: %s is longer than %zu characters; cut", what, cap - 1);
        n = cap - 1;
    }
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* A tag value may not hold the separator of tags_profiler (',') nor control characters, and is
 * UTF-8 (the intake's JSON and the pprof's strings): a byte outside a whole character (a value cut
 * at its cap, another encoding) becomes '?'. */
static void sanitize_tag(char *s)
{
    if (prof_utf8_clean(s))
        prof_log(LOG_WARN, "export: a tag value is not valid UTF-8; sent as \"%s\"", s);
    for (; *s; s++)
        if (*s == ',' || (unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '_';
}

static const char *env_or(const char *name, const char *def)
{
    const char *s = getenv(name);
    return s && *s ? s : def;
}

/* ---- tags ---- */

/* Tags clrscope sets itself on every upload: a DD_TAGS entry with one of these keys would make
 * a second, conflicting tag of the same name. */
static int reserved_key(const char *k, size_t kl)
{
    static const char *const keys[] = {"language", "profiler_version", "process_architecture",
                                       "process_id", "host", "profiler_list", "runtime_os",
                                       "runtime-id", "profile_seq", "number_of_cpu_cores",
                                       "runtime_version", "runtime_platform"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (strlen(keys[i]) == kl && !strncmp(k, keys[i], kl))
            return 1;
    return 0;
}

/* Whether "key:val" is already among the comma-separated tags of out. */
static int has_tag(const char *out, const char *key, size_t klen, const char *val, size_t vlen)
{
    size_t n = klen + 1 + vlen;
    for (const char *p = out; *p;) {
        size_t m = strcspn(p, ",");
        if (m == n && !strncmp(p, key, klen) && p[klen] == ':' && !strncmp(p + klen + 1, val, vlen))
            return 1;
        p += m;
        p += *p == ',';
    }
    return 0;
}

/* 0: added; 1: added with its value cut to DD_MAX_TAG_LEN; -1: no room. */
static int append_tag(char *out, size_t cap, const char *key, size_t klen, const char *val,
                      size_t vlen)
{
    size_t len = strlen(out);
    int cut = 0;
    if (klen + vlen + 1 > DD_MAX_TAG_LEN) {
        vlen = klen + 1 < DD_MAX_TAG_LEN ? DD_MAX_TAG_LEN - klen - 1 : 0;
        cut = 1;
    }
    size_t need = (len ? 1 : 0) + klen + 1 + vlen;
    if (len + need >= cap)
        return -1;
    char *p = out + len;
    if (len)
        *p++ = ',';
    memcpy(p, key, klen);
    p += klen;
    *p++ = ':';
    memcpy(p, val, vlen);
    p[vlen] = 0;
    sanitize_tag(out + len + (len ? 1 : 0));
    return cut;
}

int dd_tags_parse(const char *in, char *out, size_t cap, char *service, char *env,
                  char *version, size_t field_cap, int *cut)
{
    if (cut)
        *cut = 0;
    if (!in)
        return 0;
    /* "k:v,k:v"; without any comma, blanks separate entries as in "k:v k:v". */
    const char *seps = strchr(in, ',') ? "," : " \t";
    int skipped = 0;
    const char *p = in;
    while (*p) {
        size_t n = strcspn(p, seps);
        const char *s = p, *e = p + n;
        p = *e ? e + 1 : e;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        if (s == e)
            continue;
        const char *colon = memchr(s, ':', (size_t)(e - s));
        if (!colon || colon == s) {
            skipped++;
            continue;
        }
        const char *k = s, *v = colon + 1;
        size_t kl = (size_t)(colon - s), vl = (size_t)(e - v);
        while (kl && isspace((unsigned char)k[kl - 1]))
            kl--;
        while (vl && isspace((unsigned char)*v)) {
            v++;
            vl--;
        }
        char *field = NULL;
        if (kl == 7 && !strncmp(k, "service", 7))
            field = service;
        else if (kl == 3 && !strncmp(k, "env", 3))
            field = env;
        else if (kl == 7 && !strncmp(k, "version", 7))
            field = version;
        if (field) {
            /* Unified service tags come from DD_SERVICE/DD_ENV/DD_VERSION first. */
            if (!field[0] && vl) {
                size_t m = vl < field_cap - 1 ? vl : field_cap - 1;
                memcpy(field, v, m);
                field[m] = 0;
            }
            continue;
        }
        /* an empty value is a tag the intake refuses; a key clrscope sets itself would be a
         * second, conflicting tag; an exact duplicate says nothing new */
        if (!vl || reserved_key(k, kl) || has_tag(out, k, kl, v, vl)) {
            skipped++;
            continue;
        }
        int r = append_tag(out, cap, k, kl, v, vl);
        if (r < 0)
            skipped++;
        else if (r > 0 && cut)
            (*cut)++;
    }
    return skipped;
}

/* ---- the agent's address ---- */

static void set_unix(struct dd_config *c, const char *path)
{
    snprintf(c->unix_socket, sizeof c->unix_socket, "%s", path);
    snprintf(c->url, sizeof c->url, "http://localhost%s", DD_AGENT_PATH);
    snprintf(c->endpoint, sizeof c->endpoint, "unix://%s", path);
}

/* Returns 0 when `u` is a usable DD_TRACE_AGENT_URL (and was applied). */
static int use_agent_url(struct dd_config *c, const char *u)
{
    if (!strncmp(u, "unix://", 7)) {
        const char *path = u + 7;
        if (path[0] != '/' || strlen(path) >= sizeof c->unix_socket)
            return -1;
        set_unix(c, path);
        return 0;
    }
    if (strncasecmp(u, "http://", 7) && strncasecmp(u, "https://", 8))
        return -1;
    const char *host = strstr(u, "://") + 3;
    if (!*host || *host == '/')
        return -1;
    /* the authority's port, when given, is a number from 1 to 65535 (curl refuses the request
     * otherwise, and every upload failed and was retried for ever) */
    size_t al = strcspn(host, "/?#");
    const char *hp = host, *amp = memchr(host, '@', al);
    if (amp)
        hp = amp + 1;
    size_t hpl = al - (size_t)(hp - host);
    const char *colon = NULL;
    if (hpl && hp[0] == '[') { /* [v6]:port */
        const char *rb = memchr(hp, ']', hpl);
        if (!rb)
            return -1;
        colon = rb + 1 < hp + hpl && rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = memchr(hp, ':', hpl);
    }
    if (colon) {
        const char *pend = hp + hpl;
        long port = 0;
        if (colon + 1 == pend)
            return -1;
        for (const char *q = colon + 1; q < pend; q++) {
            if (*q < '0' || *q > '9' || port > 65535)
                return -1;
            port = port * 10 + (*q - '0');
        }
        if (port < 1 || port > 65535)
            return -1;
    }
    size_t n = strcspn(u, "?#");
    while (n && u[n - 1] == '/')
        n--;
    if (n + strlen(DD_AGENT_PATH) >= sizeof c->url)
        return -1;
    snprintf(c->url, sizeof c->url, "%.*s%s", (int)n, u, DD_AGENT_PATH);
    c->unix_socket[0] = 0;
    /* what is shown (log lines, /api/v1/status) leaves out a user and password in the URL */
    size_t hl = strcspn(host, "/?#");
    const char *at = memchr(host, '@', hl);
    if (at)
        snprintf(c->endpoint, sizeof c->endpoint, "%.*s***@%s", (int)(host - u), c->url,
                 c->url + (at + 1 - u));
    else
        snprintf(c->endpoint, sizeof c->endpoint, "%s", c->url);
    return 0;
}

int dd_loopback_url(const char *u)
{
    if (!strncasecmp(u, "http://", 7))
        u += 7;
    else if (!strncasecmp(u, "https://", 8))
        u += 8;
    else
        return 0;
    size_t al = strcspn(u, "/?#");
    const char *end = u + al, *port = NULL;
    if (memchr(u, '@', al)) /* no user: "http://127.0.0.1@evil.example/" is evil.example */
        return 0;
    if (al >= 5 && !strncmp(u, "[::1]", 5)) {
        port = u + 5;
    } else if (al >= 9 && !strncasecmp(u, "localhost", 9)) {
        port = u + 9;
    } else {
        /* 127.a.b.c, four decimal parts of 0..255 */
        const char *p = u;
        for (int part = 0; part < 4; part++) {
            if (part && *p++ != '.')
                return 0;
            int v = 0, digits = 0;
            while (p < end && *p >= '0' && *p <= '9' && digits < 4) {
                v = v * 10 + (*p++ - '0');
                digits++;
            }
            if (!digits || digits > 3 || v > 255 || (part == 0 && v != 127))
                return 0;
        }
        port = p;
    }
    if (port == end)
        return 1;
    if (*port != ':' || port + 1 == end)
        return 0;
    long v = 0;
    for (const char *q = port + 1; q < end; q++) {
        if (*q < '0' || *q > '9' || v > 65535)
            return 0;
        v = v * 10 + (*q - '0');
    }
    return v >= 1 && v <= 65535;
}

void dd_config_resolve_agent(struct dd_config *c, int socket_exists)
{
    const char *u = getenv("DD_TRACE_AGENT_URL");
    if (u && *u) {
        if (!use_agent_url(c, u))
            return;
        const char *at = strchr(u, '@');
        prof_log(LOG_WARN, "export: DD_TRACE_AGENT_URL=\"%s%.80s\" is not http://HOST:PORT, "
                 "https://... or unix:///PATH; using the default agent address",
                 at ? "***@" : "", at ? at + 1 : u);
    }
    if (socket_exists) {
        set_unix(c, DD_AGENT_SOCKET);
        return;
    }
    const char *host = env_or("DD_AGENT_HOST", "localhost");
    int bad = strlen(host) > 200 || strpbrk(host, "/?#@ \t") != NULL;
    if (bad) {
        prof_log(LOG_WARN, "export: DD_AGENT_HOST=\"%.80s\" is not a host name; using localhost",
                 host);
        host = "localhost";
    }
    long port = 8126;
    const char *ps = getenv("DD_TRACE_AGENT_PORT");
    if (ps && *ps) { /* Datadog trims the value: " 9126 " is 9126 */
        char *end;
        errno = 0;
        long v = strtol(ps, &end, 10);
        while (*end == ' ' || *end == '\t')
            end++;
        if (!errno && end != ps && !*end && v >= 1 && v <= 65535)
            port = v;
        else
            prof_log(LOG_WARN, "DD_TRACE_AGENT_PORT=\"%.40s\" is not a port (1..65535); using 8126",
                     ps);
    }
    int v6 = strchr(host, ':') && host[0] != '[';
    snprintf(c->url, sizeof c->url, "http://%s%s%s:%ld%s", v6 ? "[" : "", host, v6 ? "]" : "",
             port, DD_AGENT_PATH);
    c->unix_socket[0] = 0;
    snprintf(c->endpoint, sizeof c->endpoint, "%s", c->url);
}

static void resolve_agentless(struct dd_config *c)
{
    const char *key = getenv("DD_API_KEY");
    if (!key || !*key) {
        prof_log(LOG_WARN, "export: DD_PROFILING_AGENTLESS is set but DD_API_KEY is not; "
                 "sending to the agent instead");
        return;
    }
    if (strlen(key) >= sizeof c->api_key || strpbrk(key, "\r\n")) {
        prof_log(LOG_WARN, "export: DD_API_KEY is not a valid key; sending to the agent instead");
        return;
    }
    const char *site = env_or("DD_SITE", DD_DEFAULT_SITE);
    int ok = strlen(site) < 100;
    for (const char *p = site; ok && *p; p++)
        ok = isalnum((unsigned char)*p) || *p == '.' || *p == '-';
    if (!ok) {
        prof_log(LOG_WARN, "export: DD_SITE=\"%.80s\" is not a domain; using " DD_DEFAULT_SITE,
                 site);
        site = DD_DEFAULT_SITE;
    }
    snprintf(c->site, sizeof c->site, "%s", site);
    snprintf(c->api_key, sizeof c->api_key, "%s", key);
    snprintf(c->url, sizeof c->url, "https://intake.profile.%s/api/v2/profile", c->site);
    c->unix_socket[0] = 0;
    snprintf(c->endpoint, sizeof c->endpoint, "%s", c->url);
    c->agentless = 1;
}

/* ---- process identity ---- */

static void random_uuid(char *out, size_t cap)
{
    unsigned char r[16] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, r, sizeof r) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid() ^
                     (uint64_t)(uintptr_t)&r;
        for (size_t i = 0; i < sizeof r; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            r[i] ^= (unsigned char)(x >> 56);
        }
    }
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40); /* version 4 */
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, cap,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0], r[1],
             r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14],
             r[15]);
}

static int all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return 0;
    return 1;
}

/* Is [s, s+n) a container id: 64 hex digits, a UUID, or an ECS "<32 hex>-<digits>" id? */
static int is_container_id(const char *s, size_t n)
{
    if (n == 64 && all_hex(s, 64))
        return 1;
    if (n == 36 && all_hex(s, 8) && s[8] == '-' && all_hex(s + 9, 4) && s[13] == '-' &&
        all_hex(s + 14, 4) && s[18] == '-' && all_hex(s + 19, 4) && s[23] == '-' &&
        all_hex(s + 24, 12))
        return 1;
    if (n > 33 && all_hex(s, 32) && s[32] == '-') {
        for (size_t i = 33; i < n; i++)
            if (!isdigit((unsigned char)s[i]))
                return 0;
        return 1;
    }
    return 0;
}

void dd_parse_cgroup(const char *text, char *container_id, size_t cap)
{
    container_id[0] = 0;
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        /* "hierarchy:controllers:/path"; the id is the last path component, possibly wrapped
         * as "docker-<id>.scope", "cri-containerd-<id>.scope" or "crio-<id>.scope". */
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (c2) {
            const char *end = line + len;
            const char *comp = end;
            while (comp > c2 + 1 && comp[-1] != '/')
                comp--;
            size_t n = (size_t)(end - comp);
            if (n > 6 && !memcmp(end - 6, ".scope", 6))
                n -= 6;
            for (size_t skip = 0; skip < n; skip++) {
                if (skip && comp[skip - 1] != '-')
                    continue;
                if (is_container_id(comp + skip, n - skip)) {
                    size_t m = n - skip < cap - 1 ? n - skip : cap - 1;
                    memcpy(container_id, comp + skip, m);
                    container_id[m] = 0;
                    return;
                }
            }
        }
        line = eol ? eol + 1 : NULL;
    }
}

static void read_entity(struct dd_config *c)
{
    char *buf = calloc(1, 16384);
    if (!buf)
        return;
    int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, 16383) : -1;
    if (fd >= 0)
        close(fd);
    if (n > 0) {
        buf[n] = 0;
        dd_parse_cgroup(buf, c->container_id, sizeof c->container_id);
    }
    if (c->container_id[0]) {
        snprintf(c->entity_id, sizeof c->entity_id, "ci-%s", c->container_id);
    } else if (n > 0) {
        /* cgroup v2 inside a private cgroup namespace: the agent resolves the cgroup's inode.
         * 0xEFFFFFFB is the host's initial cgroup namespace, where the inode says nothing. */
        struct stat ns;
        char *v2 = strstr(buf, "0::/");
        if (v2 && (v2 == buf || v2[-1] == '\n') && stat("/proc/self/ns/cgroup", &ns) == 0 &&
            ns.st_ino != 0xEFFFFFFBu) {
            char path[600];
            size_t plen = strcspn(v2 + 3, "\n");
            snprintf(path, sizeof path, "/sys/fs/cgroup%.*s", (int)(plen < 500 ? plen : 500),
                     v2 + 3);
            struct stat st;
            if (stat(path, &st) == 0)
                snprintf(c->entity_id, sizeof c->entity_id, "in-%llu",
                         (unsigned long long)st.st_ino);
        }
    }
    free(buf);
}

/* ---- the whole configuration ---- */

/* Datadog's own profiler is loaded in this process (its tracer's native loader as the main or a
 * notification profiler): it exports the same profiles when DD_PROFILING_ENABLED is on. */
static int datadog_profiler_loaded(void)
{
    static const char clsid[] = "{846F5F1C-F9AE-4B07-969E-05C26BC060D8}";
    const char *p = getenv("CORECLR_PROFILER");
    if (p && !strcasecmp(p, clsid))
        return 1;
    const char *lists[] = {getenv("CORECLR_NOTIFICATION_PROFILERS"),
                           getenv("CORECLR_NOTIFICATION_PROFILERS_64"),
                           getenv("CORECLR_NOTIFICATION_PROFILERS_ARM64")};
    for (int i = 0; i < 3; i++)
        if (lists[i] && strcasestr(lists[i], clsid))
            return 1;
    return 0;
}

/* Datadog's spellings: blanks around the value are ignored; 1/true/t/yes/y/on and their
 * opposites, in any case; "auto" counts as on. -1: not a boolean. */
static int dd_bool(const char *s, int *is_auto)
{
    char v[16];
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n >= sizeof v)
        return -1;
    memcpy(v, s, n);
    v[n] = 0;
    static const char *const on[] = {"1", "true", "t", "yes", "y", "on"};
    static const char *const off[] = {"0", "false", "f", "no", "n", "off"};
    for (size_t i = 0; i < sizeof on / sizeof *on; i++) {
        if (!strcasecmp(v, on[i]))
            return 1;
        if (!strcasecmp(v, off[i]))
            return 0;
    }
    if (!strcasecmp(v, "auto")) {
        *is_auto = 1;
        return 1;
    }
    return -1;
}

static int parse_enabled(struct dd_config *c)
{
    const char *en = getenv("DD_PROFILING_ENABLED");
    int on = 0;
    if (en && *en) {
        on = dd_bool(en, &c->auto_enabled);
        if (on < 0) {
            prof_log(LOG_WARN, "export: DD_PROFILING_ENABLED=\"%.40s\" is not a boolean "
                     "(1/true/yes/on/auto, 0/false/no/off); the export is off", en);
            on = 0;
        }
    }
    /* CLRSCOPE_EXPORT decides for clrscope alone: 1 exports whatever DD_PROFILING_ENABLED says
     * (a Datadog tracer whose profiler is off), 0 never; unset, beside Datadog's profiler, its
     * export is the process's one and clrscope does not send a second copy of the profiles. */
    const char *mine = getenv("CLRSCOPE_EXPORT");
    if (mine && *mine && strcasecmp(mine, "auto")) {
        int dummy = 0, v = dd_bool(mine, &dummy);
        if (v >= 0)
            return v;
        prof_log(LOG_WARN, "export: CLRSCOPE_EXPORT=\"%.40s\" is not 1, 0 or auto; using auto",
                 mine);
    }
    if (on && datadog_profiler_loaded()) {
        prof_log(LOG_INFO, "export: Datadog's profiler is loaded in this process and exports "
                 "(DD_PROFILING_ENABLED): clrscope sends no second copy (CLRSCOPE_EXPORT=1 to "
                 "send both)");
        c->beside_datadog = 1;
        return 0;
    }
    return on;
}

static void read_frames_mode(struct dd_config *c)
{
    const char *f = getenv("CLRSCOPE_EXPORT_FRAMES");
    c->structured_frames = 1;
    if (!f || !*f || !strcasecmp(f, "structured"))
        return;
    if (!strcasecmp(f, "plain")) {
        c->structured_frames = 0;
        return;
    }
    prof_log(LOG_WARN, "export: CLRSCOPE_EXPORT_FRAMES=\"%.40s\" is not structured or plain; "
             "using structured", f);
}

int dd_config_load(struct dd_config *c, const char *process_name)
{
    memset(c, 0, sizeof *c);
    c->enabled = parse_enabled(c);
    c->period_s = (int)prof_env_long("DD_PROFILING_UPLOAD_PERIOD", 60, 1, 86400);
    c->queue_cap = (int)prof_env_long("CLRSCOPE_EXPORT_QUEUE", 4, 1, 64);
    c->timeout_s = (int)prof_env_long("CLRSCOPE_EXPORT_TIMEOUT_S", 10, 1, 600);
    c->dir_keep = (int)prof_env_long("CLRSCOPE_EXPORT_DIR_KEEP", 50, 1, 100000);
    read_frames_mode(c);

    copy_trim(c->service, sizeof c->service, env_or("DD_SERVICE", ""), "DD_SERVICE");
    copy_trim(c->env, sizeof c->env, env_or("DD_ENV", ""), "DD_ENV");
    copy_trim(c->version, sizeof c->version, env_or("DD_VERSION", ""), "DD_VERSION");
    int cut = 0;
    int skipped = dd_tags_parse(getenv("DD_TAGS"), c->user_tags, sizeof c->user_tags, c->service,
                                c->env, c->version, sizeof c->service, &cut);
    if (skipped)
        prof_log(LOG_WARN, "export: DD_TAGS: %d entr%s ignored: without key:value, with an empty "
                 "value, with a key clrscope sets itself (host, process_id, language, runtime-id, "
                 "...), repeated, or past %zu characters", skipped, skipped == 1 ? "y" : "ies",
                 sizeof c->user_tags - 1);
    if (cut)
        prof_log(LOG_WARN, "export: DD_TAGS: %d value%s cut to the %d characters a tag may have",
                 cut, cut == 1 ? "" : "s", DD_MAX_TAG_LEN);
    if (!c->service[0])
        copy_trim(c->service, sizeof c->service,
                  process_name && *process_name ? process_name : "dotnet", "the process name");
    if (!c->env[0])
        snprintf(c->env, sizeof c->env, "%s", DD_DEFAULT_ENV);
    if (!c->version[0])
        snprintf(c->version, sizeof c->version, "%s", DD_DEFAULT_VERSION);
    sanitize_tag(c->service);
    sanitize_tag(c->env);
    sanitize_tag(c->version);

    const char *h = getenv("DD_HOSTNAME");
    if (h && *h)
        copy_trim(c->host, sizeof c->host, h, "DD_HOSTNAME");
    else if (gethostname(c->host, sizeof c->host - 1))
        snprintf(c->host, sizeof c->host, "unknown");
    sanitize_tag(c->host);
    copy_trim(c->external_env, sizeof c->external_env, env_or("DD_EXTERNAL_ENV", ""),
              "DD_EXTERNAL_ENV");
    for (char *p = c->external_env; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = '_';

    snprintf(c->site, sizeof c->site, "%s", DD_DEFAULT_SITE);
    struct stat st;
    dd_config_resolve_agent(c, stat(DD_AGENT_SOCKET, &st) == 0 && S_ISSOCK(st.st_mode));
    const char *al = getenv("DD_PROFILING_AGENTLESS");
    int al_auto = 0, agentless = al && *al ? dd_bool(al, &al_auto) : 0;
    if (al_auto) /* "auto" is DD_PROFILING_ENABLED's word only */
        agentless = -1;
    if (agentless < 0)
        prof_log(LOG_WARN, "DD_PROFILING_AGENTLESS=\"%.40s\" is not a boolean; profiles go to "
                 "the agent", al);
    if (agentless > 0) /* (with Datadog's spellings, blanks around them ignored) */
        resolve_agentless(c);
    /* For tests only: the same request (headers, API key) to a fake intake on this machine. */
    const char *test_url = getenv("CLRSCOPE_INTERNAL_INTAKE_URL");
    if (test_url && *test_url) {
        if (strlen(test_url) < sizeof c->url && dd_loopback_url(test_url)) {
            snprintf(c->url, sizeof c->url, "%s", test_url);
            c->unix_socket[0] = 0;
            snprintf(c->endpoint, sizeof c->endpoint, "%s", c->url);
            prof_log(LOG_WARN, "export: CLRSCOPE_INTERNAL_INTAKE_URL (a test setting) sends the "
                     "profiles%s to %s", c->agentless ? " and the API key" : "", c->url);
        } else {
            prof_log(LOG_WARN, "export: CLRSCOPE_INTERNAL_INTAKE_URL is a test setting and must "
                     "be http://127.0.0.1[:PORT]/..., http://[::1]... or http://localhost...; "
                     "ignored, profiles go to %s", c->endpoint);
        }
    }

    const char *dir = env_or("CLRSCOPE_EXPORT_DIR", env_or("DD_INTERNAL_PROFILING_OUTPUT_DIR", ""));
    if (strlen(dir) >= sizeof c->output_dir - 80)
        prof_log(LOG_WARN, "export: the export directory path is too long; not writing files");
    else
        snprintf(c->output_dir, sizeof c->output_dir, "%s", dir);
    random_uuid(c->runtime_id, sizeof c->runtime_id);
    read_entity(c);
    return 0;
}

/* ---- frames ---- */

struct sbuf {
    char *p;
    size_t cap, len;
};

static void put(struct sbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = s[i] == '|' ? '_' : s[i]; /* '|' separates the fields */
        if (b->len + 1 < b->cap)
            b->p[b->len] = ch;
        b->len++;
    }
}

static void puts_(struct sbuf *b, const char *s)
{
    for (; *s; s++) {
        if (b->len + 1 < b->cap)
            b->p[b->len] = *s;
        b->len++;
    }
}

/* Splits "Name<Args>" at its first '<' that is not the first character. */
static size_t generic_split(const char *s, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (s[i] == '<')
            return i;
    return n;
}

#define MAX_PARTS 64

/* Where "+0x<hex digits>" ends mod[0..ml), or NULL. */
static const char *start_suffix(const char *mod, size_t ml)
{
    size_t i = ml;
    while (i > 0 && isxdigit((unsigned char)mod[i - 1]))
        i--;
    if (i == ml || i < 3 || mod[i - 1] != 'x' || mod[i - 2] != '0' || mod[i - 3] != '+')
        return NULL;
    return mod + i - 3;
}

size_t dd_frame_structured(const char *name, char *out, size_t cap)
{
    struct sbuf b = {out, cap, 0};
    if (!name || !*name)
        name = "[unknown]";
    size_t n = strlen(name);
    if (name[0] == '[') {
        if (!strncmp(name, "[native ", 8) && name[n - 1] == ']') {
            /* "[native libx.so]", or with the function "[native libx.so!fn]" or its start
             * "[native libx.so+0x1a2b30]" */
            const char *mod = name + 8;
            size_t ml = n - 9;
            const char *bang = memchr(mod, '!', ml);
            if (!bang) /* "[native libx.so+0x1a2b30]": the function by its start (a file name
                        * may hold '+' too: "libstdc++.so.6") */
                bang = start_suffix(mod, ml);
            size_t fl = bang ? ml - (size_t)(bang - mod) - 1 : 0;
            if (bang)
                ml = (size_t)(bang - mod);
            puts_(&b, "|lm:");
            put(&b, mod, ml);
            puts_(&b, " |ns:NativeCode |ct:");
            put(&b, mod, ml);
            puts_(&b, " |fn:");
            if (bang && fl)
                put(&b, bang + 1, fl);
            else
                puts_(&b, "Function");
        } else if (!strncmp(name, "[dynamic] ", 10) && n > 10) {
            /* a dynamic method: the type the runtime's own events give such methods */
            puts_(&b, " |ns: |ct:dynamicClass |cg: |fn:");
            put(&b, name + 10, n - 10);
            puts_(&b, " |fg: |sg:");
        } else {
            puts_(&b, " |ns: |ct: |cg: |fn:");
            put(&b, name, n);
            puts_(&b, " |fg: |sg:");
        }
        goto done;
    }
    /* Part boundaries: dots outside <...>. */
    size_t start[MAX_PARTS], len[MAX_PARTS];
    int np = 0, depth = 0;
    size_t s0 = 0;
    for (size_t i = 0; i <= n; i++) {
        char ch = name[i];
        if (ch == '<')
            depth++;
        else if (ch == '>' && depth > 0)
            depth--;
        if ((ch == '.' && depth == 0) || ch == 0) {
            if (np == MAX_PARTS) { /* absurdly deep: fold the rest into the method */
                len[np - 1] = n - start[np - 1];
                break;
            }
            start[np] = s0;
            len[np++] = i - s0;
            s0 = i + 1;
        }
    }
    /* The method: "X..ctor" gives parts [..., "", "ctor"]; "M.{lambda}" stays one method. */
    int m = np - 1;
    size_t ms = start[m], ml = len[m];
    int ctor = (ml == 4 && !strncmp(name + ms, "ctor", 4)) ||
               (ml == 5 && !strncmp(name + ms, "cctor", 5));
    if (m >= 2 && len[m - 1] == 0 && ctor) {
        m--;
        ms = start[m];
        ml = (start[np - 1] + len[np - 1]) - ms;
    } else if (m >= 2 && ml == 8 && !strncmp(name + ms, "{lambda}", 8)) {
        m--;
        ms = start[m];
        ml = (start[np - 1] + len[np - 1]) - ms;
    }
    size_t ns_len = 0, ct_start = 0, ct_len = 0;
    if (m >= 1) {
        ct_start = start[m - 1];
        ct_len = len[m - 1];
        ns_len = m >= 2 ? start[m - 1] - 1 : 0;
    }
    size_t ct_name = generic_split(name + ct_start, ct_len);
    size_t fn_name = generic_split(name + ms, ml);
    puts_(&b, " |ns:");
    put(&b, name, ns_len);
    puts_(&b, " |ct:");
    put(&b, name + ct_start, ct_name);
    puts_(&b, " |cg:");
    put(&b, name + ct_start + ct_name, ct_len - ct_name);
    puts_(&b, " |fn:");
    put(&b, name + ms, fn_name);
    puts_(&b, " |fg:");
    put(&b, name + ms + fn_name, ml - fn_name);
    puts_(&b, " |sg:");
done:
    if (cap)
        out[b.len < cap ? b.len : cap - 1] = 0;
    return b.len;
}

void dd_rfc3339(double unix_s, char *out, size_t cap)
{
    double fl = floor(unix_s);
    time_t t = (time_t)fl;
    long ns = lround((unix_s - fl) * 1e9);
    if (ns >= 1000000000L) {
        t += 1;
        ns -= 1000000000L;
    }
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ns);
}
