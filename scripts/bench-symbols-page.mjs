// Symbolization in the page against the CLI (not a test): a profile of COUNT distinct
// addresses inside one large binary's functions (random, seeded; perf script text, one
// sample an address, the binary's frames unnamed), then that binary dropped onto the open
// tab. The page's time is its worker's for the dropped file (User Timing `stacklens
// parse`: reading the binary from its blob in slices, symbolizing, the new summary); the
// CLI's is `stacklens top --symbols BINARY` less `stacklens top` on the same text
// (reading the binary, symbolizing), medians of RUNS each.
// Usage: node scripts/bench-symbols-page.mjs [BINARY] [COUNT] [RUNS]  (after `trunk build
// --release` and `cargo build --release -p stacklens-backend`); BINARY defaults to
// target/debug/stacklens, COUNT to 1000000, RUNS to 3.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { root, startServer, launchBrowser, stacklensBin } from '../tests/e2e/harness.mjs';

const binary = resolve(process.argv[2] || join(root, 'target/debug/stacklens'));
const count = Number(process.argv[3] || 1000000);
const runs = Number(process.argv[4] || 3);
const dir = mkdtempSync(join(tmpdir(), 'stacklens-symbols-page-'));
const bin = join(dir, 'stacklens-debug');
copyFileSync(binary, bin); // a rebuild during the run must not change what is read

// The functions of its symbol table, and its loaded segments (perf script's addresses
// are file offsets).
const functions = execFileSync('nm', ['-S', '--defined-only', bin], { encoding: 'utf8', maxBuffer: 1 << 30 })
  .split('\n').map((l) => l.split(' ')).filter((w) => w.length === 4 && /^[tT]$/.test(w[2]) && Number.parseInt(w[1], 16) > 0)
  .map((w) => [BigInt('0x' + w[0]), Number.parseInt(w[1], 16)]);
const segments = execFileSync('readelf', ['-lW', bin], { encoding: 'utf8' }).split('\n')
  .filter((l) => l.trim().startsWith('LOAD')).map((l) => l.trim().split(/\s+/))
  .map((w) => ({ offset: BigInt(w[1]), address: BigInt(w[2]), size: BigInt(w[4]) }));
let seed = 34;
const random = () => { // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const drawn = new Set();
while (drawn.size < count) {
  const [start, size] = functions[Math.floor(random() * functions.length)];
  drawn.add(start + BigInt(Math.floor(random() * size)));
}
const lines = [];
for (const address of drawn) {
  const s = segments.find((g) => g.address <= address && address < g.address + g.size);
  if (!s) continue;
  lines.push(`work 1 1.000000:          1 cpu-clock:u: \n\t${(address - s.address + s.offset).toString(16)} [unknown] (${bin})\n`);
}
const profile = join(dir, 'symbols.perf-script.txt');
writeFileSync(profile, lines.join('\n'));
console.log(`binary: ${binary}, ${Math.round(statSync(bin).size / 1e6)} MB; ${lines.length} addresses`);

// The CLI: with and without the binary.
const seconds = (args) => {
  const t0 = process.hrtime.bigint();
  execFileSync(stacklensBin, args, { stdio: ['ignore', 'ignore', 'ignore'], maxBuffer: 1 << 30 });
  return Number(process.hrtime.bigint() - t0) / 1e9;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const plain = [];
const named = [];
for (let i = 0; i < runs; i++) {
  plain.push(seconds(['top', profile]));
  named.push(seconds(['top', profile, '--symbols', bin]));
}
const native = median(named) - median(plain);
console.log(`CLI: top ${median(plain).toFixed(2)} s, with --symbols ${median(named).toFixed(2)} s: symbolizing ${native.toFixed(2)} s`);

// The page: the text, then the binary dropped onto its tab.
const server = await startServer();
const browser = await launchBrowser();
const page_ = [];
try {
  for (let i = 0; i < runs; i++) {
    const page = await browser.newPage();
    await page.goto(server.base + '/');
    await page.getByTestId('file-input').setInputFiles(profile);
    await page.getByTestId('symbols-panel').waitFor({ timeout: 300000 });
    // The worker that parsed the profile.
    let worker;
    for (const w of page.workers()) {
      if (await w.evaluate(() => performance.getEntriesByName('stacklens parse').length > 0)) worker = w;
    }
    const before = await worker.evaluate(() => performance.getEntriesByName('stacklens parse').length);
    await page.getByTestId('file-input').setInputFiles(bin);
    await page.getByTestId('symbol-files').locator('li').first().waitFor({ timeout: 300000 });
    const ms = await worker.evaluate(async (n) => {
      for (;;) {
        const parses = performance.getEntriesByName('stacklens parse');
        if (parses.length > n) return parses[n].duration;
        await new Promise((ok) => setTimeout(ok, 50));
      }
    }, before);
    page_.push(ms / 1000);
    // Its parts, as the worker measured them.
    const parts = await worker.evaluate((n) => {
      const start = performance.getEntriesByName('stacklens parse')[n].startTime;
      return performance.getEntriesByType('measure').filter((m) => m.startTime >= start)
        .map((m) => `${m.name.replace('stacklens ', '')} ${(m.duration / 1000).toFixed(2)} s`);
    }, before);
    console.log(`page run ${i + 1}: ${parts.join(', ')}`);
    await page.close();
  }
} finally {
  await browser.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
const inPage = median(page_);
console.log(`page: symbolizing ${inPage.toFixed(2)} s (runs: ${page_.map((s) => s.toFixed(2)).join(', ')}): ${(inPage / native).toFixed(2)}× the CLI`);
