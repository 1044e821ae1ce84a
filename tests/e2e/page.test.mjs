// End-to-end: the built page served by `stacklens serve`, in headless Chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import { execFileSync } from 'node:child_process';
import { gunzipSync } from 'node:zlib';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import {
  startServer, launchBrowser, fixtures, requireFixtures, requireGo, screenshot, openPage as open, loadFixtures as load,
  keptFiles, pageTopTable, pprofTop, workerMemoryMB, pprofShown, pprofFileTable, pprofValue, expectTopTable, canvasPixel, hslRgb, sameColour, hoverText, until, stacklensBin,
} from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

const openPage = () => open(browser, server.base);
const ROW = 18; // CSS pixels per flame graph row

/** The flame graph once painted, and its CSS size. */
async function paintedFlame(page, scope = page) {
  const canvas = scope.getByTestId('flamegraph');
  await canvas.waitFor();
  await until('the flame graph to be painted', () => canvas.evaluate((c) => (c.width > 0 ? true : undefined)));
  const { width, height } = await canvas.boundingBox();
  return { canvas, width, height };
}

/**
 * Asserts the root frame is painted (its grey fill across the bottom row, or the top row
 * of an icicle) and its tooltip reads `total` (pprof's "Total samples").
 */
async function assertRoot(flame, total, icicle = false) {
  const y = icicle ? ROW / 2 : flame.height - ROW / 2;
  for (const x of [4, flame.width / 2, flame.width - 4]) {
    assert.ok(sameColour(await canvasPixel(flame.canvas, x, y), hslRgb(0, 0, 70)), `the root's grey at (${x}, ${y})`);
  }
  const tip = await hoverText(flame.canvas, flame.width / 2, y);
  assert.equal(tip.name, 'root');
  assert.match(tip.text, new RegExp(`total ${total.replace('.', '\\.')} \\(100%\\)`));
}

/** The diff table's raw [flat, cum] deltas for a function, or undefined when it has no row. */
async function diffDeltas(page, name) {
  const row = page.getByTestId('diff-row').filter({ has: page.locator(`[data-col=name][data-value="${name}"]`) });
  if ((await row.count()) !== 1) return undefined;
  return [Number(await row.locator('[data-col=flat]').getAttribute('data-value')),
    Number(await row.locator('[data-col=cum]').getAttribute('data-value'))];
}

test('cpu profile: top table equals go tool pprof; flame graph paints; nothing leaves the page', async (t) => {
  if (!requireFixtures(t)) return;
  const { page, requests } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await assertRoot(await paintedFlame(page), '7.08s');
  await screenshot(page, 'flame-cpu');

  await page.getByTestId('view-top').click();
  await expectTopTable(page, pprofFileTable('go/base/cpu.pprof-top.txt', 20), 'go tool pprof -top');
  await screenshot(page, 'top-cpu');
  const origin = new URL(server.base).origin;
  const foreign = requests.filter((u) => !u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith('blob:'));
  assert.deepEqual(foreign, [], 'the page made requests to other origins');
  const api = requests.filter((u) => new URL(u).pathname.startsWith('/api/'));
  assert.deepEqual(api, [], 'the page talked to the server without being asked to share');
  await page.close();
});

test('flame graph: search highlights and reports the matched share; hover, zoom and Esc', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  const flame = await paintedFlame(page);
  const { canvas } = flame;
  await page.keyboard.press('/');
  await page.keyboard.type('compress/flate');
  const matched = page.locator('[data-testid=search-matched][data-value]');
  await matched.waitFor();
  // The samples with a compress/flate frame: what pprof keeps with -focus=compress/flate
  // (3.13s of 7.08s, every node shown).
  const focused = pprofShown(pprofTop(['-nodecount=100000', '-nodefraction=0', '-focus=compress/flate'], 'go/base/cpu.pb.gz'));
  assert.equal(focused, 3130000000);
  assert.equal(await matched.getAttribute('data-value'), String(focused));
  assert.equal(await matched.textContent(), 'matched 44.21%');
  // Matches are magenta, the rest grey: the root (no match) turns light grey, and every
  // magenta frame along the row above the workload's names a compress/flate function.
  const grey = hslRgb(0, 0, 82);
  const magenta = hslRgb(300, 70, 60);
  await until('the search highlight', async () => (sameColour(await canvasPixel(canvas, flame.width / 2, flame.height - ROW / 2), grey) ? true : undefined));
  const hits = await canvas.evaluate((c, [magenta, row]) => {
    const scale = c.width / c.clientWidth;
    const found = [];
    for (let y = c.clientHeight - row / 2; y > 0; y -= row) {
      const line = c.getContext('2d').getImageData(0, Math.floor(y * scale), c.width, 1).data;
      const x = [...Array(c.width).keys()].find((i) => magenta.every((v, k) => Math.abs(line[4 * i + k] - v) <= 1) && [1, 2, 3].every((d) => magenta.every((v, k) => Math.abs(line[4 * (i + d) + k] - v) <= 1)));
      if (x !== undefined) found.push({ x: x / scale + 2, y });
    }
    return found;
  }, [magenta, ROW]);
  assert.ok(hits.length >= 5, `magenta frames on ${hits.length} rows`);
  for (const h of hits) {
    assert.match((await hoverText(canvas, h.x, h.y)).name, /compress\/flate/, `the magenta frame at (${h.x}, ${h.y})`);
  }
  await screenshot(page, 'flame-search');
  await page.getByTestId('search').fill('');
  await until('the colours back', async () => (sameColour(await canvasPixel(canvas, flame.width / 2, flame.height - ROW / 2), hslRgb(0, 0, 70)) ? true : undefined));

  // Hover the root row (bottom of the flame graph): the tooltip names it.
  await assertRoot(flame, '7.08s');
  const box = await canvas.boundingBox();
  // Click a frame one row up: zoom in, a breadcrumb appears; Esc resets.
  await page.mouse.click(box.x + 3, box.y + box.height - 18 - 5);
  await page.getByTestId('breadcrumb').waitFor();
  await screenshot(page, 'flame-zoomed');
  await page.mouse.move(box.x + 3, box.y + 3);
  await page.keyboard.press('Escape');
  await page.getByTestId('breadcrumb').waitFor({ state: 'detached' });
  await page.close();
});

