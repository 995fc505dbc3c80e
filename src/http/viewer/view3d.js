// The 3D view: every entity with a Placeable drawn with three.js at its
// Tundra transform (position, Euler rotation in degrees, scale; Y up, as in
// three.js). An entity with a Mesh is a simple shape chosen from the mesh's
// name (box unless it names a plane, sphere or cylinder), sized by the
// Placeable's scale and the Mesh's own transform; one without a Mesh is a
// small marker. Orbit with the left button, pan with the right, zoom with
// the wheel; a click selects. Like the map, it only draws and reports
// gestures; the app decides what they do.

import * as THREE from 'three';
import { OrbitControls } from './vendor/OrbitControls.js';

// Labels drawn at most, nearest the camera first (the selected and the
// hovered entity always): more only overlap into noise.
const MAX_LABELS = 24;
// A label is dropped when its box overlaps one already placed (CSS px).
const LABEL_GAP = 4;
const MARKER_SIZE = 0.35;
// Pointer travel (px) under which a press and release is a click, not an orbit.
const CLICK_SLOP = 4;
// Placeable.parentRef chains deeper than this (or cyclic) are cut.
const MAX_PARENT_DEPTH = 16;
const DEG = Math.PI / 180;

// One geometry per shape, shared by every entity and scaled per object.
const GEOMETRY = {
  box: new THREE.BoxGeometry(1, 1, 1),
  plane: new THREE.BoxGeometry(1, 0.02, 1),
  sphere: new THREE.SphereGeometry(0.5, 20, 14),
  cylinder: new THREE.CylinderGeometry(0.5, 0.5, 1, 20),
  marker: new THREE.OctahedronGeometry(MARKER_SIZE / 2),
};

function shapeOf(mesh) {
  if (!mesh) return 'marker';
  const name = mesh.ref.toLowerCase();
  if (name.includes('plane') || name.includes('ground') || name.includes('floor')) return 'plane';
  if (name.includes('sphere') || name.includes('ball')) return 'sphere';
  if (name.includes('cylinder')) return 'cylinder';
  return 'box';
}

// A Tundra transform as a three.js matrix. Tundra composes its Euler angles
// as Rz·Ry·Rx, which is three.js's 'ZYX' order.
function matrixOf(t) {
  const m = new THREE.Matrix4();
  const q = new THREE.Quaternion().setFromEuler(new THREE.Euler(t.rot.x * DEG, t.rot.y * DEG, t.rot.z * DEG, 'ZYX'));
  m.compose(new THREE.Vector3(t.pos.x, t.pos.y, t.pos.z), q, new THREE.Vector3(t.scale.x, t.scale.y, t.scale.z));
  return m;
}

