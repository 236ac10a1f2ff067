//! Every option, declared once: its file key, flag, environment variable, default and help.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::ConfigError;

/// Declares [`FileConfig`] from its field list, and with it [`FileConfig::NAMES`] and
/// [`FileConfig::or`], so that an option is added by adding its field: every field is an
/// `Option`, takes the flag `--<name>` (global to all subcommands) and names its environment
/// variable in its own `#[arg(env = ...)]`.
macro_rules! options {
    (
        $(#[$struct_meta:meta])*
        pub struct FileConfig {
            $($(#[$meta:meta])* pub $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$struct_meta])*
        pub struct FileConfig {
            $($(#[$meta])* #[arg(long, global = true)] pub $field: $ty,)*
        }

        impl FileConfig {
            /// Every option's name: its key in the file, and its flag and environment variable
            /// in kebab and upper case.
            pub const NAMES: &[&str] = &[$(stringify!($field)),*];

            /// These options, each taken from `lower` where `self` leaves it unset.
            pub fn or(self, lower: FileConfig) -> FileConfig {
                FileConfig {
                    $($field: self.$field.or(lower.$field),)*
                }
            }
        }
    };
}

options! {
    /// The options, as a config file, the environment or the command line give them (each field
    /// unset when not given). Their defaults are applied by [`Settings::resolve`]; each is
    /// documented in `config/cairn.example.toml` and in `contrib/docs/configuration.md`'s table.
    #[derive(Debug, Default, Clone, Deserialize, clap::Args)]
    #[serde(deny_unknown_fields)]
    pub struct FileConfig {
        /// The network: mainnet, testnet4, signet or regtest [default: mainnet; regtest for
        /// `demo`].
        #[arg(env = "CAIRN_NETWORK")]
        pub network: Option<String>,
        /// The data folder; each network uses a subfolder of it [default: ~/.cairn].
        #[arg(env = "CAIRN_DATADIR")]
        pub datadir: Option<PathBuf>,
        /// A custom signet's challenge script, hex (signet only) [default: none, the default
        /// signet].
        #[arg(env = "CAIRN_SIGNETCHALLENGE")]
        pub signetchallenge: Option<String>,
        /// The admin JSON-RPC address, loopback only [default: 127.0.0.1 and 8486 mainnet,
        /// 48486 testnet4, 38486 signet, 18486 regtest].
        #[arg(env = "CAIRN_ADMIN_ADDR")]
        pub admin_addr: Option<SocketAddr>,
        /// Log filter, e.g. `info` or `cairn=debug,kernel=debug` [default: info].
        #[arg(env = "CAIRN_LOG")]
        pub log: Option<String>,
        /// Threads the kernel checks scripts on besides the validating one, 0 to 15 [default:
        /// one fewer than the cores, at most 15].
        #[arg(env = "CAIRN_KERNEL_SCRIPT_THREADS")]
        pub kernel_script_threads: Option<i32>,
        /// Where the Electrum server listens [default: 127.0.0.1 and the network's port].
        #[arg(env = "CAIRN_ELECTRUM_ADDR")]
        pub electrum_addr: Option<SocketAddr>,
        /// Where the Electrum server listens for WebSocket clients [default: no WebSocket
        /// listener].
        #[arg(env = "CAIRN_ELECTRUM_WS_ADDR")]
        pub electrum_ws_addr: Option<SocketAddr>,
        /// Serve Electrum over TLS at HOST:PORT, or at an IP alone with the network's port (50002
        /// mainnet, 60002 testnet4 and signet, 60402 regtest); the flag alone: 127.0.0.1
        /// [default: no TLS listener].
        #[arg(
            env = "CAIRN_ELECTRUM_TLS_ADDR",
            value_name = "HOST:PORT",
            num_args = 0..=1,
            default_missing_value = ""
        )]
        pub electrum_tls_addr: Option<String>,
        /// Serve Electrum over WebSocket with TLS (wss://), addressed as --electrum-tls-addr
        /// (ports 50004, 60004, 60404) [default: no WSS listener].
        #[arg(
            env = "CAIRN_ELECTRUM_WSS_ADDR",
            value_name = "HOST:PORT",
            num_args = 0..=1,
            default_missing_value = ""
        )]
        pub electrum_wss_addr: Option<String>,
        /// The TLS certificate chain, PEM, leaf first (with --tls-key) [default: a self-signed
        /// certificate made in the data dir].
        #[arg(env = "CAIRN_TLS_CERT", requires = "tls_key")]
        pub tls_cert: Option<PathBuf>,
        /// The TLS certificate's private key, PEM (re-read with the certificate on SIGHUP)
        /// [default: the self-signed certificate's].
        #[arg(env = "CAIRN_TLS_KEY", requires = "tls_cert")]
        pub tls_key: Option<PathBuf>,
        /// Longest Electrum request line, bytes [default: 2097152].
        #[arg(env = "CAIRN_ELECTRUM_MAX_LINE_BYTES")]
        pub electrum_max_line_bytes: Option<usize>,
        /// Most requests in one Electrum batch [default: 1000].
        #[arg(env = "CAIRN_ELECTRUM_MAX_BATCH")]
        pub electrum_max_batch: Option<usize>,
        /// Most script-hash subscriptions per Electrum connection [default: 50000].
        #[arg(env = "CAIRN_ELECTRUM_MAX_SUBSCRIPTIONS")]
        pub electrum_max_subscriptions: Option<usize>,
        /// Most subscriptions of one address's Electrum connections together [default: 75000].
        #[arg(env = "CAIRN_ELECTRUM_MAX_SUBSCRIPTIONS_PER_IP")]
        pub electrum_max_subscriptions_per_ip: Option<usize>,
        /// Most subscriptions of all Electrum connections together [default: 10000000].
        #[arg(env = "CAIRN_ELECTRUM_MAX_SUBSCRIPTIONS_TOTAL")]
        pub electrum_max_subscriptions_total: Option<usize>,
        /// Seconds without a request before an Electrum connection is closed [default: 600].
        #[arg(env = "CAIRN_ELECTRUM_IDLE_TIMEOUT_SECS")]
        pub electrum_idle_timeout_secs: Option<u64>,
        /// Most Electrum connections at once [default: 1000].
        #[arg(env = "CAIRN_ELECTRUM_MAX_CONNECTIONS")]
        pub electrum_max_connections: Option<usize>,
        /// Most Electrum connections from one address (an IPv6 /64) at once [default: 12].
        #[arg(env = "CAIRN_ELECTRUM_MAX_CONNECTIONS_PER_IP")]
        pub electrum_max_connections_per_ip: Option<usize>,
        /// Most Electrum connections from one IPv4 /24 or IPv6 /48 at once [default: 48].
        #[arg(env = "CAIRN_ELECTRUM_MAX_CONNECTIONS_PER_SUBNET")]
        pub electrum_max_connections_per_subnet: Option<usize>,
        /// Hosts the per-host connection limits spare: addresses or subnets, comma-separated,
        /// empty for none [default: 127.0.0.1/32,::1/128].
        #[arg(env = "CAIRN_HOST_LIMIT_EXEMPT", value_name = "SUBNET", value_delimiter = ',')]
        pub host_limit_exempt: Option<Vec<String>>,
        /// Balancers whose connections open with a PROXY header naming the client (HAProxy's
        /// `send-proxy` or `send-proxy-v2`), on every listener: addresses or subnets,
        /// comma-separated; from them a header is required, from anyone else refused [default:
        /// none].
        #[arg(env = "CAIRN_PROXY_PROTOCOL_FROM", value_name = "SUBNET", value_delimiter = ',')]
        pub proxy_protocol_from: Option<Vec<String>>,
        /// Seconds a write to an Electrum client may make no progress before the connection is
        /// closed [default: 20].
        #[arg(env = "CAIRN_ELECTRUM_WRITE_TIMEOUT_SECS")]
        pub electrum_write_timeout_secs: Option<u64>,
        /// A host's request cost (ElectrumX's units) above which its requests wait before
        /// they run, up to 2.5 s; 0: none [default: 1000].
        #[arg(env = "CAIRN_ELECTRUM_COST_SOFT_LIMIT")]
        pub electrum_cost_soft_limit: Option<u64>,
        /// A host's request cost at which its sessions are closed; 0: none [default: 10000].
        #[arg(env = "CAIRN_ELECTRUM_COST_HARD_LIMIT")]
        pub electrum_cost_hard_limit: Option<u64>,
        /// Units of a host's request cost forgiven per second [default: 10].
        #[arg(env = "CAIRN_ELECTRUM_COST_DECAY_PER_SEC")]
        pub electrum_cost_decay_per_sec: Option<u64>,
        /// MiB of answers queued for all Electrum clients together [default: 512].
        #[arg(env = "CAIRN_ELECTRUM_ANSWER_BUDGET_MB")]
        pub electrum_answer_budget_mb: Option<usize>,
        /// Most history entries (or unspent outputs) in one Electrum answer [default: 10000000].
        #[arg(env = "CAIRN_ELECTRUM_MAX_HISTORY")]
        pub electrum_max_history: Option<usize>,
        /// Silent payments: transactions whose taproot outputs are all below this many
        /// satoshis are left out of `blockchain.block.tweaks` answers, as Cake Wallet's server
        /// does [default: 1000].
        #[arg(env = "CAIRN_SP_MIN_DUST")]
        pub sp_min_dust: Option<u64>,
        /// Text of `server.banner` [default: "Welcome to cairn <version>, a validating Electrum
        /// server"].
        #[arg(env = "CAIRN_ELECTRUM_BANNER")]
        pub electrum_banner: Option<String>,
        /// Answer of `server.donation_address` [default: none].
        #[arg(env = "CAIRN_ELECTRUM_DONATION_ADDRESS")]
        pub electrum_donation_address: Option<String>,
        /// Hosts announced by `server.peers.subscribe` (repeatable, or comma-separated)
        /// [default: none].
        #[arg(env = "CAIRN_ELECTRUM_PEERS", value_name = "HOST", value_delimiter = ',')]
        pub electrum_peers: Option<Vec<String>>,
        /// A peer to sync from (repeatable, or comma-separated); only these peers are used, no
        /// others are looked for [default: none].
        #[arg(env = "CAIRN_CONNECT", value_name = "ADDR", value_delimiter = ',')]
        pub connect: Option<Vec<SocketAddr>>,
        /// A peer to keep connected to, besides those found through seeds and peers
        /// (repeatable, or comma-separated) [default: none].
        #[arg(env = "CAIRN_ADDNODE", value_name = "ADDR", value_delimiter = ',')]
        pub addnode: Option<Vec<SocketAddr>>,
        /// Where to accept peers [default: 127.0.0.1:18444 on regtest, nowhere elsewhere].
        #[arg(env = "CAIRN_P2P_ADDR")]
        pub p2p_addr: Option<SocketAddr>,
        /// Whether to accept peers at all; false (or --no-listen) turns off the regtest default
        /// listener too [default: true].
        #[arg(
            env = "CAIRN_P2P_LISTEN",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub p2p_listen: Option<bool>,
        /// Outbound connections to keep to peers found through seeds and addr messages; 0 turns
        /// discovery off [default: 8].
        #[arg(env = "CAIRN_P2P_MAX_OUTBOUND")]
        pub p2p_max_outbound: Option<usize>,
        /// Most inbound peers at once [default: 117].
        #[arg(env = "CAIRN_P2P_MAX_INBOUND")]
        pub p2p_max_inbound: Option<usize>,
        /// Most inbound peers from one host (an IPv4 address, an IPv6 /64) at once
        /// [default: 16].
        #[arg(env = "CAIRN_P2P_MAX_INBOUND_PER_HOST")]
        pub p2p_max_inbound_per_host: Option<usize>,
        /// Seconds a peer may send nothing, or read nothing of what it is owed, before it is
        /// dropped [default: 120].
        #[arg(env = "CAIRN_P2P_TIMEOUT", value_name = "SECS")]
        pub p2p_timeout: Option<u64>,
        /// Whether to ask the network's DNS seeds for peer addresses [default: true].
        #[arg(
            env = "CAIRN_DNSSEED",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub dnsseed: Option<bool>,
        /// Whether to speak BIP324, the v2 transport, as Core's -v2transport [default: true].
        #[arg(
            env = "CAIRN_V2TRANSPORT",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub v2transport: Option<bool>,
        /// Mempool size limit, megabytes of virtual size [default: 300].
        #[arg(env = "CAIRN_MEMPOOL_MAX_MB")]
        pub mempool_max_mb: Option<u64>,
        /// Whether the mempool is saved to `mempool.dat` on shutdown and loaded on start
        /// [default: true].
        #[arg(
            env = "CAIRN_PERSIST_MEMPOOL",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub persist_mempool: Option<bool>,
        /// Whose relay policy the mempool follows: `core` (Bitcoin Core 31's defaults) or
        /// `knots` (Bitcoin Knots 29.4's); each option below overrides one rule of it
        /// [default: core].
        #[arg(env = "CAIRN_MEMPOOL_POLICY", value_name = "core|knots")]
        pub mempool_policy: Option<String>,
        /// Whether bare multisig outputs (1 to 3 keys) are relayed (`-permitbaremultisig`)
        /// [default: true; knots: false].
        #[arg(
            env = "CAIRN_PERMIT_BARE_MULTISIG",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub permit_bare_multisig: Option<bool>,
        /// Whether a transaction whose only outputs are OP_RETURN is relayed (Knots's
        /// `-permitbaredatacarrier`; Core has no such rule) [default: true; knots: false].
        #[arg(
            env = "CAIRN_PERMIT_BARE_DATACARRIER",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub permit_bare_datacarrier: Option<bool>,
        /// Whether bare pubkey (P2PK) outputs are relayed (Knots's `-permitbarepubkey`; Core
        /// relays them) [default: true; knots: false].
        #[arg(
            env = "CAIRN_PERMIT_BARE_PUBKEY",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub permit_bare_pubkey: Option<bool>,
        /// The minimum relay fee rate, sat/vB, also the incremental relay fee for replacements
        /// and the rolling minimum [default: 0.1; knots: 1].
        #[arg(env = "CAIRN_MEMPOOL_MIN_RELAY_FEE", value_name = "SAT_PER_VB")]
        pub mempool_min_relay_fee: Option<f64>,
        /// Most bytes of OP_RETURN output scripts: all of them together where several are
        /// permitted, else each [default: 100000; knots: 83].
        #[arg(env = "CAIRN_DATACARRIER_SIZE", value_name = "BYTES")]
        pub datacarrier_size: Option<usize>,
        /// Whether a transaction may have more than one OP_RETURN output (their sizes then
        /// counted together) [default: true; knots: false].
        #[arg(
            env = "CAIRN_PERMIT_MULTIPLE_DATACARRIER",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub permit_multiple_datacarrier: Option<bool>,
        /// Knots 29.4's rules against data: CAT-21 lock times, Runes, scripts over 1,650
        /// bytes, data dropped or enveloped in input scripts, and BIP-110's limits (output
        /// scripts of 34 bytes, pushes of 256, no OP_IF in tapscript); not Bitcoin's rules
        /// [default: false; knots: true].
        #[arg(
            env = "CAIRN_KNOTS_DATA_RULES",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub knots_data_rules: Option<bool>,
        /// Version 3 (TRUC) transactions: `enforce` the TRUC rules (Core's behaviour),
        /// `accept` them as any other or `reject` them [default: enforce; knots: accept].
        #[arg(env = "CAIRN_MEMPOOL_TRUC", value_name = "accept|enforce|reject")]
        pub mempool_truc: Option<String>,
        /// Where to serve compact filters over HTTP (`/filter/{hash}`, `/filterheaders`), the
        /// status page and the Esplora API [default: nowhere].
        #[arg(env = "CAIRN_HTTP_ADDR")]
        pub http_addr: Option<SocketAddr>,
        /// Most HTTP connections at once [default: 256].
        #[arg(env = "CAIRN_HTTP_MAX_CONNECTIONS")]
        pub http_max_connections: Option<usize>,
        /// Most HTTP connections from one address (an IPv6 /64) at once [default: 32].
        #[arg(env = "CAIRN_HTTP_MAX_CONNECTIONS_PER_IP")]
        pub http_max_connections_per_ip: Option<usize>,
        /// Most HTTP connections from one IPv4 /24 or IPv6 /48 at once [default: 128].
        #[arg(env = "CAIRN_HTTP_MAX_CONNECTIONS_PER_SUBNET")]
        pub http_max_connections_per_subnet: Option<usize>,
        /// A host's HTTP request cost (the Electrum server's units) above which its requests
        /// wait before they run, up to 2.5 s; 0: none [default: 10000].
        #[arg(env = "CAIRN_HTTP_COST_SOFT_LIMIT")]
        pub http_cost_soft_limit: Option<u64>,
        /// A host's HTTP request cost at which its requests are answered 429 and its new
        /// connections closed; 0: none [default: 100000].
        #[arg(env = "CAIRN_HTTP_COST_HARD_LIMIT")]
        pub http_cost_hard_limit: Option<u64>,
        /// Units of a host's HTTP request cost forgiven per second [default: 100].
        #[arg(env = "CAIRN_HTTP_COST_DECAY_PER_SEC")]
        pub http_cost_decay_per_sec: Option<u64>,
        /// HTTP requests waiting for the query pool at most; more are answered 503 at once
        /// [default: 64].
        #[arg(env = "CAIRN_HTTP_WORK_QUEUE")]
        pub http_work_queue: Option<usize>,
        /// Threads answering Electrum and HTTP queries at once; one host gets half of them at
        /// most [default: 4].
        #[arg(env = "CAIRN_QUERY_THREADS")]
        pub query_threads: Option<usize>,
        /// Where to serve Prometheus metrics (`GET /metrics`) [default: nowhere].
        #[arg(env = "CAIRN_METRICS_ADDR")]
        pub metrics_addr: Option<SocketAddr>,
        /// Whether the status page shows peers' addresses and the data folder [default: false].
        #[arg(
            env = "CAIRN_STATUS_PAGE_DETAILS",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub status_page_details: Option<bool>,
        /// Blocks the kernel may be behind the best header its peers announced before
        /// `/health` answers 503, so that a balancer drains the node [default: 1].
        #[arg(env = "CAIRN_HEALTH_MAX_BLOCKS_BEHIND", value_name = "BLOCKS")]
        pub health_max_blocks_behind: Option<u32>,
        /// Whether the index builds and serves BIP158 filters [default: true].
        #[arg(
            env = "CAIRN_BLOCK_FILTERS",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub block_filters: Option<bool>,
        /// Whether the index builds BIP352 silent-payment tweaks [default: false].
        #[arg(
            env = "CAIRN_SILENT_PAYMENTS",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true"
        )]
        pub silent_payments: Option<bool>,
        /// The index store's block cache, MiB [default: 256].
        #[arg(env = "CAIRN_INDEX_CACHE_MB")]
        pub index_cache_mb: Option<usize>,
        /// Free disk space, MiB, below which no more blocks are taken until space returns
        /// [default: 256].
        #[arg(env = "CAIRN_MIN_FREE_SPACE_MB")]
        pub min_free_space_mb: Option<u64>,
    }
}