test('switching the sample type of a heap profile changes the table', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/heap.pb.gz');
  await page.getByTestId('view-top').click();
  const select = page.getByTestId('sample-type');
  await select.waitFor();
  assert.equal(await select.locator('option:checked').textContent(), 'inuse_space');
  // pprof prints bytes rounded to 0.01 MB: compare names, and values at that precision.
  const mb = (rows) => rows.map((r) => ({ ...r, flat: (r.flat / 1048576).toFixed(2), cum: (r.cum / 1048576).toFixed(2) }));
  const top = async (n) => mb(await pageTopTable(page, n));
  assert.deepEqual(await top(5), mb(pprofFileTable('go/base/heap.inuse_space.pprof-top.txt', 5)));
  await select.selectOption({ label: 'alloc_objects' });
  await expectTopTable(page, pprofFileTable('go/base/heap.alloc_objects.pprof-top.txt', 5), 'pprof -sample_index=alloc_objects');
  await screenshot(page, 'top-heap-alloc-objects');
  await page.close();
});

test('diff: base and compare cpu profiles show pprof -diff_base\'s changes', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('flamegraph').waitFor();
  await load(page, 'go/compare/cpu.pb.gz');
  await page.getByTestId('view-diff').click();
  await page.getByTestId('diff-table').waitFor();
  // pprof's five largest changes: findMatch +0.65s, memmove -0.32s, partition_func -0.25s…
  for (const r of pprofFileTable('go/compare/cpu.diff-vs-base.pprof-top.txt', 5)) {
    assert.deepEqual(await diffDeltas(page, r.name), [r.flat, r.cum], r.name);
  }
  assert.equal(await page.getByTestId('overall-delta').textContent(), '-2.54%');
  // The whole profile shrank (7.08s → 6.90s): the diff flame graph's root is blue.
  const flame = await paintedFlame(page);
  const root = await canvasPixel(flame.canvas, flame.width / 2, flame.height - ROW / 2);
  assert.ok(sameColour(root, hslRgb(220, 80, 91)), `root ${root}`);
  await screenshot(page, 'diff-cpu');
  await page.close();
});

test('goroutines: a debug=2 dump shows 453, and growth against a later snapshot', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/goroutine.debug2.txt');
  const count = page.getByTestId('goroutine-count');
  await count.waitFor();
  assert.equal(await count.textContent(), '453');
  await screenshot(page, 'goroutines-base');
  await load(page, 'go/compare/goroutine.debug2.txt');
  await page.waitForFunction(() => document.querySelector('[data-testid=goroutine-count]')?.textContent === '1617');
  assert.equal(await page.getByTestId('growth-count').textContent(), '+1164');
  await page.getByTestId('goroutine-filter').fill('janitorLoop');
  await page.waitForFunction(() => document.querySelector('[data-testid=goroutine-count]')?.textContent === '24');
  await screenshot(page, 'goroutines-growth');
  await page.close();
});

test('a corrupt file shows an error naming it, and what is loaded stays', async (t) => {
  if (!requireFixtures(t)) return;
  const dir = mkdtempSync(join(tmpdir(), 'stacklens-corrupt-'));
  const bad = join(dir, 'broken.pb.gz');
  writeFileSync(bad, Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x01, 0x02]));
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('flamegraph').waitFor();
  await page.getByTestId('file-input').setInputFiles(bad);
  const error = page.getByTestId('error');
  await error.waitFor();
  const text = await error.textContent();
  assert.match(text, /broken\.pb\.gz/);
  assert.match(text, /gzip/i);
  assert.equal(await page.getByTestId('profile-tab').count(), 1, 'the cpu profile is still loaded');
  await assertRoot(await paintedFlame(page), '7.08s'); // and still drawn
  await screenshot(page, 'error-corrupt');
  await page.close();
});

test('pasted goroutine dump text is analysed', async () => {
  const { page } = await openPage();
  await page.locator('summary', { hasText: 'Paste text' }).click();
  await page.getByTestId('paste-input').fill('goroutine 1 [chan send, 3 minutes]:\nmain.f()\n\t/src/a.go:3 +0x1\n\ngoroutine 2 [select]:\nmain.g()\n\t/src/a.go:9 +0x1\n');
  await page.getByTestId('paste-load').click();
  const count = page.getByTestId('goroutine-count');
  await count.waitFor();
  assert.equal(await count.textContent(), '2');
  assert.equal(await page.getByTestId('blocked-count').textContent(), '2');
  await page.close();
});

