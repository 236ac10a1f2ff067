//! 1p1c packages from peers (Core 31's `Find1P1CPackage` in node/txdownloadman_impl.cpp and
//! `ProcessPackageResult` in net_processing.cpp): a transaction refused only for a fee a child
//! may pay is remembered apart from other refusals and not tried alone again; when it arrives
//! (again, asked for by an orphan child's request for its missing parents) and the same peer
//! sent a child of it that waits as an orphan, the two are tried together as one package.
//! Children from the same peer only, so another peer's fake children cannot crowd out the real
//! one; one package per arrival, and a refused pair is never tried again (its key joins the
//! fee-only refusals), so a peer gets at most one package check per orphan it sent.

use bitcoin::hashes::Hash;
use bitcoin::Transaction;

use super::super::context::MempoolAccess;
use super::super::tx_requests::package_key;
use super::Session;
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
        let found = candidates.into_iter().find_map(|(txid, child_raw)| {
            let child: Transaction = bitcoin::consensus::deserialize(&child_raw).ok()?;
            let key = package_key(&[wtxid, child.compute_wtxid()]);
            let fresh = !requests.reconsiderable(&key)
                && !requests.recently_rejected(&child.compute_wtxid().to_byte_array());
            fresh.then_some((txid, child_raw, key))
        });
        let Some((child_txid, child_raw, key)) = found else {
            return;
        };
        let raws = [raw.to_vec(), child_raw];
        let Ok(package) = m.mempool.accept_package(&raws, &m.index) else {
            requests.rejected_reconsiderable(&key);
            return;
        };
        let all_in = package.each.iter().all(Result::is_ok);
        let mut changes = Changes {
            scripts: Some(package.touched),
            added: Some(Default::default()),
        };
        for accepted in package.each.into_iter().flatten() {
            tracing::debug!(
                "peer {}: accepted {} in a 1p1c package",
                self.id,
                accepted.txid
            );
            m.notifier.announce(accepted.txid);
            changes.extend(Changes::accepted(&accepted));
        }
        m.notifier.publish(&m.index, changes);
        if !all_in {
            requests.rejected_reconsiderable(&key);
            return;
        }
        self.ctx.orphans.remove(&child_txid);
        self.accept_orphans_of(parent.compute_txid(), m);
        self.accept_orphans_of(child_txid, m);
    }
}
