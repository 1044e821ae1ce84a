// The details panel against `go tool pprof -top` and `-peek`; the stack transforms as
// removable chips kept in the address, against pprof's equivalents (merge = -hide,
// drop = -ignore); the table beside the flame graph with its divider; and the flame
// graph's keyboard zoom and pan.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  startServer, launchBrowser, fixtures, requireFixtures, requireGo, goBinary, pprofTop, pprofTable, pprofValue,
  expectTopTable, openPage, loadFixtures, until, screenshot, hoverText,
} from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

const FILE = 'go/base/cpu.pb.gz';
const DEFLATE = 'compress/flate.(*compressor).deflate';
const ROW = 18;
const escape = (name) => name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** `go tool pprof -peek ^NAME$`: the callers and callees with their values (ns). */
function pprofPeek(name) {
  const text = execFileSync(goBinary, ['tool', 'pprof', '-peek', `^${escape(name)}$`, join(fixtures, FILE)], {
    encoding: 'utf8', env: { ...process.env, PPROF_BINARY_PATH: '/nonexistent' }, timeout: 60000,
  });
  const callers = [], callees = [];
  let seen = false;
  for (const line of text.split('\n')) {
    if (line.endsWith(`| ${name}`)) { seen = true; continue; }
    const call = /^\s+(\S+)\s+[\d.]+% \|\s+(.*?)( \(inline\))?$/.exec(line);
    if (call) (seen ? callees : callers).push({ name: call[2], value: pprofValue(call[1]) });
  }
  const byName = (a, b) => a.name.localeCompare(b.name);
  return { callers: callers.sort(byName), callees: callees.sort(byName) };
}

async function panelCalls(page, testid) {
  const rows = await page.getByTestId(testid).evaluateAll((list) => list.map((l) => ({ name: l.dataset.name, value: Number(l.dataset.value) })));
  return rows.sort((a, b) => a.name.localeCompare(b.name));
}

test('details panel: self, total, callers and callees of the selected function equal go tool pprof -top and -peek', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  const { page } = await openPage(browser, server.base);
  await loadFixtures(page, FILE);
  await page.getByTestId('view-top').click();
  await page.locator(`[data-testid=top-row]:has([data-value="${DEFLATE}"])`).click();
  const panel = page.getByTestId('details-panel');
  await panel.waitFor();
  assert.equal(await page.getByTestId('details-name').textContent(), DEFLATE);
  const row = pprofTable(pprofTop(['-nodecount=1000'], FILE)).find((r) => r.name === DEFLATE);
  const cpu = panel.locator('[data-testid=details-value][data-type=cpu]');
  await cpu.waitFor();
  assert.deepEqual([Number(await cpu.getAttribute('data-flat')), Number(await cpu.getAttribute('data-cum'))], [row.flat, row.cum]);
  const peek = pprofPeek(DEFLATE);
  assert.ok(peek.callers.length === 2 && peek.callees.length >= 4, 'pprof -peek was read');
  assert.deepEqual(await panelCalls(page, 'details-caller'), peek.callers);
  assert.deepEqual(await panelCalls(page, 'details-callee'), peek.callees);
  assert.match(await page.getByTestId('details-file').first().textContent(), /compress\/flate\/deflate\.go:\d+/);
  // The panel stays beside the other views, and a caller can be selected from it.
  await page.getByTestId('view-flame').click();
  await panel.waitFor();
  await panel.locator(`[data-testid=details-caller][data-name="compress/flate.(*compressor).close"] button`).click();
  await until('the caller selected', async () => (await page.getByTestId('details-name').textContent()) === 'compress/flate.(*compressor).close' || undefined);
  await screenshot(page, 'details-panel');
  await page.getByTestId('details-close').click();
  await panel.waitFor({ state: 'detached' });
  await page.close();
});

