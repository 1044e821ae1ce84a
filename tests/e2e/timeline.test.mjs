// The Time order view: the stack chart and histogram painted for formats with sample
// times, lanes named by thread, zoom, and a dragged time range that every other view
// reads (the Top view's total against the samples the test sums from the file itself),
// kept in the address and cleared with its chip or by switching profiles.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  startServer, launchBrowser, fixtures, requireFixtures, openPage, loadFixtures, until, screenshot, canvasPixel,
} from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

const CPUPROFILE = 'thirdparty/firefox-profiler/hello.cjs-20231120T211435.cpuprofile';
const SAMPLY = 'thirdparty/samply/ls-profile.json';
const PROCESSED = 'thirdparty/firefox-profiler/processed-3.json';
/** The chart's layout (views/timeline.rs): the time axis, then each lane's name band. */
const AXIS = 18;
const LANE_HEAD = 18;

/**
 * The samples of a .cpuprofile as V8 records them: `timeDeltas` (µs) add up from
 * `startTime`; a sample lasts until the next one (the last until `endTime`), and starts
 * (in ns) from `startTime`. Each is one sample of its wall time in µs.
 */
function cpuprofileSamples(file) {
  const json = JSON.parse(readFileSync(join(fixtures, file), 'utf8'));
  let t = json.startTime;
  const times = json.timeDeltas.map((d) => (t += d));
  const order = times.map((_, i) => i).sort((a, b) => times[a] - times[b]);
  return order.map((i, k) => {
    const next = k + 1 < order.length ? times[order[k + 1]] : (json.endTime ?? times[i]);
    return { start: (times[i] - json.startTime) * 1000, wall: Math.max(0, next - times[i]) };
  });
}

/** The lanes a Firefox/samply profile's threads make: the threads with samples, by name. */
function firefoxLanes(file) {
  const json = JSON.parse(readFileSync(join(fixtures, file), 'utf8'));
  const names = json.threads.filter((t) => t.samples.stack.some((s) => s !== null)).map((t) => {
    const id = t.tid ?? (typeof t.pid === 'number' ? t.pid : undefined);
    if (t.processName && id !== undefined && t.processName !== t.name) return `${t.processName} ${t.name} (${id})`;
    return id === undefined ? t.name : `${t.name} (${id})`;
  });
  return [...new Set(names)];
}

/** The share of a canvas's pixels painted opaque (boxes and bars; grid lines are translucent). */
async function paintedShare(canvas) {
  return canvas.evaluate((c) => {
    if (!c.width || !c.height) return 0;
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let opaque = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i] === 255) opaque += 1;
    return opaque / (c.width * c.height);
  });
}

/** Waits until both timeline canvases are painted (painting is one pass); returns their painted shares. */
async function painted(page) {
  const chart = page.getByTestId('timeline');
  const track = page.getByTestId('timeline-histogram');
  await chart.waitFor();
  return until('the timeline to be painted', async () => {
    const shares = { chart: await paintedShare(chart), track: await paintedShare(track) };
    return shares.chart > 0 && shares.track > 0 ? shares : undefined;
  });
}

/** The chart's window in ns, as the page shows it. */
async function chartWindow(page) {
  const w = page.getByTestId('timeline-window');
  return { start: Number(await w.getAttribute('data-start')), end: Number(await w.getAttribute('data-end')) };
}

/** Drags across a canvas from `from` to `to` (fractions of its width), at mid-height or `y`. */
async function dragAcross(page, canvas, from, to, y) {
  const box = await canvas.boundingBox();
  const at = y ?? box.height / 2;
  await page.mouse.move(box.x + box.width * from, box.y + at);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * to, box.y + at, { steps: 8 });
  await page.mouse.up();
}

/** The time range in the address (`range=from~to`, ns), once there is one. */
async function rangeInAddress(page) {
  const hash = await until('a range in the address', async () => {
    const h = await page.evaluate(() => location.hash);
    return /range=-?\d+~-?\d+/.test(h) ? h : undefined;
  });
  const [, from, to] = /range=(-?\d+)~(-?\d+)/.exec(hash);
  return [Number(from), Number(to)];
}

/** The Top view's total: its rows' flat values (every sample has a leaf frame). */
async function expectTopTotal(page, expected, what) {
  let shown;
  try {
    return await until(what, async () => {
      await page.getByTestId('top-row').first().waitFor();
      shown = await page.getByTestId('top-row').evaluateAll((rows) =>
        rows.reduce((sum, r) => sum + Number(r.querySelector('[data-col=flat]').dataset.value), 0));
      return shown === expected ? shown : undefined;
    });
  } catch (e) {
    assert.equal(shown, expected, what);
    throw e;
  }
}

