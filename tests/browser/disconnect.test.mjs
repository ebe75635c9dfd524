// The profiled process goes away while its dashboard is open (KILL_PID is killed by the test):
// the page says so in one message, keeps the last data it showed (no panel turns into "Could not
// load"), and asks for the status alone, less and less often.
//
//   BASE_URL=http://127.0.0.1:PORT/ KILL_PID=PID node --test disconnect.test.mjs
import {test, after} from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {chromium} from 'playwright-core';

const BASE = process.env.BASE_URL || '';
const PID = Number(process.env.KILL_PID || 0);
let context = null;
let dir = null;

after(async () => {
  if (context) await context.close();
  if (dir) fs.rmSync(dir, {recursive: true, force: true});
});

test('a process that exits: one message, the last data kept, polling backs off',
  {skip: !(BASE && PID) && 'BASE_URL and KILL_PID not set'}, async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clrscope-down-'));
    context = await chromium.launchPersistentContext(dir, {
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
      viewport: {width: 1366, height: 768}});
    const page = context.pages()[0] || await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const u = new URL(BASE);
    u.hash = 'tab=cpu';
    await page.goto(u.toString());
    await page.waitForFunction(() => window.__clrscope && window.__clrscope.framesDrawn > 0,
      null, {timeout: 30000});
    const before = await page.textContent('main');
    process.kill(PID, 'SIGKILL');
    await page.waitForFunction(() => window.__clrscope.down === true, null, {timeout: 30000});
    const banner = await page.textContent('#banner');
    assert.match(banner, /has not answered since/);
    let asked = 0;
    page.on('request', () => { asked++; });
    await page.waitForTimeout(12000);
    // status alone, after 2, 4 and 8 s (not every panel, every few seconds)
    assert.ok(asked <= 4, asked + ' requests in 12 s');
    const text = await page.textContent('main');
    assert.doesNotMatch(text, /Could not load/);
    assert.ok(text.includes('cpu-worker') || text.length >= before.length * 0.8,
      'the last data stays on the page');
    assert.equal((await page.textContent('#banner-msgs')).match(/not answered/g).length, 1);
    assert.deepEqual(errors, []);
  });