test('sandwich: callers and callees of a function from the top table', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('view-top').click();
  const row = page.getByTestId('top-row').filter({ has: page.locator('[data-value="compress/flate.(*compressor).deflate"]') });
  await row.getByTestId('sandwich-button').click();
  assert.equal(await page.getByTestId('sandwich-function').textContent(), 'compress/flate.(*compressor).deflate');
  // `go tool pprof -peek 'compressor..deflate$' -nodefraction=0 -edgefraction=0 go/base/cpu.pb.gz`: deflate's cum is 3.08s;
  // callers (*compressor).close 1.30s and (*compressor).write 1.78s; callees findMatch
  // 2.11s, writeBlock 0.30s, hash4 0.05s, runtime.asyncPreempt 0.15s. Over each half's
  // root is deflate: callers grow up from the bottom row, callees hang down from the top
  // row; frames in name order.
  const halves = {
    'sandwich-callers': { rowY: (h, row) => h - row * ROW - ROW / 2, icicle: false, frames: [['compress/flate.(*compressor).close', 1.30], ['compress/flate.(*compressor).write', 1.78]] },
    'sandwich-callees': { rowY: (h, row) => row * ROW + ROW / 2, icicle: true, frames: [['compress/flate.(*compressor).findMatch', 2.11], ['compress/flate.(*compressor).writeBlock', 0.30]] },
  };
  for (const [half, { rowY, icicle, frames }] of Object.entries(halves)) {
    const flame = await paintedFlame(page, page.getByTestId(half));
    await assertRoot(flame, '3.08s', icicle);
    const deflate = await hoverText(flame.canvas, flame.width / 2, rowY(flame.height, 1));
    assert.equal(deflate.name, 'compress/flate.(*compressor).deflate', half);
    assert.match(deflate.text, /total 3\.08s \(100%\)/, half);
    let x = 0;
    for (const [name, seconds] of frames) {
      const w = (seconds / 3.08) * flame.width;
      const tip = await hoverText(flame.canvas, x + w / 2, rowY(flame.height, 2));
      assert.deepEqual([tip.name, pprofValue(/total (\S+) \(/.exec(tip.text)[1])], [name, Math.round(seconds * 1e9)], half);
      x += w;
    }
  }
  await screenshot(page, 'sandwich');
  await page.close();
});

test('url= loads a profile and the hash restores view, sample type and zoom on reload', async (t) => {
  if (!requireFixtures(t)) return;
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  // Serve a fixture from the page's own origin.
  await page.route((url) => url.pathname === '/profiles/cpu.pb.gz', (route) => route.fulfill({ body: readFileSync(join(fixtures, 'go/base/cpu.pb.gz')) }));
  await page.goto(`${server.base}/?url=/profiles/cpu.pb.gz#view=top&sample=samples`);
  const first = page.getByTestId('top-row').first();
  await first.waitFor();
  assert.equal(await page.getByTestId('sample-type').locator('option:checked').textContent(), 'samples');
  assert.equal(await first.locator('[data-col=flat]').getAttribute('data-value'), '134', 'findMatch: 134 samples');

  await page.getByTestId('view-flame').click();
  const canvas = page.getByTestId('flamegraph');
  await canvas.waitFor();
  const box = await canvas.boundingBox();
  await page.mouse.click(box.x + 3, box.y + box.height - 18 - 5);
  await page.getByTestId('breadcrumb').waitFor();
  const crumbs = await page.getByTestId('breadcrumb').locator('button').allTextContents();
  await page.waitForFunction(() => location.hash.includes('zoom='));
  assert.match(await page.evaluate(() => location.hash), /view=flame/);

  await page.reload();
  await page.getByTestId('breadcrumb').waitFor();
  assert.deepEqual(await page.getByTestId('breadcrumb').locator('button').allTextContents(), crumbs, 'zoom restored');
  assert.equal(await page.getByTestId('sample-type').locator('option:checked').textContent(), 'samples');
  await page.close();
});

test('the address follows a run of zoom clicks with a write every 200 ms at most, and a view change at once', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  // Counts the page's address writes.
  await page.evaluate(() => {
    window.addressWrites = 0;
    const replace = history.replaceState.bind(history);
    history.replaceState = (...args) => { window.addressWrites += 1; return replace(...args); };
  });
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('view-flame').click();
  await paintedFlame(page);
  await page.waitForFunction(() => location.hash.includes('view=flame'));
  // Eleven clicks, each handled before the next (a task between them), alternately on a
  // frame two rows up and on the root, ending zoomed in.
  const { writes, elapsed } = await page.evaluate(async () => {
    const c = document.querySelector('[data-testid=flamegraph]');
    const r = c.getBoundingClientRect();
    const before = window.addressWrites;
    const t0 = performance.now();
    for (let i = 0; i < 11; i++) {
      const y = i % 2 ? r.bottom - 4 : r.bottom - 18 * 2 - 4;
      c.dispatchEvent(new MouseEvent('click', { clientX: r.left + 3, clientY: y, bubbles: true }));
      await new Promise((ok) => { const ch = new MessageChannel(); ch.port1.onmessage = ok; ch.port2.postMessage(0); });
    }
    return { writes: window.addressWrites - before, elapsed: performance.now() - t0 };
  });
  assert.ok(writes <= Math.floor(elapsed / 200) + 1, `${writes} address writes in ${elapsed.toFixed(0)} ms of zoom clicks`);
  // The last zoom reaches the address, and is what a reload restores.
  const crumbs = await page.getByTestId('breadcrumb').locator('button').allTextContents();
  await page.waitForFunction(() => location.hash.includes('zoom='));
  // Another view is written at once.
  await page.getByTestId('view-top').click();
  assert.match(await page.evaluate(() => location.hash), /view=top/);
  await page.reload();
  await page.getByTestId('top-row').first().waitFor();
  await page.getByTestId('view-flame').click();
  await page.getByTestId('breadcrumb').waitFor();
  assert.deepEqual(await page.getByTestId('breadcrumb').locator('button').allTextContents(), crumbs, 'the zoom restored');
  await page.close();
});

