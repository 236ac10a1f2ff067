//! Turning one block and its undo data into what the index needs, without touching the store:
//! the part that runs in parallel over many blocks.

use bitcoin::consensus::Decodable;
use bitcoin::{BlockHash, Transaction, Txid};

use super::silent_payments::{tx_tweak, TxTweak};
use crate::kernel::BlockUndo;
use crate::types::ScriptHash;

/// Errors from reading a block for the index.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The block bytes do not decode.
    #[error("block at height {height} does not decode: {message}")]
    Decode {
        /// Its height.
        height: u32,
        /// The decoder's message.
        message: String,
    },
    /// Bytes read from the block files are not the block they were mapped to (a record torn
    /// or written over after a crash).
    #[error("the bytes read for block {hash} at height {height} are not it: {message}")]
    NotTheBlock {
        /// The block the bytes were read for.
        hash: BlockHash,
        /// Its height.
        height: u32,
        /// What differs.
        message: String,
    },
    /// The undo data does not fit the block.
    #[error("undo data of block {hash} at height {height} does not match it: {message}")]
    UndoMismatch {
        /// The block.
        hash: BlockHash,
        /// Its height.
        height: u32,
        /// What differs.
        message: String,
    },
}

/// An output as the index stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreparedOutput {
    /// Its script's hash.
    pub scripthash: ScriptHash,
    /// Its amount in satoshis.
    pub value: u64,
    /// Whether it can ever be spent (not OP_RETURN, not oversized): only those are UTXOs.
    pub spendable: bool,
    /// Whether its script starts with OP_RETURN: such outputs are in no history (as ElectrumX).
    pub op_return: bool,
}

/// An input with what it spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreparedInput {
    /// The spent transaction.
    pub prev_txid: Txid,
    /// The spent output's index.
    pub prev_vout: u32,
    /// The spent output, from the undo data.
    pub spent: PreparedOutput,
}

/// A transaction as the index stores it.
#[derive(Debug, Clone)]
pub struct PreparedTx {
    /// Its id.
    pub txid: Txid,
    /// Offset of its bytes in the serialized block.
    pub offset: u32,
    /// Its serialized length.
    pub len: u32,
    /// Its outputs.
    pub outputs: Vec<PreparedOutput>,
    /// Its inputs (none for the coinbase).
    pub inputs: Vec<PreparedInput>,
    /// Its BIP352 tweak data, when tweaks are built and it is eligible.
    pub tweak: Option<TxTweak>,
}

/// What [`prepare`] builds beside the rows every block has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extras {
    /// The block's BIP158 basic filter.
    pub filter: bool,
    /// Each eligible transaction's silent-payment tweak data.
    pub tweaks: bool,
}

/// A block ready to be written or undone.
#[derive(Debug, Clone)]
pub struct PreparedBlock {
    /// Its height.
    pub height: u32,
    /// Its header.
    pub header: bitcoin::block::Header,
    /// Its transactions in block order.
    pub txs: Vec<PreparedTx>,
    /// Its BIP158 basic filter, serialized.
    pub filter: Vec<u8>,
}

fn output(o: &bitcoin::TxOut) -> PreparedOutput {
    let script = &o.script_pubkey;
    PreparedOutput {
        scripthash: ScriptHash::of(script),
        value: o.value.to_sat(),
        // Core never adds these to its UTXO set.
        spendable: !(script.is_op_return() || script.len() > 10_000),
        op_return: script.is_op_return(),
    }
}

/// Decodes a serialized block with its undo data into a [`PreparedBlock`]; its BIP158 filter
/// (empty otherwise) and its transactions' tweaks are built as `extras` asks.
pub fn prepare(
    height: u32,
    raw: &[u8],
    undo: &BlockUndo,
    extras: Extras,
) -> Result<PreparedBlock, PrepareError> {
    prepare_checked(height, raw, undo, extras, None)
}

/// [`prepare`] for bytes read from the kernel's block files at the place a scan mapped to
/// `hash`, which after a crash can hold a torn record or another block: they must decode to
/// exactly their length, with `hash`'s header (checked first) and the merkle root of the
/// transactions decoded (and, when tweaks are built, which read witnesses, the coinbase's
/// witness commitment), else
/// [`PrepareError::NotTheBlock`]. The txids are the ones every row needs anyway.
pub fn prepare_from_files(
    height: u32,
    raw: &[u8],
    undo: &BlockUndo,
    extras: Extras,
    hash: &BlockHash,
) -> Result<PreparedBlock, PrepareError> {
    prepare_checked(height, raw, undo, extras, Some(hash))
}

