/*
 * test_api_query - the query string as the API reads it (api_query_*), without civetweb: the
 * first occurrence of a name, names without case, '+' and %XX decoded and a stray '%' kept,
 * values that do not fit refused, then the typed accessors: what they accept is in range, what
 * they refuse leaves a 400 JSON reply naming the parameter (too long, invalid UTF-8,
 * non-numeric, out of range, hexadecimal, blank) and nothing else. And the reply builders:
 * errors cut and made valid UTF-8, headers that do not fit refused.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "api_json.h"
#include "api_reply.h"
#include "prof_config.h"

#include "unit_check.h"

static void get(const char *query, const char *name, size_t cap, int want_rc, const char *want)
{
    char buf[64];
    memset(buf, 'Z', sizeof buf);
    int rc = api_query_get(query, name, buf, cap);
    CHECK(rc == want_rc, "'%s' %s: rc %d, want %d", query ? query : "(null)", name, rc, want_rc);
    CHECK(!strcmp(buf, want), "'%s' %s: '%s', want '%s'", query ? query : "(null)", name, buf,
          want);
    CHECK(buf[cap] == 'Z', "'%s' %s: wrote past cap %zu", query ? query : "(null)", name, cap);
}

static void test_lookup(void)
{
    get(NULL, "a", 16, -1, "");
    get("", "a", 16, -1, "");
    get("a=1", "a", 16, 1, "1");
    get("b=2&a=1", "a", 16, 1, "1");
    get("a=1&a=2", "a", 16, 1, "1");           /* the first wins */
    get("A=1", "a", 16, 1, "1");               /* names without case */
    get("ba=1", "a", 16, -1, "");              /* a name starts the string or follows '&' */
    get("a", "a", 16, -1, "");                 /* no '=' */
    get("a=", "a", 16, 0, "");                 /* present and empty */
    get("a=x+y%20z", "a", 16, 5, "x y z");
    get("a=%4a%4B", "a", 16, 2, "JK");
    get("a=%zz%4", "a", 16, 5, "%zz%4");       /* not two hex digits: kept as they are */
    get("a=%", "a", 16, 1, "%");
    get("a=12345", "a", 6, 5, "12345");        /* cap - 1 bytes fit */
    get("a=123456", "a", 6, -2, "12345");      /* one more does not */
    get("a=%41%41%41%41%41", "a", 6, 5, "AAAAA"); /* the decoded length counts */
    get("a=x%00y", "a", 16, 3, "x");           /* a NUL ends the string */
    get("a=1&b=%FF", "b", 16, 1, "\xff");
}

/* A refusal: -1 and a 400 JSON error that contains `part`. */
static void refused(int rc, struct api_reply *err, const char *what, const char *part)
{
    CHECK(rc == -1, "%s: rc %d, want -1", what, rc);
    CHECK(err->status == 400, "%s: status %d", what, err->status);
    CHECK(err->content_type && !strcmp(err->content_type, API_JSON), "%s: content type", what);
    cJSON *j = cJSON_ParseWithLength(err->body, err->len);
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    CHECK(cJSON_IsString(e) && strstr(e->valuestring, part), "%s: error %s", what,
          cJSON_IsString(e) ? e->valuestring : "(none)");
    cJSON_Delete(j);
    api_reply_free(err);
}

