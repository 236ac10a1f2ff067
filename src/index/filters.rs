//! BIP158 basic block filters: built from a block and the outputs it spends (the kernel's undo
//! data), chained into filter headers (BIP157).

use bitcoin::bip158::{BlockFilterWriter, FilterHash, FilterHeader};
use bitcoin::hashes::Hash;

use crate::kernel::BlockUndo;

/// The serialized basic filter of `block`: every output script except OP_RETURN ones, every
/// script its inputs spend (taken from `undo`, in input order), empty scripts and duplicates
/// left out, Golomb-Rice coded with the block hash as key (BIP158).
pub fn basic_filter(block: &bitcoin::Block, undo: &BlockUndo) -> Result<Vec<u8>, std::io::Error> {
    let mut out = Vec::new();
    let mut writer = BlockFilterWriter::new(&mut out, block);
    writer.add_output_scripts();
    for spent in undo.txs.iter().flatten() {
        writer.add_element(spent.txout.script_pubkey.as_bytes());
    }
    writer.finish()?;
    Ok(out)
}

/// The filter header of a filter whose predecessor's header is `prev` (all zeros before the
/// genesis block's).
pub fn filter_header(filter: &[u8], prev: &FilterHeader) -> FilterHeader {
    FilterHash::hash(filter).filter_header(prev)
}

/// The header before the genesis block's filter header.
pub fn genesis_prev_header() -> FilterHeader {
    FilterHeader::all_zeros()
}
