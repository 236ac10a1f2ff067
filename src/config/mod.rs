//! cairn's settings: a TOML file, overridden by `CAIRN_*` environment variables and CLI flags.

mod electrum;
mod error;
mod hosts;
mod mempool;
mod options;
mod p2p;

use std::net::SocketAddr;
use std::path::PathBuf;

use bitcoin::hex::{DisplayHex, FromHex};

use crate::types::{signet_magic, Network, Subnet, UnknownNetwork};

pub use electrum::{CostLimits, ElectrumConfig, SERVER_SOFTWARE};
pub use error::ConfigError;
pub use hosts::HostLimits;
pub use mempool::{MempoolConfig, PolicyProfile, TrucPolicy};
pub use options::{FileConfig, Flags};
pub use p2p::P2pConfig;

/// The index store's block cache when none is configured, MiB.
pub const DEFAULT_INDEX_CACHE_MB: usize = 256;

/// Most HTTP connections at once unless `http_max_connections` says otherwise.
pub const DEFAULT_HTTP_MAX_CONNECTIONS: usize = 256;

/// Free disk space, MiB, below which cairn takes no more blocks unless `min_free_space_mb` says
/// otherwise: above what the kernel itself needs before it gives up (Core's 50 MiB margin plus
/// a 16 MiB block-file chunk), with room for the index's writes and compactions.
pub const DEFAULT_MIN_FREE_SPACE_MB: u64 = 256;

/// The settings cairn runs with, after merging defaults, file, environment and flags.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The network.
    pub network: Network,
    /// A custom signet challenge, if any (signet only).
    pub signet_challenge: Option<Vec<u8>>,
    /// The top-level data folder (network subfolders live inside).
    pub datadir: PathBuf,
    /// The admin JSON-RPC address.
    pub admin_addr: SocketAddr,
    /// The log filter.
    pub log: String,
    /// Kernel script-check worker threads.
    pub kernel_script_threads: i32,
    /// The Electrum server's address and limits.
    pub electrum: ElectrumConfig,
    /// The P2P side's peers and limits.
    pub p2p: P2pConfig,
    /// The mempool's size limit.
    pub mempool: MempoolConfig,
    /// Where the HTTP filter endpoints listen, if anywhere.
    pub http_addr: Option<SocketAddr>,
    /// Most HTTP connections at once.
    pub http_max_connections: usize,
    /// Most HTTP connections one host or subnet may hold, and the hosts spared.
    pub http_hosts: HostLimits,
    /// What a host's HTTP requests may cost (`http_cost_*`).
    pub http_cost: CostLimits,
    /// HTTP requests waiting for the query pool at most.
    pub http_work_queue: usize,
    /// Query jobs (Electrum and HTTP) running at once.
    pub query_threads: usize,
    /// Where `/metrics` is served, if anywhere.
    pub metrics_addr: Option<SocketAddr>,
    /// Whether the status page shows peers' addresses and the data folder.
    pub status_page_details: bool,
    /// Blocks the kernel may be behind the best header before `/health` answers 503.
    pub health_max_blocks_behind: u32,
    /// Whether the index builds and serves BIP158 filters.
    pub block_filters: bool,
    /// Whether the index builds BIP352 silent-payment tweaks.
    pub silent_payments: bool,
    /// The index store's block cache, bytes.
    pub index_cache_bytes: usize,
    /// Free disk space, bytes, below which no more blocks are taken.
    pub min_free_space: u64,
}

impl Settings {
    /// Merges the layers: `flags` (the command line and the environment) over `file` over the
    /// defaults, option by option; on mainnet unless a layer names another network, as
    /// bitcoind, electrs, Fulcrum and ElectrumX.
    pub fn resolve(file: FileConfig, flags: FileConfig) -> Result<Self, ConfigError> {
        Self::resolve_on(file, flags, Network::Mainnet)
    }

