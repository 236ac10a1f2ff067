//! A script's questions: its history (confirmed, then mempool), its status hash, its balance,
//! its unspent outputs and its statistics. Confirmed first, from the view's snapshot; then the
//! mempool.

use std::collections::HashSet;
use std::sync::Arc;

use bitcoin::hashes::{sha256, Hash};
use bitcoin::{Amount, OutPoint, SignedAmount, Txid};

use super::cache::Cached;
use super::model::{ChainView, StatusState, ViewError};
use super::status;
use super::tx::FoundTx;
use crate::index::query::{ConfirmedEntry, QueryError, HISTORY_PAGE};
use crate::types::{HistoryEntry, ScriptHash, TxNum};

/// Cached history entries that count as one row read for an inline job
/// ([`crate::types::inline_rows`]): an entry made into an answer's takes about a tenth of a row's
/// read (`cargo bench --bench hot_paths`: 10,000 entries as JSON text in 0.95 ms).
const CACHED_ENTRIES_PER_ROW: u64 = 10;

/// An output paying a script that nothing spends (the mempool included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unspent {
    /// The transaction that created it.
    pub txid: Txid,
    /// Its index.
    pub vout: u32,
    /// The creating block's height; `None` in the mempool.
    pub height: Option<u32>,
    /// What it pays.
    pub value: Amount,
}

/// A script's balance, as Electrum's `get_balance` answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Balance {
    /// What its confirmed unspent outputs hold.
    pub confirmed: Amount,
    /// What its mempool transactions add (positive) or take (negative).
    pub unconfirmed: SignedAmount,
}

/// What a script's confirmed (or mempool) transactions did to it, serialized as Esplora's
/// `chain_stats` and `mempool_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScriptStats {
    /// Outputs paying it.
    pub funded_txo_count: u64,
    /// Their sum.
    pub funded_txo_sum: u64,
    /// Those the chain spends.
    pub spent_txo_count: u64,
    /// Their sum.
    pub spent_txo_sum: u64,
    /// Transactions in its history.
    pub tx_count: u64,
}

