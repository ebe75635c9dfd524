/*
 * test_dd_config.c - the exporter's Datadog rules: DD_* parsing and defaults, the agent address
 * (DD_TRACE_AGENT_URL, the default socket, DD_AGENT_HOST:DD_TRACE_AGENT_PORT, agentless), DD_TAGS,
 * structured frame names, RFC 3339 times and container ids from /proc/self/cgroup.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_config.h"
#include "prof_log.h"

#include "unit_check.h"

#define CHECK_STR(got, want) CHECK(!strcmp((got), (want)), "got \"%s\", want \"%s\"", got, want)

static const char *const vars[] = {
    "DD_PROFILING_ENABLED", "DD_PROFILING_UPLOAD_PERIOD", "DD_SERVICE", "DD_ENV", "DD_VERSION",
    "DD_TAGS", "DD_HOSTNAME", "DD_AGENT_HOST", "DD_TRACE_AGENT_PORT", "DD_TRACE_AGENT_URL",
    "DD_PROFILING_AGENTLESS", "DD_API_KEY", "DD_SITE", "DD_INTERNAL_PROFILING_OUTPUT_DIR",
    "CLRSCOPE_EXPORT_DIR", "CLRSCOPE_EXPORT_QUEUE", "CLRSCOPE_EXPORT_FRAMES",
    "CLRSCOPE_INTERNAL_INTAKE_URL", "DD_EXTERNAL_ENV", "CLRSCOPE_EXPORT", "CORECLR_PROFILER",
    "CORECLR_NOTIFICATION_PROFILERS", "CORECLR_NOTIFICATION_PROFILERS_64",
    "CORECLR_NOTIFICATION_PROFILERS_ARM64"};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

static void test_defaults(void)
{
    static struct dd_config c;
    clear_env();
    dd_config_load(&c, "MyApp");
    CHECK(!c.enabled, "off without DD_PROFILING_ENABLED");
    CHECK(c.period_s == 60, "period %d", c.period_s);
    CHECK_STR(c.service, "MyApp");
    CHECK_STR(c.env, DD_DEFAULT_ENV);
    CHECK_STR(c.version, DD_DEFAULT_VERSION);
    CHECK(c.queue_cap == 4 && c.timeout_s == 10 && c.structured_frames == 1, "knobs");
    CHECK(strlen(c.runtime_id) == 36 && c.runtime_id[14] == '4', "uuid %s", c.runtime_id);
    static struct dd_config d;
    dd_config_load(&d, "MyApp");
    CHECK(strcmp(c.runtime_id, d.runtime_id), "runtime ids differ");
    CHECK(c.host[0], "host from gethostname");
    /* without the socket: localhost:8126 */
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.url, "http://localhost:8126/profiling/v1/input");
    CHECK_STR(c.unix_socket, "");
    dd_config_resolve_agent(&c, 1);
    CHECK_STR(c.unix_socket, DD_AGENT_SOCKET);
    CHECK_STR(c.url, "http://localhost/profiling/v1/input");
    CHECK_STR(c.endpoint, "unix:///var/run/datadog/apm.socket");
}

