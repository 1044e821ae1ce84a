// The page in each browser engine (STACKLENS_ENGINES, default firefox,webkit; chromium
// works too), through engines.mjs's one driver interface: a Go CPU profile's flame graph
// and top table against pprof, the other views, a reload, and screenshots light and dark.
// Expected values come from pprof (the fixtures' stored outputs, or `go tool pprof` run
// here), never from the page; every test also fails on a console error or uncaught error.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { join } from 'node:path';
import {
  startServer, fixtures, screenshots, requireFixtures, requireGo, missingPrerequisite, goBinary, pprofFileTable,
  pprofValue, hslRgb, sameColour, until,
} from './harness.mjs';
import { launch, enginesFromEnv, FIREFOX, WEBKIT_DRIVER, MINIBROWSER } from './engines.mjs';

const ROW = 18; // CSS pixels per flame graph row
const ROOT_GREY = hslRgb(0, 0, 70);
const CPU = 'go/base/cpu.pb.gz';
const WAIT = { timeout: 30000 };
const tid = (id) => `[data-testid="${id}"]`;

/** What an engine needs installed (Debian packages), by path. */
const needs = {
  chromium: ['/usr/bin/chromium'],
  firefox: [FIREFOX],
  webkit: [WEBKIT_DRIVER, MINIBROWSER, '/usr/bin/xvfb-run'],
};

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

// ---- What the page shows, read in the page (the same function in every engine).

/** The flame graph canvas `selector` once painted: its CSS size, how much of it is opaque,
 * its distinct colours, the root row's middle pixel (bottom row, or top for an icicle) and
 * the dark (#1d1f24 text) pixels where the root's name is written. */
async function paintedFlame(page, selector = tid('flamegraph'), icicle = false) {
  try {
    await page.waitForFunction((s) => document.querySelector(s)?.width > 0, WAIT, selector);
  } catch (e) {
    // Say what the page showed instead: a tab or not, a canvas or not, errors.
    const state = await page.evaluate((s) => ({
      tabs: document.querySelectorAll('[data-testid=profile-tab]').length,
      canvas: document.querySelector(s) ? `${document.querySelector(s).width}×${document.querySelector(s).height}` : 'none',
      loading: document.querySelector('[data-testid=loading]')?.textContent ?? null,
      shown: [...document.querySelectorAll('[data-testid=error]')].map((x) => x.textContent),
    }), selector);
    throw new Error(`${e.message}; the page: ${JSON.stringify(state)}; console: ${JSON.stringify(await page.errors())}`);
  }
  return page.evaluate((s, row, icicle) => {
    const c = document.querySelector(s);
    const scale = c.width / c.clientWidth;
    const ctx = c.getContext('2d');
    const all = ctx.getImageData(0, 0, c.width, c.height).data;
    let opaque = 0;
    const colours = new Set();
    for (let i = 0; i < all.length; i += 4) {
      if (all[i + 3] === 255) { opaque++; colours.add((all[i] << 16) | (all[i + 1] << 8) | all[i + 2]); }
    }
    const top = icicle ? 0 : c.clientHeight - row; // the root row's top, CSS pixels
    const root = [...ctx.getImageData(Math.floor(c.width / 2), Math.floor((top + row / 2) * scale), 1, 1).data];
    const label = ctx.getImageData(0, Math.floor(top * scale), Math.floor(60 * scale), Math.floor(row * scale)).data;
    let text = 0;
    for (let i = 0; i < label.length; i += 4) if (label[i] < 100 && label[i + 1] < 100 && label[i + 2] < 100 && label[i + 3] > 0) text++;
    return { width: c.clientWidth, height: c.clientHeight, opaque: opaque / (all.length / 4), colours: colours.size, root, text };
  }, selector, ROW, icicle);
}

/** Asserts a flame graph is really drawn: filled, in many colours, the root grey, its name written. */
function assertPainted(flame, what) {
  assert.ok(flame.width > 300 && flame.height >= ROW * 3, `${what}: canvas ${flame.width}×${flame.height}`);
  assert.ok(flame.opaque > 0.05, `${what}: ${(flame.opaque * 100).toFixed(1)}% of the canvas painted`);
  assert.ok(flame.colours >= 8, `${what}: ${flame.colours} colours`);
  assert.ok(sameColour(flame.root, ROOT_GREY), `${what}: the root's grey, got ${flame.root}`);
  assert.ok(flame.text >= 10, `${what}: the root's name written (${flame.text} dark pixels)`);
}

