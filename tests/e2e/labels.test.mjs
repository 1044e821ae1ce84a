// The labels view against `go tool pprof -tags`, and its focus, ignore and group-by
// actions against `go tool pprof -tagfocus/-tagignore/-tagroot`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import {
  startServer, launchBrowser, fixtures, requireFixtures, requireGo, goBinary, pprofTop, pprofTable, expectTopTable,
  openPage, loadFixtures, until,
} from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

const FILE = 'go/base/cpu.pb.gz';

/** `go tool pprof -tags`: key → [{ value, share }] in pprof's order. */
function pprofTags(file) {
  const text = execFileSync(goBinary, ['tool', 'pprof', '-tags', join(fixtures, file)], {
    encoding: 'utf8', env: { ...process.env, PPROF_BINARY_PATH: '/nonexistent' }, timeout: 60000,
  });
  const keys = {};
  let key;
  for (const line of text.split('\n')) {
    const head = /^ (\S+): Total/.exec(line);
    if (head) { key = head[1]; keys[key] = []; continue; }
    const row = /^\s+\S+ \(\s*([\d.]+)%\): (.*)$/.exec(line);
    if (row && key) keys[key].push({ value: row[2], share: row[1] });
  }
  return keys;
}

test('labels: keys, values and shares equal go tool pprof -tags; focus, ignore and group by act as -tagfocus, -tagignore and -tagroot', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  const expected = pprofTags(FILE);
  assert.ok(expected.endpoint.length > 1 && expected.tenant.length > 1, 'the fixture carries endpoint and tenant labels');
  const { page } = await openPage(browser, server.base);
  await loadFixtures(page, FILE);
  await page.getByTestId('view-labels').click();
  await page.getByTestId('label-value').first().waitFor();
  const shown = await page.getByTestId('label-value').evaluateAll((rows) => rows.map((r) => r.dataset));
  for (const [key, values] of Object.entries(expected)) {
    const ours = shown.filter((r) => r.key === key).map((r) => ({ value: r.value, share: r.share }));
    assert.deepEqual(ours, values, key);
  }
  // Focus on one tenant: the top table is pprof's with -tagfocus.
  const [tenant] = expected.tenant;
  await page.locator(`[data-testid=label-value][data-key=tenant][data-value="${tenant.value}"] [data-testid=label-focus]`).click();
  await page.getByTestId('view-top').click();
  const focused = pprofTable(pprofTop(['-nodecount=8', `-tagfocus=tenant=^${tenant.value}$`], FILE), 8);
  await expectTopTable(page, focused, 'top with tagfocus');
  await page.getByTestId('tagfocus').fill('');
  await page.getByTestId('tagfocus').press('Enter');
  // Ignore one endpoint.
  await page.getByTestId('view-labels').click();
  const [endpoint] = expected.endpoint;
  await page.locator(`[data-testid=label-value][data-key=endpoint][data-value="${endpoint.value}"] [data-testid=label-ignore]`).click();
  await page.getByTestId('view-top').click();
  const ignored = pprofTable(pprofTop(['-nodecount=8', `-tagignore=endpoint=^${endpoint.value}$`], FILE), 8);
  await expectTopTable(page, ignored, 'top with tagignore');
  await page.getByTestId('tagignore').fill('');
  await page.getByTestId('tagignore').press('Enter');
  // Group the flame graph by endpoint: the values become the top table's entries too.
  await page.getByTestId('view-labels').click();
  await page.locator('[data-testid=label-key][data-key=endpoint] [data-testid=label-group]').click();
  await page.getByTestId('tagroot-chip').waitFor();
  await page.getByTestId('flamegraph').waitFor();
  await page.getByTestId('view-top').click();
  const grouped = pprofTable(pprofTop(['-nodecount=8', '-cum', '-tagroot=endpoint'], FILE), 8);
  const rows = await until('the grouped table', async () => {
    await page.getByTestId('top-row').first().waitFor();
    const names = await page.getByTestId('top-row').evaluateAll((r) => r.map((x) => x.querySelector('[data-col=name]').dataset.value));
    return expected.endpoint.every((e) => names.includes(e.value)) ? names : undefined;
  });
  for (const row of grouped.filter((r) => expected.endpoint.some((e) => e.value === r.name))) {
    assert.ok(rows.includes(row.name), `${row.name} is a frame of its own`);
  }
  await page.close();
});
