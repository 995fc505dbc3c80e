//! The export-policy room: what may go to which node (docs/federation.md
//! §4.1): the peer files' filters on each link (`filter`), the origin's
//! policy that travels with its entities so that relays honour it
//! (`origin_policy`), and both applied to the links (`enforce`).

mod enforce;
pub mod filter;
pub mod origin_policy;