    /// [`Settings::resolve`] on `default` unless a layer names a network (the demo's regtest).
    pub fn resolve_on(
        file: FileConfig,
        flags: FileConfig,
        default: Network,
    ) -> Result<Self, ConfigError> {
        let o = flags.or(file);
        let network = network(o.network.clone(), default)?;
        let signet_challenge = signet_challenge(o.signetchallenge.clone(), network)?;
        let admin_addr = admin_addr(o.admin_addr, network)?;
        let kernel_script_threads = o
            .kernel_script_threads
            .unwrap_or_else(default_script_threads);
        if !(0..=15).contains(&kernel_script_threads) {
            return Err(ConfigError::Invalid {
                option: "kernel_script_threads",
                message: format!("{kernel_script_threads} is outside 0..=15"),
            });
        }
        let magic = match &signet_challenge {
            Some(challenge) => signet_magic(challenge),
            None => network.magic(),
        };
        let index_cache_mb = positive(
            "index_cache_mb",
            o.index_cache_mb.unwrap_or(DEFAULT_INDEX_CACHE_MB),
        )?;
        let mempool_max_mb = positive("mempool_max_mb", o.mempool_max_mb.unwrap_or(300) as usize)?;
        let mempool = mempool::resolve(&o, mempool_max_mb as u64 * 1_000_000)?;
        let electrum = electrum_config(network, &o)?;
        let http_hosts = http_hosts(&o, &electrum.hosts)?;
        let http_cost = cost_limits(HTTP_COST_LIMITS, http_cost(&o))?;
        let p2p = p2p_config(network, signet_challenge.is_some(), magic, &o)
            .exempting(&electrum.hosts.exempt)
            .behind(&electrum.hosts.balancers);
        Ok(Settings {
            electrum,
            p2p,
            network,
            signet_challenge,
            datadir: o.datadir.unwrap_or_else(default_datadir),
            admin_addr,
            log: o.log.unwrap_or_else(|| "info".into()),
            kernel_script_threads,
            http_addr: o.http_addr,
            http_max_connections: positive(
                "http_max_connections",
                o.http_max_connections
                    .unwrap_or(DEFAULT_HTTP_MAX_CONNECTIONS),
            )?,
            http_hosts,
            http_cost,
            http_work_queue: positive("http_work_queue", o.http_work_queue.unwrap_or(64))?,
            query_threads: positive("query_threads", o.query_threads.unwrap_or(4))?,
            metrics_addr: o.metrics_addr,
            status_page_details: o.status_page_details.unwrap_or(false),
            health_max_blocks_behind: o.health_max_blocks_behind.unwrap_or(1),
            block_filters: o.block_filters.unwrap_or(true),
            silent_payments: o.silent_payments.unwrap_or(false),
            index_cache_bytes: index_cache_mb << 20,
            min_free_space: min_free_space(o.min_free_space_mb)?,
            mempool,
        })
    }

    /// The folder of this network's data: `<datadir>/<network>` (custom signets get their own).
    pub fn network_dir(&self) -> PathBuf {
        match &self.signet_challenge {
            Some(challenge) => {
                use bitcoin::hashes::{sha256, Hash};
                let digest = sha256::Hash::hash(challenge);
                let tag = digest.as_byte_array()[..4].to_lower_hex_string();
                self.datadir.join(format!("signet-{tag}"))
            }
            None => self.datadir.join(self.network.name()),
        }
    }

    /// The network magic in block files and P2P messages.
    pub fn magic(&self) -> [u8; 4] {
        self.p2p.magic
    }
}

/// The network named by `name`; `default` when none is.
fn network(name: Option<String>, default: Network) -> Result<Network, ConfigError> {
    match name {
        Some(name) => name
            .parse()
            .map_err(|e: UnknownNetwork| ConfigError::Invalid {
                option: "network",
                message: e.to_string(),
            }),
        None => Ok(default),
    }
}

/// A custom signet's challenge script from its hex: only on signet, and not empty.
fn signet_challenge(
    hex_text: Option<String>,
    network: Network,
) -> Result<Option<Vec<u8>>, ConfigError> {
    let Some(hex_text) = hex_text else {
        return Ok(None);
    };
    let invalid = |message: String| ConfigError::Invalid {
        option: "signetchallenge",
        message,
    };
    if network != Network::Signet {
        return Err(invalid(format!(
            "only valid with network signet, not {network}"
        )));
    }
    let bytes =
        Vec::<u8>::from_hex(hex_text.trim()).map_err(|e| invalid(format!("not hex: {e}")))?;
    if bytes.is_empty() {
        return Err(invalid("empty challenge".into()));
    }
    Ok(Some(bytes))
}

/// The admin RPC's address: the network's default port on loopback, and loopback only.
fn admin_addr(asked: Option<SocketAddr>, network: Network) -> Result<SocketAddr, ConfigError> {
    let addr =
        asked.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], network.default_admin_port())));
    if !addr.ip().is_loopback() {
        return Err(ConfigError::Invalid {
            option: "admin_addr",
            message: format!(
                "{addr} is not a loopback address; the admin RPC only listens on loopback"
            ),
        });
    }
    Ok(addr)
}

