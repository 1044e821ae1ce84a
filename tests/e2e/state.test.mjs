// What the page keeps and where it gets profiles from: a reload restoring filters and
// search, share links to baselines and diffs made through the API, and working with the
// network off. Expected tables are pprof's (`go tool pprof -top`), not the page's own.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  startServer, launchBrowser, fixtures, requireFixtures, requireGo, pprofTop, pprofTable, pprofFileTable, pprofShown,
  expectTopTable, hoverText, openPage, loadFixtures, keptFiles, setFilter, until, screenshot,
} from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

test('a reload restores focus, ignore, hide and search: the inputs, the matched share and pprof\'s table', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  const { page, requests } = await openPage(browser, server.base);
  await loadFixtures(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('view-top').click();
  const filters = { focus: 'main\\.sortRecords', ignore: 'insertionSort', hide: 'runtime\\.' };
  for (const [testid, value] of Object.entries(filters)) await setFilter(page, testid, value);
  await page.getByTestId('search').fill('partition');
  const args = Object.entries(filters).map(([k, v]) => `-${k}=${v}`);
  const expected = pprofTable(pprofTop(['-nodecount=8', ...args], 'go/base/cpu.pb.gz'), 8);
  await expectTopTable(page, expected, `pprof -top ${args.join(' ')}`);
  // The search's share: samples under sort.partition_func (its cum, 1.33s) of those the
  // filters keep (1.51s, everything pprof shows with no node dropped): 88.08%.
  const partition = pprofTable(pprofTop(['-nodecount=8', ...args], 'go/base/cpu.pb.gz')).find((r) => r.name === 'sort.partition_func');
  const kept = pprofShown(pprofTop(['-nodecount=100000', '-nodefraction=0', ...args], 'go/base/cpu.pb.gz'));
  assert.deepEqual([partition.cum, kept], [1330000000, 1510000000]);
  const share = `matched ${((100 * partition.cum) / kept).toFixed(2)}%`;
  await page.getByTestId('view-flame').click();
  const matched = page.locator('[data-testid=search-matched][data-value]');
  await matched.waitFor();
  assert.equal(await matched.getAttribute('data-value'), String(partition.cum));
  assert.equal(await matched.textContent(), share);
  assert.equal(share, 'matched 88.08%');

  const hash = '#view=flame&sample=cpu&focus=main%5C.sortRecords&ignore=insertionSort&hide=runtime%5C.&search=partition&profile=cpu.pb.gz';
  await until('the address to follow the view', async () => ((await page.evaluate(() => location.hash)) === hash ? true : undefined));
  await keptFiles(page, 1);
  await page.reload();

  await matched.waitFor();
  assert.equal(await page.evaluate(() => location.hash), hash);
  for (const [testid, value] of Object.entries(filters)) assert.equal(await page.getByTestId(testid).inputValue(), value, testid);
  assert.equal(await page.getByTestId('search').inputValue(), 'partition');
  assert.equal(await matched.getAttribute('data-value'), String(partition.cum));
  assert.equal(await matched.textContent(), share);
  await page.getByTestId('view-top').click();
  await expectTopTable(page, expected, 'the same table after the reload');
  await screenshot(page, 'restored-filters');
  assert.deepEqual(requests.filter((u) => new URL(u).pathname.startsWith('/api/')), [], 'restoring needs no server');
  await page.close();
});

/** POSTs to the API; the parsed JSON answer, which must have the given status. */
async function api(path, init, status) {
  const response = await fetch(`${server.base}${path}`, init);
  const body = await response.json();
  assert.equal(response.status, status, `${path}: ${JSON.stringify(body)}`);
  return body;
}

const upload = (file, name, headers = {}) => api(`/api/v1/profiles?name=${encodeURIComponent(name)}`, {
  method: 'POST', headers: { 'content-type': 'application/octet-stream', ...headers }, body: readFileSync(join(fixtures, file)),
}, 201);

const saveBaseline = (session, label, headers = {}) => api('/api/v1/profiling/baselines', {
  method: 'POST', headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify({ label, sessionId: session.id, profileType: session.profileType }),
}, 201);

