// Every format core imports, opened in the page with the file button: the profile is a
// tab with the right sample types, the top table's first rows and the flame graph root's
// total equal references made without our code (CPython's pstats and callgrind_annotate
// run here, or small readings of the raw file in this test; the JDK's jfr tool for JFR).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { gunzipSync } from 'node:zlib';
import { basename, join } from 'node:path';
import {
  startServer, launchBrowser, fixtures, requireFixtures, missingPrerequisite, openPage, loadFixtures, pageTopTable,
  expectTopTable, pprofValue, hoverText, until, screenshot,
} from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

const ROW = 18; // CSS pixels per flame graph row
const ROWS = 10; // top table rows compared
const PYTHON = '/usr/bin/python3';
const CALLGRIND_ANNOTATE = '/usr/bin/callgrind_annotate';
const JFR = '/usr/bin/jfr';

const text = (file) => {
  const bytes = readFileSync(join(fixtures, file));
  return (bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes) : bytes).toString('utf8');
};
const add = (map, key, v) => map.set(key, (map.get(key) || 0) + v);
const sum = (values) => [...values].reduce((s, v) => s + v, 0);

/**
 * A reference's first `n` rows as the page orders them (pprof's -top order: |flat|
 * descending, then name, then |cum|): [{ flat, cum, name }]. `flat` and `cum` are maps
 * of a function key to its value; `nameOf` gives a key's shown name.
 */
function topRows(flat, cum, n, nameOf = (k) => k) {
  const keys = new Set([...flat.keys(), ...cum.keys()]);
  const rows = [...keys].map((k) => ({ flat: flat.get(k) || 0, cum: cum.get(k) || 0, name: nameOf(k) }))
    .filter((r) => r.flat !== 0 || r.cum !== 0);
  rows.sort((a, b) => Math.abs(b.flat) - Math.abs(a.flat) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
    || Math.abs(b.cum) - Math.abs(a.cum));
  return rows.slice(0, n);
}

/** Waits until the page's first rows' [name, flat] equal `expected`'s (for references with self values only). */
async function expectTopFlat(page, expected, what) {
  const want = expected.map((r) => [r.name, r.flat]);
  let shown;
  try {
    await until(what, async () => {
      shown = (await pageTopTable(page, want.length)).map((r) => [r.name, r.flat]);
      return JSON.stringify(shown) === JSON.stringify(want) ? true : undefined;
    });
  } catch (e) {
    assert.deepEqual(shown, want, what);
    throw e;
  }
}

/** Every row of the page's top table. */
async function allRows(page) {
  await page.getByTestId('top-row').first().waitFor();
  return pageTopTable(page, Infinity);
}

/**
 * Opens `file` with the file button: it becomes the one tab, named as the file, with
 * `types` as its sample types and `selected` chosen. Returns the page.
 */
async function open(file, types, selected) {
  const { page } = await openPage(browser, server.base);
  await loadFixtures(page, file);
  const tab = page.getByTestId('profile-tab');
  await tab.first().waitFor({ timeout: 30000 });
  assert.deepEqual(await tab.locator('.tab-name').allTextContents(), [basename(file)]);
  const select = page.getByTestId('sample-type');
  await select.waitFor();
  assert.deepEqual(await select.locator('option').allTextContents(), types, `${file}: sample types`);
  assert.equal(await select.locator('option:checked').textContent(), selected, `${file}: default sample type`);
  assert.deepEqual(await page.getByTestId('error').allTextContents(), [], `${file}: no error`);
  return page;
}

/**
 * The flame graph's root (bottom row) reads `total` at the precision the tooltip shows
 * it ("3.12s", "843", "18.84ms"): the shown number is `total` in the shown unit, rounded.
 */
