// End-to-end: the built page served by `stacklens serve`, in headless Chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startServer, launchBrowser, fixtures, requireFixtures, screenshot } from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

/** A page that records every request it makes. */
async function openPage() {
  const page = await browser.newPage();
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(server.base);
  return { page, requests };
}

/** pprof's first table rows: [flat, cum, name] with the "(inline)" marker removed. */
function pprofRows(file, n) {
  const lines = readFileSync(file, 'utf8').split('\n');
  const start = lines.findIndex((l) => l.trim().startsWith('flat  flat%')) + 1;
  return lines.slice(start, start + n).map((l) => {
    const t = l.trim().split(/\s+/);
    return [t[0], t[3], t.slice(5).join(' ').replace(/ \((partial-)?inline\)$/, '')];
  });
}

/** Nanoseconds as pprof prints them in this report: seconds, two decimals, ".00" dropped. */
function pprofSeconds(ns) {
  const s = (Number(ns) / 1e9).toFixed(2).replace(/\.00$/, '');
  return s === '0' ? '0' : `${s}s`;
}

test('cpu profile: the top table equals go tool pprof, and nothing leaves the page', async (t) => {
  if (!requireFixtures(t)) return;
  const { page, requests } = await openPage();
  await page.getByTestId('file-input').setInputFiles(join(fixtures, 'go/base/cpu.pb.gz'));
  const rows = page.getByTestId('top-row');
  await rows.first().waitFor();
  const expected = pprofRows(join(fixtures, 'go/base/cpu.pprof-top.txt'), 10);
  for (let i = 0; i < expected.length; i++) {
    const row = rows.nth(i);
    const name = await row.locator('[data-col=name]').getAttribute('data-value');
    const flat = await row.locator('[data-col=flat]').getAttribute('data-value');
    const cum = await row.locator('[data-col=cum]').getAttribute('data-value');
    assert.equal(name, expected[i][2], `row ${i} name`);
    assert.equal(pprofSeconds(flat), expected[i][0], `row ${i} flat`);
    assert.equal(pprofSeconds(cum), expected[i][1], `row ${i} cum`);
  }
  await screenshot(page, 'top-cpu');
  const origin = new URL(server.base).origin;
  const foreign = requests.filter((u) => !u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith('blob:'));
  assert.deepEqual(foreign, [], 'the page made requests to other origins');
  await page.close();
});

test('switching the sample type of a heap profile changes the table', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await page.getByTestId('file-input').setInputFiles(join(fixtures, 'go/base/heap.pb.gz'));
  const select = page.getByTestId('sample-type');
  await select.waitFor();
  const firstName = () => page.getByTestId('top-row').first().locator('[data-col=name]').getAttribute('data-value');
  assert.equal(await select.locator('option:checked').textContent(), 'inuse_space');
  assert.equal(await firstName(), pprofRows(join(fixtures, 'go/base/heap.inuse_space.pprof-top.txt'), 1)[0][2]);
  await select.selectOption({ label: 'alloc_objects' });
  await page.waitForFunction(
    (want) => document.querySelector('[data-testid=top-row] [data-col=name]')?.getAttribute('data-value') === want,
    pprofRows(join(fixtures, 'go/base/heap.alloc_objects.pprof-top.txt'), 1)[0][2],
  );
  await screenshot(page, 'top-heap-alloc-objects');
  await page.close();
});

test('a corrupt file shows an error naming the file and the problem', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stacklens-corrupt-'));
  const bad = join(dir, 'broken.pb.gz');
  writeFileSync(bad, Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x01, 0x02]));
  const { page } = await openPage();
  await page.getByTestId('file-input').setInputFiles(bad);
  const error = page.getByTestId('error');
  await error.waitFor();
  const text = await error.textContent();
  assert.match(text, /broken\.pb\.gz/);
  assert.match(text, /gzip/i);
  await screenshot(page, 'error-corrupt');
  await page.close();
});
