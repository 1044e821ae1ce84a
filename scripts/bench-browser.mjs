// Browser benchmark (not a test): stacklens's page against speedscope (npm package,
// same Debian Chromium, same run). For each input: time from file chosen to flame
// graph painted, main-thread JS heap after load, for stacklens the frame time while
// zooming (20 clicks in each run, pooled) and panning (20 arrow keys in each run, pooled)
// and the worker's time per request, and the
// native CLI doing the same work (`stacklens convert FILE -o flame.svg`, or `stacklens
// goroutines FILE`).
// Usage: node scripts/bench-browser.mjs [runs] [fixture...]  (after `trunk build
// --release` and `cargo build --release -p stacklens-backend`; installs speedscope with
// --no-save). A fixture is a path under ../shared/fixtures or an absolute path (the
// huge files of `cargo run --release -p stacklens-backend --example huge -- DIR`).
// BENCH_TIMEOUT_S (default 120) bounds each load; the browser's peak memory is the sum
// of its processes' proportional set sizes (PSS), sampled every 250 ms in one more run
// of each tool (not in the timed ones).
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { extname, join, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { root, fixtures, startServer, launchBrowser, workerMemoryMB } from '../tests/e2e/harness.mjs';

const SPEEDSCOPE = '1.25.0';
const runs = Number(process.argv[2] || 3);
const inputs = process.argv.length > 3 ? process.argv.slice(3)
  : ['large/cpu.large.pb.gz', 'go/base/cpu.pb.gz', 'large/goroutine.large.debug2.txt'];

const ssDir = join(root, 'node_modules/speedscope/dist/release');
if (!existsSync(ssDir)) {
  execFileSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', `speedscope@${SPEEDSCOPE}`], { cwd: root, stdio: 'inherit' });
}

// speedscope's release folder, served as static files.
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm', '.woff2': 'font/woff2', '.png': 'image/png' };
const ss = createServer((req, res) => {
  const path = resolve(ssDir, '.' + decodeURIComponent(new URL(req.url, 'http://x').pathname.replace(/\/$/, '/index.html')));
  if (!path.startsWith(ssDir) || !existsSync(path)) { res.writeHead(404).end(); return; }
  res.writeHead(200, { 'content-type': types[extname(path)] || 'application/octet-stream' }).end(readFileSync(path));
});
await new Promise((ok) => ss.listen(0, '127.0.0.1', ok));
const ssBase = `http://127.0.0.1:${ss.address().port}/`;

const path = (file) => resolve(fixtures, file);
const missing = inputs.filter((file) => !existsSync(path(file)));
if (missing.length) {
  console.error(`no such input: ${missing.map(path).join(', ')} (the fixtures folder is STACKLENS_FIXTURES)`);
  process.exit(2);
}
const server = await startServer();
const browser = await launchBrowser();
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const timeout = Number(process.env.BENCH_TIMEOUT_S || 120) * 1000;

/** The summed PSS of every Chromium process, in MB (Linux /proc). */
function chromiumMB() {
  let kb = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('chromium')) continue;
      kb += Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch { /* the process ended */ }
  }
  return kb / 1024;
}

/** Runs `work` while sampling the browser's memory; its result and the peak in MB. */
async function withPeakMemory(work) {
  let peak = chromiumMB();
  const timer = setInterval(() => { peak = Math.max(peak, chromiumMB()); }, 250);
  try {
    return { ...(await work()), peakMB: peak.toFixed(0) };
  } finally {
    clearInterval(timer);
    peak = Math.max(peak, chromiumMB());
  }
}

async function heapMB(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const { metrics } = await cdp.send('Performance.getMetrics');
  await cdp.detach();
  return (metrics.find((m) => m.name === 'JSHeapUsedSize').value / 1048576).toFixed(0);
}

/** WebAssembly memory of the page and of its analysis worker, in MB. */
async function wasmMB(page) {
  const main = await page.evaluate(() => window.__stacklensWasm?.memory.buffer.byteLength ?? 0);
  return { main: (main / 1048576).toFixed(0), worker: (await workerMemoryMB(page)).toFixed(0) };
}