test('time order: a .cpuprofile as a stack chart over time with its histogram; hover names a frame; zoom asks for a finer window', async (t) => {
  if (!requireFixtures(t)) return;
  const samples = cpuprofileSamples(CPUPROFILE);
  const { page } = await openPage(browser, server.base);
  await page.setViewportSize({ width: 1280, height: 800 });
  await loadFixtures(page, CPUPROFILE);
  await page.getByTestId('view-timeline').click();
  const shares = await painted(page);
  // One lane (the samples name no thread), spanning the samples' times.
  assert.deepEqual(await page.getByTestId('lane-label').allTextContents(), ['all samples']);
  const whole = await chartWindow(page);
  const end = Math.max(...samples.map((s) => s.start + s.wall * 1000));
  assert.deepEqual(whole, { start: samples[0].start, end }, 'from the first sample\'s start to the last one\'s end');
  await screenshot(page, 'timeline-cpuprofile');

  // Hovering the outermost row names a frame, with its file and duration.
  const chart = page.getByTestId('timeline');
  const box = await chart.boundingBox();
  const tip = page.getByTestId('timeline-tooltip');
  let text, at;
  for (const x of [0.5, 0.3, 0.7, 0.1, 0.9]) {
    at = { x: box.width * x, y: AXIS + LANE_HEAD + 8 };
    await chart.hover({ position: at });
    if (await tip.count()) { text = await tip.textContent(); break; }
  }
  assert.match(text ?? '', /\d(\.\d+)?(ns|us|ms|s) from /, 'a frame under the cursor, with its duration');

  // A click selects the frame's function: the details panel opens beside the chart,
  // which the worker then draws for its narrower width.
  const name = await tip.locator('.tt-name').textContent();
  const backing = await chart.evaluate((c) => c.width);
  await chart.click({ position: at });
  assert.equal(await page.getByTestId('details-name').textContent(), name);
  const narrower = await until('the chart redrawn narrower', async () => {
    const w = await chart.evaluate((c) => [c.width, Math.round(c.clientWidth * devicePixelRatio)]);
    return w[0] < backing && Math.abs(w[0] - w[1]) <= 1 ? w : undefined;
  });
  await painted(page);
  await screenshot(page, 'timeline-details');
  await page.getByTestId('details-close').click();
  await until('the chart redrawn full width', async () => ((await chart.evaluate((c) => c.width)) > narrower[0] ? true : undefined));

  // Zoom in twice: the worker draws a quarter of the span about its middle; the
  // histogram keeps the whole span, greyed outside the window.
  await page.getByTestId('timeline-zoom-in').click();
  await page.getByTestId('timeline-zoom-in').click();
  // Two quick clicks add up: the second zooms the window the first asked for.
  const zoomed = await until('a window of a quarter of the span', async () => {
    const w = await chartWindow(page);
    return Math.abs((w.end - w.start) * 4 - (whole.end - whole.start)) <= 8 ? w : undefined;
  });
  assert.ok(Math.abs((zoomed.end - zoomed.start) * 4 - (whole.end - whole.start)) <= 8, JSON.stringify(zoomed));
  assert.ok(Math.abs((zoomed.start + zoomed.end) / 2 - (whole.start + whole.end) / 2) <= 4, JSON.stringify(zoomed));
  await painted(page);
  const track = page.getByTestId('timeline-histogram');
  const trackBox = await track.boundingBox();
  const grey = await canvasPixel(track, 3, 2);
  assert.ok(grey[3] > 0 && Math.abs(grey[0] - grey[2]) <= 2, `outside the window is greyed: ${grey}`);
  await screenshot(page, 'timeline-zoomed');
  await page.getByTestId('timeline-zoom-all').click();
  await until('the whole span again', async () => {
    const w = await chartWindow(page);
    return w.start === whole.start && w.end === whole.end ? w : undefined;
  });
  assert.ok(trackBox.width > 1000, 'the histogram spans the page');
  assert.ok(shares.chart > 0.05 && shares.track > 0.05, `boxes and bars cover the canvases: ${JSON.stringify(shares)}`);
  await page.close();
});