test('zooming back out shows the wider window at once, without asking the worker for it again', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('view-flame').click();
  const { canvas, height } = await paintedFlame(page);
  // The worker's measures of one kind ("stacklens tree": one per window it cut), by start.
  const measures = async (name) => {
    const starts = [];
    for (const w of page.workers()) starts.push(...await w.evaluate((n) => performance.getEntriesByType('measure').filter((m) => m.name === n).map((m) => m.startTime), name));
    return starts.sort((a, b) => a - b);
  };
  const windowsCut = async () => (await measures('stacklens tree')).length;
  await until('the root window', async () => ((await windowsCut()) > 0 ? true : undefined));
  const before = await windowsCut();
  const detailsBefore = (await measures('stacklens details')).length;
  await canvas.click({ position: { x: 3, y: height - ROW * 2 - 5 } });
  await until('the zoomed frame\'s window', async () => ((await windowsCut()) === before + 1 ? true : undefined));
  await page.getByTestId('details-name').waitFor();
  await until('the zoomed frame\'s details', async () => ((await measures('stacklens details')).length === detailsBefore + 1 ? true : undefined));
  // The worker answers in order: the window is cut before the (slower) details.
  const [windowAt, detailsAt] = [(await measures('stacklens tree')).at(-1), (await measures('stacklens details')).at(-1)];
  assert.ok(windowAt < detailsAt, `the zoom's window (at ${windowAt.toFixed(1)} ms) is cut before its frame's details (at ${detailsAt.toFixed(1)} ms)`);
  await page.waitForFunction(() => location.hash.includes('zoom='));
  const zoomed = await canvas.evaluate((c) => c.toDataURL());
  await page.keyboard.press('Escape');
  await until('the root graph again', async () => ((await canvas.evaluate((c) => c.toDataURL())) !== zoomed ? true : undefined));
  await page.waitForFunction(() => !location.hash.includes('zoom='));
  assert.equal(await windowsCut(), before + 1, 'no window asked for after zooming out');
  // Zooming in again: that window was kept too, and its frame is the function selected.
  await canvas.click({ position: { x: 3, y: height - ROW * 2 - 5 } });
  await until('the zoomed graph again', async () => ((await canvas.evaluate((c) => c.toDataURL())) === zoomed ? true : undefined));
  assert.equal(await windowsCut(), before + 1, 'no window asked for after zooming in again');
  // The worker answers in order: once the top table (asked for after) is shown, any
  // details asked for by the zoom would have been measured.
  await page.getByTestId('view-top').click();
  await page.getByTestId('top-row').first().waitFor();
  assert.equal((await measures('stacklens details')).length, detailsBefore + 1, 'the selected function\'s details not asked for again');
  await page.close();
});

test('a url= that cannot be fetched says so in the page', async () => {
  const page = await browser.newPage();
  await page.goto(`${server.base}/#url=/missing/profile.pb.gz`);
  const error = page.getByTestId('error');
  await error.waitFor();
  assert.match(await error.textContent(), /missing\/profile\.pb\.gz.*(404|could not fetch)/);
  await page.close();
});

/**
 * Stops the analysis worker in the middle of a parse, whatever its speed: the page's
 * worker.js is served with a prelude whose postMessage, once the worker has reported
 * more than 10% of a 13.7 MB parse, makes a synchronous request that the test answers
 * only on `release()`. `holding` resolves when the worker is held.
 */
async function holdWorkerMidParse(page) {
  let release, held;
  const released = new Promise((r) => { release = r; });
  const holding = new Promise((r) => { held = r; });
  await page.route((u) => u.pathname === '/__e2e/hold', async (route) => {
    held();
    await released;
    await route.fulfill({ body: 'go' }).catch(() => {}); // the worker may be gone (cancelled)
  });
  await page.route((u) => u.pathname.endsWith('/worker.js'), async (route) => {
    const original = await route.fetch();
    const prelude = `{
      const post = self.postMessage.bind(self);
      let held = false;
      self.postMessage = (message, ...rest) => {
        post(message, ...rest);
        const m = typeof message?.[0] === 'string' && /"stage":"[a-z ]+ 13\\.7 MB","fraction":([0-9.]+)/.exec(message[0]);
        if (!held && m && Number(m[1]) > 0.1) {
          held = true;
          const x = new XMLHttpRequest();
          x.open('GET', '/__e2e/hold', false);
          x.send();
        }
      };
    }\n`;
    await route.fulfill({ response: original, body: prelude + (await original.text()) });
  });
  return { holding, release };
}

test('the large profile parses in the worker: the page answers meanwhile, and cancel stops it', async (t) => {
  if (!requireFixtures(t)) return;
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const worker = await holdWorkerMidParse(page);
  await page.goto(server.base);
  await load(page, 'large/cpu.large.pb.gz');
  const row = page.getByTestId('loading');
  await row.waitFor();
  // The bar moves as the worker inflates and decodes; past 10% the worker is held.
  let timer;
  await Promise.race([worker.holding, new Promise((_, fail) => { timer = setTimeout(() => fail(new Error('the worker never reached 10%')), 60000); })]);
  clearTimeout(timer);
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=loading] progress')?.value) > 0.1);
  assert.match(await row.textContent(), /(inflating|decoding) 13\.7 MB/);
  // The parse is unfinished (its worker is held), and the page runs script and takes input.
  await page.getByTestId('paste-input').evaluate((e) => e.closest('details').open = true);
  await page.getByTestId('paste-input').fill('typed while parsing');
  assert.equal(await page.getByTestId('paste-input').inputValue(), 'typed while parsing');
  assert.equal(await row.count(), 1, 'still parsing while the page answered');
  await screenshot(page, 'parsing-large');
  await page.getByTestId('cancel-parse').click();
  await row.waitFor({ state: 'detached' });
  worker.release();
  assert.equal(await page.getByTestId('profile-tab').count(), 0, 'a cancelled parse adds nothing');
  // The restarted worker serves the next file.
  await load(page, 'go/base/cpu.pb.gz');
  await assertRoot(await paintedFlame(page), '7.08s');
  assert.deepEqual(await page.getByTestId('profile-tab').locator('.tab-name').allTextContents(), ['cpu.pb.gz']);
  await page.close();
});

