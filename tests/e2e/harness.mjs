// Shared pieces of the browser tests: a real `stacklens serve` on 127.0.0.1 and
// Debian's Chromium driven by playwright-core (never a downloaded browser).
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { chromium } from 'playwright-core';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const fixtures = process.env.STACKLENS_FIXTURES || resolve(root, '../shared/fixtures');
/** The programs and recordings `tests/programs/make.sh` makes on this machine. */
export const symbolFixtures = process.env.STACKLENS_SYMBOL_FIXTURES || resolve(root, 'target/fixtures/symbols');
export const screenshots = resolve(root, 'test-results/screenshots');
/** The release binary the tests run: STACKLENS_BIN, e.g. a build with another CARGO_TARGET_DIR. */
export const stacklensBin = process.env.STACKLENS_BIN || join(root, 'target/release/stacklens');

/**
 * True when the shared fixtures are present. When they are missing the test fails, unless
 * skipping was opted into with STACKLENS_ALLOW_SKIP=1 outside CI: then it is skipped, and
 * the TAP summary counts it.
 */
export function requireFixtures(t) {
  return requirePrerequisite(t, existsSync(join(fixtures, 'SOURCES.md')), `fixtures folder ${fixtures} not found; set STACKLENS_FIXTURES`);
}

/** True when tests/programs/make.sh has made the symbol fixtures; else as requireFixtures. */
export function requireSymbolFixtures(t) {
  return requirePrerequisite(t, existsSync(join(symbolFixtures, '.made')), `${symbolFixtures} (made by \`bash tests/programs/make.sh\`)`);
}

/** Whether tests/programs/make.sh could record the kernel here (else it said why). */
export function requireKernelFixtures(t) {
  if (!requireSymbolFixtures(t)) return false;
  const absent = join(symbolFixtures, 'kernel.absent');
  const why = existsSync(absent) ? readFileSync(absent, 'utf8').trim() : '';
  return requirePrerequisite(t, !why, `a recording of the kernel: ${why}`);
}

function requirePrerequisite(t, present, what) {
  if (present) return true;
  if (process.env.CI === 'true') throw new Error(`missing prerequisite: ${what} (CI=true requires it)`);
  if (process.env.STACKLENS_ALLOW_SKIP !== '1') {
    throw new Error(`missing prerequisite: ${what} (set STACKLENS_ALLOW_SKIP=1 to skip instead)`);
  }
  t.skip(what);
  return false;
}

async function freePort() {
  return new Promise((ok, fail) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => ok(port)); });
    s.on('error', fail);
  });
}

/** Starts the server binary on a free port; resolves once /healthz answers. */
export async function startServer(extraArgs = []) {
  const port = await freePort();
  const proc = spawn(stacklensBin, ['serve', '--listen', `127.0.0.1:${port}`, '--dist', join(root, 'dist'), '--store', 'memory://', ...extraArgs], { stdio: ['ignore', 'inherit', 'inherit'] });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`server exited with ${proc.exitCode}`);
    try { if ((await fetch(`${base}/healthz`)).ok) break; } catch { /* not yet */ }
    if (Date.now() > deadline) { proc.kill(); throw new Error('server did not become ready'); }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { base, stop: () => new Promise((r) => { proc.once('exit', r); proc.kill('SIGTERM'); }) };
}

// Playwright's launch() gives every browser a fresh temporary --user-data-dir.
export async function launchBrowser() {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}

export async function screenshot(page, name) {
  mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true });
}

// ---- Shared by the view tests: prerequisites, pprof's reference outputs, what the page shows.

/** Fails (or with STACKLENS_ALLOW_SKIP=1 outside CI, skips) a test whose prerequisite is missing. */
export function missingPrerequisite(t, what) {
  if (process.env.CI === 'true' || process.env.STACKLENS_ALLOW_SKIP !== '1') {
    throw new Error(`missing prerequisite: ${what} (CI or no STACKLENS_ALLOW_SKIP=1)`);
  }
  t.skip(what);
}

export const goBinary = process.env.STACKLENS_GO || '/usr/bin/go';

/** True when Go (for `go tool pprof` reference outputs) is present; see missingPrerequisite. */
export function requireGo(t) {
  if (existsSync(goBinary)) return true;
  missingPrerequisite(t, `${goBinary} not found (go tool pprof makes the reference outputs)`);
  return false;
}

/** `go tool pprof -top ARGS FILE` (a fixture path), the independent reference; the large profile needs a longer `timeout` (ms). */
export function pprofTop(args, file, timeout = 60000) {
  return execFileSync(goBinary, ['tool', 'pprof', '-top', ...args, join(fixtures, file)], {
    encoding: 'utf8', env: { ...process.env, PPROF_BINARY_PATH: '/nonexistent' }, timeout,
  });
}

/** A value as pprof prints it ("0.65s", "-450ms", "13.86MB", "134") in the base unit (ns, B, count). */
export function pprofValue(text) {
  const m = /^(-?[0-9.]+)([a-zA-Z]*)$/.exec(text);
  if (!m) throw new Error(`not a pprof value: ${text}`);
  const factor = { '': 1, ns: 1, us: 1e3, ms: 1e6, s: 1e9, B: 1, kB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 }[m[2]];
  if (factor === undefined) throw new Error(`unknown unit in ${text}`);
  return Math.round(Number(m[1]) * factor);
}

/** The table of a `go tool pprof -top` text: [{ flat, cum, name, inline? }] (`inline` is
 * "inline" or "partial-inline" where pprof marks the row), first `n`. */
