// End-to-end: the built page served by `stacklens serve`, in headless Chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startServer, launchBrowser, fixtures, requireFixtures, screenshot } from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

/** A page that records every request it makes. */
async function openPage() {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(server.base);
  return { page, requests };
}

async function load(page, ...files) {
  await page.getByTestId('file-input').setInputFiles(files.map((f) => join(fixtures, f)));
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

/** Distinct colours in the flame graph canvas (0 when nothing is painted). */
async function paintedColours(page) {
  return page.getByTestId('flamegraph').evaluate((c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const seen = new Set();
    for (let i = 0; i < d.length; i += 4 * 7) if (d[i + 3] > 0) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    return seen.size;
  });
}

test('cpu profile: top table equals go tool pprof; flame graph paints; nothing leaves the page', async (t) => {
  if (!requireFixtures(t)) return;
  const { page, requests } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('flamegraph').waitFor();
  await page.waitForFunction(() => document.querySelector('[data-testid=flamegraph]').width > 0);
  assert.ok(await paintedColours(page) > 10, 'the flame graph has painted frames');
  await screenshot(page, 'flame-cpu');

  await page.getByTestId('view-top').click();
  const rows = page.getByTestId('top-row');
  await rows.first().waitFor();
  const expected = pprofRows(join(fixtures, 'go/base/cpu.pprof-top.txt'), 10);
  for (let i = 0; i < expected.length; i++) {
    const row = rows.nth(i);
    assert.equal(await row.locator('[data-col=name]').getAttribute('data-value'), expected[i][2], `row ${i} name`);
    assert.equal(pprofSeconds(await row.locator('[data-col=flat]').getAttribute('data-value')), expected[i][0], `row ${i} flat`);
    assert.equal(pprofSeconds(await row.locator('[data-col=cum]').getAttribute('data-value')), expected[i][1], `row ${i} cum`);
  }
  await screenshot(page, 'top-cpu');
  const origin = new URL(server.base).origin;
  const foreign = requests.filter((u) => !u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith('blob:'));
  assert.deepEqual(foreign, [], 'the page made requests to other origins');
  const api = requests.filter((u) => new URL(u).pathname.startsWith('/api/'));
  assert.deepEqual(api, [], 'the page talked to the server without being asked to share');
  await page.close();
});

test('flame graph: search highlights and reports the matched share; hover, zoom and Esc', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  const canvas = page.getByTestId('flamegraph');
  await canvas.waitFor();
  const before = await paintedColours(page);
  await page.keyboard.press('/');
  await page.keyboard.type('compress/flate');
  const matched = page.locator('[data-testid=search-matched][data-value]');
  await matched.waitFor();
  // deflate's cum is 43.50% of the total; everything under compress/flate is at least that.
  const share = parseFloat((await matched.textContent()).replace(/[^0-9.]/g, ''));
  assert.ok(share >= 43.5 && share < 100, `matched ${share}%`);
  const after = await paintedColours(page);
  assert.ok(after < before, `search greys out non-matches (${before} -> ${after} colours)`);
  await screenshot(page, 'flame-search');
  await page.getByTestId('search').fill('');

  // Hover the root row (bottom of the flame graph): the tooltip names it.
  const box = await canvas.boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height - 5);
  const tip = page.getByTestId('flame-tooltip');
  await tip.waitFor();
  assert.match(await tip.textContent(), /root.*total 7\.08s.*100%/s);
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

test('diff: base and compare cpu profiles show matrixMultiply among the regressions', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('flamegraph').waitFor();
  await load(page, 'go/compare/cpu.pb.gz');
  await page.getByTestId('view-diff').click();
  await page.getByTestId('diff-table').waitFor();
  const names = await page.getByTestId('diff-row').locator('[data-col=name]').evaluateAll((els) => els.map((e) => e.dataset.value));
  assert.ok(names.includes('main.matrixMultiply'), 'matrixMultiply regressed');
  assert.equal(await page.getByTestId('overall-delta').textContent(), '-2.54%');
  assert.ok(await paintedColours(page) > 3, 'the diff flame graph is painted');
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
  assert.ok(await paintedColours(page) > 10, 'and still drawn');
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
  for (const half of ['sandwich-callers', 'sandwich-callees']) {
    const canvas = page.getByTestId(half).getByTestId('flamegraph');
    await canvas.waitFor();
    await page.waitForFunction((id) => document.querySelector(`[data-testid=${id}] canvas`).width > 0, half);
    const painted = await canvas.evaluate((c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4 * 13) if (d[i] > 0) n++;
      return n;
    });
    assert.ok(painted > 100, `${half} is painted`);
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

test('a url= that cannot be fetched says so in the page', async () => {
  const page = await browser.newPage();
  await page.goto(`${server.base}/#url=/missing/profile.pb.gz`);
  const error = page.getByTestId('error');
  await error.waitFor();
  assert.match(await error.textContent(), /missing\/profile\.pb\.gz.*(404|could not fetch)/);
  await page.close();
});

test('the large profile parses in the worker: the page answers meanwhile, and cancel stops it', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'large/cpu.large.pb.gz');
  const row = page.getByTestId('loading');
  await row.waitFor();
  // The bar moves as the worker inflates and decodes.
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=loading] progress')?.value) > 0.1);
  assert.match(await row.textContent(), /(inflating|decoding) 13\.7 MB/);
  // The main thread is free while the worker parses: the page runs script and takes input.
  await page.getByTestId('paste-input').evaluate((e) => e.closest('details').open = true);
  await page.getByTestId('paste-input').fill('typed while parsing');
  assert.equal(await page.getByTestId('paste-input').inputValue(), 'typed while parsing');
  assert.equal(await row.count(), 1, 'still parsing while the page answered');
  await screenshot(page, 'parsing-large');
  await page.getByTestId('cancel-parse').click();
  await row.waitFor({ state: 'detached' });
  assert.equal(await page.getByTestId('profile-tab').count(), 0, 'a cancelled parse adds nothing');
  // The restarted worker serves the next file.
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('flamegraph').waitFor();
  assert.equal(await page.getByTestId('profile-tab').count(), 1);
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
  assert.match(await page.getByTestId('search-matched').textContent(), /matched [1-9][0-9.]*%/);
  await screenshot(page, 'flame-large-zoomed');
  await page.keyboard.press('Escape');
  await page.getByTestId('view-top').click();
  const first = page.getByTestId('top-row').first();
  await first.waitFor({ timeout: 60000 });
  assert.equal(await first.locator('[data-col=name]').getAttribute('data-value'), 'runtime.asyncPreempt');
  assert.equal(pprofSeconds(await first.locator('[data-col=flat]').getAttribute('data-value')), '1239.76s');
  await screenshot(page, 'top-large');
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
  // The tooltip names the function's file.
  const box = await page.getByTestId('flamegraph').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height - 5 - 18 * 5);
  await page.getByTestId('flame-tooltip').waitFor();
  assert.match(await page.getByTestId('flame-tooltip').textContent(), /\.go/);
  await page.close();
});

