// The Graph view against `go tool pprof -dot`: the same nodes (in pprof's order) and
// edges at pprof's default pruning, at another -nodecount, and focused on a node.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { startServer, launchBrowser, fixtures, requireFixtures, requireGo, goBinary, openPage, loadFixtures, until, screenshot } from './harness.mjs';

let server, browser;
before(async () => { server = await startServer(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await server?.stop(); });

const FILE = 'go/base/cpu.pb.gz';

/** `go tool pprof -dot ARGS FILE`: node names in pprof's order, and edges "from -> to" with their flags. */
function pprofDot(args) {
  const text = execFileSync(goBinary, ['tool', 'pprof', '-dot', ...args, join(fixtures, FILE)], {
    encoding: 'utf8', env: { ...process.env, PPROF_BINARY_PATH: '/nonexistent' }, timeout: 60000,
  });
  const names = [];
  const edges = [];
  let legend = [];
  for (const line of text.split('\n')) {
    const box = /^subgraph cluster_L \{ ".*" \[shape=box fontsize=16 label="(.*)\\l"/.exec(line);
    if (box) legend = box[1].split('\\l').filter((l) => l && !l.startsWith('Time: '));
    const node = /^N(\d+) \[label=".*" id="node\d+" fontsize=\d+ shape=box tooltip="(.*) \([^()]*\)" color=/.exec(line);
    if (node) { names.push(node[2].replace(/\\"/g, '"')); continue; }
    const edge = /^N(\d+) -> N(\d+) \[label=" [^"\\]*(\\n \(inline\))?"(.*)\]$/.exec(line);
    if (edge) {
      const residual = edge[4].includes('style="dotted"');
      edges.push(`${names[edge[1] - 1]} -> ${names[edge[2] - 1]} inline=${Boolean(edge[3])} residual=${residual}`);
    }
  }
  return { names, edges: edges.sort(), legend };
}

/** pprofDot's nodes and edges alone. */
function graphOf(args) {
  const { names, edges } = pprofDot(args);
  return { names, edges };
}

/** The page's graph: node names in its order, and edges as pprofDot writes them. */
async function pageGraph(page) {
  const svg = page.getByTestId('callgraph');
  await svg.waitFor();
  const names = await svg.getByTestId('graph-node').evaluateAll((nodes) => nodes.map((n) => n.dataset.name));
  const edges = await svg.getByTestId('graph-edge').evaluateAll((list) =>
    list.map((e) => `${e.dataset.from} -> ${e.dataset.to} inline=${e.dataset.inline} residual=${e.dataset.residual}`));
  return { names, edges: edges.sort() };
}

/** Waits until the page's graph equals `expected`; fails showing the difference. */
async function expectGraph(page, expected, what) {
  let shown;
  try {
    await until(what, async () => {
      shown = await pageGraph(page);
      return JSON.stringify(shown) === JSON.stringify(expected) ? shown : undefined;
    });
  } catch (e) {
    assert.deepEqual(shown, expected, what);
    throw e;
  }
}

test('graph: the nodes and edges of go tool pprof -dot, at its defaults, at another -nodecount and focused on a clicked node', async (t) => {
  if (!requireFixtures(t) || !requireGo(t)) return;
  const { page } = await openPage(browser, server.base);
  await loadFixtures(page, FILE);
  await page.getByTestId('flamegraph').waitFor();
  await page.getByTestId('view-graph').click();

  const { legend: pprofLegend, ...defaults } = pprofDot([]);
  assert.ok(defaults.names.length > 20 && defaults.edges.length > 20, 'a graph worth comparing');
  await expectGraph(page, defaults, 'the graph at pprof defaults');
  // Inline edges are dashed, calls solid, as pprof marks them.
  const styles = await page.getByTestId('graph-edge').evaluateAll((list) =>
    list.map((e) => [e.dataset.inline, e.dataset.residual, e.querySelector('path').getAttribute('stroke-dasharray')]));
  for (const [inline, residual, dash] of styles) {
    assert.equal(dash, residual === 'true' ? '2,3' : inline === 'true' ? '6,3' : null);
  }
  assert.ok(styles.some(([inline]) => inline === 'true'), 'the profile has inlined calls');
  const legend = await page.getByTestId('graph-legend').locator('span').allTextContents();
  assert.deepEqual(legend.map((l) => l.trim()).filter((l) => l), pprofLegend, 'the legend of go tool pprof -dot');
  await screenshot(page, 'graph');

  await page.getByTestId('graph-nodecount').fill('12');
  await page.getByTestId('graph-nodecount').press('Enter');
  await expectGraph(page, graphOf(['-nodecount=12']), 'the graph with -nodecount=12');

  // A click focuses the graph on the node (pprof's -focus on its exact name) and
  // selects its function.
  const name = 'compress/flate.(*compressor).deflate';
  await page.locator(`[data-testid=graph-node][data-name="${name}"]`).click();
  await page.getByTestId('graph-focus-chip').waitFor();
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  await expectGraph(page, graphOf(['-nodecount=12', `-focus=^${escaped}$`]), 'the graph focused on deflate');
  assert.equal(await page.getByTestId('details-name').textContent(), name);
  await page.getByTestId('graph-focus-chip').getByRole('button').click();
  await expectGraph(page, graphOf(['-nodecount=12']), 'the focus removed');

  // A bad setting is refused and the graph stays as it is.
  await page.getByTestId('graph-nodecount').fill('-3');
  await page.getByTestId('graph-nodecount').press('Enter');
  assert.equal(await page.getByTestId('graph-nodecount').inputValue(), '12');
  await page.close();
});