/// `min_free_space_mb` in bytes: at least 1 MiB, and a count of bytes that fits 64 bits.
fn min_free_space(mb: Option<u64>) -> Result<u64, ConfigError> {
    let mb = mb.unwrap_or(DEFAULT_MIN_FREE_SPACE_MB);
    let bytes = mb
        .checked_mul(1 << 20)
        .ok_or_else(|| ConfigError::Invalid {
            option: "min_free_space_mb",
            message: format!("{mb} MiB is more than any disk"),
        })?;
    positive("min_free_space_mb", usize::from(bytes > 0)).map(|_| bytes)
}

fn positive(option: &'static str, v: usize) -> Result<usize, ConfigError> {
    if v == 0 {
        return Err(ConfigError::Invalid {
            option,
            message: "must be at least 1".into(),
        });
    }
    Ok(v)
}

impl Flags {
    /// The settings: these flags over the config file (if one is given) over the defaults, on
    /// mainnet unless they name another network.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        self.settings_on(Network::Mainnet)
    }

    /// [`Flags::settings`] on `default` unless they name a network.
    pub fn settings_on(&self, default: Network) -> Result<Settings, ConfigError> {
        let file = match &self.config {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        Settings::resolve_on(file, self.options(), default)
    }
}

/// The Electrum server's settings: the network's defaults under the options.
fn electrum_config(network: Network, o: &FileConfig) -> Result<ElectrumConfig, ConfigError> {
    let mut electrum = ElectrumConfig::defaults(network);
    if let Some(addr) = o.electrum_addr {
        electrum.addr = addr;
    }
    electrum.ws_addr = o.electrum_ws_addr;
    electrum.tls_addr = o
        .electrum_tls_addr
        .as_ref()
        .map(|t| listen_addr("electrum_tls_addr", t, network.default_electrum_tls_port()))
        .transpose()?;
    electrum.wss_addr = o
        .electrum_wss_addr
        .as_ref()
        .map(|t| listen_addr("electrum_wss_addr", t, network.default_electrum_wss_port()))
        .transpose()?;
    electrum.tls_files = match (o.tls_cert.clone(), o.tls_key.clone()) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        (cert, _) => {
            let (option, other) = if cert.is_some() {
                ("tls_key", "tls_cert")
            } else {
                ("tls_cert", "tls_key")
            };
            return Err(ConfigError::Invalid {
                option,
                message: format!("missing: {other} is set, and the two go together"),
            });
        }
    };
    let limits = [
        (
            &mut electrum.max_line_bytes,
            o.electrum_max_line_bytes,
            "electrum_max_line_bytes",
        ),
        (
            &mut electrum.max_batch,
            o.electrum_max_batch,
            "electrum_max_batch",
        ),
        (
            &mut electrum.max_subscriptions,
            o.electrum_max_subscriptions,
            "electrum_max_subscriptions",
        ),
        (
            &mut electrum.max_subscriptions_per_ip,
            o.electrum_max_subscriptions_per_ip,
            "electrum_max_subscriptions_per_ip",
        ),
        (
            &mut electrum.max_subscriptions_total,
            o.electrum_max_subscriptions_total,
            "electrum_max_subscriptions_total",
        ),
        (
            &mut electrum.max_connections,
            o.electrum_max_connections,
            "electrum_max_connections",
        ),
        (
            &mut electrum.max_history,
            o.electrum_max_history,
            "electrum_max_history",
        ),
        (
            &mut electrum.hosts.per_ip,
            o.electrum_max_connections_per_ip,
            "electrum_max_connections_per_ip",
        ),
        (
            &mut electrum.hosts.per_subnet,
            o.electrum_max_connections_per_subnet,
            "electrum_max_connections_per_subnet",
        ),
    ];
    for (field, value, option) in limits {
        if let Some(v) = value {
            *field = positive(option, v)?;
        }
    }
    if let Some(dust) = o.sp_min_dust {
        electrum.sp_min_dust = dust;
    }
    if let Some(mb) = o.electrum_answer_budget_mb {
        electrum.answer_budget_bytes =
            positive("electrum_answer_budget_mb", mb)?.saturating_mul(1 << 20);
    }
    if let Some(v) = o.electrum_idle_timeout_secs {
        electrum.idle_timeout = positive_secs("electrum_idle_timeout_secs", v)?;
    }
    if let Some(v) = o.electrum_write_timeout_secs {
        electrum.write_timeout = positive_secs("electrum_write_timeout_secs", v)?;
    }
    if let Some(list) = &o.host_limit_exempt {
        electrum.hosts.exempt = subnets("host_limit_exempt", list)?;
    }
    if let Some(list) = &o.proxy_protocol_from {
        electrum.hosts.balancers = balancers(list, &electrum.hosts.exempt)?;
    }
    electrum.cost = cost_limits(CostLimits::default(), electrum_cost(o))?;
    at_least_per_ip(&electrum.hosts, "electrum_max_connections_per_subnet")?;
    if let Some(v) = &o.electrum_banner {
        electrum.banner = v.clone();
    }
    if let Some(v) = &o.electrum_donation_address {
        electrum.donation_address = v.clone();
    }
    if let Some(v) = &o.electrum_peers {
        electrum.peers = v.clone();
    }
    Ok(electrum)
}

