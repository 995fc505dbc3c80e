// The lessgate viewer: a Tundra WebSocket client of the node serving this
// page. It logs in with protocol 3 (hierarchic scene; below 4 the node sends
// transforms as EditAttributes, not RigidBodyUpdate, section 6.1), keeps a
// copy of the scene, draws it top-down and in 3D coloured by the node that
// simulates each entity (its authority), inspects entities (origin,
// authority and epoch), and moves an entity by sending an EditAttributes of its
// Placeable.transform. An edit of another node's entity goes to its
// authority; the page shows it as pending until the new state comes back.
// A node that requires login properties gets the token from the form or the
// page's `?token=` parameter; a refused login shows the node's reason and is
// not retried until the token changes.

import { MSG, T, decodeFrame, encodeLogin, encodeEditAttributes, encodeEditBlock } from './tundra.js';
import { Registry, Scene, PLACEABLE } from './scene.js';
import { MapView } from './map.js';
import { interestAreas } from './areas.js';
import { View3D } from './view3d.js';

const PROTOCOL = 3;
const POLL_MS = 1000;
// An edit whose state has not come back by then is shown as lost.
const PENDING_MS = 10000;
const PALETTE = ['#4cc38a', '#f2a93b', '#5aa9f0', '#e5697a', '#b28cf0', '#3cc8c8', '#d8d25a', '#f07fc4'];

const $ = (id) => document.getElementById(id);
const state = {
  status: null,
  origins: { origins: [], entities: {}, authorities: {} },
  scene: null,
  socket: null,
  ready: false,
  selected: null,
  pending: new Map(), // entity id -> {x, z, since}
  dirty: true,
  notice: '',
  token: new URLSearchParams(location.search).get('token') || '',
  // The node's reason for refusing the last login, or null.
  refusal: null,
};

function originOf(entityId) {
  const index = state.origins.entities[entityId];
  return index === undefined ? null : state.origins.origins[index];
}

// The node simulating an entity and its epoch, or null before `/origins`
// lists it.
function authorityOf(entityId) {
  const a = (state.origins.authorities || {})[entityId];
  return a === undefined ? null : { node: state.origins.origins[a.node], epoch: a.epoch };
}

// Colours follow the sorted node uuids, so every page of a federation
// colours the same node alike.
function colorOf(origin) {
  if (!origin) return '#7b8494';
  const uuids = state.origins.origins.map((o) => o.uuid).sort();
  return PALETTE[uuids.indexOf(origin.uuid) % PALETTE.length];
}

const originName = (o) => (o ? o.name || o.uuid.slice(0, 8) : 'unknown');

function select(id) {
  state.selected = id;
  state.dirty = true;
}

const map = new MapView($('map'), {
  select,
  move(id, x, z) { moveEntity(id, x, z); },
});

// Without WebGL the page keeps the map and says why the 3D view is missing.
let view3d = null;
try {
  view3d = new View3D(document.querySelector('#view3d .stage'), { select });
  $('fit').addEventListener('click', () => view3d.fitNow());
} catch (error) {
  $('fit').hidden = true;
  $('view3d-error').hidden = false;
  $('view3d-error').textContent = `3D view unavailable: ${error.message || error}`;
}

function send(frame) {
  if (state.socket && state.socket.readyState === WebSocket.OPEN) state.socket.send(frame);
}

function moveEntity(id, x, z) {
  const entity = state.scene && state.scene.entities.get(id);
  const placeable = entity && Scene.component(entity, PLACEABLE);
  const t = entity && Scene.transform(entity);
  if (!placeable || !t) return;
  const value = { pos: { x, y: t.pos.y, z }, rot: { ...t.rot }, scale: { ...t.scale } };
  const block = encodeEditBlock([{ index: 0, value }], Scene.slots(placeable));
  send(encodeEditAttributes(id, placeable.id, block));
  const authority = authorityOf(id);
  if (authority && authority.node && authority.node.local) {
    // This node is the authority: it applies the edit and, as Tundra does,
    // does not echo it to the sender (section 7.5).
    placeable.attrs.get(0).value = value;
  } else {
    state.pending.set(id, { x, z, since: performance.now() });
  }
  state.dirty = true;
}

function loginData() {
  const data = { username: 'viewer' };
  if (state.token) data.token = state.token;
  return JSON.stringify(data);
}

