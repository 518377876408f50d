// Opens a report.html in Debian's headless Chromium (driven by playwright-core,
// no downloaded browser), exercises it like a person would and prints what it
// saw as one JSON object on stdout. It asserts nothing itself: the pytest
// test that runs it compares these observations with profile.json.
//
//   node check_report.mjs REPORT_HTML OUT_DIR [--chromium PATH] [--search TEXT]
//
// Observations: console errors, page errors, dialogs, every request that is
// not the page itself, the verdict text, each chart's rendered size and
// content, the NVML GPU lines and series, a flame-graph zoom (widths before and after a click) and search,
// table sorting (column values read back from the DOM), window.__pwned (set
// only by a hostile name that managed to run), and screenshots in OUT_DIR.
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  if (i < 0) return dflt;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
};
const executablePath = opt('--chromium', '/usr/bin/chromium');
const searchText = opt('--search', null);
const [reportPath, outDir] = args;
if (!reportPath || !outDir) {
  console.error('usage: node check_report.mjs REPORT_HTML OUT_DIR [--chromium PATH] [--search TEXT]');
  process.exit(2);
}
if (!existsSync(executablePath)) {
  console.error(`check_report: no browser at ${executablePath} (scripts/ensure-deps.sh installs Debian's chromium)`);
  process.exit(3);
}

const pageUrl = pathToFileURL(resolve(reportPath)).href;
const userDataDir = mkdtempSync(join(tmpdir(), 'torchneck-chromium-'));
const obs = { url: pageUrl, consoleErrors: [], consoleMessages: [], pageErrors: [], dialogs: [], requests: [], screenshots: [] };

