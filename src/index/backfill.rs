//! Building the filters of blocks indexed before filters existed (a store upgraded from schema
//! 1, or filters turned back on), from the kernel's blocks and undo data, in batches that each
//! record how far they got: a crash resumes where the last batch ended.

use std::time::{Duration, Instant};

use bitcoin::bip158::FilterHeader;
use bitcoin::BlockHash;
use rayon::prelude::*;
use rocksdb::WriteBatch;

use super::error::IndexError;
use super::filters;
use super::rows::{prepare, Extras, PreparedBlock};
use super::Index;
use crate::kernel::Validator;
use crate::store::schema::{cf, meta, FilterRow, HistoryKey};
use crate::types::TxNum;

/// Heights built per batch.
const BACKFILL_BATCH: u32 = 1000;

impl Index {
    /// Builds every missing filter up to the index tip, if the store says some are missing;
    /// filters are served only once this is done.
    pub(super) fn backfill_filters(&self, validator: &Validator) -> Result<(), IndexError> {
        if !self.filters {
            return Ok(());
        }
        let Some(mut next) = self.backfill_marker(meta::FILTER_BACKFILL)? else {
            return Ok(());
        };
        let _span = tracing::info_span!("filter_backfill").entered();
        let tip = self.tip().map(|(h, _)| h);
        let started = Instant::now();
        let mut last_log = Instant::now();
        tracing::info!("building the BIP158 filters of indexed blocks {next}..={} (store upgraded from schema 1)",
            tip.map(i64::from).unwrap_or(-1));
        let mut prev = self.filter_header_before(next)?;
        while let Some(tip) = tip.filter(|t| next <= *t) {
            let end = (next + BACKFILL_BATCH - 1).min(tip);
            prev = self.backfill_batch(validator, next, end, prev)?;
            next = end + 1;
            if last_log.elapsed() > Duration::from_secs(10) {
                tracing::info!("filters built up to height {end} of {tip}");
                last_log = Instant::now();
            }
        }
        let mut batch = WriteBatch::default();
        // Rows above the tip are left from blocks disconnected while filters were off.
        let above = tip.map(|t| t.saturating_add(1)).unwrap_or(0);
        batch.delete_range_cf(
            self.store.cf(cf::FILTERS),
            FilterRow::key(above),
            FilterRow::key(u32::MAX),
        );
        batch.delete_cf(self.store.cf(cf::FILTERS), FilterRow::key(u32::MAX));
        batch.delete_cf(self.store.cf(cf::META), meta::FILTER_BACKFILL);
        self.store.write(batch)?;
        tracing::info!(
            "filters of every indexed block built in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// The next height a backfill marked under `key` (in `meta`) builds, if one is under way.
    pub(super) fn backfill_marker(&self, key: &'static [u8]) -> Result<Option<u32>, IndexError> {
        let Some(bytes) = self.store.get(cf::META, key)? else {
            return Ok(None);
        };
        let next = bytes.as_slice().try_into().map(u32::from_le_bytes);
        next.map(Some).map_err(|_| {
            let name = String::from_utf8_lossy(key);
            IndexError::Inconsistent(format!("{name} marker is not 4 bytes"))
        })
    }

    /// The filter header the filter at `height` chains onto.
    fn filter_header_before(&self, height: u32) -> Result<FilterHeader, IndexError> {
        let Some(below) = height.checked_sub(1) else {
            return Ok(filters::genesis_prev_header());
        };
        match self.store.get(cf::FILTERS, &FilterRow::key(below))? {
            Some(bytes) => Ok(FilterRow::decode_header(&bytes)?),
            None => Err(IndexError::Inconsistent(format!(
                "no filter row at height {below}"
            ))),
        }
    }

    /// Builds and writes the filters of heights `next..=end` chained onto `prev`, with the
    /// marker of how far the backfill got, in one batch; returns the last filter header.
    fn backfill_batch(
        &self,
        validator: &Validator,
        next: u32,
        end: u32,
        mut prev: FilterHeader,
    ) -> Result<FilterHeader, IndexError> {
        let hashes: Vec<BlockHash> =
            self.with_chain(|c| (next..=end).filter_map(|h| c.hash(h)).collect());
        if hashes.len() != (end - next + 1) as usize {
            return Err(IndexError::Inconsistent(format!(
                "indexed chain has gaps in {next}..={end}"
            )));
        }
        let built: Result<Vec<PreparedBlock>, IndexError> = hashes
            .par_iter()
            .enumerate()
            .map(|(i, hash)| {
                let raw = validator.read_block_bytes_by_hash(hash)?;
                let undo = validator.read_undo_by_hash(hash)?;
                let extras = Extras {
                    filter: true,
                    tweaks: false,
                };
                Ok(prepare(next + i as u32, &raw, &undo, extras)?)
            })
            .collect();
        let mut batch = WriteBatch::default();
        for (h, block) in (next..=end).zip(built?) {
            // Schema 1 also kept history rows for OP_RETURN outputs; schema 2 has none.
            if let Some(first) = self.with_chain(|c| c.txnums(h).map(|r| r.start)) {
                for (i, tx) in block.txs.iter().enumerate() {
                    for out in tx.outputs.iter().filter(|o| o.op_return) {
                        let key = HistoryKey::encode(&out.scripthash, TxNum(first + i as u64));
                        batch.delete_cf(self.store.cf(cf::HISTORY), key);
                    }
                }
            }
            let filter = block.filter;
            let header = filters::filter_header(&filter, &prev);
            batch.put_cf(
                self.store.cf(cf::FILTERS),
                FilterRow::key(h),
                FilterRow { header, filter }.encode(),
            );
            prev = header;
        }
        batch.put_cf(
            self.store.cf(cf::META),
            meta::FILTER_BACKFILL,
            (end + 1).to_le_bytes(),
        );
        self.store.write(batch)?;
        Ok(prev)
    }
}
