// bench/soak_browser.mjs BASE_URL SECONDS - the dashboard left open in a real browser for the
// length of a soak (bench/soak.py): headless Chromium on BASE_URL, the page polling as it does
// for a user, moved to another tab every minute (the tabs in turn, the Overview between them)
// and reloaded every 10 minutes. At the end it prints one JSON line: the requests the page made,
// those that failed or answered 5xx (the first few of each), and the page's errors. Uses
// playwright-core from tests/browser/node_modules and /usr/bin/chromium (CHROMIUM overrides).
import {createRequire} from 'node:module';

const require = createRequire(new URL('../tests/browser/package.json', import.meta.url));
const {chromium} = require('playwright-core');
const base = process.argv[2];
const seconds = Number(process.argv[3] || 60);
if (!base) {
  console.error('usage: node bench/soak_browser.mjs BASE_URL SECONDS');
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--disable-background-timer-throttling', '--disable-renderer-backgrounding']});
const page = await (await browser.newContext()).newPage();
const out = {requests: 0, failed: 0, server_errors: 0, page_errors: 0, tab_visits: 0,
  reloads: 0, examples: []};
const note = (what) => { if (out.examples.length < 10) out.examples.push(what); };
page.on('request', () => { out.requests++; });
page.on('requestfailed', (r) => {
  // a poll cut short by the page's own navigation (a reload) is not the server's failure
  if ((r.failure()?.errorText || '').includes('ERR_ABORTED')) return;
  out.failed++;
  note(`failed ${r.url()}: ${r.failure()?.errorText}`);
});
page.on('response', (r) => {
  if (r.status() >= 500) {
    out.server_errors++;
    note(`${r.status()} ${r.url()}`);
  }
});
page.on('pageerror', (e) => { out.page_errors++; note(`page error: ${e.message}`); });
await page.goto(base, {waitUntil: 'load'});
const end = Date.now() + seconds * 1000;
let minute = 0;
while (Date.now() < end) {
  await page.waitForTimeout(Math.min(60000, Math.max(0, end - Date.now())));
  if (Date.now() >= end) break;
  minute++;
  if (minute % 10 === 0) {
    await page.reload({waitUntil: 'load'}).catch((e) => note(`reload: ${e.message}`));
    out.reloads++;
    continue;
  }
  // the tab bar's buttons, in turn, the Overview every other minute
  const tabs = await page.$$('#tabs a');
  if (!tabs.length) continue;
  const i = minute % 2 ? 0 : (minute / 2) % tabs.length;
  await tabs[i].click().then(() => { out.tab_visits++; }).catch(() => {});
}
await browser.close();
console.log(JSON.stringify(out));