function connect(url) {
  if (state.socket) {
    state.socket.onclose = null;
    state.socket.onmessage = null;
    state.socket.close();
  }
  state.url = url;
  state.refusal = null;
  renderRefusal();
  const socket = new WebSocket(url);
  socket.binaryType = 'arraybuffer';
  state.socket = socket;
  state.scene = new Scene(state.registry);
  state.scene.onEdit = (entity, typeId) => {
    if (typeId === PLACEABLE) state.pending.delete(entity);
  };
  state.pending.clear();
  setConnection('connecting', url);
  socket.onopen = () => send(encodeLogin(loginData(), PROTOCOL));
  socket.onmessage = (event) => {
    if (!(event.data instanceof ArrayBuffer)) return;
    let m;
    try {
      m = decodeFrame(event.data, PROTOCOL);
    } catch (error) {
      console.warn('undecodable frame', error);
      return;
    }
    if (m.id === MSG.LOGIN_REPLY) {
      state.ready = m.success;
      state.refusal = m.success ? null : m.data || 'no reason given';
      setConnection(m.success ? 'online' : 'refused', url);
      renderRefusal();
    }
    state.scene.apply(m);
    state.dirty = true;
  };
  socket.onclose = () => {
    state.ready = false;
    // A refused login would be refused again: wait for another token.
    if (state.refusal !== null) return;
    setConnection('offline', url);
    setTimeout(() => {
      if (state.socket === socket) connect(url);
    }, 2000);
  };
}

function renderRefusal() {
  const el = $('refusal');
  el.hidden = state.refusal === null;
  // A missing or wrong login property is the token's business; any other
  // refusal (a full server, bad login data) is retried by pressing connect.
  const tokenWanted = state.refusal !== null && state.refusal.startsWith('login property');
  el.textContent = state.refusal === null
    ? ''
    : `The node refused the login: ${state.refusal}. ${tokenWanted ? 'Enter the login token above and connect again.' : 'Press connect to try again.'}`;
  $('login').classList.toggle('wanted', tokenWanted);
}

$('token').value = state.token;
$('login').addEventListener('submit', (event) => {
  event.preventDefault();
  state.token = $('token').value;
  if (state.url) connect(state.url);
});

function setConnection(what, url) {
  const el = $('connection');
  el.textContent = what;
  el.className = `pill ${what}`;
  el.title = url;
}

async function poll() {
  try {
    const [status, origins] = await Promise.all([
      fetch('/status').then((r) => r.json()),
      fetch('/origins').then((r) => r.json()),
    ]);
    state.status = status;
    state.origins = origins;
    state.dirty = true;
  } catch (error) {
    console.warn('status poll failed', error);
  }
}

function items() {
  if (!state.scene) return [];
  const out = [];
  for (const e of state.scene.entities.values()) {
    const t = Scene.transform(e);
    if (!t) continue;
    const origin = originOf(e.id);
    const authority = authorityOf(e.id);
    out.push({
      id: e.id, x: t.pos.x, y: t.pos.y, z: t.pos.z, label: Scene.label(e),
      origin, authority, color: colorOf(authority ? authority.node : origin), pending: state.pending.get(e.id) || null,
      selected: e.id === state.selected,
      transform: t, mesh: Scene.mesh(e), parentRef: Scene.parentRef(e), visible: Scene.visible(e),
    });
  }
  return out;
}

// This node's area of interest and what each link carries to its peer.
function drawnAreas() {
  return interestAreas(state.status).map((a) => {
    const origin = a.peerUuid && state.origins.origins.find((o) => o.uuid === a.peerUuid);
    return {
      ...a,
      color: a.kind === 'own' ? '#7fd1ff' : colorOf(origin),
      label: a.kind === 'own' ? 'interest of this node' : `carried to ${a.peer}`,
    };
  });
}

function render() {
  const now = performance.now();
  for (const [id, p] of state.pending) {
    if (now - p.since > PENDING_MS) {
      state.pending.delete(id);
      state.notice = `move of #${id} was not confirmed by its authority`;
      state.dirty = true;
    }
  }
  if (!state.dirty) return;
  state.dirty = false;
  const list = items();
  map.set(list);
  if (view3d) view3d.set(list);
  const areas = drawnAreas();
  map.setAreas(areas);
  if (view3d) view3d.setAreas(areas);
  renderHeader(list);
  renderLegend(list);
  renderInspector();
  renderLinks();
}

function renderHeader(list) {
  const s = state.status;
  $('node').textContent = s ? s.node : '…';
  $('summary').textContent = state.scene
    ? `${state.scene.entities.size} entities · ${list.length} placed · ${s ? s.clients : 0} clients`
    : '';
  $('notice').textContent = state.notice;
}

