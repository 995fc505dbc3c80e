// The Tundra wire codec for the viewer, mirroring src/tundra/ (see
// docs/tundra-wire.md). kNet bit streams are LSB-first within each byte;
// multi-byte integers and floats are their little-endian bytes appended at
// any bit offset; VLE8_16_32 is 1, 2 or 4 bytes (docs/tundra-wire.md §1.2). Decoders
// throw DecodeError on short or over-limit input and never loop unbounded.

export class DecodeError extends Error {}

// Limits mirrored from the Rust codec: attribute blocks are 16 KiB in
// Tundra's sync manager (section 4.9), S8 strings carry a u8 length.
export const MAX_BLOCK_BYTES = 16 * 1024;
const VLE_MAX = 0x3fffffff;

export const MSG = {
  LOGIN: 100, LOGIN_REPLY: 101, CLIENT_JOINED: 102, CLIENT_LEFT: 103,
  EDIT_ENTITY_PROPERTIES: 109, CREATE_ENTITY: 110, CREATE_COMPONENTS: 111,
  CREATE_ATTRIBUTES: 112, EDIT_ATTRIBUTES: 113, REMOVE_ATTRIBUTES: 114,
  REMOVE_COMPONENTS: 115, REMOVE_ENTITY: 116, CREATE_ENTITY_REPLY: 117,
  CREATE_COMPONENTS_REPLY: 118, RIGID_BODY_UPDATE: 119, ENTITY_ACTION: 120,
  REGISTER_COMPONENT_TYPE: 123, SET_ENTITY_PARENT: 124,
};

// Attribute type ids (section 5.2).
export const T = {
  STRING: 1, INT: 2, REAL: 3, COLOR: 4, FLOAT2: 5, FLOAT3: 6, FLOAT4: 7,
  BOOL: 8, UINT: 9, QUAT: 10, ASSET_REF: 11, ASSET_REF_LIST: 12,
  ENTITY_REF: 13, VARIANT: 14, VARIANT_LIST: 15, TRANSFORM: 16, POINT: 17,
};

const utf8 = new TextDecoder('utf-8', { fatal: false });
const utf8Out = new TextEncoder();
const scratch = new DataView(new ArrayBuffer(4));

export class BitReader {
  constructor(bytes) {
    this.bytes = bytes;
    this.pos = 0; // in bits
  }
  bitsLeft() { return this.bytes.length * 8 - this.pos; }
  // Tundra's BytesLeft: a partly read byte still counts.
  bytesLeft() { return this.bytes.length - (this.pos >> 3); }
  need(n, what) {
    if (this.bitsLeft() < n) throw new DecodeError(`truncated ${what}`);
  }
  bits(n, what = 'bits') {
    this.need(n, what);
    let value = 0;
    for (let i = 0; i < n; i++) {
      const byte = this.bytes[this.pos >> 3];
      value += ((byte >> (this.pos & 7)) & 1) * 2 ** i;
      this.pos++;
    }
    return value;
  }
  bit(what) { return this.bits(1, what) === 1; }
  u8(what = 'u8') { return this.bits(8, what); }
  u16(what = 'u16') { return this.u8(what) | (this.u8(what) << 8); }
  u32(what = 'u32') {
    this.need(32, what);
    return (this.u16(what) + this.u16(what) * 0x10000) >>> 0;
  }
  s32(what) { return this.u32(what) | 0; }
  f32(what = 'f32') {
    scratch.setUint32(0, this.u32(what), true);
    return scratch.getFloat32(0, true);
  }
  vle(what = 'vle') {
    const b0 = this.u8(what);
    if ((b0 & 0x80) === 0) return b0;
    const b1 = this.u8(what);
    if ((b1 & 0x80) === 0) return (b0 & 0x7f) | (b1 << 7);
    const hi = this.u16(what);
    return ((b0 & 0x7f) | ((b1 & 0x7f) << 7)) + hi * 0x4000;
  }
  raw(n, what = 'bytes') {
    this.need(n * 8, what);
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.u8(what);
    return out;
  }
  // S8: u8 length + bytes, read as Latin-1 (section 1.3).
  s8(what = 's8') {
    const len = this.u8(what);
    return String.fromCharCode(...this.raw(len, what));
  }
  // U16: u16 byte length + UTF-8.
  u16str(what = 'string') {
    const len = this.u16(what);
    return utf8.decode(this.raw(len, what));
  }
}

