//! The generator's key owners: deterministic keys, the five script kinds it pays to, and how
//! each kind signs a spend; or, for the signature-free workload, the script of the same kind's
//! shape that spends without any signature.

use bitcoin::blockdata::opcodes::all::{
    OP_2DROP, OP_CHECKMULTISIG, OP_DROP, OP_PUSHNUM_1, OP_PUSHNUM_2, OP_PUSHNUM_3,
};
use bitcoin::hashes::{sha256, Hash};
use bitcoin::key::{Keypair, TapTweak, TweakedKeypair};
use bitcoin::script::{Builder, PushBytesBuf};
use bitcoin::secp256k1::{All, Message, Secp256k1, SecretKey};
use bitcoin::sighash::{EcdsaSighashType, Prevouts, SighashCache, TapSighashType};
use bitcoin::taproot::{ControlBlock, LeafVersion, TapLeafHash, TapNodeHash, TaprootMerkleBranch};
use bitcoin::{CompressedPublicKey, PublicKey, ScriptBuf, Transaction, TxOut, Witness};

/// The kinds of output script the generator creates and spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptKind {
    /// Legacy pay-to-pubkey-hash, signed with ECDSA in the scriptSig.
    P2pkh,
    /// P2WPKH nested in P2SH.
    P2shP2wpkh,
    /// Native segwit v0 pay-to-witness-pubkey-hash.
    P2wpkh,
    /// Taproot, spent by the key path with a Schnorr signature.
    P2tr,
    /// 2-of-3 multisig in P2WSH.
    P2wsh2of3,
}

impl ScriptKind {
    /// Picks a kind from a uniform number in 0..100, with realistic shares.
    pub fn from_percent(p: u32) -> Self {
        match p {
            0..=39 => ScriptKind::P2wpkh,
            40..=54 => ScriptKind::P2pkh,
            55..=69 => ScriptKind::P2shP2wpkh,
            70..=89 => ScriptKind::P2tr,
            _ => ScriptKind::P2wsh2of3,
        }
    }
}

/// How the generator's outputs are spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Spending {
    /// With real signatures (ECDSA and Schnorr), as wallets spend.
    #[default]
    Signed,
    /// With no signature anywhere: what the kernel checks below mainnet's assume-valid block
    /// (block and transaction rules, the UTXO set, no signatures), at about the byte sizes of
    /// signed spends. Each kind becomes a script of its shape that any input spends:
    /// P2PKH a P2SH, P2WPKH and 2-of-3 multisig a P2WSH, P2SH-P2WPKH a P2SH-P2WSH, each of
    /// `<20-byte id> OP_DROP OP_2DROP OP_TRUE` with two signature-sized pushes; taproot a
    /// script-path spend of the one leaf `<id> OP_DROP OP_DROP OP_TRUE` with a 64-byte push (its
    /// output key is still checked against the control block, a tweak, not a signature).
    SignatureFree,
}

/// One owner of outputs: a script and the keys that spend it.
#[derive(Debug, Clone)]
pub struct Owner {
    /// The kind of script.
    pub kind: ScriptKind,
    /// The output script.
    pub script_pubkey: ScriptBuf,
    keys: Vec<SecretKey>,
    /// P2SH redeem script or P2WSH witness script.
    inner_script: Option<ScriptBuf>,
    tweaked: Option<TweakedKeypair>,
    /// The input that spends any of its outputs, when it needs no signature.
    free: Option<InputSignature>,
}

/// A deterministic secret key: SHA-256 of (seed, index, attempt), retried if out of range.
pub fn derive_key(seed: u64, index: u64) -> SecretKey {
    let mut attempt = 0u32;
    loop {
        let mut data = Vec::with_capacity(24);
        data.extend_from_slice(b"cairn-generate");
        data.extend_from_slice(&seed.to_le_bytes());
        data.extend_from_slice(&index.to_le_bytes());
        data.extend_from_slice(&attempt.to_le_bytes());
        let digest = sha256::Hash::hash(&data);
        if let Ok(key) = SecretKey::from_slice(digest.as_byte_array()) {
            return key;
        }
        attempt += 1;
    }
}

