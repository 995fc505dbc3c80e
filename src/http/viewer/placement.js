// Where the 3D view puts an entity, from its Tundra attributes alone (no
// drawing, so it is tested under node: tests/web/placement.test.mjs). A
// Transform is position, Euler rotation in degrees and scale
// (docs/tundra-wire.md §5.2), composed as Tundra does: R = Rz·Ry·Rx (as in
// src/tundra/orientation.rs), which is three.js's 'ZYX' Euler order.

import { Euler, Matrix4, Quaternion, Vector3 } from './vendor/three.core.min.js';

// Placeable.parentRef chains deeper than this (or cyclic) are cut.
export const MAX_PARENT_DEPTH = 16;
const DEG = Math.PI / 180;

// The simple shape a Mesh is drawn as, from its asset name; 'marker' for an
// entity without a Mesh.
export function shapeOf(mesh) {
  if (!mesh) return 'marker';
  const name = mesh.ref.toLowerCase();
  if (name.includes('plane') || name.includes('ground') || name.includes('floor')) return 'plane';
  if (name.includes('sphere') || name.includes('ball')) return 'sphere';
  if (name.includes('cylinder')) return 'cylinder';
  return 'box';
}

// A Tundra transform as a matrix.
export function matrixOf(t) {
  const q = new Quaternion().setFromEuler(new Euler(t.rot.x * DEG, t.rot.y * DEG, t.rot.z * DEG, 'ZYX'));
  return new Matrix4().compose(new Vector3(t.pos.x, t.pos.y, t.pos.z), q, new Vector3(t.scale.x, t.scale.y, t.scale.z));
}

// The entity's Placeable transform composed with its parents' (by
// Placeable.parentRef, an entity id or name); null when it has none.
// item: {id, transform, parentRef}; byId / byName: the items by id and label.
export function placement(item, byId, byName) {
  if (!item.transform) return null;
  const m = matrixOf(item.transform);
  let at = item;
  const visited = new Set([item.id]);
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

// A Mesh sits at its own transform inside its Placeable.
export function meshMatrix(world, mesh) {
  const m = world.clone();
  return mesh && mesh.transform ? m.multiply(matrixOf(mesh.transform)) : m;
}

// A marker keeps its size whatever the scale: position and rotation only.
export function markerMatrix(world) {
  const p = new Vector3();
  const q = new Quaternion();
  world.decompose(p, q, new Vector3());
  return new Matrix4().compose(p, q, new Vector3(1, 1, 1));
}

// A matrix is only usable when every number is finite and no scale is 0.
export function usable(m) {
  return m.elements.every(Number.isFinite) && Math.abs(m.determinant()) > 1e-12;
}
