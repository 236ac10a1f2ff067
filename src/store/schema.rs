//! The store's typed rows: one encode/decode place per column family. The layout is written
//! down in `migrations/schema.md`; change both together, with a new schema version.

use bitcoin::hashes::Hash;
use bitcoin::{BlockHash, Txid};

use crate::kernel::blockfiles::FilePos;
use crate::types::{ScriptHash, TxNum, TXNUM_LEN};

/// The schema this cairn reads and writes; `migrations/` at the top of the repository has each
/// version's layout and the upgrades between them.
pub const SCHEMA_VERSION: u32 = 5;

/// Bytes of a script hash kept in keys: 96 bits, so finding a colliding script takes 2^96 work.
pub const SCRIPTHASH_PREFIX_LEN: usize = 12;
/// Bytes of a txid kept in the txid index key; a lookup checks the full txid in the tx row.
pub const TXID_PREFIX_LEN: usize = 8;

/// Errors from decoding a stored row: a damaged or foreign store.
#[derive(Debug, thiserror::Error)]
#[error("damaged {cf} row: {message}")]
pub struct RowError {
    /// The column family.
    pub cf: &'static str,
    /// What is wrong.
    pub message: String,
}

mod tweaks;
pub use tweaks::{BlockTweaks, TweakEntries, TweakEntry, TweakRow};

fn row_err(cf: &'static str, message: impl Into<String>) -> RowError {
    RowError {
        cf,
        message: message.into(),
    }
}

/// The part of a script hash that keys carry.
pub fn scripthash_prefix(sh: &ScriptHash) -> [u8; SCRIPTHASH_PREFIX_LEN] {
    let mut out = [0u8; SCRIPTHASH_PREFIX_LEN];
    out.copy_from_slice(&sh.0[..SCRIPTHASH_PREFIX_LEN]);
    out
}

/// Column family names, in one place.
pub mod cf {
    /// Schema version and index tip.
    pub const META: &str = "meta";
    /// Height to header and the block's transaction range.
    pub const BLOCKS: &str = "blocks";
    /// TxNum to txid and place inside the serialized block.
    pub const TXS: &str = "txs";
    /// Txid prefix and TxNum, to find a transaction by id.
    pub const TXID: &str = "txid";
    /// Script hash prefix and TxNum: every transaction that funds or spends a script.
    pub const HISTORY: &str = "history";
    /// Script hash prefix, TxNum and output index to amount: unspent outputs per script.
    pub const UTXO: &str = "utxo";
    /// Outpoint (TxNum, output index) to the spending TxNum and input index.
    pub const SPENT: &str = "spent";
    /// Block hash to the block's place in the kernel's block files.
    pub const BLOCKPOS: &str = "blockpos";
    /// Height to the block's BIP158 basic filter and filter header.
    pub const FILTERS: &str = "filters";
    /// What undoing each recent block takes, kept until the kernel has the block on disk
    /// ([`crate::store::undo`]).
    pub const UNDO: &str = "undo";
    /// Height to the block's silent-payment-eligible transactions: each one's BIP352 tweak data
    /// and taproot outputs ([`super::BlockTweaks`]).
    pub const TWEAKS: &str = "tweaks";
    /// Every column family.
    pub const ALL: [&str; 11] = [
        META, BLOCKS, TXS, TXID, HISTORY, UTXO, SPENT, BLOCKPOS, FILTERS, UNDO, TWEAKS,
    ];
}

/// `meta` keys.
pub mod meta {
    /// The schema version, u32 little-endian.
    pub const VERSION: &[u8] = b"version";
    /// The index tip: [`super::TipRow`].
    pub const TIP: &[u8] = b"tip";
    /// How far the kernel's block files have been scanned: [`super::ScanPosRow`].
    pub const BLKSCAN: &[u8] = b"blkscan";
    /// Present while filters of already indexed blocks are still being built (a store upgraded
    /// from schema 1): the next height to build, u32 little-endian.
    pub const FILTER_BACKFILL: &[u8] = b"filter_backfill";
    /// Present while cairn runs with `block_filters = false`: filters are neither written nor
    /// served, and turning them back on rebuilds them all. Empty value.
    pub const FILTERS_OFF: &[u8] = b"filters_off";
    /// Present while tweaks of already indexed blocks are still being built (silent payments
    /// turned on over an indexed chain): the next height to build, u32 little-endian.
    pub const TWEAK_BACKFILL: &[u8] = b"tweak_backfill";
    /// Present while cairn runs with `silent_payments = false` (the default), and in a store
    /// upgraded from version 3: tweaks are neither written nor served, and turning them on
    /// builds them all. Empty value.
    pub const TWEAKS_OFF: &[u8] = b"tweaks_off";
    /// Present while tweak rows of schema 4 (one per transaction) are left to rewrite as
    /// schema 5's (one per block): written with version 5, deleted with the last rewrite.
    /// Empty value.
    pub const TWEAKS_V4_LEFT: &[u8] = b"tweaks_v4_left";
    /// Present after a catch-up long enough to compact the whole index for, until that
    /// compaction has run (an import's is left to the next `cairn run`). Empty value; a store
    /// without it (every older one) has nothing due.
    pub const UNSETTLED: &[u8] = b"unsettled";
}

