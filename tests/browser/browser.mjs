// One headless Chromium for a test file (Debian's, through playwright-core): a fresh profile
// directory, one page, and the list of what went wrong on it (responses of 400 and above but the
// favicon's, uncaught page errors, and with `console` console errors), for a test to assert
// empty. close() ends the browser and removes the profile. browserForTests and openTab serve the
// tests against a real server.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {before, after} from 'node:test';
import {chromium} from 'playwright-core';

export async function openBrowser(prefix, {height = 768, console: consoleErrors = false} = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
    viewport: {width: 1366, height}});
  const page = context.pages()[0] || await context.newPage();
  const bad = [];
  page.on('response', (r) => {
    if (r.status() >= 400 && !/favicon/.test(r.url())) bad.push(r.status() + ' ' + r.url());
  });
  page.on('pageerror', (e) => bad.push('page error: ' + e.message));
  if (consoleErrors)
    page.on('console', (m) => { if (m.type() === 'error') bad.push('console: ' + m.text()); });
  return {
    page, bad,
    close: async () => {
      await context.close();
      fs.rmSync(dir, {recursive: true, force: true});
    }
  };
}

// openBrowser for a test file's tests: opened before them when BASE_URL is set, closed after.
// The returned object's `page` and `bad` are set once they start.
export function browserForTests(base, prefix, opts) {
  const b = {page: null, bad: []};
  before(async () => {
    if (!base) return;
    Object.assign(b, await openBrowser(prefix, opts));
  });
  after(async () => {
    if (b.close) await b.close();
  });
  return b;
}

// Opens the dashboard of `base` at `tab` and waits for its first refresh with the status known.
export async function openTab(b, base, tab, timeout = 30000) {
  const u = new URL(base);
  u.hash = 'tab=' + tab;
  await b.page.goto(u.toString());
  await b.page.waitForFunction((t) => window.__clrscope && window.__clrscope.tab === t &&
    (window.__clrscope.refreshes || 0) > 0 && window.__clrscope.status, tab, {timeout});
}
