//! `undo` rows: for each recently indexed block, what undoing it takes, kept by the index itself.
//! After a crash the kernel comes back at its last flush, which can be below the index tip; it
//! then forgets the blocks above it, their undo data, and where their bytes were (it writes new
//! blocks over them). If it then follows another branch, these rows are what lets the index undo
//! those blocks. Rows are deleted once the kernel has certainly written the block to disk.

use super::schema::{cf, OutPointNum, RowError, SCRIPTHASH_PREFIX_LEN};
use crate::types::{TxNum, TXNUM_LEN};

/// The first bytes of a script hash, as keys carry them.
pub type ScriptPrefix = [u8; SCRIPTHASH_PREFIX_LEN];

/// What undoing one block takes: per transaction, in block order, its outputs' script hash
/// prefixes and what each input spent. Transaction ids come from the `txs` rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UndoRow {
    /// Per transaction, coinbase included.
    pub txs: Vec<UndoTx>,
}

/// One transaction's part of an [`UndoRow`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UndoTx {
    /// Each output's script hash prefix, in output order.
    pub outputs: Vec<ScriptPrefix>,
    /// What each input spent, in input order (none for a coinbase).
    pub inputs: Vec<UndoInput>,
}

/// What one input spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UndoInput {
    /// The spent output.
    pub spent: OutPointNum,
    /// Its script hash prefix.
    pub scripthash: ScriptPrefix,
    /// Its amount.
    pub value: u64,
    /// Whether it had a `utxo` row (it goes back when the block is undone).
    pub spendable: bool,
}

impl UndoRow {
    /// Key: height u32 big-endian (as `blocks`), so rows of old blocks go in one range delete.
    pub fn key(height: u32) -> [u8; 4] {
        height.to_be_bytes()
    }

    /// Value: CompactSize transaction count; per transaction the output count and each output's
    /// prefix (12), the input count and per input the spent TxNum (5), output index, amount
    /// (CompactSize each), prefix (12) and a spendable byte.
    pub fn encode(&self) -> Vec<u8> {
        let inputs: usize = self.txs.iter().map(|t| t.inputs.len()).sum();
        let outputs: usize = self.txs.iter().map(|t| t.outputs.len()).sum();
        let mut out = Vec::with_capacity(4 + self.txs.len() * 2 + outputs * 12 + inputs * 28);
        put_varint(&mut out, self.txs.len() as u64);
        for tx in &self.txs {
            put_varint(&mut out, tx.outputs.len() as u64);
            for prefix in &tx.outputs {
                out.extend_from_slice(prefix);
            }
            put_varint(&mut out, tx.inputs.len() as u64);
            for input in &tx.inputs {
                out.extend_from_slice(&input.spent.txnum.encode());
                put_varint(&mut out, u64::from(input.spent.vout));
                put_varint(&mut out, input.value);
                out.extend_from_slice(&input.scripthash);
                out.push(u8::from(input.spendable));
            }
        }
        out
    }

    /// Decodes a value; no count in it is believed beyond the bytes that follow.
    pub fn decode(bytes: &[u8]) -> Result<Self, RowError> {
        let mut r = Reader { bytes, at: 0 };
        let count = r.count(2)?;
        let mut row = UndoRow {
            txs: Vec::with_capacity(count),
        };
        for _ in 0..count {
            let outputs = r.count(SCRIPTHASH_PREFIX_LEN)?;
            let mut tx = UndoTx {
                outputs: Vec::with_capacity(outputs),
                inputs: Vec::new(),
            };
            for _ in 0..outputs {
                tx.outputs.push(r.prefix()?);
            }
            let inputs = r.count(TXNUM_LEN + 3 + SCRIPTHASH_PREFIX_LEN)?;
            tx.inputs.reserve(inputs);
            for _ in 0..inputs {
                let txnum = TxNum::decode(r.take(TXNUM_LEN)?).ok_or_else(|| err("bad TxNum"))?;
                let vout =
                    u32::try_from(r.varint()?).map_err(|_| err("output index out of range"))?;
                let value = r.varint()?;
                let scripthash = r.prefix()?;
                let spendable = match r.take(1)?[0] {
                    0 => false,
                    1 => true,
                    other => return Err(err(format!("spendable byte {other}"))),
                };
                tx.inputs.push(UndoInput {
                    spent: OutPointNum { txnum, vout },
                    scripthash,
                    value,
                    spendable,
                });
            }
            row.txs.push(tx);
        }
        if r.at != bytes.len() {
            return Err(err(format!("{} bytes left over", bytes.len() - r.at)));
        }
        Ok(row)
    }
}

fn err(message: impl Into<String>) -> RowError {
    RowError {
        cf: cf::UNDO,
        message: message.into(),
    }
}

/// Appends `n` as a CompactSize (the `bitcoin` crate's encoding; writing to a `Vec` cannot fail).
fn put_varint(out: &mut Vec<u8>, n: u64) {
    let _ = bitcoin::consensus::Encodable::consensus_encode(&bitcoin::VarInt(n), out);
}

/// Reads a value front to back, every read checked against what is left.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RowError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| err("value cut short"))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn prefix(&mut self) -> Result<ScriptPrefix, RowError> {
        let mut p = [0u8; SCRIPTHASH_PREFIX_LEN];
        p.copy_from_slice(self.take(SCRIPTHASH_PREFIX_LEN)?);
        Ok(p)
    }

    /// A CompactSize, decoded by the `bitcoin` crate (which also refuses non-canonical ones).
    fn varint(&mut self) -> Result<u64, RowError> {
        let rest = &self.bytes[self.at..];
        let (n, used) = bitcoin::consensus::deserialize_partial::<bitcoin::VarInt>(rest)
            .map_err(|e| err(e.to_string()))?;
        self.at += used;
        Ok(n.0)
    }

    /// A count of items each at least `min_len` bytes long: never more than the bytes left allow.
    fn count(&mut self, min_len: usize) -> Result<usize, RowError> {
        let n = self.varint()?;
        let left = (self.bytes.len() - self.at) as u64;
        if n > left / min_len as u64 {
            return Err(err(format!("{n} items claimed, {left} bytes left")));
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_lies_are_refused() {
        let row = UndoRow {
            txs: vec![
                UndoTx {
                    outputs: vec![[1; 12], [2; 12]],
                    inputs: vec![],
                },
                UndoTx {
                    outputs: vec![[3; 12]],
                    inputs: vec![
                        UndoInput {
                            spent: OutPointNum {
                                txnum: TxNum(5),
                                vout: 70_000,
                            },
                            scripthash: [4; 12],
                            value: u64::MAX,
                            spendable: true,
                        },
                        UndoInput {
                            spent: OutPointNum {
                                txnum: TxNum(1 << 39),
                                vout: 0,
                            },
                            scripthash: [5; 12],
                            value: 0,
                            spendable: false,
                        },
                    ],
                },
            ],
        };
        let bytes = row.encode();
        assert_eq!(UndoRow::decode(&bytes).unwrap(), row);
        for cut in 0..bytes.len() {
            assert!(UndoRow::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(UndoRow::decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
