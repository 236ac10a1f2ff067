//! The `blockchain.transaction.*` namespace: getting a transaction, its merkle proofs (of its
//! txid; of its wtxid through the coinbase's witness commitment, protocol 1.7), finding one by
//! its position, and broadcasting (one, a package, or a dry run), each broadcast's checks paid
//! before they run and a refusal kept for the same request against the same mempool and tip.
//! The merkle-witness proof is the view's ([`crate::view::WitnessProof`]); this renders it.

use bitcoin::hex::DisplayHex;
use bitcoin::{BlockHash, Txid};
use serde_json::{json, Value};

use super::context::{view_err, Ctx};
use super::rpc::RpcError;
use super::verbose;
use crate::index::query::TxPosition;
use crate::mempool::linearize::metered;
use crate::mempool::Rejection;
use crate::notify::Changes;
use crate::view::merkle::rpc_hex;
use crate::view::{ChainView, Cost};
use crate::work::cost;
use crate::work::{KeptVerdict, VerdictKey};

/// Borrowed views of transactions' bytes.
fn slices(raws: &[Vec<u8>]) -> Vec<&[u8]> {
    raws.iter().map(Vec::as_slice).collect()
}

/// The refusal of a broadcast the network's rules refuse (`why`).
pub(crate) fn rejected(why: &str) -> RpcError {
    RpcError::bad_request(format!(
        "the transaction was rejected by network rules.\n\n{why}"
    ))
}

impl Ctx<'_> {
    pub(crate) fn transaction_get(&self, txid: Txid, verbose: bool) -> Result<Value, RpcError> {
        let view = self.view();
        let unknown =
            || RpcError::bad_request(format!("no transaction {txid} in the chain or the mempool"));
        if !verbose {
            let raw = view
                .raw_transaction(&txid)
                .map_err(view_err)?
                .ok_or_else(unknown)?;
            return Ok(json!(raw.to_lower_hex_string()));
        }
        let found = view
            .transaction(&txid, false)
            .map_err(view_err)?
            .ok_or_else(unknown)?;
        let network = view.network();
        let Some(block) = found.confirmation else {
            return Ok(verbose::unconfirmed(&found.tx, &found.raw, network));
        };
        let tip = view.tip().map(|(h, _)| h).unwrap_or(block.height);
        Ok(verbose::transaction(
            &found.tx,
            &found.raw,
            network,
            &block.hash,
            block.time,
            tip - block.height + 1,
        ))
    }

    fn merkle_of(
        view: &ChainView<'_>,
        height: u32,
        pos: u32,
    ) -> Result<(Vec<String>, Txid), RpcError> {
        let found = view
            .txid_at(height, pos)
            .map_err(view_err)?
            .ok_or_else(|| RpcError::bad_request(format!("no block at height {height}")))?;
        let Some(at) = found else {
            return Err(RpcError::bad_request(format!(
                "no transaction at position {pos} of block {height}"
            )));
        };
        Ok((at.branch.iter().map(rpc_hex).collect(), at.txid))
    }

    /// Where the confirmed transaction `txid` is, checked against the height the client
    /// expects when it gives one.
    pub(crate) fn confirmed_position(
        view: &ChainView<'_>,
        txid: Txid,
        height: Option<u64>,
    ) -> Result<TxPosition, RpcError> {
        let pos = view
            .tx_position(&txid)
            .map_err(view_err)?
            .ok_or_else(|| RpcError::bad_request(format!("transaction {txid} is not confirmed")))?;
        if let Some(asked) = height {
            if asked != u64::from(pos.height) {
                return Err(RpcError::bad_request(format!(
                    "transaction {txid} is not in block {asked} (it is in {})",
                    pos.height
                )));
            }
        }
        Ok(pos)
    }

    pub(crate) fn get_merkle(&self, txid: Txid, height: Option<u64>) -> Result<Value, RpcError> {
        // 1.7 made the height optional (the parser requires it before).
        let view = self.view();
        let pos = Self::confirmed_position(&view, txid, height)?;
        let (merkle, _) = Self::merkle_of(&view, pos.height, pos.pos)?;
        let mut result = json!({"block_height": pos.height, "merkle": merkle, "pos": pos.pos});
        if self.v17() {
            let hash: Option<BlockHash> = view.block_hash(pos.height);
            result["block_hash"] = json!(hash.map(|h| h.to_string()));
        }
        Ok(result)
    }

    pub(crate) fn id_from_pos(
        &self,
        height: u32,
        pos: u32,
        want_merkle: bool,
    ) -> Result<Value, RpcError> {
        let (merkle, txid) = Self::merkle_of(&self.view(), height, pos)?;
        if want_merkle {
            Ok(json!({"tx_hash": txid.to_string(), "merkle": merkle}))
        } else {
            Ok(json!(txid.to_string()))
        }
    }
}

