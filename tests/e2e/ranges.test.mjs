// The capture history's range timeline against a real server's time index: profiles
// pushed through /ingest at known times, the timeline's values under the mouse, a
// dragged range opened as a merged profile (its top table's first row equals the
// server's /api/v1/profiling/merge), a second range compared (the diff view and the top
// movers equal the server's range diff), the label selector, and a function's trend.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  startServer, launchBrowser, fixtures, requireFixtures, pageTopTable, screenshot, screenshots, until,
} from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

/** The page's default window: the last 6 hours in 5-minute steps, ending on a step. */
const STEP = 300_000;
const SPAN = 6 * 3_600_000;
const to = Math.ceil(Date.now() / STEP) * STEP;
const from = to - SPAN;
const stepStart = (k) => from + k * STEP;

/** What is pushed: [step, fixture, region]; each 30 s into its step. */
const PUSHES = [
  [6, 'go/base/cpu.pb.gz', 'eu'],
  [8, 'go/base/cpu.pb.gz', 'us'],
  [30, 'go/compare/cpu.pb.gz', 'eu'],
  [32, 'go/compare/cpu.pb.gz', 'eu'],
  [50, 'go/compare/cpu.pb.gz', 'us'],
  [52, 'go/base/cpu.pb.gz', 'us'],
];

async function seed() {
  for (const [k, file, region] of PUSHES) {
    const at = Math.floor((stepStart(k) + 30_000) / 1000);
    const name = encodeURIComponent(`checkout.cpu{region=${region}}`);
    const r = await fetch(`${server.base}/ingest?name=${name}&from=${at}&until=${at + 10}&format=pprof`, {
      method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: readFileSync(join(fixtures, file)),
    });
    assert.equal(r.status, 200, await r.text());
  }
}

const query = (range, labels = '') =>
  `service=checkout&profileType=cpu&from=${range[0]}&to=${range[1]}&labels=${encodeURIComponent(labels)}`;
const api = async (path, init) => {
  const r = await fetch(`${server.base}/api/v1/profiling/${path}`, init);
  assert.equal(r.status, 200, `${path}: ${r.status}`);
  return r.json();
};

/** Opens the capture history and waits for the timeline. */
async function openHistory(page) {
  const menu = page.getByTestId('history-menu');
  if (!(await menu.evaluate((d) => d.open))) await menu.locator('summary').click();
  const svg = page.getByTestId('range-timeline');
  await svg.waitFor();
  return svg;
}

/** The window the page shows, [from, to] (ms): the module's, unless a step ended since. */
async function shownWindow(page) {
  const svg = page.getByTestId('range-timeline');
  return [Number(await svg.getAttribute('data-from')), Number(await svg.getAttribute('data-to'))];
}

/** The client-space box of the bar of step `k` (drawn when the step has profiles). */
async function bar(page, k) {
  const found = page.locator(`.range-bar[data-t="${stepStart(k)}"]`);
  await found.waitFor();
  return found.boundingBox();
}

/** Drags with the mouse from just inside step `a`'s bar to just inside the end of step `b`'s. */
async function dragSteps(page, a, b) {
  const [x0, x1] = [await bar(page, a), await bar(page, b)];
  const y = x0.y + x0.height / 2;
  await page.mouse.move(x0.x + 1, y);
  await page.mouse.down();
  await page.mouse.move((x0.x + x1.x + x1.width) / 2, y, { steps: 4 });
  await page.mouse.move(x1.x + x1.width - 1, y, { steps: 4 });
  await page.mouse.up();
}

/** The selection of `slot` (a or b) as [from, to]. */
async function selection(page, slot) {
  const rect = page.locator(`[data-testid=range-selection][data-slot=${slot}]`);
  await rect.waitFor();
  return [Number(await rect.getAttribute('data-from')), Number(await rect.getAttribute('data-to'))];
}

