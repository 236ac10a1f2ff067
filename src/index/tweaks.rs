//! Silent-payment tweaks in the index (`silent_payments`, off by default): whether they are
//! built, and building those of blocks indexed while they were not, from the kernel's blocks
//! and undo data, in batches that each record how far they got (a crash resumes there), as the
//! filters' backfill does.

use std::time::{Duration, Instant};

use bitcoin::BlockHash;
use rayon::prelude::*;
use rocksdb::WriteBatch;

use super::error::IndexError;
use super::rows::{prepare, Extras};
use super::writer::block_tweaks;
use super::Index;
use crate::kernel::Validator;
use crate::store::schema::{cf, meta, BlockTweaks};
use crate::store::Store;

/// Heights built per batch: 100 mainnet blocks are about 300,000 transactions, whose tweak rows
/// (about 15 MB) the batch holds before it is written.
const BACKFILL_BATCH: u32 = 100;

/// Records in the store whether tweaks are built from `from` on (`None`: not built). Turned
/// on over blocks indexed without them (or a store upgraded from schema 3), every tweak from
/// `from` is built before they are served; turned off, the store says so.
pub(super) fn mark(store: &Store, from: Option<u32>) -> Result<(), IndexError> {
    let marked_off = store.get(cf::META, meta::TWEAKS_OFF)?.is_some();
    let mut batch = WriteBatch::default();
    let handle = store.cf(cf::META);
    match from {
        Some(from) if marked_off => {
            batch.delete_cf(handle, meta::TWEAKS_OFF);
            batch.put_cf(handle, meta::TWEAK_BACKFILL, from.to_le_bytes());
            tracing::info!("silent payments turned on: building the tweaks of indexed blocks");
        }
        None if !marked_off => {
            // Kept, they would take disk for nothing; turned on again, all are built anyway.
            let rows = store.cf(cf::TWEAKS);
            let (first, last) = (BlockTweaks::key(0), BlockTweaks::key(u32::MAX));
            batch.delete_range_cf(rows, first, last);
            batch.delete_cf(rows, last);
            batch.put_cf(handle, meta::TWEAKS_OFF, []);
            batch.delete_cf(handle, meta::TWEAK_BACKFILL);
        }
        _ => return Ok(()),
    }
    Ok(store.write(batch)?)
}

impl Index {
    /// What to build for the block at `height` beside its rows.
    pub(super) fn extras_at(&self, height: u32) -> Extras {
        Extras {
            filter: self.filters,
            tweaks: self.tweaks_from.is_some_and(|from| height >= from),
        }
    }

    /// The height from which tweaks are built, if they are (`silent_payments`).
    pub fn tweaks_from(&self) -> Option<u32> {
        self.tweaks_from
    }

    /// Whether tweaks are built and every indexed block's is.
    pub fn tweaks_ready(&self) -> Result<bool, IndexError> {
        Ok(self.tweaks_from.is_some() && self.store.get(cf::META, meta::TWEAK_BACKFILL)?.is_none())
    }

    /// Builds every missing tweak up to the index tip, if the store says some are missing;
    /// tweaks are served only once this is done.
    pub(super) fn backfill_tweaks(&self, validator: &Validator) -> Result<(), IndexError> {
        if self.tweaks_from.is_none() {
            return Ok(());
        }
        let Some(mut next) = self.backfill_marker(meta::TWEAK_BACKFILL)? else {
            return Ok(());
        };
        let _span = tracing::info_span!("tweak_backfill").entered();
        let tip = self.tip().map(|(h, _)| h);
        let (started, mut last_log) = (Instant::now(), Instant::now());
        while let Some(tip) = tip.filter(|t| next <= *t) {
            let end = next.saturating_add(BACKFILL_BATCH - 1).min(tip);
            self.backfill_tweak_batch(validator, next, end)?;
            next = end + 1;
            if last_log.elapsed() > Duration::from_secs(10) {
                tracing::info!("tweaks built up to height {end} of {tip}");
                last_log = Instant::now();
            }
        }
        let mut batch = WriteBatch::default();
        batch.delete_cf(self.store.cf(cf::META), meta::TWEAK_BACKFILL);
        self.store.write(batch)?;
        self.tweaks_built
            .store(true, std::sync::atomic::Ordering::Release);
        tracing::info!(
            "tweaks of every indexed block built in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// Builds and writes the tweaks of heights `next..=end`, with the marker of how far the
    /// backfill got, in one batch.
    fn backfill_tweak_batch(
        &self,
        validator: &Validator,
        next: u32,
        end: u32,
    ) -> Result<(), IndexError> {
        let blocks: Vec<(u32, BlockHash)> =
            self.with_chain(|c| (next..=end).filter_map(|h| Some((h, c.hash(h)?))).collect());
        if blocks.len() != (end - next + 1) as usize {
            return Err(IndexError::Inconsistent(format!(
                "indexed chain has gaps in {next}..={end}"
            )));
        }
        let extras = Extras {
            filter: false,
            tweaks: true,
        };
        // Each block turned into its rows at once: a batch holds rows, not prepared blocks.
        let built = blocks
            .par_iter()
            .map(|(height, hash)| {
                let raw = validator.read_block_bytes_by_hash(hash)?;
                let undo = validator.read_undo_by_hash(hash)?;
                let block = prepare(*height, &raw, &undo, extras)?;
                Ok((*height, block_tweaks(&block)))
            })
            .collect::<Result<Vec<_>, IndexError>>()?;
        let mut batch = WriteBatch::default();
        for (height, row) in built {
            if let Some(row) = row {
                batch.put_cf(self.store.cf(cf::TWEAKS), BlockTweaks::key(height), row);
            }
        }
        batch.put_cf(
            self.store.cf(cf::META),
            meta::TWEAK_BACKFILL,
            (end + 1).to_le_bytes(),
        );
        self.store.write(batch)?;
        Ok(())
    }
}