export function pprofTable(text, n = Infinity) {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trim().startsWith('flat  flat%')) + 1;
  if (start === 0) throw new Error(`no pprof table in:\n${text}`);
  return lines.slice(start).filter((l) => l.trim()).slice(0, n).map((l) => {
    const t = l.trim().split(/\s+/);
    const [, name, inline] = / *(.*?)(?: \(((?:partial-)?inline)\))?$/.exec(t.slice(5).join(' '));
    return { flat: pprofValue(t[0]), cum: pprofValue(t[3]), name, ...(inline && { inline }) };
  });
}

/** A fixture's stored pprof output (`*.pprof-top.txt`) as a table. */
export function pprofFileTable(file, n) {
  return pprofTable(readFileSync(join(fixtures, file), 'utf8'), n);
}

/** "Showing nodes accounting for X" of a pprof text (with -nodecount large and -nodefraction=0: the total kept). */
export function pprofShown(text) {
  return pprofValue(/Showing nodes accounting for (\S+),/.exec(text)[1]);
}

/** The first `n` rows of the page's top table (or of the table whose rows are `row`): [{ flat, cum, name, inline? }] from the cells' raw values (`inline` as the row marks it). */
export async function pageTopTable(page, n, row = 'top-row') {
  await page.getByTestId(row).first().waitFor();
  return page.getByTestId(row).evaluateAll((rows, n) => rows.slice(0, n).map((r) => ({
    flat: Number(r.querySelector('[data-col=flat]').dataset.value),
    cum: Number(r.querySelector('[data-col=cum]').dataset.value),
    name: r.querySelector('[data-col=name]').dataset.value,
    ...(r.querySelector('[data-col=name]').dataset.inline && { inline: r.querySelector('[data-col=name]').dataset.inline }),
  })), n);
}

/** Polls `probe` until it returns something other than undefined, or fails after `ms`. */
export async function until(what, probe, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The analysis workers' WebAssembly memory in MB (`worker.js` exposes it); 0 while none runs. */
export async function workerMemoryMB(page) {
  let bytes = 0;
  for (const w of page.workers()) bytes += await w.evaluate(() => self.stacklensMemory?.buffer.byteLength ?? 0).catch(() => 0);
  return bytes / 1048576;
}

/** Waits until the page's top table starts with exactly `expected` (pprof's rows); returns what it shows. */
export async function expectTopTable(page, expected, what) {
  let shown;
  try {
    return await until(what, async () => {
      shown = await pageTopTable(page, expected.length);
      return JSON.stringify(shown) === JSON.stringify(expected) ? shown : undefined;
    });
  } catch (e) {
    // Show the difference, not only the timeout.
    const { deepStrictEqual } = await import('node:assert/strict');
    deepStrictEqual(shown, expected, what);
    throw e;
  }
}

/** The flame graph canvas's pixel [r, g, b, a] at CSS pixel (x, y) of the canvas. */
export async function canvasPixel(canvas, x, y) {
  return canvas.evaluate((c, [x, y]) => {
    const scale = c.width / c.clientWidth;
    return [...c.getContext('2d').getImageData(Math.floor(x * scale), Math.floor(y * scale), 1, 1).data];
  }, [x, y]);
}

/** CSS hsl(h, s%, l%) as 8-bit [r, g, b] (what a canvas fill of that colour reads back, ±1). */
export function hslRgb(h, s, l) {
  const a = (s / 100) * Math.min(l / 100, 1 - l / 100);
  const f = (n) => { const k = (n + h / 30) % 12; return Math.round(255 * (l / 100 - a * Math.max(-1, Math.min(k - 3, 9 - k, 1)))); };
  return [f(0), f(8), f(4)];
}

/** True when `pixel` is `rgb` within 1 per channel (canvas colour rounding). */
export function sameColour(pixel, rgb) {
  return rgb.every((v, i) => Math.abs(pixel[i] - v) <= 1) && pixel[3] === 255;
}

/** Hovers the canvas at CSS (x, y): the tooltip's frame name and its whole text (name, file, total, self). */
export async function hoverText(canvas, x, y) {
  const tip = canvas.locator('xpath=..').getByTestId('flame-tooltip'); // this graph's own tooltip
  // Leave the canvas first, so the tooltip read is the one for (x, y).
  await canvas.dispatchEvent('mouseleave');
  await tip.waitFor({ state: 'detached' });
  // Scrolled into view (a deep graph is taller than the window); the tooltip may cover it.
  await canvas.hover({ position: { x, y }, force: true });
  await tip.waitFor();
  return { name: await tip.locator('.tt-name').textContent(), text: await tip.textContent() };
}

/** A fresh page (its own context) on the server's page, recording every request it makes. */
export async function openPage(browser, base) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(base);
  return { page, requests };
}

/** Opens fixture files (paths under the fixtures folder, or absolute) with the page's file button. */
export async function loadFixtures(page, ...files) {
  await page.getByTestId('file-input').setInputFiles(files.map((f) => resolve(fixtures, f)));
}

/** Waits until the page's Cache Storage holds `n` kept files. */
export async function keptFiles(page, n) {
  await until(`the page to keep ${n} files`, async () => {
    const kept = await page.evaluate(async () => (await (await caches.open('stacklens-local-profiles')).keys()).length);
    return kept === n ? kept : undefined;
  });
}

/** Sets a focus/ignore/hide input the way a user does: type, then Enter (the inputs apply on change). */
export async function setFilter(page, testid, value) {
  const input = page.getByTestId(testid);
  await input.fill(value);
  await input.press('Enter');
}