test('the large profile loads completely and its top row equals pprof', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'large/cpu.large.pb.gz');
  const canvas = page.getByTestId('flamegraph');
  await canvas.waitFor({ timeout: 120000 });
  // The page holds a window of the 4.45M-node tree; zooming asks the worker for a
  // finer one, and the search share is counted over the whole tree.
  const box = await canvas.boundingBox();
  await page.mouse.click(box.x + box.width / 2, box.y + box.height - 18 * 2 - 5);
  await page.getByTestId('breadcrumb').waitFor();
  await page.waitForFunction(() => location.hash.includes('zoom='));
  await page.getByTestId('search').fill('runtime.asyncPreempt');
  await page.locator('[data-testid=search-matched][data-value]').waitFor();
  // runtime.asyncPreempt is a leaf: the samples it is in are its cum, 1239.76s of 2587.10s.
  const [preempt] = pprofFileTable('large/cpu.large.pprof-top.txt', 1);
  assert.deepEqual([preempt.name, preempt.cum], ['runtime.asyncPreempt', 1239760000000]);
  assert.equal(await page.getByTestId('search-matched').getAttribute('data-value'), String(preempt.cum));
  assert.equal(await page.getByTestId('search-matched').textContent(), 'matched 47.92%');
  await screenshot(page, 'flame-large-zoomed');
  await page.keyboard.press('Escape');
  await page.getByTestId('view-top').click();
  await page.getByTestId('top-row').first().waitFor({ timeout: 60000 });
  // pprof drops the nodes whose cum is at most 0.5% of the total ("Dropped 366 nodes (cum
  // <= 12.94s)"); the page lists them all. Without those, the same rows.
  const cutoff = pprofValue(/Dropped \d+ nodes \(cum <= (\S+)\)/.exec(readFileSync(join(fixtures, 'large/cpu.large.pprof-top.txt'), 'utf8'))[1]);
  // "(inline)" marks depend on the rows shown (an edge from a row pprof drops counts on
  // the page), so they are compared where both show the same rows, not here.
  const unmarked = (rows) => rows.map(({ inline, ...row }) => row);
  const kept = (await pageTopTable(page, 200)).filter((r) => r.cum > cutoff).slice(0, 20);
  assert.deepEqual(unmarked(kept), unmarked(pprofFileTable('large/cpu.large.pprof-top.txt', 20)), 'go tool pprof -top of the large profile');
  await screenshot(page, 'top-large');
  // Issue 13's ceiling for the worker after the large profile (flame graph, zoom, search,
  // top table), and closing it hands the memory back: the worker is replaced.
  const held = await workerMemoryMB(page);
  assert.ok(held > 100 && held <= 300, `the worker holds ${held} MB of WebAssembly memory`);
  await page.getByTestId('profile-tab').locator('.tab-close').click();
  const after = await until('the worker to give its memory back', async () => {
    const mb = await workerMemoryMB(page);
    return mb > 0 && mb < 32 ? mb : undefined;
  });
  assert.ok(after < held / 4, `${after} MB after closing, ${held} MB before`);
  console.log(`worker memory: ${held} MB with the large profile, ${after} MB after closing it`);
  // The new worker serves the next file.
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('view-flame').click();
  await assertRoot(await paintedFlame(page), '7.08s');
  await page.close();
});

test('a large gzip profile still opens when the inflate worker cannot start', async (t) => {
  if (!requireFixtures(t)) return;
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  // The analysis worker's script is served asking for an inflater that is not there
  // (a nested worker's own requests cannot be routed here).
  let rewritten = 0;
  await page.route((u) => u.pathname.endsWith('/worker.js'), async (route) => {
    const original = await (await route.fetch()).text();
    const body = original.replace("'inflate-worker.js'", "'no-such-inflate-worker.js'");
    if (body !== original) rewritten += 1;
    await route.fulfill({ body, contentType: 'text/javascript' });
  });
  await page.goto(server.base);
  await load(page, 'large/cpu.large.pb.gz');
  await page.getByTestId('flamegraph').waitFor({ timeout: 120000 });
  assert.ok(rewritten >= 1, 'the analysis worker was given a missing inflater');
  await page.getByTestId('view-top').click();
  await page.getByTestId('top-row').first().waitFor({ timeout: 60000 });
  const [first] = await pageTopTable(page, 1);
  assert.deepEqual(first, pprofFileTable('large/cpu.large.pprof-top.txt', 1)[0], 'the top row of go tool pprof -top');
  await page.close();
});

