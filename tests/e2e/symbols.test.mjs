// Symbols in the page: a profile of a stripped program (perf script of symwork-c, its
// own frames unnamed), then its stripped binary and debug file dropped onto the open
// tab: the worker reads them in the page and the top table gains the program's names,
// as `stacklens top --symbols` prints them, with nothing uploaded. The same for a
// perf.data with kernel frames and kallsyms dropped after it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import {
  startServer, launchBrowser, symbolFixtures, requireSymbolFixtures, requireKernelFixtures, openPage, loadFixtures,
  pageTopTable, expectTopTable, stacklensBin, until,
} from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

const PROFILE = join(symbolFixtures, 'symwork-c.perf-script.txt');
const ROWS = 8;

/** The CLI's top rows of the profile symbolized from the fixtures' binaries. */
function cliTop(...args) {
  return cliTopOf(PROFILE, ...args);
}

function cliTopOf(profile, ...args) {
  const json = execFileSync(stacklensBin, ['top', '--format', 'json', '--nodecount', String(ROWS), ...args, profile], {
    encoding: 'utf8', timeout: 60000,
  });
  return JSON.parse(json).functions.slice(0, ROWS)
    .map((f) => ({ flat: f.flat, cum: f.cum, name: f.name, ...(f.inline && { inline: f.inline }) }));
}

test('symbols: dropping the binary and its debug file names a stripped program\'s frames in the page, as the CLI does', async (t) => {
  if (!requireSymbolFixtures(t)) return;
  const { page, requests } = await openPage(browser, server.base);
  await loadFixtures(page, PROFILE);
  await page.getByTestId('view-top').click();
  const before = await pageTopTable(page, ROWS);
  assert.deepEqual(before, cliTop(), 'unsymbolized, the page and the CLI agree');
  assert.ok(!before.some((r) => r.name === 'hash_block'), JSON.stringify(before));
  const panel = page.getByTestId('symbols-panel');
  await panel.waitFor();
  assert.match(await panel.textContent(), /some addresses have no names/);

  const sent = requests.length;
  await loadFixtures(page, join(symbolFixtures, 'bin/symwork-c.stripped'), join(symbolFixtures, 'bin/symwork-c.debug'));
  const expected = cliTop('--symbols', join(symbolFixtures, 'bin'));
  assert.ok(expected.some((r) => r.name === 'hash_block'), JSON.stringify(expected));
  await expectTopTable(page, expected, 'the symbolized top table');
  await until('the symbol files listed', async () => ((await page.getByTestId('symbol-files').locator('li').count()) === 2 ? true : undefined));
  const row = page.getByTestId('symbols-mapping').filter({ hasText: 'symwork-c.stripped' });
  assert.match(await row.textContent(), /symbolized from symwork-c\.stripped and symwork-c\.debug/);
  // Read in the page: the binaries went nowhere.
  assert.deepEqual(requests.slice(sent), [], 'no request after the drop');
});

test('symbols: dropping kallsyms names a perf.data\'s kernel frames in the page, as the CLI does', async (t) => {
  if (!requireKernelFixtures(t)) return;
  const data = join(symbolFixtures, 'kernel.perf.data');
  const kallsyms = join(symbolFixtures, 'kallsyms');
  const { page, requests } = await openPage(browser, server.base);
  await loadFixtures(page, data);
  await page.getByTestId('view-top').click();
  assert.ok(!(await pageTopTable(page, ROWS)).some((r) => r.name === 'read_zero'), 'unnamed before the drop');
  const sent = requests.length;
  await loadFixtures(page, kallsyms);
  // The CLI also finds the user-space libraries where the recording named them; the page
  // only has what was dropped: the kernel's rows are compared.
  const cli = cliTopOf(data, '--symbols', kallsyms);
  const kernel = ['read_zero', 'vfs_read', 'do_syscall_64'];
  await until('the kernel\'s names in the top table', async () => {
    const rows = await pageTopTable(page, ROWS);
    return kernel.every((name) => rows.some((r) => r.name === name)) ? rows : undefined;
  });
  const rows = await pageTopTable(page, ROWS);
  for (const name of kernel) {
    assert.deepEqual(rows.find((r) => r.name === name), cli.find((r) => r.name === name), name);
  }
  await until('kallsyms listed', async () => (/kallsyms, the kernel's names/.test(await page.getByTestId('symbol-files').textContent()) ? true : undefined));
  const row = page.getByTestId('symbols-mapping').filter({ hasText: '[kernel.kallsyms]' });
  assert.match(await row.textContent(), /symbolized from kallsyms/);
  assert.deepEqual(requests.slice(sent), [], 'no request after the drop');
});
