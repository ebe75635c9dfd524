// Headless-browser checks of the clrscope dashboard.
//
//   cd tests/browser && npm ci && node --test dashboard.test.mjs
//
// Environment:
//   BASE_URL        dashboard URL (e.g. http://127.0.0.1:6060/ or …/?token=T). Unset: the test
//                   starts tests/browser/mock_server.py on a free port and uses that.
//   EXPECT_PID      pid the header must show (required with BASE_URL; the mock's otherwise).
//   SCREENSHOT_DIR  where PNGs are written (default: $TMPDIR/clrscope-screenshots).
//   CHROMIUM        browser binary (default /usr/bin/chromium, Debian's package).
//   TEST_GCDUMP=1   also press "Take heap snapshot" against a real process (always on the mock).
//
// Drives Debian's Chromium through playwright-core (no browser download). The page exposes
// window.__clrscope = {framesDrawn, lastError, cspViolations, pid, tab, refreshes, …} for these checks.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {fileURLToPath} from 'node:url';
import {chromium} from 'playwright-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SCREENSHOT_DIR = process.env.SCREENSHOT_DIR || path.join(os.tmpdir(), 'clrscope-screenshots');
const TIMEOUT = 30000;

let baseUrl = process.env.BASE_URL || '';
let expectPid = process.env.EXPECT_PID || '';
let mock = null;
let context = null;
let page = null;
let userDataDir = null;
const consoleErrors = [];
const notFound = [];
const pageErrors = [];

function startMock() {
  return new Promise((resolve, reject) => {
    const proc = spawn('python3', [path.join(HERE, 'mock_server.py'), '--port', '0'],
      {stdio: ['ignore', 'pipe', 'inherit']});
    let buf = '';
    const timer = setTimeout(() => reject(new Error('mock server did not start')), 15000);
    proc.on('error', reject);
    proc.on('exit', (code) => reject(new Error('mock server exited with ' + code)));
    proc.stdout.on('data', (chunk) => {
      buf += chunk;
      const m = /mock: (http\S+) \(pid (\d+)\)/.exec(buf);
      if (m) {
        clearTimeout(timer);
        resolve({proc, url: m[1], pid: m[2]});
      }
    });
  });
}

function url(hash) {
  const u = new URL(baseUrl);
  u.hash = hash || '';
  return u.toString();
}

async function shot(name) {
  fs.mkdirSync(SCREENSHOT_DIR, {recursive: true});
  const file = path.join(SCREENSHOT_DIR, name + '.png');
  await page.screenshot({path: file, fullPage: true});
  return file;
}

// Waits until the open tab has finished at least one more refresh than `after`.
async function waitRefreshed(tab, after = 0) {
  await page.waitForFunction(([t, n]) => {
    const h = window.__clrscope;
    return h && h.tab === t && (h.refreshes || 0) > n;
  }, [tab, after], {timeout: TIMEOUT});
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

async function openTab(id, label) {
  const before = await page.evaluate(() => window.__clrscope.refreshes || 0);
  await page.locator('#tabs a', {hasText: label}).first().click();
  await waitRefreshed(id, before);
}

before(async () => {
  if (!baseUrl) {
    mock = await startMock();
    baseUrl = mock.url;
    expectPid = mock.pid;
  }
  assert.ok(expectPid, 'EXPECT_PID must be set when BASE_URL is');
  assert.ok(fs.existsSync(CHROMIUM), CHROMIUM + ' is missing: apt-get install -y chromium');
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clrscope-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: {width: 1440, height: 900},
    colorScheme: 'light'
  });
  page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const text = msg.text();
    // a backend still being built answers 404 or 501 for some endpoints; the page says "not available"
    if (/Failed to load resource: the server responded with a status of (404|501)\b/.test(text)) notFound.push(text);
    else consoleErrors.push(text);
  });
  page.on('pageerror', (err) => pageErrors.push(String(err && err.stack || err)));
});

after(async () => {
  if (context) await context.close();
  if (userDataDir) fs.rmSync(userDataDir, {recursive: true, force: true});
  if (mock) mock.proc.kill();
});