static void test_typed(void)
{
    struct api_reply err;
    api_reply_init(&err);
    struct api_req q = {.method = "GET", .path = "/x"};
    char buf[16];
    long l;
    double d;

    q.query = NULL;
    CHECK(api_query_str(&q, "type", buf, sizeof buf, &err) == 0 && !buf[0], "absent: 0, empty");
    CHECK(api_query_long(&q, "limit", 7, 1, 10, &l, &err) == 0 && l == 7, "absent: the default");
    CHECK(api_query_seconds(&q, &d, &err) == 0 && d == 60, "seconds: 60 by default");
    CHECK(err.status == 0 && !err.body, "nothing refused, no reply");

    q.query = "type=cpu&limit=10&seconds=2.5&x=-3";
    CHECK(api_query_str(&q, "type", buf, sizeof buf, &err) == 1 && !strcmp(buf, "cpu"), "str");
    CHECK(api_query_long(&q, "limit", 7, 1, 10, &l, &err) == 1 && l == 10, "long at its max");
    CHECK(api_query_long(&q, "x", 7, -5, 10, &l, &err) == 1 && l == -3, "negative long");
    CHECK(api_query_seconds(&q, &d, &err) == 1 && d == 2.5, "seconds 2.5");
    CHECK(err.status == 0, "nothing refused");

    q.query = "type=" "0123456789abcdef";
    refused(api_query_str(&q, "type", buf, sizeof buf, &err), &err, "too long",
            "'type' is too long (max 15 bytes)");
    q.query = "filter=%D0%9F%D0";
    refused(api_query_str(&q, "filter", buf, sizeof buf, &err), &err, "cut character",
            "'filter' is not valid UTF-8");
    q.query = "filter=%FF";
    refused(api_query_str(&q, "filter", buf, sizeof buf, &err), &err, "Latin-1",
            "'filter' is not valid UTF-8");
    q.query = "filter=%D0%9F";
    CHECK(api_query_str(&q, "filter", buf, sizeof buf, &err) == 1 && !strcmp(buf, "\xd0\x9f"),
          "a whole character is fine");

    static const char *const bad_longs[] = {"limit=abc", "limit=", "limit=1.5", "limit=0",
                                            "limit=11", "limit=99999999999999999999",
                                            "limit=5x", "limit=+"};
    for (size_t i = 0; i < sizeof bad_longs / sizeof bad_longs[0]; i++) {
        q.query = bad_longs[i];
        l = 42;
        refused(api_query_long(&q, "limit", 7, 1, 10, &l, &err), &err, bad_longs[i],
                "'limit' must be a whole number from 1 to 10");
        CHECK(l == 7, "%s: the default is left", bad_longs[i]);
    }
    static const char *const bad_doubles[] = {"seconds=abc", "seconds=0x10", "seconds=%205",
                                              "seconds=0", "seconds=-5", "seconds=inf",
                                              "seconds=nan", "seconds=1e999", "seconds="};
    for (size_t i = 0; i < sizeof bad_doubles / sizeof bad_doubles[0]; i++) {
        q.query = bad_doubles[i];
        char want[96];
        snprintf(want, sizeof want, "'seconds' must be a number from 1 to %d", g_cfg.history_s);
        refused(api_query_seconds(&q, &d, &err), &err, bad_doubles[i], want);
        CHECK(d == 60, "%s: the default is left", bad_doubles[i]);
    }
    q.query = "seconds=1e2";
    CHECK(api_query_seconds(&q, &d, &err) == 1 && d == 100, "1e2 is a decimal number");
}

static void test_reply(void)
{
    struct api_reply r;
    api_reply_init(&r);
    char big[1200];
    memset(big, 'x', sizeof big);
    big[0] = (char)0xd0; /* a character cut at the start, and 1199 bytes more than fit */
    big[sizeof big - 1] = 0;
    CHECK(api_reply_error(&r, 418, "%s", big) == 418, "error status");
    cJSON *j = cJSON_ParseWithLength(r.body, r.len);
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    CHECK(cJSON_IsString(e) && strlen(e->valuestring) == 511 && e->valuestring[0] == '?',
          "the message cut at 511 bytes and made valid UTF-8");
    cJSON_Delete(j);
    api_reply_free(&r);
    CHECK(r.status == 0 && r.fd == -1 && !r.body, "a freed reply is empty");

    for (int i = 0; i < API_MAX_HEADERS; i++)
        CHECK(api_reply_header(&r, "X-A", "1") == 0, "header %d fits", i);
    CHECK(api_reply_header(&r, "X-A", "1") == -1, "one more header than the room");
    api_reply_free(&r);
    char value[sizeof r.hbuf + 1];
    memset(value, 'v', sizeof value);
    value[sizeof value - 1] = 0;
    CHECK(api_reply_header(&r, "X-Big", value) == -1, "a value longer than the room");

    /* a JSON buffer is taken, an overflowed one answered 500 */
    struct jbuf b;
    jb_init(&b, 64);
    jb_lit(&b, "{\"a\":1}");
    CHECK(api_reply_jbuf(&r, 200, API_JSON, &b, "too big") == 200 && r.len == 7 &&
              !memcmp(r.body, "{\"a\":1}", 7) && !b.p,
          "the buffer's bytes become the reply's");
    jb_init(&b, 8);
    jb_lit(&b, "0123456789");
    CHECK(api_reply_jbuf(&r, 200, API_JSON, &b, "too big") == 500 && strstr(r.body, "too big"),
          "an overflow is a 500 with its message");
    api_reply_free(&r);
}

int main(void)
{
    prof_config_load();
    test_lookup();
    test_typed();
    test_reply();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
