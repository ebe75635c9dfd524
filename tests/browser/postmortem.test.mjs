// The dashboard of `clrscope serve` (the post-mortem server over the history an exited process
// left on disk): the header names the exited process, the CPU tab draws the flame graph of what
// it ran and a search finds the methods it ran last, the GC tab draws its collections, the
// overview's counters panel draws their series, the Threads tab is greyed (it needs the running
// process), and nothing fails into the error banner.
//
//   BASE_URL=http://127.0.0.1:PORT/ SERVED_PID=N EXPECT=PhaseOne,PhaseTwo \
//     node --test postmortem.test.mjs   (skipped without BASE_URL)
import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {openBrowser} from './browser.mjs';

const BASE = process.env.BASE_URL || '';
const PID = process.env.SERVED_PID || '';
const EXPECT = (process.env.EXPECT || '').split(',').filter(Boolean);
const TIMEOUT = 30000;
let browser = null;
let page = null;
let bad = [];

before(async () => {
  if (!BASE) return;
  browser = await openBrowser('clrscope-pm-');
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

const skip = !BASE && 'BASE_URL not set';

test('the header names the exited process', {skip}, async () => {
  await open('overview');
  await page.waitForFunction((pid) => document.getElementById('h-pid').textContent === pid + ' (exited)',
    PID, {timeout: TIMEOUT});
  const threads = page.locator('#tabs a', {hasText: /^Threads$/});
  assert.match(await threads.getAttribute('class'), /\boff\b/);
  assert.match(await threads.getAttribute('title'), /needs the running process/);
});

test('the overview draws the runtime counters the process recorded', {skip}, async () => {
  await open('overview');
  await page.waitForSelector('main canvas.cspark', {timeout: TIMEOUT});
  const text = await page.textContent('main');
  assert.match(text, /the values the process last recorded/);
  assert.match(text, /cpu-usage|CPU Usage/i);
});

test('the CPU tab draws what the process ran', {skip}, async () => {
  await open('cpu');
  await page.waitForFunction(() => window.__clrscope.framesDrawn > 0, null, {timeout: TIMEOUT});
  for (const name of EXPECT) {
    await page.fill('main .flame-toolbar .search', name);
    await page.waitForFunction(() => /matched/.test(document.querySelector('main .flame-toolbar .matched').textContent),
      null, {timeout: TIMEOUT});
    const matched = await page.textContent('main .flame-toolbar .matched');
    const share = Number((matched.match(/matched (\d+(?:\.\d+)?)%/) || [])[1]);
    assert.ok(share > 5, name + ': ' + matched);
  }
});

test('the GC tab draws the collections', {skip}, async () => {
  await open('gc');
  await page.waitForSelector('main canvas', {timeout: TIMEOUT});
  const text = await page.textContent('main');
  assert.doesNotMatch(text, /not available|Not in the history/i, text.slice(0, 300));
});

test('nothing failed', {skip}, async () => {
  assert.ok(await page.isHidden('#banner'), 'no error banner: ' + await page.textContent('#banner'));
  assert.deepEqual(bad, [], 'no request failed and no page error');
});
