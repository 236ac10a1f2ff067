//! Transaction shapes read from a real block, for `cairn generate --shape mainnet`: each
//! generated transaction copies a random transaction of the block (its input count and the kind
//! of each input, its outputs' script kinds and OP_RETURN payload sizes), so the chain has the
//! joint distribution of inputs, outputs and script types of today's mainnet.

use std::sync::Arc;

use bitcoin::script::Instruction;
use bitcoin::{Block, Script, Transaction, TxIn};
use rand::Rng;

use super::ScriptKind;

/// Mainnet block 951658 (374 transactions, 99,628 bytes), from ElectrumX's test data (the raw
/// block of `../shared/vectors/mainnet-block-951658.json`).
const MAINNET_BLOCK: &[u8] = include_bytes!("mainnet-block-951658.bin");

/// The largest OP_RETURN payload copied: one push (BIP 342's and Core's 520-byte element limit).
const MAX_DATA: usize = 520;

/// One output of a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputShape {
    /// A payment to a script of this kind.
    Pay(ScriptKind),
    /// An OP_RETURN output carrying this many bytes.
    Data(usize),
}

/// One transaction's shape: the kind of each input (`None` where the generator cannot spend
/// that kind, so any coin will do) and each output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxShape {
    /// The inputs' kinds, in order.
    pub inputs: Vec<Option<ScriptKind>>,
    /// The outputs, in order.
    pub outputs: Vec<OutputShape>,
}

impl TxShape {
    /// The number of payment (non-OP_RETURN) outputs.
    pub fn payments(&self) -> usize {
        self.payment_kinds().count()
    }

    /// The script kind of each payment output, in order.
    pub fn payment_kinds(&self) -> impl Iterator<Item = ScriptKind> + '_ {
        self.outputs.iter().filter_map(|o| match o {
            OutputShape::Pay(kind) => Some(*kind),
            OutputShape::Data(_) => None,
        })
    }

    /// The payload size of each OP_RETURN output, in order.
    pub fn data_lens(&self) -> impl Iterator<Item = usize> + '_ {
        self.outputs.iter().filter_map(|o| match o {
            OutputShape::Data(len) => Some(*len),
            OutputShape::Pay(_) => None,
        })
    }
}

/// The shapes of every non-coinbase transaction of a block, and the kinds of its payments.
#[derive(Debug, Clone)]
pub struct Shapes {
    txs: Arc<Vec<TxShape>>,
    payments: Arc<Vec<ScriptKind>>,
}

/// The block could not be used.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the shapes' block: {0}")]
pub struct ShapeError(String);

impl Shapes {
    /// The shapes of mainnet block 951658.
    pub fn mainnet() -> Result<Self, ShapeError> {
        let block: Block = bitcoin::consensus::deserialize(MAINNET_BLOCK)
            .map_err(|e| ShapeError(e.to_string()))?;
        Self::from_block(&block)
    }

    /// The shapes of `block`'s transactions after the coinbase; an error if it has none.
    pub fn from_block(block: &Block) -> Result<Self, ShapeError> {
        let txs: Vec<TxShape> = block.txdata.iter().skip(1).map(tx_shape).collect();
        let payments: Vec<ScriptKind> = txs.iter().flat_map(TxShape::payment_kinds).collect();
        if txs.is_empty() || payments.is_empty() {
            return Err(ShapeError(
                "the block has no payments besides the coinbase".into(),
            ));
        }
        Ok(Shapes {
            txs: Arc::new(txs),
            payments: Arc::new(payments),
        })
    }

    /// A random transaction's shape.
    pub fn pick(&self, rng: &mut impl Rng) -> &TxShape {
        &self.txs[rng.gen_range(0..self.txs.len())]
    }

    /// A random payment's script kind (for new scripts).
    pub fn payment_kind(&self, rng: &mut impl Rng) -> ScriptKind {
        self.payments[rng.gen_range(0..self.payments.len())]
    }

    /// Every shape, in block order.
    pub fn all(&self) -> &[TxShape] {
        &self.txs
    }
}

fn tx_shape(tx: &Transaction) -> TxShape {
    TxShape {
        inputs: tx.input.iter().map(input_kind).collect(),
        outputs: tx
            .output
            .iter()
            .map(|o| output_shape(&o.script_pubkey))
            .collect(),
    }
}

