// bench/first_paint.mjs BASE_URL [RUNS] - dashboard first paint: loads the dashboard of a running
// profiled app RUNS times (default 5) in headless Chromium, each time in a fresh profile (cold
// cache), and prints the median time from navigation start to the first contentful paint and to
// the overview's first complete refresh (every panel filled with data). For scale, the same fresh
// browser's first contentful paint of a one-line HTML page (a data: URL, no network): the floor
// no page can go below on this machine. Uses playwright-core from
// tests/browser/node_modules and /usr/bin/chromium (CHROMIUM overrides).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {createRequire} from 'node:module';

const require = createRequire(new URL('../tests/browser/package.json', import.meta.url));
const {chromium} = require('playwright-core');
const base = process.argv[2];
const runs = Number(process.argv[3] || 5);
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
if (!base) {
  console.error('usage: node bench/first_paint.mjs BASE_URL [RUNS]');
  process.exit(2);
}

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fcp = [], ready = [], load = [], floor = [];
const launch = (dir) => chromium.launchPersistentContext(dir, {
  executablePath: CHROMIUM, headless: true, viewport: {width: 1440, height: 900},
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync']});
// Each load in a fresh browser and profile (cold cache); the floor page likewise, in its own
// fresh browser, so both are a browser's first navigation.
async function fresh(fn) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clrscope-paint-'));
  const ctx = await launch(dir);
  try {
    return await fn(ctx.pages()[0] || await ctx.newPage());
  } finally {
    await ctx.close();
    fs.rmSync(dir, {recursive: true, force: true});
  }
}
for (let i = 0; i < runs; i++) {
  const t = await fresh(async (page) => {
    await page.goto(base, {waitUntil: 'load'});
    await page.waitForFunction(() => window.__clrscope && window.__clrscope.refreshes > 0, null,
      {timeout: 30000});
    // the paint entry is recorded when the frame is presented, which a loaded machine can
    // report after the first refresh
    await page.waitForFunction(() => performance.getEntriesByName('first-contentful-paint').length,
      null, {timeout: 10000}).catch(() => {});
    return page.evaluate(() => {
      const p = performance.getEntriesByName('first-contentful-paint')[0];
      const nav = performance.getEntriesByType('navigation')[0];
      return {fcp: p ? p.startTime : null, load: nav ? nav.loadEventEnd : null,
        ready: window.__clrscope.firstRefreshAt || null};
    });
  });
  if (t.fcp != null) fcp.push(t.fcp);
  if (t.load != null) load.push(t.load);
  if (t.ready != null) ready.push(t.ready);
  const b = await fresh(async (page) => {
    await page.goto('data:text/html,<!doctype html><title>floor</title><p>clrscope</p>',
      {waitUntil: 'load'});
    await page.waitForFunction(() => performance.getEntriesByName('first-contentful-paint').length,
      null, {timeout: 5000}).catch(() => {});
    return page.evaluate(() => {
      const p = performance.getEntriesByName('first-contentful-paint')[0];
      return p ? p.startTime : null;
    });
  });
  if (b != null) floor.push(b);
}
if (!fcp.length || !load.length) {
  console.error(`first_paint: the dashboard reported no first contentful paint or load event in ` +
    `${runs} loads`);
  process.exit(1);
}
console.log(`dashboard, cold cache, median of ${runs} loads: first contentful paint ` +
  `${median(fcp).toFixed(0)} ms, load event ${median(load).toFixed(0)} ms` +
  (ready.length ? `, overview filled with data ${median(ready).toFixed(0)} ms` : '') +
  (floor.length ? `; a one-line HTML page, also a fresh browser's first navigation (the floor): first ` +
    `contentful paint ${median(floor).toFixed(0)} ms` : ''));