test('transforms: merge and drop act as pprof -hide and -ignore, show as removable chips and are kept in the address', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.route((url) => url.pathname === '/profiles/cpu.pb.gz', (route) => route.fulfill({ body: readFileSync(join(fixtures, FILE)) }));
  await page.goto(`${server.base}/?url=/profiles/cpu.pb.gz#view=top`);
  const whole = pprofTable(pprofTop(['-nodecount=8'], FILE), 8);
  await expectTopTable(page, whole, 'top before any transform');

  await page.locator(`[data-testid=top-row]:has([data-value="${DEFLATE}"])`).click();
  await page.getByTestId('transform-merge').click();
  const chip = page.getByTestId('transform-chip');
  await chip.waitFor();
  assert.match(await chip.getAttribute('data-transform'), /^mf:compress\/flate\./);
  await expectTopTable(page, pprofTable(pprofTop(['-nodecount=8', `-hide=^${escape(DEFLATE)}$`], FILE), 8), 'merged = pprof -hide');
  assert.match(await page.evaluate(() => location.hash), /transforms=mf%3A/);

  // Reloaded from the address: the transform is back.
  await page.reload();
  await page.getByTestId('transform-chip').waitFor();
  await expectTopTable(page, pprofTable(pprofTop(['-nodecount=8', `-hide=^${escape(DEFLATE)}$`], FILE), 8), 'merged after a reload');

  // A second transform: drop the samples with runtime.gcBgMarkWorker (pprof -ignore).
  await page.locator('[data-testid=top-row]:has([data-value="runtime.gcBgMarkWorker"])').click();
  await page.getByTestId('transform-drop').click();
  await until('two chips', async () => (await page.getByTestId('transform-chip').count()) === 2 || undefined);
  await expectTopTable(page, pprofTable(pprofTop(['-nodecount=8', `-hide=^${escape(DEFLATE)}$`, '-ignore=^runtime\\.gcBgMarkWorker$'], FILE), 8), 'merged and dropped');
  await screenshot(page, 'transform-chips');

  // Removing the first chip leaves the second.
  await page.getByTestId('transform-chip').first().getByRole('button').click();
  await until('one chip', async () => (await page.getByTestId('transform-chip').count()) === 1 || undefined);
  await expectTopTable(page, pprofTable(pprofTop(['-nodecount=8', '-ignore=^runtime\\.gcBgMarkWorker$'], FILE), 8), 'dropped only');
  await page.getByTestId('transform-chip').getByRole('button').click();
  await expectTopTable(page, whole, 'no transform');

  // r collapses the selected function's recursion; invert makes the roots leaves: the
  // goroutines' entry function, main.(*service).requestLoop, gets its cum as flat.
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('r');
  await until('the recursion chip', async () => (await page.getByTestId('transform-chip').getAttribute('data-transform'))?.startsWith('cr:') || undefined);
  await page.getByTestId('transform-chip').getByRole('button').click();
  const cum = Object.fromEntries(pprofTable(pprofTop(['-nodecount=1000'], FILE)).map((r) => [r.name, r.cum]));
  await page.getByTestId('invert').check();
  const entry = 'main.(*service).requestLoop';
  assert.ok(cum[entry] > 0);
  await page.getByTestId('top-filter').fill('requestLoop');
  await until('the entry function inverted', async () => {
    const flat = await page.locator(`[data-testid=top-row]:has([data-value="${entry}"]) [data-col=flat]`).getAttribute('data-value', { timeout: 1000 }).catch(() => null);
    return Number(flat) === cum[entry] || undefined;
  });
  await page.close();
});

test('table beside the flame graph with a divider; + zooms the flame graph in, arrows pan it', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage(browser, server.base);
  await loadFixtures(page, FILE);
  const canvas = page.getByTestId('flamegraph');
  await canvas.waitFor();
  await page.waitForFunction(() => document.querySelector('[data-testid=flamegraph]').width > 0);
  const width = (await canvas.boundingBox()).width;
  const height = (await canvas.boundingBox()).height;
  // The frame a quarter (and 30%) of the way along the row above the root.
  const row = height - ROW - ROW / 2;
  const atQuarter = (await hoverText(canvas, width * 0.255, row)).name;
  const atThirty = (await hoverText(canvas, width * 0.305, row)).name;
  await page.locator('h1').click();
  await page.keyboard.press('+');
  // Now the middle half is shown: what was at 25.5% is at 1%.
  await until('zoomed in', async () => (await hoverText(canvas, width * 0.01, row)).name === atQuarter || undefined);
  await page.keyboard.press('ArrowRight');
  // Panned by a tenth of the half shown: what was at 30.5% is at 1%.
  await until('panned', async () => (await hoverText(canvas, width * 0.01, row)).name === atThirty || undefined);
  await page.keyboard.press('0');

  await page.getByTestId('layout-both').click();
  const left = page.getByTestId('split-left');
  await left.getByTestId('top-table').waitFor();
  const right = page.getByTestId('split-right').getByTestId('flamegraph');
  await right.waitFor();
  const before = await right.evaluate((c) => c.width);
  const divider = page.getByTestId('split-divider');
  const box = await divider.boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + 50);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width / 2 - 200, box.y + 50, { steps: 5 });
  await page.mouse.up();
  // The flame graph is painted again at its new width.
  await until('the canvas repainted wider', async () => (await right.evaluate((c) => c.width)) > before || undefined);
  const share = Number(await divider.getAttribute('aria-valuenow'));
  await divider.focus();
  await page.keyboard.press('ArrowRight');
  assert.equal(Number(await divider.getAttribute('aria-valuenow')), share + 5);
  await screenshot(page, 'table-and-flame');
  await page.close();
});