fn prepare_checked(
    height: u32,
    raw: &[u8],
    undo: &BlockUndo,
    extras: Extras,
    expect: Option<&BlockHash>,
) -> Result<PreparedBlock, PrepareError> {
    let decode_err = |e: bitcoin::consensus::encode::Error| PrepareError::Decode {
        height,
        message: e.to_string(),
    };
    let mut cursor = std::io::Cursor::new(raw);
    let header = bitcoin::block::Header::consensus_decode(&mut cursor).map_err(decode_err)?;
    if let Some(hash) = expect.filter(|hash| header.block_hash() != **hash) {
        // Before anything else is decoded: another block's bytes, or none.
        return Err(PrepareError::NotTheBlock {
            hash: *hash,
            height,
            message: format!("the header is {}'s", header.block_hash()),
        });
    }
    let count = bitcoin::VarInt::consensus_decode(&mut cursor)
        .map_err(decode_err)?
        .0;
    let mismatch = |message: String| PrepareError::UndoMismatch {
        hash: header.block_hash(),
        height,
        message,
    };
    if count == 0 || count > 1_000_000 {
        return Err(PrepareError::Decode {
            height,
            message: format!("implausible transaction count {count}"),
        });
    }
    if undo.txs.len() as u64 != count - 1 && height != 0 {
        return Err(mismatch(format!(
            "{} undo entries for {} non-coinbase transactions",
            undo.txs.len(),
            count - 1
        )));
    }
    let mut txs = Vec::with_capacity(count as usize);
    let mut txdata = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let offset = cursor.position() as u32;
        let tx = Transaction::consensus_decode(&mut cursor).map_err(decode_err)?;
        let len = cursor.position() as u32 - offset;
        let inputs = match i {
            0 => Vec::new(),
            _ => spent_inputs(&tx, i, undo).map_err(mismatch)?,
        };
        let spent = i.checked_sub(1).and_then(|j| undo.txs.get(j));
        let tweak = match (extras.tweaks, spent) {
            (true, Some(spent)) if tx.output.iter().any(|o| o.script_pubkey.is_p2tr()) => {
                let prevouts: Vec<bitcoin::TxOut> = spent.iter().map(|c| c.txout.clone()).collect();
                tx_tweak(&tx, &prevouts)
            }
            _ => None,
        };
        txs.push(PreparedTx {
            txid: tx.compute_txid(),
            offset,
            len,
            outputs: tx.output.iter().map(output).collect(),
            inputs,
            tweak,
        });
        txdata.push(tx);
    }
    let block = bitcoin::Block { header, txdata };
    if let Some(hash) = expect {
        let whole = cursor.position() == raw.len() as u64;
        is_the_block(&block, hash, whole, &txs, extras.tweaks).map_err(|message| {
            PrepareError::NotTheBlock {
                hash: *hash,
                height,
                message,
            }
        })?;
    }
    let filter = if extras.filter {
        super::filters::basic_filter(&block, undo).map_err(|e| PrepareError::Decode {
            height,
            message: format!("filter: {e}"),
        })?
    } else {
        Vec::new()
    };
    Ok(PreparedBlock {
        height,
        header,
        txs,
        filter,
    })
}

/// Whether `block`, decoded from bytes read for `hash` (`whole`: to their last byte) with a
/// header that hashes to `hash`, is that block: the header commits to the transactions
/// decoded (`txs`' ids), and with `witnesses`, the coinbase to their witnesses too. A
/// mutated form with a transaction repeated (CVE-2012-2459) keeps the merkle root but not the
/// transaction count, which the undo data's (checked before) already refuses.
fn is_the_block(
    block: &bitcoin::Block,
    hash: &BlockHash,
    whole: bool,
    txs: &[PreparedTx],
    witnesses: bool,
) -> Result<(), String> {
    if !whole {
        return Err("bytes are left after the block".into());
    }
    debug_assert_eq!(block.header.block_hash(), *hash, "checked before decoding");
    let root = bitcoin::merkle_tree::calculate_root(txs.iter().map(|tx| tx.txid));
    if root.map(|r| r.to_raw_hash()) != Some(block.header.merkle_root.to_raw_hash()) {
        return Err("the transactions are not the header's".into());
    }
    if witnesses && !block.check_witness_commitment() {
        return Err("the witnesses are not the block's".into());
    }
    Ok(())
}

/// The inputs of the block's `i`th transaction, each with the output it spends from the undo
/// data; the error says how the undo data does not fit the block.
fn spent_inputs(
    tx: &Transaction,
    i: usize,
    undo: &BlockUndo,
) -> Result<Vec<PreparedInput>, String> {
    let spent = undo
        .txs
        .get(i - 1)
        .ok_or_else(|| format!("no undo entry for transaction {i}"))?;
    if spent.len() != tx.input.len() {
        return Err(format!(
            "transaction {i} has {} inputs, undo data {}",
            tx.input.len(),
            spent.len()
        ));
    }
    Ok(tx
        .input
        .iter()
        .zip(spent)
        .map(|(input, coin)| PreparedInput {
            prev_txid: input.previous_output.txid,
            prev_vout: input.previous_output.vout,
            spent: output(&coin.txout),
        })
        .collect())
}
