// The page's views against `go tool pprof`: the icicle toggle, the diff's pickers and
// normalise toggle, and the focus/ignore/hide filters. Expected values come from pprof
// (run here, or the fixtures' stored `*.pprof-top.txt` outputs), never from the page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  startServer, launchBrowser, fixtures, requireFixtures, requireGo, goBinary, pprofTop, pprofTable, pprofFileTable,
  pprofValue, expectTopTable, canvasPixel, hslRgb, sameColour, hoverText, openPage, loadFixtures, setFilter, until,
  screenshot,
} from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

const ROW = 18; // CSS pixels per flame graph row
const ROOT_GREY = hslRgb(0, 0, 70); // the root frame's fill

/** "Total samples = 7.08s" of a stored pprof output, in nanoseconds. */
function pprofTotal(file) {
  const text = readFileSync(join(fixtures, file), 'utf8');
  return pprofValue(/Total samples = (\S+)/.exec(text)[1]);
}

/**
 * The root's children in pprof's own call stacks (`go tool pprof -traces`): each stack's
 * outermost frame with the value of the stacks under it, in name order (the flame
 * graph's order).
 */
function pprofRootChildren(file) {
  const text = execFileSync(goBinary, ['tool', 'pprof', '-traces', join(fixtures, file)], {
    encoding: 'utf8', env: { ...process.env, PPROF_BINARY_PATH: '/nonexistent' }, timeout: 60000,
  });
  const totals = new Map();
  for (const block of text.split(/^-+\+-+$/m).slice(1)) {
    let value = null;
    let outermost = null;
    for (const line of block.split('\n')) {
      const head = /^\s*(-?[0-9.]+[a-zA-Z]*)\s{3}(\S.*)$/.exec(line);
      if (value === null && head) [value, outermost] = [pprofValue(head[1]), head[2]];
      else if (value !== null && line.trim()) outermost = line.trim();
    }
    if (value === null) continue;
    const name = outermost.replace(/ \((partial-)?inline\)$/, '');
    totals.set(name, (totals.get(name) || 0) + value);
  }
  return [...totals].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([name, total]) => ({ name, total }));
}

/** The frame a tooltip names, and its total. */
function tooltipFrame({ name, text }) {
  return { name, total: pprofValue(/total (\S+) \(/.exec(text)[1]) };
}

test('icicle: the toggle moves the root from the bottom row to the top; the rows keep pprof\'s frames in name order', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  const { page } = await openPage(browser, server.base);
  await loadFixtures(page, 'go/base/cpu.pb.gz');
  const canvas = page.getByTestId('flamegraph');
  await canvas.waitFor();
  await page.waitForFunction(() => document.querySelector('[data-testid=flamegraph]').width > 0);
  const { width, height } = await canvas.boundingBox();
  const total = pprofTotal('go/base/cpu.pprof-top.txt'); // 7.08s
  const children = pprofRootChildren('go/base/cpu.pb.gz');
  assert.equal(children.reduce((s, c) => s + c.total, 0), total, 'pprof -traces accounts for every sample');
  // The children wide enough to hover (main.(*service).requestLoop 6.68s, runtime.gcBgMarkWorker 0.11s…).
  let x0 = 0;
  const targets = [];
  for (const c of children) {
    const w = (c.total / total) * width;
    if (w >= 12) targets.push({ ...c, x: x0 + w / 2 });
    x0 += w;
  }
  assert.ok(targets.some((c) => c.name === 'main.(*service).requestLoop'), 'the workload is a root child');
  assert.ok(targets.length >= 3, `${targets.length} root children to hover`);

  const rowsAt = async (rootY, childY, mode) => {
    assert.ok(sameColour(await canvasPixel(canvas, width / 2, rootY), ROOT_GREY), `${mode}: the root's grey at y=${rootY}`);
    const otherEnd = rootY < height / 2 ? height - ROW / 2 : ROW / 2;
    assert.ok(!sameColour(await canvasPixel(canvas, width / 2, otherEnd), ROOT_GREY), `${mode}: no root at y=${otherEnd}`);
    assert.deepEqual(tooltipFrame(await hoverText(canvas, width / 2, rootY)), { name: 'root', total });
    for (const c of targets) {
      assert.deepEqual(tooltipFrame(await hoverText(canvas, c.x, childY)), { name: c.name, total: c.total }, `${mode}: x=${c.x}`);
    }
  };
  // A flame graph grows upwards from the root on the bottom row…
  await rowsAt(height - ROW / 2, height - ROW - ROW / 2, 'flame');
  await page.getByTestId('icicle').check();
  // …an icicle hangs down from the root on the top row.
  await until('the icicle repaint', async () => (sameColour(await canvasPixel(canvas, width / 2, ROW / 2), ROOT_GREY) ? true : undefined));
  await rowsAt(ROW / 2, ROW + ROW / 2, 'icicle');
  await screenshot(page, 'flame-icicle');
  await page.getByTestId('icicle').uncheck();
  await until('the flame repaint', async () => (sameColour(await canvasPixel(canvas, width / 2, height - ROW / 2), ROOT_GREY) ? true : undefined));
  await rowsAt(height - ROW / 2, height - ROW - ROW / 2, 'flame again');
  await page.close();
});