// One line per node: its colour, the entities it simulates on the map and
// in all, and how many it is the origin of.
function renderLegend(list) {
  const simulated = new Map();
  for (const it of list) {
    const node = it.authority ? it.authority.node : it.origin;
    if (node) simulated.set(node.uuid, (simulated.get(node.uuid) || 0) + 1);
  }
  const byStatus = new Map((state.status?.authorities || []).map((o) => [o.uuid, o.entities]));
  const byOrigin = new Map((state.status?.origins || []).map((o) => [o.uuid, o.entities]));
  $('legend').replaceChildren(...state.origins.origins.map((o) => {
    const li = document.createElement('li');
    li.innerHTML = `<span class="swatch"></span><span class="name"></span><span class="count"></span>`;
    li.querySelector('.swatch').style.background = colorOf(o);
    li.querySelector('.name').textContent = originName(o) + (o.local ? ' (this node)' : '');
    li.querySelector('.count').textContent = `simulates ${simulated.get(o.uuid) || 0} on map · ${byStatus.get(o.uuid) ?? 0} total · origin of ${byOrigin.get(o.uuid) ?? 0}`;
    return li;
  }));
}

function format(type, v) {
  const n = (x) => (Number.isInteger(x) ? `${x}` : x.toFixed(3));
  const xyz = (o) => `(${n(o.x)}, ${n(o.y)}, ${n(o.z)})`;
  switch (type) {
    case T.TRANSFORM: return `pos ${xyz(v.pos)}\nrot ${xyz(v.rot)}\nscale ${xyz(v.scale)}`;
    case T.FLOAT2: return `(${n(v.x)}, ${n(v.y)})`;
    case T.FLOAT3: return xyz(v);
    case T.FLOAT4: case T.QUAT: return `(${n(v.x)}, ${n(v.y)}, ${n(v.z)}, ${n(v.w)})`;
    case T.COLOR: return `rgba(${n(v.r)}, ${n(v.g)}, ${n(v.b)}, ${n(v.a)})`;
    case T.POINT: return `(${v.x}, ${v.y})`;
    case T.REAL: return n(v);
    case T.ASSET_REF_LIST: case T.VARIANT_LIST: return v.join('; ') || '—';
    case T.STRING: return v === '' ? '""' : v;
    default: return v === '' ? '—' : `${v}`;
  }
}

function renderInspector() {
  const panel = $('inspector');
  const e = state.scene && state.selected !== null ? state.scene.entities.get(state.selected) : null;
  if (!e) {
    panel.innerHTML = '<p class="hint">Click an entity to inspect it; drag it to move it.</p>';
    return;
  }
  const origin = originOf(e.id);
  const authority = authorityOf(e.id);
  const pending = state.pending.get(e.id);
  const head = document.createElement('div');
  head.className = 'entity-head';
  head.innerHTML = '<h3></h3><p class="meta"></p>';
  head.querySelector('h3').textContent = `${Scene.label(e)}  #${e.id}`;
  const simulated = authority ? `authority ${originName(authority.node)} (epoch ${authority.epoch})` : 'authority unknown';
  head.querySelector('.meta').textContent = `origin ${originName(origin)} · ${simulated}${e.parent ? ` · parent #${e.parent}` : ''}${e.temporary ? ' · temporary' : ''}${pending ? ' · move pending at authority' : ''}`;
  const parts = [head];
  for (const c of e.components.values()) {
    const section = document.createElement('section');
    const title = document.createElement('h4');
    title.textContent = `${c.typeName}${c.name ? ` "${c.name}"` : ''}`;
    const id = document.createElement('span');
    id.className = 'cid';
    id.textContent = `type ${c.typeId} · id ${c.id}`;
    title.append(id);
    const table = document.createElement('table');
    const type = state.registry.get(c.typeId);
    for (const a of c.attrs.values()) {
      const tr = table.insertRow();
      const label = type && !a.dynamic && type.attrs[a.index] ? type.attrs[a.index].name : a.name;
      tr.insertCell().textContent = label;
      const cell = tr.insertCell();
      cell.textContent = format(a.type, a.value);
      if (a.type === T.COLOR) {
        const sw = document.createElement('span');
        sw.className = 'swatch';
        sw.style.background = `rgba(${a.value.r * 255}, ${a.value.g * 255}, ${a.value.b * 255}, ${a.value.a})`;
        cell.prepend(sw);
      }
    }
    if (!c.known) table.insertRow().insertCell().textContent = 'unknown type: attributes not decoded';
    section.append(title, table);
    parts.push(section);
  }
  panel.replaceChildren(...parts);
}