async function expectRootTotal(page, total, what) {
  const canvas = page.getByTestId('flamegraph');
  await canvas.waitFor();
  await until('the flame graph to be painted', () => canvas.evaluate((c) => (c.width > 0 ? true : undefined)));
  const { width, height } = await canvas.boundingBox();
  const tip = await hoverText(canvas, width / 2, height - ROW / 2);
  assert.equal(tip.name, 'root', what);
  const shown = /total (\S+) \(100%\)/.exec(tip.text)?.[1];
  assert.ok(shown, `${what}: the root's tooltip gives its total: ${tip.text}`);
  const [, digits, unit] = /^-?[0-9]+(?:\.([0-9]+))?([a-zA-Z]*)$/.exec(shown);
  const factor = pprofValue(`1${unit}`);
  assert.equal(shown, `${(total / factor).toFixed(digits ? digits.length : 0)}${unit}`, `${what}: root total ${total}`);
}

/** Chooses a sample type and waits for the table to show `expected` (rows with flat and cum). */
async function chooseSample(page, label, expected, what) {
  await page.getByTestId('sample-type').selectOption({ label });
  await expectTopTable(page, expected, what);
}

/** The page's flat column over all rows: the whole total when every sample has a leaf function. */
async function expectFlatSum(page, total, what) {
  const rows = await allRows(page);
  assert.equal(sum(rows.map((r) => r.flat)), total, `${what}: the flat column adds up to the total`);
}

async function showTop(page) {
  await page.getByTestId('view-top').click();
  await page.getByTestId('top-table').waitFor();
}

// ---------------------------------------------------------------------------

/**
 * A V8 .cpuprofile (Node's --cpu-prof shape: nodes with parents by children, samples,
 * timeDeltas): per function name (the top table's rows, as pprof's -top merges a name's
 * functions), samples whose leaf it is and samples with it on the stack; wall time of a sample = the next sample's time − its own (the last
 * runs to endTime). Anonymous functions are named as the page names them: "(anonymous
 * file:line)" with the url's last segment and the 1-based line.
 */
function cpuprofileReference(json) {
  const byId = new Map(json.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of json.nodes) for (const c of n.children || []) parent.set(c, n.id);
  const key = (n) => {
    const f = n.callFrame;
    let name = f.functionName;
    if (!name) {
      const base = (f.url || '').split('/').pop();
      name = !base ? '(anonymous)' : f.lineNumber >= 0 ? `(anonymous ${base}:${f.lineNumber + 1})` : `(anonymous ${base})`;
    }
    return name;
  };
  let t = json.startTime;
  const times = json.timeDeltas.map((d) => (t += d));
  const order = json.samples.map((_, i) => i).sort((a, b) => times[a] - times[b]);
  const ref = { samples: 0, wall: 0, flat: [new Map(), new Map()], cum: [new Map(), new Map()] };
  order.forEach((i, k) => {
    const next = k + 1 < order.length ? times[order[k + 1]] : json.endTime;
    const dur = Math.max(0, next - times[i]);
    ref.samples += 1;
    ref.wall += dur;
    const leaf = byId.get(json.samples[i]);
    const stack = new Set();
    for (let n = leaf; n; n = byId.get(parent.get(n.id))) if (n.callFrame.functionName !== '(root)') stack.add(key(n));
    if (leaf.callFrame.functionName !== '(root)') {
      add(ref.flat[0], key(leaf), 1);
      add(ref.flat[1], key(leaf), dur);
    }
    for (const k of stack) { add(ref.cum[0], k, 1); add(ref.cum[1], k, dur); }
  });
  return ref;
}

