// One small driver interface over the three browser engines the page must work in, so a
// test is written once and runs in each. Debian's browsers only, never a download:
//   chromium  playwright-core over CDP (harness.mjs's launchBrowser, the other tests' flags);
//   firefox   puppeteer-core over WebDriver BiDi (Firefox ESR speaks it itself: no geckodriver);
//   webkit    WebKitGTK's WebKitWebDriver and MiniBrowser (Safari's engine), spoken to with
//             plain WebDriver HTTP (fetch), so no selenium-webdriver dependency.
//
// launch(engine, { colorScheme }) → { engine, version, newPage(), close() }
// page: goto(url), reload(), click(sel), fill(sel, text), press(sel, key),
//       setInputFiles(sel, paths), evaluate(fn, ...args), waitForSelector(sel, { timeout }),
//       waitForFunction(fn, { timeout }, ...args), textContent(sel), screenshot(path),
//       errors() (console errors and uncaught exceptions seen so far), close().
//
// Only evaluate() and the user actions differ per engine; every wait is the same poll of
// evaluate() from here (harness.mjs's until), so a wait means the same in each engine.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import net from 'node:net';
import { launchBrowser, until } from './harness.mjs';

export const ENGINES = ['chromium', 'firefox', 'webkit'];
export const FIREFOX = process.env.STACKLENS_FIREFOX || '/usr/bin/firefox-esr';
export const WEBKIT_DRIVER = process.env.STACKLENS_WEBKIT_DRIVER || '/usr/bin/WebKitWebDriver';
export const MINIBROWSER = process.env.STACKLENS_MINIBROWSER || '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';
const VIEWPORT = { width: 1280, height: 900 };

/** The engines named in STACKLENS_ENGINES (comma-separated), else `fallback`. */
export function enginesFromEnv(fallback = 'firefox,webkit') {
  const names = (process.env.STACKLENS_ENGINES || fallback).split(',').map((s) => s.trim()).filter(Boolean);
  for (const n of names) if (!ENGINES.includes(n)) throw new Error(`unknown engine ${n} (one of ${ENGINES})`);
  return names;
}

/** Starts `engine`; `colorScheme` ('light' | 'dark') is what the page's prefers-color-scheme reads. */
export async function launch(engine, { colorScheme = 'light' } = {}) {
  if (engine === 'chromium') return launchChromium(colorScheme);
  if (engine === 'firefox') return launchFirefox(colorScheme);
  if (engine === 'webkit') return launchWebKit(colorScheme);
  throw new Error(`unknown engine ${engine}`);
}

// The function's source called with JSON arguments: one string that every driver
// evaluates the same way (and that awaits a returned promise in each).
const callSource = (fn, args) => `(${fn})(...${JSON.stringify(args)})`;

/** The polling helpers shared by every engine, built on its evaluate(); and a close()
 * that runs once, so a test's cleanup may close a page already closed. */
function withWaits(page, open) {
  const close = page.close;
  let closing;
  page.close = () => { closing ??= close().finally(() => open.delete(page)); return closing; };
  open.add(page);
  page.waitForFunction = (fn, { timeout = 20000 } = {}, ...args) =>
    until(`${fn}`.slice(0, 120), async () => ((await page.evaluate(fn, ...args)) ? true : undefined), timeout);
  page.waitForSelector = (selector, { timeout = 20000 } = {}) =>
    until(`selector ${selector}`, async () => ((await page.evaluate((s) => document.querySelector(s) !== null, selector)) ? true : undefined), timeout);
  page.textContent = (selector) => page.evaluate((s) => document.querySelector(s)?.textContent ?? null, selector);
  // Every action first waits for its element, as a user waits for a button to appear
  // (playwright does; puppeteer's and WebDriver's actions fail at once when it is missing).
  for (const action of ['click', 'fill', 'press', 'setInputFiles']) {
    const act = page[action];
    page[action] = async (selector, ...rest) => { await page.waitForSelector(selector); return act(selector, ...rest); };
  }
  return page;
}

/** Closes the pages still open, then the browser (`stop`). */
async function closeAll(open, stop) {
  await Promise.allSettled([...open].map((p) => p.close()));
  await stop();
}

function screenshotDir(path) { mkdirSync(dirname(resolve(path)), { recursive: true }); }

// ---- chromium: playwright-core, the flags harness.mjs gives the rest of the suite.

