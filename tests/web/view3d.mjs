// The viewer's 3D view in headless Chromium (WebGL on SwiftShader):
//   node tests/web/view3d.mjs <http-url-of-node>
// Loads the node's page, waits for entities of three origins, fits the 3D
// view to the scene and screenshots it (target/web-viewer-3d.png). The PNG
// is decoded in the page and every pixel is classified by the origin colour
// it is a shade of; the counts are printed as
//   3D pixels by origin: {"alpha":1234,...}
// and each origin must have at least MIN_PIXELS. Then the labels must not
// overlap, a click on an entity in 3D must select it in the inspector, and a
// double-click on one entity of each origin must frame it (screenshots
// target/web-viewer-3d-<origin>.png, at least MIN_FOCUSED_PIXELS each).
// Exits non-zero on any failure, printing why.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { log, open, run, shots, withBrowser } from './browser.mjs';

const [url] = process.argv.slice(2);
if (!url) {
  console.error('usage: node view3d.mjs <url-of-node>');
  process.exit(2);
}
// Waiting limit: a failure, never a pass criterion.
const CONVERGE_MS = 60000;
// Fewer pixels than this is not a drawn entity (a marker far away is ~40).
const MIN_PIXELS = 30;

// The most labels the view shows at once (MAX_LABELS in view3d.js).
const MAX_LABELS = 24;
// A framed entity covers at least this many pixels of its colour.
const MIN_FOCUSED_PIXELS = 2000;

// Waits until the page has drawn two more frames.
function nextFrames(page) {
  return page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
}

