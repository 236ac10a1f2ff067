//! What a script asks of the transaction around it (Core's `GenericTransactionSignatureChecker`):
//! ECDSA signatures over legacy and BIP143 hashes, Schnorr signatures over BIP341's, and the
//! lock times of CHECKLOCKTIMEVERIFY and CHECKSEQUENCEVERIFY; and the encoding rules of
//! signatures and keys (`CheckSignatureEncoding`, `CheckPubKeyEncoding`).

use std::cell::{OnceCell, RefCell};
use std::sync::LazyLock;

use bitcoin::consensus::Encodable;
use bitcoin::hashes::{sha256d, Hash, HashEngine};
use bitcoin::secp256k1::{
    ecdsa, schnorr, Message, PublicKey, Secp256k1, VerifyOnly, XOnlyPublicKey,
};
use bitcoin::sighash::{Annex, Prevouts, SighashCache, TapSighashType};
use bitcoin::taproot::TapLeafHash;
use bitcoin::{Script, Transaction, TxOut};

use super::{Flags, ScriptError, SigVersion};

static SECP: LazyLock<Secp256k1<VerifyOnly>> = LazyLock::new(Secp256k1::verification_only);

/// Half the order of secp256k1's group: a low S is at most this (Core's `CPubKey::CheckLowS`).
const HALF_ORDER: [u8; 32] = [
    0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x5d, 0x57, 0x6e, 0x73, 0x57, 0xa4, 0x50, 0x1d, 0xdf, 0xe9, 0x2f, 0x46, 0x68, 0x1b, 0x20, 0xa0,
];

/// BIP341's taproot state of the input being run: the annex and, in a script path, the leaf.
#[derive(Debug, Default, Clone)]
pub struct TaprootInput {
    /// The annex (its first byte 0x50), when the witness has one.
    pub annex: Option<Vec<u8>>,
    /// The leaf's hash, in a script-path spend.
    pub leaf_hash: Option<TapLeafHash>,
    /// The opcode position of the last OP_CODESEPARATOR run (0xffffffff: none).
    pub code_separator: u32,
}

/// What every input's checks of one transaction share (Core's `PrecomputedTransactionData`):
/// BIP143's hashes of the whole transaction and BIP341's (in the sighash cache), each
/// computed once for all its inputs, not once an input.
pub struct TxData<'a> {
    tx: &'a Transaction,
    prevouts: &'a [TxOut],
    cache: RefCell<SighashCache<&'a Transaction>>,
    bip143: OnceCell<Bip143Hashes>,
}

impl<'a> TxData<'a> {
    /// The shared data of `tx`, whose inputs spend `prevouts` (one for each, in order).
    pub fn new(tx: &'a Transaction, prevouts: &'a [TxOut]) -> Self {
        TxData {
            tx,
            prevouts,
            cache: RefCell::new(SighashCache::new(tx)),
            bip143: OnceCell::new(),
        }
    }

    /// The transaction.
    pub fn tx(&self) -> &'a Transaction {
        self.tx
    }

    /// The outputs its inputs spend.
    pub fn prevouts(&self) -> &'a [TxOut] {
        self.prevouts
    }
}

/// BIP143's hashes of the whole transaction, computed once for all its inputs.
struct Bip143Hashes {
    prevouts: sha256d::Hash,
    sequences: sha256d::Hash,
    outputs: sha256d::Hash,
}

/// Signature hashes one input computed, by hash type and script code (Core's `SigHashCache`):
/// a 1-of-15 CHECKMULTISIG hashes the transaction once, not once a key.
type HashMemo = Vec<(u8, Vec<u8>, [u8; 32])>;

/// Checks the signatures and lock times of one input of one transaction.
pub struct Checker<'d, 'a> {
    data: &'d TxData<'a>,
    tx: &'a Transaction,
    input: usize,
    hashes: HashMemo,
}

impl<'d, 'a> Checker<'d, 'a> {
    /// A checker for input `input` of the transaction of `data`.
    pub fn new(data: &'d TxData<'a>, input: usize) -> Self {
        Checker {
            data,
            tx: data.tx,
            input,
            hashes: Vec::new(),
        }
    }

