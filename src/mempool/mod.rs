//! cairn's mempool: unconfirmed transactions checked against the index's unspent outputs and
//! each other, their scripts verified by the kernel, under the relay policy of
//! [`crate::policy`] (standardness, the policy script interpreter, data rules) with the rules of
//! the pool itself: finality (`finality`), Core 31's clusters (`cluster`, `linearize`) or Knots's
//! chain limits (`limits`), TRUC (`truc`), full replace-by-fee (`replacement`), eviction by
//! descendant score (`evict`) with the rolling minimum fee (`rolling`), packages and dry runs
//! (`package`), projected blocks (`block_builder`, `projection`), and the memory Core would count
//! for it (`memory`). The tables themselves are in `inner`. This file accepts a transaction:
//! pre-checks, scripts, admission under the write lock; `queries` answers the read side and
//! `revalidate` follows the chain.

mod block_builder;
mod chunk_index;
mod cluster;
mod coins;
mod evict;
pub mod fees;
mod finality;
mod inner;
mod limits;
pub mod linearize;
pub mod memory;
mod package;
pub mod persist;
pub mod projection;
mod queries;
mod relatives;
mod replacement;
mod revalidate;
mod rolling;
mod scripts;
#[cfg(test)]
mod tests;
mod trim;
mod truc;

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock, TryLockError};

use bitcoin::constants::COINBASE_MATURITY;
use bitcoin::{OutPoint, Transaction, TxOut, Txid, Wtxid};

use crate::config::{MempoolConfig, PolicyProfile, TrucPolicy};
use crate::index::silent_payments::TxTweak;
use crate::index::Index;

use crate::policy::{consensus, data_rules, inputs, standard};
pub use crate::policy::{Rejection, MAX_PACKAGE_COUNT, MIN_RELAY_PER_KVB};
use crate::types::ScriptHash;
pub use coins::{CoinError, CoinSource};
use inner::{Inner, Writing};
use package::Staged;
pub use package::{PackageAccepted, TestAccept, Tested, MAX_TEST_FEE_PER_KVB};
use persist::MempoolFile;
pub use persist::{LoadStats, PersistError};
pub use projection::ProjectedBlock;
use replacement::replacement;
use scripts::scripts_in_cores_order;

/// Core 30's and 31's `DEFAULT_BLOCK_MIN_TX_FEE`, sat per 1,000 vbytes: what a chunk must pay to
/// be mined at all.
pub const BLOCK_MIN_TX_FEE_PER_KVB: u64 = 1;

/// One mempool transaction.
#[derive(Debug, Clone)]
pub struct MempoolEntry {
    /// The transaction.
    pub tx: Transaction,
    /// Its serialization.
    pub raw: Vec<u8>,
    /// Its id.
    pub txid: Txid,
    /// Its witness id.
    pub wtxid: Wtxid,
    /// Fee in satoshis.
    pub fee: u64,
    /// Virtual size (counting 20 bytes a sigop where more, as Core's `GetTxSize`).
    pub vsize: u64,
    /// Weight.
    pub weight: u64,
    /// Sigop cost (Core's `GetTransactionSigOpCost`).
    pub sigop_cost: u64,
    /// The outputs its inputs spend.
    pub prevouts: Vec<TxOut>,
    /// Whether any input spends another mempool transaction.
    pub has_unconfirmed_parent: bool,
    /// When it entered, seconds since 1970 (kept across restarts by [`persist`]).
    pub time: i64,
    /// The height of each spent coin's block, `None` for a mempool parent's, as they were when
    /// it entered: its relative lock times (BIP68) are evaluated from them again after every
    /// block.
    pub coin_heights: Vec<Option<u32>>,
    /// The height and hash of the block of its highest confirmed coin when `coin_heights` were
    /// read (Core's `LockPoints::maxInputBlock`): while that block is in the chain, so are the
    /// others and the heights hold; after a reorg took it out they are read again.
    pub coins_block: Option<(u32, bitcoin::BlockHash)>,
    /// Its silent-payment tweak data (BIP352), computed once when its scripts passed; `None`
    /// when it is not eligible (or not checked yet).
    pub sp_tweak: Option<TxTweak>,
}

impl MempoolEntry {
    /// Computes its silent-payment tweak data, once its scripts passed: each silent-payment
    /// scan of the mempool then reads it instead of computing it again for every subscriber.
    fn compute_tweak(&mut self) {
        self.sp_tweak = crate::index::silent_payments::tx_tweak(&self.tx, &self.prevouts);
    }

