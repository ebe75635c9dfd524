// The dashboard of a process that runs some profiles off (CLRSCOPE_PROFILES=cpu,wall): such a
// tab says the profile is off, the overview says "off" instead of zeros (no "0 exceptions
// thrown", no "0 B" allocated with a failed self-check), and no request answers 404 into the
// error banner.
//
//   BASE_URL=http://127.0.0.1:PORT/ node --test profiles_off.test.mjs   (skipped without BASE_URL)
import {test} from 'node:test';
import assert from 'node:assert/strict';
import {browserForTests, openTab} from './browser.mjs';

const BASE = process.env.BASE_URL || '';
const TIMEOUT = 30000;
const b = browserForTests(BASE, 'clrscope-off-');

test('tabs of profiles that are off say so', {skip: !BASE && 'BASE_URL not set'}, async () => {
  for (const tab of ['alloc', 'gc', 'exceptions', 'locks']) {
    await openTab(b, BASE, tab);
    await b.page.waitForSelector('main .unavailable', {timeout: TIMEOUT});
    const text = await b.page.textContent('main');
    assert.match(text, /profile is off in this process/, tab + ': ' + text.slice(0, 300));
    assert.equal(await b.page.locator('#downloads a').count(), 0, tab + ': no pprof link of an off profile');
  }
});

test('the overview says off, not zero, and raises no error', {skip: !BASE && 'BASE_URL not set'}, async () => {
  await openTab(b, BASE, 'overview');
  await b.page.waitForFunction(() => /Off: the gc profile/.test(document.querySelector('main').textContent),
    null, {timeout: TIMEOUT});
  const text = await b.page.textContent('main');
  assert.match(text, /Off: the alloc profile/);
  assert.doesNotMatch(text, /exceptions thrown/, 'no count of a profile that is off');
  assert.ok(await b.page.isHidden('#banner'), 'no error banner: ' + await b.page.textContent('#banner'));
  assert.deepEqual(b.bad, [], 'no request failed and no page error');
});