impl Owner {
    /// Creates an owner of `kind` whose keys are derived from `seed` and `index`.
    pub fn new(secp: &Secp256k1<All>, kind: ScriptKind, seed: u64, index: u64) -> Self {
        let key_count = if kind == ScriptKind::P2wsh2of3 { 3 } else { 1 };
        let keys: Vec<SecretKey> = (0..key_count)
            .map(|k| derive_key(seed, index * 4 + k))
            .collect();
        Self::from_keys(secp, kind, keys)
    }

    /// Creates an owner of `kind` from its keys (three for 2-of-3 multisig, one otherwise;
    /// never none).
    pub(crate) fn from_keys(secp: &Secp256k1<All>, kind: ScriptKind, keys: Vec<SecretKey>) -> Self {
        let pk = CompressedPublicKey(keys[0].public_key(secp));
        let mut inner_script = None;
        let mut tweaked = None;
        let script_pubkey = match kind {
            ScriptKind::P2pkh => ScriptBuf::new_p2pkh(&PublicKey::from(pk).pubkey_hash()),
            ScriptKind::P2wpkh => ScriptBuf::new_p2wpkh(&pk.wpubkey_hash()),
            ScriptKind::P2shP2wpkh => {
                let redeem = ScriptBuf::new_p2wpkh(&pk.wpubkey_hash());
                let spk = ScriptBuf::new_p2sh(&redeem.script_hash());
                inner_script = Some(redeem);
                spk
            }
            ScriptKind::P2tr => {
                let keypair = Keypair::from_secret_key(secp, &keys[0]);
                let (internal, _) = keypair.x_only_public_key();
                tweaked = Some(keypair.tap_tweak(secp, None));
                ScriptBuf::new_p2tr(secp, internal, None)
            }
            ScriptKind::P2wsh2of3 => {
                let mut b = Builder::new().push_opcode(OP_PUSHNUM_2);
                for k in &keys {
                    b = b.push_key(&PublicKey::new(k.public_key(secp)));
                }
                let ws = b
                    .push_opcode(OP_PUSHNUM_3)
                    .push_opcode(OP_CHECKMULTISIG)
                    .into_script();
                let spk = ScriptBuf::new_p2wsh(&ws.wscript_hash());
                inner_script = Some(ws);
                spk
            }
        };
        Owner {
            kind,
            script_pubkey,
            keys,
            inner_script,
            tweaked,
            free: None,
        }
    }

    /// An owner of `kind`'s shape whose outputs spend without a signature
    /// ([`Spending::SignatureFree`]), unique by `seed` and `index`.
    pub fn signature_free(secp: &Secp256k1<All>, kind: ScriptKind, seed: u64, index: u64) -> Self {
        let key = derive_key(seed, index * 4);
        let id = push_bytes(&key.secret_bytes()[..20]);
        let two_pushes = [vec![0x30; 72], vec![0x02; 33]];
        let script = |drop| {
            Builder::new()
                .push_slice(&id)
                .push_opcode(OP_DROP)
                .push_opcode(drop)
                .push_opcode(OP_PUSHNUM_1)
                .into_script()
        };
        let ws = script(OP_2DROP);
        let witness = |pushes: &[Vec<u8>], ws: &ScriptBuf| {
            let mut w = Witness::from_slice(pushes);
            w.push(ws.as_bytes());
            w
        };
        let (script_pubkey, script_sig, free_witness, tweaked) = match kind {
            ScriptKind::P2pkh => {
                let mut b = Builder::new();
                for push in &two_pushes {
                    b = b.push_slice(push_bytes(push));
                }
                let sig = b.push_slice(push_bytes(ws.as_bytes())).into_script();
                (
                    ScriptBuf::new_p2sh(&ws.script_hash()),
                    sig,
                    Witness::new(),
                    None,
                )
            }
            ScriptKind::P2wpkh => (
                ScriptBuf::new_p2wsh(&ws.wscript_hash()),
                ScriptBuf::new(),
                witness(&two_pushes, &ws),
                None,
            ),
            ScriptKind::P2shP2wpkh => {
                let program = ScriptBuf::new_p2wsh(&ws.wscript_hash());
                let sig = Builder::new()
                    .push_slice(push_bytes(program.as_bytes()))
                    .into_script();
                let spk = ScriptBuf::new_p2sh(&program.script_hash());
                (spk, sig, witness(&two_pushes, &ws), None)
            }
            ScriptKind::P2wsh2of3 => (
                ScriptBuf::new_p2wsh(&ws.wscript_hash()),
                ScriptBuf::new(),
                witness(&[vec![0x30; 72], vec![0x30; 72]], &ws),
                None,
            ),
            ScriptKind::P2tr => {
                let (spk, w, tweaked) = taproot_script_path(secp, &key, script(OP_DROP));
                (spk, ScriptBuf::new(), w, Some(tweaked))
            }
        };
        Owner {
            kind,
            script_pubkey,
            keys: vec![key],
            inner_script: None,
            tweaked,
            free: Some(InputSignature {
                script_sig,
                witness: free_witness,
            }),
        }
    }
}