/// The options of one server's cost limits: soft, hard, decay.
type CostOptions = [(&'static str, Option<u64>); 3];

/// The Electrum server's cost limits (`electrum_cost_*`).
fn electrum_cost(o: &FileConfig) -> CostOptions {
    [
        ("electrum_cost_soft_limit", o.electrum_cost_soft_limit),
        ("electrum_cost_hard_limit", o.electrum_cost_hard_limit),
        ("electrum_cost_decay_per_sec", o.electrum_cost_decay_per_sec),
    ]
}

/// The HTTP server's cost limits (`http_cost_*`).
fn http_cost(o: &FileConfig) -> CostOptions {
    [
        ("http_cost_soft_limit", o.http_cost_soft_limit),
        ("http_cost_hard_limit", o.http_cost_hard_limit),
        ("http_cost_decay_per_sec", o.http_cost_decay_per_sec),
    ]
}

/// The HTTP server's cost limits unless the options say otherwise: ten times ElectrumX's
/// (which Electrum keeps). An Esplora client reads whole blocks' undo data for each
/// transaction it shows (its inputs' prevouts): on mainnet about 150 units a transaction page
/// and 350 for `/blocks`, so a BDK full scan of a 30-address wallet costs about 9,400 units,
/// under the soft limit; a host is held to 100 units a second (5,000 rows or 5 MB read) once
/// over it.
pub const HTTP_COST_LIMITS: CostLimits = CostLimits {
    soft: 10_000.0,
    hard: 100_000.0,
    decay_per_sec: 100.0,
};

/// One server's cost limits from `base`, 0 for none; the hard limit above the soft one, and a
/// decay with a hard limit (a soft limit without one holds a host that passed it to its waits,
/// which the attack tests use).
fn cost_limits(base: CostLimits, options: CostOptions) -> Result<CostLimits, ConfigError> {
    let [soft, hard, decay] = options;
    let mut cost = base;
    let given = [
        (&mut cost.soft, soft.1),
        (&mut cost.hard, hard.1),
        (&mut cost.decay_per_sec, decay.1),
    ];
    for (field, value) in given {
        if let Some(v) = value {
            *field = v as f64;
        }
    }
    if cost.hard > 0.0 && cost.decay_per_sec <= 0.0 {
        return Err(ConfigError::Invalid {
            option: decay.0,
            message: "0 with a hard limit: a host that reached it would be shut out for ever"
                .into(),
        });
    }
    if cost.soft > 0.0 && cost.hard > 0.0 && cost.hard <= cost.soft {
        return Err(ConfigError::Invalid {
            option: hard.0,
            message: format!("{} is not above {} ({})", cost.hard, soft.0, cost.soft),
        });
    }
    Ok(cost)
}

/// The HTTP server's per-host limits: 32 connections per address (a browser opens six per
/// site, a wallet behind a NAT more), 128 per subnet, unless the options say otherwise; the
/// hosts spared and the balancers are the Electrum server's (`host_limit_exempt`,
/// `proxy_protocol_from`).
fn http_hosts(o: &FileConfig, electrum: &HostLimits) -> Result<HostLimits, ConfigError> {
    let per_ip = o.http_max_connections_per_ip.unwrap_or(32);
    let per_subnet = o.http_max_connections_per_subnet.unwrap_or(128);
    let mut hosts = HostLimits::new(
        positive("http_max_connections_per_ip", per_ip)?,
        positive("http_max_connections_per_subnet", per_subnet)?,
    );
    hosts.exempt = electrum.exempt.clone();
    hosts.balancers = electrum.balancers.clone();
    at_least_per_ip(&hosts, "http_max_connections_per_subnet")?;
    Ok(hosts)
}

/// A number of seconds that must be at least 1.
fn positive_secs(option: &'static str, secs: u64) -> Result<std::time::Duration, ConfigError> {
    let secs = positive(option, usize::try_from(secs).unwrap_or(usize::MAX))?;
    Ok(std::time::Duration::from_secs(secs as u64))
}

/// A subnet's limit below its hosts' is a mistake.
fn at_least_per_ip(hosts: &HostLimits, option: &'static str) -> Result<(), ConfigError> {
    if hosts.per_subnet < hosts.per_ip {
        return Err(ConfigError::Invalid {
            option,
            message: format!(
                "{} is below the per-address limit ({})",
                hosts.per_subnet, hosts.per_ip
            ),
        });
    }
    Ok(())
}

/// The balancers `proxy_protocol_from` lists. None may be every address, nor share an address
/// with `exempt`: what connects from there (a local Tor onion service) sends no header, and
/// would either be closed for it or, if it sent one, choose whose address it counts as.
fn balancers(list: &[String], exempt: &[Subnet]) -> Result<Vec<Subnet>, ConfigError> {
    let balancers = subnets("proxy_protocol_from", list)?;
    for b in &balancers {
        let refuse = |message: String| ConfigError::Invalid {
            option: "proxy_protocol_from",
            message,
        };
        if b.is_everything() {
            return Err(refuse(format!(
                "{b} is every address: list the balancers' own"
            )));
        }
        if let Some(e) = exempt.iter().find(|e| e.overlaps(b)) {
            return Err(refuse(format!(
                "{b} overlaps host_limit_exempt's {e} (a local Tor onion service connects from \
                 there without a header): give the balancer a source address of its own \
                 (HAProxy: `source 127.0.0.4` on the backend) and list that"
            )));
        }
    }
    Ok(balancers)
}

/// The hosts a list of addresses and subnets names (`host_limit_exempt`,
/// `proxy_protocol_from`; empty entries skipped: an empty list names none).
fn subnets(option: &'static str, list: &[String]) -> Result<Vec<Subnet>, ConfigError> {
    list.iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.parse()
                .map_err(|e: crate::types::BadSubnet| ConfigError::Invalid {
                    option,
                    message: e.to_string(),
                })
        })
        .collect()
}