/// `meta/blkscan`: the position in the kernel's block files up to which every record is in
/// `blockpos`.
pub struct ScanPosRow;

impl ScanPosRow {
    /// Value: file u32 LE, offset u64 LE.
    pub fn encode(pos: FilePos) -> [u8; 12] {
        let mut out = [0u8; 12];
        out[..4].copy_from_slice(&pos.file.to_le_bytes());
        out[4..].copy_from_slice(&pos.offset.to_le_bytes());
        out
    }

    /// Decodes the value.
    pub fn decode(bytes: &[u8]) -> Result<FilePos, RowError> {
        if bytes.len() != 12 {
            return Err(row_err(cf::META, "blkscan is not 12 bytes"));
        }
        let mut f = [0u8; 4];
        f.copy_from_slice(&bytes[..4]);
        let mut o = [0u8; 8];
        o.copy_from_slice(&bytes[4..]);
        Ok(FilePos {
            file: u32::from_le_bytes(f),
            offset: u64::from_le_bytes(o),
        })
    }
}

/// `blockpos` row: key the block hash (32), value file u32 LE, offset u32 LE, length u32 LE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockPosRow {
    /// Where the block's bytes start.
    pub at: FilePos,
    /// Its serialized length.
    pub len: u32,
}

impl BlockPosRow {
    /// The key.
    pub fn key(hash: &BlockHash) -> [u8; 32] {
        hash.to_byte_array()
    }

    /// The value.
    pub fn encode(&self) -> [u8; 12] {
        let mut out = [0u8; 12];
        out[..4].copy_from_slice(&self.at.file.to_le_bytes());
        out[4..8].copy_from_slice(&(self.at.offset as u32).to_le_bytes());
        out[8..].copy_from_slice(&self.len.to_le_bytes());
        out
    }

    /// Decodes a value.
    pub fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        if bytes.len() != 12 {
            return Err(row_err(cf::BLOCKPOS, "value is not 12 bytes"));
        }
        let word = |i: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&bytes[i..i + 4]);
            u32::from_le_bytes(b)
        };
        Ok(BlockPosRow {
            at: FilePos {
                file: word(0),
                offset: u64::from(word(4)),
            },
            len: word(8),
        })
    }
}

/// The index tip: the last block whose rows are all written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TipRow {
    /// Its height.
    pub height: u32,
    /// Its hash.
    pub hash: BlockHash,
}

impl TipRow {
    /// Value: height u32 LE, then the 32-byte hash.
    pub fn encode(&self) -> [u8; 36] {
        let mut out = [0u8; 36];
        out[..4].copy_from_slice(&self.height.to_le_bytes());
        out[4..].copy_from_slice(self.hash.as_byte_array());
        out
    }

    /// Decodes a `meta/tip` value.
    pub fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        if bytes.len() != 36 {
            return Err(row_err(cf::META, format!("tip is {} bytes", bytes.len())));
        }
        let mut h = [0u8; 4];
        h.copy_from_slice(&bytes[..4]);
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&bytes[4..]);
        Ok(TipRow {
            height: u32::from_le_bytes(h),
            hash: BlockHash::from_byte_array(hash),
        })
    }
}

/// `blocks` row: a block's header and the TxNums of its transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRow {
    /// The 80-byte header.
    pub header: bitcoin::block::Header,
    /// TxNum of the coinbase.
    pub first_txnum: TxNum,
    /// Number of transactions.
    pub tx_count: u32,
}

impl BlockRow {
    /// Key: height u32 big-endian.
    pub fn key(height: u32) -> [u8; 4] {
        height.to_be_bytes()
    }

