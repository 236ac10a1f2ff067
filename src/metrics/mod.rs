//! What cairn counts for Prometheus: one registry per process, its metrics recorded where the
//! work happens (the index writer, Electrum sessions, the P2P and HTTP servers) and its gauges
//! set when scraped. [`metrics`] is the registry; [`Metrics::encode`] the text format that
//! `--metrics-addr` serves at `/metrics`. Every name has the `cairn_` prefix, counters end in
//! `_total` and amounts are in base units (seconds, bytes).
//!
//! Label values come from fixed sets (transports, directions, the Electrum methods cairn
//! serves, status codes), never from what a client sends, so no client can grow the output.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus::core::Collector;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

pub mod log_lines;

/// The Electrum transports, as their label values.
pub mod transport {
    /// Newline-delimited JSON over TCP.
    pub const TCP: &str = "tcp";
    /// Newline-delimited JSON over TLS.
    pub const TLS: &str = "tls";
    /// WebSocket.
    pub const WS: &str = "ws";
    /// WebSocket over TLS.
    pub const WSS: &str = "wss";
}

/// Request latency buckets, seconds: 100 µs to 10 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Every metric cairn exports.
pub struct Metrics {
    registry: Registry,
    /// Height of the kernel's active tip.
    pub kernel_tip_height: IntGauge,
    /// Height of the best header the kernel knows.
    pub best_header_height: IntGauge,
    /// Height of the index tip (-1 before the first block).
    pub index_tip_height: IntGauge,
    /// Blocks added to (`connected`) or undone from (`disconnected`) the index.
    pub index_blocks: IntCounterVec,
    /// Transactions of the blocks added to the index.
    pub index_transactions: IntCounter,
    /// How long one index batch (its rows and the tip) takes to write.
    pub index_batch_write: Histogram,
    /// Open Electrum connections, by transport.
    pub electrum_connections: IntGaugeVec,
    /// Electrum connections accepted, by transport.
    pub electrum_connections_accepted: IntCounterVec,
    /// HTTP connections closed at accept, by listener (`HTTP`, `metrics`) and the limit they
    /// met: `ip`, `subnet`, `limit`, `cost`.
    pub http_connections_refused: IntCounterVec,
    /// Balancers' connections closed for their PROXY header (missing, malformed, late, or too
    /// many waiting for one), by listener (`Electrum`, `HTTP`, `P2P`).
    pub proxy_headers_refused: IntCounterVec,
    /// HTTP requests answered 503 because the query pool did not take them, by why:
    /// `queue_full`, `closed`.
    pub http_work_refused: IntCounterVec,
    /// HTTP requests made to wait because their host's cost was over the soft limit.
    pub http_throttled: IntCounter,
    /// Electrum connections closed at accept, by the limit they met: `ip`, `subnet`, `limit`,
    /// `cost`.
    pub electrum_connections_refused: IntCounterVec,
    /// Connections ended to give their place to a newcomer of another group (the server full,
    /// the exempt connections' share full, or the silent-payment subscriptions), by server.
    pub connections_evicted: IntCounterVec,
    /// Electrum broadcasts and dry runs refused before their checks ran: their estimated cost
    /// would have taken the host to the hard limit.
    pub electrum_refused_ahead: IntCounter,
    /// `POST /tx` broadcasts refused before their checks ran, their estimated cost over the
    /// host's hard limit.
    pub http_refused_ahead: IntCounter,
    /// Electrum sessions ended, by why: `left`, `idle`, `too_long`, `not_reading`,
    /// `write_stalled`, `cost`, `pings`.
    pub electrum_disconnects: IntCounterVec,
    /// Electrum requests made to wait because their host's cost was over the soft limit.
    pub electrum_throttled: IntCounter,
    /// Electrum requests and HTTP `GET`s tried on their connection's task, by server and
    /// outcome: `answered` there from memory, `refused` (the answer needed the disk or more
    /// rows, built again in the pool), `skipped` (no inline place or slot free at once, or a
    /// writer under way: built in the pool).
    pub inline_answers: IntCounterVec,
    /// Script and outpoint subscriptions held by open Electrum connections, by transport.
    pub electrum_subscriptions: IntGaugeVec,
    /// Electrum requests answered, by method.
    pub electrum_requests: IntCounterVec,
    /// Electrum requests answered with an error, by method.
    pub electrum_request_errors: IntCounterVec,
    /// Time to answer an Electrum request (the first piece of a streamed history), by method.
    pub electrum_request_duration: HistogramVec,
    /// Bytes of answers and notifications queued to Electrum clients, by transport.
    pub electrum_sent_bytes: IntCounterVec,
    /// Index rows Electrum requests read (keys and values), by method.
    pub electrum_read_rows: IntCounterVec,
    /// Bytes Electrum requests read from the index and the block files, by method.
    pub electrum_read_bytes: IntCounterVec,
    /// HTTP requests answered (filters, Esplora, health), by status code.
    pub http_requests: IntCounterVec,
    /// BIP157/158 filter requests served, by message and transport.
    pub bip157_requests: IntCounterVec,
    /// Transactions in the mempool.
    pub mempool_transactions: IntGauge,
    /// Virtual size of the mempool's transactions.
    pub mempool_vsize: IntGauge,
    /// Memory the mempool takes as Core counts it against `maxmempool`.
    pub mempool_usage: IntGauge,
    /// Connected P2P peers, by direction.
    pub p2p_peers: IntGaugeVec,
    /// Bytes received from P2P peers (handshakes included).
    pub p2p_received_bytes: IntCounter,
    /// Bytes sent to P2P peers (handshakes included).
    pub p2p_sent_bytes: IntCounter,
    /// Inbound peers evicted for a newcomer from a less crowded host.
    pub p2p_inbound_evicted: IntCounter,
    /// Inbound peers refused because their host held `p2p_max_inbound_per_host` places.
    pub p2p_inbound_host_full: IntCounter,
    /// Gossiped addresses dropped unread, over their peer's rate (Core's
    /// `m_addr_rate_limited`).
    pub p2p_addr_rate_limited: IntCounter,
    /// Transactions from inbound peers dropped unchecked, over their host's allowance.
    pub p2p_tx_over_allowance: IntCounter,
    /// Bytes of the index store's SST files.
    pub rocksdb_size: IntGauge,
    /// Bytes held in the index store's block cache.
    pub rocksdb_block_cache_usage: IntGauge,
    /// Reads the index store's block cache answered.
    pub rocksdb_block_cache_hits: IntCounter,
    /// Reads that missed the block cache and went to the files.
    pub rocksdb_block_cache_misses: IntCounter,
    /// Free bytes on the fullest file system holding the data folder.
    pub disk_free: IntGauge,
    /// Log lines written, by level ([`log_lines::LogLines`]): their rate is the alarm for a log
    /// an attacker grows.
    pub log_lines: IntCounterVec,
    /// Lines an outsider caused that were not written, over their kind's rate
    /// ([`crate::outsider_log`]).
    pub log_suppressed: IntCounter,
    /// Eligible transactions silent-payment subscriptions scanned, by source (`block`,
    /// `mempool`).
    pub silent_payments_scanned: IntCounterVec,
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// Registers `metric` and hands it back.
fn registered<M: Collector + Clone + 'static>(
    registry: &Registry,
    metric: prometheus::Result<M>,
) -> M {
    // The options are constants checked by the unit test below: neither step can fail.
    let metric = metric.expect("valid metric options");
    registry
        .register(Box::new(metric.clone()))
        .expect("unique metric names");
    metric
}