async function stacklens(file) {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  // Trunk announces the page's WASM exports (and so its memory) with this event.
  await page.addInitScript(() => addEventListener('TrunkApplicationStarted', (e) => { window.__stacklensWasm = e.detail.wasm; }));
  await page.goto(server.base);
  await page.waitForSelector('body[data-worker-ready]');
  const start = Date.now();
  await page.getByTestId('file-input').setInputFiles(path(file));
  const goroutines = file.includes('goroutine');
  if (goroutines) {
    await page.getByTestId('goroutine-count').waitFor({ timeout });
  } else {
    await page.waitForFunction(() => {
      const c = document.querySelector('[data-testid=flamegraph]');
      if (!c || !c.width) return false;
      const d = c.getContext('2d').getImageData(0, c.height - 2, c.width, 1).data;
      return d.some((v, i) => i % 4 === 3 && v > 0);
    }, null, { timeout, polling: 'raf' });
  }
  const ms = Date.now() - start;
  // What the worker spent on each request (its User Timing measures), in ms.
  const worker = {};
  for (const w of page.workers()) {
    for (const [name, ms] of await w.evaluate(() => performance.getEntriesByType('measure').map((m) => [m.name, m.duration]))) {
      const key = name.replace('stacklens ', '');
      worker[key] = (worker[key] ?? 0) + ms;
    }
  }
  let frame = null;
  let pan = null;
  if (!goroutines) {
    // Zoom in and out 20 times; frame time = main-thread work from the click until
    // the canvas is repainted (effects run as microtasks, before the next task).
    frame = await page.evaluate(async () => {
      const c = document.querySelector('[data-testid=flamegraph]');
      const r = c.getBoundingClientRect();
      const times = [];
      for (let i = 0; i < 20; i++) {
        const y = i % 2 ? r.bottom - 4 : r.bottom - 18 * 3 - 4;
        const t0 = performance.now();
        c.dispatchEvent(new MouseEvent('click', { clientX: r.left + r.width * 0.3, clientY: y, bubbles: true }));
        await new Promise((ok) => { const ch = new MessageChannel(); ch.port1.onmessage = ok; ch.port2.postMessage(0); });
        times.push(performance.now() - t0);
        await new Promise((ok) => requestAnimationFrame(ok));
        if (i % 2) window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape' }));
      }
      return times;
    });
    // Pan: from the whole graph, "+" twice (a quarter of its width shown), then 20 steps
    // of the arrows (a tenth of the span each, right then back), timed the same way.
    pan = await page.evaluate(async () => {
      const key = (k) => window.dispatchEvent(new KeyboardEvent('keydown', { key: k }));
      const frame = () => new Promise((ok) => requestAnimationFrame(ok));
      key('Escape');
      await frame();
      for (const k of ['+', '+']) { key(k); await frame(); }
      const times = [];
      for (let i = 0; i < 20; i++) {
        const t0 = performance.now();
        key(i < 10 ? 'ArrowRight' : 'ArrowLeft');
        await new Promise((ok) => { const ch = new MessageChannel(); ch.port1.onmessage = ok; ch.port2.postMessage(0); });
        times.push(performance.now() - t0);
        await frame();
      }
      return times;
    });
  }
  const heap = await heapMB(page);
  const wasm = await wasmMB(page);
  await page.close();
  return { ms, heap, frame, pan, wasm, worker };
}

/**
 * The native CLI doing the page's work on `file`, in ms: parse and draw the flame graph
 * (`stacklens convert FILE -o flame.svg`), or analyse a goroutine dump.
 */
function cli(file) {
  const args = file.includes('goroutine') ? ['goroutines', path(file)]
    : ['convert', path(file), '-o', join(tmpdir(), 'stacklens-bench-flame.svg')];
  const start = process.hrtime.bigint();
  execFileSync(join(root, 'target/release/stacklens'), args, { stdio: ['ignore', 'ignore', 'inherit'] });
  return Number(process.hrtime.bigint() - start) / 1e6;
}