/** The first `n` rows of the top table, as harness.mjs's pageTopTable reads them. */
function topRows(page, n) {
  return page.evaluate((n) => [...document.querySelectorAll('[data-testid=top-row]')].slice(0, n).map((r) => {
    const name = r.querySelector('[data-col=name]');
    return {
      flat: Number(r.querySelector('[data-col=flat]').dataset.value),
      cum: Number(r.querySelector('[data-col=cum]').dataset.value),
      name: name.dataset.value,
      ...(name.dataset.inline && { inline: name.dataset.inline }),
    };
  }), n);
}

/** Waits until the top table starts with `expected`; fails showing the difference. */
async function expectTopTable(page, expected, what) {
  let shown;
  try {
    await until(what, async () => {
      shown = await topRows(page, expected.length);
      // Not JSON.stringify: WebKit's WebDriver hands objects back with their keys reordered.
      return isDeepStrictEqual(shown, expected) ? true : undefined;
    }, WAIT.timeout);
  } catch (e) {
    assert.deepEqual(shown, expected, what);
    throw e;
  }
}

const errorTexts = (page) => page.evaluate(() => [...document.querySelectorAll('[data-testid=error]')].map((e) => e.textContent));

/** No error shown by the page, none in the console, no uncaught exception. */
async function assertNoErrors(page, what) {
  assert.deepEqual(await errorTexts(page), [], `${what}: the page shows an error`);
  assert.deepEqual(await page.errors(), [], `${what}: console errors or uncaught exceptions`);
}

const load = (page, ...files) => page.setInputFiles(tid('file-input'), files.map((f) => join(fixtures, f)));

/** A page on the server's page, closed when test `t` ends (passed or failed). */
async function openPage(t, browser) {
  const page = await browser.newPage();
  t.after(() => page.close());
  await page.goto(server.base);
  await page.waitForSelector(tid('file-input'), WAIT);
  return page;
}

// ---- pprof's own outputs (the same as graph/source/labels.test.mjs read).

const pprof = (...args) => execFileSync(goBinary, ['tool', 'pprof', ...args], {
  encoding: 'utf8', env: { ...process.env, PPROF_BINARY_PATH: '/nonexistent' }, timeout: 60000,
});