test('header shows the profiled process and its pid', async () => {
  await page.goto(url(''), {waitUntil: 'load'});
  await page.waitForFunction((pid) => {
    const el = document.getElementById('h-pid');
    return el && el.textContent.trim() === String(pid);
  }, expectPid, {timeout: TIMEOUT});
  const runtime = (await page.textContent('#h-runtime')).trim();
  assert.match(runtime, /^\d+\.\d+/, 'runtime version in the header: ' + runtime);
  assert.notEqual((await page.textContent('#h-uptime')).trim(), '–');
  await waitRefreshed('overview');
  await shot('01-overview');
});

test('the footer says what clrscope dropped, as the status does', async () => {
  const dropped = await page.evaluate(() => window.__clrscope.status.dropped);
  const footer = (await page.textContent('#footer')).trim();
  const want = [['events', 'events'], ['stack_nodes', 'stack nodes'], ['entries', 'profile entries'],
    ['names', 'names']].filter(([k]) => dropped[k] > 0).map(([k, label]) => dropped[k].toLocaleString('en-US') + ' ' + label);
  if (want.length) assert.ok(footer.includes('dropped: ' + want.join(', ')), footer + ' / ' + JSON.stringify(dropped));
  else assert.ok(!footer.includes('dropped'), footer);
  if (!process.env.BASE_URL) assert.ok(footer.includes('dropped: 12 events, 3 names'), footer); // the mock's
});

