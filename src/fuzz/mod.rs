//! The fuzz harnesses: one entry point per cargo-fuzz target of
//! `tests/fuzz/fuzz_targets/` (each a one-line call into this module), kept
//! in the library so the saved corpora replay through the same code in the
//! normal suite on stable Rust (`tests/*_fuzz_corpus.rs`). A harness builds
//! whatever its target needs (a whole node from the demo's worlds, the
//! federation's schemas), so this module sits above every other one, like
//! the drivers, and nothing in the library uses it.
//!
//! Each function must return for any input; a panic is a bug. Besides "no
//! panic, no hang" each checks its codec's own promises (what decodes
//! re-encodes and decodes back equal, limits hold).
//!
//! | module | targets |
//! |---|---|
//! | `tundra_frame` | `tundra_frame` |
//! | `tundra_server` | `tundra_server_frames` |
//! | `txml` | `txml` |
//! | `asset_storage` | `asset_storage` |
//! | `knet` | `knet_datagram`, `knet_stream`, `knet_reassembly` |
//! | `less` | `less_packet`, `less_session` |
//! | `less_encodings` | `less_encodings`, `less_keyed_update` |
//! | `less_bulk` | `less_bulk` |
//! | `config` | `config` |

pub mod asset_storage;
pub mod config;
pub mod knet;
pub mod less;
pub mod less_bulk;
pub mod less_encodings;
pub mod tundra_frame;
pub mod tundra_server;
pub mod txml;