test('share: the link opens the same profile in a fresh browser; a saved baseline is compared with', async (t) => {
  if (!requireFixtures(t)) return;
  const { page } = await openPage();
  await load(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('view-top').click();
  const topRows = async (p) => {
    await p.getByTestId('top-row').first().waitFor();
    return p.getByTestId('top-row').locator('[data-col=name]').evaluateAll((els) => els.slice(0, 10).map((e) => e.dataset.value));
  };
  const mine = await topRows(page);
  await page.getByTestId('share').click();
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
  assert.deepEqual(await topRows(other), mine, 'the shared profile has the same top table');
  assert.equal(await other.getByTestId('profile-tab').textContent().then((t) => t.includes('cpu.pb.gz')), true);
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
  const names = await page.getByTestId('diff-row').locator('[data-col=name]').evaluateAll((els) => els.map((e) => e.dataset.value));
  assert.ok(names.includes('main.matrixMultiply'), 'matrixMultiply regressed against the baseline');
  assert.equal(await page.getByTestId('overall-delta').textContent(), '-2.54%', 'base = the baseline, compare = the new profile');
  await screenshot(page, 'diff-against-baseline');
  await page.close();
});

/** Waits until the page's Cache Storage holds `n` kept files. */
async function keptFiles(page, n) {
  for (let i = 0; i < 100; i++) {
    const kept = await page.evaluate(async () => (await (await caches.open('stacklens-local-profiles')).keys()).length);
    if (kept === n) return;
    await page.waitForTimeout(50);
  }
  assert.fail(`the page did not keep ${n} files`);
}

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
  await page.getByTestId('flamegraph').waitFor();
  await page.waitForFunction(() => document.querySelector('[data-testid=flamegraph]').width > 0);
  assert.ok(await paintedColours(page) > 3, 'the flame graph has painted frames');
  await page.getByTestId('view-top').click();
  const first = page.getByTestId('top-row').first();
  await first.waitFor();
  assert.equal(await first.locator('[data-col=name]').getAttribute('data-value'), 'libc.so.6!0xb27a8');
  assert.equal(await first.locator('[data-col=flat]').getAttribute('data-value'), String(11938 * 250000));
  await screenshot(page, 'top-samply');
  await page.close();
});

test('capture history: a trend chart per profile type from captures of a service', async (t) => {
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
    await page.getByTestId('history-service').fill('shop');
    await page.getByTestId('history-load').click();
    const memory = page.locator('[data-testid=history-type][data-type=memory]');
    await memory.waitFor();
    assert.equal(await memory.getByTestId('trend-point').count(), 2);
    assert.equal(await memory.getByTestId('history-row').count(), 2);
    const ys = await memory.getByTestId('trend-point').evaluateAll((els) => els.map((e) => Number(e.getAttribute('cy'))));
    assert.notEqual(ys[0], ys[1], 'the two heap snapshots have different totals');
    assert.equal(await page.locator('[data-testid=history-type][data-type=goroutine]').getByTestId('trend-point').count(), 1);
    assert.equal(await page.locator('[data-testid=history-type][data-type=cpu]').count(), 0);
    await screenshot(page, 'capture-history');
    await page.close();
  } finally {
    await srv.stop();
    target.close();
  }
});