test('CPU flame graph draws, shows a tooltip and searches', async (t) => {
  await openTab('cpu', 'CPU');
  await page.waitForFunction(() => window.__clrscope.framesDrawn > 0, null, {timeout: TIMEOUT});
  const canvas = page.locator('main canvas.main');
  const painted = await canvas.evaluate((c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return n;
  });
  assert.ok(painted > 1000, 'the canvas has drawn pixels: ' + painted);
  const first = await page.evaluate(() => window.__clrscope.lastRenderMs);
  // redraw twice more (icicle and back) to time a warmed-up render
  await page.click('main .flame-toolbar .seg button:nth-child(2)');
  await page.click('main .flame-toolbar .seg button:nth-child(1)');
  const info = await page.evaluate(() => ({
    nodes: window.__clrscope.flameNodes, drawn: window.__clrscope.framesDrawn,
    ms: window.__clrscope.lastRenderMs, flame: window.__clrscope.flame
  }));
  t.diagnostic(`flame graph: ${info.nodes} frames, ${info.drawn} drawn; first render ${first} ms, redraw ${info.ms} ms`);
  assert.ok(info.ms < 1000, 'a redraw takes under a second (took ' + info.ms + ' ms)');
  assert.equal(info.flame.icicle, false);
  await shot('02-cpu');

  // "≈ N cores busy" against the process's own CPU clock: a real app younger than the 60-s
  // window must have its CPU divided by the seconds it has run, not by the window
  const procStat = baseUrl && process.env.BASE_URL ? `/proc/${expectPid}/stat` : '';
  if (procStat && fs.existsSync(procStat)) {
    const per = await page.evaluate(() => window.__clrscope.perSecond);
    const f = fs.readFileSync(procStat, 'utf8').split(') ')[1].split(' ');
    const ticks = 100; // USER_HZ on Linux
    const cpu = (Number(f[11]) + Number(f[12])) / ticks;
    const age = Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]) - Number(f[19]) / ticks;
    const cores = cpu / age;
    t.diagnostic(`cores busy: dashboard ${per.value.toFixed(2)} over ${per.span.toFixed(1)} s, ` +
      `process ${cores.toFixed(2)} over its ${age.toFixed(1)} s`);
    assert.equal(per.type, 'cpu');
    assert.ok(per.span <= age + 1, `the span (${per.span} s) is no longer than the process has run (${age} s)`);
    assert.ok(per.value > 0.5 * cores && per.value < 1.5 * cores,
      `dashboard ${per.value} cores busy, the process's own clock ${cores}`);
  }

  // hover a frame one row above the root (flame orientation: the root row is at the bottom)
  const box = await canvas.boundingBox();
  const rowH = info.flame.rowHeight;
  const y = info.flame.icicle ? rowH * 1.5 : box.height - rowH * 1.5;
  let title = '';
  let hitX = 0;
  for (const fx of [0.5, 0.3, 0.7, 0.1, 0.9, 0.02]) {
    hitX = box.width * fx;
    await canvas.hover({position: {x: hitX, y}});
    const tip = page.locator('#tooltip:not(.hidden)');
    if (await tip.count()) {
      title = (await tip.locator('.tt-title').textContent()) || '';
      if (title) break;
    }
  }
  assert.ok(title.length > 0, 'a tooltip with the frame name appears on hover');
  const tipText = await page.textContent('#tooltip');
  assert.match(tipText, /%/, 'the tooltip shows shares: ' + tipText);
  assert.match(tipText, /self/);
  await shot('03-cpu-hover');

  // search for the longest word of the hovered frame's method name: surely a substring of a frame
  const words = title.split('.').pop().match(/\w+/g) || ['a'];
  const term = words.sort((a, b) => b.length - a.length)[0];
  await page.fill('main .flame-toolbar .search', term);
  await page.waitForFunction(() => /matched/.test(document.querySelector('main .flame-toolbar .matched').textContent),
    null, {timeout: TIMEOUT});
  const matched = await page.textContent('main .flame-toolbar .matched');
  assert.match(matched, /matched \d+(\.\d+)?% of total/);
  await page.waitForFunction((q) => new URLSearchParams(location.hash.slice(1)).get('q') === q, term);
  await shot('04-cpu-search');

  // the top table sorts by a header click
  await page.locator('main .flame-top th', {hasText: /^Total/}).first().click();
  const totals = await page.$$eval('main .flame-top tbody tr', (rows) => rows.slice(0, 5).map((r) => r.children[3].textContent));
  assert.ok(totals.length > 0, 'the top-functions table has rows');

  // click to zoom: the zoom path lands in the URL and survives a reload
  await page.fill('main .flame-toolbar .search', '');
  await canvas.click({position: {x: hitX, y}});
  await page.waitForFunction(() => /zoom=/.test(location.hash), null, {timeout: TIMEOUT});
  assert.ok(await page.isVisible('main .crumbs'), 'breadcrumb shown when zoomed');
  const zoom = await page.evaluate(() => window.__clrscope.flame.zoom);
  assert.ok(zoom.length >= 1);
  await shot('05-cpu-zoom');
  await page.reload({waitUntil: 'load'});
  await page.waitForFunction((z) => {
    const f = window.__clrscope.flame;
    return window.__clrscope.framesDrawn > 0 && f && f.zoom.join(';') === z;
  }, zoom.join(';'), {timeout: TIMEOUT});
  await page.click('main .flame-toolbar .btn');  // reset zoom
  await page.waitForFunction(() => !/zoom=/.test(location.hash));
});

test('Fold native folds the runtime frames into their managed callers', async () => {
  await openTab('cpu', 'CPU');
  // the colours' key under the graph, in the theme's shades
  const key = await page.locator('main .flame-key .key-item').allTextContents();
  assert.deepEqual(key, ['your code', '.NET', 'native', 'JIT', 'GC']);
  const swatch = await page.locator('main .flame-key .swatch').nth(3).evaluate((e) => getComputedStyle(e).backgroundColor);
  assert.match(swatch, /^rgb/, 'the JIT swatch is coloured: ' + swatch);
  await openTab('cpu', 'CPU');
  const reply = page.waitForResponse((r) => /api\/v1\/flamegraph\?.*native=fold/.test(r.url()),
    {timeout: TIMEOUT});
  await page.click('main button.fold:not(.group)');
  const r = await reply;
  assert.match(page.url(), /native=fold/);
  assert.equal(await page.getAttribute('main button.fold:not(.group)', 'aria-pressed'), 'true');
  if (process.env.BASE_URL) {  // the real profiler: no native frame left under a managed one
    const d = await r.json();
    assert.equal(d.native, 'fold');
    const stack = [[d.root, false]];
    while (stack.length) {
      const [node, anchored] = stack.pop();
      const native = node.name.startsWith('[native ');
      assert.ok(!(native && anchored), node.name + ' under a managed frame');
      for (const c of node.children) stack.push([c, anchored || (!native && node !== d.root)]);
    }
  }
  await page.click('main button.fold:not(.group)');
  await page.waitForFunction(() => !/native=fold/.test(location.hash), null, {timeout: TIMEOUT});
});

