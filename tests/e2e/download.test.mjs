// "Download as": the profile on screen written by core in the worker and saved by the
// browser, with nothing sent to the server. pprof output reads in `go tool pprof` with
// the numbers pprof gives the original; folded and speedscope output carry the current
// sample type's stacks, with or without the current filters.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  startServer, launchBrowser, fixtures, requireFixtures, requireGo, goBinary, openPage, loadFixtures, setFilter,
  pprofTable, pprofValue, pageTopTable,
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

test('pprof, folded and speedscope downloads of the profile on screen, with and without its filters', async (t) => {
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

  assert.deepEqual(requests.slice(before).filter((u) => new URL(u).pathname.startsWith('/api/')), [],
    'downloads send nothing to the server');
  await page.close();
});