async function launchChromium(colorScheme) {
  const browser = await launchBrowser();
  const open = new Set();
  return {
    engine: 'chromium',
    version: browser.version(),
    async newPage() {
      // A page of its own context, as harness.mjs's openPage: nothing kept is shared.
      const p = await browser.newPage({ viewport: VIEWPORT, colorScheme });
      const errors = [];
      p.on('console', (m) => {
        // Not the page's: Chromium's own request for a tab icon (the page has none) is
        // logged as an error; Firefox and WebKit make no such request here.
        if (m.type() !== 'error' || new URL(m.location().url || 'about:blank').pathname === '/favicon.ico') return;
        errors.push(`console.error: ${m.text()} (${m.location().url})`);
      });
      p.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
      return withWaits({
        goto: (url) => p.goto(url).then(() => {}),
        reload: () => p.reload().then(() => {}),
        click: (s) => p.click(s),
        fill: (s, text) => p.fill(s, text),
        press: (s, key) => p.press(s, key),
        setInputFiles: (s, paths) => p.setInputFiles(s, paths),
        evaluate: (fn, ...args) => p.evaluate(callSource(fn, args)),
        screenshot: (path) => { screenshotDir(path); return p.screenshot({ path }); },
        errors: async () => [...errors],
        close: () => p.context().close(),
      }, open);
    },
    close: () => closeAll(open, () => browser.close()),
  };
}

// ---- firefox: puppeteer-core over WebDriver BiDi.

async function launchFirefox(colorScheme) {
  const { default: puppeteer } = await import('puppeteer-core');
  const browser = await puppeteer.launch({
    browser: 'firefox',
    protocol: 'webDriverBiDi',
    executablePath: FIREFOX,
    headless: true,
    // BiDi has no prefers-color-scheme emulation (puppeteer's emulateMediaFeatures is
    // CDP-only): Firefox's own override, 0 dark, 1 light.
    extraPrefsFirefox: { 'layout.css.prefers-color-scheme.content-override': colorScheme === 'dark' ? 0 : 1 },
  });
  const open = new Set();
  return {
    engine: 'firefox',
    version: await browser.version(),
    async newPage() {
      // A user context of its own (BiDi's incognito-like context): nothing kept is shared.
      const context = await browser.createBrowserContext();
      const p = await context.newPage();
      await p.setViewport(VIEWPORT);
      const errors = [];
      p.on('console', (m) => { if (m.type() === 'error') errors.push(`console.error: ${m.text()} (${m.location().url ?? ''})`); });
      p.on('pageerror', (e) => errors.push(`uncaught: ${e.message ?? e}`));
      const element = async (s) => {
        const el = await p.$(s);
        if (!el) throw new Error(`no element ${s}`);
        return el;
      };
      return withWaits({
        goto: (url) => p.goto(url).then(() => {}),
        reload: () => p.reload().then(() => {}),
        click: (s) => p.click(s),
        // Clears, then types: trusted key events, as a user's.
        fill: (s, text) => p.locator(s).fill(text),
        press: async (s, key) => (await element(s)).press(key),
        // BiDi's input.setFiles.
        setInputFiles: async (s, paths) => (await element(s)).uploadFile(...paths),
        evaluate: (fn, ...args) => p.evaluate(callSource(fn, args)),
        screenshot: (path) => { screenshotDir(path); return p.screenshot({ path }); },
        errors: async () => [...errors],
        close: () => context.close(),
      }, open);
    },
    close: () => closeAll(open, () => browser.close()),
  };
}

// ---- webkit: WebKitWebDriver (WebDriver classic over HTTP) driving MiniBrowser.

async function freePort() {
  return new Promise((ok, fail) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => ok(port)); });
    s.on('error', fail);
  });
}

const ELEMENT = 'element-6066-11e4-a52e-4f735466cecf'; // WebDriver's key for an element reference
const KEYS = { Enter: '\uE007', Escape: '\uE00C', Tab: '\uE004', Backspace: '\uE003' };

/** One WebDriver command; the answer's value, or an Error with WebDriver's error and message. */
async function wd(base, method, path, body) {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const { value } = await r.json();
  if (value && value.error) throw new Error(`WebDriver ${method} ${path}: ${value.error}: ${value.message}`);
  return value;
}

/** Run in the page: keeps its console errors and uncaught errors (a worker's included,
 * which reach the window when the page does not handle them) in window.__engineErrors. */
function errorHook() {
  if (window.__engineErrors) return;
  const seen = (window.__engineErrors = []);
  const text = (v) => (v instanceof Error ? `${v.name}: ${v.message}` : String(v));
  const error = console.error.bind(console);
  console.error = (...a) => { seen.push(`console.error: ${a.map(text).join(' ')}`); error(...a); };
  addEventListener('error', (e) => seen.push(`uncaught: ${e.message || text(e.error)}`));
  addEventListener('unhandledrejection', (e) => seen.push(`unhandled rejection: ${text(e.reason)}`));
}

/** Run in the page: the errors errorHook kept since the last call. */
function takeErrors() {
  return (window.__engineErrors || []).splice(0);
}