function renderLinks() {
  const links = state.status?.links || [];
  const body = $('links');
  if (links.length === 0) {
    body.innerHTML = '<tr><td colspan="5" class="hint">no peer link is up</td></tr>';
    return;
  }
  body.replaceChildren(...links.map((l) => {
    const tr = document.createElement('tr');
    const rejected = Object.values(l.rejected).reduce((a, b) => a + b, 0);
    const loss = l.packets_sent ? (100 * l.packets_lost) / l.packets_sent : 0;
    const health = loss > 5 || rejected > 0 || l.rtt_ms > 250 ? 'warn' : 'ok';
    const cells = [
      l.peer, `${l.rtt_ms.toFixed(1)} ms`, `${loss.toFixed(1)} %`, `${rejected}`,
      `${l.exported_entities} ⇄ ${l.mirrored_entities}`,
    ];
    for (const text of cells) tr.insertCell().textContent = text;
    tr.cells[0].innerHTML = `<span class="dot ${health}"></span>`;
    tr.cells[0].append(l.peer);
    tr.title = `link ${l.link} · packets sent ${l.packets_sent}, received ${l.packets_received}, resent ${l.packets_resent}, lost ${l.packets_lost}`;
    tr.cells[3].title = Object.entries(l.rejected).map(([k, v]) => `${k}: ${v}`).join('\n');
    return tr;
  }));
}

function loop() {
  render();
  requestAnimationFrame(loop);
}

// Read-only hook for tests and the console.
window.lessgateViewer = {
  get ready() { return state.ready; },
  get node() { return state.status?.node; },
  entities() {
    const rect = $('map').getBoundingClientRect();
    return items().map((it) => {
      const p = map.toScreen(it.x, it.z);
      return {
        id: it.id, name: it.label, origin: originName(it.origin), x: it.x, y: it.y, z: it.z,
        authority: it.authority ? originName(it.authority.node) : null,
        epoch: it.authority ? it.authority.epoch : null,
        color: it.color,
        pending: it.pending ? { x: it.pending.x, z: it.pending.z } : null,
        client: { x: rect.left + p.sx, y: rect.top + p.sy },
      };
    });
  },
  get refusal() { return state.refusal; },
  get selected() { return state.selected; },
  // The inspector's line under the entity's name.
  get inspectorMeta() { return document.querySelector('#inspector .meta')?.textContent ?? null; },
  // Node name -> colour, as the map and the 3D view draw the entities it
  // simulates.
  colors() {
    return Object.fromEntries(state.origins.origins.map((o) => [originName(o), colorOf(o)]));
  },
  // Entities drawn in 3D, with where they are on screen (null: off screen).
  entities3d() {
    if (!view3d) return [];
    const rect = $('scene3d').getBoundingClientRect();
    return items().map((it) => {
      const p = view3d.project(it.id, rect);
      const inside = p && p.sx >= 0 && p.sy >= 0 && p.sx <= rect.width && p.sy <= rect.height;
      return {
        id: it.id, name: it.label, origin: originName(it.origin),
        client: inside ? { x: rect.left + p.sx, y: rect.top + p.sy } : null,
      };
    });
  },
  labels3d() { return view3d ? [...(view3d.shownLabels || [])] : []; },
  pick3d(clientX, clientY) { return view3d ? view3d.pick(clientX, clientY) : null; },
  worldAt(clientX, clientY) {
    const rect = $('map').getBoundingClientRect();
    return map.toWorld(clientX - rect.left, clientY - rect.top);
  },
};

async function main() {
  const [status, schema] = await Promise.all([
    fetch('/status').then((r) => r.json()),
    fetch('/schema.json').then((r) => r.json()),
  ]);
  state.status = status;
  state.registry = new Registry(schema);
  await poll();
  // A node listening on every interface reports 0.0.0.0: use this page's host.
  const url = new URL(status.tundra_url);
  if (url.hostname === '0.0.0.0' || url.hostname === '[::]') url.hostname = location.hostname;
  connect(url.toString());
  setInterval(poll, POLL_MS);
  loop();
}

main().catch((error) => {
  $('notice').textContent = `cannot start: ${error}`;
});