impl FileConfig {
    /// Reads and parses a config file; unknown options are an error that names them.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses config text; `path` only names the source in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }
}

/// The command line's settings: every option's flag (and environment variable), the config
/// file to read, and `--no-listen`.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct Flags {
    /// A TOML config file (see config/cairn.example.toml).
    #[arg(long, global = true, env = "CAIRN_CONFIG")]
    pub config: Option<PathBuf>,
    /// Accept no peers, the regtest default listener included: --p2p-listen=false.
    #[arg(long, global = true)]
    pub no_listen: bool,
    /// The options given as flags or environment variables.
    #[command(flatten)]
    pub options: FileConfig,
}

impl Flags {
    /// The options these flags give, `--no-listen` included.
    pub fn options(&self) -> FileConfig {
        let mut options = self.options.clone();
        if self.no_listen {
            options.p2p_listen = Some(false);
        }
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Args;
    use std::collections::{BTreeMap, BTreeSet};

    /// The flags and environment variables of one option, or of a row that lists several.
    #[derive(Debug, Default, PartialEq)]
    struct Names {
        flags: BTreeSet<String>,
        envs: BTreeSet<String>,
    }

    /// Each option's flags and environment variable as clap has them; `--no-listen` counts as
    /// `p2p_listen`'s, and `--config` is no option.
    fn real() -> BTreeMap<String, Names> {
        let cmd = Flags::augment_args(clap::Command::new("cairn"));
        let mut names = BTreeMap::<String, Names>::new();
        for arg in cmd.get_arguments() {
            let option = match arg.get_id().as_str() {
                "config" => continue,
                "no_listen" => "p2p_listen",
                id => id,
            };
            let entry = names.entry(option.to_string()).or_default();
            entry.flags.insert(format!("--{}", arg.get_long().unwrap()));
            if let Some(env) = arg.get_env() {
                entry.envs.insert(env.to_string_lossy().into_owned());
            }
        }
        names
    }

    /// Fails unless `found` names exactly the options, saying which are missing or unknown.
    fn exactly_the_options(found: &BTreeSet<String>, source: &str) {
        let names: BTreeSet<String> = FileConfig::NAMES.iter().map(|n| n.to_string()).collect();
        let missing: Vec<_> = names.difference(found).collect();
        let unknown: Vec<_> = found.difference(&names).collect();
        assert!(
            missing.is_empty() && unknown.is_empty(),
            "{source}: options missing {missing:?}, not options {unknown:?}"
        );
    }

    #[test]
    fn each_option_is_a_flag_and_a_variable_of_its_name() {
        let cmd = FileConfig::augment_args(clap::Command::new("cairn"));
        let ids: Vec<&str> = cmd.get_arguments().map(|a| a.get_id().as_str()).collect();
        assert_eq!(ids, FileConfig::NAMES);
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            assert_eq!(arg.get_long(), Some(id.replace('_', "-").as_str()));
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            assert_eq!(env, Some(format!("CAIRN_{}", id.to_uppercase())), "{id}");
            assert!(arg.is_global_set(), "{id}");
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(help.contains("[default: "), "{id}: {help}");
        }
    }