/** The diff table's row for `name`: raw flat and cum deltas and the shown flat text. */
async function diffRow(page, name) {
  const row = page.getByTestId('diff-row').filter({ has: page.locator(`[data-col=name][data-value="${name}"]`) });
  if ((await row.count()) !== 1) return undefined;
  return {
    flat: Number(await row.locator('[data-col=flat]').getAttribute('data-value')),
    cum: Number(await row.locator('[data-col=cum]').getAttribute('data-value')),
    flatText: await row.locator('[data-col=flat]').textContent(),
  };
}

/** The diff flame graph's root colour: red when the compare total is at least the base's, blue otherwise. */
async function diffRootColour(page) {
  const canvas = page.getByTestId('flamegraph');
  await canvas.waitFor();
  await page.waitForFunction(() => document.querySelector('[data-testid=flamegraph]').width > 0);
  const { width, height } = await canvas.boundingBox();
  return canvasPixel(canvas, width / 2, height - ROW / 2);
}

test('diff normalise: the compare is scaled to the base total as pprof -normalize; unticked, the raw deltas come back', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage(browser, server.base);
  await loadFixtures(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('flamegraph').waitFor();
  await loadFixtures(page, 'go/compare/cpu.pb.gz');
  await page.getByTestId('profile-tab').nth(1).waitFor();
  await page.getByTestId('view-diff').click();
  await page.getByTestId('diff-table').waitFor();
  // pprof: findMatch 1.34s flat, 2.11s cum of 7.08s in base; 1.99s and 2.86s of 6.90s in compare.
  const base = pprofFileTable('go/base/cpu.pprof-top.txt').find((r) => r.name === 'compress/flate.(*compressor).findMatch');
  const compare = pprofFileTable('go/compare/cpu.pprof-top.txt').find((r) => r.name === base.name);
  const [baseTotal, compareTotal] = [pprofTotal('go/base/cpu.pprof-top.txt'), pprofTotal('go/compare/cpu.pprof-top.txt')];
  const raw = pprofFileTable('go/compare/cpu.diff-vs-base.pprof-top.txt').find((r) => r.name === base.name);
  assert.deepEqual([raw.flat, raw.cum], [compare.flat - base.flat, compare.cum - base.cum], 'pprof -diff_base agrees with the two tops');

  const summary = page.getByTestId('diff-summary');
  assert.equal(await summary.textContent(), 'total 7.08s → 6.90s (-2.54%) · unchanged (±0.07s): 312');
  assert.deepEqual(await diffRow(page, base.name), { flat: raw.flat, cum: raw.cum, flatText: '0.65s' });
  // Compare (6.90s) below base (7.08s): the root is blue, hsl(220, 80%, 92 − 42 × 0.18/7.08 %).
  const light = Math.round(92 - (42 * (baseTotal - compareTotal)) / baseTotal);
  assert.ok(sameColour(await diffRootColour(page), hslRgb(220, 80, light)), `root blue at ${light}%`);

  await page.getByTestId('normalize').check();
  await until('the normalised report', async () => ((await summary.textContent()).includes('normalized') ? true : undefined));
  // Normalised as pprof's -normalize: each compared sample × 7.08/6.90, rounded. From
  // `go tool pprof -top -normalize -diff_base=go/base/cpu.pb.gz go/compare/cpu.pb.gz`:
  // findMatch 701.91ms flat, 824.61ms cum (to 10 µs; the page shows the nanoseconds).
  const row = await diffRow(page, base.name);
  assert.deepEqual([Math.round(row.flat / 1e4), Math.round(row.cum / 1e4)], [70191, 82461]);
  assert.equal(row.flatText, '701.91ms');
  assert.equal(await summary.textContent(), 'total 7080ms → 6900ms (-2.54%) · normalized · unchanged (±70.80ms): 311');
  assert.equal(await page.getByTestId('overall-delta').textContent(), '-2.54%', 'the overall delta stays on the raw totals');
  // Scaled, the two totals are equal: the root is no longer blue (red, 0 change).
  assert.ok(sameColour(await diffRootColour(page), hslRgb(0, 80, 92)), 'root red at 92%');
  await screenshot(page, 'diff-normalized');

  await page.getByTestId('normalize').uncheck();
  await until('the raw report', async () => ((await summary.textContent()).includes('normalized') ? undefined : true));
  assert.deepEqual(await diffRow(page, base.name), { flat: raw.flat, cum: raw.cum, flatText: '0.65s' });
  await page.close();
});