test('Group native names the runtime frames by group', async () => {
  await openTab('cpu', 'CPU');
  const reply = page.waitForResponse((r) => /api\/v1\/flamegraph\?.*native=group/.test(r.url()),
    {timeout: TIMEOUT});
  await page.click('main button.group');
  const r = await reply;
  assert.match(page.url(), /native=group/);
  assert.equal(await page.getAttribute('main button.group', 'aria-pressed'), 'true');
  assert.equal(await page.getAttribute('main button.fold:not(.group)', 'aria-pressed'), 'false');
  if (process.env.BASE_URL) {  // the real profiler: the runtime's frames under their group's name
    const d = await r.json();
    assert.equal(d.native, 'group');
    const names = [];
    const stack = [d.root];
    while (stack.length) {
      const node = stack.pop();
      names.push(node.name);
      for (const c of node.children) stack.push(c);
    }
    assert.ok(names.includes('[native runtime]'), 'no [native runtime] node');
    assert.ok(!names.some((n) => n.startsWith('[native libcoreclr.so')), 'libcoreclr not grouped');
  }
  await page.click('main button.group');
  await page.waitForFunction(() => !/native=group/.test(location.hash), null, {timeout: TIMEOUT});
});

test('window selector and pprof download link follow the state', async () => {
  const before = await page.evaluate(() => window.__clrscope.refreshes || 0);
  await page.click('#window button[data-seconds="300"]');
  await waitRefreshed('cpu', before);
  assert.match(page.url(), /seconds=300/);
  const href = await page.getAttribute('#downloads a', 'href');
  assert.match(href, /debug\/pprof\/profile\?seconds=300/);
  // a window of one's own: typed, refused with the reason when it is not one, taken on Enter
  await page.click('#window-custom');
  await page.fill('#window-input', 'soon');
  await page.press('#window-input', 'Enter');
  assert.ok(await page.evaluate(() => document.getElementById('window-input').classList.contains('bad')));
  assert.match(await page.getAttribute('#window-input', 'title'), /90s, 45m, 3h/);
  const before2 = await page.evaluate(() => window.__clrscope.refreshes || 0);
  await page.fill('#window-input', '2m');
  await page.press('#window-input', 'Enter');
  await waitRefreshed('cpu', before2);
  assert.match(page.url(), /seconds=120/);
  assert.equal((await page.textContent('#window-custom')).trim(), '2 min');
  assert.match(await page.getAttribute('#window-custom', 'class'), /\bon\b/);
  assert.match(await page.getAttribute('#downloads a', 'href'), /debug\/pprof\/profile\?seconds=120/);
  await page.click('#window button[data-seconds="60"]');
  assert.equal((await page.textContent('#window-custom')).trim(), '…');
  await page.click('#pause');
  assert.equal(await page.evaluate(() => window.__clrscope.paused), true);
  await page.click('#pause');
});

test('every tab renders', async () => {
  const tabs = [['wall', 'Wall'], ['alloc', 'Allocations'], ['live', 'Live objects'], ['gc', 'GC'],
    ['exceptions', 'Exceptions'], ['locks', 'Locks'], ['heap', 'Heap snapshots'], ['threads', 'Threads'],
    ['overview', 'Overview']];
  let n = 6;
  for (const [id, label] of tabs) {
    await openTab(id, label);
    const text = await page.textContent('main');
    assert.ok(text.trim().length > 0, id + ' tab shows something');
    await shot(String(n++).padStart(2, '0') + '-' + id);
  }
});