    /// The value of the output the input spends.
    fn amount(&self) -> bitcoin::Amount {
        self.data
            .prevouts
            .get(self.input)
            .map_or(bitcoin::Amount::ZERO, |out| out.value)
    }

    /// Core's `CheckECDSASignature`: `sig` (with its hash type byte) by `key` over the input
    /// with `script_code`. False for anything that does not parse.
    pub fn check_ecdsa(
        &mut self,
        sig: &[u8],
        key: &[u8],
        script_code: &[u8],
        version: SigVersion,
    ) -> bool {
        let Some((&hash_type, der)) = sig.split_last() else {
            return false;
        };
        if !key_has_valid_size(key) {
            return false;
        }
        let Ok(key) = PublicKey::from_slice(key) else {
            return false;
        };
        let Ok(mut signature) = ecdsa::Signature::from_der_lax(der) else {
            return false;
        };
        signature.normalize_s();
        let digest = self.signature_hash(script_code, hash_type, version);
        let message = Message::from_digest(digest);
        SECP.verify_ecdsa(&message, &signature, &key).is_ok()
    }

    /// The hash an ECDSA signature of `hash_type` signs, from this input's memo when it was
    /// computed for the same hash type and script code.
    fn signature_hash(
        &mut self,
        script_code: &[u8],
        hash_type: u8,
        version: SigVersion,
    ) -> [u8; 32] {
        let known = self
            .hashes
            .iter()
            .find(|(t, code, _)| *t == hash_type && code == script_code);
        if let Some((_, _, digest)) = known {
            return *digest;
        }
        let digest = match version {
            SigVersion::Base => self.legacy_hash(script_code, hash_type),
            _ => self.bip143_hash(script_code, hash_type),
        };
        self.hashes.push((hash_type, script_code.to_vec(), digest));
        digest
    }

    /// Core's legacy `SignatureHash`: OP_CODESEPARATORs left out of the script code, and the
    /// SIGHASH_SINGLE bug's hash of one.
    fn legacy_hash(&self, script_code: &[u8], hash_type: u8) -> [u8; 32] {
        let code = without_code_separators(script_code);
        self.data
            .cache
            .borrow()
            .legacy_signature_hash(self.input, Script::from_bytes(&code), u32::from(hash_type))
            .map_or([0; 32], |h| h.to_byte_array())
    }

    /// BIP143's hash, with the hash type byte written as the transaction carries it.
    fn bip143_hash(&self, script_code: &[u8], hash_type: u8) -> [u8; 32] {
        let tx = self.tx;
        let amount = self.amount().to_sat();
        let hashes = self.data.bip143.get_or_init(|| Bip143Hashes::of(tx));
        let base = hash_type & 0x1f;
        let anyone_can_pay = hash_type & 0x80 != 0;
        let zero = sha256d::Hash::all_zeros();
        let mut engine = sha256d::Hash::engine();
        let txin = &tx.input[self.input];
        let mut write = |bytes: &[u8]| engine.input(bytes);
        write(&tx.version.0.to_le_bytes());
        write(
            if anyone_can_pay {
                &zero
            } else {
                &hashes.prevouts
            }
            .as_byte_array(),
        );
        let all_sequences = !anyone_can_pay && base != 2 && base != 3;
        write(
            if all_sequences {
                &hashes.sequences
            } else {
                &zero
            }
            .as_byte_array(),
        );
        write(txin.previous_output.txid.as_byte_array());
        write(&txin.previous_output.vout.to_le_bytes());
        let mut code = Vec::with_capacity(script_code.len() + 9);
        let _ = bitcoin::VarInt(script_code.len() as u64).consensus_encode(&mut code);
        code.extend_from_slice(script_code);
        write(&code);
        write(&amount.to_le_bytes());
        write(&txin.sequence.0.to_le_bytes());
        let outputs = if base != 2 && base != 3 {
            hashes.outputs
        } else if base == 3 && self.input < tx.output.len() {
            let mut one = Vec::new();
            let _ = tx.output[self.input].consensus_encode(&mut one);
            sha256d::Hash::hash(&one)
        } else {
            zero
        };
        write(outputs.as_byte_array());
        write(&tx.lock_time.to_consensus_u32().to_le_bytes());
        write(&u32::from(hash_type).to_le_bytes());
        sha256d::Hash::from_engine(engine).to_byte_array()
    }

