#!/usr/bin/env node
// Browser test of `memtune report` (docs/report.md): writes a report of each kind (job,
// snapshot, OOM log) and a 200k-event job report, opens each in headless Chromium
// (puppeteer-core driving the system's chromium) with the network disabled, and fails on
// any console error, page error or request that leaves the page, or on a missing or empty
// element. Saves one screenshot per kind and prints the time to first render.
//
//   NODE_PATH=<build>/report-web/node_modules node report_test.js MEMTUNE SOURCE_DIR OUT_DIR
//
// Exit 77 (ctest: skipped) when chromium, puppeteer-core or the front end is missing.
'use strict';
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const SKIP = 77;
const [memtune, sourceDir, outDir] = process.argv.slice(2).map((a) => path.resolve(a));
const chromium = process.env.MEMTUNE_CHROMIUM || '/usr/bin/chromium';

function skip(why) {
  console.log('SKIP: ' + why);
  process.exit(SKIP);
}

let puppeteer;
try {
  puppeteer = require('puppeteer-core');
} catch (e) {
  skip('puppeteer-core is not installed (npm ci in the build folder failed?)');
}
if (!fs.existsSync(chromium)) skip(chromium + ' not found (apt-get install chromium)');
fs.mkdirSync(outDir, { recursive: true });

// The reports: name, memtune arguments, checks run in the page (each returns '' or a failure).
// Paths relative to the source folder (memtune runs there): the titles stay short.
const data = 'tests';
const example = ['--example', 'llama3-70b-32xh100'];
const CASES = [
  { name: 'job', args: example, screenshot: true, hover: true,
    expect: { '#verdicts .card.verdict': 2, '#bars .bar-group': 4, '#timeline canvas': 1,
              '#segments canvas.segmap': 2, '#plan-table tr.chosen': 1, '#plan canvas': 1 } },
  { name: 'snapshot', args: [path.join(data, 'data/snapshots/oom_native.pickle')], screenshot: true,
    expect: { '#verdicts .card': 2, '#timeline canvas': 1, '#segments canvas.segmap': 1 } },
  { name: 'oom', args: [path.join(data, 'golden/diagnose/inputs/oom_2.9.txt')], screenshot: true,
    expect: { '#diagnosis ul.evidence li': 1, '#diagnosis ol.fixes li': 1 } },
  { name: 'job-200k', args: example.concat(['--iterations', '9', '--no-plan']), zoom: true,
    expect: { '#timeline canvas': 1, '#segments canvas.segmap': 2 } },
];

function writeReport(c) {
  const file = path.join(outDir, c.name + '.html');
  const r = spawnSync(memtune, ['report'].concat(c.args, ['-o', file]),
    { encoding: 'utf8', cwd: sourceDir });
  if (r.status !== 0 && /without the report front end/.test(r.stderr)) skip(r.stderr.trim());
  if (r.status !== 0) throw new Error('memtune report ' + c.args.join(' ') + ': ' + r.stderr);
  return file;
}

// Runs in the page: every expected selector matches at least `n` elements, each with a
// size on screen, text or drawn pixels.
function checkPage(expect) {
  const failures = [];
  const blank = (canvas) => {
    const ctx = canvas.getContext('2d');
    if (!ctx || canvas.width === 0 || canvas.height === 0) return true;
    const px = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
    for (let i = 3; i < px.length; i += 4) if (px[i] !== 0) return false;
    return true;
  };
  for (const [selector, n] of Object.entries(expect)) {
    const found = document.querySelectorAll(selector);
    if (found.length < n) failures.push(selector + ': ' + found.length + ' found, expected >= ' + n);
    for (const e of found) {
      const box = e.getBoundingClientRect();
      const empty = e.tagName === 'CANVAS' ? blank(e) : e.textContent.trim() === '' && e.children.length === 0;
      if (box.width === 0 || box.height === 0 || empty) failures.push(selector + ': empty');
    }
  }
  for (const s of document.querySelectorAll('section')) {
    if (s.textContent.trim() === '') failures.push('section#' + s.id + ': empty');
  }
  return failures;
}

// Hovering the timeline names the event; dragging zooms in, double-clicking out.
async function hoverAndZoom(page) {
  const failures = [];
  const over = await page.$('#timeline-chart .u-over');
  await over.evaluate((e) => e.scrollIntoView({ block: 'center' }));
  const box = await over.boundingBox();
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2);
  const hover = await page.$eval('#hover', (e) => e.textContent);
  if (!/^event \d+ .*(alloc|free)/.test(hover)) failures.push('hover shows no event: ' + hover);
  const range = () => page.evaluate(() => {
    const x = window.memtuneReport.charts.timeline.scales.x;
    return x.max - x.min;
  });
  const full = await range();
  await page.mouse.move(box.x + box.width * 0.2, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.4, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  const zoomed = await range();
  if (!(zoomed < full * 0.5)) failures.push('drag did not zoom: ' + full + ' -> ' + zoomed);
  await page.mouse.click(box.x + box.width * 0.3, box.y + box.height / 2, { clickCount: 2 });
  const back = await range();
  if (Math.abs(back - full) > 1) failures.push('double-click did not zoom out: ' + back + ' vs ' + full);
  return failures;
}

async function openReport(browser, file, c) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const failures = [];
  page.on('console', (m) => { if (m.type() === 'error') failures.push('console error: ' + m.text()); });
  page.on('pageerror', (e) => failures.push('page error: ' + e.message));
  page.on('requestfailed', (r) => failures.push('request failed: ' + r.url()));
  // Network disabled: the report must need nothing but its own file.
  await page.setOfflineMode(true);
  await page.setRequestInterception(true);
  const url = 'file://' + file;
  page.on('request', (r) => {
    if (r.url() === url) return r.continue();
    failures.push('request left the page: ' + r.url());
    return r.abort();
  });
  const start = Date.now();
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('body[data-rendered="true"]', { timeout: 60000 });
  const loadedMs = Date.now() - start;
  const renderMs = await page.evaluate(() => window.memtuneReport.renderMs);
  failures.push(...(await page.evaluate(checkPage, c.expect)));
  const result = { name: c.name, bytes: fs.statSync(file).size, loaded_ms: loadedMs, render_ms: Math.round(renderMs) };
  if (c.hover) failures.push(...(await hoverAndZoom(page)));
  if (c.zoom) {
    result.events = await page.evaluate(() => Number(document.getElementById('timeline-chart').dataset.events));
    // Each zoom: a new x range, the min/max downsampling of it and the redraw (uPlot
    // redraws in a microtask: a timer after it has run).
    result.zoom_ms = await page.evaluate(async () => {
      const u = window.memtuneReport.charts.timeline, n = u.data[0][u.data[0].length - 1];
      const t = performance.now();
      for (let k = 1; k <= 10; ++k) {
        u.setScale('x', { min: n * k / 40, max: n * (k + 10) / 40 });
        await new Promise((r) => setTimeout(r, 0));
      }
      return (performance.now() - t) / 10;
    });
  }
  if (c.screenshot) {
    await page.screenshot({ path: path.join(outDir, 'report-' + c.name + '.png'), fullPage: true });
  }
  await page.close();
  return { result, failures };
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--hide-scrollbars'],
  });
  let failed = false;
  try {
    for (const c of CASES) {
      const { result, failures } = await openReport(browser, writeReport(c), c);
      console.log(JSON.stringify(result));
      for (const f of failures) console.log('FAIL ' + c.name + ': ' + f);
      failed = failed || failures.length > 0;
    }
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
}

main().catch((e) => { console.log('FAIL: ' + (e.stack || e)); process.exit(1); });
