//! A star of three live nodes whose peer data goes through the impairment
//! proxy: `a` dials `b` and `c`; a client on `b` and one on `c` have each
//! created a box (`b0`, `c0`), and observers on `a` and `c` see both. The
//! starting point of the tests that attack or flood `a` from `b` while `c`
//! must be served on.

use std::time::Duration;

use lessgate::runtime::status::NodeStatus;
use lessgate::tundra::{ComponentId, EntityId};

use super::{
    wait_observers, wait_status, write_nodes, LinkModel, LiveNode, NodeFiles, Observer, Proxy,
};
use crate::common::tundra_values::named_box;
use crate::common::TundraClient;

/// Node indices in [`Star::nodes`].
pub const A: usize = 0;
pub const B: usize = 1;
pub const C: usize = 2;

pub struct Star {
    /// Holds the nodes' files; removed when the star is dropped.
    pub dir: tempfile::TempDir,
    pub proxy: Proxy,
    pub files: Vec<NodeFiles>,
    pub nodes: Vec<LiveNode>,
    pub watch_a: Observer,
    pub watch_c: Observer,
    pub writer_b: TundraClient,
    pub writer_c: TundraClient,
    /// `c0` as c's observer knows it: the entity and its Placeable.
    pub c0: (EntityId, ComponentId),
}

/// Whether a node's status lists a link with `peer`.
pub fn has_link(status: &NodeStatus, peer: &str) -> bool {
    status.links.iter().any(|l| l.peer == peer)
}

impl Star {
    /// Starts the star with a pass-through proxy seeded with `seed`; each
    /// wait fails after `limit`.
    pub async fn start(seed: u64, limit: Duration) -> Star {
        let dir = tempfile::tempdir().unwrap();
        let proxy = Proxy::start(3, LinkModel::PASS_THROUGH, seed).await;
        let files = write_nodes(
            dir.path(),
            &["a", "b", "c"],
            &[(A, B), (A, C)],
            Some(&proxy),
            "",
        );
        let mut nodes = Vec::new();
        for node in &files {
            nodes.push(LiveNode::start(node).await);
        }
        wait_status(&[&nodes[A]], limit, "a linked with b and c", |s| {
            has_link(s, "b") && has_link(s, "c")
        })
        .await;
        let watch_a = Observer::join(&nodes[A].url, "watch_a").await;
        let watch_c = Observer::join(&nodes[C].url, "watch_c").await;
        let (mut writer_b, _) = TundraClient::login(&nodes[B].url, "writer_b", 3).await;
        writer_b.create_entity(1, named_box("b0")).await;
        let (mut writer_c, _) = TundraClient::login(&nodes[C].url, "writer_c", 3).await;
        writer_c.create_entity(1, named_box("c0")).await;
        wait_observers(&[&watch_a, &watch_c], limit, "b0 and c0 seen", |seen| {
            seen.iter()
                .all(|o| o.view.find("b0").is_some() && o.view.find("c0").is_some())
        })
        .await;
        let c0 = {
            let view = watch_c.snapshot().view;
            let (id, seen) = view.find("c0").unwrap();
            (id, seen.placeable.unwrap())
        };
        Star {
            dir,
            proxy,
            files,
            nodes,
            watch_a,
            watch_c,
            writer_b,
            writer_c,
            c0,
        }
    }
}