    /// Decodes a key.
    pub fn decode_key(key: &[u8]) -> Result<u32, RowError> {
        let b: [u8; 4] = key
            .try_into()
            .map_err(|_| row_err(cf::BLOCKS, "key is not 4 bytes"))?;
        Ok(u32::from_be_bytes(b))
    }

    /// Value: header (80), first TxNum (5), tx count u32 LE (4).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = bitcoin::consensus::serialize(&self.header);
        out.extend_from_slice(&self.first_txnum.encode());
        out.extend_from_slice(&self.tx_count.to_le_bytes());
        out
    }

    /// Decodes a value.
    pub fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        if bytes.len() != 80 + TXNUM_LEN + 4 {
            return Err(row_err(
                cf::BLOCKS,
                format!("value is {} bytes", bytes.len()),
            ));
        }
        let header = bitcoin::consensus::deserialize(&bytes[..80])
            .map_err(|e| row_err(cf::BLOCKS, e.to_string()))?;
        let first_txnum = TxNum::decode(&bytes[80..80 + TXNUM_LEN])
            .ok_or_else(|| row_err(cf::BLOCKS, "bad txnum"))?;
        let mut c = [0u8; 4];
        c.copy_from_slice(&bytes[80 + TXNUM_LEN..]);
        Ok(BlockRow {
            header,
            first_txnum,
            tx_count: u32::from_le_bytes(c),
        })
    }
}

/// `filters` row: a block's BIP158 basic filter and the filter header that commits to it and
/// to every earlier filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterRow {
    /// The filter header (BIP157).
    pub header: bitcoin::bip158::FilterHeader,
    /// The serialized filter (N as CompactSize, then the Golomb-Rice coded set).
    pub filter: Vec<u8>,
}

impl FilterRow {
    /// Key: height u32 big-endian (the same as `blocks`).
    pub fn key(height: u32) -> [u8; 4] {
        height.to_be_bytes()
    }

    /// Value: filter header (32), then the filter bytes.
    pub fn encode(&self) -> Vec<u8> {
        use bitcoin::hashes::Hash;
        let mut out = Vec::with_capacity(32 + self.filter.len());
        out.extend_from_slice(self.header.as_byte_array());
        out.extend_from_slice(&self.filter);
        out
    }

    /// Decodes a value.
    pub fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        use bitcoin::hashes::Hash;
        if bytes.len() < 33 {
            return Err(row_err(
                cf::FILTERS,
                format!("value is {} bytes", bytes.len()),
            ));
        }
        let mut h = [0u8; 32];
        h.copy_from_slice(&bytes[..32]);
        Ok(FilterRow {
            header: bitcoin::bip158::FilterHeader::from_byte_array(h),
            filter: bytes[32..].to_vec(),
        })
    }

    /// Decodes only the header of a value.
    pub fn decode_header(bytes: &[u8]) -> Result<bitcoin::bip158::FilterHeader, RowError> {
        use bitcoin::hashes::Hash;
        let h: [u8; 32] = bytes
            .get(..32)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| row_err(cf::FILTERS, format!("value is {} bytes", bytes.len())))?;
        Ok(bitcoin::bip158::FilterHeader::from_byte_array(h))
    }
}

/// `txs` row: a transaction's id and where its bytes sit inside the serialized block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxRow {
    /// The txid.
    pub txid: Txid,
    /// Byte offset inside the serialized block.
    pub offset: u32,
    /// Serialized length (with witness).
    pub len: u32,
}

impl TxRow {
    /// Key: the TxNum.
    pub fn key(txnum: TxNum) -> [u8; TXNUM_LEN] {
        txnum.encode()
    }

    /// Value: txid (32), offset u32 LE, length u32 LE.
    pub fn encode(&self) -> [u8; 40] {
        let mut out = [0u8; 40];
        out[..32].copy_from_slice(self.txid.as_byte_array());
        out[32..36].copy_from_slice(&self.offset.to_le_bytes());
        out[36..].copy_from_slice(&self.len.to_le_bytes());
        out
    }

    /// Decodes a value.
    pub fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        if bytes.len() != 40 {
            return Err(row_err(cf::TXS, format!("value is {} bytes", bytes.len())));
        }
        let mut txid = [0u8; 32];
        txid.copy_from_slice(&bytes[..32]);
        let mut o = [0u8; 4];
        o.copy_from_slice(&bytes[32..36]);
        let mut l = [0u8; 4];
        l.copy_from_slice(&bytes[36..]);
        Ok(TxRow {
            txid: Txid::from_byte_array(txid),
            offset: u32::from_le_bytes(o),
            len: u32::from_le_bytes(l),
        })
    }
}