static void test_enabled_values(void)
{
    static struct dd_config c;
    /* Datadog's spellings: blanks around, t/y */
    const char *on[] = {"1", "true", "TRUE", "yes", "auto", " 1", "1\t", "t", "Y", "on"};
    const char *off[] = {"0", "false", "no", "x"};
    for (size_t i = 0; i < sizeof on / sizeof *on; i++) {
        clear_env();
        setenv("DD_PROFILING_ENABLED", on[i], 1);
        dd_config_load(&c, "a");
        CHECK(c.enabled, "%s is on", on[i]);
        CHECK(c.auto_enabled == !strcmp(on[i], "auto"), "auto flag for %s", on[i]);
    }
    for (size_t i = 0; i < 4; i++) {
        clear_env();
        setenv("DD_PROFILING_ENABLED", off[i], 1);
        dd_config_load(&c, "a");
        CHECK(!c.enabled, "%s is off", off[i]);
    }
    /* beside Datadog's own profiler, which exports the same profiles: clrscope does not */
    clear_env();
    setenv("DD_PROFILING_ENABLED", "1", 1);
    setenv("CORECLR_PROFILER", "{846f5f1c-f9ae-4b07-969e-05c26bc060d8}", 1);
    dd_config_load(&c, "a");
    CHECK(!c.enabled && c.beside_datadog, "off beside Datadog's profiler");
    setenv("CLRSCOPE_EXPORT", "1", 1);
    dd_config_load(&c, "a");
    CHECK(c.enabled, "CLRSCOPE_EXPORT=1 sends both");
    clear_env();
    setenv("CORECLR_NOTIFICATION_PROFILERS", "/x/y.so={846F5F1C-F9AE-4B07-969E-05C26BC060D8};", 1);
    setenv("DD_PROFILING_ENABLED", "true", 1);
    dd_config_load(&c, "a");
    CHECK(!c.enabled, "off beside Datadog's profiler in the notification list");
    clear_env();
    setenv("CORECLR_NOTIFICATION_PROFILERS_ARM64", "/x/y.so={846f5f1c-f9ae-4b07-969e-05c26bc060d8};",
           1);
    setenv("DD_PROFILING_ENABLED", "true", 1);
    dd_config_load(&c, "a");
    CHECK(!c.enabled, "off beside Datadog's profiler in the arm64 notification list");
    /* a tracer whose profiler is off: clrscope exports when told to */
    clear_env();
    setenv("DD_PROFILING_ENABLED", "0", 1);
    setenv("CLRSCOPE_EXPORT", "yes", 1);
    dd_config_load(&c, "a");
    CHECK(c.enabled, "CLRSCOPE_EXPORT=yes exports without DD_PROFILING_ENABLED");
    setenv("CLRSCOPE_EXPORT", "0", 1);
    setenv("DD_PROFILING_ENABLED", "1", 1);
    dd_config_load(&c, "a");
    CHECK(!c.enabled, "CLRSCOPE_EXPORT=0 never");
    clear_env();
    setenv("DD_PROFILING_UPLOAD_PERIOD", "0", 1);
    dd_config_load(&c, "a");
    CHECK(c.period_s == 60, "bad period -> 60");
    setenv("DD_PROFILING_UPLOAD_PERIOD", "15", 1);
    dd_config_load(&c, "a");
    CHECK(c.period_s == 15, "period 15");
}

