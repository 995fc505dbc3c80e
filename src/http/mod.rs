//! The node's operator endpoint over HTTP: a web viewer that is itself a
//! Tundra WebSocket client of the node, `/status` (JSON), `/metrics`
//! (Prometheus text), `/schema.json` (the component registry) and
//! `/origins` (entity -> origin and authority node), and the admin
//! endpoint for operator commands (off unless `[http] admin_token` is set).
//!
//! Started by the runtime when `[http] listen` is set. Reads only the
//! snapshots the runtime publishes, and sends admin commands over a channel;
//! must never reach into the node loop.

pub mod admin;
pub mod assets;
pub mod deadline_io;
pub mod metrics;
pub mod origins;
pub mod schema;
pub mod server;

pub use server::{bind, router, serve, HttpSources, ViewSnapshot};
