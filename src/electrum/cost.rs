//! What an Electrum request costs, and what a host's cost earns it: ElectrumX's rules
//! (aiorpcX `_throttled_request`): under the soft limit a request runs at once; between the
//! soft and the hard limit it waits first, up to [`REQUEST_SLEEP`] as the cost nears the hard
//! limit; at the hard limit the session is told "excessive resource usage" and closed. The cost
//! decays all the while. One unit is ElectrumX's: [`BANDWIDTH_UNIT`] bytes sent or received
//! (`BANDWIDTH_UNIT_COST`), [`ROWS_PER_UNIT`] index rows, [`READ_BYTES_PER_UNIT`] bytes read
//! from the store and the block files, and [`BASE`] for any request.

use std::time::Duration;

use crate::config::CostLimits;
use crate::view::Cost;

/// Bytes of a request and its answer (or a notification) worth one unit: ElectrumX's
/// `BANDWIDTH_UNIT_COST`.
pub const BANDWIDTH_UNIT: f64 = 5_000.0;
/// Index rows (and blocks' spent outputs, transactions) read worth one unit: a history of
/// 50 entries costs about what ElectrumX charges (`len(history) / 50`).
pub const ROWS_PER_UNIT: f64 = 50.0;
/// Bytes read from the store and the block files worth one unit: a whole 2 MB block is 40.
pub const READ_BYTES_PER_UNIT: f64 = 50_000.0;
/// What any request costs besides: its parse, dispatch and round trip.
pub const BASE: f64 = 0.05;
/// What a connection costs its host as it is accepted (its handshakes, its session): a host
/// that reconnects in a loop pays for it.
pub const CONNECTION: f64 = 1.0;
/// The longest a request waits for its turn when its host's cost nears the hard limit
/// (ElectrumX's `REQUEST_SLEEP`, 2,500 ms).
pub const REQUEST_SLEEP: Duration = Duration::from_millis(2_500);

/// What a request may do, by its host's cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Run now.
    Go,
    /// Run after waiting this long.
    Wait(Duration),
    /// Close the session.
    Close,
}

impl CostLimits {
    /// What a request may do when its host's cost is `level`.
    pub fn verdict(&self, level: f64) -> Verdict {
        if self.hard > 0.0 && level >= self.hard {
            return Verdict::Close;
        }
        if self.soft <= 0.0 || level <= self.soft {
            return Verdict::Go;
        }
        let span = match self.hard > self.soft {
            true => self.hard - self.soft,
            false => self.soft,
        };
        let fraction = ((level - self.soft) / span).min(1.0);
        Verdict::Wait(REQUEST_SLEEP.mul_f64(fraction))
    }
}

/// The units of `requests` requests that read `read` and moved `bytes` bytes in and out.
pub fn units(requests: usize, read: Cost, bytes: usize) -> f64 {
    BASE * requests as f64
        + read.rows as f64 / ROWS_PER_UNIT
        + read.bytes as f64 / READ_BYTES_PER_UNIT
        + bytes as f64 / BANDWIDTH_UNIT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_wait_more_as_the_cost_nears_the_hard_limit_then_close() {
        let limits = CostLimits::default();
        assert_eq!(limits.verdict(0.0), Verdict::Go);
        assert_eq!(limits.verdict(1_000.0), Verdict::Go);
        assert_eq!(
            limits.verdict(5_500.0),
            Verdict::Wait(REQUEST_SLEEP.mul_f64(0.5))
        );
        assert_eq!(limits.verdict(10_000.0), Verdict::Close);
        let off = CostLimits {
            soft: 0.0,
            hard: 0.0,
            decay_per_sec: 0.0,
        };
        assert_eq!(off.verdict(1e12), Verdict::Go);
    }

    #[test]
    fn a_unit_is_electrumx_bandwidth_unit_or_its_worth_in_reads() {
        let nothing = Cost::default();
        assert_eq!(units(0, nothing, 5_000), 1.0);
        let rows = Cost {
            rows: 50,
            bytes: 50_000,
        };
        assert_eq!(units(0, rows, 0), 2.0);
        assert!((units(20, nothing, 0) - 1.0).abs() < 1e-9);
    }
}
