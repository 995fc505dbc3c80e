// Unit tests of the viewer's areas of interest (src/http/viewer/areas.js),
// run by `node --test tests/web/`.

import test from 'node:test';
import assert from 'node:assert/strict';
import { FAR, interestAreas } from '../../src/http/viewer/areas.js';

const INF = Infinity;

test('own and carried regions are drawn in this world\'s coordinates', () => {
  const status = {
    interest: { placement: [1000, 0, 0], regions: [[700, -300, -300, 1300, 300, 300]] },
    links: [
      { peer: 'beta', peer_uuid: 'b', interest: { everywhere: false, regions: [[1700, -10, -10, 2300, 10, 10]] } },
      { peer: 'gamma', peer_uuid: 'g', interest: { everywhere: true, regions: [] } },
    ],
  };
  const areas = interestAreas(status);
  assert.equal(areas.length, 2);
  assert.deepEqual(areas[0], { kind: 'own', peer: null, peerUuid: null, min: [-300, -300, -300], max: [300, 300, 300] });
  assert.deepEqual(areas[1].min, [700, -10, -10]);
  assert.equal(areas[1].peer, 'beta');
});

test('everything is not drawn, and half-spaces are drawn far out', () => {
  const status = {
    interest: { placement: [0, 0, 0], regions: [[-INF, -INF, -INF, INF, INF, INF], [100, -INF, -INF, INF, INF, INF]] },
    links: [],
  };
  const areas = interestAreas(status);
  assert.equal(areas.length, 1);
  assert.deepEqual(areas[0].min, [100, -FAR, -FAR]);
  assert.deepEqual(areas[0].max, [FAR, FAR, FAR]);
});

test('unbounded sides come as null (JSON has no infinity)', () => {
  const status = { interest: { regions: [[null, null, null, null, null, null], [null, 0, 0, 1, 1, 1]] }, links: [] };
  const areas = interestAreas(status);
  assert.equal(areas.length, 1, 'everything is not drawn');
  assert.deepEqual(areas[0].min, [-FAR, 0, 0]);
});

test('a status without interest draws nothing', () => {
  assert.deepEqual(interestAreas(null), []);
  assert.deepEqual(interestAreas({ links: [] }), []);
});
