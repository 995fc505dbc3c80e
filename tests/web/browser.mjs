// Headless Chromium for the viewer scripts: Debian's chromium driven by
// playwright-core, with WebGL on SwiftShader (the CPU renderer) so the 3D
// view draws on machines without a GPU.

import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const shots = join(repo, 'target');

export const log = (...args) => console.log('[viewer]', ...args);

// Runs `body(context, errors)` in a fresh browser profile; page errors and
// console errors collected in `errors` fail the run.
export async function withBrowser(body) {
  const profile = mkdtempSync(join(tmpdir(), 'lessgate-chromium-'));
  const errors = [];
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 860 },
    args: [
      '--headless', '--no-sandbox', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--ignore-gpu-blocklist',
    ],
  });
  try {
    await body(context, errors);
    if (errors.length) throw new Error(`page errors:\n${errors.join('\n')}`);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

// With LESSGATE_VIEWER_FROM_DISK=1 the page's scripts and style sheet come
// from src/http/viewer/ rather than the node's embedded copy, so a change
// to them is tried without rebuilding the node. index.html stays the
// node's: a page document fulfilled by the browser's request interception
// loses its WebSocket to the node in Chromium.
const fromDisk = process.env.LESSGATE_VIEWER_FROM_DISK === '1';
const viewerDir = join(repo, 'src/http/viewer');
const TYPES = { '.js': 'text/javascript', '.css': 'text/css', '.html': 'text/html' };

async function serveFromDisk(page) {
  const ours = (url) => url.protocol === 'http:' && /^\/[\w/.-]+\.(js|css)$/.test(url.pathname);
  await page.route(ours, async (route) => {
    const { pathname } = new URL(route.request().url());
    const file = pathname === '/' ? 'index.html' : pathname.slice(1);
    if (file.includes('..') || !existsSync(join(viewerDir, file))) return route.continue();
    const type = TYPES[file.slice(file.lastIndexOf('.'))] || 'text/plain';
    return route.fulfill({ contentType: type, body: readFileSync(join(viewerDir, file)) });
  });
}

export async function open(context, url, errors) {
  const page = await context.newPage();
  if (fromDisk) await serveFromDisk(page);
  page.on('pageerror', (error) => {
    errors.push(`${url}: ${error.message}`);
    log(`page error: ${error.message}`);
  });
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`${url}: console: ${m.text()}`);
  });
  await page.goto(url);
  return page;
}

// Exits 0 when `main` resolves, 1 (with the reason) when it throws.
export function run(main) {
  main().then(
    () => { log('ok'); process.exit(0); },
    (error) => { console.error('[viewer] FAILED:', error.stack || error); process.exit(1); },
  );
}
