/*
 * prof_symbols_clean.c - turns the runtime's and the metadata's type and method names into the
 * form clrscope shows ("List`1[System.Int32]" -> "List<System.Int32>", "Ns.Outer+Inner" ->
 * "Ns.Outer.Inner", lambdas and state machines folded into the method that wrote them). Pure
 * string functions, bounded by the caller's buffers: any thread.
 */
#include "prof_symbols.h"
#include "prof_symbols_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void symbols_put(char *out, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len >= cap)
        return;
    if (n > cap - 1 - *len)
        n = cap - 1 - *len;
    memcpy(out + *len, s, n);
    *len += n;
    out[*len] = 0;
}

/* fold: for frame names, compiler-generated nested types go (display classes "<>c...") or
 * become the method they implement ("<Name>d__5" -> "Name"); for the types of objects they stay
 * as the runtime names them (a closure is a "<>c__DisplayClass1_0", not its enclosing type). */
static void clean_type(const char *in, char *out, size_t cap, int fold)
{
    size_t len = 0;
    out[0] = 0;
    const char *p = in;
    int first = 1;
    while (*p) {
        const char *end = p + strcspn(p, "+[");
        size_t n = (size_t)(end - p);
        if (!fold && n >= 2 && p[0] == '<') {
            const char *bt = memchr(p, '`', n);
            if (!first)
                symbols_put(out, cap, &len, ".", 1);
            symbols_put(out, cap, &len, p, bt ? (size_t)(bt - p) : n);
            first = 0;
        } else if (n >= 3 && p[0] == '<' && p[1] == '>') {
            /* skip */
        } else if (n >= 2 && p[0] == '<') {
            const char *gt = memchr(p, '>', n);
            if (gt) {
                if (!first)
                    symbols_put(out, cap, &len, ".", 1);
                symbols_put(out, cap, &len, p + 1, (size_t)(gt - p - 1));
                first = 0;
            }
        } else {
            const char *bt = memchr(p, '`', n);
            if (!first)
                symbols_put(out, cap, &len, ".", 1);
            symbols_put(out, cap, &len, p, bt ? (size_t)(bt - p) : n);
            first = 0;
        }
        p = end;
        if (*p == '+') {
            p++;
            continue;
        }
        if (*p == '[') {
            /* "[]" or "[,]" array suffix, or "[T1,T2]" generic args from runtime names */
            if (p[1] == ']' || p[1] == ',') {
                symbols_put(out, cap, &len, p, strlen(p));
                return;
            }
            /* generic arguments: translate brackets to angle brackets, recurse flatly */
            symbols_put(out, cap, &len, "<", 1);
            int depth = 0;
            for (p++; *p; p++) {
                char c = *p;
                if (c == '[') {
                    if (p[1] == ']' || p[1] == ',') {
                        const char *close = strchr(p, ']');
                        size_t k = close ? (size_t)(close - p + 1) : strlen(p);
                        symbols_put(out, cap, &len, p, k);
                        p += k - 1;
                        continue;
                    }
                    depth++;
                    symbols_put(out, cap, &len, "<", 1);
                } else if (c == ']') {
                    if (depth == 0) {
                        symbols_put(out, cap, &len, ">", 1);
                        p++;
                        break;
                    }
                    depth--;
                    symbols_put(out, cap, &len, ">", 1);
                } else if (c == '+') {
                    symbols_put(out, cap, &len, ".", 1);
                } else if (c == '`') {
                    while (p[1] >= '0' && p[1] <= '9')
                        p++;
                } else {
                    symbols_put(out, cap, &len, &c, 1);
                }
            }
            if (*p)
                symbols_put(out, cap, &len, p, strlen(p));
            return;
        }
    }
}

void prof_symbols_clean_type(const char *in, char *out, size_t cap)
{
    clean_type(in, out, cap, 1);
}

void prof_symbols_clean_typename(const char *in, char *out, size_t cap)
{
    clean_type(in, out, cap, 0);
}

/* `type` in clrscope's frame form with its type arguments as C# writes them: each part of the
 * nested chain takes as many arguments as its own arity ("`N"), in order (a nested type's
 * parameters start with its outer types'), "Dictionary`2+Entry" with <K,V> reads
 * "Dictionary<K,V>.Entry"; the last part takes what is left. A part the fold drops (a display
 * class) drops its arguments; a state machine "<Run>d__3`1" keeps its own (the generic method's):
 * "Run<TKey>". */
