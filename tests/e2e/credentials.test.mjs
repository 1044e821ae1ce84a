// The page against a server that needs credentials: Share, Baselines and Capture
// history ask for a token once, keep it in this tab's sessionStorage (never in a URL
// or a link), and explain a 401 or 403 in the page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startServer, launchBrowser, fixtures, requireFixtures, screenshot } from './harness.mjs';

const ACME_KEY = 'acme-page-key';
const SECRET = 'an HS256 secret for the page test, 32+ bytes';

let server, browser;
before(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stacklens-credentials-'));
  writeFileSync(join(dir, 'tokens'), `# page test\nacme:${ACME_KEY}\n`);
  writeFileSync(join(dir, 'secret'), SECRET);
  server = await startServer(['--token-file', join(dir, 'tokens'), '--jwt-secret-file', join(dir, 'secret')]);
  browser = await launchBrowser();
});
after(async () => { await browser?.close(); await server?.stop(); });

/** An HS256 JWT, as any JWT library makes it. */
function jwt(claims) {
  const part = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const unsigned = `${part({ alg: 'HS256', typ: 'JWT' })}.${part(claims)}`;
  return `${unsigned}.${createHmac('sha256', SECRET).update(unsigned).digest('base64url')}`;
}

async function errors(page) {
  return page.getByTestId('error').allTextContents();
}

test('a server with credentials: the page asks for a token once, keeps it for the tab only, and explains 401 and 403', async (t) => {
  if (!requireFixtures(t)) return;
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const dialogs = [];
  let answer = null; // null dismisses the prompt
  page.on('dialog', async (d) => {
    dialogs.push(d.message());
    if (answer === null) await d.dismiss(); else await d.accept(answer);
  });
  await page.goto(server.base);
  await page.getByTestId('file-input').setInputFiles(join(fixtures, 'go/base/cpu.pb.gz'));
  await page.getByTestId('flamegraph').waitFor();

  // No token, and the user declines to give one: the page says what to do.
  await page.getByTestId('share').click();
  await page.getByTestId('share-upload').click();
  await page.getByTestId('error').first().waitFor();
  assert.equal(dialogs.length, 1, 'asked once');
  assert.match(dialogs[0], /Bearer/, 'the question carries the server\'s reason');
  assert.match((await errors(page)).join('\n'), /cannot share: .*needs an API key or token: click again and enter one/);

  // The user enters the tenant's key: the share goes through as that tenant.
  answer = ACME_KEY;
  await page.getByTestId('share').click();
  await page.getByTestId('share-upload').click();
  const link = await page.getByTestId('share-url').inputValue();
  assert.match(link, /^http:\/\/127\.0\.0\.1:\d+\/#\/s\/sess-[0-9a-f]{32}\?tenant=acme$/);
  assert.equal(dialogs.length, 2);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('stacklens-token')), ACME_KEY);
  assert.ok(!link.includes(ACME_KEY) && !page.url().includes(ACME_KEY), 'the token is in no link or URL');

  // Baselines use the kept token: no more questions.
  await page.getByTestId('baseline-menu').locator('summary').click();
  await page.getByTestId('baseline-label').fill('with a key');
  await page.getByTestId('save-baseline').click();
  assert.match(await page.getByTestId('baseline-saved').textContent(), /with a key/);
  await page.getByTestId('list-baselines').click();
  await page.getByTestId('baseline-row').first().waitFor();
  assert.equal(dialogs.length, 2, 'the token was asked for once');
  await screenshot(page, 'credentials-shared');

  // The link opens in a fresh browser with no credential at all.
  const fresh = await browser.newContext();
  const other = await fresh.newPage();
  await other.goto(link);
  await other.getByTestId('flamegraph').waitFor();
  assert.equal(await other.evaluate(() => sessionStorage.getItem('stacklens-token')), null);
  await fresh.close();

  // A read-only token may list but not save: 403 says so, and the token is dropped.
  const readOnly = jwt({ tenant: 'acme', scope: 'read', exp: Math.floor(Date.now() / 1000) + 600 });
  await page.evaluate((tok) => sessionStorage.setItem('stacklens-token', tok), readOnly);
  await page.getByTestId('list-baselines').click();
  await page.getByTestId('baseline-label').fill('not allowed');
  const before = (await errors(page)).length;
  await page.getByTestId('save-baseline').click();
  await page.getByTestId('error').nth(before).waitFor();
  assert.match((await errors(page))[before], /may only read\. The key or token entered does not allow this: click again to enter another/);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('stacklens-token')), null, 'a refused token is forgotten');
  await screenshot(page, 'credentials-forbidden');
  await page.close();
});

test('capture history with credentials: the timeline asks for the token once and reads the token\'s tenant', async (t) => {
  if (!requireFixtures(t)) return;
  const at = Math.floor(Date.now() / 1000) - 1800;
  const pushed = await fetch(`${server.base}/ingest?name=${encodeURIComponent('vault.cpu{zone=a}')}&from=${at}&until=${at + 10}&format=pprof`, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', authorization: `Bearer ${ACME_KEY}` },
    body: readFileSync(join(fixtures, 'go/base/cpu.pb.gz')),
  });
  assert.equal(pushed.status, 200, await pushed.text());
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const dialogs = [];
  page.on('dialog', async (d) => { dialogs.push(d.message()); await d.accept(ACME_KEY); });
  await page.goto(server.base);
  await page.getByTestId('history-menu').locator('summary').click();
  await page.locator('.range-bar').first().waitFor();
  assert.equal(await page.getByTestId('range-series-select').locator('option:checked').textContent(), 'vault · cpu');
  assert.equal(dialogs.length, 1, 'asked once');
  // A dragged range opens with the kept token.
  const box = await page.locator('.range-bar').first().boundingBox();
  await page.mouse.move(box.x + 1, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width - 1, box.y + box.height / 2, { steps: 4 });
  await page.mouse.up();
  await page.getByTestId('range-open').click();
  await page.getByTestId('flamegraph').waitFor();
  assert.equal(dialogs.length, 1, 'the token was asked for once');
  await page.close();
});