test('Node .cpuprofile (hello.cjs, Node 20 --cpu-prof): samples and wall time per function as the file counts them', async (t) => {
  if (!requireFixtures(t)) return;
  const file = 'thirdparty/firefox-profiler/hello.cjs-20231120T211435.cpuprofile';
  const ref = cpuprofileReference(JSON.parse(text(file)));
  assert.equal(ref.samples, 150, 'the file has 150 samples');
  const page = await open(file, ['samples', 'wall'], 'wall');
  // wall is in microseconds; the tooltip's figure is compared in nanoseconds.
  await expectRootTotal(page, ref.wall * 1000, 'wall');
  await screenshot(page, 'format-cpuprofile');
  await showTop(page);
  // The table's values are in the sample type's unit, microseconds.
  const wallRows = topRows(ref.flat[1], ref.cum[1], ROWS);
  assert.deepEqual(wallRows[0], { flat: 46_065, cum: 77_374, name: 'compileForInternalLoader' });
  await expectTopTable(page, wallRows, 'wall: the file\'s time deltas');
  await expectFlatSum(page, sum(ref.flat[1].values()), 'wall');
  await chooseSample(page, 'samples', topRows(ref.flat[0], ref.cum[0], ROWS), 'samples: the file\'s sample counts');
  await expectFlatSum(page, sum(ref.flat[0].values()), 'samples');
  await page.getByTestId('view-flame').click();
  await expectRootTotal(page, ref.samples, 'samples');
  await page.close();
});

/**
 * `perf script` text, read plainly: a record is a header line `comm pid [cpu] time:
 * [period] event:` and frame lines (`addr symbol (dso)`, leaf first) up to a blank line.
 * Per event: records, and per symbol the records whose leaf it is and the records
 * with it anywhere on the stack.
 */
function perfReference(content) {
  const events = new Map();
  let stack = null;
  const finish = () => {
    if (!stack) return;
    const e = stack.event;
    e.samples += 1;
    if (stack.frames.length) add(e.flat, stack.frames[0], 1);
    for (const f of new Set(stack.frames)) add(e.cum, f, 1);
    stack = null;
  };
  for (const line of content.split('\n')) {
    if (line.startsWith('#')) continue;
    if (!line.trim()) { finish(); continue; }
    if (/^\s/.test(line)) {
      const m = /^\s*[0-9a-f]+ (.*) \((.*)\)$/.exec(line);
      assert.ok(m, `a frame line: ${line}`);
      let [, symbol, dso] = m;
      symbol = symbol.replace(/\+0x[0-9a-f]+$/, '');
      stack.frames.push(symbol === '[unknown]' ? (dso === '[unknown]' ? '<unknown>' : `[${dso.split('/').pop()}]`) : symbol);
      continue;
    }
    finish();
    const tokens = line.trim().split(/\s+/);
    const time = tokens.findIndex((tk) => /^[0-9]+\.[0-9]+:$/.test(tk));
    const name = tokens[time + 1].replace(/:.*$/, '');
    if (!events.has(name)) events.set(name, { samples: 0, flat: new Map(), cum: new Map() });
    stack = { event: events.get(name), frames: [] };
  }
  finish();
  return events;
}

test('perf script with two events: one sample type per event, each with the records of its event', async (t) => {
  if (!requireFixtures(t)) return;
  const file = 'thirdparty/flamegraph/perf-cycles-instructions-01.txt';
  const events = perfReference(text(file));
  assert.deepEqual([...events.keys()], ['instructions', 'cycles'], 'events in order of appearance');
  const [instructions, cycles] = [events.get('instructions'), events.get('cycles')];
  assert.deepEqual([instructions.samples, cycles.samples], [333, 111]);
  const page = await open(file, ['instructions_samples', 'cycles_samples'], 'cycles_samples');
  await expectRootTotal(page, cycles.samples, 'cycles');
  await showTop(page);
  await expectTopTable(page, topRows(cycles.flat, cycles.cum, ROWS), 'cycles: records per symbol');
  await expectFlatSum(page, cycles.samples, 'cycles');
  await chooseSample(page, 'instructions_samples', topRows(instructions.flat, instructions.cum, ROWS), 'instructions: records per symbol');
  await expectFlatSum(page, instructions.samples, 'instructions');
  await page.getByTestId('view-flame').click();
  await expectRootTotal(page, instructions.samples, 'instructions');
  await screenshot(page, 'format-perf-instructions');
  // And back: the other event's numbers again.
  await showTop(page);
  await chooseSample(page, 'cycles_samples', topRows(cycles.flat, cycles.cum, ROWS), 'cycles again');
  await page.close();
});

