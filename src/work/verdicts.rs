//! Answers to dry runs (`testmempoolaccept`) and refused broadcasts, kept for as long as the
//! mempool and the tip they were decided against stay as they were, ten seconds at most: a
//! client that asks again and again is answered from here, its scripts not run again, as Core's
//! script cache makes a repeated check cheap (`validation.cpp`, `CheckInputScripts` with
//! `g_scriptExecutionCache`).

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use bitcoin::hashes::{sha256, Hash, HashEngine};
use serde_json::Value;

use crate::view::ReadModel;

/// Answers kept at most: a dry run's answer is a few hundred bytes per transaction, 25 at most.
const KEPT: usize = 256;
/// Seconds an answer may be given again for at most.
const PERIOD_SECS: u64 = 10;
/// Where periods count from.
static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// What an answer was decided for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerdictKey {
    /// The request's kind and transactions, hashed.
    request: sha256::Hash,
    /// The mempool's generation (every change makes a new one).
    generation: u64,
    /// The ten seconds it was decided in: the mempool's minimum fee decays with time alone
    /// (Core's rolling minimum fee), so no answer outlives them.
    period: u64,
    /// The tip it was decided at.
    tip: Option<bitcoin::BlockHash>,
}

impl VerdictKey {
    /// The key of request `kind`'s answer for `raws`, decided against the mempool at
    /// `generation` and the chain at `tip`.
    pub fn new(
        kind: &str,
        raws: &[&[u8]],
        generation: u64,
        tip: Option<bitcoin::BlockHash>,
    ) -> Self {
        let mut engine = sha256::Hash::engine();
        engine.input(kind.as_bytes());
        for raw in raws {
            engine.input(&(raw.len() as u64).to_le_bytes());
            engine.input(raw);
        }
        let since_start = START.get_or_init(std::time::Instant::now).elapsed();
        VerdictKey {
            request: sha256::Hash::from_engine(engine),
            generation,
            period: since_start.as_secs() / PERIOD_SECS,
            tip,
        }
    }
}

impl VerdictKey {
    /// Whether this is `earlier`'s request against the same tip in the same period, the
    /// mempool `writes` generations on.
    pub fn follows(&self, earlier: &VerdictKey, writes: u64) -> bool {
        (self.request, self.tip, self.period) == (earlier.request, earlier.tip, earlier.period)
            && self.generation == earlier.generation + writes
    }
}

/// An answer kept: a dry run's, or a broadcast's refusal (its message).
pub type Verdict = Result<Value, String>;

/// The answers kept, the oldest forgotten first.
#[derive(Debug, Default)]
pub struct VerdictCache(Mutex<VecDeque<(VerdictKey, Verdict)>>);

impl VerdictCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(VerdictKey, Verdict)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer kept for `key`, if any.
    pub fn get(&self, key: &VerdictKey) -> Option<Verdict> {
        let kept = self.lock();
        kept.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    /// Keeps `verdict` for `key`; answers of an older mempool, tip or period go first, then the
    /// oldest.
    pub fn put(&self, key: VerdictKey, verdict: Verdict) {
        let mut kept = self.lock();
        kept.retain(|(k, _)| {
            (k.generation, k.period, k.tip) == (key.generation, key.period, key.tip) && *k != key
        });
        if kept.len() >= KEPT {
            kept.pop_front();
        }
        kept.push_back((key, verdict));
    }

    /// The key of request `kind`'s answer for `raws` against `model`'s mempool and index tip
    /// now, and the answer kept under it (`None`: no mempool).
    pub fn lookup(
        &self,
        model: &ReadModel,
        kind: &str,
        raws: &[&[u8]],
    ) -> Option<(VerdictKey, Option<Verdict>)> {
        let key = key_now(model, kind, raws)?;
        Some((key, self.get(&key)))
    }

    /// Keeps `verdict`, decided against the state `decided` names, under the key of the same
    /// request against `model` now when that is the same tip and period, the mempool `writes`
    /// generations on (the check's own); else a later request is checked again.
    pub fn keep_now(
        &self,
        model: &ReadModel,
        (kind, raws): (&str, &[&[u8]]),
        decided: &VerdictKey,
        writes: u64,
        verdict: Verdict,
    ) {
        let now = key_now(model, kind, raws).filter(|now| now.follows(decided, writes));
        if let Some(now) = now {
            self.put(now, verdict);
        }
    }
}

/// The key of request `kind`'s answer for `raws` against `model`'s mempool and index tip now.
fn key_now(model: &ReadModel, kind: &str, raws: &[&[u8]]) -> Option<VerdictKey> {
    let generation = model.mempool()?.generation();
    let tip = model.index().tip().map(|(_, hash)| hash);
    Some(VerdictKey::new(kind, raws, generation, tip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_is_kept_while_the_mempool_and_the_tip_stay() {
        let cache = VerdictCache::default();
        let raw: &[u8] = b"a transaction";
        let key = VerdictKey::new("test", &[raw], 7, None);
        cache.put(key, Ok(json!([{"allowed": true}])));
        assert_eq!(cache.get(&key), Some(Ok(json!([{"allowed": true}]))));
        assert_eq!(
            cache.get(&VerdictKey::new("broadcast", &[raw], 7, None)),
            None,
            "another kind"
        );
        let later = VerdictKey::new("test", &[raw], 8, None);
        assert_eq!(cache.get(&later), None, "the mempool changed");
        cache.put(later, Err("refused".into()));
        assert_eq!(cache.get(&key), None, "older answers go");
        for i in 0..KEPT as u16 + 5 {
            let other: &[u8] = &i.to_le_bytes();
            cache.put(VerdictKey::new("test", &[other], 8, None), Ok(json!(i)));
        }
        assert_eq!(cache.lock().len(), KEPT);
    }
}
