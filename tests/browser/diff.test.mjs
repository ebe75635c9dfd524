// The Compare tab against a real app whose hot path changed (TestApp `phases`, see
// tests/integration/test_browser.py): picking "since <mark>" draws a differential flame graph
// whose biggest changes are the two phases' methods, a row click searches the graph, and
// "Mark now" adds a mark the windows menu offers; no request fails, no page error.
//
//   BASE_URL=http://127.0.0.1:PORT/ MARK_LABEL=... EXPECT_TOP=A,B node --test diff.test.mjs
import {test} from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {browserForTests} from './browser.mjs';

const BASE = process.env.BASE_URL || '';
const TIMEOUT = 30000;
const b = browserForTests(BASE, 'clrscope-diff-', {height: 900, console: true});

test('the Compare tab shows what changed at a mark', {skip: !BASE && 'BASE_URL not set'}, async () => {
  const u = new URL(BASE);
  u.hash = 'tab=diff';
  await b.page.goto(u.toString());
  await b.page.waitForFunction(() => window.__clrscope && window.__clrscope.diff, null, {timeout: TIMEOUT});
  const label = process.env.MARK_LABEL;
  const menu = b.page.locator('select[aria-label="windows"]');
  const value = await menu.locator('option', {hasText: label}).getAttribute('value');
  assert.match(value, /^mark:\d+$/);
  // the history on disk is on (a day by default): the windows reaching back a day are offered
  assert.equal(await menu.locator('option[value="ago:86100"]').count(), 1);
  await b.page.evaluate(() => { window.__clrscope.diff = null; });
  await b.page.locator('select[aria-label="windows"]').selectOption(value);
  await b.page.waitForFunction(() => window.__clrscope.diff && window.__clrscope.framesDrawn > 0,
    null, {timeout: TIMEOUT});
  const d = await b.page.evaluate(() => window.__clrscope.diff);
  const expect = (process.env.EXPECT_TOP || '').split(',');
  assert.ok(expect.includes(d.top), 'top change ' + d.top + ', expected one of ' + expect);
  assert.ok(d.a.total > 0 && d.b.total > 0, JSON.stringify(d));
  // the table's first two rows are the two phases, one grew and one shrank
  const rows = b.page.locator('.diff-changes table.data tbody tr');
  const first = [await rows.nth(0).textContent(), await rows.nth(1).textContent()];
  for (const name of expect) {
    const short = name.split('.').pop();
    assert.ok(first.some((t) => t.includes(short)), short + ' in ' + first);
  }
  assert.equal(await b.page.locator('.diff-changes table.data tbody tr .grew').count() > 0, true);
  assert.equal(await b.page.locator('.diff-changes table.data tbody tr .shrank').count() > 0, true);
  // the canvas has red and blue pixels: grown and shrunk frames
  const colours = await b.page.evaluate(() => {
    const c = document.querySelector('.flame.diff canvas.main');
    const g = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let red = 0, blue = 0;
    for (let i = 0; i < g.length; i += 4) {
      if (g[i] > g[i + 2] + 60) red++;
      else if (g[i + 2] > g[i] + 60) blue++;
    }
    return {red, blue};
  });
  assert.ok(colours.red > 100 && colours.blue > 100, JSON.stringify(colours));
  // a row click searches the graph for that function
  await rows.nth(0).click();
  await b.page.waitForFunction(() => /matched/.test(document.querySelector('.flame.diff .matched').textContent),
    null, {timeout: TIMEOUT});
  // Fold native asks for the comparison with native frames folded, and the phases stay on top
  const folded = b.page.waitForResponse((r) => /flamegraph\/diff\?.*native=fold/.test(r.url()),
    {timeout: TIMEOUT});
  await b.page.click('button.fold');
  const fr = await (await folded).json();
  assert.ok(expect.includes(fr.functions[0].name), 'folded top ' + fr.functions[0].name);
  assert.match(b.page.url(), /native=fold/);
  await b.page.click('button.fold');
  // "Mark now" adds a mark and compares since it
  await b.page.fill('input[aria-label="mark label"]', 'from the browser');
  await b.page.click('text=Mark now');
  await b.page.waitForFunction(() => [...document.querySelectorAll('select[aria-label="windows"] option')]
    .some((o) => o.selected && /from the browser/.test(o.textContent)), null, {timeout: TIMEOUT});
  const marks = await b.page.evaluate(async (base) => (await (await fetch(base + 'api/v1/marks')).json()), BASE);
  assert.ok(marks.marks.some((m) => m.label === 'from the browser'), JSON.stringify(marks));
  fs.mkdirSync(process.env.SCREENSHOT_DIR || os.tmpdir(), {recursive: true});
  await b.page.screenshot({path: path.join(process.env.SCREENSHOT_DIR || os.tmpdir(), 'compare.png'), fullPage: true});
  assert.deepEqual(b.bad, [], 'no request failed and no page error');
});
