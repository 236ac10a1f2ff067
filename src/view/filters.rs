//! BIP158 block filters and their headers, as the view's chain has them.

use bitcoin::bip158::FilterHeader;
use bitcoin::BlockHash;

use super::model::{ChainView, ViewError};

/// Whether the index can answer for filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterState {
    /// The index builds no filters (`block_filters = false`).
    Off,
    /// A store upgraded from schema 1 is still building them.
    Building,
    /// Every block of the view has its filter.
    Ready,
}

/// One block's filter with its header.
#[derive(Debug, Clone)]
pub struct BlockFilter {
    /// The serialized filter (N as CompactSize, then the Golomb-Rice coded set).
    pub filter: Vec<u8>,
    /// The filter header that commits to it and to every earlier filter.
    pub header: FilterHeader,
}

impl ChainView<'_> {
    /// Whether filters can be served from this view.
    pub fn filter_state(&self) -> Result<FilterState, ViewError> {
        if !self.model.index().filters_enabled() {
            return Ok(FilterState::Off);
        }
        Ok(match self.index.filters_ready()? {
            true => FilterState::Ready,
            false => FilterState::Building,
        })
    }

    /// The filter of the view's block at `height` (ask once [`ChainView::filter_state`] is
    /// `Ready`: while filters are built some blocks have none).
    pub fn block_filter(&self, height: u32) -> Result<Option<BlockFilter>, ViewError> {
        let row = self.index.filter_at(height)?;
        Ok(row.map(|row| BlockFilter {
            filter: row.filter,
            header: row.header,
        }))
    }

    /// The height, block hash and filter header of at most `count` blocks from `start` up to
    /// the view's tip (empty when `start` is above it; ask once filters are `Ready`).
    pub fn filter_headers(
        &self,
        start: u32,
        count: u32,
    ) -> Result<Vec<(u32, BlockHash, FilterHeader)>, ViewError> {
        let Some((tip, _)) = self.tip() else {
            return Ok(Vec::new());
        };
        if count == 0 || start > tip {
            return Ok(Vec::new());
        }
        let end = start.saturating_add(count - 1).min(tip);
        let rows = self.index.filter_rows(start, end)?.unwrap_or_default();
        Ok((start..)
            .zip(rows)
            .map(|(height, (hash, row))| (height, hash, row.header))
            .collect())
    }
}