test('keyboard: arrows move through the top table and Enter focuses the flame graph', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('view-top').click();
  await page.getByTestId('top-row').first().waitFor();
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowDown');
  const selected = page.locator('[data-testid=top-row][aria-selected=true] [data-col=name]');
  assert.equal(await selected.getAttribute('data-value'), 'compress/flate.(*compressor).deflate');
  await page.keyboard.press('Enter');
  await page.getByTestId('flamegraph').waitFor();
  assert.equal(await page.getByTestId('focus').inputValue(), '^compress/flate\\.\\(\\*compressor\\)\\.deflate$');
  // Focused on deflate: the root holds deflate's cum (pprof: 3.08s), and up the middle
  // column is deflate as called by (*compressor).write, 1.78s of it (`go tool pprof -peek`),
  // with its file (`go tool pprof -raw`: deflate.go).
  const flame = await paintedFlame(page);
  await assertRoot(flame, '3.08s');
  let deflate;
  for (let y = flame.height - ROW / 2; y > 0 && !deflate; y -= ROW) {
    const tip = await hoverText(flame.canvas, flame.width / 2, y);
    if (tip.name === 'compress/flate.(*compressor).deflate') deflate = tip.text;
  }
  assert.match(deflate, /^compress\/flate\.\(\*compressor\)\.deflate\/usr\/lib\/go-1\.19\/src\/compress\/flate\/deflate\.gototal 1\.78s \(57\.79%\)/);
  await page.close();
});

test('share: the link opens the same profile in a fresh browser; a saved baseline is compared with', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('view-top').click();
  const expected = pprofFileTable('go/base/cpu.pprof-top.txt', 10);
  await expectTopTable(page, expected, 'go tool pprof -top');
  // Nothing left out in the panel: the profile is uploaded as opened.
  await page.getByTestId('share').click();
  await page.getByTestId('share-upload').click();
  const link = page.getByTestId('share-url');
  await link.waitFor();
  const url = await link.inputValue();
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/#\/s\/sess-[0-9a-f]{32}$/);
  await screenshot(page, 'share-link');

  // A fresh context: no storage, nothing loaded; the link alone brings the profile.
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const other = await fresh.newPage();
  await other.goto(url);
  await other.getByTestId('flamegraph').waitFor();
  await other.getByTestId('view-top').click();
  await expectTopTable(other, expected, 'the shared profile is go/base/cpu.pb.gz');
  assert.deepEqual(await other.getByTestId('profile-tab').locator('.tab-name').allTextContents(), ['cpu.pb.gz']);
  await screenshot(other, 'share-opened');
  await fresh.close();

  // Save it as a baseline, load a later profile and compare it with the latest baseline.
  await page.getByTestId('baseline-menu').locator('summary').click();
  await page.getByTestId('baseline-label').fill('release 1.0');
  await page.getByTestId('baseline-tags').fill('release, e2e');
  await page.getByTestId('save-baseline').click();
  assert.match(await page.getByTestId('baseline-saved').textContent(), /release 1\.0.*cpu/);
  await page.getByTestId('list-baselines').click();
  await page.getByTestId('baseline-row').first().waitFor();
  assert.match(await page.getByTestId('baseline-row').first().textContent(), /cpu.*latest.*release 1\.0/);
  await load(page, 'go/compare/cpu.pb.gz');
  await page.getByTestId('profile-tab').nth(1).waitFor();
  await page.getByTestId('compare-baseline').click();
  await page.getByTestId('diff-table').waitFor();
  assert.equal(await page.getByTestId('overall-delta').textContent(), '-2.54%', 'base = the baseline, compare = the new profile');
  for (const r of pprofFileTable('go/compare/cpu.diff-vs-base.pprof-top.txt', 5)) {
    assert.deepEqual(await diffDeltas(page, r.name), [r.flat, r.cum], `pprof -diff_base: ${r.name}`);
  }
  await screenshot(page, 'diff-against-baseline');
  await page.close();
});

test('share panel: it lists what the profile gives away, previews what is uploaded, and uploads only that', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('share').click();
  const inventory = page.getByTestId('sanitize-inventory');
  await until('the inventory', async () => ((await inventory.textContent()).includes('file paths') ? true : undefined));
  const listed = await inventory.textContent();
  assert.match(listed, /\d+ file paths \(\d+ under \/usr\/lib\/go-1\.19\/…/, listed);
  assert.match(listed, /label keys: endpoint, tenant/, listed);
  await page.getByTestId('strip-paths').selectOption('remove');
  await page.locator('[data-testid=strip-label][data-key=tenant]').check();
  // The preview is the sanitized profile's top table: pprof's numbers, unchanged.
  const expected = pprofFileTable('go/base/cpu.pprof-top.txt', 10);
  const preview = () => pageTopTable(page, expected.length, 'sanitize-row');
  await until('the preview', async () => (JSON.stringify(await preview()) === JSON.stringify(expected) ? true : undefined));
  await screenshot(page, 'share-sanitize-panel');
  await page.getByTestId('share-upload').click();
  const url = await page.getByTestId('share-url').inputValue();
  const id = /#\/s\/(sess-[0-9a-f]{32})$/.exec(url)?.[1];
  assert.ok(id, url);

  // What the server holds: no path, no tenant label; the endpoint label and every value kept.
  const raw = Buffer.from(await (await fetch(`${server.base}/api/v1/profiles/${id}/raw`)).arrayBuffer());
  const plain = gunzipSync(raw);
  const original = gunzipSync(readFileSync(join(fixtures, 'go/base/cpu.pb.gz')));
  assert.ok(original.includes('/usr/lib/go-1.19/src') && original.includes('tenant'), 'the fixture has both');
  assert.ok(!plain.includes('/usr/lib/go-1.19/src'), 'no file path was uploaded');
  const dir = mkdtempSync(join(tmpdir(), 'stacklens-e2e-sanitized-'));
  writeFileSync(join(dir, 'cpu.pb.gz'), raw);
  const tags = execFileSync(stacklensBin, ['tags', join(dir, 'cpu.pb.gz')]).toString();
  assert.match(tags, /endpoint/);
  assert.doesNotMatch(tags, /tenant/);

  // The link opens the sanitized profile with the same numbers.
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const other = await fresh.newPage();
  await other.goto(url);
  await other.getByTestId('flamegraph').waitFor();
  await other.getByTestId('view-top').click();
  await expectTopTable(other, expected, 'the shared, sanitized profile');
  await fresh.close();
  await page.close();
});

