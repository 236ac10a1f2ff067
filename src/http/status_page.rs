//! The status page: `GET /` (a self-contained page, no script or style from elsewhere, so it
//! works offline) and `GET /api/status`, the JSON it draws, for scripts too. The node's own
//! status (what `cairn status --json` prints) comes from the node; this module adds the rates,
//! the mempool's fee histogram and an hour of samples taken every [`SAMPLE_EVERY`].

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::{json, Value};

use crate::metrics::{metrics, total, transport};
use crate::view::ReadModel;

/// The page.
pub const PAGE: &str = include_str!("status.html");
/// How often a sample is taken.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Samples kept: an hour's.
const SAMPLES: usize = 720;
/// How far back the sync rate looks.
const RATE_WINDOW_SECS: f64 = 60.0;

/// The node's status as `cairn status --json` prints it, read when asked.
pub type NodeStatus = Box<dyn Fn() -> Value + Send + Sync>;

/// The node's status (as `cairn status --json`) as the page shows it: without `details`, peers'
/// addresses and the data folder are left out (the HTTP listener may be public; a node's peers
/// are its own business, as Core shows them only over its authenticated RPC).
pub fn public(mut value: Value, details: bool) -> Value {
    if !details {
        if let Some(node) = value.as_object_mut() {
            node.remove("datadir");
        }
        let peers = value
            .pointer_mut("/p2p/peers")
            .and_then(Value::as_array_mut);
        for peer in peers.into_iter().flatten() {
            if let Some(peer) = peer.as_object_mut() {
                peer.remove("addr");
            }
        }
    }
    value
}

/// One moment of the node.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Sample {
    /// Unix time, seconds.
    pub time: f64,
    /// The kernel's tip height.
    pub kernel_height: i64,
    /// The index tip's height (-1 before genesis).
    pub index_height: i64,
    /// The best header's height.
    pub best_header_height: i64,
    /// Transactions in the mempool.
    pub mempool_transactions: u64,
    /// Their virtual size.
    pub mempool_vsize: u64,
    /// Electrum and HTTP requests answered since start.
    pub requests: u64,
}

/// The last hour of samples, and the mempool's fee histogram as of the last one (it sorts the
/// whole mempool: built once a sample, not once a request).
#[derive(Default)]
pub struct Samples(Mutex<Recent>);

/// What [`Samples`] holds: the samples, oldest first, and the last fee histogram (fee rate,
/// virtual size at it and above).
#[derive(Default)]
struct Recent {
    samples: VecDeque<Sample>,
    histogram: Vec<(f64, u64)>,
}

impl Samples {
    /// Takes a sample of the node now, dropping the oldest past an hour's.
    pub fn take(&self, model: &ReadModel) {
        let sample = sample_now(model);
        let histogram = model
            .mempool()
            .map(|m| m.fee_histogram())
            .unwrap_or_default();
        let mut taken = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if taken.samples.len() == SAMPLES {
            taken.samples.pop_front();
        }
        taken.samples.push_back(sample);
        taken.histogram = histogram;
    }

    fn list(&self) -> (Vec<Sample>, Vec<(f64, u64)>) {
        let taken = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (
            taken.samples.iter().copied().collect(),
            taken.histogram.clone(),
        )
    }
}

fn sample_now(model: &ReadModel) -> Sample {
    let (mempool_transactions, mempool_vsize) = match model.mempool() {
        Some(m) => {
            let (count, vsize) = m.size();
            (count as u64, vsize)
        }
        None => (0, 0),
    };
    let m = metrics();
    Sample {
        time: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
        kernel_height: model.validator().tip().height,
        index_height: model
            .index()
            .tip()
            .map_or(-1, |(height, _)| i64::from(height)),
        best_header_height: model.validator().best_header().height,
        mempool_transactions,
        mempool_vsize,
        requests: total(&m.electrum_requests).saturating_add(total(&m.http_requests)),
    }
}

/// Blocks validated per second over the last minute of samples, once there are two.
fn blocks_per_second(samples: &[Sample]) -> Option<f64> {
    let last = samples.last()?;
    let first = samples
        .iter()
        .find(|s| last.time - s.time <= RATE_WINDOW_SECS)?;
    let seconds = last.time - first.time;
    (seconds > 0.0).then(|| (last.kernel_height - first.kernel_height) as f64 / seconds)
}