async function speedscope(file) {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  await page.goto(ssBase);
  const name = file.split('/').pop();
  let crashed = false;
  page.on('crash', () => { crashed = true; });
  const start = Date.now();
  try {
    await page.locator('input[type=file]').setInputFiles(path(file));
    await page.waitForFunction((n) => document.title.startsWith(n), name, { timeout });
    await page.evaluate(() => new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok))));
  } catch (e) {
    const failure = crashed ? 'its tab crashed' : `nothing after ${((Date.now() - start) / 1000).toFixed(0)} s (${e.message.split('\n')[0]})`;
    await page.close().catch(() => {});
    return { ms: null, heap: null, failure };
  }
  const ms = Date.now() - start;
  const heap = await heapMB(page);
  await page.close();
  return { ms, heap };
}

console.log(`Chromium ${browser.version()}, speedscope ${SPEEDSCOPE}, stacklens ${execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root }).toString().trim()}, median of ${runs} runs\n`);
console.log('| input | size | stacklens: chosen → painted | native CLI, same work (page ÷ CLI) | speedscope: chosen → painted | stacklens JS heap | stacklens WASM memory (page + worker) | browser peak, stacklens / speedscope | speedscope JS heap | stacklens zoom frame p50 / p95 | stacklens pan frame p50 / p95 |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
// Whatever fails, the server, the browser and speedscope's server are stopped.
try {
  for (const file of inputs) {
    const ours = [];
    const theirs = [];
    const native = [];
    // Alternated, so both see the same machine.
    for (let i = 0; i < runs; i++) {
      ours.push(await stacklens(file));
      native.push(cli(file));
    }
    console.error(`${file}: stacklens ${ours.map((r) => r.ms).join(', ')} ms; CLI ${native.map((ms) => ms.toFixed(0)).join(', ')} ms`);
    for (const r of ours) console.error(`  worker: ${Object.entries(r.worker).map(([k, v]) => `${k} ${v.toFixed(0)} ms`).join(', ')}`);
    // The browser's memory in a run of its own for each tool, after its timed runs: one
    // sample reads the page tables of every Chromium process (23 ms of CPU with cpu.large
    // open), which slowed the runs it was taken in.
    const ourPeak = (await withPeakMemory(() => stacklens(file))).peakMB;
    // STACKLENS_ONLY=1 compares builds of stacklens without waiting for speedscope.
    for (let i = 0; i < runs && !process.env.STACKLENS_ONLY; i++) theirs.push(await speedscope(file));
    const theirPeak = theirs.length ? (await withPeakMemory(() => speedscope(file))).peakMB : 'n/a';
    console.error(`${file}: speedscope ${theirs.map((r) => r.ms ?? r.failure).join(', ')}; peak browser memory ${theirPeak} MB`);
    console.error(`${file}: stacklens peak browser memory ${ourPeak} MB`);
    const o = median(ours.map((r) => r.ms));
    const t = theirs.length && theirs.every((r) => r.ms !== null) ? median(theirs.map((r) => r.ms)) : null;
    const failed = theirs.find((r) => r.ms === null)?.failure;
    // Every run's zoom frames together, and pan frames.
    const p50p95 = (frames) => {
      const sorted = frames.sort((a, b) => a - b);
      const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))].toFixed(1);
      return sorted.length ? `${at(0.5)} / ${at(0.95)} ms` : 'n/a';
    };
    const frame = p50p95(ours.flatMap((r) => r.frame ?? []));
    const pan = p50p95(ours.flatMap((r) => r.pan ?? []));
    const size = (statSync(path(file)).size / 1048576).toFixed(1);
    const wasm = `${ours[0].wasm.main} + ${ours[0].wasm.worker} MB`;
    const n = median(native);
    const theirsShown = t !== null ? `${t} ms` : failed ? `failed: ${failed}` : 'n/a';
    const peaks = `${ourPeak} / ${theirPeak} MB`;
    console.log(`| ${file} | ${size} MB | ${o} ms | ${n.toFixed(0)} ms (${(o / n).toFixed(2)}×) | ${theirsShown} | ${ours[0].heap} MB | ${wasm} | ${peaks} | ${theirs[0]?.heap ?? 'n/a'} MB | ${frame} | ${pan} |`);
  }
} finally {
  await browser.close();
  await server.stop();
  ss.close();
}
