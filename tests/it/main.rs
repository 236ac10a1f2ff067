//! cairn's integration tests: one binary, a module per surface, so the suite links RocksDB and
//! Bitcoin Core's kernel once. Helpers live in `tests/common/` only; data in `tests/data/`.
//! Run one surface with `cargo test --profile ci --test it -- electrum::` (a module's path is
//! its name's prefix).

#[path = "../common/mod.rs"]
mod common;

// Against a real bitcoind or a real client, over loopback.
mod bdk;
mod bitcoind;
mod differential;
mod electrum;
mod electrum_wallet;
mod esplora;
mod explorer;
mod filters;
mod haproxy;
mod metrics;
mod outpoints;
mod p2p;
mod silent_payments;
mod status_page;
mod tls;
mod validate;

// Attackers: one host, a subnet or Tor's loopback against an honest client.
mod attacks;
mod flood;
mod p2p_attacks;

// The index, the store and the binary: crashes, a full disk, a reindex, the CLI.
mod cli;
mod crash;
mod diskfull;
mod generate;
mod index;
mod initial_download;
mod reindex;
mod service;
mod snapshot;

// Properties and bounds without a node.
mod allocations;
mod schema_properties;
mod v2_properties;