    /// The keys of the example file, commented out or not, each with the comments above it (a
    /// block shared by keys that follow one another).
    fn example_keys() -> Vec<(String, String)> {
        let text = include_str!("../../config/cairn.example.toml");
        let (mut keys, mut block) = (Vec::new(), String::new());
        for line in text.lines() {
            let body = line.strip_prefix('#').map_or(line, |l| l.trim_start());
            let key = body.split_once(" = ").map(|(k, _)| k).filter(|k| {
                !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            });
            match key {
                Some(key) => keys.push((key.to_string(), block.clone())),
                None if line.trim().is_empty() => block.clear(),
                None => {
                    block.push_str(body);
                    block.push('\n');
                }
            }
        }
        keys
    }

    #[test]
    fn example_file_shows_every_option_once_with_its_flag_variable_and_default() {
        let keys = example_keys();
        let found: BTreeSet<String> = keys.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(found.len(), keys.len(), "a key twice: {keys:?}");
        exactly_the_options(&found, "config/cairn.example.toml");
        let real = real();
        for (key, block) in &keys {
            let words: BTreeSet<&str> = block
                .split(|c: char| c.is_whitespace() || ",.()".contains(c))
                .collect();
            let names = &real[key];
            for name in names.flags.iter().chain(&names.envs) {
                assert!(
                    words.contains(name.as_str()),
                    "{key}: {name} not in\n{block}"
                );
            }
            assert!(block.contains("Default: "), "{key}: no default in\n{block}");
        }
    }