impl Ctx<'_> {
    /// `get_merkle_witness(txid, height=None, cb=false)`.
    pub(crate) fn get_merkle_witness(
        &self,
        txid: Txid,
        height: Option<u64>,
        cb: bool,
    ) -> Result<Value, RpcError> {
        let view = self.view();
        let pos = Self::confirmed_position(&view, txid, height)?;
        let proof = view
            .witness_proof(&txid, pos.height, pos.pos)
            .map_err(view_err)?;
        let hexes = |branch: &[[u8; 32]]| branch.iter().map(rpc_hex).collect::<Vec<_>>();
        let mut result = json!({
            "wtxid": proof.wtxid.to_string(),
            "block_height": proof.confirmation.height,
            "block_hash": proof.confirmation.hash.to_string(),
            "pos": proof.pos,
        });
        let key = match proof.branch.1 {
            true => "wmerkle",
            false => "merkle",
        };
        result[key] = json!(hexes(&proof.branch.0));
        if cb {
            let coinbase = bitcoin::consensus::serialize(&proof.coinbase);
            result["cb_tx"] = json!(coinbase.to_lower_hex_string());
            result["cb_proof"] = json!(hexes(&proof.coinbase_branch));
        }
        Ok(result)
    }
}

impl Ctx<'_> {
    /// Charges a broadcast's checks, which read outside the view
    /// ([`crate::work::broadcast_checks`]), beyond what was `paid` for them before they ran.
    fn charge_checks(&self, raws: &[&[u8]], refused: bool, linearized: u64, paid: Cost) {
        let cost = crate::work::broadcast_checks(raws, refused, linearized);
        self.meter.add(Cost {
            rows: cost.rows.saturating_sub(paid.rows),
            bytes: 0,
        });
    }

    /// The key a `kind` answer for `raws` is kept under, decided against the mempool and the
    /// tip now, and the answer kept under it, if any ([`crate::work::VerdictCache`]).
    pub(crate) fn kept_verdict(
        &self,
        kind: &str,
        raws: &[&[u8]],
    ) -> Result<(VerdictKey, Option<KeptVerdict>), RpcError> {
        self.mempool()?;
        let model = &self.backend.model;
        let kept = self.backend.verdicts.lookup(model, kind, raws);
        kept.ok_or_else(|| RpcError::bad_request("this server keeps no mempool"))
    }

    /// Keeps `verdict`, decided against the state `key` names, if the tip and the mempool are
    /// still that state, `writes` generations on; else a later request is checked again.
    fn keep_verdict(
        &self,
        kind: &str,
        raws: &[&[u8]],
        key: VerdictKey,
        writes: u64,
        verdict: KeptVerdict,
    ) {
        let model = &self.backend.model;
        (self.backend.verdicts).keep_now(model, (kind, raws), &key, writes, verdict);
    }

    /// Charges an answer given again from the verdicts kept: a refused broadcast's 10 units
    /// ([`crate::work::broadcast_checks`]), its checks not run again, so that a flood of
    /// repeats costs its sender as a flood of refusals does.
    pub(crate) fn charge_repeat(&self) {
        self.meter.add(crate::work::cost::repeated());
    }

    /// `broadcast(raw_tx)`, its checks' estimated cost `paid` before; a refusal is kept under
    /// `key` for the same request against the same mempool and tip.
    fn accept_broadcast(&self, raw: &[u8], paid: Cost, key: VerdictKey) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        let index = self.backend.model.index();
        let (accepted, linearized) = metered(|| pool.accept(raw, index));
        self.charge_checks(&[raw], accepted.is_err(), linearized, paid);
        let accepted = accepted.map_err(|e| {
            let refused = e.to_string();
            // A store that failed may answer next time. A refusal writes nothing: kept only
            // when nothing else wrote meanwhile either (else the refusal may be stale).
            if !matches!(e, Rejection::Backend(_)) {
                self.keep_verdict("broadcast", &[raw], key, 0, Err(refused.clone()));
            }
            rejected(&refused)
        })?;
        let txid = accepted.txid;
        self.backend.notifier.accepted(index, accepted);
        Ok(json!(txid.to_string()))
    }

    /// `broadcast_package(raw_txs, verbose=false)`: a child with its parents, child last. Each
    /// accepted transaction is relayed; the answer says whether all were, with a reason per
    /// refused one (the `verbose` form, bitcoind's own `submitpackage` answer, is not offered:
    /// the parser refuses it).
    fn accept_package(&self, raws: &[Vec<u8>], paid: Cost) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        let index = self.backend.model.index();
        let (results, linearized) = metered(|| pool.accept_package(raws, index));
        let refused = match &results {
            Ok(package) => package.each.iter().any(Result::is_err),
            Err(_) => true,
        };
        self.charge_checks(&slices(raws), refused, linearized, paid);
        let package =
            results.map_err(|e| RpcError::bad_request(format!("the package was rejected: {e}")))?;
        let mut errors = Vec::new();
        // What left the pool for the package (evicted) is told whether or not it entered.
        let mut changes = Changes::touching(package.touched);
        for (raw, result) in raws.iter().zip(package.each) {
            match result {
                Ok(accepted) => {
                    self.backend.notifier.announce(accepted.txid);
                    changes.extend(Changes::accepted(&accepted));
                }
                Err(Rejection::AlreadyKnown | Rejection::AlreadyInMempool) => {}
                Err(e) => {
                    let txid = bitcoin::consensus::deserialize::<bitcoin::Transaction>(raw)
                        .map(|t| t.compute_txid().to_string())
                        .unwrap_or_default();
                    errors.push(json!({"txid": txid, "error": e.to_string()}));
                }
            }
        }
        if !changes.is_empty() {
            self.backend.notifier.publish(index, changes);
        }
        if errors.is_empty() {
            Ok(json!({"success": true}))
        } else {
            Ok(json!({"success": false, "errors": errors}))
        }
    }

    /// `testmempoolaccept(raw_txs)`: the mempool's dry run ([`Mempool::test_accept`]), nothing
    /// relayed, in ElectrumX's shape: per transaction `txid`, `wtxid`, `allowed` when decided
    /// and `reason` (the package's error, else the transaction's) when refused. Charged as a
    /// broadcast's checks, `paid` before they ran; the answer is kept under `key` for the same
    /// request against the same mempool and tip.
    fn dry_run(&self, raws: &[Vec<u8>], paid: Cost, key: VerdictKey) -> Result<Value, RpcError> {
        let pool = self.mempool()?;
        let (results, linearized) = metered(|| pool.test_accept(raws, self.backend.model.index()));
        // A dry run keeps nothing, so it is charged as a refusal whatever its answer.
        self.charge_checks(&slices(raws), true, linearized, paid);
        let results = results.map_err(|e| RpcError::bad_request(e.to_string()))?;
        let answer = Value::Array(
            results
                .iter()
                .map(|r| {
                    let mut item =
                        json!({"txid": r.txid.to_string(), "wtxid": r.wtxid.to_string()});
                    if let Some(verdict) = &r.verdict {
                        item["allowed"] = json!(verdict.is_ok());
                    }
                    let reason = r.package_error.clone().or_else(|| match &r.verdict {
                        Some(Err(e)) => Some(e.to_string()),
                        _ => None,
                    });
                    if let Some(reason) = reason {
                        item["reason"] = json!(reason);
                    }
                    item
                })
                .collect(),
        );
        let failed = results
            .iter()
            .any(|r| matches!(r.verdict, Some(Err(Rejection::Backend(_)))));
        if !failed {
            self.keep_verdict(
                "testmempoolaccept",
                &slices(raws),
                key,
                0,
                Ok(answer.clone()),
            );
        }
        Ok(answer)
    }
}