static void test_agent_address(void)
{
    static struct dd_config c;
    clear_env();
    setenv("DD_AGENT_HOST", "dd-agent.local", 1);
    setenv("DD_TRACE_AGENT_PORT", "9126", 1);
    dd_config_resolve_agent(&c, 1); /* host/port do not beat the socket; the URL does */
    CHECK_STR(c.unix_socket, DD_AGENT_SOCKET);
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.url, "http://dd-agent.local:9126/profiling/v1/input");
    setenv("DD_AGENT_HOST", "::1", 1);
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.url, "http://[::1]:9126/profiling/v1/input");
    setenv("DD_TRACE_AGENT_PORT", " 9127 ", 1); /* blanks around it, trimmed as Datadog does */
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.url, "http://[::1]:9127/profiling/v1/input");
    setenv("DD_TRACE_AGENT_PORT", "70000", 1);
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.url, "http://[::1]:8126/profiling/v1/input");
    setenv("DD_TRACE_AGENT_PORT", "91 26", 1);
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.url, "http://[::1]:8126/profiling/v1/input");

    setenv("DD_TRACE_AGENT_URL", "http://10.0.0.5:8126/", 1);
    dd_config_resolve_agent(&c, 1);
    CHECK_STR(c.url, "http://10.0.0.5:8126/profiling/v1/input");
    CHECK_STR(c.unix_socket, "");
    setenv("DD_TRACE_AGENT_URL", "https://proxy.example/dd", 1);
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.url, "https://proxy.example/dd/profiling/v1/input");
    /* a user and password in the URL are used, never shown (logs, /api/v1/status) */
    setenv("DD_TRACE_AGENT_URL", "http://user:secretpw@127.0.0.1:8126", 1);
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.url, "http://user:secretpw@127.0.0.1:8126/profiling/v1/input");
    CHECK_STR(c.endpoint, "http://***@127.0.0.1:8126/profiling/v1/input");
    setenv("DD_TRACE_AGENT_URL", "unix:///run/dd/apm.sock", 1);
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.unix_socket, "/run/dd/apm.sock");
    CHECK_STR(c.url, "http://localhost/profiling/v1/input");
    CHECK_STR(c.endpoint, "unix:///run/dd/apm.sock");
    setenv("DD_TRACE_AGENT_URL", "ftp://nope", 1); /* warned, then the default chain */
    setenv("DD_AGENT_HOST", "h", 1);
    unsetenv("DD_TRACE_AGENT_PORT");
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.url, "http://h:8126/profiling/v1/input");
    setenv("DD_TRACE_AGENT_URL", "unix://relative.sock", 1);
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.url, "http://h:8126/profiling/v1/input");
    /* a port that is no port: warned, then the default chain (not a failure of every upload) */
    const char *bad_ports[] = {"http://127.0.0.1:99999", "http://127.0.0.1:0", "http://h:",
                               "http://h:80x", "http://u:p@h:123456/", "http://[::1]:70000"};
    for (size_t i = 0; i < sizeof bad_ports / sizeof *bad_ports; i++) {
        setenv("DD_TRACE_AGENT_URL", bad_ports[i], 1);
        dd_config_resolve_agent(&c, 0);
        CHECK_STR(c.url, "http://h:8126/profiling/v1/input");
    }
    setenv("DD_TRACE_AGENT_URL", "http://u:p@[::1]:9000", 1); /* the password's colon is no port */
    dd_config_resolve_agent(&c, 0);
    CHECK_STR(c.url, "http://u:p@[::1]:9000/profiling/v1/input");
}

static void test_agentless(void)
{
    static struct dd_config c;
    clear_env();
    setenv("DD_PROFILING_AGENTLESS", "1", 1);
    dd_config_load(&c, "a");
    CHECK(!c.agentless, "no key: agent");
    setenv("DD_API_KEY", "abc", 1);
    dd_config_load(&c, "a");
    CHECK(c.agentless, "agentless");
    /* Datadog's boolean spellings, blanks around them ignored, as for DD_PROFILING_ENABLED */
    const char *yes[] = {" true", "t", "Y", "on ", "yes"};
    const char *no[] = {"false", " 0", "n", "nope", "auto"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        setenv("DD_PROFILING_AGENTLESS", yes[i], 1);
        dd_config_load(&c, "a");
        CHECK(c.agentless, "DD_PROFILING_AGENTLESS='%s': agentless", yes[i]);
    }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        setenv("DD_PROFILING_AGENTLESS", no[i], 1);
        dd_config_load(&c, "a");
        CHECK(!c.agentless, "DD_PROFILING_AGENTLESS='%s': the agent", no[i]);
    }
    setenv("DD_PROFILING_AGENTLESS", "1", 1);
    dd_config_load(&c, "a");
    CHECK_STR(c.url, "https://intake.profile.datadoghq.com/api/v2/profile");
    CHECK_STR(c.api_key, "abc");
    setenv("DD_SITE", "datadoghq.eu", 1);
    dd_config_load(&c, "a");
    CHECK_STR(c.url, "https://intake.profile.datadoghq.eu/api/v2/profile");
    setenv("DD_SITE", "evil/x?y", 1);
    dd_config_load(&c, "a");
    CHECK_STR(c.url, "https://intake.profile.datadoghq.com/api/v2/profile");
    CHECK(!strstr(c.endpoint, "abc"), "the key is not in the endpoint");
    setenv("CLRSCOPE_INTERNAL_INTAKE_URL", "http://127.0.0.1:1/api/v2/profile", 1);
    dd_config_load(&c, "a");
    CHECK_STR(c.url, "http://127.0.0.1:1/api/v2/profile");
    CHECK(c.agentless, "still agentless (the key is sent)");
    /* the test setting gets the API key: anywhere but this machine's loopback, it is ignored */
    setenv("CLRSCOPE_INTERNAL_INTAKE_URL", "https://collector.example/api/v2/profile", 1);
    dd_config_load(&c, "a");
    CHECK_STR(c.url, "https://intake.profile.datadoghq.com/api/v2/profile");
    CHECK(c.agentless, "agentless to the real intake");
    unsetenv("CLRSCOPE_INTERNAL_INTAKE_URL");
}