/// A taproot output of `key` committing to the one leaf `leaf`, the witness spending it by that
/// leaf (a 64-byte push, the leaf, the control block), and the tweaked key pair (the output
/// key's secret, which BIP352 counts).
fn taproot_script_path(
    secp: &Secp256k1<All>,
    key: &SecretKey,
    leaf: ScriptBuf,
) -> (ScriptBuf, Witness, TweakedKeypair) {
    let keypair = Keypair::from_secret_key(secp, key);
    let (internal, _) = keypair.x_only_public_key();
    // One leaf: the merkle root is its hash, the control block has no path.
    let root = TapNodeHash::from(TapLeafHash::from_script(&leaf, LeafVersion::TapScript));
    let tweaked = keypair.tap_tweak(secp, Some(root));
    let (output_key, parity) = tweaked.public_parts();
    let control = ControlBlock {
        leaf_version: LeafVersion::TapScript,
        output_key_parity: parity,
        internal_key: internal,
        merkle_branch: TaprootMerkleBranch::default(),
    };
    let mut witness = Witness::from_slice(&[vec![0x01; 64]]);
    witness.push(leaf.as_bytes());
    witness.push(control.serialize());
    (ScriptBuf::new_p2tr_tweaked(output_key), witness, tweaked)
}

impl Owner {
    /// The secret key BIP352 counts for an input spending this owner's output, and whether it
    /// is a taproot output key (which the sum takes with even Y); `None` for 2-of-3 multisig,
    /// which does not count.
    pub(super) fn bip352_key(&self) -> Option<(SecretKey, bool)> {
        if self.free.is_some() {
            // Signature-free: only taproot's output key counts (a script-path spend, its
            // internal key not the NUMS point); the others are P2SH and P2WSH scripts.
            return self.tweaked.map(|t| (t.to_keypair().secret_key(), true));
        }
        match self.kind {
            ScriptKind::P2pkh | ScriptKind::P2shP2wpkh | ScriptKind::P2wpkh => {
                self.keys.first().map(|k| (*k, false))
            }
            ScriptKind::P2tr => self.tweaked.map(|t| (t.to_keypair().secret_key(), true)),
            ScriptKind::P2wsh2of3 => None,
        }
    }
}

/// What signing one input produces.
#[derive(Debug, Clone)]
pub struct InputSignature {
    /// The scriptSig.
    pub script_sig: ScriptBuf,
    /// The witness.
    pub witness: Witness,
}

fn ecdsa(secp: &Secp256k1<All>, digest: [u8; 32], key: &SecretKey) -> bitcoin::ecdsa::Signature {
    let msg = Message::from_digest(digest);
    bitcoin::ecdsa::Signature {
        signature: secp.sign_ecdsa(&msg, key),
        sighash_type: EcdsaSighashType::All,
    }
}

/// Signs input `index` of `tx`, which spends `prevouts[index]` owned by `owner`.
/// `prevouts` holds every input's spent output (taproot signs them all).
pub fn sign_input(
    secp: &Secp256k1<All>,
    cache: &mut SighashCache<&Transaction>,
    index: usize,
    prevouts: &[TxOut],
    owner: &Owner,
) -> Result<InputSignature, String> {
    let prevout = &prevouts[index];
    if let Some(free) = &owner.free {
        return Ok(free.clone());
    }
    match owner.kind {
        ScriptKind::P2pkh => sign_p2pkh(secp, cache, index, prevout, owner),
        ScriptKind::P2wpkh | ScriptKind::P2shP2wpkh => {
            sign_p2wpkh(secp, cache, index, prevout, owner)
        }
        ScriptKind::P2wsh2of3 => sign_p2wsh_2of3(secp, cache, index, prevout, owner),
        ScriptKind::P2tr => sign_p2tr_key_path(secp, cache, index, prevouts, owner),
    }
}

