// The viewer against a node that requires a login token:
//   node tests/web/login.mjs <http-url-of-node> <token>
// Without a token and with a wrong one the page shows the node's refusal
// reason and stays refused; the token typed into the form, or given as
// `?token=`, logs in. The refused page is saved as
// target/web-viewer-refused.png. Exits non-zero on any failure, printing why.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { log, open, run, shots, withBrowser } from './browser.mjs';

const [url, token] = process.argv.slice(2);
if (!url || !token) {
  console.error('usage: node login.mjs <url-of-node> <token>');
  process.exit(2);
}
// Waiting limit: a failure, never a pass criterion.
const WAIT_MS = 30000;

async function refusedWith(page, reason) {
  await page.waitForFunction((r) => {
    const v = window.lessgateViewer;
    return v && v.refusal !== null && v.refusal.includes(r);
  }, reason, { timeout: WAIT_MS, polling: 100 });
  const shown = await page.locator('#refusal').innerText();
  if (!(await page.locator('#refusal').isVisible()) || !shown.includes(reason)) {
    throw new Error(`the page does not show the refusal "${reason}": "${shown}"`);
  }
  const pill = await page.locator('#connection').innerText();
  if (pill.toLowerCase() !== 'refused') throw new Error(`connection shows "${pill}", not refused`);
  if (await page.evaluate(() => window.lessgateViewer.ready)) throw new Error('refused but ready');
  log(`refused, the page says: ${shown}`);
}

async function loggedIn(page) {
  await page.waitForFunction(() => window.lessgateViewer?.ready, null, { timeout: WAIT_MS, polling: 100 });
  if (await page.locator('#refusal').isVisible()) throw new Error('logged in but a refusal is still shown');
  const pill = await page.locator('#connection').innerText();
  if (pill.toLowerCase() !== 'online') throw new Error(`connection shows "${pill}", not online`);
}

async function connectWith(page, value) {
  await page.fill('#token', value);
  await page.click('#login button[type=submit]');
}

run(() => withBrowser(async (context, errors) => {
  const bare = await open(context, url, errors);
  await refusedWith(bare, "login property 'token' is required");
  mkdirSync(shots, { recursive: true });
  await bare.screenshot({ path: join(shots, 'web-viewer-refused.png') });

  await connectWith(bare, `${token}-wrong`);
  await refusedWith(bare, "login property 'token' is not accepted");

  await connectWith(bare, token);
  await loggedIn(bare);
  log('the token typed into the form logs in');

  const byParam = new URL(url);
  byParam.searchParams.set('token', token);
  const param = await open(context, byParam.toString(), errors);
  await loggedIn(param);
  const field = await param.inputValue('#token');
  if (field !== token) throw new Error(`the form shows "${field}", not the ?token= value`);
  log('?token= logs in and fills the form');

  byParam.searchParams.set('token', 'nope');
  const wrong = await open(context, byParam.toString(), errors);
  await refusedWith(wrong, "login property 'token' is not accepted");
  log('a wrong ?token= shows the refusal');
}));
