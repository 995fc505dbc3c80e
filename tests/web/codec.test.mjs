// The viewer's JS Tundra codec against the byte fixtures of the Rust codec
// (src/tundra/bits.rs, src/tundra/edit_attributes.rs) and the
// VLE table (docs/tundra-wire.md §1.2). Run: node --test tests/web/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BitReader, BitWriter, DecodeError, decodeEditBlock, decodeFrame, encodeEditBlock,
  encodeLogin, T,
} from '../../src/http/viewer/tundra.js';

const hex = (bytes) => Buffer.from(bytes).toString('hex');
const bytes = (h) => Uint8Array.from(Buffer.from(h, 'hex'));
const PLACEABLE = [T.TRANSFORM, T.BOOL, T.BOOL, T.INT, T.ENTITY_REF, T.STRING];
const RIGID_BODY = [11, 3, 6, 11, 11, 3, 3, 3, 3, 8, 8, 6, 6, 6, 6, 2, 2, 8, 8];

test('VLE8_16_32 matches the reference table', () => {
  const table = [[0, '00'], [127, '7f'], [128, '8001'], [255, 'ff01'], [300, 'ac02'],
    [16383, 'ff7f'], [16384, '80800100'], [65535, 'ffff0300'], [100000, 'a08d0600'],
    [0x3fffffff, 'ffffffff']];
  for (const [value, want] of table) {
    const w = new BitWriter();
    w.vle(value);
    assert.equal(hex(w.finish()), want, `encode ${value}`);
    assert.equal(new BitReader(bytes(want)).vle(), value, `decode ${want}`);
  }
  // Non-canonical forms decode too (WebTundra's old writer).
  assert.equal(new BitReader(bytes('81800000')).vle(), 1);
  // At a bit offset the bytes are shifted.
  const w = new BitWriter();
  w.bit(true);
  w.vle(300);
  assert.equal(hex(w.finish()), '590500');
});

test('edit blocks match the Rust encoder byte for byte', () => {
  assert.equal(hex(encodeEditBlock([{ index: 2, value: false }], PLACEABLE)), '0900');
  assert.equal(hex(encodeEditBlock([{ index: 2, value: true }], PLACEABLE)), '1900');
  const velocity = [{ index: 13, value: { x: 1, y: 0, z: 0 } }];
  assert.equal(hex(encodeEditBlock(velocity, RIGID_BODY)), '021a0000007f000000000000000000');
  assert.deepEqual(decodeEditBlock(bytes('021a0000007f000000000000000000'), RIGID_BODY), velocity);
  assert.deepEqual(decodeEditBlock(bytes('1900'), PLACEABLE), [{ index: 2, value: true }]);
});

test('a moved transform survives the bitmask round trip', () => {
  const value = { pos: { x: 1.5, y: 0, z: -2.25 }, rot: { x: 0, y: 90, z: 0 }, scale: { x: 1, y: 1, z: 1 } };
  const block = encodeEditBlock([{ index: 0, value }], PLACEABLE);
  // 1 method bit + 6 flags + 36 value bytes = 295 bits -> 37 bytes.
  assert.equal(block.length, 37);
  assert.equal(block[0] & 3, 3, 'bitmask method, attribute 0 changed');
  assert.deepEqual(decodeEditBlock(block, PLACEABLE), [{ index: 0, value }]);
});

test('login frame: id, U16 JSON, VLE protocol', () => {
  const frame = encodeLogin('{}', 3);
  assert.equal(hex(frame), '640002007b7d03');
});

test('short or oversized input is an error, never a hang', () => {
  assert.throws(() => decodeFrame(bytes('6e00').buffer, 3), DecodeError);
  // CreateEntity claiming 1000 components in 8 bytes.
  assert.throws(() => decodeFrame(bytes('6e0000010000000000e807').buffer, 3), DecodeError);
  assert.throws(() => new BitReader(bytes('80')).vle(), DecodeError);
  // An EditAttributes block longer than 16 KiB.
  assert.throws(() => decodeFrame(bytes('710000010180800100').buffer, 3), DecodeError);
  const reply = decodeFrame(bytes('65000101' + '02007b7d' + '03').buffer, 3);
  assert.deepEqual([reply.success, reply.userId, reply.data, reply.protocol], [true, 1, '{}', 3]);
});
