/*
 * test_events.c - prof_events tells the runtime's providers apart by name
 * (EventPipeGetProviderInfo), once per provider; a failed call is asked again at the provider's
 * next event (one failure must not make every later event of that provider ignored for the
 * process's life), and a name longer than the buffer is no provider of ours (not asked again).
 */
#include <string.h>

#include "prof_core.h"
#include "prof_events.h"

#include "unit_check.h"

static int calls, fail_next;
static const char *answer = "Microsoft-Windows-DotNETRuntime";

static HRESULT fake_info(void *self, EVENTPIPE_PROVIDER p, ULONG cch, ULONG *pcch, WCHAR *name)
{
    (void)self;
    (void)p;
    calls++;
    if (fail_next) {
        fail_next = 0;
        return (HRESULT)0x80004005; /* E_FAIL */
    }
    ULONG n = (ULONG)strlen(answer) + 1;
    *pcch = n;
    if (n > cch)
        return (HRESULT)0x8007007A; /* ERROR_INSUFFICIENT_BUFFER */
    for (ULONG i = 0; i < n; i++)
        name[i] = (WCHAR)answer[i];
    return 0;
}

static void deliver(EVENTPIPE_PROVIDER p)
{
    /* event 9999: no handler of clrscope's, only the provider's kind is looked up */
    static const BYTE payload[4];
    prof_events_delivered(p, 9999, 0, NULL, 0, payload, sizeof payload, 0, 0, NULL);
}

int main(void)
{
    static ICorProfilerInfo15Vtbl vt;
    static ICorProfilerInfo15 info = {.vt = &vt};
    vt.EventPipeGetProviderInfo = fake_info;
    g_core.info = &info;
    g_core.active = 1;

    fail_next = 1;
    deliver(0x1000);
    CHECK(calls == 1, "first event asks (%d)", calls);
    deliver(0x1000);
    CHECK(calls == 2, "after a failure the next event asks again (%d)", calls);
    deliver(0x1000);
    CHECK(calls == 2, "once known, not asked again (%d)", calls);

    answer = "Some-Provider-With-A-Name-Longer-Than-Sixty-Four-Characters-Of-Text-Here";
    deliver(0x2000);
    deliver(0x2000);
    CHECK(calls == 3, "a name too long for the buffer is no provider of ours, asked once (%d)",
          calls);

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
