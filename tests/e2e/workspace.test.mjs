// The workspace around the views: the landing page's built-in example, the loaded
// profile's metadata (checked against `go tool pprof`), the keyboard shortcuts list,
// and light and dark screenshots at the two sizes people use.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startServer, launchBrowser, requireFixtures, requireGo, pprofTop, openPage, loadFixtures, pageTopTable, screenshot, until,
} from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

/** The page's metadata facts by label, and its sample types. */
async function shownMeta(page) {
  await page.getByTestId('profile-meta').waitFor();
  const facts = await page.locator('[data-fact]').evaluateAll((els) =>
    Object.fromEntries(els.map((e) => [e.dataset.fact, e.querySelector('.value').textContent])));
  const types = await page.getByTestId('meta-sample-type').evaluateAll((els) =>
    els.map((e) => ({ name: e.dataset.name, total: Number(e.dataset.total), default: e.dataset.default === 'true' })));
  return { facts, types };
}

test('landing: "Try an example" opens the built-in profile with no network, and its labels', async () => {
  const { page, requests } = await openPage(browser, server.base);
  await page.getByTestId('try-example').click();
  await page.getByTestId('view-top').click();
  const rows = await pageTopTable(page, 40);
  const names = rows.map((r) => r.name);
  for (const f of ['main.applyDiscounts', 'compress/flate.(*compressor).deflate', 'runtime.scanobject']) {
    assert.ok(names.includes(f), `${f} in ${names}`);
  }
  // Every sample goes through the server's connection loop except the GC's.
  const serve = rows.find((r) => r.name === 'net/http.(*conn).serve');
  const gc = rows.find((r) => r.name === 'runtime.scanobject');
  const { facts, types } = await shownMeta(page);
  const cpu = types.find((t) => t.name === 'cpu');
  assert.equal(serve.cum + gc.cum, cpu.total);
  assert.equal(cpu.default, true);
  // The page writes the example as pprof and reads it back like any dropped file.
  assert.equal(facts.format, 'pprof');
  assert.equal(facts.from, 'stacklens example: a Go web service under load');
  assert.equal(facts.duration, '30s');
  const offPage = requests.filter((u) => !u.startsWith(server.base) && !u.startsWith('data:') && !u.startsWith('blob:'));
  assert.deepEqual(offPage, []);
  const afterLoad = requests.filter((u) => /\/api\//.test(u));
  assert.deepEqual(afterLoad, [], 'the example is made in the page, not fetched');
  await page.close();
});

test('profile metadata: format, producer, duration, sample types with totals and the default, as pprof reads them', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  const { page } = await openPage(browser, server.base);
  await loadFixtures(page, 'go/base/heap.pb.gz');
  const { facts, types } = await shownMeta(page);
  assert.deepEqual(types.map((x) => x.name), ['alloc_objects', 'alloc_space', 'inuse_objects', 'inuse_space']);
  // pprof opens a heap profile at inuse_space.
  assert.deepEqual(types.filter((x) => x.default).map((x) => x.name), ['inuse_space']);
  for (const [type, unit] of [['alloc_space', 'B'], ['inuse_objects', '']]) {
    const text = pprofTop(['-nodecount=1', `-sample_index=${type}`, ...(unit ? [`-unit=${unit}`] : [])], 'go/base/heap.pb.gz');
    const total = Number(/of (\d+)B? total/.exec(text)[1]);
    assert.equal(types.find((x) => x.name === type).total, total, type);
  }
  assert.equal(facts.format, 'pprof');
  const file = /^File: (\S+)/m.exec(pprofTop(['-nodecount=1'], 'go/base/heap.pb.gz'))[1];
  assert.ok(facts.from.endsWith(file), `${facts.from} names ${file}`);
  await loadFixtures(page, 'go/base/cpu.pb.gz');
  await until('the cpu profile\'s metadata', async () => {
    const { facts } = await shownMeta(page);
    return facts.duration ? facts : undefined;
  });
  const cpuText = pprofTop(['-nodecount=1'], 'go/base/cpu.pb.gz');
  const { facts: cpu } = await shownMeta(page);
  assert.equal(cpu.duration, /^Duration: (\S+),/m.exec(cpuText)[1]);
  assert.match(cpu.period, /^10ms \(cpu nanoseconds\)$/);
  await page.close();
});

test('keyboard: ? lists the shortcuts, digits switch views, - and 0 zoom out', async () => {
  const { page } = await openPage(browser, server.base);
  await page.getByTestId('try-example').click();
  await page.getByTestId('flamegraph').waitFor();
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('?');
  await page.getByTestId('shortcuts').waitFor();
  assert.match(await page.getByTestId('shortcuts').textContent(), /switch view/);
  await page.keyboard.press('Escape');
  await page.getByTestId('shortcuts').waitFor({ state: 'detached' });
  await page.keyboard.press('2');
  await page.getByTestId('top-row').first().waitFor();
  await page.keyboard.press('1');
  await page.getByTestId('flamegraph').waitFor();
  // Zoom two levels down by the address, then out one level with "-" and all the way with "0".
  const zoomOf = () => page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get('zoom') || '');
  await page.evaluate(() => { location.hash = location.hash.replace(/&?zoom=[^&]*/, '') + '&zoom=' + encodeURIComponent('net/http.(*conn).serve\u001fnet/http.serverHandler.ServeHTTP'); });
  await page.reload();
  await page.getByTestId('try-example').click();
  await until('the zoom from the address', async () => ((await zoomOf()).includes('serverHandler') ? true : undefined));
  await page.locator('body').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('-');
  await until('one level out', async () => ((await zoomOf()) === 'net/http.(*conn).serve' ? true : undefined));
  await page.keyboard.press('0');
  await until('the whole profile', async () => ((await zoomOf()) === '' ? true : undefined));
  await page.close();
});

test('screenshots at 1280×800 and 1920×1080, light and dark', async (t) => {
  if (!requireFixtures(t)) return;
  for (const colorScheme of ['light', 'dark']) {
    for (const [width, height] of [[1280, 800], [1920, 1080]]) {
      const page = await browser.newPage({ viewport: { width, height }, colorScheme });
      await page.goto(server.base);
      await page.getByTestId('try-example').waitFor();
      const background = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
      // Dark mode follows the system: a dark background only when the system asks for it.
      const [r] = background.match(/\d+/g).map(Number);
      assert.equal(r < 128, colorScheme === 'dark', `${colorScheme}: ${background}`);
      await screenshot(page, `landing-${colorScheme}-${width}x${height}`);
      await loadFixtures(page, 'go/base/cpu.pb.gz');
      await page.getByTestId('flamegraph').waitFor();
      await screenshot(page, `flame-${colorScheme}-${width}x${height}`);
      // The table beside the flame graph, with the details panel of its first row.
      await page.getByTestId('layout-both').click();
      await page.getByTestId('top-row').first().click();
      await page.getByTestId('details-value').first().waitFor();
      await page.getByTestId('split-right').getByTestId('flamegraph').waitFor();
      await screenshot(page, `both-details-${colorScheme}-${width}x${height}`);
      await page.getByTestId('view-graph').click();
      await page.getByTestId('callgraph').waitFor();
      await screenshot(page, `graph-${colorScheme}-${width}x${height}`);
      // Nothing is wider than the window: no sideways scrolling of the page.
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `${colorScheme} ${width}x${height}: the page is ${overflow}px wider than the window`);
      await page.close();
    }
  }
});