    /// Its weight, or 20 vbytes a sigop if more (Core's `GetSigOpsAdjustedWeight`): what the
    /// cluster limits count.
    pub fn adjusted_weight(&self) -> u64 {
        inputs::adjusted_weight(self.weight, self.sigop_cost as usize)
    }

    /// Fee rate in sat/vB.
    pub fn feerate(&self) -> f64 {
        self.fee as f64 / self.vsize.max(1) as f64
    }

    /// Script hashes this transaction funds or spends.
    pub fn scripthashes(&self) -> impl Iterator<Item = ScriptHash> + '_ {
        self.tx
            .output
            .iter()
            .filter(|o| !o.script_pubkey.is_op_return())
            .chain(self.prevouts.iter())
            .map(|o| ScriptHash::of(&o.script_pubkey))
    }
}

/// A transaction that passed [`Mempool::check`], with what [`Mempool::admit`] reads again.
struct Checked {
    entry: MempoolEntry,
    /// Its inputs that spend mempool transactions.
    from_parents: Vec<OutPoint>,
    /// The relay fee its size needs (what a replacement must add besides).
    needed: u64,
    /// A single transaction's checks against the pool ([`Inner::check_against_pool`]): the
    /// mempool generation they read and what it replaces.
    against_pool: Option<(u64, Vec<Txid>)>,
}

/// What a transaction's inputs spend, found by [`Mempool::resolve_inputs`].
struct ResolvedInputs {
    /// The outputs spent, in input order.
    prevouts: Vec<TxOut>,
    /// Whether any input spends a mempool transaction.
    has_unconfirmed_parent: bool,
    /// The inputs that spend mempool transactions (not staged package members).
    from_parents: Vec<OutPoint>,
    /// The height of each spent coin's block, in input order (`None` for a mempool parent's).
    heights: Vec<Option<u32>>,
}

/// What accepting a transaction changed.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The accepted transaction.
    pub txid: Txid,
    /// Its witness id.
    pub wtxid: Wtxid,
    /// Transactions it replaced (with their descendants).
    pub replaced: Vec<Txid>,
    /// Script hashes whose mempool part changed.
    pub touched: HashSet<ScriptHash>,
}

/// A transaction that entered the mempool lately ([`Mempool::recent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecentTx {
    /// The transaction.
    pub txid: Txid,
    /// Its fee, satoshis.
    pub fee: u64,
    /// Its virtual size (sigop-adjusted).
    pub vsize: u64,
    /// What its outputs pay in all, satoshis.
    pub value: u64,
}

/// What a script's unconfirmed transactions do to it (Esplora's `mempool_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptActivity {
    /// Transactions that fund or spend it.
    pub txs: u64,
    /// Outputs paying it.
    pub funded: u64,
    /// Their sum in satoshis.
    pub funded_sum: u64,
    /// Inputs spending its outputs.
    pub spent: u64,
    /// Their sum in satoshis.
    pub spent_sum: u64,
}

/// Verifies a transaction's input scripts (decoded and raw) given the outputs they spend,
/// wording failures as Core 31 does where `core_31`, else as Knots 29.4.
type ScriptCheck = fn(&Transaction, &[u8], &[TxOut], bool) -> Result<(), Rejection>;

/// The mempool: its tables behind one lock, and how it checks, takes, trims and answers.
///
/// Its `impl` is spread over a file per rule, each citing the Core code it follows: accepting
/// one transaction (here), packages and dry runs (`package.rs`), trimming (`trim.rs`), what a
/// block changes (`revalidate.rs`) and the read side (`queries.rs`); the tables' own rules are
/// on `Inner` likewise. A rule is found by its name, and checked against Core's file of the
/// same subject.
pub struct Mempool {
    inner: RwLock<Inner>,
    /// The fee rates of the last generation any request asked for.
    fees: Mutex<Option<Arc<fees::FeeRates>>>,
    /// Held by the one request projecting the mempool ([`Mempool::fee_rates`]).
    building: Mutex<()>,
    /// Scripts whose mempool part changed in an acceptance that was then refused (a newcomer
    /// the size limit evicted after it replaced, expired or evicted others): handed out with
    /// the next acceptance's or block's, so their subscribers still hear of it.
    unannounced: Mutex<HashSet<ScriptHash>>,
    /// The rolling minimum fee after evictions; taken after `inner` where both are held.
    rolling: Mutex<rolling::RollingFee>,
    config: MempoolConfig,
    /// Script verification: the policy interpreter and the kernel ([`scripts_in_cores_order`]);
    /// unit tests put a stub.
    verify_scripts: ScriptCheck,
}