test('a mark shows on the GC charts', async () => {
  const st = await page.evaluate(async () => (await fetch('api/v1/marks', {method: 'POST',
    headers: {'Content-Type': 'application/json'}, body: JSON.stringify({label: 'from the test', t: -3})})).status);
  assert.equal(st, 201);
  await page.evaluate(() => { window.__clrscope.marksDrawn = 0; });
  await openTab('gc', 'GC');
  await page.waitForFunction(() => window.__clrscope.marksDrawn >= 1, null, {timeout: 15000});
});

test('locks: the table says where threads waited and who held the lock; a row filters', async (t) => {
  await openTab('locks', 'Locks');
  const rows = page.locator('main tbody tr.click');
  try {
    await rows.first().waitFor({timeout: 10000});
  } catch (e) {
    t.skip('no contended lock reported');
    return;
  }
  const head = await page.textContent('main thead');
  assert.match(head, /Waited in/);
  assert.match(head, /Held by/);
  const cells = rows.first().locator('td');
  const name = (await cells.nth(0).textContent()).trim();
  assert.match(name, /^lock 0x/);
  assert.ok((await cells.nth(1).textContent()).trim().length > 0, 'a wait site');
  await rows.first().click();
  await page.waitForFunction(() => /filter=/.test(location.hash));
  assert.equal(new URLSearchParams(new URL(page.url()).hash.slice(1)).get('filter'), name);
  await page.waitForSelector('main .filterchip');
  await rows.first().click(); // again: the filter goes
  await page.waitForFunction(() => !/filter=/.test(location.hash));
});

test('threads: a dump groups the threads by stack; the filter and the button work', async () => {
  await openTab('threads', 'Threads');
  await page.waitForFunction(() => window.__clrscope.threadDump && window.__clrscope.threadDump.groups > 0,
    null, {timeout: TIMEOUT});
  const first = await page.evaluate(() => window.__clrscope.threadDump);
  assert.ok(first.threads >= first.groups, 'threads ' + first.threads + ', groups ' + first.groups);
  const shown = await page.locator('main .tgroup').count();
  assert.equal(shown, first.groups, 'one box per distinct stack');
  const text = await page.textContent('main .tgroups');
  assert.match(text, /System\.Threading\.Thread\.StartCallback/, 'stacks are listed');
  if (mock) {
    assert.equal(first.deadlocks, 1);
    assert.equal(first.starvation, true);
    assert.match(await page.textContent('main .warnbox'), /starvation is likely.*MyApp\.Orders\.Cache\.Get \(2\)/s);
    assert.match(await page.textContent('main .deadlock'), /sync-a.*held by 302 "sync-b"/s);
  }
  // the filter keeps the boxes whose frames or thread names match
  await page.fill('main input[aria-label="filter threads"]', 'StartCallback');
  assert.equal(await page.locator('main .tgroup').count(), await page.evaluate(() =>
    Array.from(document.querySelectorAll('main .tgroup')).length));
  await page.fill('main input[aria-label="filter threads"]', 'no-such-frame-anywhere');
  assert.equal(await page.locator('main .tgroup').count(), 0);
  await page.fill('main input[aria-label="filter threads"]', '');
  await shot('14c-threads');
  // a new dump on the button (a dump is reused for 0.5 s)
  await page.waitForTimeout(700);
  await page.click('main .btn.primary');
  await page.waitForFunction((seq) => window.__clrscope.threadDump.seq !== seq, first.seq, {timeout: TIMEOUT});
  const link = await page.getAttribute('#downloads a', 'href');
  assert.match(link, /debug\/pprof\/threads$/);
});

// Hovers the open tab's flame graph one row above the root until a frame's tooltip shows;
// returns its text ('' when none did).
async function hoverFrameTooltip() {
  const canvas = page.locator('main canvas.main').first();
  const flame = await page.evaluate(() => window.__clrscope.flame);
  const box = await canvas.boundingBox();
  const y = flame.icicle ? flame.rowHeight * 1.5 : box.height - flame.rowHeight * 1.5;
  for (const fx of [0.5, 0.3, 0.7, 0.1, 0.9, 0.02]) {
    await canvas.hover({position: {x: box.width * fx, y}});
    const tip = page.locator('#tooltip:not(.hidden)');
    if (await tip.count() && ((await tip.locator('.tt-title').textContent()) || '')) {
      return await page.textContent('#tooltip');
    }
  }
  return '';
}

