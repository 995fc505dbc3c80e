// The 3D view: every entity with a Placeable drawn with three.js at its
// Tundra transform (position, Euler rotation in degrees, scale; Y up, as in
// three.js). An entity with a Mesh is a simple shape chosen from the mesh's
// name (box unless it names a plane, sphere or cylinder), sized by the
// Placeable's scale and the Mesh's own transform; one without a Mesh is a
// small marker. Every entity also gets a dot of a fixed size on screen, so
// a view fitted to a large scene still shows its small worlds. Orbit with
// the left button, pan with the right, zoom with the wheel; a click selects,
// a double-click frames the entity. Like the map, it only draws and reports
// gestures; the app decides what they do.

import * as THREE from 'three';
import { OrbitControls } from './vendor/OrbitControls.js';
import { markerMatrix, meshMatrix, placement, shapeOf, usable } from './placement.js';

// Labels drawn at most, nearest the camera first (the selected and the
// hovered entity always): more only overlap into noise.
const MAX_LABELS = 24;
// A label is dropped when its box overlaps one already placed (CSS px).
const LABEL_GAP = 4;
const MARKER_SIZE = 0.35;
// Pointer travel (px) under which a press and release is a click, not an orbit.
const CLICK_SLOP = 4;
// The dot every entity gets (CSS px), and how near a click must be to one.
const DOT_SIZE = 7;
const DOT_PICK_RADIUS = 8;
// Fitting: the outermost entity ends this far from the centre (1 = the
// edge of the view); beyond this many entities only their centres count.
const FIT_FILL = 0.85;
const FIT_DETAILED_MAX = 2000;
const GRID_SIZE = 20;
const DEG = Math.PI / 180;
// The labels' font (style.css) and box: text width plus padding, line height.
const LABEL_FONT = '12px system-ui, -apple-system, "Segoe UI", sans-serif';
const LABEL_PADDING = 8;
const LABEL_HEIGHT = 18;

// One geometry per shape, shared by every entity and scaled per object.
const GEOMETRY = {
  box: new THREE.BoxGeometry(1, 1, 1),
  plane: new THREE.BoxGeometry(1, 0.02, 1),
  sphere: new THREE.SphereGeometry(0.5, 20, 14),
  cylinder: new THREE.CylinderGeometry(0.5, 0.5, 1, 20),
  marker: new THREE.OctahedronGeometry(MARKER_SIZE / 2),
};

// A round dot for the points (a square is what WebGL draws by itself).
function roundDot() {
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 32;
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = '#ffffff';
  ctx.beginPath();
  ctx.arc(16, 16, 15, 0, Math.PI * 2);
  ctx.fill();
  return new THREE.CanvasTexture(canvas);
}

