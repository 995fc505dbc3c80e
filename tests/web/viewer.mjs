// Drives the lessgate web viewer in headless Chromium:
//   node tests/web/viewer.mjs <http-url-of-node-A> <http-url-of-node-B> [admin-token-of-A]
// Loads A's page, waits until entities of three origins are drawn, drags
// one entity that another node owns, waits until B's page shows it at the
// new position (and A's page gets the state back); with A's admin token,
// takes that entity for A (POST /authority/take) and waits until both pages
// colour it as A's and A's inspector shows its origin, A as its authority
// and epoch 1; saves screenshots to
// target/web-viewer.png (A) and target/web-viewer-b.png (B). Exits non-zero
// on any failure, printing why.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { log, open, run, shots, withBrowser } from './browser.mjs';

const [urlA, urlB, tokenA] = process.argv.slice(2);
if (!urlA || !urlB) {
  console.error('usage: node viewer.mjs <url-of-node-A> <url-of-node-B>');
  process.exit(2);
}
// Waiting limits: failures, never pass criteria.
const CONVERGE_MS = 60000;
const MOVE_MS = 30000;
const EPSILON = 0.01;

// Waits until the page has drawn entities of `origins` distinct, known origins.
async function waitForOrigins(page, origins) {
  await page.waitForFunction((n) => {
    const v = window.lessgateViewer;
    if (!v || !v.ready) return false;
    const seen = new Set(v.entities().map((e) => e.origin).filter((o) => o !== 'unknown'));
    return seen.size >= n;
  }, origins, { timeout: CONVERGE_MS, polling: 200 });
  return page.evaluate(() => ({ node: window.lessgateViewer.node, entities: window.lessgateViewer.entities() }));
}

run(() => withBrowser(async (context, errors) => {
  const pageA = await open(context, urlA, errors);
  const seenA = await waitForOrigins(pageA, 3);
  log(`A (${seenA.node}) draws`, seenA.entities.map((e) => `${e.name}@${e.origin}`).join(', '));
  const pageB = await open(context, urlB, errors);
  const seenB = await waitForOrigins(pageB, 3);
  log(`B (${seenB.node}) draws ${seenB.entities.length} entities`);

  // An entity of B's origin if A shows one, else of any other node.
  const foreign = seenA.entities.filter((e) => e.origin !== seenA.node);
  const target = foreign.find((e) => e.origin === seenB.node) || foreign[0];
  if (!target) throw new Error('page A shows no entity of another node');
  if (!seenB.entities.some((e) => e.name === target.name)) {
    throw new Error(`page B does not show ${target.name}`);
  }
  // Where it is drawn now: the map refits while entities come and go (a
  // federation may briefly hold two links to a peer), so what A showed
  // before B's page was opened may be stale.
  const from = await pageA.evaluate((id) => window.lessgateViewer.entities().find((e) => e.id === id).client, target.id);
  // Drag toward the middle of the map so the drop stays on the canvas.
  const box = await pageA.locator('#map').boundingBox();
  const mid = { x: box.x + box.width / 2, y: box.y + box.height / 2 };
  const to = { x: from.x + (from.x > mid.x ? -140 : 140), y: from.y + (from.y > mid.y ? -90 : 90) };
  log(`dragging ${target.name} (origin ${target.origin}) from`, from, 'to', to);
  await pageA.mouse.move(from.x, from.y);
  await pageA.mouse.down();
  await pageA.mouse.move(to.x, to.y, { steps: 12 });
  await pageA.mouse.up();
  const want = await pageA.evaluate(([x, y]) => window.lessgateViewer.worldAt(x, y), [to.x, to.y]);
  log(`expecting ${target.name} at x=${want.x.toFixed(3)} z=${want.z.toFixed(3)}`);
  // A drag that starts on an entity selects it (one that starts beside it
  // pans the map); whether the move is still pending depends on how fast
  // the authority answers.
  const selected = await pageA.evaluate(() => window.lessgateViewer.selected);
  if (selected !== target.id) throw new Error(`the drag did not start on ${target.name} (the map moved under the pointer?)`);
  const moved = async (page) => page.waitForFunction(([name, x, z, eps]) => {
    const e = window.lessgateViewer.entities().find((it) => it.name === name);
    return e && !e.pending && Math.abs(e.x - x) < eps && Math.abs(e.z - z) < eps;
  }, [target.name, want.x, want.z, EPSILON], { timeout: MOVE_MS, polling: 100 });
  await moved(pageB);
  log(`B shows ${target.name} at the new position`);
  await moved(pageA);
  log(`A got the authority's state back for ${target.name}`);

  if (tokenA) await takeForA(pageA, pageB, seenA.node, target);

  mkdirSync(shots, { recursive: true });
  await pageA.waitForTimeout(300); // let the next status poll repaint the panels
  await pageA.screenshot({ path: join(shots, 'web-viewer.png') });
  await pageB.screenshot({ path: join(shots, 'web-viewer-b.png') });
  log(`screenshots in ${shots}`);
}));

// Takes `target` (another node's entity, selected on page A) for A through
// A's admin endpoint, and waits until both pages draw it in A's colour and
// A's inspector names A as its authority.
async function takeForA(pageA, pageB, nodeA, target) {
  const entity = (page, name) => page.evaluate((n) => window.lessgateViewer.entities().find((e) => e.name === n), name);
  const before = await entity(pageA, target.name);
  const colors = await pageA.evaluate(() => window.lessgateViewer.colors());
  if (before.authority !== target.origin || before.epoch !== 0) {
    throw new Error(`before the hand-over A shows ${target.name} simulated by ${before.authority} at epoch ${before.epoch}`);
  }
  if (before.color !== colors[target.origin]) throw new Error(`${target.name} is not drawn in its authority's colour`);
  const answer = await fetch(new URL('/authority/take', urlA), {
    method: 'POST',
    headers: { authorization: `Bearer ${tokenA}`, 'content-type': 'application/json' },
    body: JSON.stringify({ entity: target.id }),
  });
  const body = await answer.text();
  if (answer.status !== 202) throw new Error(`take answered ${answer.status}: ${body}`);
  log(`asked A's authority endpoint for ${target.name}:`, body);
  const handed = (page) => page.waitForFunction(([name, node, color]) => {
    const e = window.lessgateViewer.entities().find((it) => it.name === name);
    return e && e.authority === node && e.epoch === 1 && e.color === color;
  }, [target.name, nodeA, colors[nodeA]], { timeout: CONVERGE_MS, polling: 100 });
  await handed(pageA);
  await handed(pageB);
  log(`A and B draw ${target.name} in ${nodeA}'s colour ${colors[nodeA]} (was ${before.color})`);
  const meta = `origin ${target.origin} · authority ${nodeA} (epoch 1)`;
  await pageA.waitForFunction((m) => (window.lessgateViewer.inspectorMeta || '').startsWith(m), meta, { timeout: CONVERGE_MS, polling: 100 });
  log(`A's inspector shows authority: ${await pageA.evaluate(() => window.lessgateViewer.inspectorMeta)}`);
}
