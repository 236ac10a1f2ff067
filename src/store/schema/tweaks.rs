//! `tweaks` rows: since schema 5 one row per block holding its silent-payment-eligible
//! transactions; schema 4's row per transaction is read only by the upgrade
//! (`crate::store::migrations`).

use super::{cf, row_err, RowError};
use crate::types::{TxNum, TXNUM_LEN};

/// A silent-payment-eligible transaction's tweak data (BIP352's `input_hash·A`) and its taproot
/// outputs, which scanning wallets are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TweakRow {
    /// The compressed point `input_hash·A`.
    pub tweak: [u8; 33],
    /// Its taproot outputs: output index, x-only key, amount.
    pub outputs: Vec<(u32, [u8; 32], u64)>,
}

/// Bytes of one taproot output: index u32 LE, x-only key (32), amount u64 LE.
const OUTPUT_LEN: usize = 4 + 32 + 8;
/// Bytes of an entry of a block's row before its outputs: position u32 LE, output count u32
/// LE, tweak (33).
const ENTRY_HEAD_LEN: usize = 4 + 4 + 33;

impl TweakRow {
    /// Schema 4's key: the transaction's TxNum.
    pub fn v4_key(txnum: TxNum) -> [u8; TXNUM_LEN] {
        txnum.encode()
    }

    /// Decodes a schema-4 key.
    pub fn decode_v4_key(key: &[u8]) -> Result<TxNum, RowError> {
        TxNum::decode(key).ok_or_else(|| row_err(cf::TWEAKS, format!("key is {} bytes", key.len())))
    }

    /// Schema 4's value: the tweak (33), then each output as [`BlockTweaks`] writes it.
    pub fn encode_v4(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(33 + OUTPUT_LEN * self.outputs.len());
        out.extend_from_slice(&self.tweak);
        self.push_outputs(&mut out);
        out
    }

    /// Decodes a schema-4 value.
    pub fn decode_v4(bytes: &[u8]) -> Result<Self, RowError> {
        let bad = || {
            row_err(
                cf::TWEAKS,
                format!("schema-4 value is {} bytes", bytes.len()),
            )
        };
        if bytes.len() < 33 || !(bytes.len() - 33).is_multiple_of(OUTPUT_LEN) {
            return Err(bad());
        }
        let entry = TweakEntry {
            position: 0,
            tweak: bytes[..33].try_into().map_err(|_| bad())?,
            outputs: &bytes[33..],
        };
        Ok(entry.row())
    }

    fn push_outputs(&self, out: &mut Vec<u8>) {
        for (vout, key, value) in &self.outputs {
            out.extend_from_slice(&vout.to_le_bytes());
            out.extend_from_slice(key);
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
}

/// `tweaks` row: a block's eligible transactions in block order, each with its position in the
/// block, so that serving a block's tweaks is one read (a row per transaction was a seek and a
/// step each). A block without any has no row.
pub struct BlockTweaks;

impl BlockTweaks {
    /// Key: the block's height (as `filters`), big-endian.
    pub fn key(height: u32) -> [u8; 4] {
        height.to_be_bytes()
    }

    /// Decodes a key.
    pub fn decode_key(key: &[u8]) -> Result<u32, RowError> {
        let bytes: [u8; 4] = key
            .try_into()
            .map_err(|_| row_err(cf::TWEAKS, format!("key is {} bytes", key.len())))?;
        Ok(u32::from_be_bytes(bytes))
    }

    /// Value: per transaction its position in the block u32 LE, its output count u32 LE, its
    /// tweak (33), then each output's index u32 LE, x-only key (32) and amount u64 LE.
    pub fn encode<'a>(txs: impl IntoIterator<Item = (u32, &'a TweakRow)>) -> Vec<u8> {
        let mut out = Vec::new();
        for (position, row) in txs {
            out.reserve(ENTRY_HEAD_LEN + OUTPUT_LEN * row.outputs.len());
            out.extend_from_slice(&position.to_le_bytes());
            out.extend_from_slice(&(row.outputs.len() as u32).to_le_bytes());
            out.extend_from_slice(&row.tweak);
            row.push_outputs(&mut out);
        }
        out
    }

    /// The entries of a value, read in place.
    pub fn entries(bytes: &[u8]) -> TweakEntries<'_> {
        TweakEntries { rest: bytes }
    }

    /// Decodes a value: each transaction's position in the block and row.
    pub fn decode(bytes: &[u8]) -> Result<Vec<(u32, TweakRow)>, RowError> {
        Self::entries(bytes)
            .map(|entry| entry.map(|e| (e.position, e.row())))
            .collect()
    }
}

/// The entries of a [`BlockTweaks`] value, in order; a damaged value ends with an error.
pub struct TweakEntries<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for TweakEntries<'a> {
    type Item = Result<TweakEntry<'a>, RowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let entry = self.split_entry();
        if entry.is_err() {
            self.rest = &[];
        }
        Some(entry)
    }
}