test('range timeline: hover, a dragged range merged, two ranges diffed, labels, a function trend', async (t) => {
  if (!requireFixtures(t)) return;
  await seed();
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(server.base);
  const svg = await openHistory(page);
  assert.equal(await page.getByTestId('range-series-select').locator('option:checked').textContent(), 'checkout · cpu');

  // The timeline is the server's series: one bar per step with profiles, and the totals.
  const pageRange = await shownWindow(page);
  const series = await api(`series?${query(pageRange)}&step=${STEP / 1000}`);
  const points = series.series[0].points;
  const withProfiles = points.filter((p) => p.profiles > 0);
  assert.deepEqual(withProfiles.map((p) => p.t), PUSHES.map(([k]) => stepStart(k)));
  assert.equal(await page.locator('.range-bar').count(), withProfiles.length);
  assert.equal(Number(await svg.getAttribute('data-total')), points.reduce((s, p) => s + p.value, 0));
  // Axes: times along the bottom, values (with the unit) up the side.
  const xTicks = await page.getByTestId('range-axis-x').locator('text').allTextContents();
  assert.ok(xTicks.length >= 3 && xTicks.every((l) => /^\d\d:\d\d$/.test(l)), xTicks.join(' '));
  const yTicks = await page.getByTestId('range-axis-y').locator('text').allTextContents();
  assert.ok(yTicks.length >= 3 && yTicks.slice(1).every((l) => /^[0-9.]+(ns|us|ms|s|m|h)$/.test(l)), yTicks.join(' '));

  // The value under the mouse.
  const hovered = await bar(page, 8);
  await page.mouse.move(hovered.x + hovered.width / 2, hovered.y + hovered.height / 2);
  const hover = page.getByTestId('range-hover');
  await hover.waitFor();
  const p8 = points.find((p) => p.t === stepStart(8));
  assert.equal(Number(await hover.getAttribute('data-t')), p8.t);
  assert.equal(Number(await hover.getAttribute('data-value')), p8.value);
  assert.match(await hover.textContent(), /1 profile/);

  // Drag steps 6..8: the selection snaps to whole steps.
  await dragSteps(page, 6, 8);
  const a = await selection(page, 'a');
  assert.deepEqual(a, [stepStart(6), stepStart(9)]);
  await screenshot(page, 'range-timeline-selected');

  // Open it: a profile tab of the merged range; its flame graph and top table are the server's merge.
  await page.getByTestId('range-open').click();
  await page.getByTestId('flamegraph').waitFor();
  const tab = page.getByTestId('profile-tab').last();
  await until('the merged tab', async () => /^checkout cpu \d\d:\d\d–\d\d:\d\d/.test(await tab.textContent()) || undefined);
  await screenshot(page, 'range-merged-flame');
  const merged = await api(`merge?${query(a)}`);
  assert.equal(merged.profileCount, 2);
  await page.getByTestId('view-top').click();
  const [first] = await pageTopTable(page, 1);
  assert.deepEqual({ name: first.name, flat: first.flat }, { name: merged.functions[0].name, flat: merged.functions[0].flat });

  // The function's trend over the timeline's window, from the details panel.
  await page.getByTestId('top-row').first().click();
  await page.getByTestId('details-trend').click();
  const trend = page.getByTestId('function-trend');
  await trend.waitFor();
  const history = await api(`functions/${encodeURIComponent(first.name)}/history?${query(pageRange)}&step=${STEP / 1000}`);
  const dots = await trend.getByTestId('trend-point').evaluateAll((els) =>
    els.map((e) => ({ t: Number(e.dataset.t), self: Number(e.dataset.self), cum: Number(e.dataset.cum) })));
  assert.equal(dots.length, SPAN / STEP);
  assert.deepEqual(dots, history.points.map((p) => ({ t: p.t, self: p.self, cum: p.cum })));
  assert.ok(dots.filter((d) => d.self > 0).length >= 2);
  await page.getByTestId('details-panel').screenshot({ path: join(screenshots, 'range-function-trend-panel.png') });
  await page.getByTestId('details-close').click();

  // A second range (steps 30..32), compared with the first: the diff view and top movers.
  await openHistory(page);
  await dragSteps(page, 30, 32);
  const b = await selection(page, 'b');
  assert.deepEqual(b, [stepStart(30), stepStart(33)]);
  assert.deepEqual(await selection(page, 'a'), a);
  await page.getByTestId('range-compare').click();
  const diff = await api('diff', {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      base: { service: 'checkout', profileType: 'cpu', from: a[0], to: a[1] },
      compare: { service: 'checkout', profileType: 'cpu', from: b[0], to: b[1] },
    }),
  });
  const movers = page.getByTestId('top-mover');
  await page.getByTestId('top-movers').waitFor();
  const shown = await movers.evaluateAll((rows) => rows.map((r) => ({ name: r.dataset.name, delta: Number(r.dataset.delta) })));
  assert.equal(shown.length, diff.topMovers.length);
  assert.ok(shown.length > 0);
  shown.forEach((m, i) => {
    assert.equal(m.name, diff.topMovers[i].name);
    assert.ok(Math.abs(m.delta - diff.topMovers[i].deltaPct) < 1e-9, `${m.name}: ${m.delta} vs ${diff.topMovers[i].deltaPct}`);
  });
  await page.getByTestId('diff-table').waitFor();
  assert.equal(await page.getByTestId('overall-delta').textContent(), `${diff.overallDelta >= 0 ? '+' : ''}${diff.overallDelta.toFixed(2)}%`);
  const firstRegression = page.getByTestId('diff-row').first();
  assert.equal(await firstRegression.locator('[data-col=name]').getAttribute('data-value'), diff.regressions[0].name);
  assert.equal(Number(await firstRegression.locator('[data-col=flat]').getAttribute('data-value')), diff.regressions[0].flatDelta);
  // The first range was open already: its tab is the base, not fetched again.
  assert.equal(await page.getByTestId('profile-tab').count(), 2);
  await screenshot(page, 'range-diff-top-movers');

  // The label selector: region=eu only; the timeline's total is the label's share.
  await openHistory(page);
  const labelSelect = page.getByTestId('range-label-select');
  await until('the label values', async () => (await labelSelect.locator('option').count()) > 2 || undefined);
  await labelSelect.selectOption('region=eu');
  const eu = await api(`series?${query(await shownWindow(page), 'region=eu')}&step=${STEP / 1000}`);
  const euTotal = eu.series[0].points.reduce((s, p) => s + p.value, 0);
  await until('the eu total', async () => Number(await page.getByTestId('range-timeline').getAttribute('data-total')) === euTotal || undefined);
  assert.ok(euTotal < points.reduce((s, p) => s + p.value, 0));
  assert.equal(await page.locator('.range-bar').count(), PUSHES.filter((p) => p[2] === 'eu').length);
  // A range under the label merges only its profiles (step 6's eu push, not step 8's us one).
  await page.getByTestId('range-clear').click();
  await dragSteps(page, 6, 6);
  const euRange = await selection(page, 'a');
  assert.deepEqual(euRange, [stepStart(6), stepStart(7)]);
  await page.getByTestId('range-open').click();
  await until('the eu tab', async () => /\{region=eu\}/.test(await page.getByTestId('profile-tab').last().textContent()) || undefined);
  const euMerged = await api(`merge?${query(euRange, 'region=eu')}`);
  assert.equal(euMerged.profileCount, 1);
  await page.getByTestId('view-top').click();
  await until('the eu top table', async () => {
    const [row] = await pageTopTable(page, 1);
    return row.name === euMerged.functions[0].name && row.flat === euMerged.functions[0].flat ? row : undefined;
  });

  // A range without profiles: the server's NoProfiles message, in the page.
  await openHistory(page);
  await page.getByTestId('range-clear').click();
  const [left, right] = [await bar(page, 6), await bar(page, 30)];
  await page.mouse.move(left.x + 3 * left.width, left.y + left.height / 2);
  await page.mouse.down();
  await page.mouse.move(right.x - 3 * right.width, left.y + left.height / 2, { steps: 4 });
  await page.mouse.up();
  await page.getByTestId('range-open').click();
  await page.getByText('no stored profile matches the range').waitFor();
  await page.close();
});