// Runs in the page: counts the pixels of a PNG (base64) that are a shade of
// each colour. A lit face is its colour scaled by the light (k), so a pixel
// p belongs to colour c when p ≈ k·c for a k in [0.45, 1.3]; greyish pixels
// (grid, background, labels, buttons) are left out.
async function countShades([png, colors]) {
  const bytes = Uint8Array.from(atob(png), (ch) => ch.charCodeAt(0));
  const bitmap = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const ctx = canvas.getContext('2d');
  ctx.drawImage(bitmap, 0, 0);
  const data = ctx.getImageData(0, 0, bitmap.width, bitmap.height).data;
  const rgb = (hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  const palette = Object.entries(colors).map(([name, hex]) => ({ name, c: rgb(hex) }));
  const counts = Object.fromEntries(palette.map((p) => [p.name, 0]));
  for (let i = 0; i < data.length; i += 4) {
    const p = [data[i], data[i + 1], data[i + 2]];
    if (Math.max(...p) - Math.min(...p) < 60) continue;
    let best = null;
    let bestErr = Infinity;
    for (const { name, c } of palette) {
      const k = (p[0] * c[0] + p[1] * c[1] + p[2] * c[2]) / (c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
      if (k < 0.45 || k > 1.3) continue;
      const err = Math.max(...p.map((v, j) => Math.abs(v - Math.min(255, k * c[j]))));
      if (err < bestErr) { bestErr = err; best = name; }
    }
    if (best !== null && bestErr <= 28) counts[best] += 1;
  }
  return { width: bitmap.width, height: bitmap.height, counts };
}

run(() => withBrowser(async (context, errors) => {
  const page = await open(context, url, errors);
  await page.waitForFunction(() => {
    const v = window.lessgateViewer;
    if (!v || !v.ready) return false;
    const seen = new Set(v.entities3d().filter((e) => e.client).map((e) => e.origin));
    seen.delete('unknown');
    return seen.size >= 3;
  }, null, { timeout: CONVERGE_MS, polling: 200 });
  const unavailable = await page.locator('#view3d-error').isVisible();
  if (unavailable) throw new Error(await page.locator('#view3d-error').innerText());

  await page.click('#fit');
  await nextFrames(page);
  const drawn = await page.evaluate(() => window.lessgateViewer.entities3d());
  const byOrigin = {};
  for (const e of drawn) byOrigin[e.origin] = (byOrigin[e.origin] || 0) + (e.client ? 1 : 0);
  log('entities on screen in 3D by origin:', JSON.stringify(byOrigin));

  const png = await page.locator('#view3d .stage').screenshot();
  mkdirSync(shots, { recursive: true });
  writeFileSync(join(shots, 'web-viewer-3d.png'), png);
  const colors = await page.evaluate(() => window.lessgateViewer.colors());
  const shades = await page.evaluate(countShades, [png.toString('base64'), colors]);
  console.log(`3D pixels by origin: ${JSON.stringify(shades.counts)}`);
  log(`screenshot ${shades.width}x${shades.height} in ${join(shots, 'web-viewer-3d.png')}, colours`, JSON.stringify(colors));
  const origins = Object.keys(colors);
  if (origins.length < 3) throw new Error(`only ${origins.length} origins known: ${origins}`);
  const faint = origins.filter((o) => shades.counts[o] < MIN_PIXELS);
  if (faint.length) throw new Error(`the 3D view shows too few pixels of ${faint.join(', ')}`);

  // Labels: at most the cap, and none overlapping another.
  const boxes = await page.$$eval('#view3d .labels span:not([hidden])', (spans) => spans.map((s) => {
    const r = s.getBoundingClientRect();
    return { text: s.textContent, x: r.left, y: r.top, w: r.width, h: r.height };
  }));
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, b] = [boxes[i], boxes[j]];
      if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h) {
        throw new Error(`labels "${a.text}" and "${b.text}" overlap`);
      }
    }
  }
  if (boxes.length > MAX_LABELS) throw new Error(`${boxes.length} labels shown, more than ${MAX_LABELS}`);
  log(`${boxes.length} labels of ${drawn.length} entities, none overlapping`);

  // A click on an entity of another node selects it in the inspector.
  const node = await page.evaluate(() => window.lessgateViewer.node);
  // The demo's movers move between the pick and the click: only still ones.
  const candidates = drawn.filter((e) => e.client && e.origin !== node && e.origin !== 'unknown'
    && !e.name.includes('mover'));
  let target = null;
  for (const e of candidates) {
    const id = await page.evaluate(([x, y]) => window.lessgateViewer.pick3d(x, y), [e.client.x, e.client.y]);
    if (id === e.id) { target = e; break; }
  }
  if (!target) throw new Error('no entity of another node is unobstructed in the 3D view');
  await page.mouse.click(target.client.x, target.client.y);
  await page.waitForFunction((id) => window.lessgateViewer.selected === id, target.id, { timeout: 5000, polling: 50 });
  const heading = await page.locator('#inspector h3').innerText();
  if (!heading.includes(`#${target.id}`)) throw new Error(`the inspector shows "${heading}", not #${target.id}`);
  log(`clicking ${target.name} (${target.origin}) in 3D selects it: inspector "${heading}"`);

  // A double-click frames one entity: then its shape (not only its dot)
  // fills much of the view, in its origin's colour. One still entity of
  // each origin, each unobstructed where it is drawn.
  const focused = {};
  for (const origin of origins) {
    await page.click('#fit');
    await nextFrames(page);
    const now = await page.evaluate(() => window.lessgateViewer.entities3d());
    let pick = null;
    for (const e of now.filter((it) => it.client && it.origin === origin && !it.name.includes('mover'))) {
      const id = await page.evaluate(([x, y]) => window.lessgateViewer.pick3d(x, y), [e.client.x, e.client.y]);
      if (id === e.id) { pick = e; break; }
    }
    if (!pick) throw new Error(`no still entity of ${origin} is unobstructed in the 3D view`);
    await page.mouse.dblclick(pick.client.x, pick.client.y);
    await nextFrames(page);
    const shot = await page.locator('#view3d .stage').screenshot();
    writeFileSync(join(shots, `web-viewer-3d-${origin}.png`), shot);
    const counted = await page.evaluate(countShades, [shot.toString('base64'), colors]);
    focused[origin] = { entity: pick.name, pixels: counted.counts[origin] };
  }
  console.log(`3D focus pixels: ${JSON.stringify(focused)}`);
  const small = origins.filter((o) => focused[o].pixels < MIN_FOCUSED_PIXELS);
  if (small.length) throw new Error(`a framed entity of ${small.join(', ')} covers too few pixels`);
}));