impl Ctx<'_> {
    /// `broadcast(raw_tx)`: refused again from the verdicts kept when the same transaction was
    /// refused against the same mempool and tip, else checked, its estimated cost paid first.
    pub(crate) fn broadcast(&self, raw: &[u8]) -> Result<Value, RpcError> {
        let (key, kept) = self.kept_verdict("broadcast", &[raw])?;
        if let Some(Err(refused)) = kept {
            self.charge_repeat();
            return Err(rejected(&refused));
        }
        let paid = self.pay_ahead(&[raw.to_vec()], false)?;
        self.accept_broadcast(raw, paid, key)
    }

    /// `testmempoolaccept(raw_txs)`: the answer kept for the same request against the same
    /// mempool and tip, else the dry run, its estimated cost paid first.
    pub(crate) fn test_mempool_accept(&self, raws: &[Vec<u8>]) -> Result<Value, RpcError> {
        let slices: Vec<&[u8]> = raws.iter().map(Vec::as_slice).collect();
        let (key, kept) = self.kept_verdict("testmempoolaccept", &slices)?;
        if let Some(kept) = kept {
            self.charge_repeat();
            return kept.map_err(RpcError::bad_request);
        }
        let paid = self.pay_ahead(raws, true)?;
        self.dry_run(raws, paid, key)
    }

    /// `broadcast_package(raw_txs)`: the package's checks paid before they run
    /// ([`Ctx::accept_package`]).
    pub(crate) fn broadcast_package(&self, raws: &[Vec<u8>]) -> Result<Value, RpcError> {
        self.mempool()?;
        let paid = self.pay_ahead(raws, false)?;
        self.accept_package(raws, paid)
    }

    /// Charges the host, before a broadcast's, a package's or a dry run's checks run, what they
    /// are estimated to cost ([`crate::work::broadcast_checks`]: their bytes, legacy hashing,
    /// signature checks, and for a `dry_run` the refusal's price it always pays); refuses them
    /// (`excessive resource usage`) without running when that takes the host to the hard limit
    /// (its session is then closed), or an exempt connection's group to its own (an exempt
    /// connection's account starts afresh with each connection). What they cost beyond is
    /// charged after. Returns what was paid.
    fn pay_ahead(&self, raws: &[Vec<u8>], dry_run: bool) -> Result<Cost, RpcError> {
        let limits = self.backend.config.cost;
        let slices: Vec<&[u8]> = raws.iter().map(Vec::as_slice).collect();
        let estimate = crate::work::broadcast_checks(&slices, dry_run, 0);
        let units = cost::units(0, estimate, 0);
        // Refused, the host is at the hard limit, and its session is closed as any over its
        // cost.
        if !self.host.cost.pay_ahead(units, &limits) {
            crate::metrics::metrics().electrum_refused_ahead.inc();
            return Err(super::counted::excessive());
        }
        Ok(estimate)
    }
}
