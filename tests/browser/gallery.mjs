// Screenshots of a report.html for docs/gallery (scripts/make-gallery.sh):
// PREFIX-top.png (the page as it opens: verdict, findings), PREFIX-steps.png
// (the step-time chart), PREFIX-flame.png (the flame graph, when there are
// samples), PREFIX-gpu.png (the GPU section, when the page has one).
//
//   node gallery.mjs REPORT_HTML PREFIX [--chromium PATH]
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const ci = args.indexOf('--chromium');
const executablePath = ci >= 0 ? args.splice(ci, 2)[1] : '/usr/bin/chromium';
const [reportPath, prefix] = args;
if (!reportPath || !prefix) {
  console.error('usage: node gallery.mjs REPORT_HTML PREFIX [--chromium PATH]');
  process.exit(2);
}
const userDataDir = mkdtempSync(join(tmpdir(), 'torchneck-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath, headless: true, viewport: { width: 1100, height: 820 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = context.pages()[0] || await context.newPage();
  await page.goto(pathToFileURL(resolve(reportPath)).href);
  await page.waitForSelector('html[data-rendered="1"]');
  await page.screenshot({ path: `${prefix}-top.png` });
  await page.locator('#s-steps').screenshot({ path: `${prefix}-steps.png` });
  if (await page.locator('#chart-flame .frame').count()) {
    await page.locator('#s-flame').screenshot({ path: `${prefix}-flame.png` });
  }
  if (await page.$eval('#s-gpu', (s) => !s.hidden)) {
    await page.locator('#s-gpu').screenshot({ path: `${prefix}-gpu.png` });
  }
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
