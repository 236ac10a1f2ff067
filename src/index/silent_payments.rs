//! Silent payments (BIP352): each eligible transaction's public tweak data `input_hash·A`, from
//! the transaction and the outputs it spends (the kernel's undo data hands the index every one),
//! with the taproot outputs a wallet scans. The key extraction rules are the `silentpayments`
//! crate's; the rules of eligibility it leaves to its caller, and the sum and multiplication
//! (with one shared secp256k1 context, where the crate makes one per call), are here.

use bitcoin::hashes::Hash;
use bitcoin::{Transaction, TxOut};
use std::sync::LazyLock;

use bitcoin::hashes::{sha256, HashEngine};
use bitcoin::secp256k1::{PublicKey, Scalar, Secp256k1, VerifyOnly};
use silentpayments::utils::receiving::{get_pubkey_from_input, is_eligible};

use crate::types::Network;

pub mod scan;

/// Taproot's activation height on mainnet (BIP341): no output before it can be a silent
/// payment.
const MAINNET_TAPROOT_HEIGHT: u32 = 709_632;

/// The first height whose transactions get tweaks: taproot's activation on mainnet, genesis
/// elsewhere (testnet4, signet and regtest have taproot from their start).
pub fn first_height(network: Network) -> u32 {
    match network {
        Network::Mainnet => MAINNET_TAPROOT_HEIGHT,
        Network::Testnet4 | Network::Signet | Network::Regtest => 0,
    }
}

/// One context for every tweak (making one costs as much as the multiplication it serves).
static SECP: LazyLock<Secp256k1<VerifyOnly>> = LazyLock::new(Secp256k1::verification_only);

/// BIP352's `input_hash`: the tagged hash `BIP0352/Inputs` of the smallest outpoint and the
/// keys' sum, as a scalar; `None` if it is not one (2^-128 odds).
fn input_hash(smallest: &[u8; 36], sum: &PublicKey) -> Option<Scalar> {
    static TAG: LazyLock<[u8; 32]> =
        LazyLock::new(|| sha256::Hash::hash(b"BIP0352/Inputs").to_byte_array());
    let mut engine = sha256::Hash::engine();
    engine.input(&TAG[..]);
    engine.input(&TAG[..]);
    engine.input(smallest);
    engine.input(&sum.serialize());
    Scalar::from_be_bytes(sha256::Hash::from_engine(engine).to_byte_array()).ok()
}

/// A taproot output of an eligible transaction, as scanning wallets are served it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaprootOutput {
    /// Its index in the transaction.
    pub vout: u32,
    /// Its x-only output key.
    pub key: [u8; 32],
    /// Its amount in satoshis.
    pub value: u64,
}

/// One eligible transaction's tweak data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxTweak {
    /// The compressed point `input_hash·A` (BIP352's tweak data).
    pub tweak: [u8; 33],
    /// Its taproot outputs, in output order.
    pub outputs: Vec<TaprootOutput>,
}

/// The taproot outputs of `tx` (`OP_1 <32 bytes>`).
pub fn taproot_outputs(tx: &Transaction) -> Vec<TaprootOutput> {
    tx.output
        .iter()
        .enumerate()
        .filter(|(_, o)| o.script_pubkey.is_p2tr())
        .map(|(vout, o)| {
            let mut key = [0u8; 32];
            key.copy_from_slice(&o.script_pubkey.as_bytes()[2..34]);
            TaprootOutput {
                vout: vout as u32,
                key,
                value: o.value.to_sat(),
            }
        })
        .collect()
}

/// BIP352's tweak data of `tx`, whose inputs spend `prevouts` (in input order), or `None` when
/// it is not eligible: a coinbase; no taproot output; an input spending a witness program of
/// version 2 or more; no input of a kind that counts (P2TR but a script path from the NUMS
/// key, P2WPKH, P2SH-P2WPKH, P2PKH, with compressed keys only); or keys that sum to infinity.
/// `outpoint_L` is the smallest of all inputs' outpoints, eligible or not, by their bytes.
pub fn tx_tweak(tx: &Transaction, prevouts: &[TxOut]) -> Option<TxTweak> {
    if tx.is_coinbase() || prevouts.len() != tx.input.len() {
        return None;
    }
    let outputs = taproot_outputs(tx);
    if outputs.is_empty() {
        return None;
    }
    let spends_future_version = prevouts.iter().any(|p| {
        p.script_pubkey
            .witness_version()
            .is_some_and(|v| v.to_num() > 1)
    });
    if spends_future_version {
        return None;
    }
    let keys: Vec<_> = tx
        .input
        .iter()
        .zip(prevouts)
        .filter(|(_, prev)| is_eligible(prev.script_pubkey.as_bytes()))
        .filter_map(|(input, prev)| {
            let witness: Vec<Vec<u8>> = input.witness.to_vec();
            // An input the crate cannot read (a witness where none belongs, and so on) counts
            // no key, as BIP352's reference skips it.
            get_pubkey_from_input(
                input.script_sig.as_bytes(),
                &witness,
                prev.script_pubkey.as_bytes(),
            )
            .ok()
            .flatten()
        })
        .collect();
    if keys.is_empty() {
        return None;
    }
    // outpoint_L: the smallest of all inputs' outpoints, as serialized (txid, vout LE).
    let smallest = tx
        .input
        .iter()
        .map(|i| {
            let mut bytes = [0u8; 36];
            bytes[..32].copy_from_slice(&i.previous_output.txid.to_byte_array());
            bytes[32..].copy_from_slice(&i.previous_output.vout.to_le_bytes());
            bytes
        })
        .min()?;
    let key_refs: Vec<&PublicKey> = keys.iter().collect();
    // A = the sum of the keys; none when it is the point at infinity.
    let sum = PublicKey::combine_keys(&key_refs).ok()?;
    let tweak = sum.mul_tweak(&SECP, &input_hash(&smallest, &sum)?).ok()?;
    Some(TxTweak {
        tweak: tweak.serialize(),
        outputs,
    })
}

#[cfg(test)]
mod tests;