test('diff pickers: choosing base and compare shows pprof -diff_base of that pair', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage(browser, server.base);
  // Opened in the other order: by default the earlier tab (compare/cpu) is the base.
  await loadFixtures(page, 'go/compare/cpu.pb.gz');
  await page.getByTestId('flamegraph').waitFor();
  await loadFixtures(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('profile-tab').nth(1).waitFor();
  assert.deepEqual(await page.getByTestId('profile-tab').locator('.tab-name').allTextContents(), ['cpu.pb.gz', 'cpu.pb.gz #2']);
  await page.getByTestId('view-diff').click();
  await page.getByTestId('diff-table').waitFor();
  const findMatch = 'compress/flate.(*compressor).findMatch';
  const expected = pprofFileTable('go/compare/cpu.diff-vs-base.pprof-top.txt');
  const fm = expected.find((r) => r.name === findMatch);
  assert.deepEqual([fm.flat, fm.cum], [650000000, 750000000], 'pprof: findMatch +0.65s flat, +0.75s cum');
  assert.deepEqual(await diffRow(page, findMatch), { flat: -fm.flat, cum: -fm.cum, flatText: '-0.65s' });
  assert.equal(await page.getByTestId('overall-delta').textContent(), '+2.61%', '(7.08 − 6.90) / 6.90');

  await page.getByTestId('diff-base').selectOption({ label: 'cpu.pb.gz #2' });
  await page.getByTestId('diff-compare').selectOption({ label: 'cpu.pb.gz' });
  await until('the base/cpu → compare/cpu diff', async () => ((await diffRow(page, findMatch))?.flat === fm.flat ? true : undefined));
  assert.equal(await page.getByTestId('overall-delta').textContent(), '-2.54%', '(6.90 − 7.08) / 7.08');
  // Every change pprof lists that is clearly above the 1% noise threshold (0.0708s) is in
  // the table with pprof's flat and cum deltas.
  const clear = expected.filter((r) => Math.max(Math.abs(r.flat), Math.abs(r.cum)) >= 100000000);
  assert.equal(clear.length, 15);
  for (const r of clear) {
    const shown = await diffRow(page, r.name);
    assert.deepEqual(shown && [shown.flat, shown.cum], [r.flat, r.cum], r.name);
  }
  assert.equal(await page.getByTestId('diff-base').locator('option:checked').textContent(), 'cpu.pb.gz #2');
  assert.equal(await page.getByTestId('diff-compare').locator('option:checked').textContent(), 'cpu.pb.gz');
  await screenshot(page, 'diff-picked');
  await page.close();
});

test('filters: focus, ignore and hide regexes give the top table go tool pprof -focus/-ignore/-hide prints', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  const { page } = await openPage(browser, server.base);
  await loadFixtures(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('view-top').click();
  await expectTopTable(page, pprofFileTable('go/base/cpu.pprof-top.txt', 8), 'unfiltered');
  const cases = [
    { focus: 'sort\\.' },
    { ignore: 'compress/flate' },
    { hide: 'runtime\\.' },
    { focus: 'main\\.sortRecords', ignore: 'insertionSort', hide: 'runtime\\.' },
  ];
  let previous = pprofFileTable('go/base/cpu.pprof-top.txt', 8);
  for (const filters of cases) {
    for (const testid of ['focus', 'ignore', 'hide']) await setFilter(page, testid, filters[testid] || '');
    const args = Object.entries(filters).map(([k, v]) => `-${k}=${v}`);
    const expected = pprofTable(pprofTop(['-nodecount=8', ...args], 'go/base/cpu.pb.gz'), 8);
    assert.notDeepEqual(expected, previous, `${args}: pprof's table changes`);
    await expectTopTable(page, expected, `pprof -top ${args.join(' ')}`);
    previous = expected;
  }
  await screenshot(page, 'top-filtered');
  await page.close();
});
