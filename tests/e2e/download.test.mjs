// "Download as": the profile on screen written by core in the worker and saved by the
// browser, with nothing sent to the server. pprof output reads in `go tool pprof` with
// the numbers pprof gives the original; folded and speedscope output carry the current
// sample type's stacks, with or without the current filters; OTLP reads back as the original.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  root, stacklensBin, startServer, launchBrowser, fixtures, requireFixtures, requireGo, goBinary, openPage, loadFixtures, setFilter,
  pprofTable, pprofValue, pageTopTable, until,
} from './harness.mjs';

let server, browser, dir;
before(async () => {
  server = await startServer();
  browser = await launchBrowser();
  dir = mkdtempSync(join(tmpdir(), 'stacklens-download-'));
});
after(async () => {
  await browser?.close();
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Chooses `format` in the Download menu and saves what the page downloads; returns its path and name. */
async function download(page, format, filtered = true) {
  const menu = page.getByTestId('download-menu');
  if (!(await menu.evaluate((d) => d.open))) await menu.locator('summary').click();
  await page.getByTestId('download-format').selectOption(format);
  const box = page.getByTestId('download-filtered');
  if ((await box.isChecked()) !== filtered) await box.click();
  const [file] = await Promise.all([page.waitForEvent('download'), page.getByTestId('download').click()]);
  const path = join(dir, `${format}-${filtered}-${file.suggestedFilename()}`);
  await file.saveAs(path);
  return { path, name: file.suggestedFilename() };
}

const pprof = (args, file) => execFileSync(goBinary, ['tool', 'pprof', '-top', '-nodecount=15', ...args, file], {
  encoding: 'utf8', env: { ...process.env, PPROF_BINARY_PATH: '/nonexistent' }, timeout: 60000,
});

test('pprof, folded, speedscope and OTLP downloads of the profile on screen, with and without its filters', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  const { page, requests } = await openPage(browser, server.base);
  await loadFixtures(page, 'go/base/cpu.pb.gz');
  await page.getByTestId('profile-tab').first().waitFor({ timeout: 30000 });
  const before = requests.length;

  // pprof: go tool pprof reads the download as it reads the original.
  const whole = await download(page, 'pprof');
  assert.equal(whole.name, 'cpu.pb.gz');
  assert.deepEqual(pprofTable(pprof([], whole.path)), pprofTable(pprof([], join(fixtures, 'go/base/cpu.pb.gz'))));

  // With a focus: the download holds only the focused samples; without: all of them.
  await page.getByTestId('view-top').click();
  await setFilter(page, 'focus', 'sha256');
  await page.getByTestId('top-row').first().waitFor();
  const focused = readFileSync((await download(page, 'folded')).path, 'utf8').trim().split('\n');
  assert.ok(focused.length > 0 && focused.every((l) => l.includes('sha256')), focused.join('\n'));
  const all = readFileSync((await download(page, 'folded', false)).path, 'utf8').trim().split('\n');
  assert.ok(all.length > focused.length && all.some((l) => !l.includes('sha256')));
  // Folded values are the current sample type's (cpu nanoseconds, the default): their sum
  // is the total pprof reports for the focus.
  const sum = (lines) => lines.reduce((s, l) => s + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  const focusTop = pprof(['-focus=sha256', '-nodefraction=0', '-nodecount=1000'], join(fixtures, 'go/base/cpu.pb.gz'));
  const shown = /Showing nodes accounting for (\S+), \S+ of (\S+) total/.exec(focusTop);
  assert.equal(sum(focused), pprofValue(shown[1]), focusTop);
  assert.equal(sum(all), 7080000000, 'go/base/cpu.pb.gz: 7.08s of cpu (SOURCES.md)');

  // speedscope: one sampled profile of the current sample type; its top frame is the page's top row.
  const speedscope = JSON.parse(readFileSync((await download(page, 'speedscope', false)).path, 'utf8'));
  assert.equal(speedscope.$schema, 'https://www.speedscope.app/file-format-schema.json');
  assert.equal(speedscope.profiles.length, 1);
  const [profile] = speedscope.profiles;
  assert.equal(profile.unit, 'nanoseconds');
  assert.equal(profile.weights.reduce((s, w) => s + w, 0), 7080000000);
  const self = new Map();
  profile.samples.forEach((stack, i) => {
    const leaf = speedscope.shared.frames[stack[stack.length - 1]].name;
    self.set(leaf, (self.get(leaf) || 0) + profile.weights[i]);
  });
  await setFilter(page, 'focus', '');
  const [first] = await pageTopTable(page, 1);
  assert.equal(Math.max(...self.values()), first.flat);
  assert.equal(self.get(first.name), first.flat);

  // OTLP profiles: the CLI reads the download with the original's numbers.
  const otlp = await download(page, 'otlp', false);
  assert.equal(otlp.name, 'cpu.otlp.pb');
  const cliTop = (file) => JSON.parse(execFileSync(stacklensBin, ['top', '--format', 'json', file], { encoding: 'utf8' }));
  const [fromOtlp, original] = [cliTop(otlp.path), cliTop(join(fixtures, 'go/base/cpu.pb.gz'))];
  assert.equal(fromOtlp.total, original.total);
  assert.deepEqual(fromOtlp.functions, original.functions);

  assert.deepEqual(requests.slice(before).filter((u) => new URL(u).pathname.startsWith('/api/')), [],
    'downloads send nothing to the server');
  await page.close();
});

/** `stacklens convert IN -o OUT` with the release binary the server runs. */
const convert = (input, output) => execFileSync(stacklensBin, ['convert', input, '-o', output]);

test('a converted SVG flame graph zooms on click and searches, and shows hostile names as text', async (t) => {
  if (!requireFixtures(t)) return;
  const svgPath = join(dir, 'cpu.svg');
  convert(join(fixtures, 'go/base/cpu.pb.gz'), svgPath);
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const dialogs = [];
  page.on('dialog', async (d) => { dialogs.push(d.message()); await d.dismiss(); });
  await page.goto(`file://${svgPath}`);
  const frames = page.locator('g.frame');
  assert.ok(await frames.count() > 100);
  // The widest frame under the root: clicking it gives it the whole width and hides its siblings.
  const widest = await frames.evaluateAll((gs) => {
    const children = gs.filter((g) => g.dataset.d === '1');
    children.sort((a, b) => Number(b.dataset.w) - Number(a.dataset.w));
    return gs.indexOf(children[0]);
  });
  const target = frames.nth(widest);
  const name = await target.locator('title').getAttribute('data-name');
  assert.ok(Number(await target.locator('rect').getAttribute('width')) < 1199);
  await target.locator('rect').click();
  assert.equal(await target.locator('rect').getAttribute('width'), '1199.50', `${name} fills the width`);
  const hidden = await frames.evaluateAll((gs) => gs.filter((g) => g.style.display === 'none').length);
  assert.ok(hidden > 0, 'frames outside the zoomed one are hidden');
  await page.locator('text.reset').click();
  assert.equal(await frames.evaluateAll((gs) => gs.filter((g) => g.style.display === 'none').length), 0);
  // Search: the frames whose names match are marked, with their share of the total.
  await page.evaluate(() => window.stacklensSearch('sha256'));
  const hits = await page.locator('g.frame.hit title').evaluateAll((ts) => ts.map((t) => t.dataset.name));
  assert.ok(hits.length > 0 && hits.every((h) => /sha256/.test(h)), hits.join(', '));
  assert.match(await page.locator('text.matched').textContent(), /^Matched: [0-9.]+%$/);

  // A function named like markup is text in the frame's title and label, never markup.
  const hostile = join(dir, 'hostile.folded');
  writeFileSync(hostile, 'main;<script>alert(1)</script><img src=x onerror=alert(2)> 5\nmain;ok 3\n');
  for (const ext of ['svg', 'html']) {
    const out = join(dir, `hostile.${ext}`);
    convert(hostile, out);
    await page.goto(`file://${out}`);
    const titles = await page.locator('g.frame title').allTextContents();
    assert.ok(titles.some((t) => t.startsWith('<script>alert(1)</script><img src=x onerror=alert(2)> (5')), titles.join('\n'));
    assert.equal(await page.locator('img').count(), 0, `${ext}: no element made from a name`);
  }
  assert.deepEqual(dialogs, [], 'no script from a name ran');
  await page.close();
});

test('a converted HTML report filters its top table and highlights the flame graph, offline', async (t) => {
  if (!requireFixtures(t)) return;
  const htmlPath = join(dir, 'cpu.html');
  convert(join(fixtures, 'go/base/cpu.pb.gz'), htmlPath);
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(`file://${htmlPath}`);
  const rows = page.locator('#top tbody tr');
  const all = await rows.count();
  assert.ok(all > 50);
  await page.locator('#search').fill('sha256');
  const visible = await rows.evaluateAll((rs) => rs.filter((r) => r.style.display !== 'none').map((r) => r.dataset.name));
  assert.ok(visible.length > 0 && visible.length < all && visible.every((n) => /sha256/.test(n)), visible.join(', '));
  assert.match(await page.locator('#shown').textContent(), new RegExp(`^${visible.length} of ${all} functions$`));
  assert.ok(await page.locator('g.frame.hit').count() > 0, 'the flame graph marks the same search');
  assert.deepEqual(requests, [`file://${htmlPath}`], 'the report loads nothing else');
  await page.close();
});

/** speedscope's time label ("2.11s", "780.00ms", "12.00µs", "5ns") in nanoseconds. */
function speedscopeTime(text) {
  const m = /^([0-9.]+)(s|ms|µs|ns)$/.exec(text.trim());
  if (!m) throw new Error(`not a speedscope time: ${text}`);
  return Math.round(Number(m[1]) * { s: 1e9, ms: 1e6, µs: 1e3, ns: 1 }[m[2]]);
}

/** A nanosecond value rounded as speedscope shows it (two decimals of its unit). */
function asShown(ns) {
  const [factor] = [1e9, 1e6, 1e3, 1].filter((f) => ns >= f);
  return Math.round(Math.round((ns / (factor ?? 1)) * 100) / 100 * (factor ?? 1));
}

test('converted speedscope JSON opens in speedscope itself with our numbers', async (t) => {
  if (!requireFixtures(t)) return;
  const app = join(root, 'node_modules/speedscope/dist/release/index.html');
  const file = join(dir, 'cpu.speedscope.json');
  convert(join(fixtures, 'go/base/cpu.pb.gz'), file);
  // How speedscope's own command line hands it a file: a script that calls loadFileFromBase64.
  const loader = join(dir, 'load.js');
  const b64 = readFileSync(file).toString('base64');
  writeFileSync(loader, `speedscope.loadFileFromBase64(${JSON.stringify('cpu.speedscope.json')}, ${JSON.stringify(b64)})`);
  const ours = JSON.parse(execFileSync(stacklensBin,
    ['top', join(fixtures, 'go/base/cpu.pb.gz'), '--format', 'json'], { encoding: 'utf8' }));
  const page = await browser.newPage({ viewport: { width: 1280, height: 2000 } });
  const logs = [];
  page.on('console', (m) => logs.push(m.text()));
  await page.goto(`file://${app}#localProfilePath=${loader}`);
  await page.getByText('Sandwich').click();
  const rows = await until('speedscope\'s sandwich table', async () => {
    const cells = await page.locator('tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')]
      .map((td) => td.textContent.trim())).filter((c) => c.length === 3));
    return cells.length >= 20 ? cells : undefined;
  });
  assert.ok(logs.includes('Importing as speedscope json file'), logs.join('\n'));
  const byName = new Map(ours.functions.map((f) => [f.name, f]));
  for (const [total, self, name] of rows.slice(0, 20)) {
    const f = byName.get(name);
    assert.ok(f, `speedscope shows ${name}, which our top does not have`);
    assert.equal(speedscopeTime(self.split(' ')[0]), asShown(f.flat), `${name}: self`);
    assert.equal(speedscopeTime(total.split(' ')[0]), asShown(f.cum), `${name}: total`);
  }
  // Its hottest function is ours.
  assert.equal(rows[0][2], ours.functions[0].name);
  await page.close();
});