impl Mempool {
    /// An empty mempool.
    pub fn new(config: MempoolConfig) -> Self {
        let inner = Inner {
            enforce_truc: config.truc == TrucPolicy::Enforce,
            clusters: config.clusters(),
            ..Inner::default()
        };
        Mempool {
            inner: RwLock::new(inner),
            fees: Mutex::new(None),
            building: Mutex::new(()),
            unannounced: Mutex::new(HashSet::new()),
            rolling: Mutex::new(rolling::RollingFee::new(config.min_relay_per_kvb)),
            config,
            verify_scripts: scripts_in_cores_order,
        }
    }

    /// An empty mempool whose scripts are checked by `verify_scripts` instead of the policy
    /// interpreter and the kernel.
    #[cfg(test)]
    fn with_script_check(config: MempoolConfig, verify_scripts: ScriptCheck) -> Self {
        Mempool {
            verify_scripts,
            ..Mempool::new(config)
        }
    }

    /// The pool's generation: every change makes a new one, so an answer decided at one stays
    /// true while it lasts.
    pub fn generation(&self) -> u64 {
        self.read().generation
    }

    /// Whether a change is being made now (the pool's write lock held): a read would wait
    /// for it.
    pub fn writing(&self) -> bool {
        matches!(self.inner.try_read(), Err(TryLockError::WouldBlock))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> Writing<'_> {
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        inner.generation += 1;
        Writing(inner)
    }

    /// The projected blocks and the fee histogram ([`fees::FeeRates`]), computed once per
    /// change of the mempool however many requests ask, from a snapshot, outside the mempool's
    /// lock. One request builds at a time; the others are served the last projection
    /// meanwhile. Once a projection takes a millisecond or more, a changed mempool is projected
    /// again only after ten times its time has passed (snapshot included), so a stream of
    /// changes and requests spends at most a tenth of a core on it.
    pub fn fee_rates(&self) -> Arc<fees::FeeRates> {
        let last = self.last_fee_rates();
        if let Some(rates) = last.as_ref().filter(|r| r.serves(self.read().generation)) {
            return rates.clone();
        }
        let _building = match (self.building.try_lock(), last) {
            (Ok(guard), _) => guard,
            (Err(TryLockError::WouldBlock), Some(last)) => return last,
            (Err(TryLockError::WouldBlock), None) => {
                self.building.lock().unwrap_or_else(PoisonError::into_inner)
            }
            (Err(TryLockError::Poisoned(poisoned)), _) => poisoned.into_inner(),
        };
        // Another request may have built it while this one waited.
        let last = self.last_fee_rates();
        if let Some(rates) = last.filter(|r| r.serves(self.read().generation)) {
            return rates;
        }
        let started = std::time::Instant::now();
        let (generation, nodes) = self.read().projection_nodes();
        // The block's minimum fee rate: Core 30's and 31's `-blockmintxfee` of 1 sat/kvB under
        // Core's profile; Core 29's 1,000 (the relay fee) under Knots's.
        let block_min = match self.config.clusters() {
            true => BLOCK_MIN_TX_FEE_PER_KVB,
            false => self.config.min_relay_per_kvb,
        };
        let rates = Arc::new(fees::FeeRates::of(
            generation,
            &nodes,
            block_min,
            self.config.clusters(),
            started,
        ));
        *self.fees.lock().unwrap_or_else(PoisonError::into_inner) = Some(rates.clone());
        rates
    }