    /// Core's `CheckSchnorrSignature`: a 64-byte signature (SIGHASH_DEFAULT) or 65 with a hash
    /// type, by the x-only `key`, over BIP341's hash of the input.
    pub fn check_schnorr(
        &mut self,
        sig: &[u8],
        key: &[u8],
        taproot: &TaprootInput,
    ) -> Result<(), ScriptError> {
        let (body, hash_type) = match sig.len() {
            64 => (sig, 0x00),
            65 if sig[64] == 0x00 => return Err(ScriptError::SchnorrSigHashtype),
            65 => (&sig[..64], sig[64]),
            _ => return Err(ScriptError::SchnorrSigSize),
        };
        let hash_type = TapSighashType::from_consensus_u8(hash_type)
            .map_err(|_| ScriptError::SchnorrSigHashtype)?;
        let annex = match &taproot.annex {
            Some(bytes) => Some(Annex::new(bytes).map_err(|_| ScriptError::SchnorrSigHashtype)?),
            None => None,
        };
        let leaf = taproot.leaf_hash.map(|leaf| (leaf, taproot.code_separator));
        let digest = self
            .data
            .cache
            .borrow_mut()
            .taproot_signature_hash(
                self.input,
                &Prevouts::All(self.data.prevouts),
                annex,
                leaf,
                hash_type,
            )
            .map_err(|_| ScriptError::SchnorrSigHashtype)?;
        let valid = match (
            XOnlyPublicKey::from_slice(key),
            schnorr::Signature::from_slice(body),
        ) {
            (Ok(key), Ok(signature)) => {
                let message = Message::from_digest(digest.to_byte_array());
                SECP.verify_schnorr(&signature, &message, &key).is_ok()
            }
            _ => false,
        };
        if valid {
            Ok(())
        } else {
            Err(ScriptError::SchnorrSig)
        }
    }

    /// Core's `CheckLockTime`: the transaction's lock time of the same kind as `lock_time`, at
    /// least it, and this input not final.
    pub fn check_lock_time(&self, lock_time: i64) -> bool {
        const THRESHOLD: i64 = 500_000_000;
        let tx_lock = i64::from(self.tx.lock_time.to_consensus_u32());
        let same_kind = (tx_lock < THRESHOLD) == (lock_time < THRESHOLD);
        same_kind && lock_time <= tx_lock && self.tx.input[self.input].sequence.0 != u32::MAX
    }

    /// Core's `CheckSequence`: BIP68's relative lock of the input of the same kind as
    /// `sequence`, and at least it.
    pub fn check_sequence(&self, sequence: i64) -> bool {
        const DISABLE: u32 = 1 << 31;
        const TYPE: i64 = 1 << 22;
        const MASK: i64 = TYPE | 0xffff;
        let tx_sequence = self.tx.input[self.input].sequence.0;
        if (self.tx.version.0 as u32) < 2 || tx_sequence & DISABLE != 0 {
            return false;
        }
        let tx_masked = i64::from(tx_sequence) & MASK;
        let masked = sequence & MASK;
        (tx_masked < TYPE) == (masked < TYPE) && masked <= tx_masked
    }
}

impl Bip143Hashes {
    fn of(tx: &Transaction) -> Self {
        let mut prevouts = sha256d::Hash::engine();
        let mut sequences = sha256d::Hash::engine();
        for input in &tx.input {
            prevouts.input(input.previous_output.txid.as_byte_array());
            prevouts.input(&input.previous_output.vout.to_le_bytes());
            sequences.input(&input.sequence.0.to_le_bytes());
        }
        let mut outputs = Vec::new();
        for output in &tx.output {
            let _ = output.consensus_encode(&mut outputs);
        }
        Bip143Hashes {
            prevouts: sha256d::Hash::from_engine(prevouts),
            sequences: sha256d::Hash::from_engine(sequences),
            outputs: sha256d::Hash::hash(&outputs),
        }
    }
}

