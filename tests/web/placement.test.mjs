// Unit tests of the 3D view's placement (src/http/viewer/placement.js),
// run by `node --test tests/web/`: Tundra's rotation order, parent
// composition and the guards against hostile transforms.

import test from 'node:test';
import assert from 'node:assert/strict';
import { Vector3 } from '../../src/http/viewer/vendor/three.core.min.js';
import {
  MAX_PARENT_DEPTH, markerMatrix, matrixOf, meshMatrix, placement, shapeOf, usable,
} from '../../src/http/viewer/placement.js';

const DEG = Math.PI / 180;
const t = (pos, rot = [0, 0, 0], scale = [1, 1, 1]) => ({
  pos: { x: pos[0], y: pos[1], z: pos[2] },
  rot: { x: rot[0], y: rot[1], z: rot[2] },
  scale: { x: scale[0], y: scale[1], z: scale[2] },
});
const at = (m, p = [0, 0, 0]) => new Vector3(...p).applyMatrix4(m).toArray();
const near = (a, b, what) => a.forEach((v, i) => assert.ok(Math.abs(v - b[i]) < 1e-5, `${what}: ${a} vs ${b}`));

// Tundra's Transform::Orientation3x3, as src/tundra/orientation.rs writes
// it: R = Rz(z)·Ry(y)·Rx(x), rows.
function tundraRotation([xd, yd, zd]) {
  const [x, y, z] = [xd * DEG, yd * DEG, zd * DEG];
  const [sx, cx, sy, cy, sz, cz] = [Math.sin(x), Math.cos(x), Math.sin(y), Math.cos(y), Math.sin(z), Math.cos(z)];
  return [
    [cy * cz, cz * sx * sy - cx * sz, cx * cz * sy + sx * sz],
    [cy * sz, cx * cz + sx * sy * sz, -cz * sx + cx * sy * sz],
    [-sy, cy * sx, cx * cy],
  ];
}

test('rotation follows Tundra: Euler degrees composed as Rz·Ry·Rx', () => {
  for (const rot of [[30, 0, 0], [0, 45, 0], [0, 0, 60], [17, -112, 205], [-161.5, -18.1, 67.2]]) {
    const e = matrixOf(t([0, 0, 0], rot)).elements; // column-major
    const r = tundraRotation(rot);
    for (let row = 0; row < 3; row++) {
      for (let col = 0; col < 3; col++) {
        assert.ok(Math.abs(e[col * 4 + row] - r[row][col]) < 1e-6, `rot ${rot} [${row}][${col}]`);
      }
    }
  }
});

test('scale applies before rotation, position last', () => {
  const m = matrixOf(t([10, 2, -3], [0, 90, 0], [2, 1, 1]));
  // The local +x corner of a unit box: scaled to 2, turned to -z, moved.
  near(at(m, [0.5, 0, 0]), [10, 2, -4], 'corner');
});

test('a child is placed inside its parent, by id or by name', () => {
  const parent = { id: 7, label: 'base', transform: t([5, 0, 0], [0, 90, 0], [2, 2, 2]), parentRef: '' };
  const byId = new Map([[7, parent]]);
  const byName = new Map([['base', parent]]);
  for (const ref of ['7', 'base']) {
    const child = { id: 8, label: 'arm', transform: t([1, 0, 0]), parentRef: ref };
    near(at(placement(child, byId, byName)), [5, 0, -2], `parentRef ${ref}`);
  }
  const orphan = { id: 9, label: 'x', transform: t([1, 0, 0]), parentRef: '404' };
  near(at(placement(orphan, byId, byName)), [1, 0, 0], 'unknown parent');
  assert.equal(placement({ id: 10, transform: null, parentRef: '' }, byId, byName), null);
});

test('a parent cycle or an endless chain ends', () => {
  const a = { id: 1, label: 'a', transform: t([1, 0, 0]), parentRef: '2' };
  const b = { id: 2, label: 'b', transform: t([1, 0, 0]), parentRef: '1' };
  const byId = new Map([[1, a], [2, b]]);
  near(at(placement(a, byId, new Map())), [2, 0, 0], 'cycle: a in b once');

  const chain = [];
  for (let i = 0; i < MAX_PARENT_DEPTH * 3; i++) chain.push({ id: i, label: `${i}`, transform: t([1, 0, 0]), parentRef: `${i + 1}` });
  const all = new Map(chain.map((c) => [c.id, c]));
  near(at(placement(chain[0], all, new Map())), [MAX_PARENT_DEPTH + 1, 0, 0], 'chain cut');
});

test('a mesh sits at its own transform inside its placeable; a marker ignores scale', () => {
  const world = matrixOf(t([0, 0, 0], [0, 0, 0], [1, 1, 1]));
  const mesh = { ref: 'local://plane.mesh', transform: t([1, 0, -1.75], [0, 0, 0], [6.5, 1, 6.5]) };
  near(at(meshMatrix(world, mesh), [0.5, 0, 0.5]), [4.25, 0, 1.5], 'plane corner');
  near(at(world), [0, 0, 0], 'the placeable matrix is left alone');
  const big = matrixOf(t([3, 4, 5], [0, 0, 0], [100, 100, 100]));
  near(at(markerMatrix(big), [1, 0, 0]), [4, 4, 5], 'marker');
});

test('shapes come from the mesh name', () => {
  assert.equal(shapeOf(null), 'marker');
  assert.equal(shapeOf({ ref: 'local://plane.mesh' }), 'plane');
  assert.equal(shapeOf({ ref: 'Sphere.mesh' }), 'sphere');
  assert.equal(shapeOf({ ref: 'cylinder.mesh' }), 'cylinder');
  assert.equal(shapeOf({ ref: 'local://cube.mesh' }), 'box');
  assert.equal(shapeOf({ ref: '' }), 'box');
});

test('zero scale and non-finite numbers are not drawn', () => {
  assert.ok(usable(matrixOf(t([1, 2, 3], [10, 20, 30], [1, 2, 3]))));
  assert.ok(!usable(matrixOf(t([0, 0, 0], [0, 0, 0], [0, 1, 1]))));
  assert.ok(!usable(matrixOf(t([NaN, 0, 0]))));
  assert.ok(!usable(matrixOf(t([0, 0, 0], [Infinity, 0, 0]))));
});