    fn last_fee_rates(&self) -> Option<Arc<fees::FeeRates>> {
        self.fees
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Saves the mempool to `path` in Core's `mempool.dat` format, parents before children;
    /// returns how many transactions were written.
    pub fn save(&self, path: &Path) -> Result<usize, PersistError> {
        let txs = self
            .read()
            .txs
            .iter()
            .map(|(txid, e)| (*txid, e.tx.clone(), e.time))
            .collect();
        persist::save(txs, path)
    }

    /// Loads a saved mempool, each transaction checked as a new one would be and handed to
    /// `on_accepted` once in; those older than [`persist::EXPIRY_SECS`] are skipped. `None`
    /// without a file.
    pub fn load(
        &self,
        index: &Index,
        path: &Path,
        mut on_accepted: impl FnMut(Accepted),
    ) -> Result<Option<LoadStats>, PersistError> {
        let Some(file) = MempoolFile::open(path)? else {
            return Ok(None);
        };
        let name = file.name().to_string();
        let oldest = persist::now() - persist::EXPIRY_SECS;
        let mut stats = LoadStats::default();
        for entry in file {
            let (tx, time) = entry?;
            if time <= oldest {
                stats.expired += 1;
                continue;
            }
            let raw = bitcoin::consensus::serialize(&tx);
            match self.accept_with(&raw, index, true, time) {
                Ok(accepted) => {
                    stats.accepted += 1;
                    on_accepted(accepted);
                }
                Err(
                    Rejection::AlreadyKnown
                    | Rejection::AlreadyInMempool
                    | Rejection::SameNonWitnessData,
                ) => stats.already_there += 1,
                Err(Rejection::Backend(e)) => {
                    let message = format!("the index cannot answer: {e}");
                    return Err(persist::format_error(&name, message));
                }
                Err(e) => {
                    tracing::debug!("{name}: transaction {} not loaded: {e}", tx.compute_txid());
                    stats.failed += 1;
                }
            }
        }
        Ok(Some(stats))
    }

    /// Checks a transaction and adds it.
    pub fn accept(&self, raw: &[u8], index: &Index) -> Result<Accepted, Rejection> {
        self.accept_with(raw, index, true, persist::now())
    }

    /// [`Mempool::accept`] against any chain: the seam benches and tools without an index use.
    pub fn accept_from(&self, raw: &[u8], coins: &dyn CoinSource) -> Result<Accepted, Rejection> {
        self.accept_with(raw, coins, true, persist::now())
    }

    /// As [`Mempool::accept`]; without `own_fee` the minimum relay fee is not asked of the
    /// transaction alone (a package parent whose child pays for it: [`Mempool::accept_package`]).
    fn accept_with(
        &self,
        raw: &[u8],
        index: &dyn CoinSource,
        own_fee: bool,
        time: i64,
    ) -> Result<Accepted, Rejection> {
        let mut checked = self.pre_check(raw, index, own_fee, time, &Staged::default())?;
        self.check_scripts(&checked)?;
        checked.entry.compute_tweak();
        self.admit(checked)
    }

    /// Every check of a new transaction but its scripts', in the order of Core's `PreChecks`:
    /// consensus, coinbase, standardness, then what is known, conflicts where `staged` allows
    /// no replacement, its inputs (from the mempool, `staged` package members or the chain),
    /// finality, fees and chain limits. Takes no write lock.
    fn pre_check(
        &self,
        raw: &[u8],
        index: &dyn CoinSource,
        own_fee: bool,
        time: i64,
        staged: &Staged,
    ) -> Result<Checked, Rejection> {
        let tx = consensus::decode(raw)?;
        let (txid, wtxid) = (tx.compute_txid(), tx.compute_wtxid());
        consensus::check_transaction(&tx)?;
        if tx.is_coinbase() {
            return Err(Rejection::Coinbase);
        }
        standard::check_standard(&tx, &self.config)?;
        finality::check_final_at_tip(&tx, index)?;
        self.check_new(&txid, &wtxid, index)?;
        if !staged.allows_replacement() && !self.read().direct_conflicts(&tx).is_empty() {
            return Err(Rejection::ReplacementDisallowed);
        }
        let inputs = self.resolve_inputs(&tx, index, staged)?;
        let lock_points = finality::sequence_locks(&tx, &inputs.heights, index);
        let (next, now) = finality::next_block(index);
        if !finality::locks_passed(lock_points, next, now) {
            return Err(Rejection::NonBip68Final);
        }
        let policy = &self.config;
        if policy.knots_data_rules {
            data_rules::check_output_sizes(&tx)?;
        }
        let fee = consensus::check_tx_inputs(&tx, &inputs.prevouts)?;
        inputs::check_inputs_standard(&tx, &inputs.prevouts, policy)?;
        if policy.knots_data_rules {
            data_rules::check_data_carried(&tx, &inputs.prevouts, policy.datacarrier_size)?;
        }
        inputs::check_witness_standard(&tx, &inputs.prevouts, policy)?;
        let sigops = inputs::sigop_cost(&tx, &inputs.prevouts);
        if policy.profile == PolicyProfile::Core {
            standard::check_ephemeral_fee(&tx, fee)?;
        }
        inputs::check_sigop_cost(sigops)?;
        let vsize = inputs::virtual_size(&tx, sigops);
        let needed = self.relay_fee(vsize);
        if own_fee {
            self.check_fee_rate(fee, vsize)?;
        }
        let candidate = truc::Candidate {
            tx: &tx,
            txid,
            wtxid,
            vsize,
        };
        let weight = inputs::adjusted_weight(tx.weight().to_wu(), sigops);
        // A package member's, before any script runs, as in Core's PreChecks; again under the
        // write lock. A single transaction's come once it is an entry, below.
        if !staged.is_single() {
            self.read().check_relatives(&candidate, weight)?;
        }
        let tx_weight = tx.weight().to_wu();
        let entry = MempoolEntry {
            tx,
            raw: raw.to_vec(),
            txid,
            wtxid,
            fee,
            vsize,
            weight: tx_weight,
            sigop_cost: sigops as u64,
            prevouts: inputs.prevouts,
            has_unconfirmed_parent: inputs.has_unconfirmed_parent,
            time,
            coins_block: finality::coins_block(&inputs.heights, index),
            coin_heights: inputs.heights,
            sp_tweak: None,
        };
        let against_pool = match staged.is_single() {
            true => {
                let inner = self.read();
                let replaced = inner.check_against_pool(&entry, &inputs.from_parents, needed)?;
                Some((inner.generation, replaced))
            }
            false => None,
        };
        Ok(Checked {
            entry,
            from_parents: inputs.from_parents,
            needed,
            against_pool,
        })
    }

    fn rolling_fee(&self) -> std::sync::MutexGuard<'_, rolling::RollingFee> {
        self.rolling.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The mempool's minimum fee now, satoshis per 1,000 vbytes: the rolling floor after
    /// evictions (0 when there is none), decayed for how full the pool is.
    pub fn min_fee_per_kvb(&self) -> u64 {
        let fullness = self.read().usage() as f64 / self.config.max_bytes.max(1) as f64;
        self.rolling_fee().floor(persist::now(), fullness)
    }

    /// The least fee rate a transaction needs to enter now, satoshis per 1,000 vbytes: the
    /// rolling floor or the minimum relay fee, the higher (bitcoind's `mempoolminfee`).
    pub fn entry_fee_per_kvb(&self) -> u64 {
        self.min_fee_per_kvb().max(self.config.min_relay_per_kvb)
    }

    /// The minimum (and incremental) relay fee rate, satoshis per 1,000 vbytes
    /// (`mempool_min_relay_fee`).
    pub fn min_relay_per_kvb(&self) -> u64 {
        self.config.min_relay_per_kvb
    }

    /// The relay fee `vsize` vbytes ask (Core's `GetFee`, rounded up).
    fn relay_fee(&self, vsize: u64) -> u64 {
        rolling::fee_for(self.config.min_relay_per_kvb, vsize)
    }

    /// Refuses `fee` for `vsize` vbytes under the mempool's minimum fee (Core's `CheckFeeRate`:
    /// the rolling floor, then the minimum relay fee).
    fn check_fee_rate(&self, fee: u64, vsize: u64) -> Result<(), Rejection> {
        let floor = rolling::fee_for(self.min_fee_per_kvb(), vsize);
        if floor > 0 && fee < floor {
            return Err(Rejection::MempoolMinFee { fee, needed: floor });
        }
        let needed = self.relay_fee(vsize);
        if fee < needed {
            return Err(Rejection::MinRelayFee { fee, needed });
        }
        Ok(())
    }

    /// Verifies a checked transaction's scripts ([`scripts_in_cores_order`]), then Knots's
    /// rules on the data they carry.
    fn check_scripts(&self, checked: &Checked) -> Result<(), Rejection> {
        let entry = &checked.entry;
        let core_31 = self.config.profile == PolicyProfile::Core;
        (self.verify_scripts)(&entry.tx, &entry.raw, &entry.prevouts, core_31)?;
        if self.config.knots_data_rules {
            data_rules::check_scripts(&entry.tx, &entry.prevouts).map_err(|(input, why)| {
                Rejection::PolicyScript {
                    input,
                    message: why.to_string(),
                }
            })?;
        }
        Ok(())
    }

    /// Adds a checked transaction under the write lock, after reading again everything read
    /// from the mempool before (under a read lock, while the scripts were checked): another
    /// acceptance may have run meanwhile, and two conflicting transactions must not both
    /// enter. Then Core's `LimitMempoolSize`: expiry, then the size limit.
    fn admit(&self, checked: Checked) -> Result<Accepted, Rejection> {
        let Checked {
            entry,
            from_parents,
            needed,
            against_pool,
        } = checked;
        let (txid, wtxid) = (entry.txid, entry.wtxid);
        let mut inner = self.write();
        // The read lock's verdict stands if no write came between (this one is the next).
        let replaced = match against_pool {
            Some((read_at, replaced)) if inner.generation == read_at + 1 => replaced,
            _ => inner.check_against_pool(&entry, &from_parents, needed)?,
        };
        let mut touched: HashSet<ScriptHash> = entry.scripthashes().collect();
        for r in &replaced {
            inner.remove_with_descendants(r, &mut touched);
        }
        inner.insert(entry);
        inner.expire(persist::now() - persist::EXPIRY_SECS, &mut touched);
        let kept = match inner.txs.contains_key(&txid) {
            true => self.evict_over_limit(&mut inner, &[txid], &mut touched),
            false => Err(Rejection::MempoolFull),
        };
        if let Err(full) = kept {
            self.keep_unannounced(touched);
            return Err(full);
        }
        touched.extend(self.take_unannounced());
        Ok(Accepted {
            txid,
            wtxid,
            replaced,
            touched,
        })
    }

    /// Keeps `touched` of a refused acceptance for the next change to hand out.
    fn keep_unannounced(&self, touched: HashSet<ScriptHash>) {
        let mut kept = self
            .unannounced
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        kept.extend(touched);
    }

    /// The scripts refused acceptances changed since the last call ([`Mempool::keep_unannounced`]).
    fn take_unannounced(&self) -> HashSet<ScriptHash> {
        std::mem::take(
            &mut *self
                .unannounced
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Refuses a transaction the mempool or the chain already has.
    fn check_new(
        &self,
        txid: &Txid,
        wtxid: &Wtxid,
        index: &dyn CoinSource,
    ) -> Result<(), Rejection> {
        if let Some(there) = self.read().txs.get(txid) {
            // Core's `PreChecks`: the same transaction, or the same one with another witness.
            return Err(match there.wtxid == *wtxid {
                true => Rejection::AlreadyInMempool,
                false => Rejection::SameNonWitnessData,
            });
        }
        let confirmed = index
            .is_confirmed(txid)
            .map_err(|e| Rejection::Backend(e.to_string()))?;
        if confirmed {
            return Err(Rejection::AlreadyKnown);
        }
        Ok(())
    }

    /// Finds what every input spends: an output of a mempool parent, or a confirmed unspent
    /// (and, for a coinbase's, mature) output; and the mempool transactions that spend the same.
    fn resolve_inputs(
        &self,
        tx: &Transaction,
        index: &dyn CoinSource,
        staged: &Staged,
    ) -> Result<ResolvedInputs, Rejection> {
        let tip = index.tip_height().unwrap_or(0);
        let mut resolved = ResolvedInputs {
            prevouts: Vec::with_capacity(tx.input.len()),
            has_unconfirmed_parent: false,
            from_parents: Vec::new(),
            heights: Vec::with_capacity(tx.input.len()),
        };
        let inner = self.read();
        for input in &tx.input {
            let op = input.previous_output;
            if let Some(parent) = inner.txs.get(&op.txid) {
                let out = parent
                    .tx
                    .output
                    .get(op.vout as usize)
                    .ok_or(Rejection::MissingInputs(op))?;
                resolved.prevouts.push(out.clone());
                resolved.has_unconfirmed_parent = true;
                resolved.from_parents.push(op);
                resolved.heights.push(None);
                continue;
            }
            if let Some(out) = staged.output(&op) {
                resolved.prevouts.push(out.clone());
                resolved.has_unconfirmed_parent = true;
                resolved.heights.push(None);
                continue;
            }
            let found = index
                .confirmed_unspent(&op)
                .map_err(|e| Rejection::Backend(e.to_string()))?;
            let Some(coin) = found else {
                return Err(Rejection::MissingInputs(op));
            };
            if coin.coinbase && tip + 1 - coin.height < COINBASE_MATURITY {
                return Err(Rejection::ImmatureCoinbase(op));
            }
            resolved.prevouts.push(coin.output);
            resolved.heights.push(Some(coin.height));
        }
        Ok(resolved)
    }
}
