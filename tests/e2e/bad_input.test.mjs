// Hostile and broken files opened in the page: names with markup, quotes and invalid
// UTF-8 are shown as text everywhere (top table, flame graph tooltip, sandwich,
// search), nothing is injected, and broken files (truncated gzip, empty, gzip bomb)
// get an error naming them while the page stays usable. The profiles are made here.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { gzipSync, constants } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { startServer, launchBrowser, screenshot } from './harness.mjs';

// ---------------------------------------------------------------------------
// pprof protobuf, written field by field (strings are bytes: they may be invalid UTF-8).

function varint(v) {
  const out = [];
  let n = BigInt(v);
  while (n >= 0x80n) { out.push(Number(n & 0x7fn) | 0x80); n >>= 7n; }
  out.push(Number(n));
  return Buffer.from(out);
}
const key = (field, wire) => varint((field << 3) | wire);
const num = (field, v) => Buffer.concat([key(field, 0), varint(v)]);
const bytes = (field, body) => Buffer.concat([key(field, 2), varint(body.length), body]);
const packed = (values) => Buffer.concat(values.map(varint));

const PERIOD = 10_000_000;

/** A CPU profile: `frames` = [{name, file}] (Buffers or strings); `samples` = [{stack: [frame index, leaf first], n, labels: [[k, v]]}]. */
function cpuProfile(frames, samples) {
  const strings = [Buffer.alloc(0)];
  const str = (s) => { strings.push(Buffer.isBuffer(s) ? s : Buffer.from(s)); return strings.length - 1; };
  const parts = [];
  const [samplesS, count, cpu, ns] = [str('samples'), str('count'), str('cpu'), str('nanoseconds')];
  parts.push(bytes(1, Buffer.concat([num(1, samplesS), num(2, count)])));
  parts.push(bytes(1, Buffer.concat([num(1, cpu), num(2, ns)])));
  parts.push(bytes(11, Buffer.concat([num(1, cpu), num(2, ns)])));
  parts.push(num(12, PERIOD));
  frames.forEach((f, i) => {
    const id = i + 1;
    const [name, file] = [str(f.name), str(f.file)];
    parts.push(bytes(5, Buffer.concat([num(1, id), num(2, name), num(3, name), num(4, file)])));
    parts.push(bytes(4, Buffer.concat([num(1, id), bytes(4, Buffer.concat([num(1, id), num(2, 10 + i)]))])));
  });
  for (const s of samples) {
    const labels = (s.labels || []).map(([k, v]) => bytes(3, Buffer.concat([num(1, str(k)), num(2, str(v))])));
    parts.push(bytes(2, Buffer.concat([
      bytes(1, packed(s.stack.map((i) => i + 1))),
      bytes(2, packed([s.n, s.n * PERIOD])),
      ...labels,
    ])));
  }
  for (const s of strings) parts.push(bytes(6, s));
  return gzipSync(Buffer.concat(parts));
}

const SCRIPT = '<script>window.__pwned=1</script>';
const IMG = '<img src=x onerror=window.__pwned=1>';
const QUOTES = '"quotes" \'single\'';
const NOT_UTF8 = Buffer.from([...Buffer.from('main.'), 0xff, 0xfe, ...Buffer.from('bad')]);
const NOT_UTF8_READ = 'main.\ufffd\ufffdbad';
const HOSTILE = [SCRIPT, IMG, QUOTES, NOT_UTF8_READ];

/** Leaves named with markup, quotes and invalid UTF-8 (files and label values too), under main.main. */
function hostileProfile() {
  const names = [SCRIPT, IMG, QUOTES, NOT_UTF8];
  const frames = names.map((name) => ({ name, file: Buffer.concat([Buffer.from('src/'), Buffer.from(name), Buffer.from('.go')]) }));
  frames.push({ name: 'main.main', file: 'main.go' });
  const samples = names.map((_, i) => ({
    stack: [i, names.length],
    n: 10 * (i + 1),
    labels: [['html', SCRIPT], ['img', IMG], ['quote', QUOTES], [Buffer.from([0xff]), NOT_UTF8]],
  }));
  return cpuProfile(frames, samples);
}

function validProfile() {
  return cpuProfile([{ name: 'main.valid', file: 'valid.go' }, { name: 'main.main', file: 'main.go' }], [{ stack: [0, 1], n: 7 }]);
}

/** About 2 MB of gzip inflating to about 2 GB of zeros: a 1 MiB member, repeated. */
function gzipBomb() {
  const member = gzipSync(Buffer.alloc(1 << 20), { level: constants.Z_BEST_COMPRESSION });
  return Buffer.concat(Array.from({ length: Math.ceil(2_000_000 / member.length) }, () => member));
}