/// The script code with its OP_CODESEPARATORs left out, as Core's legacy serializer writes it
/// (a tail that does not parse is written as it is).
fn without_code_separators(code: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(code.len());
    let mut start = 0;
    let mut pc = 0;
    while let Some(op) = super::script::next_op(code, &mut pc) {
        if op.opcode == super::script::OP_CODESEPARATOR {
            out.extend_from_slice(&code[start..pc - 1]);
            start = pc;
        }
    }
    out.extend_from_slice(&code[start..]);
    out
}

/// Core's `CPubKey::IsValid` on size: 33 bytes from 02 or 03, 65 from 04, 06 or 07.
fn key_has_valid_size(key: &[u8]) -> bool {
    match key.first() {
        Some(2 | 3) => key.len() == 33,
        Some(4 | 6 | 7) => key.len() == 65,
        _ => false,
    }
}

/// Core's `CheckSignatureEncoding`: an empty signature passes; else strict DER under DERSIG,
/// LOW_S or STRICTENC, a low S under LOW_S, a defined hash type under STRICTENC.
pub fn check_signature_encoding(sig: &[u8], flags: Flags) -> Result<(), ScriptError> {
    if sig.is_empty() {
        return Ok(());
    }
    if flags.any(Flags::DERSIG | Flags::LOW_S | Flags::STRICTENC)
        && !is_valid_signature_encoding(sig)
    {
        return Err(ScriptError::SigDer);
    }
    if flags.has(Flags::LOW_S) && !has_low_s(sig) {
        return Err(ScriptError::SigHighS);
    }
    if flags.has(Flags::STRICTENC) && !is_defined_hash_type(sig) {
        return Err(ScriptError::SigHashtype);
    }
    Ok(())
}

/// Core's `CheckPubKeyEncoding`: compressed or uncompressed under STRICTENC, compressed in
/// segwit v0 under WITNESS_PUBKEYTYPE.
pub fn check_pubkey_encoding(
    key: &[u8],
    flags: Flags,
    version: SigVersion,
) -> Result<(), ScriptError> {
    let compressed = key.len() == 33 && matches!(key[0], 2 | 3);
    let uncompressed = key.len() == 65 && key[0] == 4;
    if flags.has(Flags::STRICTENC) && !compressed && !uncompressed {
        return Err(ScriptError::PubkeyType);
    }
    if flags.has(Flags::WITNESS_PUBKEYTYPE) && version == SigVersion::WitnessV0 && !compressed {
        return Err(ScriptError::WitnessPubkeyType);
    }
    Ok(())
}

/// BIP66's `IsValidSignatureEncoding`: strict DER with the hash type byte after it.
fn is_valid_signature_encoding(sig: &[u8]) -> bool {
    let size = sig.len();
    if !(9..=73).contains(&size) || sig[0] != 0x30 || usize::from(sig[1]) != size - 3 {
        return false;
    }
    let len_r = usize::from(sig[3]);
    if 5 + len_r >= size {
        return false;
    }
    let len_s = usize::from(sig[5 + len_r]);
    if len_r + len_s + 7 != size {
        return false;
    }
    let r_ok = sig[2] == 0x02
        && len_r != 0
        && sig[4] & 0x80 == 0
        && !(len_r > 1 && sig[4] == 0 && sig[5] & 0x80 == 0);
    let s_ok = sig[len_r + 4] == 0x02
        && len_s != 0
        && sig[len_r + 6] & 0x80 == 0
        && !(len_s > 1 && sig[len_r + 6] == 0 && sig[len_r + 7] & 0x80 == 0);
    r_ok && s_ok
}

/// Core's `IsLowDERSignature` past the encoding check: S at most half the group order.
fn has_low_s(sig: &[u8]) -> bool {
    let der = &sig[..sig.len() - 1];
    let Ok(parsed) = ecdsa::Signature::from_der_lax(der) else {
        return false;
    };
    let compact = parsed.serialize_compact();
    compact[32..] <= HALF_ORDER[..]
}

/// Core's `IsDefinedHashtypeSignature`: ALL, NONE or SINGLE, with or without ANYONECANPAY.
fn is_defined_hash_type(sig: &[u8]) -> bool {
    sig.last().is_some_and(|t| (1..=3).contains(&(t & !0x80)))
}
