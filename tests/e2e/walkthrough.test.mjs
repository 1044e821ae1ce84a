// The walk-through of the README and the proof, on the large CPU profile: find the
// hottest function, see its callers and its lines, then keep one label value. Every click
// is counted (the closing note gives the counts), each step's result is checked against
// go tool pprof, and before/after screenshots are saved.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, requireFixtures, requireGo, pprofTop, pprofTable, pprofFileTable, openPage, loadFixtures, until, screenshot } from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

const FILE = 'large/cpu.large.pb.gz';

test('walk-through: hottest function, its callers, its lines, one label value, in five clicks', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  // pprof's answer for the last step, before the clock starts (it takes tens of seconds).
  const expected = pprofTable(pprofTop(['-nodecount=3', '-tagfocus=shard=alpha'], FILE, 300000), 3);
  const { page } = await openPage(browser, server.base);
  const steps = [];
  let clicks = 0;
  let started = Date.now();
  const click = async (locator) => { clicks += 1; await locator.click(); };
  const step = (what) => {
    steps.push({ what, clicks, ms: Date.now() - started });
    clicks = 0;
    started = Date.now();
  };

  await screenshot(page, 'walkthrough-0-landing');
  await loadFixtures(page, FILE);
  await page.getByTestId('flamegraph').waitFor({ timeout: 120000 });
  step('open the large profile (choose or drop the file)');

  // 1. The hottest function: the Top view's first row, as pprof's -top.
  await click(page.getByTestId('view-top'));
  const first = page.getByTestId('top-row').first();
  await first.waitFor({ timeout: 60000 });
  const [pprofFirst] = pprofFileTable('large/cpu.large.pprof-top.txt', 1);
  assert.equal(await first.locator('[data-col=name]').getAttribute('data-value'), pprofFirst.name);
  assert.equal(Number(await first.locator('[data-col=flat]').getAttribute('data-value')), pprofFirst.flat);
  step('find the hottest function');

  // 2. Its callers: a click on the row opens the details panel.
  await click(first);
  const callers = page.getByTestId('details-caller');
  await callers.first().waitFor({ timeout: 60000 });
  const shares = await callers.evaluateAll((rows) => rows.map((r) => Number(r.dataset.value)));
  const cpu = page.locator('[data-testid=details-value][data-type=cpu]');
  assert.equal(Number(await cpu.getAttribute('data-cum')), pprofFirst.cum);
  // Every sample with the function has one caller of it, or none at the root.
  assert.ok(shares.reduce((a, b) => a + b, 0) <= pprofFirst.cum && shares.length > 0);
  await screenshot(page, 'walkthrough-2-callers');
  step('see its callers');

  // 3. Its lines.
  await click(page.getByTestId('details-source'));
  await page.getByTestId('source-line').first().waitFor({ timeout: 60000 });
  const flat = await page.getByTestId('source-line').evaluateAll((rows) => rows.reduce((sum, r) => sum + Number(r.dataset.flat), 0));
  assert.equal(flat, pprofFirst.flat, "the lines' flat values add up to the function's");
  await screenshot(page, 'walkthrough-3-lines');
  step('see its lines');

  // 4. One label value: the Labels view, then "focus" on shard=alpha (this profile's
  // label; the Go fixtures' endpoint works the same way, see labels.test.mjs).
  await click(page.getByTestId('view-labels'));
  const alpha = page.locator('[data-testid=label-value][data-key=shard][data-value=alpha]');
  await alpha.waitFor({ timeout: 60000 });
  await click(alpha.getByTestId('label-focus'));
  // Looking at the result in Top is not part of the step: not counted.
  await page.getByTestId('view-top').click();
  await until('the top table focused on shard alpha', async () => {
    const rows = await page.getByTestId('top-row').evaluateAll((r) => r.slice(0, 3).map((x) => ({
      flat: Number(x.querySelector('[data-col=flat]').dataset.value),
      cum: Number(x.querySelector('[data-col=cum]').dataset.value),
      name: x.querySelector('[data-col=name]').dataset.value,
    })));
    return JSON.stringify(rows) === JSON.stringify(expected) || undefined;
  }, 120000);
  await screenshot(page, 'walkthrough-4-shard-alpha');
  step('keep one label value (shard=alpha)');

  console.log(JSON.stringify(steps));
  assert.deepEqual(steps.map((s) => s.clicks), [0, 1, 1, 1, 2]);
  await page.close();
});