export class View3D {
  constructor(container, handlers) {
    this.container = container;
    this.handlers = handlers; // { select(id|null) }
    this.items = [];
    this.objects = new Map(); // entity id -> { mesh, shape, color }
    this.hovered = null;
    this.touched = false; // the view follows the scene until the user moves it
    this.fittedCount = 0;
    this.needsRender = true;
    this.canvas = container.querySelector('canvas');
    this.labels = container.querySelector('.labels');
    // Throws when the browser has no WebGL; the app then shows why.
    this.renderer = new THREE.WebGLRenderer({ canvas: this.canvas, antialias: true });
    this.renderer.setPixelRatio(window.devicePixelRatio || 1);
    this.renderer.setClearColor(0x111823);
    this.scene = new THREE.Scene();
    this.scene.add(new THREE.HemisphereLight(0xffffff, 0x445066, 1.2));
    const sun = new THREE.DirectionalLight(0xffffff, 1.0);
    sun.position.set(0.5, 1, 0.3);
    this.scene.add(sun);
    this.grid = new THREE.GridHelper(GRID_SIZE, 20, 0x3b4a66, 0x1f2938);
    this.scene.add(this.grid);
    this.root = new THREE.Group();
    this.scene.add(this.root);
    this.dots = new THREE.Points(new THREE.BufferGeometry(), new THREE.PointsMaterial({
      size: DOT_SIZE * (window.devicePixelRatio || 1),
      sizeAttenuation: false,
      vertexColors: true,
      map: roundDot(),
      alphaTest: 0.5,
    }));
    this.dots.frustumCulled = false;
    this.scene.add(this.dots);
    this.selection = new THREE.LineSegments(
      new THREE.EdgesGeometry(new THREE.BoxGeometry(1, 1, 1)),
      new THREE.LineBasicMaterial({ color: 0xffffff }),
    );
    this.selection.matrixAutoUpdate = false;
    this.selection.visible = false;
    this.scene.add(this.selection);
    // Areas of interest (areas.js): one wire box each.
    this.areas = new THREE.Group();
    this.scene.add(this.areas);
    this.camera = new THREE.PerspectiveCamera(50, 1, 0.05, 5000);
    this.camera.position.set(12, 14, 18);
    this.controls = new OrbitControls(this.camera, this.canvas);
    this.controls.enableDamping = false;
    this.controls.addEventListener('change', () => { this.needsRender = true; });
    this.controls.addEventListener('start', () => { this.touched = true; });
    this.raycaster = new THREE.Raycaster();
    this.press = null;
    this.measure = document.createElement('canvas').getContext('2d');
    this.measure.font = LABEL_FONT;
    this.labelWidths = new Map();
    this.canvas.addEventListener('pointerdown', (e) => { this.press = { x: e.clientX, y: e.clientY }; });
    this.canvas.addEventListener('pointerup', (e) => this.up(e));
    this.canvas.addEventListener('pointermove', (e) => this.hover(e));
    this.canvas.addEventListener('pointerleave', () => {
      this.hoverAt = null;
      this.setHovered(null);
    });
    this.canvas.addEventListener('dblclick', (e) => {
      const id = this.pick(e.clientX, e.clientY);
      if (id !== null) this.focus(id);
    });
    new ResizeObserver(() => this.resize()).observe(container);
    this.resize();
    this.hoverAt = null;
    const frame = () => {
      if (this.hoverAt) {
        this.setHovered(this.pick(this.hoverAt.x, this.hoverAt.y));
        this.hoverAt = null;
      }
      if (this.needsRender) this.render();
      requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
  }

  resize() {
    const r = this.container.getBoundingClientRect();
    const w = Math.max(1, Math.round(r.width));
    const h = Math.max(1, Math.round(r.height));
    this.renderer.setSize(w, h, false);
    this.camera.aspect = w / h;
    this.camera.updateProjectionMatrix();
    // A fit depends on the view's shape: redo it while following the scene.
    if (!this.touched && this.objects.size > 0) this.fit();
    this.needsRender = true;
  }

  // items: [{id, label, color, selected, transform, mesh, parentRef, visible}]
  set(items) {
    this.items = items;
    const seen = new Set();
    let selected = null;
    const byId = new Map(items.map((it) => [it.id, it]));
    const byName = new Map(items.map((it) => [it.label, it]));
    for (const it of items) {
      const world = placement(it, byId, byName);
      if (!world) continue;
      const shape = shapeOf(it.mesh);
      let o = this.objects.get(it.id);
      if (!o || o.shape !== shape) {
        if (o) this.root.remove(o.mesh);
        const material = new THREE.MeshLambertMaterial({ color: it.color });
        const mesh = new THREE.Mesh(GEOMETRY[shape], material);
        mesh.matrixAutoUpdate = false;
        mesh.userData.id = it.id;
        this.root.add(mesh);
        o = { mesh, shape, color: null };
        this.objects.set(it.id, o);
      }
      if (o.color !== it.color) {
        o.mesh.material.color.set(it.color);
        o.color = it.color;
      }
      const placed = shape === 'marker' ? markerMatrix(world) : meshMatrix(world, it.mesh);
      if (!usable(placed)) {
        o.mesh.visible = false;
      } else {
        o.mesh.matrix.copy(placed);
        o.mesh.matrixWorldNeedsUpdate = true;
        o.mesh.visible = true;
      }
      o.mesh.material.wireframe = !it.visible;
      seen.add(it.id);
      if (it.selected) selected = o;
    }
    for (const [id, o] of this.objects) {
      if (!seen.has(id)) {
        this.root.remove(o.mesh);
        o.mesh.material.dispose();
        this.objects.delete(id);
      }
    }
    this.placeDots();
    this.outline(selected);
    if (!this.touched && this.objects.size !== this.fittedCount) this.fit();
    this.needsRender = true;
  }

  // The selected entity gets a white box around its shape, rotated with
  // it; its own colour stays its authority's.
  outline(o) {
    this.selection.visible = !!(o && o.mesh.visible);
    if (!this.selection.visible) return;
    const g = o.mesh.geometry;
    if (!g.boundingBox) g.computeBoundingBox();
    const size = g.boundingBox.getSize(new THREE.Vector3()).max(new THREE.Vector3(0.05, 0.05, 0.05));
    const inner = new THREE.Matrix4().makeScale(size.x * 1.06, size.y * 1.06, size.z * 1.06);
    this.selection.matrix.copy(o.mesh.matrix).multiply(inner);
    this.selection.matrixWorldNeedsUpdate = true;
  }

  placeDots() {
    const shown = [...this.objects.values()].filter((o) => o.mesh.visible);
    const positions = new Float32Array(shown.length * 3);
    const colors = new Float32Array(shown.length * 3);
    const p = new THREE.Vector3();
    shown.forEach((o, i) => {
      p.setFromMatrixPosition(o.mesh.matrix).toArray(positions, i * 3);
      o.mesh.material.color.toArray(colors, i * 3);
    });
    const g = this.dots.geometry;
    g.setAttribute('position', new THREE.BufferAttribute(positions, 3));
    g.setAttribute('color', new THREE.BufferAttribute(colors, 3));
  }

  // Frames every drawn entity: first a sphere around them all, then the
  // distance is corrected until their outermost points fill most of the
  // view (a sphere around a long or flat scene leaves it small). Planes
  // count too: they are the ground the scene stands on.
  fit(only = null) {
    this.fittedCount = this.objects.size;
    this.root.updateMatrixWorld();
    const box = new THREE.Box3();
    const points = [];
    const shown = (only || [...this.objects.values()]).filter((o) => o.mesh.visible);
    for (const o of shown) {
      const b = new THREE.Box3().setFromObject(o.mesh);
      box.union(b);
      if (shown.length > FIT_DETAILED_MAX) {
        points.push(b.getCenter(new THREE.Vector3()));
      } else {
        for (const x of [b.min.x, b.max.x]) for (const y of [b.min.y, b.max.y]) for (const z of [b.min.z, b.max.z]) points.push(new THREE.Vector3(x, y, z));
      }
    }
    if (box.isEmpty()) return;
    const center = box.getCenter(new THREE.Vector3());
    const radius = Math.max(box.getSize(new THREE.Vector3()).length() / 2, only ? 0.5 : 2);
    const vertical = this.camera.fov * DEG;
    const horizontal = 2 * Math.atan(Math.tan(vertical / 2) * this.camera.aspect);
    let distance = radius / Math.sin(Math.min(vertical, horizontal) / 2);
    // From the south-east and above (about 50 degrees), so ground planes
    // are seen, not edge-on.
    const direction = new THREE.Vector3(0.45, 1.0, 0.7).normalize();
    this.controls.target.copy(center);
    for (let pass = 0; pass < 3; pass++) {
      this.placeCamera(center, direction, distance);
      let extent = 0;
      for (const p of points) {
        const ndc = p.clone().project(this.camera);
        if (ndc.z > -1 && ndc.z < 1) extent = Math.max(extent, Math.abs(ndc.x), Math.abs(ndc.y));
      }
      if (extent === 0) break;
      distance = Math.max(distance * (extent / FIT_FILL), radius * 0.05);
    }
    this.placeCamera(center, direction, distance);
    this.controls.update();
    // A grid of 20 cells under the scene, whatever its size.
    const span = Math.max(box.max.x - box.min.x, box.max.z - box.min.z, 10) * 1.5;
    this.grid.scale.setScalar(span / GRID_SIZE);
    this.grid.position.set(center.x, box.min.y, center.z);
    this.needsRender = true;
  }

  placeCamera(center, direction, distance) {
    this.camera.position.copy(center).addScaledVector(direction, distance);
    this.camera.lookAt(center);
    this.camera.near = Math.max(0.01, distance / 1000);
    this.camera.far = distance * 20;
    this.camera.updateProjectionMatrix();
    this.camera.updateMatrixWorld();
  }

  // The button: frames the scene now, and follows it again.
  fitNow() {
    this.touched = false;
    this.fit();
  }

  // Double-click: frames one entity (the view then stays until fitted again).
  focus(id) {
    const o = this.objects.get(id);
    if (!o || !o.mesh.visible) return;
    this.touched = true;
    this.fit([o]);
  }

  pick(clientX, clientY) {
    const r = this.canvas.getBoundingClientRect();
    const ndc = new THREE.Vector2(((clientX - r.left) / r.width) * 2 - 1, -((clientY - r.top) / r.height) * 2 + 1);
    this.raycaster.setFromCamera(ndc, this.camera);
    const hits = this.raycaster.intersectObjects(this.root.children.filter((m) => m.visible), false);
    // Markers and solids before the ground planes they stand on.
    const solid = hits.find((h) => this.objects.get(h.object.userData.id)?.shape !== 'plane');
    const hit = solid || hits[0];
    if (hit) return hit.object.userData.id;
    // Nothing under the pointer: the nearest dot, if the click is on one.
    let best = null;
    let bestDistance = DOT_PICK_RADIUS;
    for (const id of this.objects.keys()) {
      const at = this.project(id, r);
      if (!at) continue;
      const d = Math.hypot(at.sx - (clientX - r.left), at.sy - (clientY - r.top));
      if (d <= bestDistance) { best = id; bestDistance = d; }
    }
    return best;
  }

  up(e) {
    const press = this.press;
    this.press = null;
    if (!press || Math.hypot(e.clientX - press.x, e.clientY - press.y) > CLICK_SLOP) return;
    this.handlers.select(this.pick(e.clientX, e.clientY));
  }

  // Picking is done once a frame, not for every pointer event.
  hover(e) {
    if (e.buttons) return;
    this.hoverAt = { x: e.clientX, y: e.clientY };
  }

  setHovered(id) {
    if (id === this.hovered) return;
    this.hovered = id;
    this.canvas.style.cursor = id === null ? 'default' : 'pointer';
    this.needsRender = true;
  }

  // Where an entity's object is on screen (CSS px inside the canvas), or
  // null when it is behind the camera or not drawn.
  // `r`: the canvas's client rectangle, when the caller has it already.
  project(id, r = this.canvas.getBoundingClientRect()) {
    const o = this.objects.get(id);
    if (!o || !o.mesh.visible) return null;
    const p = new THREE.Vector3().setFromMatrixPosition(o.mesh.matrixWorld).project(this.camera);
    if (p.z < -1 || p.z > 1) return null;
    return { sx: ((p.x + 1) / 2) * r.width, sy: ((1 - p.y) / 2) * r.height };
  }

  setAreas(areas) {
    for (const child of [...this.areas.children]) {
      child.geometry.dispose();
      child.material.dispose();
      this.areas.remove(child);
    }
    for (const a of areas) {
      const size = [0, 1, 2].map((i) => Math.max(a.max[i] - a.min[i], 0.01));
      const box = new THREE.LineSegments(
        new THREE.EdgesGeometry(new THREE.BoxGeometry(...size)),
        new THREE.LineDashedMaterial({ color: a.color, dashSize: 2, gapSize: 1 }),
      );
      box.position.set(...[0, 1, 2].map((i) => (a.min[i] + a.max[i]) / 2));
      box.computeLineDistances();
      this.areas.add(box);
    }
    this.needsRender = true;
  }

  render() {
    this.needsRender = false;
    this.root.updateMatrixWorld();
    this.renderer.render(this.scene, this.camera);
    this.placeLabels();
  }

  // Greedy placement: the selected and the hovered entity first, then the
  // rest nearest the camera first; a label overlapping a placed one is
  // left out, and at most MAX_LABELS are shown.
  placeLabels() {
    const r = this.canvas.getBoundingClientRect();
    const cam = this.camera.position;
    const candidates = [];
    for (const it of this.items) {
      const p = this.project(it.id, r);
      if (!p || p.sx < 0 || p.sy < 0 || p.sx > r.width || p.sy > r.height) continue;
      const o = this.objects.get(it.id);
      const rank = it.selected ? 0 : it.id === this.hovered ? 1 : 2;
      const distance = cam.distanceTo(new THREE.Vector3().setFromMatrixPosition(o.mesh.matrixWorld));
      candidates.push({ it, p, rank, distance });
    }
    candidates.sort((a, b) => a.rank - b.rank || a.distance - b.distance);
    const placed = [];
    const shown = [];
    for (const c of candidates) {
      if (shown.length >= MAX_LABELS) break;
      const box = { x: c.p.sx + 8, y: c.p.sy - LABEL_HEIGHT / 2, w: this.labelWidth(c.it.label), h: LABEL_HEIGHT };
      const clash = placed.some((b) => box.x < b.x + b.w + LABEL_GAP && b.x < box.x + box.w + LABEL_GAP
        && box.y < b.y + b.h + LABEL_GAP && b.y < box.y + box.h + LABEL_GAP);
      if (clash && c.rank === 2) continue;
      placed.push(box);
      shown.push({ ...c, box });
    }
    while (this.labels.children.length < shown.length) this.labels.append(document.createElement('span'));
    for (let i = 0; i < this.labels.children.length; i++) {
      const el = this.labels.children[i];
      const s = shown[i];
      if (!s) {
        el.hidden = true;
        continue;
      }
      el.hidden = false;
      el.textContent = s.it.label;
      el.className = s.rank === 0 ? 'selected' : '';
      el.style.transform = `translate(${Math.round(s.box.x)}px, ${Math.round(s.box.y)}px)`;
    }
    this.shownLabels = shown.map((s) => s.it.id);
  }

  labelWidth(text) {
    let w = this.labelWidths.get(text);
    if (w === undefined) {
      if (this.labelWidths.size > 4096) this.labelWidths.clear();
      w = Math.ceil(this.measure.measureText(text).width) + LABEL_PADDING;
      this.labelWidths.set(text, w);
    }
    return w;
  }
}