    /// The rows of `contrib/docs/configuration.md`'s table: the options of the first column, and
    /// the flags and variables of the second.
    fn readme_rows() -> Vec<(Vec<String>, Names)> {
        let text = include_str!("../../contrib/docs/configuration.md");
        let section = &text[text.find("# Configuration\n").unwrap()..];
        let backticked = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        };
        let rows = section.lines().skip_while(|l| !l.starts_with('|')).skip(2);
        let rows = rows.take_while(|l| l.starts_with('|'));
        rows.map(|row| {
            let cells: Vec<&str> = row.split('|').collect();
            let mut names = Names::default();
            for word in backticked(cells[2]) {
                let set = if word.starts_with("--") {
                    &mut names.flags
                } else {
                    assert!(word.starts_with("CAIRN_"), "{row}: {word}");
                    &mut names.envs
                };
                set.insert(word);
            }
            assert!(!cells[3].trim().is_empty(), "{row}: no default");
            (backticked(cells[1]), names)
        })
        .collect()
    }

    #[test]
    fn readme_table_lists_every_option_once_with_its_flags_and_variables() {
        let rows = readme_rows();
        let listed: Vec<String> = rows.iter().flat_map(|(o, _)| o.clone()).collect();
        let set: BTreeSet<String> = listed.iter().cloned().collect();
        assert_eq!(set.len(), listed.len(), "an option twice: {listed:?}");
        exactly_the_options(&set, "contrib/docs/configuration.md's table");
        let real = real();
        for (options, names) in rows {
            let mut expected = Names::default();
            for option in &options {
                expected.flags.extend(real[option].flags.iter().cloned());
                expected.envs.extend(real[option].envs.iter().cloned());
            }
            assert_eq!(names, expected, "{options:?}");
        }
    }
}
