//! cairn: a validating Electrum and compact-filter server built on Bitcoin Core's kernel.
//!
//! Data flows one way, and each module imports only those above it in this list:
//!
//! - [`types`]: the domain's plain types (script hashes, transaction numbers, networks);
//! - [`config`]: settings from the file, the environment and the flags;
//! - [`metrics`]: what cairn counts for Prometheus, recorded by the modules below it;
//! - [`datadir`]: a network's data folder: its identity file, lock and cookie;
//! - [`kernel`]: the embedded validator, and where blocks sit in its block files;
//! - [`import`] and [`generate`]: blocks from a Core `blocks/` folder or a hex file into the
//!   kernel; consensus-valid test chains;
//! - [`store`]: the RocksDB store, its typed rows and schema versions;
//! - [`index`]: every block the kernel connects becomes rows in the store, in one batch with
//!   the index tip; queries read them;
//! - [`mempool`]: unconfirmed transactions checked against the index;
//! - [`view`]: the read model every server answers from: index, mempool and kernel reads joined
//!   once per question, with the caches, and what each answer cost;
//! - [`notify`]: new tips and accepted transactions, published to whoever listens;
//! - [`work`]: what clients' requests cost, charged to their host and group, and the pool
//!   their query work runs in;
//! - [`listen`]: accepting clients, the places each host and group holds, shared by the
//!   servers' listeners;
//! - [`tls`]: the TLS certificate the Electrum listeners present, self-signed when not given;
//! - the servers: [`electrum`], [`p2p`], [`http`] and [`admin`], the operator's RPC;
//! - [`node`]: one opened node, and the indexer thread that keeps index and mempool in step
//!   with the kernel.
//!
//! The `cairn` binary (`src/main.rs`) is the command line over them.

#![warn(missing_docs)]

pub mod admin;
pub mod config;
pub mod datadir;
pub mod electrum;
pub mod generate;
pub mod http;
pub mod import;
pub mod index;
pub mod kernel;
pub mod listen;
pub mod mempool;
pub mod metrics;
pub mod node;
pub mod notify;
pub mod p2p;
pub mod policy;
pub mod store;
pub mod tls;
pub mod types;
pub mod view;
pub mod work;
