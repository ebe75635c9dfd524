// The dashboard with a token (CLRSCOPE_TOKEN). Opened as /?token=T, the page takes the token
// from its address once (and drops it from the address bar), sends it as `Authorization: Bearer`
// with every request and never as a cookie: cookies are not scoped by port, so one would reach
// every other server on the host. A reload keeps working (the tab's sessionStorage), a download
// link works (fetched with the token), and the CSP holds with no console error.
//
//   node --test token.test.mjs                                  (starts mock_server.py --token)
//   BASE_URL='http://127.0.0.1:PORT/?token=T' EXPECT_PID=PID node --test token.test.mjs
import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import {fileURLToPath} from 'node:url';
import {chromium} from 'playwright-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TIMEOUT = 30000;
let base = process.env.BASE_URL || '';
let pid = process.env.EXPECT_PID || '';
let mock = null;
let other = null;
let context = null;
let dir = null;
const otherCookies = [];

function startMock(token) {
  return new Promise((resolve, reject) => {
    const proc = spawn('python3', [path.join(HERE, 'mock_server.py'), '--port', '0', '--token', token],
      {stdio: ['ignore', 'pipe', 'inherit']});
    let buf = '';
    const timer = setTimeout(() => reject(new Error('mock server did not start')), 15000);
    proc.on('error', reject);
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

// Another server on the same host, another port: what cookies does the browser send it?
function startOther() {
  return new Promise((resolve) => {
    const srv = http.createServer((req, res) => {
      otherCookies.push(req.headers.cookie || '');
      res.setHeader('Content-Type', 'text/html');
      res.end('<!DOCTYPE html><title>another server</title>');
    });
    srv.listen(0, '127.0.0.1', () => resolve(srv));
  });
}

before(async () => {
  if (!base) {
    const token = crypto.randomBytes(16).toString('hex');
    mock = await startMock(token);
    base = mock.url + '?token=' + token;
    pid = mock.pid;
  }
  other = await startOther();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clrscope-token-'));
  context = await chromium.launchPersistentContext(dir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
    viewport: {width: 1366, height: 768}, acceptDownloads: true});
});

after(async () => {
  if (context) await context.close();
  if (dir) fs.rmSync(dir, {recursive: true, force: true});
  if (other) other.close();
  if (mock) mock.proc.kill();
});

async function showsPid(page) {
  await page.waitForFunction((p) => {
    const el = document.getElementById('h-pid');
    return el && el.textContent.trim() === String(p);
  }, pid, {timeout: TIMEOUT});
}

test('the token travels as a header, never as a cookie', async () => {
  const token = new URL(base).searchParams.get('token');
  assert.ok(token, 'BASE_URL must carry ?token=');
  assert.ok(pid, 'EXPECT_PID must be set with BASE_URL');
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const asked = [];
  const errors = [];
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (/^\/(api|debug)\//.test(u.pathname)) asked.push([u.pathname, r.headers().authorization || '']);
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });

  const u = new URL(base);
  u.hash = 'tab=cpu';
  await page.goto(u.toString());
  await showsPid(page);
  await page.waitForFunction(() => window.__clrscope.framesDrawn > 0, null, {timeout: TIMEOUT});
  assert.equal(new URL(page.url()).searchParams.get('token'), null, 'the token left the address bar');
  assert.deepEqual(await context.cookies(), [], 'no cookie was set');
  assert.ok(asked.length >= 2, JSON.stringify(asked));
  for (const [p, auth] of asked) assert.equal(auth, 'Bearer ' + token, p);

  // another server on the host gets no token
  const page2 = await context.newPage();
  await page2.goto(`http://127.0.0.1:${other.address().port}/`);
  await page2.close();
  assert.ok(otherCookies.length >= 1);
  for (const c of otherCookies) assert.ok(!c.includes('clrscope_token'), c);

  // a reload keeps the token (the address has none now)
  await page.reload();
  await showsPid(page);
  await page.waitForFunction(() => window.__clrscope.framesDrawn > 0, null, {timeout: TIMEOUT});

  // a download link: fetched with the token, saved by the browser
  const link = page.locator('#downloads a[download]').first();
  await link.waitFor();
  const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
  assert.match(download.suggestedFilename(), /\.pb\.gz$/);
  const bytes = fs.readFileSync(await download.path());
  assert.ok(bytes.length > 2 && bytes[0] === 0x1f && bytes[1] === 0x8b, 'a gzip file');
  for (const [p, auth] of asked) assert.equal(auth, 'Bearer ' + token, p);

  const hook = await page.evaluate(() => ({lastError: window.__clrscope.lastError,
    csp: window.__clrscope.cspViolations}));
  assert.deepEqual(hook.csp, [], 'CSP violations');
  assert.equal(hook.lastError, null);
  assert.deepEqual(errors, []);
  assert.deepEqual(await context.cookies(), []);
});
