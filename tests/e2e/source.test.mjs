// The source view against `go tool pprof -list`: per-line flat and cum of a function,
// and the code beside them once the user gives the source file (the fixture's own
// generator source).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import {
  startServer, launchBrowser, fixtures, requireFixtures, requireGo, goBinary, pprofValue, openPage, loadFixtures, until,
} from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

const FILE = 'go/base/cpu.pb.gz';
const FUNCTION = 'main.compressBlock';

/** `go tool pprof -list`: every shown line's number, flat and cum (ns) and code. */
function pprofList(regex) {
  const text = execFileSync(goBinary, ['tool', 'pprof', '-list', regex, '-source_path', join(fixtures, 'gen'), join(fixtures, FILE)], {
    encoding: 'utf8', env: { ...process.env, PPROF_BINARY_PATH: '/nonexistent' }, timeout: 60000,
  });
  const value = (v) => (v === '.' ? 0 : pprofValue(v));
  return [...text.matchAll(/^\s+(\S+)\s+(\S+)\s+(\d+):(.*)$/gm)].map((m) => ({
    line: Number(m[3]), flat: value(m[1]), cum: value(m[2]), code: m[4],
  }));
}

test('source: per-line flat and cum equal go tool pprof -list; the given source file shows its code', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  const expected = pprofList(`^${FUNCTION.replace('.', '\\.')}$`);
  assert.ok(expected.some((l) => l.cum > 0), 'pprof lists lines with values');
  const { page } = await openPage(browser, server.base);
  await loadFixtures(page, FILE);
  await page.getByTestId('view-source').click();
  await page.getByTestId('source-function-input').fill(FUNCTION);
  await page.getByTestId('source-function-input').press('Enter');
  await page.getByTestId('source-line').first().waitFor();
  const rows = () => page.getByTestId('source-line').evaluateAll((els) => els.map((e) => ({
    line: Number(e.dataset.line), flat: Number(e.dataset.flat), cum: Number(e.dataset.cum),
    code: e.querySelector('.code').textContent,
  })));
  const shown = await rows();
  assert.deepEqual(shown.map(({ line, flat, cum }) => ({ line, flat, cum })),
    expected.map(({ line, flat, cum }) => ({ line, flat, cum })));
  assert.ok(shown.every((r) => r.code === ''), 'no code before the file is given');
  await page.getByTestId('source-files').setInputFiles(join(fixtures, 'gen/workload.go'));
  const withCode = await until('the code beside the numbers', async () => {
    const r = await rows();
    return r.some((x) => x.code !== '') ? r : undefined;
  });
  assert.deepEqual(withCode.map((r) => r.code.trimEnd()), expected.map((r) => r.code.trimEnd()));
  await page.close();
});
