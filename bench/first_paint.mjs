// bench/first_paint.mjs BASE_URL [RUNS] - dashboard first paint: opens the dashboard of a running
// profiled app RUNS times (default 5) as a user does, in a new tab of a browser that is already
// running (headless Chromium), each time in a new browser context (cold cache, no cookies), and
// prints the median time from navigation start to the first contentful paint and to the
// overview's first complete refresh (every panel filled with data); then the same tab reloaded
// (warm cache: the dashboard's files are revalidated by ETag, 304). For scale, the same browser's
// first contentful paint of a one-line HTML page (a data: URL, no network): the floor no page can
// go below on this machine. Uses playwright-core from tests/browser/node_modules and
// /usr/bin/chromium (CHROMIUM overrides). With BENCH_FIGURES set, the medians also go to that
// file as JSON lines (bench/render.py).
import {createRequire} from 'node:module';
import fs from 'node:fs';

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
const fcp = [], ready = [], load = [], warm = [], floor = [];
const browser = await chromium.launch({
  executablePath: CHROMIUM, headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync']});
// the browser's own first navigation is not the page's cost: one throw-away page first
{
  const ctx = await browser.newContext();
  await (await ctx.newPage()).goto('data:text/html,<p>warm-up</p>');
  await ctx.close();
}
const paintOf = (page) => page.waitForFunction(
  () => performance.getEntriesByName('first-contentful-paint').length, null, {timeout: 10000})
  .catch(() => {})
  .then(() => page.evaluate(() => {
    const p = performance.getEntriesByName('first-contentful-paint')[0];
    const nav = performance.getEntriesByType('navigation')[0];
    return {fcp: p ? p.startTime : null, load: nav ? nav.loadEventEnd : null,
      ready: window.__clrscope && window.__clrscope.firstRefreshAt || null};
  }));
// a new context per load: cold cache, as a first visit
async function fresh(fn) {
  const ctx = await browser.newContext({viewport: {width: 1440, height: 900}});
  try {
    return await fn(await ctx.newPage());
  } finally {
    await ctx.close();
  }
}
const waitRefresh = (page) => page.waitForFunction(
  () => window.__clrscope && window.__clrscope.refreshes > 0, null, {timeout: 30000});
for (let i = 0; i < runs; i++) {
  const [t, w] = await fresh(async (page) => {
    await page.goto(base, {waitUntil: 'load'});
    await waitRefresh(page);
    // the paint entry is recorded when the frame is presented, which a loaded machine can
    // report after the first refresh
    const cold = await paintOf(page);
    await page.reload({waitUntil: 'load'});
    await waitRefresh(page);
    return [cold, await paintOf(page)];
  });
  if (t.fcp != null) fcp.push(t.fcp);
  if (t.load != null) load.push(t.load);
  if (t.ready != null) ready.push(t.ready);
  if (w.fcp != null) warm.push(w.fcp);
  const b = await fresh(async (page) => {
    await page.goto('data:text/html,<!doctype html><title>floor</title><p>clrscope</p>',
      {waitUntil: 'load'});
    return (await paintOf(page)).fcp;
  });
  if (b != null) floor.push(b);
}
await browser.close();
if (!fcp.length || !load.length) {
  console.error(`first_paint: the dashboard reported no first contentful paint or load event in ` +
    `${runs} loads`);
  process.exit(1);
}
// the figures, one JSON line each, for bench/render.py (BENCH_FIGURES: set by bench/run.sh)
const emit = (name, value) => {
  if (process.env.BENCH_FIGURES && value != null) {
    fs.appendFileSync(process.env.BENCH_FIGURES, JSON.stringify(
      {section: 'first_paint', name, value: Math.round(value), unit: 'ms', n: runs}) + '\n');
  }
};
emit('cold', median(fcp));
emit('load', median(load));
if (ready.length) emit('ready', median(ready));
if (warm.length) emit('warm', median(warm));
if (floor.length) emit('floor', median(floor));
console.log(`dashboard in a new tab of a running browser, cold cache, median of ${runs} loads: ` +
  `first contentful paint ${median(fcp).toFixed(0)} ms, load event ${median(load).toFixed(0)} ms` +
  (ready.length ? `, overview filled with data ${median(ready).toFixed(0)} ms` : '') +
  (warm.length ? `; reloaded (warm cache): first contentful paint ${median(warm).toFixed(0)} ms` : '') +
  (floor.length ? `; a one-line HTML page in the same browser (the floor): first contentful ` +
    `paint ${median(floor).toFixed(0)} ms` : ''));