impl<'a> TweakEntries<'a> {
    fn split_entry(&mut self) -> Result<TweakEntry<'a>, RowError> {
        let left = self.rest.len();
        let bad = || {
            row_err(
                cf::TWEAKS,
                format!("an entry cut short ({left} bytes left)"),
            )
        };
        let head = self.rest.get(..ENTRY_HEAD_LEN).ok_or_else(bad)?;
        let position = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let count = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
        let tweak: &[u8; 33] = head[8..].try_into().map_err(|_| bad())?;
        let end = count
            .checked_mul(OUTPUT_LEN)
            .and_then(|n| n.checked_add(ENTRY_HEAD_LEN))
            .ok_or_else(bad)?;
        let outputs = self.rest.get(ENTRY_HEAD_LEN..end).ok_or_else(bad)?;
        self.rest = &self.rest[end..];
        Ok(TweakEntry {
            position,
            tweak,
            outputs,
        })
    }
}

/// One eligible transaction of a [`BlockTweaks`] value, read in place.
#[derive(Debug, Clone, Copy)]
pub struct TweakEntry<'a> {
    /// Its position in the block (0 is the coinbase, which is never eligible).
    pub position: u32,
    /// Its tweak data, a compressed point.
    pub tweak: &'a [u8; 33],
    outputs: &'a [u8],
}

impl<'a> TweakEntry<'a> {
    /// Its taproot outputs: output index, x-only key, amount.
    pub fn outputs(&self) -> impl Iterator<Item = (u32, [u8; 32], u64)> + 'a {
        self.outputs.chunks_exact(OUTPUT_LEN).map(|c| {
            let mut key = [0u8; 32];
            key.copy_from_slice(&c[4..36]);
            let mut value = [0u8; 8];
            value.copy_from_slice(&c[36..]);
            (
                u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                key,
                u64::from_le_bytes(value),
            )
        })
    }

    /// Whether one of its taproot outputs holds at least `dust` satoshis.
    pub fn pays_at_least(&self, dust: u64) -> bool {
        self.outputs().any(|(_, _, value)| value >= dust)
    }

    /// The owned row.
    pub fn row(&self) -> TweakRow {
        TweakRow {
            tweak: *self.tweak,
            outputs: self.outputs().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn row(seed: u8, outputs: usize) -> TweakRow {
        TweakRow {
            tweak: [seed; 33],
            outputs: (0..outputs)
                .map(|i| (i as u32 * 3, [seed ^ i as u8; 32], 1_000 * i as u64))
                .collect(),
        }
    }

    #[test]
    fn a_block_row_decodes_to_what_was_encoded() {
        let txs = vec![(1, row(7, 1)), (5, row(9, 0)), (6, row(11, 3))];
        let bytes = BlockTweaks::encode(txs.iter().map(|(p, r)| (*p, r)));
        assert_eq!(BlockTweaks::decode(&bytes).unwrap(), txs);
        assert!(BlockTweaks::decode(&[]).unwrap().is_empty());
        let entries: Vec<_> = BlockTweaks::entries(&bytes).map(|e| e.unwrap()).collect();
        assert!(!entries[1].pays_at_least(0), "no output pays anything");
        assert!(entries[2].pays_at_least(2_000) && !entries[2].pays_at_least(2_001));
    }

    #[test]
    fn a_schema_4_value_decodes_to_what_was_encoded() {
        for outputs in 0..3 {
            let r = row(3, outputs);
            assert_eq!(TweakRow::decode_v4(&r.encode_v4()).unwrap(), r);
        }
        assert!(TweakRow::decode_v4(&[0; 32]).is_err());
        assert!(TweakRow::decode_v4(&[0; 34]).is_err());
    }

    #[test]
    fn a_damaged_row_is_an_error_not_a_panic() {
        let bytes = BlockTweaks::encode([(1, &row(1, 2)), (2, &row(2, 1))]);
        for cut in 1..bytes.len() {
            let decoded = BlockTweaks::decode(&bytes[..cut]);
            let whole_entries = [0, ENTRY_HEAD_LEN + 2 * OUTPUT_LEN];
            assert_eq!(
                decoded.is_ok(),
                whole_entries.contains(&cut),
                "cut at {cut}"
            );
        }
        // An output count that overflows the row's length.
        let mut huge = bytes.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(BlockTweaks::decode(&huge).is_err());
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            // Whatever the bytes, decoding returns; what decodes encodes to the same bytes.
            if let Ok(txs) = BlockTweaks::decode(&bytes) {
                prop_assert_eq!(BlockTweaks::encode(txs.iter().map(|(p, r)| (*p, r))), bytes);
            }
        }
    }
}