static void test_loopback_url(void)
{
    static const char *const yes[] = {
        "http://127.0.0.1:1/api/v2/profile", "http://127.0.0.1/", "http://127.0.0.1",
        "https://127.1.2.3:65535/x", "http://localhost:8126/x", "HTTP://LOCALHOST/",
        "http://[::1]:9/x", "http://[::1]", "http://127.0.0.1?x", "http://127.0.0.1#y"};
    static const char *const no[] = {
        "https://collector.example/api/v2/profile", "http://10.0.0.1:8126/",
        "http://0.0.0.0:8126/", "http://128.0.0.1/", "http://127.0.0.1.evil.example/",
        "http://localhost.evil.example/", "http://127.0.0.1@evil.example/",
        "http://user:pw@127.0.0.1/", "http://127.0.0/", "http://127.0.0.256/",
        "http://127.0.0.1:0/", "http://127.0.0.1:65536/", "http://127.0.0.1:/",
        "http://127.0.0.1:80x/", "http://[::2]/", "ftp://127.0.0.1/", "unix:///tmp/x.sock",
        "127.0.0.1:8126", "http://", "http:///x", "http://localhostx/", "http://1270.0.0.1/"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        CHECK(dd_loopback_url(yes[i]), "%s is this machine's loopback", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECK(!dd_loopback_url(no[i]), "%s is not", no[i]);
}

static void test_tags(void)
{
    char out[256] = "", svc[32] = "", env[32] = "", ver[32] = "";
    int skipped = dd_tags_parse(" team:perf , tier: back,end ,bare, :x ,env:prod,service:s1,a:b:c",
                                out, sizeof out, svc, env, ver, sizeof svc, NULL);
    CHECK_STR(out, "team:perf,tier:back,a:b:c");
    CHECK(skipped == 3, "skipped %d", skipped); /* "end", "bare", ":x" */
    CHECK_STR(env, "prod");
    CHECK_STR(svc, "s1");
    CHECK_STR(ver, "");
    char out2[256] = "", e2[32] = "already";
    dd_tags_parse("k1:v1 k2:v2 env:x", out2, sizeof out2, svc, e2, ver, sizeof svc, NULL);
    CHECK_STR(out2, "k1:v1,k2:v2");
    CHECK_STR(e2, "already");
    char tiny[12] = "";
    skipped = dd_tags_parse("aaaa:bbbb,cccc:dddd", tiny, sizeof tiny, svc, env, ver, sizeof svc,
                            NULL);
    CHECK_STR(tiny, "aaaa:bbbb");
    CHECK(skipped == 1, "one did not fit");
    /* empty values, keys clrscope sets itself, exact repeats: skipped; long values: cut */
    char out3[600] = "", s3[32] = "", e3[32] = "", v3[32] = "", longv[400];
    memset(longv, 'x', sizeof longv);
    memcpy(longv, "big:", 4);
    longv[sizeof longv - 1] = 0;
    char in3[800];
    snprintf(in3, sizeof in3, "a:1,c:,host:fake,process_id:1,language:java,runtime-id:x,a:1,"
             "team:x,team:y,%s", longv);
    int cut = 0;
    skipped = dd_tags_parse(in3, out3, sizeof out3, s3, e3, v3, sizeof s3, &cut);
    CHECK(!strncmp(out3, "a:1,team:x,team:y,big:", 22), "%s", out3);
    CHECK(strlen(out3) == 18 + DD_MAX_TAG_LEN, "the long value cut to the tag length: %zu",
          strlen(out3));
    CHECK(skipped == 6, "skipped %d", skipped); /* c:, 4 reserved, the repeated a:1 */
    CHECK(cut == 1, "cut %d", cut);

    static struct dd_config c;
    clear_env();
    setenv("DD_TAGS", "env:from-tags,version:7,x:1", 1);
    setenv("DD_ENV", "from-env", 1);
    dd_config_load(&c, "a");
    CHECK_STR(c.env, "from-env");
    CHECK_STR(c.version, "7");
    CHECK_STR(c.user_tags, "x:1");
    setenv("DD_SERVICE", "my,svc", 1);
    dd_config_load(&c, "a");
    CHECK_STR(c.service, "my_svc");
    /* values are UTF-8 in the intake's JSON: other bytes become '?', whole characters stay */
    setenv("DD_SERVICE", "caf\xc3\xa9", 1);
    setenv("DD_VERSION", "v\xff" "1", 1);
    setenv("DD_TAGS", "team:\xd0\x9f\xd0,site:\xe2\x82\xac", 1);
    dd_config_load(&c, "a");
    CHECK_STR(c.service, "caf\xc3\xa9");
    CHECK_STR(c.version, "v?1");
    CHECK_STR(c.user_tags, "team:\xd0\x9f?,site:\xe2\x82\xac");
}

static void frame(const char *in, const char *want)
{
    char out[512];
    size_t n = dd_frame_structured(in, out, sizeof out);
    CHECK(!strcmp(out, want) && n == strlen(want), "%s -> \"%s\", want \"%s\"", in, out, want);
}

static void test_frames(void)
{
    frame("TestApp.CpuWork.HeavyCaller", " |ns:TestApp |ct:CpuWork |cg: |fn:HeavyCaller |fg: |sg:");
    frame("System.Collections.Generic.List<System.Int32>.Add",
          " |ns:System.Collections.Generic |ct:List |cg:<System.Int32> |fn:Add |fg: |sg:");
    frame("Ns.Dict<A.B,C.D>.TryGet<E.F>",
          " |ns:Ns |ct:Dict |cg:<A.B,C.D> |fn:TryGet |fg:<E.F> |sg:");
    frame("Ns.Type..ctor", " |ns:Ns |ct:Type |cg: |fn:.ctor |fg: |sg:");
    frame("Ns.Type..cctor", " |ns:Ns |ct:Type |cg: |fn:.cctor |fg: |sg:");
    frame("Ns.Type.Main.{lambda}", " |ns:Ns |ct:Type |cg: |fn:Main.{lambda} |fg: |sg:");
    frame("A.B.Outer.Inner.M", " |ns:A.B.Outer |ct:Inner |cg: |fn:M |fg: |sg:");
    frame("Program.<Main>$", " |ns: |ct:Program |cg: |fn:<Main>$ |fg: |sg:");
    frame("Main", " |ns: |ct: |cg: |fn:Main |fg: |sg:");
    frame("[native libcoreclr.so]",
          "|lm:libcoreclr.so |ns:NativeCode |ct:libcoreclr.so |fn:Function");
    frame("[native libc.so.6!malloc]", "|lm:libc.so.6 |ns:NativeCode |ct:libc.so.6 |fn:malloc");
    frame("[native libcoreclr.so+0x1a2b30]",
          "|lm:libcoreclr.so |ns:NativeCode |ct:libcoreclr.so |fn:0x1a2b30");
    frame("[native libstdc++.so.6]",
          "|lm:libstdc++.so.6 |ns:NativeCode |ct:libstdc++.so.6 |fn:Function");
    frame("[native libcoreclr.so!MethodDesc::DoPrestub]",
          "|lm:libcoreclr.so |ns:NativeCode |ct:libcoreclr.so |fn:MethodDesc::DoPrestub");
    frame("[dynamic] Regex1_Scan", " |ns: |ct:dynamicClass |cg: |fn:Regex1_Scan |fg: |sg:");
    frame("[dynamic] a|b", " |ns: |ct:dynamicClass |cg: |fn:a_b |fg: |sg:");
    frame("[unknown]", " |ns: |ct: |cg: |fn:[unknown] |fg: |sg:");
    frame("", " |ns: |ct: |cg: |fn:[unknown] |fg: |sg:");
    frame("N.T.a|b", " |ns:N |ct:T |cg: |fn:a_b |fg: |sg:");
    char small[8];
    size_t need = dd_frame_structured("Ns.T.M", small, sizeof small);
    CHECK(need == strlen(" |ns:Ns |ct:T |cg: |fn:M |fg: |sg:") && strlen(small) == 7,
          "truncation: need %zu", need);
    CHECK(dd_frame_structured("Ns.T.M", NULL, 0) == need, "measure only");
    /* very deep names do not overflow the part table */
    char deep[400] = "";
    for (int i = 0; i < 90; i++)
        strcat(deep, "a.");
    strcat(deep, "m");
    char out[1024];
    dd_frame_structured(deep, out, sizeof out);
    CHECK(strstr(out, "|fn:") != NULL, "deep name converted");
}

static void test_time_and_cgroup(void)
{
    char t[64];
    dd_rfc3339(0.5, t, sizeof t);
    CHECK_STR(t, "1970-01-01T00:00:00.500000000Z");
    dd_rfc3339(1700000000.0, t, sizeof t);
    CHECK_STR(t, "2023-11-14T22:13:20.000000000Z");
    dd_rfc3339(1.9999999999, t, sizeof t);
    CHECK_STR(t, "1970-01-01T00:00:02.000000000Z");

    char id[80];
    const char *hex = "3f9c5b1c0a2e4d6f8a7b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f";
    char text[512];
    snprintf(text, sizeof text, "12:memory:/docker/%s\n0::/\n", hex);
    dd_parse_cgroup(text, id, sizeof id);
    CHECK_STR(id, hex);
    snprintf(text, sizeof text, "0::/system.slice/docker-%s.scope\n", hex);
    dd_parse_cgroup(text, id, sizeof id);
    CHECK_STR(id, hex);
    snprintf(text, sizeof text, "0::/kubepods/pod1/cri-containerd-%s.scope", hex);
    dd_parse_cgroup(text, id, sizeof id);
    CHECK_STR(id, hex);
    dd_parse_cgroup("1:name=systemd:/ecs/55091c13b8cb4e6e90ac1a7b3b2a6b52/"
                    "55091c13b8cb4e6e90ac1a7b3b2a6b52-1234567890\n", id, sizeof id);
    CHECK_STR(id, "55091c13b8cb4e6e90ac1a7b3b2a6b52-1234567890");
    dd_parse_cgroup("0::/kubepods/pod/0b4ae5c6-7f2b-4a0e-9c3b-8d1e2f3a4b5c\n", id, sizeof id);
    CHECK_STR(id, "0b4ae5c6-7f2b-4a0e-9c3b-8d1e2f3a4b5c");
    dd_parse_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n", id, sizeof id);
    CHECK_STR(id, "");
    dd_parse_cgroup("garbage without colons", id, sizeof id);
    CHECK_STR(id, "");
}

int main(void)
{
    prof_log_set_level(LOG_ERROR); /* the warnings for bad values are expected here */
    test_defaults();
    test_enabled_values();
    test_agent_address();
    test_agentless();
    test_loopback_url();
    test_tags();
    test_frames();
    test_time_and_cgroup();
    clear_env();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
