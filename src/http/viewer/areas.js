// The areas of interest the viewer draws (docs/federation.md §8): this
// node's own (what it subscribes from its peers) and, per link, what the
// link carries to its peer (the areas of the nodes behind it), from
// `/status`, in this world's coordinates (the status gives them in the
// federation's, and this node's placement). Pure, so it is tested under
// node (tests/web/areas.test.mjs).

// Unbounded sides are drawn this far out (metres); a region unbounded on
// every side (mode `all`: everything) is not drawn at all.
export const FAR = 100000;

const finite = (v) => Math.max(-FAR, Math.min(FAR, v));

function local(bounds, placement) {
  // JSON has no infinity: `/status` writes an unbounded side as null.
  const [x0, y0, z0, x1, y1, z1] = bounds.map((v, i) => (v === null ? (i < 3 ? -Infinity : Infinity) : v));
  const min = [x0 - placement[0], y0 - placement[1], z0 - placement[2]];
  const max = [x1 - placement[0], y1 - placement[1], z1 - placement[2]];
  if ([...min, ...max].some(Number.isNaN)) return null;
  if ([...min, ...max].every((v) => !Number.isFinite(v))) return null;
  return { min: min.map(finite), max: max.map(finite) };
}

// [{ kind: 'own' | 'link', peer, peerUuid, min: [x, y, z], max: [x, y, z] }]
export function interestAreas(status) {
  const interest = status?.interest;
  if (!interest) return [];
  const placement = interest.placement || [0, 0, 0];
  const out = [];
  for (const bounds of interest.regions || []) {
    const box = local(bounds, placement);
    if (box) out.push({ kind: 'own', peer: null, peerUuid: null, ...box });
  }
  for (const link of status.links || []) {
    const carried = link.interest;
    if (!carried || carried.everywhere) continue;
    for (const bounds of carried.regions || []) {
      const box = local(bounds, placement);
      if (box) out.push({ kind: 'link', peer: link.peer, peerUuid: link.peer_uuid, ...box });
    }
  }
  return out;
}