async function launchWebKit(colorScheme) {
  const port = await freePort();
  // MiniBrowser is a GTK program: it needs an X display even when nothing looks at it
  // (this MiniBrowser has no --headless), hence xvfb-run; a 24-bit screen, as xvfb-run's
  // default is 8-bit. detached: a process group of its own, so close() ends xvfb-run, Xvfb,
  // the driver and the browsers it started, and nothing else.
  const proc = spawn('xvfb-run', ['-a', '-s', '-screen 0 1920x1200x24', WEBKIT_DRIVER, `--port=${port}`, '--host=127.0.0.1'], {
    detached: true, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = ''; // the driver's own messages, for when it fails to start
  proc.stdout.on('data', (d) => { output += d; });
  proc.stderr.on('data', (d) => { output += d; });
  const exited = new Promise((r) => proc.once('exit', r));
  const base = `http://127.0.0.1:${port}`;
  await until('WebKitWebDriver to answer', async () => {
    if (proc.exitCode !== null) throw new Error(`WebKitWebDriver exited with ${proc.exitCode}: ${output}`);
    try { return (await wd(base, 'GET', '/status')).ready ? true : undefined; } catch { return undefined; }
  }, 15000);
  const args = ['--automation'];
  if (colorScheme === 'dark') args.push('--dark-mode');
  let version;
  const open = new Set();
  const browser = {
    engine: 'webkit',
    get version() { return version; },
    async newPage() {
      if (open.size) throw new Error('WebKitWebDriver runs one session at a time: close the other page first');
      // A session per page: a fresh MiniBrowser with its own (ephemeral) storage, as a
      // playwright context. WebKitWebDriver runs one session at a time.
      const created = await wd(base, 'POST', '/session', {
        capabilities: { alwaysMatch: { 'webkitgtk:browserOptions': { binary: MINIBROWSER, args } } },
      });
      version = `${created.capabilities.browserName} ${created.capabilities.browserVersion}`;
      const s = `/session/${created.sessionId}`;
      const cmd = (method, path, body) => wd(base, method, `${s}${path}`, body);
      // The window's inner size is the viewport: grow the window by what its frame takes.
      await cmd('POST', '/window/rect', { x: 0, y: 0, ...VIEWPORT });
      const inner = await cmd('POST', '/execute/sync', { script: 'return [innerWidth, innerHeight]', args: [] });
      await cmd('POST', '/window/rect', { width: 2 * VIEWPORT.width - inner[0], height: 2 * VIEWPORT.height - inner[1] });
      // This WebKitWebDriver speaks no BiDi (a session asking for webSocketUrl is refused),
      // and MiniBrowser's --enable-write-console-messages-to-stdout is not applied to the
      // automation's view: the page's errors are caught by a hook set after each load
      // (errors before it, during the first script's start, are not seen; the tests
      // assert the page's own content, which such an error would stop).
      const errors = [];
      const collect = async () => { errors.push(...((await cmd('POST', '/execute/sync', { script: `return ${callSource(takeErrors, [])};`, args: [] })) || [])); };
      const hook = () => cmd('POST', '/execute/sync', { script: `return ${callSource(errorHook, [])};`, args: [] });
      const element = async (sel) => (await cmd('POST', '/element', { using: 'css selector', value: sel }))[ELEMENT];
      return withWaits({
        goto: async (url) => { await cmd('POST', '/url', { url }); await hook(); },
        reload: async () => { await collect(); await cmd('POST', '/refresh', {}); await hook(); },
        click: async (sel) => cmd('POST', `/element/${await element(sel)}/click`, {}),
        fill: async (sel, text) => {
          const id = await element(sel);
          await cmd('POST', `/element/${id}/clear`, {});
          await cmd('POST', `/element/${id}/value`, { text });
        },
        press: async (sel, key) => {
          if (!KEYS[key]) throw new Error(`no WebDriver key for ${key}`);
          await cmd('POST', `/element/${await element(sel)}/value`, { text: KEYS[key] });
        },
        // WebDriver sets a file input's files by sending their absolute paths as keys,
        // one per line.
        setInputFiles: async (sel, paths) => cmd('POST', `/element/${await element(sel)}/value`, { text: paths.map((p) => resolve(p)).join('\n') }),
        // Execute Script awaits a returned promise. Objects come back with their keys in
        // another order than the page made them: compare them deeply, not as JSON text.
        evaluate: (fn, ...a) => cmd('POST', '/execute/sync', { script: `return ${callSource(fn, a)};`, args: [] }),
        screenshot: async (path) => {
          screenshotDir(path);
          writeFileSync(path, Buffer.from(await cmd('GET', '/screenshot'), 'base64'));
        },
        errors: async () => { await collect(); return [...errors]; },
        close: () => wd(base, 'DELETE', s),
      }, open);
    },
    close: () => closeAll(open, async () => {
      try { process.kill(-proc.pid, 'SIGTERM'); } catch { /* already gone */ }
      await exited;
    }),
  };
  return browser;
}
