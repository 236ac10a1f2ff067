//! The Electrum server's settings.

use super::hosts::HostLimits;
use crate::types::Network;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// What the servers report as their software: Electrum's `server.version`, the default banner.
pub const SERVER_SOFTWARE: &str = concat!("cairn ", env!("CARGO_PKG_VERSION"));

/// Limits and identity of the Electrum server; every one is configurable.
#[derive(Debug, Clone)]
pub struct ElectrumConfig {
    /// Where to listen for TCP clients.
    pub addr: SocketAddr,
    /// Where to listen for WebSocket clients (`None`: no WebSocket listener).
    pub ws_addr: Option<SocketAddr>,
    /// Where to listen for clients over TLS (`None`: no TLS listener).
    pub tls_addr: Option<SocketAddr>,
    /// Where to listen for WebSocket clients over TLS (`None`: none).
    pub wss_addr: Option<SocketAddr>,
    /// The TLS certificate chain and key, PEM (`None`: a self-signed pair in the data dir).
    pub tls_files: Option<(PathBuf, PathBuf)>,
    /// Longest request line in bytes; longer lines get an error and a disconnect.
    pub max_line_bytes: usize,
    /// Most requests in one batch.
    pub max_batch: usize,
    /// Most script-hash subscriptions on one connection.
    pub max_subscriptions: usize,
    /// Most subscriptions of all the connections of one host together.
    pub max_subscriptions_per_ip: usize,
    /// Most subscriptions of all the connections together.
    pub max_subscriptions_total: usize,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// Most connections at once.
    pub max_connections: usize,
    /// Most connections one host or subnet may hold, and the hosts spared.
    pub hosts: HostLimits,
    /// A write that makes no progress for this long ends the session (aiorpcX's
    /// `max_send_delay`, 20 s).
    pub write_timeout: Duration,
    /// Bytes of answers and notifications queued for all clients together, not yet written;
    /// one client may hold a quarter of it at most.
    pub answer_budget_bytes: usize,
    /// Most entries of a history (a longer one is an explicit error); histories are streamed,
    /// so this bounds time, not memory.
    pub max_history: usize,
    /// Histories longer than this are streamed to TCP and TLS clients instead of built whole
    /// (not a file option: the page size, lowered by tests).
    pub stream_history_from: usize,
    /// Histories at least this long get their status hash cached and extended block by block
    /// (not a file option: lowered by tests).
    pub cache_status_from: usize,
    /// Histories at least this long are kept for `get_history` answers built in memory and
    /// extended block by block (not a file option: lowered by tests).
    pub cache_history_from: usize,
    /// Most headers in one `blockchain.block.headers` answer.
    pub max_headers: u32,
    /// Silent payments: transactions whose taproot outputs are all below this (satoshis) are
    /// left out of tweak answers (Cake Wallet's `--sp-min-dust`).
    pub sp_min_dust: u64,
    /// Text of `server.banner`.
    pub banner: String,
    /// Answer of `server.donation_address` (empty: none).
    pub donation_address: String,
    /// Peers announced by `server.peers.subscribe`, as `host` strings.
    pub peers: Vec<String>,
    /// What a host's requests may cost (`electrum_cost_*`).
    pub cost: CostLimits,
}

/// The limits a host's request cost is held to, in ElectrumX's units (the rules are in
/// `listen::cost`); a limit of 0 is no limit, as ElectrumX's `COST_SOFT_LIMIT=0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostLimits {
    /// Above it, requests wait before they run.
    pub soft: f64,
    /// At it, requests are refused: an Electrum session is closed, an HTTP request answered 429.
    pub hard: f64,
    /// Units forgiven per second.
    pub decay_per_sec: f64,
}

impl Default for CostLimits {
    /// ElectrumX's limits (`COST_SOFT_LIMIT` 1,000, `COST_HARD_LIMIT` 10,000), decaying by 10
    /// units a second: a host at the hard limit is back under the soft one in 15 minutes.
    fn default() -> Self {
        CostLimits {
            soft: 1_000.0,
            hard: 10_000.0,
            decay_per_sec: 10.0,
        }
    }
}

impl ElectrumConfig {
    /// Defaults for `network`, listening on loopback at the conventional port.
    pub fn defaults(network: Network) -> Self {
        ElectrumConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], network.default_electrum_port())),
            ws_addr: None,
            tls_addr: None,
            wss_addr: None,
            tls_files: None,
            max_line_bytes: 2 * 1024 * 1024,
            max_batch: 1_000,
            max_subscriptions: 50_000,
            // Fulcrum's `max_subs_per_ip` and `max_subs`.
            max_subscriptions_per_ip: 75_000,
            max_subscriptions_total: 10_000_000,
            idle_timeout: Duration::from_secs(600),
            max_connections: 1_000,
            // Fulcrum's `max_clients_per_ip`; a subnet may hold four hosts' worth.
            hosts: HostLimits::new(12, 48),
            write_timeout: Duration::from_secs(20),
            answer_budget_bytes: 512 << 20,
            max_history: 10_000_000,
            stream_history_from: 4096,
            cache_status_from: 1_000,
            // Shorter histories cost about a round trip to read again.
            cache_history_from: 20,
            max_headers: 2016,
            sp_min_dust: 1_000,
            banner: format!("Welcome to {SERVER_SOFTWARE}, a validating Electrum server"),
            donation_address: String::new(),
            peers: Vec::new(),
            cost: CostLimits::default(),
        }
    }
}