impl ChainView<'_> {
    /// The script's mempool entries in protocol order.
    fn mempool_history(&self, sh: &ScriptHash) -> Vec<HistoryEntry> {
        let entries = self.mempool().map(|p| p.history(sh)).unwrap_or_default();
        // Work for the answer as cached entries are: an inline job counts them (a refused
        // one's answer is dropped, so what is returned here no longer matters).
        crate::types::inline_rows(entries.len() as u64 / CACHED_ENTRIES_PER_ROW);
        entries
    }

    /// A script's status hash: its confirmed history (from the cache, extended by newer rows,
    /// for a long one) then its mempool entries. `None` when it has no history; `TooLarge` past
    /// `limit` entries.
    pub fn status(&self, sh: &ScriptHash, limit: usize) -> Result<Option<String>, ViewError> {
        let (mut engine, count) = self.confirmed_status(sh, limit)?;
        let mempool = self.mempool_history(sh);
        if count.saturating_add(mempool.len()) > limit {
            return Err(QueryError::TooLarge { limit }.into());
        }
        if count == 0 && mempool.is_empty() {
            return Ok(None);
        }
        for m in &mempool {
            status::feed(&mut engine, &m.txid, m.height.electrum());
        }
        Ok(Some(sha256::Hash::from_engine(engine).to_string()))
    }

    /// The hash state and entry count of a script's confirmed history.
    fn confirmed_status(&self, sh: &ScriptHash, limit: usize) -> Result<StatusState, ViewError> {
        let view = &self.index;
        let cached = self.model.statuses.get(sh, |h, b| view.has_block(h, b));
        let ((mut engine, mut count), from) = match cached {
            Some(c) => (c.value, c.next),
            None => ((sha256::HashEngine::default(), 0), TxNum(0)),
        };
        view.history_pages(sh, from, HISTORY_PAGE, |page| {
            count += page.len();
            if count > limit {
                return Err(QueryError::TooLarge { limit });
            }
            for entry in page {
                status::feed(&mut engine, &entry.txid, i64::from(entry.height));
            }
            Ok(true)
        })?;
        if count >= self.model.settings.status_from {
            if let Some(tip) = view.tip() {
                let cached = Cached {
                    value: (engine.clone(), count),
                    tip,
                    next: view.next_txnum(),
                };
                self.model.statuses.put(*sh, cached, 1);
            }
        }
        Ok((engine, count))
    }

    /// A script's whole history, confirmed entries in chain order (a long one from the cache,
    /// extended by newer rows) then mempool ones; `TooLarge` past `limit` entries.
    pub fn history(&self, sh: &ScriptHash, limit: usize) -> Result<Vec<HistoryEntry>, ViewError> {
        let view = &self.index;
        let cached = self.model.histories.get(sh, |h, b| view.has_block(h, b));
        // Each entry from the cache is work for the answer: an inline job counts it.
        let entries = cached.as_ref().map_or(0, |c| c.value.len() as u64);
        if !crate::types::inline_rows(entries / CACHED_ENTRIES_PER_ROW) {
            return Err(QueryError::NotInline.into());
        }
        let (known, from) = match &cached {
            Some(c) => (c.value.as_slice(), c.next),
            None => (&[][..], TxNum(0)),
        };
        let mut newer = Vec::new();
        view.history_pages(sh, from, HISTORY_PAGE, |page| {
            if known.len() + newer.len() + page.len() > limit {
                return Err(QueryError::TooLarge { limit });
            }
            newer.extend_from_slice(page);
            Ok(true)
        })?;
        let count = known.len() + newer.len();
        if count >= self.model.settings.history_from && (cached.is_none() || !newer.is_empty()) {
            if let Some(tip) = view.tip() {
                let entries = Arc::new([known, &newer[..]].concat());
                let next = view.next_txnum();
                let cached = Cached {
                    value: entries,
                    tip,
                    next,
                };
                self.model.histories.put(*sh, cached, count);
            }
        }
        let mempool = self.mempool_history(sh);
        if count + mempool.len() > limit {
            return Err(QueryError::TooLarge { limit }.into());
        }
        let mut all: Vec<HistoryEntry> = Vec::with_capacity(count + mempool.len());
        all.extend(known.iter().chain(&newer).map(|e| HistoryEntry::from(*e)));
        all.extend(mempool);
        Ok(all)
    }

    /// How many confirmed entries a script's history has; `TooLarge` past `limit`. Reads
    /// keys only.
    pub fn confirmed_len(&self, sh: &ScriptHash, limit: usize) -> Result<usize, ViewError> {
        Ok(self.index.history_len(sh, TxNum(0), limit)?)
    }

    /// Visits a script's confirmed history in chain order, in pages of at most `page` entries;
    /// stops early when `visit` returns `false`. For answers streamed as they are read.
    pub fn confirmed_pages(
        &self,
        sh: &ScriptHash,
        page: usize,
        visit: impl FnMut(&[ConfirmedEntry]) -> Result<bool, QueryError>,
    ) -> Result<(), ViewError> {
        Ok(self.index.history_pages(sh, TxNum(0), page, visit)?)
    }

    /// One page of a script's confirmed history, newest first: at most `limit` entries, all
    /// older than `last_seen` when it is given. `None` when `last_seen` is not in the history
    /// (Esplora then answers an empty page).
    pub fn confirmed_page(
        &self,
        sh: &ScriptHash,
        last_seen: Option<&Txid>,
        limit: usize,
    ) -> Result<Option<Vec<ConfirmedEntry>>, ViewError> {
        let below = match last_seen {
            Some(txid) => match self.index.history_txnum(sh, txid)? {
                Some(txnum) => Some(txnum),
                None => return Ok(None),
            },
            None => None,
        };
        Ok(Some(self.index.history_newest(sh, below, limit)?))
    }

    /// A script's mempool entries in protocol order (every input confirmed first), each with
    /// its fee.
    pub fn mempool_entries(&self, sh: &ScriptHash) -> Vec<HistoryEntry> {
        self.mempool_history(sh)
    }

    /// The `n` transactions of a script's mempool history that entered last, newest first,
    /// with what their inputs spend.
    pub fn mempool_transactions(&self, sh: &ScriptHash, n: usize) -> Vec<FoundTx> {
        let entries = self
            .mempool()
            .map(|p| p.newest_of_script(sh, n))
            .unwrap_or_default();
        entries
            .into_iter()
            .map(|e| FoundTx {
                prevouts: e.prevouts.into_iter().map(Some).collect(),
                tx: e.tx,
                raw: e.raw,
                confirmation: None,
            })
            .collect()
    }

    /// What a script's mempool transactions do to it.
    pub fn mempool_stats(&self, sh: &ScriptHash) -> ScriptStats {
        let activity = self
            .mempool()
            .map(|p| p.script_activity(sh))
            .unwrap_or_default();
        ScriptStats {
            funded_txo_count: activity.funded,
            funded_txo_sum: activity.funded_sum,
            spent_txo_count: activity.spent,
            spent_txo_sum: activity.spent_sum,
            tx_count: activity.txs,
        }
    }

    /// A script's balance: what is confirmed, and what the mempool adds or takes.
    pub fn balance(&self, sh: &ScriptHash) -> Result<Balance, ViewError> {
        let confirmed = Amount::from_sat(self.index.balance(sh)?);
        let delta = self.mempool().map(|p| p.balance_delta(sh)).unwrap_or(0);
        Ok(Balance {
            confirmed,
            unconfirmed: SignedAmount::from_sat(delta),
        })
    }

    /// The outputs paying a script that nothing spends: confirmed ones in chain order that no
    /// mempool transaction spends, then the mempool's. `TooLarge` past `limit` outputs in all.
    pub fn unspent(&self, sh: &ScriptHash, limit: usize) -> Result<Vec<Unspent>, ViewError> {
        let confirmed = self.index.unspent(sh, limit)?;
        let pool = self.mempool();
        let mut out: Vec<Unspent> = confirmed
            .iter()
            .filter(|u| !pool.is_some_and(|p| p.is_spent(&OutPoint::new(u.txid, u.vout))))
            .map(|u| Unspent {
                txid: u.txid,
                vout: u.vout,
                height: Some(u.height),
                value: Amount::from_sat(u.value),
            })
            .collect();
        for (txid, vout, value) in pool.map(|p| p.unspent(sh)).unwrap_or_default() {
            if out.len() >= limit {
                return Err(QueryError::TooLarge { limit }.into());
            }
            out.push(Unspent {
                txid,
                vout,
                height: None,
                value: Amount::from_sat(value),
            });
        }
        Ok(out)
    }

    /// What a script's confirmed transactions paid it and spent of it, reading every
    /// transaction of its history (`TooLarge` past `limit` transactions).
    pub fn script_stats(&self, sh: &ScriptHash, limit: usize) -> Result<ScriptStats, ViewError> {
        let history = self.index.history(sh, limit)?;
        let mut stats = ScriptStats {
            tx_count: history.len() as u64,
            ..ScriptStats::default()
        };
        for entry in &history {
            let tx = self.confirmed_of_history(&entry.txid)?.tx;
            let pays = |o: &bitcoin::TxOut| {
                !o.script_pubkey.is_op_return() && ScriptHash::of(&o.script_pubkey) == *sh
            };
            let spent: HashSet<u32> = match tx.output.iter().any(pays) {
                true => self
                    .index
                    .spenders(&entry.txid)?
                    .unwrap_or_default()
                    .iter()
                    .map(|s| s.vout)
                    .collect(),
                false => HashSet::new(),
            };
            for (vout, out) in tx.output.iter().enumerate().filter(|(_, o)| pays(o)) {
                let value = out.value.to_sat();
                stats.funded_txo_count += 1;
                stats.funded_txo_sum = stats.funded_txo_sum.saturating_add(value);
                if spent.contains(&(vout as u32)) {
                    stats.spent_txo_count += 1;
                    stats.spent_txo_sum = stats.spent_txo_sum.saturating_add(value);
                }
            }
        }
        Ok(stats)
    }
}