test('encrypted share: the server keeps bytes it cannot read, the link opens them elsewhere, a wrong key says so, the delete token revokes it', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('share').click();
  // Sanitized, then sealed: file paths removed.
  await page.getByTestId('strip-paths').selectOption('remove');
  const expected = pprofFileTable('go/base/cpu.pprof-top.txt', 10);
  const preview = () => pageTopTable(page, expected.length, 'sanitize-row');
  await until('the preview', async () => (JSON.stringify(await preview()) === JSON.stringify(expected) ? true : undefined));
  await page.getByTestId('share-encrypt').check();
  await page.getByTestId('share-expires').selectOption('7d');
  const upload = page.waitForRequest((r) => r.method() === 'POST' && new URL(r.url()).pathname.startsWith('/api/'));
  await page.getByTestId('share-upload').click();
  const sent = await upload;
  assert.equal(new URL(sent.url()).pathname, '/api/v1/blobs', 'only the blob route, which never parses');
  assert.equal(new URL(sent.url()).searchParams.get('expiresIn'), '7d');
  const url = await page.getByTestId('share-url').inputValue();
  const [, id, key] = /#\/e\/(blob-[0-9a-f]{32})\/([A-Za-z0-9_-]{43})$/.exec(url) ?? [];
  assert.ok(id && key, url);
  const expiry = await page.getByTestId('share-expiry').textContent();
  const days = (Date.parse(expiry.replace(/^expires /, '')) - Date.now()) / 86400e3;
  assert.ok(days > 6.9 && days <= 7, expiry);

  // What the server holds: not gzip, not a profile stacklens can read, no function or file name.
  const stored = Buffer.from(await (await fetch(`${server.base}/api/v1/blobs/${id}`)).arrayBuffer());
  assert.ok(stored.length > 1000, `${stored.length} bytes`);
  assert.notDeepEqual([...stored.subarray(0, 2)], [0x1f, 0x8b], 'not gzip');
  for (const name of [...expected.map((r) => r.name), 'cpu.pb.gz', 'runtime', 'compress/flate']) {
    assert.ok(!stored.includes(name), `the stored bytes contain ${name}`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'stacklens-e2e-encrypted-'));
  writeFileSync(join(dir, 'stored.bin'), stored);
  const read = (() => {
    try { execFileSync(stacklensBin, ['top', join(dir, 'stored.bin')], { stdio: 'pipe' }); return 0; } catch (e) { return e.status; }
  })();
  assert.equal(read, 4, 'stacklens top: not a profile');
  // The session routes refuse it: it is no profile of theirs.
  assert.equal((await fetch(`${server.base}/api/v1/profiles/${id}`)).status, 422);

  // Another browser opens the link: the page fetches the blob and opens it with the
  // fragment's key; the key is in no request.
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const other = await fresh.newPage();
  const seen = [];
  other.on('request', (r) => seen.push(`${r.url()} ${JSON.stringify(r.headers())}`));
  await other.goto(url);
  await other.getByTestId('flamegraph').waitFor();
  await other.getByTestId('view-top').click();
  await expectTopTable(other, expected, 'the encrypted profile, opened');
  assert.deepEqual(await other.getByTestId('profile-tab').locator('.tab-name').allTextContents(), ['cpu.pb.gz']);
  assert.ok(seen.some((r) => r.includes(`/api/v1/blobs/${id}`)), 'the blob was fetched');
  assert.ok(!seen.some((r) => r.includes(key)), 'the key reached no server');
  await screenshot(other, 'share-encrypted-opened');
  // A reload opens it again (the link stays in the address, key in the fragment).
  await other.reload();
  await expectTopTable(other, expected, 'the encrypted profile, after a reload');


  // A key of the right shape but not this one: a message, no tab.
  const wrongKey = (key[0] === 'A' ? 'B' : 'A') + key.slice(1);
  const wrong = await fresh.newPage();
  await wrong.goto(url.replace(key, wrongKey));
  const refused = wrong.getByTestId('error').filter({ hasText: "the link's key does not open this profile" });
  await refused.waitFor();
  assert.equal(await wrong.getByTestId('profile-tab').count(), 0);
  await screenshot(wrong, 'share-encrypted-wrong-key');

  // The delete token revokes it: the blob is gone, and the link says so.
  await page.getByTestId('share-delete').click();
  await page.getByTestId('share-deleted').waitFor();
  assert.equal((await fetch(`${server.base}/api/v1/blobs/${id}`)).status, 404);
  const gone = await fresh.newPage();
  await gone.goto(url);
  await gone.getByTestId('error').filter({ hasText: 'the encrypted link' }).waitFor();
  assert.equal(await gone.getByTestId('profile-tab').count(), 0);

  // Sealed as opened (nothing left out): its own link opens the same numbers.
  await page.getByTestId('share').click();
  await page.getByTestId('share-encrypt').check();
  await page.getByTestId('share-upload').click();
  await until('the second link', async () => {
    const second = await page.getByTestId('share-url').inputValue();
    return second !== url && second.includes('/#/e/') ? second : undefined;
  });
  const asOpened = await fresh.newPage();
  await asOpened.goto(await page.getByTestId('share-url').inputValue());
  await asOpened.getByTestId('flamegraph').waitFor();
  await asOpened.getByTestId('view-top').click();
  await expectTopTable(asOpened, expected, 'the profile sealed as opened');
  await asOpened.close();
  await fresh.close();
  await page.close();
});

