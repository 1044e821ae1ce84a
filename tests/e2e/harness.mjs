// Shared pieces of the browser tests: a real `stacklens serve` on 127.0.0.1 and
// Debian's Chromium driven by playwright-core (never a downloaded browser).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { chromium } from 'playwright-core';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const fixtures = process.env.STACKLENS_FIXTURES || resolve(root, '../shared/fixtures');
export const screenshots = resolve(root, 'test-results/screenshots');

/**
 * True when the shared fixtures are present. When they are missing the test fails, unless
 * skipping was opted into with STACKLENS_ALLOW_SKIP=1 outside CI: then it is skipped, and
 * the TAP summary counts it.
 */
export function requireFixtures(t) {
  if (existsSync(join(fixtures, 'SOURCES.md'))) return true;
  const what = `fixtures folder ${fixtures} not found; set STACKLENS_FIXTURES`;
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
  const bin = process.env.STACKLENS_BIN || join(root, 'target/release/stacklens');
  const proc = spawn(bin, ['serve', '--listen', `127.0.0.1:${port}`, '--dist', join(root, 'dist'), '--store', 'memory://', ...extraArgs], { stdio: ['ignore', 'inherit', 'inherit'] });
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
