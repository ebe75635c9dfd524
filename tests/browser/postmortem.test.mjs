// The dashboard of `clrscope serve` (the post-mortem server over the history an exited process
// left on disk): the header names the exited process, the CPU tab draws the flame graph of what
// it ran and a search finds the methods it ran last, the GC tab draws its collections, the
// overview's counters panel draws their series, the Threads tab is greyed (it needs the running
// process), and nothing fails into the error banner.
//
//   BASE_URL=http://127.0.0.1:PORT/ SERVED_PID=N EXPECT=PhaseOne,PhaseTwo \
//     node --test postmortem.test.mjs   (skipped without BASE_URL)
import {test} from 'node:test';
import assert from 'node:assert/strict';
import {browserForTests, openTab} from './browser.mjs';

const BASE = process.env.BASE_URL || '';
const PID = process.env.SERVED_PID || '';
const EXPECT = (process.env.EXPECT || '').split(',').filter(Boolean);
const TIMEOUT = 30000;
const b = browserForTests(BASE, 'clrscope-pm-');

const skip = !BASE && 'BASE_URL not set';

test('the header names the exited process', {skip}, async () => {
  await openTab(b, BASE, 'overview');
  await b.page.waitForFunction((pid) => document.getElementById('h-pid').textContent === pid + ' (exited)',
    PID, {timeout: TIMEOUT});
  const threads = b.page.locator('#tabs a', {hasText: /^Threads$/});
  assert.match(await threads.getAttribute('class'), /\boff\b/);
  assert.match(await threads.getAttribute('title'), /needs the running process/);
});

test('the overview draws the runtime counters the process recorded', {skip}, async () => {
  await openTab(b, BASE, 'overview');
  await b.page.waitForSelector('main canvas.cspark', {timeout: TIMEOUT});
  const text = await b.page.textContent('main');
  assert.match(text, /the values the process last recorded/);
  assert.match(text, /cpu-usage|CPU Usage/i);
});

test('the CPU tab draws what the process ran', {skip}, async () => {
  await openTab(b, BASE, 'cpu');
  await b.page.waitForFunction(() => window.__clrscope.framesDrawn > 0, null, {timeout: TIMEOUT});
  for (const name of EXPECT) {
    await b.page.fill('main .flame-toolbar .search', name);
    await b.page.waitForFunction(() => /matched/.test(document.querySelector('main .flame-toolbar .matched').textContent),
      null, {timeout: TIMEOUT});
    const matched = await b.page.textContent('main .flame-toolbar .matched');
    const share = Number((matched.match(/matched (\d+(?:\.\d+)?)%/) || [])[1]);
    assert.ok(share > 5, name + ': ' + matched);
  }
});

test('the GC tab draws the collections', {skip}, async () => {
  await openTab(b, BASE, 'gc');
  await b.page.waitForSelector('main canvas', {timeout: TIMEOUT});
  const text = await b.page.textContent('main');
  assert.doesNotMatch(text, /not available|Not in the history/i, text.slice(0, 300));
});

test('nothing failed', {skip}, async () => {
  assert.ok(await b.page.isHidden('#banner'), 'no error banner: ' + await b.page.textContent('#banner'));
  assert.deepEqual(b.bad, [], 'no request failed and no page error');
});