static void frame_type(const char *type, const char *const *targs, unsigned ntargs, char *out,
                       size_t cap)
{
    size_t len = 0;
    unsigned used = 0;
    out[0] = 0;
    for (const char *p = type; *p;) {
        size_t n = strcspn(p, "+");
        int last = p[n] == 0;
        char part[NAME_MAX_LEN], cleaned[NAME_MAX_LEN];
        snprintf(part, sizeof part, "%.*s", (int)(n < sizeof part ? n : sizeof part - 1), p);
        prof_symbols_clean_type(part, cleaned, sizeof cleaned);
        const char *bt = strrchr(part, '`');
        unsigned arity = bt ? (unsigned)strtoul(bt + 1, NULL, 10) : 0;
        if (last || used + arity > ntargs)
            arity = ntargs - used;
        if (cleaned[0]) {
            if (len)
                symbols_put(out, cap, &len, ".", 1);
            symbols_put(out, cap, &len, cleaned, strlen(cleaned));
            for (unsigned i = 0; i < arity; i++) {
                symbols_put(out, cap, &len, i ? "," : "<", 1);
                symbols_put(out, cap, &len, targs[used + i], strlen(targs[used + i]));
            }
            if (arity)
                symbols_put(out, cap, &len, ">", 1);
        }
        used += arity;
        p += n;
        if (*p == '+')
            p++;
    }
}

/* "<A,B>" into out (empty for none). */
static void type_args(const char *const *args, unsigned n, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    for (unsigned i = 0; i < n; i++) {
        symbols_put(out, cap, &len, i ? "," : "<", 1);
        symbols_put(out, cap, &len, args[i], strlen(args[i]));
    }
    if (n)
        symbols_put(out, cap, &len, ">", 1);
}

void prof_symbols_clean_method(const char *type, const char *method, char *out, size_t cap)
{
    prof_symbols_clean_frame(type, NULL, 0, method, NULL, 0, out, cap);
}

void prof_symbols_clean_frame(const char *type, const char *const *targs, unsigned ntargs,
                              const char *method, const char *const *margs, unsigned nmargs,
                              char *out, size_t cap)
{
    char t[NAME_MAX_LEN], ma[NAME_MAX_LEN];
    if (ntargs)
        frame_type(type, targs, ntargs, t, sizeof t);
    else
        prof_symbols_clean_type(type, t, sizeof t);
    type_args(margs, nmargs, ma, sizeof ma);
    /* An async/iterator state machine's MoveNext is the method named by the type's last part. */
    const char *last_plus = strrchr(type, '+');
    int state_machine = last_plus && last_plus[1] == '<' && last_plus[2] != '>' &&
                        !strcmp(method, "MoveNext");
    if (state_machine) {
        snprintf(out, cap, "%s", t);
        return;
    }
    if (method[0] == '<' && method[1] != '>') {
        /* "<Name>b__0_0", "<<Main>$>b__0_0" (lambda in top-level code), "<Main>g__Local|0_0" */
        int depth = 0;
        const char *gt = NULL;
        for (const char *q = method; *q; q++) {
            if (*q == '<')
                depth++;
            else if (*q == '>' && --depth == 0) {
                gt = q;
                break;
            }
        }
        if (gt) {
            const char *name = method + 1;
            size_t n = (size_t)(gt - method - 1);
            if (name[0] == '<') { /* nested: take the inner name up to its own '>' */
                const char *igt = memchr(name, '>', n);
                if (igt) {
                    n = (size_t)(igt - name - 1);
                    name++;
                }
            }
            const char *rest = gt + 1;
            char m[256];
            if (rest[0] == 'g' && rest[1] == '_' && rest[2] == '_') { /* local function */
                const char *local = rest + 3;
                size_t k = strcspn(local, "|");
                snprintf(m, sizeof m, "%.*s.%.*s%s", (int)n, name, (int)k, local, ma);
            } else if (rest[0] == 'b' && rest[1] == '_' && rest[2] == '_') { /* lambda */
                snprintf(m, sizeof m, "%.*s.{lambda}", (int)n, name);
            } else { /* "<Main>$" top-level statements and others */
                snprintf(m, sizeof m, "%.*s", (int)n, name);
            }
            if (snprintf(out, cap, "%s%s%s", t, t[0] ? "." : "", m) < 0)
                out[0] = 0;
            return;
        }
    }
    if (snprintf(out, cap, "%s%s%s%s", t, t[0] ? "." : "", method, ma) < 0)
        out[0] = 0;
}