const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath,
  headless: true,
  viewport: { width: 1280, height: 900 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = context.pages()[0] || await context.newPage();
  page.on('console', (m) => {
    obs.consoleMessages.push(`${m.type()}: ${m.text()}`);
    if (m.type() === 'error') obs.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => obs.pageErrors.push(String(e)));
  page.on('dialog', async (d) => { obs.dialogs.push(`${d.type()}: ${d.message()}`); await d.dismiss(); });
  context.on('request', (r) => {
    const u = r.url();
    if (u !== pageUrl && !u.startsWith('data:')) obs.requests.push(u);
  });
  await page.goto(pageUrl, { waitUntil: 'load' });
  await page.waitForSelector('html[data-rendered="1"]', { timeout: 15000 });

  obs.title = await page.title();
  obs.verdict = await page.$eval('#verdict', (e) => e.textContent);
  obs.findingCards = await page.$$eval('#findings .card', (cs) => cs.map((c) => c.textContent));
  obs.pwnedAfterLoad = await page.evaluate(() => window.__pwned === undefined ? null : String(window.__pwned));
  obs.imgElements = await page.$$eval('img', (is) => is.length);
  obs.bodyText = await page.evaluate(() => document.body.innerText);
  obs.tableText = await page.$$eval('table', (ts) => Object.fromEntries(ts.map((t) => [t.getAttribute('data-table'), t.innerText])));
  obs.layerLabels = await page.$$eval('#chart-layers svg text', (ts) => ts.map((t) => t.textContent));
  obs.layerTitles = await page.$$eval('#chart-layers svg title', (ts) => ts.map((t) => t.textContent));

  // Every chart in a visible section: its box and what was drawn in it.
  obs.charts = await page.$$eval('.chart', (cs) => cs.filter((c) => !c.closest('section').hidden).map((c) => {
    const r = c.getBoundingClientRect();
    const drawn = [...c.querySelectorAll('svg rect, svg path, svg line, .frame')].filter((e) => {
      const b = e.getBoundingClientRect();
      return b.width > 0 && b.height > 0;
    });
    return { id: c.id, width: r.width, height: r.height, drawn: drawn.length, empty: c.querySelector('.empty') ? c.querySelector('.empty').textContent : null };
  }));
  obs.gpuSectionVisible = await page.$eval('#s-gpu', (s) => !s.hidden);
  obs.nvmlSectionVisible = await page.$eval('#s-nvml', (s) => !s.hidden);
  obs.nvmlLines = await page.$$eval('#nvml-devices .nvml-line', (ps) => ps.map((p) => p.textContent));
  obs.nvmlSeries = await page.$$eval('#nvml-devices svg path[data-series]', (ps) => ps.map((p) => ({
    chart: p.closest('.chart').id, series: p.getAttribute('data-series'),
    points: (p.getAttribute('d').match(/[ML]/g) || []).length, moves: (p.getAttribute('d').match(/M/g) || []).length,
  })));

  await page.screenshot({ path: join(outDir, 'report-top.png') });
  obs.screenshots.push(join(outDir, 'report-top.png'));

  // Flame graph: click a frame narrower than the graph; it should then span it.
  const frames = await page.$$eval('#chart-flame .frame', (fs) => fs.map((f) => ({
    id: f.getAttribute('data-id'), depth: +f.getAttribute('data-depth'), width: f.getBoundingClientRect().width, name: f.textContent,
  })));
  const bodyWidth = await page.$eval('#chart-flame .flame-body', (b) => b.getBoundingClientRect().width).catch(() => null);
  obs.flame = { frames: frames.length, bodyWidth };
  obs.flame.kinds = await page.$$eval('#chart-flame .frame', (fs) => [...new Set(fs.map((f) => [...f.classList].find((c) => c.startsWith('kind-'))))].sort());
  obs.flame.legend = await page.$$eval('#chart-flame .legend > span', (ls) => ls.map((l) => l.textContent));
  obs.flame.names = frames.map((f) => f.name);
  const candidates = frames.filter((f) => f.depth >= 1 && bodyWidth && f.width < 0.8 * bodyWidth && f.width > 4)
    .sort((a, b) => b.width - a.width);
  if (candidates.length) {
    const target = candidates[0];
    obs.flame.clicked = target;
    await page.click(`#chart-flame .frame[data-id="${target.id}"]`);
    obs.flame.afterWidth = await page.$eval(`#chart-flame .frame[data-id="${target.id}"]`, (f) => f.getBoundingClientRect().width);
    obs.flame.rootIsAncestor = await page.$eval('#chart-flame .frame[data-id="0"]', (f) => f.classList.contains('ancestor'));
    await page.$eval('#s-flame', (s) => s.scrollIntoView());
    await page.screenshot({ path: join(outDir, 'flame-zoomed.png') });
    obs.screenshots.push(join(outDir, 'flame-zoomed.png'));
    // Zoom out again through the root frame above.
    await page.click('#chart-flame .frame[data-id="0"]');
    obs.flame.afterResetWidth = await page.$eval(`#chart-flame .frame[data-id="${target.id}"]`, (f) => f.getBoundingClientRect().width);
  }
  // Search: for the text asked for whatever the graph's shape (a short run's
  // samples may make one full-width chain, with no frame to zoom into), else
  // for the zoomed frame's name.
  const q = searchText || (candidates.length ? candidates[0].name : null);
  if (q && frames.length) {
    obs.flame.search = q;
    await page.fill('#chart-flame input[type="search"]', q);
    obs.flame.matches = await page.$$eval('#chart-flame .frame.match', (fs) => fs.map((f) => f.title.split('\n')[0]));
    obs.flame.searchStatus = await page.$eval('#chart-flame .status', (s) => s.textContent);
  }

  // Table sorting: click numeric headers and read the column back.
  obs.sorts = [];
  const tables = await page.$$eval('table[data-table]', (ts) => ts.map((t) => t.getAttribute('data-table')));
  for (const t of tables) {
    const cols = await page.$$eval(`table[data-table="${t}"] th`, (ths) => ths.map((h, i) => ({ i, key: h.getAttribute('data-key'), num: h.classList.contains('num') })));
    const rows = await page.$$eval(`table[data-table="${t}"] tbody tr`, (rs) => rs.length);
    for (const c of cols.filter((c) => c.num).slice(0, 2)) {
      for (const click of [1, 2]) {
        await page.click(`table[data-table="${t}"] th[data-key="${c.key}"]`);
        const res = await page.$$eval(`table[data-table="${t}"] tbody tr`, (rs, i) => rs.map((r) => {
          const v = r.children[i].getAttribute('data-v');
          return v === null ? null : Number(v);
        }), c.i);
        const dir = await page.$eval(`table[data-table="${t}"] th[data-key="${c.key}"]`, (h) => h.getAttribute('aria-sort'));
        obs.sorts.push({ table: t, column: c.key, click, direction: dir, rows, values: res });
      }
    }
  }
  obs.pwned = await page.evaluate(() => window.__pwned === undefined ? null : String(window.__pwned));
  await page.screenshot({ path: join(outDir, 'report-full.png'), fullPage: true });
  obs.screenshots.push(join(outDir, 'report-full.png'));
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(obs));