/// `txid` row key: txid prefix (8) + TxNum (5); no value.
pub struct TxidKey;

impl TxidKey {
    /// The scan prefix for a txid.
    pub fn prefix(txid: &Txid) -> [u8; TXID_PREFIX_LEN] {
        let mut out = [0u8; TXID_PREFIX_LEN];
        out.copy_from_slice(&txid.as_byte_array()[..TXID_PREFIX_LEN]);
        out
    }

    /// The full key.
    pub fn encode(txid: &Txid, txnum: TxNum) -> [u8; TXID_PREFIX_LEN + TXNUM_LEN] {
        let mut out = [0u8; TXID_PREFIX_LEN + TXNUM_LEN];
        out[..TXID_PREFIX_LEN].copy_from_slice(&Self::prefix(txid));
        out[TXID_PREFIX_LEN..].copy_from_slice(&txnum.encode());
        out
    }

    /// The TxNum of a key.
    pub fn decode(key: &[u8]) -> Result<TxNum, RowError> {
        key.get(TXID_PREFIX_LEN..)
            .and_then(TxNum::decode)
            .ok_or_else(|| row_err(cf::TXID, "bad key length"))
    }
}

/// `history` row key: script hash prefix (12) + TxNum (5); no value.
pub struct HistoryKey;

impl HistoryKey {
    /// The full key.
    pub fn encode(sh: &ScriptHash, txnum: TxNum) -> [u8; SCRIPTHASH_PREFIX_LEN + TXNUM_LEN] {
        Self::encode_prefix(&scripthash_prefix(sh), txnum)
    }

    /// The full key, from the script hash prefix a key carries.
    pub fn encode_prefix(
        prefix: &[u8; SCRIPTHASH_PREFIX_LEN],
        txnum: TxNum,
    ) -> [u8; SCRIPTHASH_PREFIX_LEN + TXNUM_LEN] {
        let mut out = [0u8; SCRIPTHASH_PREFIX_LEN + TXNUM_LEN];
        out[..SCRIPTHASH_PREFIX_LEN].copy_from_slice(prefix);
        out[SCRIPTHASH_PREFIX_LEN..].copy_from_slice(&txnum.encode());
        out
    }

    /// The TxNum of a key.
    pub fn decode(key: &[u8]) -> Result<TxNum, RowError> {
        key.get(SCRIPTHASH_PREFIX_LEN..)
            .and_then(TxNum::decode)
            .ok_or_else(|| row_err(cf::HISTORY, "bad key length"))
    }
}

/// An output's place: the TxNum of its transaction and its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OutPointNum {
    /// The transaction.
    pub txnum: TxNum,
    /// The output index.
    pub vout: u32,
}

impl OutPointNum {
    /// 9 bytes: TxNum (5) + vout u32 BE.
    pub fn encode(&self) -> [u8; TXNUM_LEN + 4] {
        let mut out = [0u8; TXNUM_LEN + 4];
        out[..TXNUM_LEN].copy_from_slice(&self.txnum.encode());
        out[TXNUM_LEN..].copy_from_slice(&self.vout.to_be_bytes());
        out
    }

    /// Decodes 9 bytes.
    pub fn decode(bytes: &[u8], cf: &'static str) -> Result<Self, RowError> {
        if bytes.len() != TXNUM_LEN + 4 {
            return Err(row_err(cf, "bad outpoint length"));
        }
        let txnum = TxNum::decode(&bytes[..TXNUM_LEN]).ok_or_else(|| row_err(cf, "bad txnum"))?;
        let mut v = [0u8; 4];
        v.copy_from_slice(&bytes[TXNUM_LEN..]);
        Ok(OutPointNum {
            txnum,
            vout: u32::from_be_bytes(v),
        })
    }
}

/// `utxo` row: key script hash prefix (12) + outpoint (9), value the amount in satoshis (u64 LE).
pub struct UtxoKey;

impl UtxoKey {
    /// The full key.
    pub fn encode(
        sh: &ScriptHash,
        out: OutPointNum,
    ) -> [u8; SCRIPTHASH_PREFIX_LEN + TXNUM_LEN + 4] {
        Self::encode_prefix(&scripthash_prefix(sh), out)
    }