test('time order: a dragged range filters every view (the Top total equals the samples that start in it), survives a reload, and its chip clears it', async (t) => {
  if (!requireFixtures(t)) return;
  const samples = cpuprofileSamples(CPUPROFILE);
  const wholeTotal = samples.reduce((s, x) => s + x.wall, 0);
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  // Served from the page's own origin: a url= source comes back on reload.
  await page.route((url) => url.pathname === '/profiles/hello.cpuprofile', (route) => route.fulfill({ body: readFileSync(join(fixtures, CPUPROFILE)) }));
  await page.goto(`${server.base}/?url=/profiles/hello.cpuprofile#view=timeline`);
  await painted(page);
  const whole = await chartWindow(page);

  await dragAcross(page, page.getByTestId('timeline-histogram'), 0.25, 0.6);
  await page.getByTestId('range-chip').waitFor();
  const [from, to] = await rangeInAddress(page);
  const span = whole.end - whole.start;
  assert.ok(Math.abs(from - (whole.start + 0.25 * span)) < span / 100 && Math.abs(to - (whole.start + 0.6 * span)) < span / 100, `${from}~${to}`);
  const inRange = samples.filter((s) => s.start >= from && s.start < to);
  const rangeTotal = inRange.reduce((s, x) => s + x.wall, 0);
  assert.ok(inRange.length > 0 && rangeTotal < wholeTotal, `${inRange.length} samples, ${rangeTotal} of ${wholeTotal} µs`);
  // The chart still shows every sample, with the range drawn on it (translucent blue
  // over the axis, nothing outside it).
  assert.deepEqual(await chartWindow(page), whole, 'the timeline is not restricted to its range');
  const chart = page.getByTestId('timeline');
  const width = (await chart.boundingBox()).width;
  const inside = await canvasPixel(chart, width * 0.45, 2);
  const outside = await canvasPixel(chart, width * 0.1, 2);
  // Blue inside; outside, at most a grey grid line.
  assert.ok(inside[3] > 0 && inside[2] > inside[0] + 50, `the range is drawn: ${inside}`);
  assert.ok(outside[3] === 0 || outside[2] - outside[0] < 20, `not outside it: ${outside}`);
  await screenshot(page, 'timeline-range');

  await page.getByTestId('view-top').click();
  assert.match(await page.getByTestId('range-chip').textContent(), /^time .+ – .+ \(.+\)/);
  await expectTopTotal(page, rangeTotal, 'the Top total of the range');

  await page.reload();
  await page.getByTestId('range-chip').waitFor();
  assert.deepEqual(await rangeInAddress(page), [from, to], 'the range is kept in the address');
  await expectTopTotal(page, rangeTotal, 'the Top total of the range after a reload');
  await screenshot(page, 'timeline-range-top');

  await page.getByRole('button', { name: 'clear the time range' }).click();
  await page.getByTestId('range-chip').waitFor({ state: 'detached' });
  await expectTopTotal(page, wholeTotal, 'the whole Top total again');
  assert.doesNotMatch(await page.evaluate(() => location.hash), /range=/);
  await page.close();
});

test('time order: Firefox and samply profiles get a lane per thread; switching the profile tab clears the range', async (t) => {
  if (!requireFixtures(t)) return;
  const lanes = { 'ls-profile.json': firefoxLanes(SAMPLY), 'processed-3.json': firefoxLanes(PROCESSED) };
  assert.deepEqual(lanes['processed-3.json'], ['GeckoMain', 'Compositor']);
  const { page } = await openPage(browser, server.base);
  await page.setViewportSize({ width: 1280, height: 800 });
  await loadFixtures(page, SAMPLY, PROCESSED);
  await until('both profiles', async () => ((await page.getByTestId('profile-tab').count()) === 2 ? true : undefined));
  await page.getByTestId('view-timeline').click();
  const activeTab = page.locator('[data-testid=profile-tab].active .tab-name');
  for (let round = 0; round < 2; round += 1) {
    const name = await activeTab.textContent();
    await painted(page);
    await until(`${name}'s lanes`, async () => {
      const shown = await page.getByTestId('lane-label').allTextContents();
      return JSON.stringify(shown) === JSON.stringify(lanes[name]) ? shown : undefined;
    }).catch(async (e) => {
      assert.deepEqual(await page.getByTestId('lane-label').allTextContents(), lanes[name], name);
      throw e;
    });
    await screenshot(page, `timeline-${name.replace('.json', '')}`);
    // A range dragged on the chart itself; another profile's tab clears it.
    await dragAcross(page, page.getByTestId('timeline'), 0.2, 0.5, AXIS + LANE_HEAD + 8);
    await page.getByTestId('range-chip').waitFor();
    await rangeInAddress(page);
    await page.locator('[data-testid=profile-tab]:not(.active) .tab-name').click();
    await page.getByTestId('range-chip').waitFor({ state: 'detached' });
    assert.doesNotMatch(await page.evaluate(() => location.hash), /range=/);
  }
  await page.close();
});

test('time order: a Go pprof CPU profile has no sample times, and the view says so', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage(browser, server.base);
  await loadFixtures(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('view-timeline').click();
  const unavailable = page.getByTestId('timeline-unavailable');
  await unavailable.waitFor();
  assert.match(await unavailable.textContent(), /no sample times: its format \(\w+\) does not say when samples were taken/);
  assert.equal(await page.getByTestId('timeline').count(), 0, 'no empty canvas');
  assert.equal(await page.getByTestId('error').count(), 0, 'not an error');
  await screenshot(page, 'timeline-unavailable');
  await page.close();
});