/// A listener's address: `HOST:PORT`, or an IP address alone (or nothing) for `default_port`
/// on it (on loopback).
fn listen_addr(
    option: &'static str,
    text: &str,
    default_port: u16,
) -> Result<SocketAddr, ConfigError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], default_port)));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let ip = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    match ip.parse::<std::net::IpAddr>() {
        Ok(ip) => Ok(SocketAddr::new(ip, default_port)),
        Err(_) => Err(ConfigError::Invalid {
            option,
            message: format!("{text:?} is neither HOST:PORT nor an IP address"),
        }),
    }
}

/// The P2P side's settings: regtest listens on loopback by default.
fn p2p_config(network: Network, custom_signet: bool, magic: [u8; 4], o: &FileConfig) -> P2pConfig {
    let listening = o.p2p_listen.unwrap_or(true);
    let (listen, listen_required) = match (listening, o.p2p_addr) {
        (false, _) => (None, false),
        (true, Some(addr)) => (Some(addr), true),
        (true, None) if network == Network::Regtest => (
            Some(SocketAddr::from((
                [127, 0, 0, 1],
                network.default_p2p_port(),
            ))),
            false,
        ),
        (true, None) => (None, false),
    };
    P2pConfig {
        connect: o.connect.clone().unwrap_or_default(),
        addnode: o.addnode.clone().unwrap_or_default(),
        listen,
        listen_required,
        network,
        custom_signet,
        magic,
        max_outbound: o.p2p_max_outbound.unwrap_or(8),
        max_inbound: o.p2p_max_inbound.unwrap_or(117),
        max_inbound_per_host: o.p2p_max_inbound_per_host.unwrap_or(16).max(1),
        inbound_exempt: Vec::new(),
        inbound_balancers: Vec::new(),
        timeout: std::time::Duration::from_secs(o.p2p_timeout.unwrap_or(120).max(1)),
        dns_seeds: o.dnsseed.unwrap_or(true),
        v2_transport: o.v2transport.unwrap_or(true),
        addrbook_file: None,
    }
}

/// Script-check threads beside the validating one, as Bitcoin Core's `-par` default: one fewer
/// than the cores, at most 15.
pub fn default_script_threads() -> i32 {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    (cores.saturating_sub(1)).min(15) as i32
}

/// `$HOME/.cairn`, or `./.cairn` when there is no home.
pub fn default_datadir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
        .join(".cairn")
}

#[cfg(test)]
mod tests;
