// The dashboard of a process that runs some profiles off (CLRSCOPE_PROFILES=cpu,wall): such a
// tab says the profile is off, the overview says "off" instead of zeros (no "0 exceptions
// thrown", no "0 B" allocated with a failed self-check), and no request answers 404 into the
// error banner.
//
//   BASE_URL=http://127.0.0.1:PORT/ node --test profiles_off.test.mjs   (skipped without BASE_URL)
import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {openBrowser} from './browser.mjs';

const BASE = process.env.BASE_URL || '';
const TIMEOUT = 30000;
let browser = null;
let page = null;
let bad = [];

before(async () => {
  if (!BASE) return;
  browser = await openBrowser('clrscope-off-');
  ({page, bad} = browser);
});

after(async () => {
  if (browser) await browser.close();
});

async function open(tab) {
  const u = new URL(BASE);
  u.hash = 'tab=' + tab;
  await page.goto(u.toString());
  await page.waitForFunction((t) => window.__clrscope && window.__clrscope.tab === t &&
    (window.__clrscope.refreshes || 0) > 0 && window.__clrscope.status, tab, {timeout: TIMEOUT});
}

test('tabs of profiles that are off say so', {skip: !BASE && 'BASE_URL not set'}, async () => {
  for (const tab of ['alloc', 'gc', 'exceptions', 'locks']) {
    await open(tab);
    await page.waitForSelector('main .unavailable', {timeout: TIMEOUT});
    const text = await page.textContent('main');
    assert.match(text, /profile is off in this process/, tab + ': ' + text.slice(0, 300));
    assert.equal(await page.locator('#downloads a').count(), 0, tab + ': no pprof link of an off profile');
  }
});

test('the overview says off, not zero, and raises no error', {skip: !BASE && 'BASE_URL not set'}, async () => {
  await open('overview');
  await page.waitForFunction(() => /Off: the gc profile/.test(document.querySelector('main').textContent),
    null, {timeout: TIMEOUT});
  const text = await page.textContent('main');
  assert.match(text, /Off: the alloc profile/);
  assert.doesNotMatch(text, /exceptions thrown/, 'no count of a profile that is off');
  assert.ok(await page.isHidden('#banner'), 'no error banner: ' + await page.textContent('#banner'));
  assert.deepEqual(bad, [], 'no request failed and no page error');
});