test('a reload brings back the files opened in this tab; a removed file stays removed', async (t) => {
  if (!requireFixtures(t)) return;
  const { page, requests } = await openPage();
  await load(page, 'go/base/heap.pb.gz', 'go/base/goroutine.debug2.txt');
  await page.getByTestId('profile-tab').nth(1).waitFor();
  await page.getByTestId('goroutine-count').waitFor();
  await keptFiles(page, 2); // the bytes are kept asynchronously
  await page.reload();
  await page.getByTestId('goroutine-count').waitFor();
  assert.equal(await page.getByTestId('goroutine-count').textContent(), '453');
  const tabs = await page.getByTestId('profile-tab').locator('.tab-name').allTextContents();
  assert.deepEqual(tabs.sort(), ['goroutine.debug2.txt', 'heap.pb.gz']);
  await screenshot(page, 'restored-after-reload');
  // Remove the dump; after another reload only the heap profile comes back.
  await page.getByTestId('profile-tab').filter({ hasText: 'goroutine' }).locator('.tab-close').click();
  await keptFiles(page, 1);
  await page.reload();
  await page.getByTestId('profile-tab').first().waitFor();
  await page.getByTestId('loading').waitFor({ state: 'detached' });
  assert.deepEqual(await page.getByTestId('profile-tab').locator('.tab-name').allTextContents(), ['heap.pb.gz']);
  const api = requests.filter((u) => new URL(u).pathname.startsWith('/api/'));
  assert.deepEqual(api, [], 'restoring needs no server');
  await page.close();
});

test('a samply (Firefox Profiler) profile shows its flame graph and top table', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'thirdparty/samply/ls-profile.json');
  // The file's samples: weights summing to 13,069 (13,083 with the 11 stackless ones) at a
  // 0.25 ms interval: 3.27s.
  await assertRoot(await paintedFlame(page), '3.27s');
  await page.getByTestId('view-top').click();
  const first = page.getByTestId('top-row').first();
  await first.waitFor();
  assert.equal(await first.locator('[data-col=name]').getAttribute('data-value'), 'libc.so.6!0xb27a8');
  assert.equal(await first.locator('[data-col=flat]').getAttribute('data-value'), String(11938 * 250000));
  await screenshot(page, 'top-samply');
  await page.close();
});

test('capture history: captures of a service on the range timeline, per profile type', async (t) => {
  if (!requireFixtures(t)) return;
  // A stand-in for a Go service's net/http/pprof handlers, serving real profiles:
  // the heap endpoint alternates between two snapshots.
  let heaps = 0;
  const target = createServer((req, res) => {
    const file = req.url.startsWith('/debug/pprof/heap')
      ? (heaps++ % 2 ? 'go/compare/heap.pb.gz' : 'go/base/heap.pb.gz')
      : req.url.startsWith('/debug/pprof/goroutine') ? 'go/base/goroutine.debug2.txt' : null;
    if (!file) { res.writeHead(404).end(); return; }
    res.writeHead(200).end(readFileSync(join(fixtures, file)));
  });
  await new Promise((ok) => target.listen(0, '127.0.0.1', ok));
  const dir = mkdtempSync(join(tmpdir(), 'stacklens-targets-'));
  const targets = join(dir, 'targets.toml');
  writeFileSync(targets, `[[target]]\nservice = "shop"\nurl = "http://127.0.0.1:${target.address().port}/debug/pprof"\n`);
  const srv = await startServer(['--targets', targets]);
  try {
    for (const profileType of ['memory', 'memory', 'goroutine']) {
      const started = await (await fetch(`${srv.base}/api/v1/observability/profiling/start`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ service: 'shop', profileType }),
      })).json();
      for (let status = started.status; status === 'running';) {
        await new Promise((r) => setTimeout(r, 50));
        status = (await (await fetch(`${srv.base}/api/v1/observability/profiling/${started.id}`)).json()).status;
        assert.notEqual(status, 'failed');
      }
    }
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(srv.base);
    await page.getByTestId('history-menu').locator('summary').click();
    // Captures land in the time index: the timeline lists each captured type of the service.
    const select = page.getByTestId('range-series-select');
    await select.waitFor();
    const series = await select.locator('option').allTextContents();
    assert.ok(series.includes('shop · memory') && series.includes('shop · goroutine'), series.join(', '));
    assert.ok(!series.includes('shop · cpu'));
    await select.selectOption({ label: 'shop · memory' });
    // Both heap captures fall in the newest step: inuse_space totals (SOURCES.md) base
    // 7,617,933 B and compare 14,530,408 B, summed; the hover says so.
    const bars = page.locator('.range-bar');
    await until('the memory timeline', async () => (await bars.count()) === 1 || undefined);
    assert.equal(Number(await bars.first().getAttribute('data-value')), 7617933 + 14530408);
    await bars.first().hover({ force: true });
    const hover = page.getByTestId('range-hover');
    await hover.waitFor();
    assert.equal(await hover.getAttribute('data-profiles'), '2');
    assert.match(await hover.textContent(), /inuse_space 21\.12MB · 2 profiles/);
    await screenshot(page, 'capture-history');
    await page.close();
  } finally {
    await srv.stop();
    target.close();
  }
});
