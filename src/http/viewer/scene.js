// The viewer's copy of the node's scene, kept by applying the Tundra scene
// messages the node sends (section 4): entities, their components and
// attribute values, decoded generically with the node's registry
// (/schema.json) plus types announced by RegisterComponentType.

import {
  MSG, T, decodeAttributeBlock, decodeEditBlock,
} from './tundra.js';

export const MESH = 17;
export const PLACEABLE = 20;
export const NAME = 26;
// Attribute indices of the built-in layouts (docs/tundra-wire.md §9).
const PLACEABLE_VISIBLE = 2;
const PLACEABLE_PARENT_REF = 4;
const MESH_TRANSFORM = 0;
const MESH_REF = 1;

export class Registry {
  constructor(doc) {
    this.types = new Map();
    for (const c of doc.components || []) {
      this.types.set(c.type_id, {
        name: c.name,
        dynamic: c.dynamic_attributes,
        attrs: c.attributes.map((a) => ({ type: a.type, id: a.id, name: a.name })),
      });
    }
  }
  // RegisterComponentType (section 4.17): a real type of that name wins.
  register(m) {
    const name = m.name.replace(/^EC_/, '');
    const existing = [...this.types.values()].find((t) => t.name.toLowerCase() === name.toLowerCase() && !t.custom);
    if (existing) return;
    this.types.set(m.typeId, { name, dynamic: false, custom: true, attrs: m.attributes });
  }
  get(typeId) { return this.types.get(typeId); }
}

export class Scene {
  constructor(registry) {
    this.registry = registry;
    this.entities = new Map();
    // Called with (entityId, componentTypeId) after an attribute change.
    this.onEdit = () => {};
  }

  makeComponent(c) {
    const type = this.registry.get(c.typeId);
    const attrs = type ? decodeAttributeBlock(c.data, type.attrs, type.dynamic) : [];
    return {
      id: c.id,
      typeId: c.typeId,
      typeName: type ? type.name : `type ${c.typeId}`,
      name: c.name,
      attrs: new Map(attrs.map((a) => [a.index, a])),
      known: !!type,
    };
  }

  // The slot types an EditAttributes block is decoded against.
  static slots(component) {
    const slots = [];
    for (const [index, a] of component.attrs) slots[index] = a.type;
    return slots;
  }

  apply(m) {
    switch (m.id) {
      case MSG.CREATE_ENTITY: {
        const entity = { id: m.entity, parent: m.parent, temporary: m.temporary, components: new Map() };
        for (const c of m.components) entity.components.set(c.id, this.makeComponent(c));
        this.entities.set(m.entity, entity);
        break;
      }
      case MSG.CREATE_COMPONENTS: {
        const e = this.entities.get(m.entity);
        if (e) for (const c of m.components) e.components.set(c.id, this.makeComponent(c));
        break;
      }
      case MSG.CREATE_ATTRIBUTES: {
        const e = this.entities.get(m.entity);
        for (const a of m.attributes) {
          const c = e && e.components.get(a.component);
          if (c) c.attrs.set(a.index, { index: a.index, type: a.type, name: a.name, dynamic: true, value: a.value });
        }
        break;
      }
      case MSG.EDIT_ATTRIBUTES: {
        const e = this.entities.get(m.entity);
        if (!e) break;
        for (const b of m.blocks) {
          const c = e.components.get(b.component);
          if (!c) continue; // unknown component: skip its block (section 4.9)
          for (const edit of decodeEditBlock(b.data, Scene.slots(c))) {
            const a = c.attrs.get(edit.index);
            if (a) a.value = edit.value;
          }
          this.onEdit(m.entity, c.typeId);
        }
        break;
      }
      case MSG.REMOVE_ATTRIBUTES: {
        const e = this.entities.get(m.entity);
        for (const a of m.attributes) e?.components.get(a.component)?.attrs.delete(a.index);
        break;
      }
      case MSG.REMOVE_COMPONENTS: {
        const e = this.entities.get(m.entity);
        for (const c of m.components) e?.components.delete(c);
        break;
      }
      case MSG.REMOVE_ENTITY:
        this.entities.delete(m.entity);
        break;
      case MSG.SET_ENTITY_PARENT: {
        const e = this.entities.get(m.entity);
        if (e) e.parent = m.parent;
        break;
      }
      case MSG.EDIT_ENTITY_PROPERTIES: {
        const e = this.entities.get(m.entity);
        if (e) e.temporary = m.temporary;
        break;
      }
      case MSG.REGISTER_COMPONENT_TYPE:
        this.registry.register(m);
        break;
      default:
        break;
    }
  }

  static component(entity, typeId) {
    for (const c of entity.components.values()) if (c.typeId === typeId) return c;
    return null;
  }

  // Placeable.transform, if the entity has one.
  static transform(entity) {
    const p = Scene.component(entity, PLACEABLE);
    const a = p && p.attrs.get(0);
    return a && a.type === T.TRANSFORM ? a.value : null;
  }

  // What the 3D view draws for a Mesh: its asset reference and the
  // transform of the mesh inside its Placeable, or null without a Mesh.
  static mesh(entity) {
    const m = Scene.component(entity, MESH);
    if (!m) return null;
    const t = m.attrs.get(MESH_TRANSFORM);
    const ref = m.attrs.get(MESH_REF);
    return {
      ref: ref && typeof ref.value === 'string' ? ref.value : '',
      transform: t && t.type === T.TRANSFORM ? t.value : null,
    };
  }

  // Placeable.parentRef: the entity (id or name) this one is placed in.
  static parentRef(entity) {
    const a = Scene.component(entity, PLACEABLE)?.attrs.get(PLACEABLE_PARENT_REF);
    return a && typeof a.value === 'string' ? a.value : '';
  }

  static visible(entity) {
    const a = Scene.component(entity, PLACEABLE)?.attrs.get(PLACEABLE_VISIBLE);
    return !(a && a.value === false);
  }

  static label(entity) {
    const n = Scene.component(entity, NAME);
    const a = n && n.attrs.get(0);
    return a && typeof a.value === 'string' && a.value ? a.value : `#${entity.id}`;
  }
}
