//! 1p1c packages from peers (Core 31's `Find1P1CPackage` in node/txdownloadman_impl.cpp and
//! `ProcessPackageResult` in net_processing.cpp): a transaction refused only for a fee a child
//! may pay is remembered apart from other refusals and not tried alone again; when it arrives
//! (again, asked for by an orphan child's request for its missing parents) and the same peer
//! sent a child of it that waits as an orphan, the two are tried together as one package.
//! Children from the same peer only, so another peer's fake children cannot crowd out the real
//! one; one package per arrival, and a refused pair is never tried again (its key joins the
//! fee-only refusals), so a peer gets at most one package check per orphan it sent.

use bitcoin::hashes::Hash;
use bitcoin::{Transaction, Txid, Wtxid};

use super::super::context::MempoolAccess;
use super::super::tx_requests::package_key;
use super::Session;
use crate::mempool::linearize::metered;
use crate::mempool::Rejection;
use crate::notify::Changes;

impl Session<'_> {
    /// Tries `parent` (refused alone for its fee, now or lately) with the newest orphan child
    /// of it this peer sent that was not tried with it before.
    pub(super) fn try_with_child(&self, parent: &Transaction, raw: &[u8], m: &MempoolAccess) {
        let requests = &self.ctx.tx_requests;
        let wtxid = parent.compute_wtxid();
        let candidates = self
            .ctx
            .orphans
            .children_from(&parent.compute_txid(), self.id);
        let fresh = |(_, child): &(Txid, Wtxid)| {
            !requests.reconsiderable(&package_key(&[wtxid, *child]))
                && !requests.recently_rejected(&child.to_byte_array())
        };
        let Some((_, child_wtxid)) = candidates.into_iter().find(fresh) else {
            return;
        };
        let Some(child_raw) = self.ctx.orphans.raw(&child_wtxid) else {
            return;
        };
        let key = package_key(&[wtxid, child_wtxid]);
        let raws = [raw.to_vec(), child_raw];
        let (outcome, linearized) = metered(|| m.mempool.accept_package(&raws, &m.index));
        let refused = !matches!(&outcome, Ok(p) if p.each.iter().all(Result::is_ok));
        self.charge_tx(&[&raws[0], &raws[1]], refused, linearized);
        let Ok(package) = outcome else {
            requests.rejected_reconsiderable(&key);
            return;
        };
        let mut changes = Changes::touching(package.touched);
        let mut accepted = Vec::new();
        for a in package.each.iter().flatten() {
            tracing::debug!("peer {}: accepted {} in a 1p1c package", self.id, a.txid);
            m.notifier.announce(a.txid);
            changes.extend(Changes::accepted(a));
            accepted.push(a.txid);
        }
        m.notifier.publish(&m.index, changes);
        match package.each.last() {
            Some(Ok(_)) => self.ctx.orphans.remove(&child_wtxid),
            Some(Err(e)) => self.child_refused(&raws[1], child_wtxid, e, &key, m),
            None => {}
        }
        for txid in accepted {
            self.accept_orphans_of(txid, m);
        }
    }

    /// The child of a 1p1c package was refused: for a fee or as a package (a package
    /// replacement's rules), the pair is not tried again; for anything else, the child is refused
    /// for good and leaves the orphans (Core's `ProcessPackageResult`).
    fn child_refused(
        &self,
        raw: &[u8],
        wtxid: Wtxid,
        refusal: &Rejection,
        key: &[u8; 32],
        m: &MempoolAccess,
    ) {
        let requests = &self.ctx.tx_requests;
        requests.rejected_reconsiderable(key);
        let Ok(child) = bitcoin::consensus::deserialize::<Transaction>(raw) else {
            return;
        };
        let for_fee = matches!(
            refusal,
            Rejection::PackageFailed(_) | Rejection::PackageReplacement(_)
        ) || m.mempool.child_may_pay(&child, refusal);
        if !for_fee {
            requests.rejected(&[wtxid.to_byte_array()]);
            self.ctx.orphans.remove(&wtxid);
        }
    }
}