fn opts(name: &str, help: &str) -> Opts {
    Opts::new(name, help).namespace("cairn")
}

fn histogram(name: &str, help: &str) -> HistogramOpts {
    HistogramOpts::new(name, help)
        .namespace("cairn")
        .buckets(LATENCY_BUCKETS.to_vec())
}

impl Metrics {
    fn new() -> Self {
        let r = Registry::new();
        #[cfg(target_os = "linux")]
        if let Err(e) = r.register(Box::new(
            prometheus::process_collector::ProcessCollector::new(
                std::process::id() as i32,
                "cairn",
            ),
        )) {
            tracing::warn!("no process metrics: {e}");
        }
        Metrics {
            kernel_tip_height: registered(
                &r,
                IntGauge::with_opts(opts(
                    "kernel_tip_height",
                    "Height of the kernel's active tip.",
                )),
            ),
            best_header_height: registered(
                &r,
                IntGauge::with_opts(opts(
                    "best_header_height",
                    "Height of the best header the kernel knows.",
                )),
            ),
            index_tip_height: registered(
                &r,
                IntGauge::with_opts(opts(
                    "index_tip_height",
                    "Height of the index tip (-1: no block yet).",
                )),
            ),
            index_blocks: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "index_blocks_total",
                        "Blocks added to or undone from the index.",
                    ),
                    &["event"],
                ),
            ),
            index_transactions: registered(
                &r,
                IntCounter::with_opts(opts(
                    "index_transactions_total",
                    "Transactions of the blocks added to the index.",
                )),
            ),
            index_batch_write: registered(
                &r,
                Histogram::with_opts(histogram(
                    "index_batch_write_seconds",
                    "Time to write one index batch with its tip.",
                )),
            ),
            electrum_connections: registered(
                &r,
                IntGaugeVec::new(
                    opts("electrum_connections", "Open Electrum connections."),
                    &["transport"],
                ),
            ),
            electrum_connections_accepted: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "electrum_connections_total",
                        "Electrum connections accepted.",
                    ),
                    &["transport"],
                ),
            ),
            http_connections_refused: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "http_connections_refused_total",
                        "HTTP connections closed at accept, by listener and the limit they met.",
                    ),
                    &["listener", "reason"],
                ),
            ),
            proxy_headers_refused: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "proxy_headers_refused_total",
                        "Balancers' connections closed for their PROXY header, by listener.",
                    ),
                    &["listener"],
                ),
            ),
            http_work_refused: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "http_work_refused_total",
                        "HTTP requests answered 503 because the query pool did not take them, by why.",
                    ),
                    &["reason"],
                ),
            ),
            electrum_connections_refused: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "electrum_connections_refused_total",
                        "Electrum connections closed at accept, by the limit they met.",
                    ),
                    &["reason"],
                ),
            ),
            connections_evicted: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "connections_evicted_total",
                        "Connections ended to give their place to a newcomer of another group, by server.",
                    ),
                    &["server"],
                ),
            ),
            electrum_refused_ahead: registered(
                &r,
                IntCounter::with_opts(opts(
                    "electrum_refused_ahead_total",
                    "Electrum broadcasts and dry runs refused before their checks ran, their estimated cost over the host's hard limit.",
                )),
            ),
            http_refused_ahead: registered(
                &r,
                IntCounter::with_opts(opts(
                    "http_refused_ahead_total",
                    "HTTP broadcasts refused before their checks ran, their estimated cost over the host's hard limit.",
                )),
            ),
            electrum_disconnects: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "electrum_disconnects_total",
                        "Electrum sessions ended, by why.",
                    ),
                    &["reason"],
                ),
            ),
            http_throttled: registered(
                &r,
                IntCounter::with_opts(opts(
                    "http_throttled_total",
                    "HTTP requests made to wait because their host's cost was over the soft limit.",
                )),
            ),
            electrum_throttled: registered(
                &r,
                IntCounter::with_opts(opts(
                    "electrum_throttled_total",
                    "Electrum requests made to wait because their host's cost was over the soft limit.",
                )),
            ),
            inline_answers: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "inline_answers_total",
                        "Electrum requests and HTTP GETs tried on their connection's task, by outcome: answered there from memory, refused (built again in the query pool), or skipped (built in the pool).",
                    ),
                    &["server", "outcome"],
                ),
            ),
            electrum_subscriptions: registered(
                &r,
                IntGaugeVec::new(
                    opts(
                        "electrum_subscriptions",
                        "Script and outpoint subscriptions of open Electrum connections.",
                    ),
                    &["transport"],
                ),
            ),
            electrum_requests: registered(
                &r,
                IntCounterVec::new(
                    opts("electrum_requests_total", "Electrum requests answered."),
                    &["method"],
                ),
            ),
            electrum_read_rows: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "electrum_read_rows_total",
                        "Index rows read to answer Electrum requests.",
                    ),
                    &["method"],
                ),
            ),
            electrum_read_bytes: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "electrum_read_bytes_total",
                        "Bytes read from the index and block files to answer Electrum requests.",
                    ),
                    &["method"],
                ),
            ),
            electrum_request_errors: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "electrum_request_errors_total",
                        "Electrum requests answered with an error.",
                    ),
                    &["method"],
                ),
            ),
            electrum_request_duration: registered(
                &r,
                HistogramVec::new(
                    histogram(
                        "electrum_request_duration_seconds",
                        "Time to answer an Electrum request.",
                    ),
                    &["method"],
                ),
            ),
            electrum_sent_bytes: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "electrum_sent_bytes_total",
                        "Bytes of answers and notifications sent to Electrum clients.",
                    ),
                    &["transport"],
                ),
            ),
            http_requests: registered(
                &r,
                IntCounterVec::new(
                    opts("http_requests_total", "HTTP requests answered."),
                    &["status"],
                ),
            ),
            bip157_requests: registered(
                &r,
                IntCounterVec::new(
                    opts("bip157_requests_total", "Compact filter requests served."),
                    &["message", "transport"],
                ),
            ),
            mempool_transactions: registered(
                &r,
                IntGauge::with_opts(opts("mempool_transactions", "Transactions in the mempool.")),
            ),
            mempool_vsize: registered(
                &r,
                IntGauge::with_opts(opts(
                    "mempool_vsize_bytes",
                    "Virtual size of the mempool's transactions.",
                )),
            ),
            log_lines: registered(
                &r,
                IntCounterVec::new(opts("log_lines_total", "Log lines written, by level."), &["level"]),
            ),
            silent_payments_scanned: registered(
                &r,
                IntCounterVec::new(
                    opts(
                        "silent_payments_scanned_total",
                        "Eligible transactions silent-payment subscriptions scanned, by source.",
                    ),
                    &["source"],
                ),
            ),
            log_suppressed: registered(
                &r,
                IntCounter::with_opts(opts(
                    "log_suppressed_total",
                    "Log lines a client or peer caused that were not written, over their kind's rate.",
                )),
            ),
            mempool_usage: registered(
                &r,
                IntGauge::with_opts(opts(
                    "mempool_usage_bytes",
                    "Memory the mempool takes as Bitcoin Core counts it against maxmempool.",
                )),
            ),
            p2p_peers: registered(
                &r,
                IntGaugeVec::new(opts("p2p_peers", "Connected P2P peers."), &["direction"]),
            ),
            p2p_received_bytes: registered(
                &r,
                IntCounter::with_opts(opts(
                    "p2p_received_bytes_total",
                    "Bytes received from P2P peers.",
                )),
            ),
            p2p_sent_bytes: registered(
                &r,
                IntCounter::with_opts(opts("p2p_sent_bytes_total", "Bytes sent to P2P peers.")),
            ),
            p2p_inbound_evicted: registered(
                &r,
                IntCounter::with_opts(opts(
                    "p2p_inbound_evicted_total",
                    "Inbound peers evicted for a newcomer from a less crowded host.",
                )),
            ),
            p2p_inbound_host_full: registered(
                &r,
                IntCounter::with_opts(opts(
                    "p2p_inbound_host_full_total",
                    "Inbound peers refused because their host held its share of the places.",
                )),
            ),
            p2p_addr_rate_limited: registered(
                &r,
                IntCounter::with_opts(opts(
                    "p2p_addr_rate_limited_total",
                    "Gossiped addresses dropped unread, over their peer's rate.",
                )),
            ),
            p2p_tx_over_allowance: registered(
                &r,
                IntCounter::with_opts(opts(
                    "p2p_tx_over_allowance_total",
                    "Transactions from inbound peers dropped unchecked, over their host's allowance.",
                )),
            ),
            rocksdb_size: registered(
                &r,
                IntGauge::with_opts(opts(
                    "rocksdb_size_bytes",
                    "Bytes of the index store's SST files.",
                )),
            ),
            rocksdb_block_cache_usage: registered(
                &r,
                IntGauge::with_opts(opts(
                    "rocksdb_block_cache_usage_bytes",
                    "Bytes held in the index store's block cache.",
                )),
            ),
            rocksdb_block_cache_hits: registered(
                &r,
                IntCounter::with_opts(opts(
                    "rocksdb_block_cache_hits_total",
                    "Index store reads answered by the block cache.",
                )),
            ),
            rocksdb_block_cache_misses: registered(
                &r,
                IntCounter::with_opts(opts(
                    "rocksdb_block_cache_misses_total",
                    "Index store reads that missed the block cache.",
                )),
            ),
            disk_free: registered(
                &r,
                IntGauge::with_opts(opts(
                    "disk_free_bytes",
                    "Free bytes on the fullest file system holding the data folder.",
                )),
            ),
            registry: r,
        }
    }

    /// Everything, in the Prometheus text format (version 0.0.4).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = TextEncoder::new().encode_utf8(&self.registry.gather(), &mut out) {
            tracing::warn!("metrics not encoded: {e}");
        }
        out
    }

    /// Records one answered Electrum request of `method` (a label from a fixed set).
    pub fn electrum_request(&self, method: &'static str, took: Duration, failed: bool) {
        self.electrum_requests.with_label_values(&[method]).inc();
        self.electrum_request_duration
            .with_label_values(&[method])
            .observe(took.as_secs_f64());
        if failed {
            self.electrum_request_errors
                .with_label_values(&[method])
                .inc();
        }
    }

    /// Records what answering a request of `method` read: index rows and bytes.
    pub fn electrum_read(&self, method: &'static str, rows: u64, bytes: u64) {
        self.electrum_read_rows
            .with_label_values(&[method])
            .inc_by(rows);
        self.electrum_read_bytes
            .with_label_values(&[method])
            .inc_by(bytes);
    }

    /// Records one compact filter request: `message` (`cfilters`, `cfheaders`, `cfcheckpt`)
    /// over `transport` (`p2p`, `http`).
    pub fn bip157_request(&self, message: &'static str, transport: &'static str) {
        self.bip157_requests
            .with_label_values(&[message, transport])
            .inc();
    }

    /// Records one index batch: `connected` and `disconnected` blocks holding `txs` new
    /// transactions, written in `took`.
    pub fn index_batch(&self, connected: u64, disconnected: u64, txs: u64, took: Duration) {
        self.index_blocks
            .with_label_values(&["connected"])
            .inc_by(connected);
        self.index_blocks
            .with_label_values(&["disconnected"])
            .inc_by(disconnected);
        self.index_transactions.inc_by(txs);
        self.index_batch_write.observe(took.as_secs_f64());
    }
}

