// The top-down map: a canvas showing entities at (x, z) of their
// Placeable.transform (y is up in Tundra), with pan (drag the background),
// zoom (wheel), selection (click) and moving an entity (drag it). It only
// draws and reports gestures; the app decides what they do.

const DOT = 9;

export class MapView {
  constructor(canvas, handlers) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
    this.handlers = handlers; // { select(id|null), move(id, x, z) }
    this.center = { x: 0, z: 0 };
    this.scale = 40; // pixels per metre
    this.items = []; // [{id, x, z, label, color, pending:{x,z}|null, selected}]
    this.areas = []; // [{min:[x,y,z], max:[x,y,z], color, label}] (areas.js)
    this.gesture = null;
    // The view follows the scene until the user pans, zooms or drags.
    this.touched = false;
    this.fittedCount = 0;
    canvas.addEventListener('pointerdown', (e) => this.down(e));
    canvas.addEventListener('pointermove', (e) => this.moveTo(e));
    canvas.addEventListener('pointerup', (e) => this.up(e));
    canvas.addEventListener('wheel', (e) => this.wheel(e), { passive: false });
    new ResizeObserver(() => this.resize()).observe(canvas);
    this.resize();
  }

  resize() {
    const r = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.max(1, Math.round(r.width * dpr));
    this.canvas.height = Math.max(1, Math.round(r.height * dpr));
    this.dpr = dpr;
    this.draw();
  }

  size() { return { w: this.canvas.width / this.dpr, h: this.canvas.height / this.dpr }; }

  // World (x, z) -> CSS pixels inside the canvas, and back.
  toScreen(x, z) {
    const { w, h } = this.size();
    return { sx: w / 2 + (x - this.center.x) * this.scale, sy: h / 2 + (z - this.center.z) * this.scale };
  }
  toWorld(sx, sy) {
    const { w, h } = this.size();
    return { x: this.center.x + (sx - w / 2) / this.scale, z: this.center.z + (sy - h / 2) / this.scale };
  }
  local(e) {
    const r = this.canvas.getBoundingClientRect();
    return { sx: e.clientX - r.left, sy: e.clientY - r.top };
  }

  hit(sx, sy) {
    let best = null;
    let bestDist = DOT + 4;
    for (const it of this.items) {
      const p = this.toScreen(it.x, it.z);
      const d = Math.hypot(p.sx - sx, p.sy - sy);
      if (d <= bestDist) { best = it; bestDist = d; }
    }
    return best;
  }

  // Frames every entity while the user has not moved the view.
  fit() {
    if (this.touched || this.items.length === this.fittedCount) return;
    this.fittedCount = this.items.length;
    const xs = this.items.map((i) => i.x);
    const zs = this.items.map((i) => i.z);
    const [minX, maxX, minZ, maxZ] = [Math.min(...xs), Math.max(...xs), Math.min(...zs), Math.max(...zs)];
    this.center = { x: (minX + maxX) / 2, z: (minZ + maxZ) / 2 };
    const { w, h } = this.size();
    const span = Math.max(maxX - minX, maxZ - minZ, 4);
    this.scale = Math.max(2, Math.min(120, (Math.min(w, h) * 0.7) / span));
  }

  down(e) {
    const { sx, sy } = this.local(e);
    const item = this.hit(sx, sy);
    this.canvas.setPointerCapture(e.pointerId);
    this.gesture = item
      ? { kind: 'entity', id: item.id, start: { sx, sy }, at: { sx, sy }, moved: false }
      : { kind: 'pan', start: { sx, sy }, center: { ...this.center }, moved: false };
  }

  moveTo(e) {
    const { sx, sy } = this.local(e);
    const g = this.gesture;
    if (!g) {
      this.canvas.style.cursor = this.hit(sx, sy) ? 'grab' : 'default';
      return;
    }
    if (Math.hypot(sx - g.start.sx, sy - g.start.sy) > 3) {
      g.moved = true;
      this.touched = true;
    }
    if (g.kind === 'pan') {
      this.center = { x: g.center.x - (sx - g.start.sx) / this.scale, z: g.center.z - (sy - g.start.sy) / this.scale };
    } else {
      g.at = { sx, sy };
      this.canvas.style.cursor = 'grabbing';
    }
    this.draw();
  }

  up(e) {
    const g = this.gesture;
    this.gesture = null;
    if (!g) return;
    const { sx, sy } = this.local(e);
    if (g.kind === 'entity') {
      this.handlers.select(g.id);
      if (g.moved) {
        const w = this.toWorld(sx, sy);
        this.handlers.move(g.id, w.x, w.z);
      }
    } else if (!g.moved) {
      this.handlers.select(null);
    }
    this.draw();
  }

  wheel(e) {
    e.preventDefault();
    this.touched = true;
    const { sx, sy } = this.local(e);
    const before = this.toWorld(sx, sy);
    this.scale = Math.max(0.5, Math.min(400, this.scale * Math.exp(-e.deltaY * 0.0015)));
    const after = this.toWorld(sx, sy);
    this.center.x += before.x - after.x;
    this.center.z += before.z - after.z;
    this.draw();
  }

  set(items) {
    this.items = items;
    this.fit();
    this.draw();
  }

  setAreas(areas) {
    this.areas = areas;
    this.draw();
  }

  // Areas of interest: dashed rectangles of their x-z extent.
  drawAreas(ctx) {
    ctx.lineWidth = 1.5;
    ctx.setLineDash([6, 4]);
    ctx.font = '11px system-ui, sans-serif';
    for (const a of this.areas) {
      const p0 = this.toScreen(a.min[0], a.min[2]);
      const p1 = this.toScreen(a.max[0], a.max[2]);
      ctx.strokeStyle = a.color;
      ctx.strokeRect(p0.sx, p0.sy, p1.sx - p0.sx, p1.sy - p0.sy);
      ctx.fillStyle = a.color;
      ctx.fillText(a.label, Math.max(p0.sx, 0) + 4, Math.max(p0.sy, 0) + 13);
    }
    ctx.setLineDash([]);
  }

  grid(ctx, w, h) {
    // A grid line every 1, 5, 10, 50... metres, whichever is >= 40 px apart.
    const steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];
    const step = steps.find((s) => s * this.scale >= 40) || 1000;
    const tl = this.toWorld(0, 0);
    const br = this.toWorld(w, h);
    ctx.lineWidth = 1;
    ctx.font = '10px ui-monospace, monospace';
    ctx.fillStyle = '#5d6b82';
    for (let x = Math.ceil(tl.x / step) * step; x <= br.x; x += step) {
      const { sx } = this.toScreen(x, 0);
      ctx.strokeStyle = x === 0 ? '#3b4a66' : '#1f2938';
      ctx.beginPath(); ctx.moveTo(sx + 0.5, 0); ctx.lineTo(sx + 0.5, h); ctx.stroke();
      ctx.fillText(`${x}`, sx + 3, h - 4);
    }
    for (let z = Math.ceil(tl.z / step) * step; z <= br.z; z += step) {
      const { sy } = this.toScreen(0, z);
      ctx.strokeStyle = z === 0 ? '#3b4a66' : '#1f2938';
      ctx.beginPath(); ctx.moveTo(0, sy + 0.5); ctx.lineTo(w, sy + 0.5); ctx.stroke();
      ctx.fillText(`${z}`, 3, sy - 3);
    }
    ctx.fillText(`x →   z ↓   ${step} m grid`, w - 150, 14);
  }

  draw() {
    const { ctx } = this;
    const { w, h } = this.size();
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = '#111823';
    ctx.fillRect(0, 0, w, h);
    this.grid(ctx, w, h);
    this.drawAreas(ctx);
    const g = this.gesture;
    for (const it of this.items) {
      const p = this.toScreen(it.x, it.z);
      const target = g && g.kind === 'entity' && g.id === it.id && g.moved ? g.at : it.pending && this.toScreen(it.pending.x, it.pending.z);
      if (target) {
        ctx.setLineDash([4, 4]);
        ctx.strokeStyle = it.color;
        ctx.beginPath(); ctx.moveTo(p.sx, p.sy); ctx.lineTo(target.sx, target.sy); ctx.stroke();
        ctx.beginPath(); ctx.arc(target.sx, target.sy, DOT, 0, Math.PI * 2); ctx.stroke();
        ctx.setLineDash([]);
      }
      ctx.beginPath();
      ctx.arc(p.sx, p.sy, DOT, 0, Math.PI * 2);
      ctx.fillStyle = it.color;
      ctx.fill();
      ctx.lineWidth = it.selected ? 3 : 1.5;
      ctx.strokeStyle = it.selected ? '#ffffff' : 'rgba(0,0,0,0.6)';
      ctx.stroke();
      ctx.font = '12px system-ui, sans-serif';
      ctx.fillStyle = '#d9e1ee';
      ctx.fillText(it.label, p.sx + DOT + 4, p.sy + 4);
    }
  }
}
