//! The timer inbound peers share for transaction announcements (Core's `NextInvToInbounds`):
//! all of them hear of new transactions at the same instants, drawn as Poisson waits, so a spy
//! that connects many times learns nothing earlier than with one connection.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Average wait between announcements to inbound peers (Core's
/// `INBOUND_INVENTORY_BROADCAST_INTERVAL`).
pub const INBOUND_INTERVAL: Duration = Duration::from_secs(5);

/// A wait drawn from an exponential distribution with mean `average` (Core's
/// `rand_exp_duration`).
pub fn poisson(average: Duration) -> Duration {
    let u: f64 = rand::random::<f64>().max(f64::MIN_POSITIVE);
    average.mul_f64(-u.ln())
}

/// The next time inbound peers are told of new transactions.
pub struct InboundTimer(Mutex<Instant>);

impl Default for InboundTimer {
    fn default() -> Self {
        InboundTimer(Mutex::new(Instant::now()))
    }
}

impl InboundTimer {
    /// The shared time, or, once it has passed, a new one a Poisson wait after `now`.
    pub fn next(&self, now: Instant) -> Instant {
        let mut at = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if *at <= now {
            *at = now + poisson(INBOUND_INTERVAL);
        }
        *at
    }
}