export class BitWriter {
  constructor() { this.buf = []; this.offset = 0; }
  bits(value, n) {
    for (let i = 0; i < n; i++) {
      if (this.offset === 0) this.buf.push(0);
      if (Math.floor(value / 2 ** i) % 2) this.buf[this.buf.length - 1] |= 1 << this.offset;
      this.offset = (this.offset + 1) & 7;
    }
  }
  bit(b) { this.bits(b ? 1 : 0, 1); }
  u8(v) { this.bits(v & 0xff, 8); }
  u16(v) { this.u8(v); this.u8(v >> 8); }
  u32(v) { v >>>= 0; this.u16(v & 0xffff); this.u16(v >>> 16); }
  f32(v) { scratch.setFloat32(0, v, true); this.u32(scratch.getUint32(0, true)); }
  vle(v) {
    if (v < 0 || v > VLE_MAX) throw new RangeError(`VLE out of range: ${v}`);
    if (v < 0x80) this.u8(v);
    else if (v < 0x4000) this.u16((v & 0x7f) | 0x80 | ((v & 0x3f80) << 1));
    else { this.u8((v & 0x7f) | 0x80); this.u8(((v >> 7) & 0x7f) | 0x80); this.u16(Math.floor(v / 0x4000)); }
  }
  bytes(data) { for (const b of data) this.u8(b); }
  s8(text) {
    const bytes = Array.from(text, (c) => c.charCodeAt(0) & 0xff).slice(0, 255);
    this.u8(bytes.length); this.bytes(bytes);
  }
  u16str(text) {
    const bytes = utf8Out.encode(text).slice(0, 0xffff);
    this.u16(bytes.length); this.bytes(bytes);
  }
  finish() { return Uint8Array.from(this.buf); }
}

const vec = (r, keys) => Object.fromEntries(keys.map((k) => [k, r.f32(k)]));

// One attribute value of type `ty` (section 5.2).
export function readValue(ty, r) {
  switch (ty) {
    case T.STRING: return r.u16str();
    case T.INT: return r.s32('int');
    case T.REAL: return r.f32('real');
    case T.COLOR: return vec(r, ['r', 'g', 'b', 'a']);
    case T.FLOAT2: return vec(r, ['x', 'y']);
    case T.FLOAT3: return vec(r, ['x', 'y', 'z']);
    case T.FLOAT4: case T.QUAT: return vec(r, ['x', 'y', 'z', 'w']);
    case T.BOOL: return r.u8('bool') !== 0;
    case T.UINT: return r.u32('uint');
    case T.ASSET_REF: case T.ENTITY_REF: case T.VARIANT: return r.s8();
    case T.ASSET_REF_LIST: case T.VARIANT_LIST: {
      const n = r.u8('list count');
      const items = [];
      for (let i = 0; i < n; i++) items.push(r.s8());
      return items;
    }
    case T.TRANSFORM: return {
      pos: vec(r, ['x', 'y', 'z']), rot: vec(r, ['x', 'y', 'z']), scale: vec(r, ['x', 'y', 'z']),
    };
    case T.POINT: return { x: r.s32('x'), y: r.s32('y') };
    default: throw new DecodeError(`unknown attribute type ${ty}`);
  }
}

export function writeValue(ty, v, w) {
  const f = (o, keys) => keys.forEach((k) => w.f32(o[k]));
  switch (ty) {
    case T.STRING: return w.u16str(v);
    case T.INT: return w.u32(v | 0);
    case T.REAL: return w.f32(v);
    case T.COLOR: return f(v, ['r', 'g', 'b', 'a']);
    case T.FLOAT2: return f(v, ['x', 'y']);
    case T.FLOAT3: return f(v, ['x', 'y', 'z']);
    case T.FLOAT4: case T.QUAT: return f(v, ['x', 'y', 'z', 'w']);
    case T.BOOL: return w.u8(v ? 1 : 0);
    case T.UINT: return w.u32(v);
    case T.ASSET_REF: case T.ENTITY_REF: case T.VARIANT: return w.s8(v);
    case T.ASSET_REF_LIST: case T.VARIANT_LIST:
      w.u8(Math.min(v.length, 255));
      return v.slice(0, 255).forEach((s) => w.s8(s));
    case T.TRANSFORM:
      return ['pos', 'rot', 'scale'].forEach((k) => f(v[k], ['x', 'y', 'z']));
    case T.POINT: w.u32(v.x | 0); return w.u32(v.y | 0);
    default: throw new RangeError(`unknown attribute type ${ty}`);
  }
}