/** `go tool pprof -dot`'s node names, in its order. */
function pprofDotNames(file) {
  return [...pprof('-dot', join(fixtures, file)).matchAll(/^N\d+ \[label=".*" id="node\d+" fontsize=\d+ shape=box tooltip="(.*) \([^()]*\)" color=/gm)]
    .map((m) => m[1].replace(/\\"/g, '"'));
}

/** `go tool pprof -list`: every shown line's number, flat and cum (ns) and code. */
function pprofList(regex, file) {
  const value = (v) => (v === '.' ? 0 : pprofValue(v));
  return [...pprof('-list', regex, '-source_path', join(fixtures, 'gen'), join(fixtures, file)).matchAll(/^\s+(\S+)\s+(\S+)\s+(\d+):(.*)$/gm)]
    .map((m) => ({ line: Number(m[3]), flat: value(m[1]), cum: value(m[2]), code: m[4] }));
}

/** `go tool pprof -tags`: key → [{ value, share }] in pprof's order. */
function pprofTags(file) {
  const keys = {};
  let key;
  for (const line of pprof('-tags', join(fixtures, file)).split('\n')) {
    const head = /^ (\S+): Total/.exec(line);
    if (head) { key = head[1]; keys[key] = []; continue; }
    const row = /^\s+\S+ \(\s*([\d.]+)%\): (.*)$/.exec(line);
    if (row && key) keys[key].push({ value: row[2], share: row[1] });
  }
  return keys;
}

// ---- The tests, once per engine.

for (const engine of enginesFromEnv()) {
  describe(engine, () => {
    let browser;
    const present = needs[engine].every((p) => existsSync(p));
    before(async () => { if (present) browser = await launch(engine); });
    after(async () => { await browser?.close(); });
    /** False (and failed, or skipped where allowed) when the engine or fixtures are missing. */
    const ready = (t, go = false) => {
      if (!present) { missingPrerequisite(t, `${engine}: ${needs[engine].filter((p) => !existsSync(p))} (scripts/ensure-tools.sh)`); return false; }
      return requireFixtures(t) && (!go || requireGo(t));
    };

    test(`${engine}: a Go CPU profile: the flame graph paints and the top table equals pprof's`, async (t) => {
      if (!ready(t)) return;
      const page = await openPage(t, browser);
      t.diagnostic(`${engine} ${browser.version}`);
      await load(page, CPU);
      assertPainted(await paintedFlame(page), 'flame graph');
      await page.click(tid('view-top'));
      await expectTopTable(page, pprofFileTable('go/base/cpu.pprof-top.txt', 20), 'go tool pprof -top');
      await page.screenshot(join(screenshots, `${engine}-top-cpu.png`));
      await assertNoErrors(page, 'flame and top');
      await page.close();
    });

    test(`${engine}: graph, source, labels, sandwich and timeline views show pprof's content`, async (t) => {
      if (!ready(t, true)) return;
      const page = await openPage(t, browser);
      await load(page, CPU);
      await paintedFlame(page);

      // Graph: pprof -dot's nodes in its order, each laid out (a box with a size).
      await page.click(tid('view-graph'));
      const names = pprofDotNames(CPU);
      assert.ok(names.length > 20, 'a graph worth comparing');
      await page.waitForFunction((n) => document.querySelectorAll('[data-testid=callgraph] [data-testid=graph-node]').length === n, WAIT, names.length);
      const nodes = await page.evaluate(() => [...document.querySelectorAll('[data-testid=callgraph] [data-testid=graph-node]')]
        .map((n) => ({ name: n.dataset.name, width: n.getBBox().width })));
      assert.deepEqual(nodes.map((n) => n.name), names, 'pprof -dot\'s nodes');
      assert.ok(nodes.every((n) => n.width > 20), 'every node laid out with a width');
      await page.screenshot(join(screenshots, `${engine}-graph-cpu.png`));
      await assertNoErrors(page, 'graph');

      // Source: pprof -list's per-line values, then the code once the file is given.
      const FUNCTION = 'main.compressBlock';
      const expected = pprofList(`^${FUNCTION.replace('.', '\\.')}$`, CPU);
      await page.click(tid('view-source'));
      await page.fill(tid('source-function-input'), FUNCTION);
      await page.press(tid('source-function-input'), 'Enter');
      await page.waitForSelector(tid('source-line'), WAIT);
      const lines = () => page.evaluate(() => [...document.querySelectorAll('[data-testid=source-line]')].map((e) => ({
        line: Number(e.dataset.line), flat: Number(e.dataset.flat), cum: Number(e.dataset.cum), code: e.querySelector('.code').textContent,
      })));
      assert.deepEqual((await lines()).map(({ line, flat, cum }) => ({ line, flat, cum })), expected.map(({ line, flat, cum }) => ({ line, flat, cum })));
      await page.setInputFiles(tid('source-files'), [join(fixtures, 'gen/workload.go')]);
      const withCode = await until('the code beside the numbers', async () => {
        const r = await lines();
        return r.some((x) => x.code !== '') ? r : undefined;
      }, WAIT.timeout);
      assert.deepEqual(withCode.map((r) => r.code.trimEnd()), expected.map((r) => r.code.trimEnd()));
      await assertNoErrors(page, 'source');

      // Labels: pprof -tags's keys, values and shares.
      const tags = pprofTags(CPU);
      assert.ok(tags.endpoint?.length > 1 && tags.tenant?.length > 1, 'the fixture carries endpoint and tenant labels');
      await page.click(tid('view-labels'));
      await page.waitForSelector(tid('label-value'), WAIT);
      const shown = await page.evaluate(() => [...document.querySelectorAll('[data-testid=label-value]')].map((r) => ({ ...r.dataset })));
      for (const [key, values] of Object.entries(tags)) {
        assert.deepEqual(shown.filter((r) => r.key === key).map((r) => ({ value: r.value, share: r.share })), values, key);
      }
      await assertNoErrors(page, 'labels');

      // Sandwich of deflate from the top table: callers grow up from deflate on the bottom
      // row, callees hang down from it on the top row (pprof -peek: cum 3.08s).
      await page.click(tid('view-top'));
      const deflate = 'compress/flate.(*compressor).deflate';
      await page.click(`[data-testid=top-row]:has([data-col=name][data-value="${deflate}"]) [data-testid=sandwich-button]`);
      await page.waitForSelector(tid('sandwich-function'), WAIT);
      assert.equal(await page.textContent(tid('sandwich-function')), deflate);
      assertPainted(await paintedFlame(page, `${tid('sandwich-callers')} ${tid('flamegraph')}`), 'sandwich callers');
      assertPainted(await paintedFlame(page, `${tid('sandwich-callees')} ${tid('flamegraph')}`, true), 'sandwich callees');
      await page.screenshot(join(screenshots, `${engine}-sandwich.png`));
      await assertNoErrors(page, 'sandwich');

      // Time order: a Go pprof profile has no sample times, and the view says so.
      await page.click(tid('view-timeline'));
      await page.waitForSelector(tid('timeline-unavailable'), WAIT);
      assert.match(await page.textContent(tid('timeline-unavailable')), /no sample times: its format \(\w+\) does not say when samples were taken/);
      await assertNoErrors(page, 'timeline');
      await page.close();
    });

    test(`${engine}: diff of two CPU profiles and a goroutine dump`, async (t) => {
      if (!ready(t)) return;
      let page = await openPage(t, browser);
      await load(page, CPU);
      await paintedFlame(page);
      await load(page, 'go/compare/cpu.pb.gz');
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=profile-tab]').length === 2, WAIT);
      await page.click(tid('view-diff'));
      await page.waitForSelector(tid('diff-table'), WAIT);
      for (const r of pprofFileTable('go/compare/cpu.diff-vs-base.pprof-top.txt', 5)) {
        const deltas = await page.evaluate((name) => {
          const row = [...document.querySelectorAll('[data-testid=diff-row]')].find((x) => x.querySelector('[data-col=name]').dataset.value === name);
          return row && [Number(row.querySelector('[data-col=flat]').dataset.value), Number(row.querySelector('[data-col=cum]').dataset.value)];
        }, r.name);
        assert.deepEqual(deltas, [r.flat, r.cum], r.name);
      }
      assert.equal(await page.textContent(tid('overall-delta')), '-2.54%');
      await assertNoErrors(page, 'diff');
      await page.close();

      page = await openPage(t, browser);
      await load(page, 'go/base/goroutine.debug2.txt');
      await page.waitForSelector(tid('goroutine-count'), WAIT);
      assert.equal(await page.textContent(tid('goroutine-count')), '453');
      await assertNoErrors(page, 'goroutines');
      await page.close();
    });

    test(`${engine}: a reload restores the view, and the profile where Cache Storage keeps it`, async (t) => {
      if (!ready(t)) return;
      const page = await openPage(t, browser);
      // Does this engine keep Cache Storage across a reload? WebKit's automation session
      // (MiniBrowser --automation: ephemeral storage, as a private window) empties it on
      // reload while localStorage stays; the page then asks for the files again.
      await page.evaluate(async () => (await caches.open('engines-probe')).put('/probe', new Response('1')));
      await page.reload();
      await page.waitForSelector(tid('file-input'), WAIT);
      const keeps = await page.evaluate(async () => (await (await caches.open('engines-probe')).keys()).length === 1);
      await page.evaluate(() => caches.delete('engines-probe'));
      if (!keeps) t.diagnostic(`${engine}: Cache Storage is emptied by a reload: the page must ask for the file again`);

      await load(page, CPU);
      await page.click(tid('view-top'));
      const expected = pprofFileTable('go/base/cpu.pprof-top.txt', 10);
      await expectTopTable(page, expected, 'before the reload');
      await page.waitForFunction(() => location.hash.includes('view=top') && location.hash.includes('profile=cpu.pb.gz'), WAIT);
      await page.waitForFunction(async () => (await (await caches.open('stacklens-local-profiles')).keys()).length === 1, WAIT);
      const hash = await page.evaluate(() => location.hash);
      await page.reload();
      if (keeps) {
        await expectTopTable(page, expected, 'after the reload');
        assert.equal(await page.evaluate(() => location.hash), hash);
      } else {
        // Nothing kept: the page names the file to open again, and opened, the view is back.
        await page.waitForSelector(tid('reopen-hint'), WAIT);
        assert.match(await page.textContent(tid('reopen-hint')), /This link's view was for: cpu\.pb\.gz\. Open the same files to restore it\./);
        await load(page, CPU);
        await expectTopTable(page, expected, 'the same file opened again after the reload');
        await page.waitForFunction((h) => location.hash === h, WAIT, hash);
      }
      await assertNoErrors(page, 'reload');
      await page.close();
    });

    test(`${engine}: share, plain and encrypted: each link opens the profile in a fresh page`, async (t) => {
      if (!ready(t)) return;
      const expected = pprofFileTable('go/base/cpu.pprof-top.txt', 10);
      const sharing = [];
      for (const encrypted of [false, true]) {
        const what = encrypted ? 'encrypted link' : 'link';
        let page = await openPage(t, browser);
        await load(page, CPU);
        await paintedFlame(page);
        await page.click(tid('share'));
        // Sealed in the page with WebCrypto's AES-GCM; the key stays in the fragment.
        if (encrypted) await page.click(tid('share-encrypt'));
        await page.click(tid('share-upload'));
        await page.waitForFunction(() => document.querySelector('[data-testid=share-url]')?.value, WAIT);
        const url = await page.evaluate(() => document.querySelector('[data-testid=share-url]').value);
        assert.match(url, encrypted ? /^http:\/\/127\.0\.0\.1:\d+\/#\/e\/blob-[0-9a-f]{32}\/[A-Za-z0-9_-]{43}$/ : /^http:\/\/127\.0\.0\.1:\d+\/#\/s\/sess-[0-9a-f]{32}$/, what);
        // The page copies the link for the user: the copy starts in the click (WebKit, as
        // Safari, refuses one made once the upload has answered) and says how it ended.
        await page.waitForSelector(`${tid('share-copied')}, ${tid('share-not-copied')}`, WAIT);
        const refused = await page.evaluate(() => document.querySelector('[data-testid=share-not-copied]')?.title ?? null);
        assert.equal(refused, null, `${what}: the link is copied`);
        // Errors are asserted at the end, so the links are still tried when copying fails.
        sharing.push(...(await page.errors()).map((e) => `${what}: ${e}`));
        assert.deepEqual(await errorTexts(page), [], `${what}: the page shows an error`);
        await page.close();

        // A fresh page (its own storage; WebKit runs one page at a time): the link alone opens it.
        page = await browser.newPage();
        t.after(() => page.close());
        await page.goto(url);
        await page.waitForSelector(tid('flamegraph'), WAIT);
        await page.click(tid('view-top'));
        await expectTopTable(page, expected, `${what}: the shared profile is go/base/cpu.pb.gz`);
        await assertNoErrors(page, `${what}: opened`);
        await page.close();
      }
      assert.deepEqual(sharing, [], 'console errors or uncaught exceptions while sharing');
    });

    test(`${engine}: flame graph screenshots, light and dark`, async (t) => {
      if (!ready(t)) return;
      for (const colorScheme of ['light', 'dark']) {
        // The theme follows the system's: a browser started with that preference.
        const themed = colorScheme === 'light' ? browser : await launch(engine, { colorScheme });
        try {
          const page = await openPage(t, themed);
          const background = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
          const [r] = background.match(/\d+/g).map(Number);
          assert.equal(r < 128, colorScheme === 'dark', `${colorScheme}: the page's background ${background}`);
          await load(page, CPU);
          assertPainted(await paintedFlame(page), `${colorScheme} flame graph`);
          await page.screenshot(join(screenshots, `${engine}-flame-${colorScheme}.png`));
          await assertNoErrors(page, `${colorScheme} flame graph`);
          await page.close();
        } finally {
          if (themed !== browser) await themed.close();
        }
      }
    });
  });
}