/// The sum of a counter over all its label values.
pub fn total(counter: &IntCounterVec) -> u64 {
    let families = counter.collect();
    let metrics = families.iter().flat_map(|family| family.get_metric());
    metrics.map(|m| m.get_counter().get_value() as u64).sum()
}

/// Brings a counter up to a total counted elsewhere (RocksDB's statistics); a total that went
/// down (a reopened store) is ignored.
pub fn catch_up(counter: &IntCounter, total: u64) {
    if let Some(more) = total.checked_sub(counter.get()) {
        counter.inc_by(more);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_registers_and_encodes_with_its_prefix() {
        let m = metrics();
        m.electrum_request("server.ping", Duration::from_millis(2), false);
        m.index_batch(3, 1, 7, Duration::from_millis(5));
        let text = m.encode();
        assert!(
            text.contains("cairn_electrum_requests_total{method=\"server.ping\"}"),
            "{text}"
        );
        assert!(
            text.contains("cairn_index_blocks_total{event=\"disconnected\"}"),
            "{text}"
        );
        assert!(
            text.contains("cairn_index_batch_write_seconds_bucket"),
            "{text}"
        );
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.starts_with("cairn_"), "{line}");
        }
    }

    #[test]
    fn totals_add_every_label() {
        let c = IntCounterVec::new(Opts::new("t_total", "t"), &["l"]).unwrap();
        c.with_label_values(&["a"]).inc_by(2);
        c.with_label_values(&["b"]).inc_by(5);
        assert_eq!(total(&c), 7);
    }

    #[test]
    fn catch_up_never_goes_back() {
        let c = IntCounter::new("c_total", "c").unwrap();
        catch_up(&c, 10);
        catch_up(&c, 4);
        assert_eq!(c.get(), 10);
        catch_up(&c, 12);
        assert_eq!(c.get(), 12);
    }
}