// A length-prefixed sub-block, read whole so it can be decoded on its own.
function block(r, what) {
  const len = r.vle(what);
  if (len > MAX_BLOCK_BYTES) throw new DecodeError(`${what} of ${len} bytes`);
  return r.raw(len, what);
}

// ComponentFullUpdate (section 5.1): the attribute bytes stay raw until the
// scene decodes them against the type's layout.
function readComponent(r) {
  return { id: r.vle('component id'), typeId: r.vle('type id'), name: r.s8('component name'), data: block(r, 'attribute block') };
}

// The static and dynamic attributes of a component's full-update block.
// `attrs`: the type's static attributes [{type, id, name}] or null when the
// type is unknown (then nothing is decoded). Reads a prefix if the block is
// short (version tolerance, section 5.1).
export function decodeAttributeBlock(data, attrs, dynamic) {
  const r = new BitReader(data);
  const out = [];
  if (!attrs) return out;
  for (let i = 0; i < attrs.length && r.bitsLeft() >= 8; i++) {
    out.push({ index: i, type: attrs[i].type, name: attrs[i].id, value: readValue(attrs[i].type, r) });
  }
  if (dynamic) {
    while (r.bitsLeft() > 16) {
      const index = r.u8('index');
      const type = r.u8('type');
      const name = r.s8('name');
      out.push({ index, type, name, dynamic: true, value: readValue(type, r) });
    }
  }
  return out;
}

// An EditAttributes block (section 4.9) against the component's slot types
// (array indexed by attribute index; undefined = empty slot).
export function decodeEditBlock(data, slots) {
  const r = new BitReader(data);
  const edits = [];
  if (!r.bit('method')) {
    const count = r.u8('count');
    for (let i = 0; i < count; i++) {
      const index = r.u8('index');
      const ty = slots[index];
      if (ty === undefined) break; // Tundra skips the rest of the block
      edits.push({ index, value: readValue(ty, r) });
    }
  } else {
    for (let i = 0; i < slots.length && i < 256; i++) {
      if (r.bitsLeft() === 0) break;
      if (!r.bit('changed')) continue;
      if (slots[i] === undefined) break;
      edits.push({ index: i, value: readValue(slots[i], r) });
    }
  }
  return edits;
}

// Encodes one block as Tundra's writer would: indices when
// `changed*8 + 8 <= slots`, else the bitmask.
export function encodeEditBlock(edits, slots) {
  const w = new BitWriter();
  if (edits.length * 8 + 8 <= slots.length) {
    w.bit(false);
    w.u8(edits.length);
    for (const e of edits) { w.u8(e.index); writeValue(slots[e.index], e.value, w); }
  } else {
    w.bit(true);
    const byIndex = new Map(edits.map((e) => [e.index, e]));
    // A changed flag for every slot, each followed by its value.
    for (let i = 0; i < slots.length; i++) {
      const e = byIndex.get(i);
      w.bit(!!e);
      if (e) writeValue(slots[i], e.value, w);
    }
  }
  return w.finish();
}

function whileBits(r, min, read) {
  const out = [];
  while (r.bitsLeft() >= min) out.push(read());
  return out;
}