    /// The full key, from the script hash prefix a key carries.
    pub fn encode_prefix(
        prefix: &[u8; SCRIPTHASH_PREFIX_LEN],
        out: OutPointNum,
    ) -> [u8; SCRIPTHASH_PREFIX_LEN + TXNUM_LEN + 4] {
        let mut key = [0u8; SCRIPTHASH_PREFIX_LEN + TXNUM_LEN + 4];
        key[..SCRIPTHASH_PREFIX_LEN].copy_from_slice(prefix);
        key[SCRIPTHASH_PREFIX_LEN..].copy_from_slice(&out.encode());
        key
    }

    /// The outpoint of a key.
    pub fn decode(key: &[u8]) -> Result<OutPointNum, RowError> {
        OutPointNum::decode(key.get(SCRIPTHASH_PREFIX_LEN..).unwrap_or(&[]), cf::UTXO)
    }

    /// Decodes the amount.
    pub fn decode_value(bytes: &[u8]) -> Result<u64, RowError> {
        let b: [u8; 8] = bytes
            .try_into()
            .map_err(|_| row_err(cf::UTXO, "amount is not 8 bytes"))?;
        Ok(u64::from_le_bytes(b))
    }
}

/// `spent` row: key the spent outpoint (9), value the spending TxNum (5) + input index u32 LE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpentRow {
    /// The spending transaction.
    pub txnum: TxNum,
    /// Its input that spends the outpoint.
    pub vin: u32,
}

impl SpentRow {
    /// Value encoding.
    pub fn encode(&self) -> [u8; TXNUM_LEN + 4] {
        let mut out = [0u8; TXNUM_LEN + 4];
        out[..TXNUM_LEN].copy_from_slice(&self.txnum.encode());
        out[TXNUM_LEN..].copy_from_slice(&self.vin.to_le_bytes());
        out
    }

    /// Decodes a value.
    pub fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        if bytes.len() != TXNUM_LEN + 4 {
            return Err(row_err(cf::SPENT, "bad value length"));
        }
        let txnum =
            TxNum::decode(&bytes[..TXNUM_LEN]).ok_or_else(|| row_err(cf::SPENT, "bad txnum"))?;
        let mut v = [0u8; 4];
        v.copy_from_slice(&bytes[TXNUM_LEN..]);
        Ok(SpentRow {
            txnum,
            vin: u32::from_le_bytes(v),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txnum_keys_sort_in_chain_order() {
        let a = HistoryKey::encode(&ScriptHash([1; 32]), TxNum(255));
        let b = HistoryKey::encode(&ScriptHash([1; 32]), TxNum(256));
        assert!(a < b);
        assert_eq!(HistoryKey::decode(&b).unwrap(), TxNum(256));
        assert_eq!(
            TxNum::decode(&TxNum((1 << 40) - 1).encode()),
            Some(TxNum((1 << 40) - 1))
        );
    }

    #[test]
    fn electrum_script_hash_is_reversed_sha256() {
        // The Electrum protocol docs' example: P2PKH of 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa.
        let script =
            ScriptBuf::from_hex("76a91462e907b15cbf27d5425399ebf6f0fb50ebb88f1888ac").unwrap();
        assert_eq!(
            ScriptHash::of(&script).to_electrum_hex(),
            "8b01df4e368ea28f8dc0423bcf7a4923e3a12d307c875e47a0cfbf90b5c39161"
        );
        let sh = ScriptHash::of(&script);
        assert_eq!(
            ScriptHash::from_electrum_hex(&sh.to_electrum_hex()),
            Some(sh)
        );
    }

    use bitcoin::ScriptBuf;

    #[test]
    fn rows_round_trip() {
        let tip = TipRow {
            height: 7,
            hash: BlockHash::from_byte_array([9; 32]),
        };
        assert_eq!(TipRow::decode(&tip.encode()).unwrap(), tip);
        let tx = TxRow {
            txid: Txid::from_byte_array([3; 32]),
            offset: 81,
            len: 200,
        };
        assert_eq!(TxRow::decode(&tx.encode()).unwrap(), tx);
        let s = SpentRow {
            txnum: TxNum(5),
            vin: 2,
        };
        assert_eq!(SpentRow::decode(&s.encode()).unwrap(), s);
        let op = OutPointNum {
            txnum: TxNum(77),
            vout: 3,
        };
        let key = UtxoKey::encode(&ScriptHash([2; 32]), op);
        assert_eq!(UtxoKey::decode(&key).unwrap(), op);
        assert!(TipRow::decode(&[1, 2]).is_err());
    }
}
