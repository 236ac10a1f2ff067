//! What a host's requests cost, decaying over time: ElectrumX's session cost (aiorpcX
//! `Session.cost`, decayed by `cost_decay_per_sec`), kept per host so that its connections
//! share one account, and kept a while after they end so that reconnecting does not clear it
//! (ElectrumX's `retained_cost`).

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// A decaying cost, in ElectrumX's units.
#[derive(Debug)]
pub struct Account(Mutex<Charged>);

/// A cost as of an instant.
#[derive(Debug, Clone, Copy)]
pub struct Charged {
    /// The cost then.
    pub units: f64,
    /// When.
    pub at: Instant,
}

impl Charged {
    /// The cost at `now`, having decayed by `decay_per_sec` since.
    fn at(self, now: Instant, decay_per_sec: f64) -> f64 {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        (self.units - secs * decay_per_sec).max(0.0)
    }
}

impl Default for Account {
    fn default() -> Self {
        Account::from(Charged {
            units: 0.0,
            at: Instant::now(),
        })
    }
}

impl From<Charged> for Account {
    fn from(charged: Charged) -> Self {
        Account(Mutex::new(charged))
    }
}

impl Account {
    /// The cost now, decayed by `decay_per_sec` since it was last charged.
    pub fn level(&self, decay_per_sec: f64) -> f64 {
        let charged = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        charged.at(Instant::now(), decay_per_sec)
    }

    /// Adds `units` to the cost decayed to now; returns the new cost.
    pub fn charge(&self, units: f64, decay_per_sec: f64) -> f64 {
        let mut charged = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let units = charged.at(now, decay_per_sec) + units.max(0.0);
        *charged = Charged { units, at: now };
        units
    }

    /// The cost as last charged, to be kept when the host leaves.
    pub fn snapshot(&self) -> Charged {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_cost_decays_to_zero_and_never_below() {
        let ago = Instant::now() - Duration::from_secs(10);
        let account = Account::from(Charged {
            units: 100.0,
            at: ago,
        });
        let level = account.level(5.0);
        assert!((49.0..=50.0).contains(&level), "{level}");
        assert!(account.level(20.0) == 0.0);
        let after = account.charge(10.0, 5.0);
        assert!((59.0..=60.0).contains(&after), "{after}");
        assert!(
            account.charge(-5.0, 0.0) >= after,
            "nothing is ever refunded"
        );
    }
}
