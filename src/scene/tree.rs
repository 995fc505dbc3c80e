//! Entity trees: an entity, its ancestors up to the root, and every
//! descendant of that root. Interest decides per tree (a child travels and
//! shows with its parent, and a parent with its child), so both the
//! federation's links and the server's clients walk them here.

use super::Scene;
use crate::tundra::EntityId;

/// Members of one tree that are looked at: a larger tree is treated as if
/// it were in every area (a bound, not a case met in scenes).
pub const MAX_TREE: usize = 4096;
/// Parent chains longer than this are not followed.
const MAX_DEPTH: usize = 64;

/// The root of `id`'s tree (a bounded walk up its parents that are in the
/// scene).
pub fn root_of(scene: &Scene, id: EntityId) -> EntityId {
    let mut root = id;
    for _ in 0..MAX_DEPTH {
        match scene.entity(root).and_then(|e| e.parent) {
            Some(parent) if parent != id && scene.entity(parent).is_some() => root = parent,
            _ => break,
        }
    }
    root
}

/// The members of the tree rooted at `root`, parents before children;
/// `None` when it has more than [`MAX_TREE`].
pub fn tree_members(scene: &Scene, root: EntityId) -> Option<Vec<EntityId>> {
    let mut members = vec![root];
    let mut next = 0;
    while next < members.len() {
        let children = scene.children(members[next]);
        if members.len() + children.len() > MAX_TREE {
            return None;
        }
        for child in children {
            if !members.contains(child) {
                members.push(*child);
            }
        }
        next += 1;
    }
    Some(members)
}