/// Seconds until the kernel reaches the best header at `rate` blocks a second: 0 in sync,
/// unknown while nothing moves.
fn eta_seconds(kernel: i64, best: i64, rate: Option<f64>) -> Option<f64> {
    let behind = best.saturating_sub(kernel);
    if behind <= 0 {
        return Some(0.0);
    }
    rate.filter(|r| *r > 0.0).map(|r| behind as f64 / r)
}

/// Requests per second between the last two samples.
fn requests_per_second(samples: &[Sample]) -> Option<f64> {
    let [.., before, last] = samples else {
        return None;
    };
    let seconds = last.time - before.time;
    (seconds > 0.0).then(|| last.requests.saturating_sub(before.requests) as f64 / seconds)
}

/// `GET /api/status`.
pub fn api_status(model: &ReadModel, node: Option<&NodeStatus>, samples: &Samples) -> Value {
    let now = sample_now(model);
    let (list, histogram) = samples.list();
    let rate = blocks_per_second(&list);
    let m = metrics();
    let per_transport = |gauge: &prometheus::IntGaugeVec| {
        let mut map = serde_json::Map::new();
        for t in [
            transport::TCP,
            transport::TLS,
            transport::WS,
            transport::WSS,
        ] {
            map.insert(t.into(), json!(gauge.with_label_values(&[t]).get()));
        }
        Value::Object(map)
    };
    json!({
        "node": node.map(|f| f()),
        "best_header_height": now.best_header_height,
        "sync": {
            "blocks_per_second": rate,
            "eta_seconds": eta_seconds(now.kernel_height, now.best_header_height, rate),
        },
        "electrum": {
            "connections": per_transport(&m.electrum_connections),
            "subscriptions": per_transport(&m.electrum_subscriptions),
        },
        "mempool": {
            "enabled": model.mempool().is_some(),
            "transactions": now.mempool_transactions,
            "vsize": now.mempool_vsize,
            "fee_histogram": histogram,
        },
        "requests_per_second": requests_per_second(&list),
        "sample_every_seconds": SAMPLE_EVERY.as_secs(),
        "samples": list,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(time: f64, kernel_height: i64, requests: u64) -> Sample {
        Sample {
            time,
            kernel_height,
            index_height: kernel_height,
            best_header_height: 100,
            mempool_transactions: 0,
            mempool_vsize: 0,
            requests,
        }
    }

    #[test]
    fn rates_come_from_the_last_minute_and_the_last_two_samples() {
        assert_eq!(blocks_per_second(&[]), None);
        assert_eq!(blocks_per_second(&[at(0.0, 5, 0)]), None);
        // The sample at t=0 is over a minute before the last: the rate starts at t=10.
        let samples = [at(0.0, 0, 0), at(10.0, 10, 4), at(70.0, 40, 10)];
        assert_eq!(blocks_per_second(&samples), Some(0.5));
        assert_eq!(requests_per_second(&samples), Some(0.1));
        assert_eq!(requests_per_second(&samples[..1]), None);
        // A counter that went back (it cannot; still) gives 0, not a wrap.
        assert_eq!(
            requests_per_second(&[at(0.0, 0, 9), at(5.0, 0, 3)]),
            Some(0.0)
        );
    }

    #[test]
    fn without_details_peers_addresses_and_the_data_folder_are_left_out() {
        let status = json!({
            "network": "regtest", "datadir": "/home/x/.cairn",
            "p2p": {"listen": null, "known_addresses": 3, "peers": [{"addr": "1.2.3.4:8333", "inbound": true, "user_agent": "/a/"}]},
        });
        let public_view = public(status.clone(), false);
        assert_eq!(public_view["datadir"], Value::Null);
        assert_eq!(
            public_view["p2p"]["peers"],
            json!([{"inbound": true, "user_agent": "/a/"}])
        );
        assert_eq!(public_view["p2p"]["known_addresses"], 3);
        assert_eq!(public(status.clone(), true), status);
    }

    #[test]
    fn eta_is_zero_in_sync_and_unknown_while_stalled() {
        assert_eq!(eta_seconds(100, 100, None), Some(0.0));
        assert_eq!(eta_seconds(101, 100, None), Some(0.0));
        assert_eq!(eta_seconds(50, 100, Some(0.0)), None);
        assert_eq!(eta_seconds(50, 100, None), None);
        assert_eq!(eta_seconds(50, 100, Some(2.0)), Some(25.0));
    }
}