test('allocations: clicking a type filters the flame graph', async (t) => {
  await openTab('alloc', 'Allocations');
  const rows = page.locator('main tbody tr.click');
  if (!(await rows.count())) {
    t.skip('no allocation types reported');
    return;
  }
  // the estimates with their 95% intervals: the table's column, each frame's tooltip
  const ci = (await rows.first().locator('td:nth-child(4)').textContent()).trim();
  assert.match(ci, /^±[\d.]+%$/, 'the first type\'s 95% interval: ' + ci);
  await page.waitForFunction(() => window.__clrscope.framesDrawn > 0, null, {timeout: TIMEOUT});
  const tip = await hoverFrameTooltip();
  assert.match(tip, /95% interval.*±[\d.]+%.*samples?\)/, 'the frame\'s interval: ' + tip);
  if (mock) { // the mock's governor had the events on a third of the window
    const sub = await page.textContent('main');
    assert.match(sub, /Allocations sampled 34\.0% of this window/, sub.slice(0, 600));
    assert.match(sub, /allocations sampled 34\.0% of this window/, sub.slice(0, 600));
  }
  await shot('14a-alloc-interval');
  const type = (await rows.first().locator('td').first().textContent()).trim();
  await rows.first().click();
  await page.waitForFunction(() => /filter=/.test(location.hash));
  const filter = new URLSearchParams(new URL(page.url()).hash.slice(1)).get('filter');
  assert.equal(filter, type);
  assert.ok(await page.isVisible('main .filterchip'));
  await shot('14-alloc-filtered');
});

test('runtime counters on the overview and the allocation self-check', async () => {
  await openTab('overview', 'Overview');
  await page.waitForFunction(() => Array.from(document.querySelectorAll('main .counters .n'))
    .some((el) => el.textContent.trim() === 'alloc-rate'), null, {timeout: TIMEOUT});
  const rate = await page.evaluate(() => {
    const el = Array.from(document.querySelectorAll('main .counters .n')).find((x) => x.textContent.trim() === 'alloc-rate');
    return el.parentElement.querySelector('.v').textContent;
  });
  assert.match(rate, /B\/s$/, 'alloc-rate shown as bytes per second: ' + rate);
  // the runtime reports working-set in MB (10^6 bytes): shown in the KiB/MiB of every other panel
  const ws = await page.evaluate(() => {
    const el = Array.from(document.querySelectorAll('main .counters .n')).find((x) => x.textContent.trim() === 'working-set');
    return el ? el.parentElement.querySelector('.v').textContent : 'missing';
  });
  assert.match(ws, /^[\d.,]+ (KiB|MiB|GiB)$/, 'working-set in the dashboard\'s units: ' + ws);
  // beside each value its series over the window: a sparkline drawn, the range in the title
  await page.waitForFunction(() => {
    const el = Array.from(document.querySelectorAll('main .counters .n')).find((x) => x.textContent.trim() === 'working-set');
    const c = el && el.parentElement.querySelector('canvas.cspark');
    if (!c || !c.width || !c.height) return false;
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    for (let i = 3; i < d.length; i += 4) if (d[i]) return true;
    return false;
  }, null, {timeout: TIMEOUT});
  const range = await page.evaluate(() => {
    const el = Array.from(document.querySelectorAll('main .counters .n')).find((x) => x.textContent.trim() === 'working-set');
    return el.parentElement.title;
  });
  assert.match(range, /over .*: [\d.,]+ (KiB|MiB|GiB) to [\d.,]+ (KiB|MiB|GiB)$/, 'the series\' range: ' + range);
  await openTab('alloc', 'Allocations');
  await page.waitForFunction(() => {
    const el = document.querySelector('main .selfcheck');
    return el && /of the exact total/.test(el.textContent);
  }, null, {timeout: TIMEOUT});
  const text = await page.textContent('main .selfcheck');
  const pct = parseFloat((text.match(/estimate is ([\d.]+)%/) || [])[1]);
  assert.ok(pct > 70 && pct < 130, 'the estimate is near the exact total: ' + text);
  await shot('14b-alloc-selfcheck');
});