/// A legacy signature and the public key in the script sig.
fn sign_p2pkh(
    secp: &Secp256k1<All>,
    cache: &mut SighashCache<&Transaction>,
    index: usize,
    prevout: &TxOut,
    owner: &Owner,
) -> Result<InputSignature, String> {
    let key0 = &owner.keys[0];
    let sighash = cache
        .legacy_signature_hash(
            index,
            &prevout.script_pubkey,
            EcdsaSighashType::All.to_u32(),
        )
        .map_err(|e| e.to_string())?;
    let sig = ecdsa(secp, sighash.to_byte_array(), key0);
    Ok(InputSignature {
        script_sig: Builder::new()
            .push_slice(push_bytes(sig.serialize().as_ref()))
            .push_key(&PublicKey::new(key0.public_key(secp)))
            .into_script(),
        witness: Witness::new(),
    })
}

/// A BIP143 signature and the public key in the witness; nested in P2SH, the redeem script in
/// the script sig.
fn sign_p2wpkh(
    secp: &Secp256k1<All>,
    cache: &mut SighashCache<&Transaction>,
    index: usize,
    prevout: &TxOut,
    owner: &Owner,
) -> Result<InputSignature, String> {
    let key0 = &owner.keys[0];
    let wpkh_script = match &owner.inner_script {
        Some(redeem) => redeem.clone(),
        None => prevout.script_pubkey.clone(),
    };
    let sighash = cache
        .p2wpkh_signature_hash(index, &wpkh_script, prevout.value, EcdsaSighashType::All)
        .map_err(|e| e.to_string())?;
    let sig = ecdsa(secp, sighash.to_byte_array(), key0);
    let script_sig = match owner.kind {
        ScriptKind::P2shP2wpkh => Builder::new()
            .push_slice(push_bytes(wpkh_script.as_bytes()))
            .into_script(),
        _ => ScriptBuf::new(),
    };
    Ok(InputSignature {
        script_sig,
        witness: Witness::p2wpkh(&sig, &PublicKey::new(key0.public_key(secp)).inner),
    })
}

/// Two of the three keys' signatures, in script order, then the witness script.
fn sign_p2wsh_2of3(
    secp: &Secp256k1<All>,
    cache: &mut SighashCache<&Transaction>,
    index: usize,
    prevout: &TxOut,
    owner: &Owner,
) -> Result<InputSignature, String> {
    let ws = owner.inner_script.clone().unwrap_or_default();
    let sighash = cache
        .p2wsh_signature_hash(index, &ws, prevout.value, EcdsaSighashType::All)
        .map_err(|e| e.to_string())?;
    let mut witness = Witness::new();
    witness.push([]);
    for key in owner.keys.iter().take(2) {
        witness.push(ecdsa(secp, sighash.to_byte_array(), key).serialize());
    }
    witness.push(ws.as_bytes());
    Ok(InputSignature {
        script_sig: ScriptBuf::new(),
        witness,
    })
}

/// A BIP341 key-path signature with the tweaked key (every prevout is signed for).
fn sign_p2tr_key_path(
    secp: &Secp256k1<All>,
    cache: &mut SighashCache<&Transaction>,
    index: usize,
    prevouts: &[TxOut],
    owner: &Owner,
) -> Result<InputSignature, String> {
    let sighash = cache
        .taproot_key_spend_signature_hash(index, &Prevouts::All(prevouts), TapSighashType::Default)
        .map_err(|e| e.to_string())?;
    let msg = Message::from_digest(sighash.to_byte_array());
    let keypair = owner
        .tweaked
        .map(|t| t.to_keypair())
        .unwrap_or_else(|| Keypair::from_secret_key(secp, &owner.keys[0]));
    let sig = secp.sign_schnorr_no_aux_rand(&msg, &keypair);
    let mut witness = Witness::new();
    witness.push(sig.as_ref());
    Ok(InputSignature {
        script_sig: ScriptBuf::new(),
        witness,
    })
}

/// Script pushes of at most 520 bytes; every push here is far below that.
pub fn push_bytes(data: &[u8]) -> PushBytesBuf {
    PushBytesBuf::try_from(data.to_vec()).unwrap_or_default()
}