// ---------------------------------------------------------------------------

let server, browser;
const dir = mkdtempSync(join(tmpdir(), 'stacklens-bad-input-'));
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

function write(name, data) {
  const path = join(dir, name);
  writeFileSync(path, data);
  return path;
}

/** A page that fails the test on any dialog (alert from injected script). */
async function openPage() {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const dialogs = [];
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss(); });
  await page.goto(server.base);
  return { page, dialogs };
}

/** Nothing ran and nothing was injected. */
async function assertNotInjected(page, dialogs) {
  assert.equal(await page.evaluate(() => window.__pwned), undefined, 'injected script ran');
  assert.deepEqual(dialogs, []);
  const injected = await page.evaluate(() => ({
    scripts: [...document.querySelectorAll('body script')].length,
    images: [...document.querySelectorAll('img')].map((e) => e.outerHTML),
  }));
  assert.deepEqual(injected, { scripts: 0, images: [] });
}

test('hostile names are shown as text in the top table, tooltip, sandwich and search', async () => {
  const { page, dialogs } = await openPage();
  // A hostile file name too (no '/', which no file name can hold).
  const fileName = `x"'<img src=x onerror=window.__pwned=1>.pb.gz`;
  await page.getByTestId('file-input').setInputFiles(write(fileName, hostileProfile()));
  await page.getByTestId('flamegraph').waitFor();
  assert.equal(await page.getByTestId('profile-tab').locator('.tab-name').textContent(), fileName);

  // Top table: every name exactly, as text.
  await page.getByTestId('view-top').click();
  await page.getByTestId('top-row').first().waitFor();
  const names = await page.getByTestId('top-row').locator('[data-col=name]').evaluateAll((cells) =>
    cells.map((c) => ({ value: c.dataset.value, text: c.textContent, elements: [...c.querySelectorAll('*')].map((e) => e.tagName) })));
  assert.deepEqual(names.map((n) => n.value).sort(), [...HOSTILE, 'main.main'].sort());
  for (const n of names) {
    assert.ok(n.text.includes(n.value), `the cell shows ${n.value} as text: ${n.text}`);
    assert.ok(n.elements.every((t) => t === 'BUTTON'), `only the sandwich button in the cell: ${n.elements}`);
  }
  const table = await page.getByTestId('top-table').evaluate((t) => ({ text: t.textContent, bad: t.querySelectorAll('script, img').length }));
  assert.ok(table.text.includes('<script>window.__pwned=1</script>'), 'the literal <script> text is in the table');
  assert.equal(table.bad, 0, 'no element was injected into the table');
  // The table's filter takes markup as text.
  await page.getByTestId('top-filter').fill('<img');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=top-row]').length === 1);
  assert.equal(await page.getByTestId('top-row').locator('[data-col=name]').getAttribute('data-value'), IMG);
  await page.getByTestId('top-filter').fill('');
  await screenshot(page, 'hostile-top');

  // Sandwich of the <script> function.
  const row = page.getByTestId('top-row').filter({ has: page.locator(`[data-value="${SCRIPT}"]`) });
  await row.getByTestId('sandwich-button').click();
  assert.equal(await page.getByTestId('sandwich-function').textContent(), SCRIPT);
  await page.getByTestId('sandwich-callers').getByTestId('flamegraph').waitFor();
  await screenshot(page, 'hostile-sandwich');

  // Flame graph tooltip: hover across the leaves' row (third from the bottom).
  await page.getByTestId('view-flame').click();
  const canvas = page.getByTestId('flamegraph');
  await canvas.waitFor();
  await page.waitForFunction(() => document.querySelector('[data-testid=flamegraph]').width > 0);
  const box = await canvas.boundingBox();
  const tips = new Map();
  for (let x = box.x + 4; x < box.x + box.width - 4; x += box.width / 60) {
    await page.mouse.move(x, box.y + box.height - 18 * 2 - 5);
    const tip = page.getByTestId('flame-tooltip');
    if (await tip.count() === 0) continue;
    const shown = await tip.evaluate((t) => ({
      name: t.querySelector('.tt-name')?.textContent,
      file: t.querySelector('.tt-file')?.textContent,
      elements: t.querySelectorAll('script, img').length,
    }));
    assert.equal(shown.elements, 0, 'no element injected into the tooltip');
    tips.set(shown.name, shown.file);
  }
  for (const name of HOSTILE) {
    assert.ok(tips.has(name), `the tooltip named ${name} (saw ${[...tips.keys()]})`);
    assert.equal(tips.get(name), `src/${name}.go`);
  }
  await page.mouse.move(box.x + box.width / 2, box.y + box.height - 18 * 2 - 5);
  await screenshot(page, 'hostile-tooltip');

  // Search: markup and quotes are searched as text; the share is the function's.
  for (const [query, samples] of [['<script>', 10], ['"quotes"', 30], ['onerror=window', 20], ['\ufffd', 40]]) {
    await page.getByTestId('search').fill(query);
    await page.waitForFunction((want) => document.querySelector('[data-testid=search-matched]')?.dataset.value === want,
      String(samples * PERIOD), { timeout: 10000 });
  }
  await page.getByTestId('search').fill('');
  await assertNotInjected(page, dialogs);
  await page.close();
});

