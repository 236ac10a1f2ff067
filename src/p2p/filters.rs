//! Answers to BIP157 requests (getcfilters, getcfheaders, getcfcheckpt) from the index's
//! filters, with Bitcoin Core's limits: basic filters only, at most 1,000 filters or 2,000
//! headers per request, a stop hash on the active chain; anything else is a protocol violation.

use bitcoin::bip158::FilterHeader;
use bitcoin::hashes::Hash;
use bitcoin::p2p::message::NetworkMessage;
use bitcoin::p2p::message_filter::{
    CFCheckpt, CFHeaders, CFilter, GetCFCheckpt, GetCFHeaders, GetCFilters,
};
use bitcoin::BlockHash;

use super::error::PeerError;
use crate::index::Index;
use crate::kernel::Validator;

/// The only filter type (BIP158 basic).
pub const BASIC_FILTER_TYPE: u8 = 0;
/// Most filters one getcfilters may ask for (Core's MAX_GETCFILTERS_SIZE).
pub const MAX_GETCFILTERS: u32 = 1000;
/// Most headers one getcfheaders may ask for (Core's MAX_GETCFHEADERS_SIZE).
pub const MAX_GETCFHEADERS: u32 = 2000;
/// getcfcheckpt returns the header of every block at a multiple of this height.
pub const CFCHECKPT_INTERVAL: u32 = 1000;

/// Where a request points: its stop block's height, if the filters are there to answer it.
fn stop_height(
    index: &Index,
    validator: &Validator,
    filter_type: u8,
    stop: &BlockHash,
) -> Result<Option<u32>, PeerError> {
    if filter_type != BASIC_FILTER_TYPE {
        return Err(PeerError::Misbehaving(format!(
            "filter type {filter_type} requested (only basic, 0)"
        )));
    }
    match index.with_chain(|c| c.height_of_hash(stop)) {
        Some(h) => Ok(index.filters_ready().unwrap_or(false).then_some(h)),
        // A block we know but have not indexed (yet), or one a reorg just took away: no answer,
        // as Core stays silent while its filter index catches up.
        None if validator.knows(stop) => Ok(None),
        // A block the peer has and cairn has not seen yet (a race at every new block): Core's
        // `PrepareBlockFilterRequest` disconnects, without a ban.
        None => Err(PeerError::Refused(format!(
            "filters requested up to unknown block {stop}"
        ))),
    }
}

/// Checks the range of a getcfilters/getcfheaders request.
fn range(start: u32, stop: u32, max: u32, what: &str) -> Result<(), PeerError> {
    if start > stop {
        return Err(PeerError::Misbehaving(format!(
            "{what} start height {start} above stop height {stop}"
        )));
    }
    if stop - start >= max {
        return Err(PeerError::Misbehaving(format!(
            "{what} for {} blocks (at most {max})",
            stop - start + 1
        )));
    }
    Ok(())
}

/// The heights a getcfilters asks for, checked: `None` when there is nothing to answer yet.
/// The filters are read a few at a time ([`cfilters`]) as the peer's send buffer has room.
pub fn cfilters_range(
    index: &Index,
    validator: &Validator,
    req: &GetCFilters,
) -> Result<Option<(u32, u32)>, PeerError> {
    let Some(stop) = stop_height(index, validator, req.filter_type, &req.stop_hash)? else {
        return Ok(None);
    };
    range(req.start_height, stop, MAX_GETCFILTERS, "getcfilters")?;
    Ok(Some((req.start_height, stop)))
}

/// The cfilter messages for heights `from..=to` of a getcfilters whose stop block is
/// `stop_hash` at `stop`, one per block; `None` once that block has left the indexed chain (a
/// reorg during the answer: the rest is not sent, as the peer's next request will say).
pub fn cfilters(
    index: &Index,
    (from, to): (u32, u32),
    (stop, stop_hash): (u32, BlockHash),
) -> Result<Option<Vec<NetworkMessage>>, PeerError> {
    let view = index.reader();
    if view.chain().hash(stop) != Some(stop_hash) {
        return Ok(None);
    }
    let rows = view
        .filter_rows(from, to)
        .map_err(|e| PeerError::Internal(e.to_string()))?;
    Ok(rows.map(|rows| {
        rows.into_iter()
            .map(|(block_hash, row)| {
                NetworkMessage::CFilter(CFilter {
                    filter_type: BASIC_FILTER_TYPE,
                    block_hash,
                    filter: row.filter,
                })
            })
            .collect()
    }))
}

/// The cfheaders message answering a getcfheaders: the header before the range and the hash of
/// every filter in it.
pub fn get_cfheaders(
    index: &Index,
    validator: &Validator,
    req: &GetCFHeaders,
) -> Result<Option<NetworkMessage>, PeerError> {
    let Some(stop) = stop_height(index, validator, req.filter_type, &req.stop_hash)? else {
        return Ok(None);
    };
    range(req.start_height, stop, MAX_GETCFHEADERS, "getcfheaders")?;
    let previous_filter_header = match req.start_height {
        0 => FilterHeader::all_zeros(),
        h => match index
            .reader()
            .filter_at(h - 1)
            .map_err(|e| PeerError::Internal(e.to_string()))?
        {
            Some(row) => row.header,
            None => return Ok(None),
        },
    };
    let Some(filter_hashes) = index
        .filter_hashes(req.start_height, stop)
        .map_err(|e| PeerError::Internal(e.to_string()))?
    else {
        return Ok(None);
    };
    Ok(Some(NetworkMessage::CFHeaders(CFHeaders {
        filter_type: BASIC_FILTER_TYPE,
        stop_hash: req.stop_hash,
        previous_filter_header,
        filter_hashes,
    })))
}

/// The cfcheckpt message answering a getcfcheckpt: the filter header at every 1,000th height up
/// to the stop block.
pub fn get_cfcheckpt(
    index: &Index,
    validator: &Validator,
    req: &GetCFCheckpt,
) -> Result<Option<NetworkMessage>, PeerError> {
    let Some(stop) = stop_height(index, validator, req.filter_type, &req.stop_hash)? else {
        return Ok(None);
    };
    let mut filter_headers = Vec::with_capacity((stop / CFCHECKPT_INTERVAL) as usize);
    // One view for every checkpoint: one snapshot, and readiness checked once (above).
    let view = index.reader();
    for i in 1..=stop / CFCHECKPT_INTERVAL {
        match view
            .filter_at(i * CFCHECKPT_INTERVAL)
            .map_err(|e| PeerError::Internal(e.to_string()))?
        {
            Some(row) => filter_headers.push(row.header),
            None => return Ok(None),
        }
    }
    Ok(Some(NetworkMessage::CFCheckpt(CFCheckpt {
        filter_type: BASIC_FILTER_TYPE,
        stop_hash: req.stop_hash,
        filter_headers,
    })))
}