/** Folded stacks `a;b;c N`: per frame name (py-spy's " (file:line)" dropped), the counts of lines it ends and of lines it is in. */
function foldedReference(content) {
  const ref = { total: 0, flat: new Map(), cum: new Map() };
  for (const line of content.split('\n').filter((l) => l.trim())) {
    const at = line.trimEnd().lastIndexOf(' ');
    const count = Number(line.slice(at + 1));
    const frames = line.slice(0, at).split(';').map((f) => f.replace(/ \([^()]*:[0-9]+\)$/, ''));
    ref.total += count;
    const named = frames.filter((f) => f);
    if (named.length) add(ref.flat, named[named.length - 1], count);
    for (const f of new Set(named)) add(ref.cum, f, count);
  }
  return ref;
}

test('folded stacks (py-spy): counts per leaf and per frame as the lines add up', async (t) => {
  if (!requireFixtures(t)) return;
  const file = 'tools/pyspy-workload-A.collapsed.txt';
  const ref = foldedReference(text(file));
  assert.equal(ref.total, 843);
  const page = await open(file, ['samples'], 'samples');
  await expectRootTotal(page, ref.total, 'samples');
  await screenshot(page, 'format-folded');
  await showTop(page);
  const rows = topRows(ref.flat, ref.cum, ROWS);
  assert.deepEqual(rows[0], { flat: 391, cum: 391, name: 'JSONDecoder.raw_decode' });
  await expectTopTable(page, rows, 'counts per leaf');
  // One line is " 6": six samples with an empty stack, in the root's total, in no function.
  assert.equal(sum(ref.flat.values()), 837);
  await expectFlatSum(page, 837, 'samples');
  await page.close();
});