/// The generator's kind closest to an output script: the standard templates map one to one
/// (P2SH as P2SH-P2WPKH, P2WSH as 2-of-3 multisig); anything else (bare multisig, anchors,
/// future witness versions, 1 in 694 outputs of block 951658) is paid as P2WPKH, the most common.
fn output_shape(script: &Script) -> OutputShape {
    if script.is_op_return() {
        return OutputShape::Data(op_return_len(script).min(MAX_DATA));
    }
    OutputShape::Pay(if script.is_p2pkh() {
        ScriptKind::P2pkh
    } else if script.is_p2sh() {
        ScriptKind::P2shP2wpkh
    } else if script.is_p2tr() {
        ScriptKind::P2tr
    } else if script.is_p2wsh() {
        ScriptKind::P2wsh2of3
    } else {
        ScriptKind::P2wpkh
    })
}

/// The bytes an OP_RETURN script pushes (0 for a bare OP_RETURN or one that does not parse).
fn op_return_len(script: &Script) -> usize {
    script
        .instructions()
        .skip(1)
        .map_while(Result::ok)
        .map(|i| match i {
            Instruction::PushBytes(p) => p.len(),
            Instruction::Op(_) => 0,
        })
        .sum()
}

/// The kind an input spends, told from its scriptSig and witness: one 64/65-byte witness item
/// is a taproot key path; a signature and a key, P2WPKH (nested in P2SH when the scriptSig
/// pushes the redeem script); more items, a script path (P2WSH or tapscript: spent here as
/// 2-of-3 P2WSH); a scriptSig alone, legacy (P2PKH).
fn input_kind(txin: &TxIn) -> Option<ScriptKind> {
    let items = txin.witness.len();
    let nested = !txin.script_sig.is_empty();
    match (items, nested) {
        (0, true) => Some(ScriptKind::P2pkh),
        (1, false) if matches!(txin.witness.nth(0).map(<[u8]>::len), Some(64 | 65)) => {
            Some(ScriptKind::P2tr)
        }
        (2, false) => Some(ScriptKind::P2wpkh),
        (2, true) => Some(ScriptKind::P2shP2wpkh),
        (3.., _) => Some(ScriptKind::P2wsh2of3),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts checked against the block by an independent reading of its bytes
    /// (`python3 contrib/bench/block-shape.py`): 373 transactions after
    /// the coinbase; inputs per transaction 1: 349, 2: 16, 3: 3, 4: 4, 6: 1; outputs 694, of
    /// them 346 P2WPKH, 210 OP_RETURN, 103 P2TR, 14 P2SH, 13 P2WSH, 7 P2PKH, 1 other.
    #[test]
    fn mainnet_block_shapes() {
        let shapes = Shapes::mainnet().expect("the embedded block parses");
        let txs = shapes.all();
        assert_eq!(txs.len(), 373);
        let with_inputs = |n: usize| txs.iter().filter(|t| t.inputs.len() == n).count();
        assert_eq!([1, 2, 3, 4, 6].map(with_inputs), [349, 16, 3, 4, 1]);
        let outputs: Vec<OutputShape> =
            txs.iter().flat_map(|t| t.outputs.iter().copied()).collect();
        assert_eq!(outputs.len(), 694);
        let pays = |k: ScriptKind| {
            outputs
                .iter()
                .filter(|o| **o == OutputShape::Pay(k))
                .count()
        };
        assert_eq!(pays(ScriptKind::P2wpkh), 346 + 1);
        assert_eq!(pays(ScriptKind::P2tr), 103);
        assert_eq!(pays(ScriptKind::P2shP2wpkh), 14);
        assert_eq!(pays(ScriptKind::P2wsh2of3), 13);
        assert_eq!(pays(ScriptKind::P2pkh), 7);
        assert_eq!(
            outputs
                .iter()
                .filter(|o| matches!(o, OutputShape::Data(_)))
                .count(),
            210
        );
        let spends = |k: ScriptKind| {
            txs.iter()
                .flat_map(|t| t.inputs.iter())
                .filter(|i| **i == Some(k))
                .count()
        };
        assert_eq!(spends(ScriptKind::P2wpkh), 291);
        assert_eq!(spends(ScriptKind::P2wsh2of3), 92);
        assert_eq!(spends(ScriptKind::P2tr), 13);
        assert_eq!(spends(ScriptKind::P2shP2wpkh), 9);
        assert_eq!(spends(ScriptKind::P2pkh), 7);
    }
}