test('heap snapshot: take one and follow it to the end', async (t) => {
  if (!mock && process.env.TEST_GCDUMP !== '1') {
    t.skip('set TEST_GCDUMP=1 to take a heap snapshot of a real process');
    return;
  }
  await openTab('heap', 'Heap snapshots');
  await page.click('main .btn.primary');
  await page.waitForFunction(() => /snap=/.test(location.hash), null, {timeout: TIMEOUT});
  await page.waitForSelector('main .badge.running, main .badge.done, main .badge.failed');
  await page.waitForSelector('main .stats .stat, main .warnbox', {timeout: 120000});
  await page.waitForFunction(() => !document.querySelector('main progress'), null, {timeout: 120000});
  const failed = await page.locator('main .warnbox', {hasText: 'failed'}).count();
  if (!failed) {
    await page.locator('main .panel tbody tr.click').first().click();
    await page.waitForSelector('main .paths .path, main .paths .note, main .paths .unavailable');
  }
  await shot('15-heap-snapshot');
  if (failed) return;
  // a second one: the page opens the newest, and compares the older (baseline) with the newer
  // (the API lists snapshots newest first: read the other way round, a growing type would show
  // as shrinking)
  const first = (location => location.match(/snap=(\d+)/)[1])(await page.evaluate(() => location.hash));
  await page.waitForFunction(() => !document.querySelector('main .btn.primary').disabled, null, {timeout: TIMEOUT});
  await page.click('main .btn.primary');
  await page.waitForFunction((f) => (location.hash.match(/snap=(\d+)/) || [])[1] !== f, first, {timeout: TIMEOUT});
  await page.waitForFunction(() => document.querySelectorAll('main .badge.done').length >= 2, null, {timeout: 120000});
  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll('main .badge.done').length >= 2, null, {timeout: TIMEOUT});
  const shown = await page.evaluate(() => (location.hash.match(/snap=(\d+)/) || [])[1]);
  const base = await page.$eval('select[aria-label="baseline snapshot"]', (e) => e.value);
  const later = await page.$eval('select[aria-label="later snapshot"]', (e) => e.value);
  assert.ok(Number(shown) > Number(first), 'the newest snapshot is shown: ' + shown + ' after ' + first);
  assert.equal(base, first, 'baseline: the older snapshot');
  assert.equal(later, shown, 'compared with: the newer snapshot');
});

test('dark theme', async () => {
  await page.emulateMedia({colorScheme: 'dark'});
  await openTab('cpu', 'CPU');
  await page.waitForFunction(() => window.__clrscope.framesDrawn > 0);
  await shot('16-cpu-dark');
  await openTab('gc', 'GC');
  await shot('17-gc-dark');
  await openTab('overview', 'Overview');
  await shot('18-overview-dark');
  await page.emulateMedia({colorScheme: 'light'});
});

test('no console errors, uncaught exceptions or CSP violations', async (t) => {
  const hook = await page.evaluate(() => ({lastError: window.__clrscope.lastError, csp: window.__clrscope.cspViolations}));
  if (notFound.length) t.diagnostic(notFound.length + ' requests answered 404/501 (endpoints not served yet)');
  assert.deepEqual(pageErrors, [], 'uncaught exceptions');
  assert.deepEqual(consoleErrors.filter((e) => /Content Security Policy|Refused to/.test(e)), [], 'CSP violations in the console');
  assert.deepEqual(hook.csp, [], 'securitypolicyviolation events');
  assert.deepEqual(consoleErrors, [], 'console errors');
  assert.equal(hook.lastError, null, 'window.__clrscope.lastError');
  if (mock) assert.deepEqual(notFound, [], 'the mock serves every endpoint');
  t.diagnostic('screenshots in ' + SCREENSHOT_DIR);
});