test('folded stacks larger than a read slice: read line by line, counted as the lines add up', async (t) => {
  if (!requireFixtures(t)) return;
  // The worker reads files in 16 MiB slices, and folded stacks a line at a time in two
  // passes: 40 MB of copies of the py-spy file, each under its own root frame with a
  // multibyte name and its own counts, so lines and characters fall across slices.
  const lines = text('tools/pyspy-workload-A.collapsed.txt').split('\n').filter((l) => l.trim());
  const parts = [];
  let size = 0;
  for (let copy = 0; size < 40e6; copy++) {
    for (const line of lines) {
      const at = line.trimEnd().lastIndexOf(' ');
      const out = `würker-${copy % 97};${line.slice(0, at)} ${Number(line.slice(at + 1)) + (copy % 5)}\n`;
      parts.push(out);
      size += Buffer.byteLength(out);
    }
  }
  const content = parts.join('');
  const dir = mkdtempSync(join(tmpdir(), 'stacklens-e2e-folded-'));
  const file = join(dir, 'big.folded');
  writeFileSync(file, content);
  try {
    const ref = foldedReference(content);
    const page = await open(file, ['samples'], 'samples');
    await expectRootTotal(page, ref.total, 'samples');
    await showTop(page);
    await expectTopTable(page, topRows(ref.flat, ref.cum, ROWS), 'counts per leaf, as the lines add up');
    await page.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** CPython's own reading of a .pstats file: per function, [tottime ns, ncalls, name]; the total of tt. */
function pstatsReference(t, file) {
  if (!existsSync(PYTHON)) { missingPrerequisite(t, `${PYTHON} not found (its pstats module reads the reference)`); return null; }
  const script = [
    'import pstats, sys',
    's = pstats.Stats(sys.argv[1])',
    'print(s.total_calls, round(s.total_tt * 1e9))',
    'for (f, l, n), (cc, nc, tt, ct, _) in s.stats.items(): print(round(tt * 1e9), nc, n, sep="\\t")',
  ].join('\n');
  const out = execFileSync(PYTHON, ['-c', script, join(fixtures, file)], { encoding: 'utf8', timeout: 60000 }).trim().split('\n');
  const [calls, total] = out[0].split(' ').map(Number);
  const rows = out.slice(1).map((l) => { const [tt, nc, name] = l.split('\t'); return { tt: Number(tt), nc: Number(nc), name }; });
  return { calls, total, rows };
}

test('cProfile .pstats: time and calls per function equal CPython\'s pstats', async (t) => {
  if (!requireFixtures(t)) return;
  const file = 'tools/python-cprofile-A.pstats';
  const ref = pstatsReference(t, file);
  if (!ref) return;
  assert.deepEqual([ref.total, ref.calls], [3_124_731_595, 319_774], 'pstats: 319774 function calls in 3.125 seconds');
  assert.equal(sum(ref.rows.map((r) => r.tt)), ref.total, 'the rounded tottimes add up');
  const page = await open(file, ['time', 'calls'], 'time');
  await expectRootTotal(page, ref.total, 'time');
  await screenshot(page, 'format-pstats');
  await showTop(page);
  // A row is a function name: pprof's -top merges the functions of one name (the
  // lambdas, list comprehensions… of several files) into one row.
  const [tt, nc] = [new Map(), new Map()];
  for (const r of ref.rows) { add(tt, r.name, r.tt); add(nc, r.name, r.nc); }
  const byTime = topRows(tt, new Map(), ROWS);
  assert.deepEqual(byTime[0], { flat: 1_265_833_087, cum: 0, name: 'raw_decode' }, 'json/decoder.py:343(raw_decode)');
  await expectTopFlat(page, byTime, 'time: pstats tottime (ns)');
  await expectFlatSum(page, ref.total, 'time');
  await page.getByTestId('sample-type').selectOption({ label: 'calls' });
  const byCalls = topRows(nc, new Map(), ROWS);
  await expectTopFlat(page, byCalls, 'calls: pstats ncalls');
  await expectFlatSum(page, ref.calls, 'calls');
  await page.close();
});

/** `callgrind_annotate --inclusive=no`: PROGRAM TOTALS and each function's self cost ([name, cost]). */
function callgrindReference(t, file) {
  if (!existsSync(CALLGRIND_ANNOTATE)) { missingPrerequisite(t, `${CALLGRIND_ANNOTATE} (valgrind) not found`); return null; }
  const out = execFileSync(CALLGRIND_ANNOTATE, ['--threshold=100', '--inclusive=no', join(fixtures, file)],
    { encoding: 'utf8', timeout: 60000, maxBuffer: 64 << 20 });
  let total = null;
  const rows = [];
  for (const line of out.split('\n')) {
    const m = /^\s*([0-9,]+) \([^)]*\)\s+(.*)$/.exec(line);
    if (!m) continue;
    const cost = Number(m[1].replace(/,/g, ''));
    if (m[2] === 'PROGRAM TOTALS') { total = cost; continue; }
    // `file:function [object]`: the function is after the last ':' of the file part.
    const fileFunction = m[2].replace(/ \[[^\]]*\]$/, '');
    rows.push({ cost, name: fileFunction.slice(fileFunction.lastIndexOf(':') + 1), where: fileFunction });
  }
  return { total, rows };
}

test('callgrind: Ir self cost per function equals callgrind_annotate --inclusive=no', async (t) => {
  if (!requireFixtures(t)) return;
  const file = 'tools/callgrind.out.cworkload-A';
  const ref = callgrindReference(t, file);
  if (!ref) return;
  assert.equal(ref.total, 1_272_809_597, 'PROGRAM TOTALS');
  assert.equal(sum(ref.rows.map((r) => r.cost)), ref.total, 'the self costs add up');
  const page = await open(file, ['Ir'], 'Ir');
  await expectRootTotal(page, ref.total, 'Ir');
  await screenshot(page, 'format-callgrind');
  await showTop(page);
  // A row is a function name (pprof's -top merges _dl_lookup_symbol_x of two files).
  const self = new Map();
  for (const r of ref.rows) add(self, r.name, r.cost);
  const rows = topRows(self, new Map(), ROWS);
  assert.deepEqual(rows.slice(0, 2).map((r) => [r.name, r.flat]), [["msort_with_tmp.part.0'2", 563_367_426], ['cmp_u64', 215_906_997]]);
  await expectTopFlat(page, rows, 'callgrind_annotate self cost');
  await expectFlatSum(page, ref.total, 'Ir');
  await page.close();
});

/**
 * A Chrome trace of complete (`X`) events, per thread (pid, tid): every microsecond an
 * event covers goes to the innermost one (painted shortest last) as self time, and to
 * each name covering it as cumulative time. Values in nanoseconds.
 */
function chromeTraceReference(json) {
  const threads = new Map();
  for (const e of json.traceEvents) {
    assert.ok(e.ph !== 'B' && e.ph !== 'E', 'the reference reads X events only');
    if (e.ph !== 'X') continue;
    assert.ok(Number.isInteger(e.ts) && Number.isInteger(e.dur), 'whole microseconds');
    const k = `${e.pid}:${e.tid}`;
    if (!threads.has(k)) threads.set(k, []);
    threads.get(k).push(e);
  }
  const ref = { total: 0, threads: threads.size, flat: new Map(), cum: new Map() };
  for (const events of threads.values()) {
    const owner = new Map();
    const covering = new Map(); // µs → names covering it
    for (const e of [...events].sort((a, b) => b.dur - a.dur)) {
      for (let us = e.ts; us < e.ts + e.dur; us++) {
        owner.set(us, e.name);
        if (!covering.has(us)) covering.set(us, new Set());
        covering.get(us).add(e.name);
      }
    }
    ref.total += owner.size * 1000;
    for (const name of owner.values()) add(ref.flat, name, 1000);
    for (const names of covering.values()) for (const n of names) add(ref.cum, n, 1000);
  }
  return ref;
}

test('Chrome trace of duration events: self and total time per event name from the events\' microseconds', async (t) => {
  if (!requireFixtures(t)) return;
  const file = 'thirdparty/firefox-profiler/chrome-tracing.json.gz';
  const ref = chromeTraceReference(JSON.parse(text(file)));
  assert.deepEqual([ref.threads, ref.total, ref.flat.get('SequenceManager::DoIdleWork')], [13, 18_838_000, 17_599_000]);
  const page = await open(file, ['wall'], 'wall');
  await expectRootTotal(page, ref.total, 'wall');
  await screenshot(page, 'format-chrome-trace');
  await showTop(page);
  const rows = topRows(ref.flat, ref.cum, ROWS);
  await expectTopTable(page, rows, 'microseconds per event name');
  await expectFlatSum(page, ref.total, 'wall');
  await page.close();
});

/** speedscope "sampled" profiles: stacks of frame indexes (root first) with weights in seconds; per frame name, count and time (ns). */
function speedscopeReference(json) {
  const frames = json.shared.frames;
  const ref = { samples: 0, time: 0, flat: [new Map(), new Map()], cum: [new Map(), new Map()] };
  for (const p of json.profiles) {
    assert.equal(p.type, 'sampled');
    assert.equal(p.unit, 'seconds');
    p.samples.forEach((stack, i) => {
      const ns = Math.round(p.weights[i] * 1e9);
      ref.samples += 1;
      ref.time += ns;
      const names = stack.map((f) => frames[f].name);
      if (names.length) { add(ref.flat[0], names[names.length - 1], 1); add(ref.flat[1], names[names.length - 1], ns); }
      for (const n of new Set(names)) { add(ref.cum[0], n, 1); add(ref.cum[1], n, ns); }
    });
  }
  return ref;
}

test('speedscope JSON (py-spy): samples and time per frame as the file\'s stacks and weights give them', async (t) => {
  if (!requireFixtures(t)) return;
  const file = 'tools/pyspy-workload-A.speedscope.json';
  const ref = speedscopeReference(JSON.parse(text(file)));
  assert.deepEqual([ref.samples, ref.time], [954, 4_770_000_000]);
  const page = await open(file, ['samples', 'time'], 'time');
  await expectRootTotal(page, ref.time, 'time');
  await screenshot(page, 'format-speedscope');
  await showTop(page);
  await expectTopTable(page, topRows(ref.flat[1], ref.cum[1], ROWS), 'time: weights per frame');
  // Nine samples have an empty stack: in the root's total, in no function.
  assert.deepEqual([sum(ref.flat[0].values()), sum(ref.flat[1].values())], [945, 4_725_000_000]);
  await expectFlatSum(page, sum(ref.flat[1].values()), 'time');
  await chooseSample(page, 'samples', topRows(ref.flat[0], ref.cum[0], ROWS), 'samples: stacks per frame');
  await expectFlatSum(page, sum(ref.flat[0].values()), 'samples');
  await page.close();
});

test('the empty page names the formats it reads, the ones tested above among them', async () => {
  const { page } = await openPage(browser, server.base);
  const hint = await page.locator('.empty .hint').textContent();
  for (const format of ['pprof', 'goroutine dumps', 'Firefox Profiler', 'perf script', 'folded stacks', 'py-spy',
    '.cpuprofile', '.heapprofile', 'performance traces', 'speedscope', 'callgrind', '.pstats', 'Java Flight Recorder']) {
    assert.ok(hint.includes(format), `"${format}" is not named in: ${hint}`);
  }
  assert.ok(hint.includes('nothing is uploaded'), hint);
  await page.close();
});

/**
 * The JDK's own reading of a recording's jdk.ExecutionSample events: per method
 * (`package.Class.method`, the class name's `/` as `.`), events whose top frame it is
 * and events with it on the stack.
 */
function jfrReference(t, file) {
  if (!existsSync(JFR)) { missingPrerequisite(t, `${JFR} not found (the JDK's jfr tool prints the reference events)`); return null; }
  // `jfr print` cuts stacks to 5 frames unless told otherwise: whole stacks for the totals.
  const out = execFileSync(JFR, ['print', '--json', '--stack-depth', '4096', '--events', 'jdk.ExecutionSample',
    join(fixtures, file)],
    { encoding: 'utf8', timeout: 120000, maxBuffer: 1 << 28 });
  const ref = { samples: 0, flat: new Map(), cum: new Map() };
  for (const e of JSON.parse(out).recording.events) {
    ref.samples += 1;
    assert.ok(!e.values.stackTrace?.truncated, 'a stack the recording itself cut');
    const frames = e.values.stackTrace?.frames || [];
    const names = frames.map((f) => `${f.method.type.name.replaceAll('/', '.')}.${f.method.name}`);
    if (names.length) add(ref.flat, names[0], 1);
    for (const n of new Set(names)) add(ref.cum, n, 1);
  }
  return ref;
}

test('JFR (JDK Flight Recorder): CPU samples per method equal the jfr tool\'s; the Top view\'s first row is the hottest method', async (t) => {
  if (!requireFixtures(t)) return;
  const file = 'thirdparty/speedscope/heavy.jfr';
  assert.equal(readFileSync(join(fixtures, file)).subarray(0, 4).toString('latin1'), 'FLR\u0000', 'a JFR recording\'s magic');
  const ref = jfrReference(t, file);
  if (!ref) return;
  // `jfr summary heavy.jfr`: 346 jdk.ExecutionSample events, every one with a stack.
  assert.deepEqual([ref.samples, sum(ref.flat.values())], [346, 346]);
  const page = await open(file, ['cpu', 'wall', 'alloc_objects', 'alloc_space'], 'cpu');
  await expectRootTotal(page, ref.samples, 'cpu');
  await screenshot(page, 'format-jfr');
  await showTop(page);
  const rows = topRows(ref.flat, ref.cum, ROWS);
  assert.deepEqual(rows[0], { flat: 211, cum: 298, name: 'java.util.DualPivotQuicksort.sort' }, 'the hottest method');
  const [first] = await pageTopTable(page, 1);
  assert.deepEqual(first, rows[0], 'the Top view\'s first row');
  await expectTopTable(page, rows, 'cpu: execution samples per method');
  await expectFlatSum(page, ref.samples, 'cpu');
  await page.close();
});