// Decodes one WebSocket frame: u16 LE id + payload (section 2.1).
export function decodeFrame(buffer, protocol) {
  const bytes = new Uint8Array(buffer);
  if (bytes.length < 2) throw new DecodeError('frame without id');
  const id = bytes[0] | (bytes[1] << 8);
  const r = new BitReader(bytes.subarray(2));
  switch (id) {
    case MSG.LOGIN_REPLY: {
      const m = { id, success: r.u8() !== 0, userId: r.vle(), data: r.u16str() };
      m.protocol = r.bytesLeft() > 0 ? r.vle() : 1;
      return m;
    }
    case MSG.CLIENT_JOINED: case MSG.CLIENT_LEFT:
      return { id, userId: r.vle() };
    case MSG.CREATE_ENTITY: {
      const m = { id, scene: r.vle(), entity: r.vle('entity id'), temporary: r.u8() !== 0 };
      // u32 parent only for protocol >= 3 (section 4.6).
      m.parent = protocol >= 3 ? r.u32('parent') : 0;
      const n = r.vle('component count');
      // Each component takes at least 4 bytes: bounds the loop by the input.
      if (n > r.bytesLeft() / 4) throw new DecodeError(`component count ${n}`);
      m.components = [];
      for (let i = 0; i < n; i++) m.components.push(readComponent(r));
      return m;
    }
    case MSG.CREATE_COMPONENTS: {
      const m = { id, scene: r.vle(), entity: r.vle() };
      m.components = whileBits(r, 17, () => readComponent(r));
      return m;
    }
    case MSG.CREATE_ATTRIBUTES: {
      const m = { id, scene: r.vle(), entity: r.vle() };
      m.attributes = whileBits(r, 24, () => {
        const a = { component: r.vle(), index: r.u8(), type: r.u8(), name: r.s8() };
        a.value = readValue(a.type, r);
        return a;
      });
      return m;
    }
    case MSG.EDIT_ATTRIBUTES: {
      const m = { id, scene: r.vle(), entity: r.vle() };
      m.blocks = whileBits(r, 8, () => ({ component: r.vle(), data: block(r, 'edit block') }));
      return m;
    }
    case MSG.REMOVE_ATTRIBUTES: {
      const m = { id, scene: r.vle(), entity: r.vle() };
      m.attributes = whileBits(r, 8, () => ({ component: r.vle(), index: r.u8() }));
      return m;
    }
    case MSG.REMOVE_COMPONENTS: {
      const m = { id, scene: r.vle(), entity: r.vle() };
      m.components = whileBits(r, 8, () => r.vle());
      return m;
    }
    case MSG.REMOVE_ENTITY:
      return { id, scene: r.vle(), entity: r.vle() };
    case MSG.SET_ENTITY_PARENT:
      return { id, scene: r.vle(), entity: r.u32(), parent: r.u32() };
    case MSG.EDIT_ENTITY_PROPERTIES:
      return { id, scene: r.vle(), entity: r.vle(), temporary: r.u8() !== 0 };
    case MSG.ENTITY_ACTION: {
      const m = { id, entity: r.u32(), name: r.s8(), execType: r.u8() };
      const n = r.u8('param count');
      m.params = [];
      for (let i = 0; i < n; i++) m.params.push(String.fromCharCode(...block(r, 'param')));
      return m;
    }
    case MSG.REGISTER_COMPONENT_TYPE: {
      const m = { id, typeId: r.vle(), name: r.s8() };
      const n = r.vle('attribute count');
      if (n > r.bytesLeft() / 3) throw new DecodeError(`attribute count ${n}`);
      m.attributes = [];
      for (let i = 0; i < n; i++) m.attributes.push({ type: r.u8(), id: r.s8(), name: r.s8() });
      return m;
    }
    default:
      return { id, unknown: true };
  }
}

function frame(id, w) {
  const payload = w.finish();
  const out = new Uint8Array(payload.length + 2);
  out[0] = id & 0xff; out[1] = id >> 8;
  out.set(payload, 2);
  return out;
}

// Login (section 4.1, WebSocket form): U16 JSON + VLE protocol version.
export function encodeLogin(json, protocol) {
  const w = new BitWriter();
  w.u16str(json);
  w.vle(protocol);
  return frame(MSG.LOGIN, w);
}

// EditAttributes (section 4.9) of one component.
export function encodeEditAttributes(entity, component, blockBytes) {
  const w = new BitWriter();
  w.vle(0);
  w.vle(entity & VLE_MAX);
  w.vle(component & VLE_MAX);
  w.vle(blockBytes.length);
  w.bytes(blockBytes);
  return frame(MSG.EDIT_ATTRIBUTES, w);
}