test('links: /#/b/{baseline} opens the baseline\'s profile and /#/diff/{base}/{compare} their diff, as pprof shows them', async (t) => {
  if (!requireFixtures(t)) return;
  const base = await upload('go/base/cpu.pb.gz', 'base-cpu.pb.gz');
  const later = await upload('go/compare/cpu.pb.gz', 'later-cpu.pb.gz');
  const baseline = await saveBaseline(base, 'release 2.0');
  assert.match(baseline.baselineId, /^base-/);

  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${server.base}/#/b/${baseline.baselineId}`);
  await page.getByTestId('profile-tab').waitFor();
  assert.deepEqual(await page.getByTestId('profile-tab').locator('.tab-name').allTextContents(), ['baseline release 2.0']);
  await page.getByTestId('view-top').click();
  await expectTopTable(page, pprofFileTable('go/base/cpu.pprof-top.txt', 10), 'the baseline is go/base/cpu.pb.gz');
  await page.close();

  const diff = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await diff.goto(`${server.base}/#/diff/${baseline.baselineId}/${later.id}`);
  await diff.getByTestId('diff-table').waitFor();
  assert.equal(await diff.getByTestId('diff-base').locator('option:checked').textContent(), 'baseline release 2.0');
  assert.equal(await diff.getByTestId('diff-compare').locator('option:checked').textContent(), 'later-cpu.pb.gz');
  assert.equal(await diff.getByTestId('overall-delta').textContent(), '-2.54%', '(6.90s − 7.08s) / 7.08s');
  // Each function's change is pprof -diff_base's (findMatch +0.65s flat, +0.75s cum, …).
  const changes = pprofFileTable('go/compare/cpu.diff-vs-base.pprof-top.txt', 5);
  for (const r of changes) {
    const row = diff.getByTestId('diff-row').filter({ has: diff.locator(`[data-col=name][data-value="${r.name}"]`) });
    assert.deepEqual([Number(await row.locator('[data-col=flat]').getAttribute('data-value')),
      Number(await row.locator('[data-col=cum]').getAttribute('data-value'))], [r.flat, r.cum], r.name);
  }
  await screenshot(diff, 'diff-link');
  await diff.close();
});

test('links: ?tenant= opens a baseline of another tenant; without it the link names what is missing', async (t) => {
  if (!requireFixtures(t)) return;
  const tenant = { 'X-Tenant-ID': 'acme' };
  const session = await upload('go/compare/cpu.pb.gz', 'acme-cpu.pb.gz', tenant);
  const baseline = await saveBaseline(session, 'acme 1', tenant);
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${server.base}/#/b/${baseline.baselineId}?tenant=acme`);
  await page.getByTestId('view-top').click();
  await expectTopTable(page, pprofFileTable('go/compare/cpu.pprof-top.txt', 10), 'acme\'s baseline is go/compare/cpu.pb.gz');
  await page.close();

  const other = await browser.newPage();
  await other.goto(`${server.base}/#/b/${baseline.baselineId}`);
  const error = other.getByTestId('error');
  await error.waitFor();
  // The default tenant has no such baseline: the API's 404 message, prefixed with the id.
  assert.match(await error.textContent(), new RegExp(`^${baseline.baselineId}: unknown baseline id '${baseline.baselineId}'`));
  assert.equal(await other.getByTestId('profile-tab').count(), 0);
  await other.close();
});

test('offline: with the network off after the page loaded, a file opens and is analysed', async (t) => {
  if (!requireFixtures(t)) return;
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await page.goto(server.base);
  await page.locator('body[data-worker-ready=true]').waitFor();
  await context.setOffline(true);
  assert.equal(await page.evaluate(() => navigator.onLine), false);
  assert.equal(await page.evaluate(() => fetch('/healthz').then(() => 'reached', () => 'offline')), 'offline', 'the server is out of reach');
  const failed = [];
  page.on('requestfailed', (r) => failed.push(r.url()));

  await loadFixtures(page, 'go/base/cpu.pb.gz');
  const canvas = page.getByTestId('flamegraph');
  await canvas.waitFor();
  await page.waitForFunction(() => document.querySelector('[data-testid=flamegraph]').width > 0);
  const { width, height } = await canvas.boundingBox();
  const root = await hoverText(canvas, width / 2, height - 9);
  assert.equal(root.name, 'root');
  assert.match(root.text, /total 7\.08s \(100%\)/, 'pprof: Total samples = 7.08s');
  await page.getByTestId('view-top').click();
  await expectTopTable(page, pprofFileTable('go/base/cpu.pprof-top.txt', 20), 'pprof -top, offline');
  await page.getByTestId('view-diff').click();
  await loadFixtures(page, 'go/compare/cpu.pb.gz');
  await page.getByTestId('diff-table').waitFor();
  assert.equal(await page.getByTestId('overall-delta').textContent(), '-2.54%');
  assert.deepEqual(failed, [], 'nothing was fetched');
  await screenshot(page, 'offline');
  await context.close();
});