/** Opens each broken file: an error naming it, no tab, nothing left loading. */
async function refused(page, cases, timeout) {
  for (const [name, data, why] of cases) {
    await page.getByTestId('file-input').setInputFiles(write(name, data));
    const error = page.getByTestId('error').filter({ hasText: name });
    await error.waitFor({ timeout });
    const text = await error.textContent();
    assert.match(text, why, `${name}: ${text}`);
    assert.equal(await page.getByTestId('profile-tab').count(), 0, `${name} added no tab`);
    assert.equal(await page.getByTestId('loading').count(), 0, `${name}: nothing is still loading`);
  }
}

/** A valid profile loads afterwards, with the right numbers. */
async function stillUsable(page, dialogs) {
  await page.getByTestId('file-input').setInputFiles(write('valid.pb.gz', validProfile()));
  await assertValidShown(page, dialogs);
}

/** The valid profile is the one tab, and the top table shows its numbers. */
async function assertValidShown(page, dialogs) {
  await page.getByTestId('view-top').click();
  const first = page.getByTestId('top-row').first();
  await first.waitFor();
  assert.equal(await first.locator('[data-col=name]').getAttribute('data-value'), 'main.valid');
  assert.equal(await first.locator('[data-col=flat]').getAttribute('data-value'), String(7 * PERIOD));
  assert.equal(await page.getByTestId('profile-tab').count(), 1);
  await assertNotInjected(page, dialogs);
}

test('a truncated gzip and an empty file get errors naming them; the page stays usable', async () => {
  const { page, dialogs } = await openPage();
  const valid = validProfile();
  await refused(page, [
    ['truncated.pb.gz', valid.subarray(0, Math.floor(valid.length / 2)), /gzip data is corrupt or truncated/],
    // 2 MiB of a 3 MiB gzip stream: a file this size the browser inflates, fails on,
    // and hands to core, whose message names the fault.
    ['truncated-large.pb.gz', gzipSync(randomBytes(3 << 20)).subarray(0, 2 << 20), /gzip data is corrupt or truncated/],
    ['empty.pb.gz', Buffer.alloc(0), /the input is empty/],
  ], 20000);
  await screenshot(page, 'broken-files');
  await stillUsable(page, dialogs);
  await page.close();
});

// In the worker (wasm32) core's buffer grows to at most the 1 GiB cap plus one byte, and
// the error names the cap; a worker that dies anyway is replaced and its file reported.
test('a gzip bomb gets an error naming it; the page stays usable', async () => {
  const { page, dialogs } = await openPage();
  await refused(page, [['bomb.pb.gz', gzipBomb(), /exceeds the limit of 1073741824 bytes/]], 30000);
  await stillUsable(page, dialogs);
  await page.close();
});

test('a worker that dies is replaced: the error is shown and the open profile still answers', async () => {
  const { page, dialogs } = await openPage();
  await page.getByTestId('file-input').setInputFiles(write('valid.pb.gz', validProfile()));
  await page.getByTestId('flamegraph').waitFor();
  // An uncaught exception in the worker: what a trap in its WASM looks like from the page.
  const [worker] = page.workers();
  assert.ok(worker, 'the analysis worker is running');
  await worker.evaluate(() => setTimeout(() => { throw new Error('boom in the worker'); }, 0));
  const error = page.getByTestId('error').filter({ hasText: 'boom in the worker' });
  await error.waitFor({ timeout: 10000 });
  assert.match(await error.textContent(), /the analysis worker stopped \(.*boom in the worker\) and was restarted/);
  // The replacement worker was given the profile again: the table answers with its numbers.
  await assertValidShown(page, dialogs);
  await page.close();
});
