//! Pings, as Core's `MaybeSendPing`: one at once, right after the handshake and then every
//! `PING_INTERVAL`, each with a random nonce so that the round trip it measures cannot be
//! answered before the ping arrives. The lowest round trip protects an inbound peer from
//! eviction (`m_min_ping_time`).

use std::time::Duration;

use tokio::time::Instant;

/// Core's `PING_INTERVAL`.
pub const PING_INTERVAL: Duration = Duration::from_secs(120);

/// The ping in flight and when the last one went out.
#[derive(Default)]
pub struct Pinger {
    in_flight: Option<(u64, Instant)>,
    last_sent: Option<Instant>,
}

impl Pinger {
    /// The nonce of a ping to send now: none is in flight and the last went out `every` ago
    /// (or never); `force` sends one anyway (a quiet peer), replacing the one in flight.
    pub fn due(&mut self, every: Duration, force: bool) -> Option<u64> {
        let now = Instant::now();
        let waited = self
            .last_sent
            .is_none_or(|t| now.duration_since(t) >= every);
        if !(force || (self.in_flight.is_none() && waited)) {
            return None;
        }
        let nonce = rand::random::<u64>();
        self.in_flight = Some((nonce, now));
        self.last_sent = Some(now);
        Some(nonce)
    }

    /// When the last ping went out.
    pub fn last_sent(&self) -> Option<Instant> {
        self.last_sent
    }

    /// A `pong`: the round trip, when it answers the ping in flight.
    pub fn pong(&mut self, nonce: u64) -> Option<Duration> {
        match self.in_flight {
            Some((sent, at)) if sent == nonce => {
                self.in_flight = None;
                Some(at.elapsed())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_ping_at_a_time_and_only_its_own_pong_counts() {
        let mut p = Pinger::default();
        let first = p
            .due(PING_INTERVAL, false)
            .expect("right after the handshake");
        assert!(p.due(Duration::ZERO, false).is_none(), "one in flight");
        assert!(p.pong(first ^ 1).is_none(), "another nonce");
        assert!(p.pong(first).is_some());
        assert!(p.pong(first).is_none(), "answered once");
        assert!(p.due(PING_INTERVAL, false).is_none(), "not yet due");
        let forced = p.due(PING_INTERVAL, true).expect("a quiet peer");
        assert!(p.pong(forced).is_some());
    }
}
