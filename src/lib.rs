//! cairn: a validating Electrum and compact-filter server built on Bitcoin Core's kernel.
//!
//! Data flows one way: blocks (files, generator, later P2P) go to the [`kernel`] validator,
//! which connects them; later the indexer and the servers read what it connected.

#![warn(missing_docs)]

pub mod admin;
pub mod config;
pub mod datadir;
pub mod electrum;
pub mod generate;
pub mod http;
pub mod import;
pub mod kernel;
pub mod mempool;
pub mod index;
pub mod node;
pub mod p2p;
pub mod store;