// A matrix is only usable when every number is finite and no scale is 0.
function usable(m) {
  return m.elements.every(Number.isFinite) && Math.abs(m.determinant()) > 1e-12;
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
    this.scene.add(new THREE.HemisphereLight(0xffffff, 0x445066, 2.0));
    const sun = new THREE.DirectionalLight(0xffffff, 1.2);
    sun.position.set(0.5, 1, 0.3);
    this.scene.add(sun);
    this.grid = new THREE.GridHelper(100, 100, 0x3b4a66, 0x1f2938);
    this.scene.add(this.grid);
    this.root = new THREE.Group();
    this.scene.add(this.root);
    this.camera = new THREE.PerspectiveCamera(50, 1, 0.05, 5000);
    this.camera.position.set(12, 14, 18);
    this.controls = new OrbitControls(this.camera, this.canvas);
    this.controls.enableDamping = false;
    this.controls.addEventListener('change', () => { this.needsRender = true; });
    this.controls.addEventListener('start', () => { this.touched = true; });
    this.raycaster = new THREE.Raycaster();
    this.press = null;
    this.canvas.addEventListener('pointerdown', (e) => { this.press = { x: e.clientX, y: e.clientY }; });
    this.canvas.addEventListener('pointerup', (e) => this.up(e));
    this.canvas.addEventListener('pointermove', (e) => this.hover(e));
    this.canvas.addEventListener('pointerleave', () => this.setHovered(null));
    new ResizeObserver(() => this.resize()).observe(container);
    this.resize();
    const frame = () => {
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
    this.needsRender = true;
  }

  // items: [{id, label, color, selected, transform, mesh, parentRef, visible}]
  set(items) {
    this.items = items;
    const seen = new Set();
    const byId = new Map(items.map((it) => [it.id, it]));
    const byName = new Map(items.map((it) => [it.label, it]));
    for (const it of items) {
      const world = this.worldMatrix(it, byId, byName);
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
      const placed = shape === 'marker' ? this.markerMatrix(world) : world;
      if (it.mesh && it.mesh.transform) placed.multiply(matrixOf(it.mesh.transform));
      if (!usable(placed)) {
        o.mesh.visible = false;
      } else {
        o.mesh.matrix.copy(placed);
        o.mesh.matrixWorldNeedsUpdate = true;
        o.mesh.visible = true;
      }
      o.mesh.material.wireframe = !it.visible;
      o.mesh.material.emissive.set(it.selected ? 0x555555 : 0x000000);
      seen.add(it.id);
    }
    for (const [id, o] of this.objects) {
      if (!seen.has(id)) {
        this.root.remove(o.mesh);
        o.mesh.material.dispose();
        this.objects.delete(id);
      }
    }
    if (!this.touched && this.objects.size !== this.fittedCount) this.fit();
    this.needsRender = true;
  }

  // The entity's Placeable transform composed with its parents' (by
  // parentRef, an entity id or name); null when it has none.
  worldMatrix(it, byId, byName) {
    if (!it.transform) return null;
    const m = matrixOf(it.transform);
    let at = it;
    const visited = new Set([it.id]);
    for (let depth = 0; at.parentRef && depth < MAX_PARENT_DEPTH; depth++) {
      const ref = at.parentRef;
      const parent = (/^\d+$/.test(ref) && byId.get(Number(ref))) || byName.get(ref);
      if (!parent || !parent.transform || visited.has(parent.id)) break;
      visited.add(parent.id);
      m.premultiply(matrixOf(parent.transform));
      at = parent;
    }
    return m;
  }

  // A marker keeps its size whatever the scale: position and rotation only.
  markerMatrix(world) {
    const p = new THREE.Vector3();
    const q = new THREE.Quaternion();
    world.decompose(p, q, new THREE.Vector3());
    return new THREE.Matrix4().compose(p, q, new THREE.Vector3(1, 1, 1));
  }

  // Frames every drawn entity. Planes count too: they are the ground the
  // scene stands on.
  fit() {
    this.fittedCount = this.objects.size;
    this.root.updateMatrixWorld();
    const box = new THREE.Box3();
    for (const o of this.objects.values()) if (o.mesh.visible) box.expandByObject(o.mesh);
    if (box.isEmpty()) return;
    const center = box.getCenter(new THREE.Vector3());
    const radius = Math.max(box.getSize(new THREE.Vector3()).length() / 2, 2);
    const fov = this.camera.fov * DEG;
    const halfAngle = Math.min(fov, fov * this.camera.aspect) / 2;
    const distance = (radius / Math.sin(halfAngle)) * 1.05;
    const direction = new THREE.Vector3(0.55, 0.75, 0.9).normalize();
    this.controls.target.copy(center);
    this.camera.position.copy(center).addScaledVector(direction, distance);
    this.camera.near = Math.max(0.01, distance / 1000);
    this.camera.far = distance * 20;
    this.camera.updateProjectionMatrix();
    this.controls.update();
    this.grid.position.set(Math.round(center.x), box.min.y, Math.round(center.z));
    this.needsRender = true;
  }

  // The button: frames the scene now, and follows it again.
  fitNow() {
    this.touched = false;
    this.fit();
  }

  pick(clientX, clientY) {
    const r = this.canvas.getBoundingClientRect();
    const ndc = new THREE.Vector2(((clientX - r.left) / r.width) * 2 - 1, -((clientY - r.top) / r.height) * 2 + 1);
    this.raycaster.setFromCamera(ndc, this.camera);
    const hits = this.raycaster.intersectObjects(this.root.children.filter((m) => m.visible), false);
    // Markers and solids before the ground planes they stand on.
    const solid = hits.find((h) => this.objects.get(h.object.userData.id)?.shape !== 'plane');
    const hit = solid || hits[0];
    return hit ? hit.object.userData.id : null;
  }

  up(e) {
    const press = this.press;
    this.press = null;
    if (!press || Math.hypot(e.clientX - press.x, e.clientY - press.y) > CLICK_SLOP) return;
    this.handlers.select(this.pick(e.clientX, e.clientY));
  }

  hover(e) {
    if (e.buttons) return;
    this.setHovered(this.pick(e.clientX, e.clientY));
  }

  setHovered(id) {
    if (id === this.hovered) return;
    this.hovered = id;
    this.canvas.style.cursor = id === null ? 'default' : 'pointer';
    this.needsRender = true;
  }

  // Where an entity's object is on screen (CSS px inside the canvas), or
  // null when it is behind the camera or not drawn.
  project(id) {
    const o = this.objects.get(id);
    if (!o || !o.mesh.visible) return null;
    const p = new THREE.Vector3().setFromMatrixPosition(o.mesh.matrixWorld).project(this.camera);
    if (p.z < -1 || p.z > 1) return null;
    const r = this.canvas.getBoundingClientRect();
    return { sx: ((p.x + 1) / 2) * r.width, sy: ((1 - p.y) / 2) * r.height };
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
      const p = this.project(it.id);
      if (!p || p.sx < 0 || p.sy < 0 || p.sx > r.width || p.sy > r.height) continue;
      const o = this.objects.get(it.id);
      const rank = it.selected ? 0 : it.id === this.hovered ? 1 : 2;
      const distance = cam.distanceTo(new THREE.Vector3().setFromMatrixPosition(o.mesh.matrixWorld));
      candidates.push({ it, p, rank, distance });
    }
    candidates.sort((a, b) => a.rank - b.rank || a.distance - b.distance);
    const placed = [];
    const shown = [];
    const charWidth = 6.6; // 12px system-ui, near enough for overlap tests
    for (const c of candidates) {
      if (shown.length >= MAX_LABELS) break;
      const w = c.it.label.length * charWidth + 8;
      const box = { x: c.p.sx + 8, y: c.p.sy - 9, w, h: 18 };
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
}