test('range timeline: light and dark, 1280×800 and 1920×1080, no overflow', async (t) => {
  if (!requireFixtures(t)) return;
  for (const colorScheme of ['light', 'dark']) {
    for (const [width, height] of [[1280, 800], [1920, 1080]]) {
      const page = await browser.newPage({ viewport: { width, height }, colorScheme });
      await page.goto(server.base);
      await openHistory(page);
      await page.locator('.range-bar').first().waitFor();
      const ts = await page.locator('.range-bar').evaluateAll((els) => els.map((e) => e.dataset.t));
      assert.deepEqual(ts, PUSHES.map(([k]) => String(stepStart(k))));
      await dragSteps(page, 30, 50);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `${colorScheme} ${width}x${height}: ${overflow}px wider than the window`);
      await screenshot(page, `range-timeline-${colorScheme}-${width}x${height}`);
      await page.close();
    }
  }
});

test('range timeline: arrows and Enter select a range without a mouse', async (t) => {
  if (!requireFixtures(t)) return;
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(server.base);
  const svg = await openHistory(page);
  await page.locator('.range-bar').first().waitFor();
  await svg.focus();
  // The first arrow goes to the newest step; back to step 50, Enter, two back, Enter.
  const [, shownTo] = await shownWindow(page);
  await page.keyboard.press('ArrowRight');
  for (let t = shownTo - STEP; t > stepStart(50); t -= STEP) await page.keyboard.press('ArrowLeft');
  assert.equal(Number(await page.getByTestId('range-hover').getAttribute('data-t')), stepStart(50));
  await page.keyboard.press('Enter');
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('Enter');
  assert.deepEqual(await selection(page, 'a'), [stepStart(48), stepStart(51)]);
  // The last hour holds no profile: a zero per step, and the keys still work.
  await page.getByTestId('range-window').selectOption({ label: 'last hour' });
  await page.getByText('No profiles in this window.').waitFor();
  await page.getByTestId('range-timeline').focus();
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.getByTestId('range-hover').getAttribute('data-profiles'), '0');
  await page.close();
});

test('range timeline: an empty index says so in the page', async () => {
  const empty = await startServer();
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(empty.base);
    await page.getByTestId('history-menu').locator('summary').click();
    await page.getByTestId('range-empty').waitFor();
    await page.close();
  } finally {
    await empty.stop();
  }
});
