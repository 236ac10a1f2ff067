//! The tests' own keys, in place of a bitcoind wallet (Bitcoin Core 31.99, the oracle, is built
//! without one): deterministic secp256k1 keys from a fixed seed, the output scripts of the kinds
//! `getnewaddress` gave (`bech32`, `legacy`, `p2sh-segwit`, `bech32m`), a fresh key for each,
//! and the signatures that spend them (SIGHASH_ALL, taproot's key path SIGHASH_DEFAULT, low R
//! as Core's wallet grinds them).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use bitcoin::hashes::{sha256, Hash};
use bitcoin::key::{Keypair, TapTweak};
use bitcoin::script::{Builder, PushBytesBuf};
use bitcoin::secp256k1::{All, Message, Secp256k1, SecretKey};
use bitcoin::sighash::{EcdsaSighashType, Prevouts, SighashCache, TapSighashType};
use bitcoin::{CompressedPublicKey, ScriptBuf, Transaction, TxOut, Witness};

/// The kinds of output script the keys pay to, by the names of `getnewaddress`'s address types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// P2WPKH (`bech32`).
    Bech32,
    /// P2PKH of a compressed key (`legacy`).
    Legacy,
    /// P2WPKH nested in P2SH (`p2sh-segwit`).
    P2shSegwit,
    /// Taproot of the key alone, spent by the key path (`bech32m`).
    Bech32m,
}

impl Kind {
    /// The kind `getnewaddress` names `name`.
    pub(super) fn named(name: &str) -> Kind {
        match name {
            "bech32" => Kind::Bech32,
            "legacy" => Kind::Legacy,
            "p2sh-segwit" => Kind::P2shSegwit,
            "bech32m" => Kind::Bech32m,
            other => panic!("no address type {other:?}"),
        }
    }
}

/// Keys made one at a time from a seed, and the output scripts they own.
pub(super) struct Keys {
    secp: Secp256k1<All>,
    seed: u64,
    /// The index of the next key.
    next: Cell<u64>,
    /// Every script handed out: its kind and key.
    owned: RefCell<HashMap<ScriptBuf, (Kind, SecretKey)>>,
}

impl Keys {
    /// No key yet; keys derived from `seed`.
    pub(super) fn new(seed: u64) -> Keys {
        Keys {
            secp: Secp256k1::new(),
            seed,
            next: Cell::new(0),
            owned: RefCell::new(HashMap::new()),
        }
    }

    /// The output script of a fresh key, of `kind`.
    pub(super) fn script(&self, kind: Kind) -> ScriptBuf {
        let index = self.next.get();
        self.next.set(index + 1);
        let key = derive(self.seed, index);
        let public = CompressedPublicKey(key.public_key(&self.secp));
        let script = match kind {
            Kind::Bech32 => ScriptBuf::new_p2wpkh(&public.wpubkey_hash()),
            Kind::Legacy => ScriptBuf::new_p2pkh(&public.pubkey_hash()),
            Kind::P2shSegwit => {
                ScriptBuf::new_p2sh(&ScriptBuf::new_p2wpkh(&public.wpubkey_hash()).script_hash())
            }
            Kind::Bech32m => {
                let internal = Keypair::from_secret_key(&self.secp, &key)
                    .x_only_public_key()
                    .0;
                ScriptBuf::new_p2tr(&self.secp, internal, None)
            }
        };
        self.owned.borrow_mut().insert(script.clone(), (kind, key));
        script
    }

    /// The address of [`Keys::script`] on regtest.
    pub(super) fn address(&self, kind: Kind) -> String {
        let script = self.script(kind);
        bitcoin::Address::from_script(&script, bitcoin::Network::Regtest)
            .unwrap()
            .to_string()
    }

    /// Signs every input of `tx` whose spent output (`prevouts`, one per input, `None` where
    /// unknown) one of the keys owns, replacing its script sig and witness; the others stay as
    /// they are, and so do taproot inputs unless every spent output is known. Whether every
    /// input is signed.
    pub(super) fn sign(&self, tx: &mut Transaction, prevouts: &[Option<TxOut>]) -> bool {
        assert_eq!(prevouts.len(), tx.input.len());
        let all: Option<Vec<TxOut>> = prevouts.iter().cloned().collect();
        let owned = self.owned.borrow();
        let unsigned = tx.clone();
        let mut cache = SighashCache::new(&unsigned);
        let mut complete = true;
        for (i, prevout) in prevouts.iter().enumerate() {
            let Some((prevout, (kind, key))) = prevout
                .as_ref()
                .and_then(|p| owned.get(&p.script_pubkey).map(|o| (p, o)))
            else {
                complete = false;
                continue;
            };
            let public = CompressedPublicKey(key.public_key(&self.secp));
            let input = &mut tx.input[i];
            match kind {
                Kind::Legacy => {
                    let hash = cache
                        .legacy_signature_hash(
                            i,
                            &prevout.script_pubkey,
                            EcdsaSighashType::All.to_u32(),
                        )
                        .unwrap();
                    let sig = self.ecdsa(hash.to_byte_array(), key);
                    input.script_sig = Builder::new()
                        .push_slice(PushBytesBuf::try_from(sig).unwrap())
                        .push_slice(public.to_bytes())
                        .into_script();
                    input.witness = Witness::new();
                }
                Kind::Bech32 | Kind::P2shSegwit => {
                    let program = ScriptBuf::new_p2wpkh(&public.wpubkey_hash());
                    let hash = cache
                        .p2wpkh_signature_hash(i, &program, prevout.value, EcdsaSighashType::All)
                        .unwrap();
                    let sig = self.ecdsa(hash.to_byte_array(), key);
                    input.script_sig = match kind {
                        Kind::P2shSegwit => Builder::new()
                            .push_slice(PushBytesBuf::try_from(program.into_bytes()).unwrap())
                            .into_script(),
                        _ => ScriptBuf::new(),
                    };
                    input.witness = Witness::from_slice(&[sig, public.to_bytes().to_vec()]);
                }
                Kind::Bech32m => {
                    let Some(all) = &all else {
                        complete = false;
                        continue;
                    };
                    let hash = cache
                        .taproot_key_spend_signature_hash(
                            i,
                            &Prevouts::All(all),
                            TapSighashType::Default,
                        )
                        .unwrap();
                    let tweaked = Keypair::from_secret_key(&self.secp, key)
                        .tap_tweak(&self.secp, None)
                        .to_keypair();
                    let sig = self.secp.sign_schnorr_no_aux_rand(
                        &Message::from_digest(hash.to_byte_array()),
                        &tweaked,
                    );
                    input.script_sig = ScriptBuf::new();
                    input.witness = Witness::from_slice(&[sig.serialize()]);
                }
            }
        }
        complete
    }

    /// A low-R ECDSA signature of `digest` by `key`, DER, with hash type ALL.
    fn ecdsa(&self, digest: [u8; 32], key: &SecretKey) -> Vec<u8> {
        let sig = self
            .secp
            .sign_ecdsa_low_r(&Message::from_digest(digest), key);
        let mut bytes = sig.serialize_der().to_vec();
        bytes.push(EcdsaSighashType::All.to_u32() as u8);
        bytes
    }
}

/// Key `index` of `seed`: SHA-256 of a tag, the seed, the index and an attempt, retried until
/// it is a valid secret key.
fn derive(seed: u64, index: u64) -> SecretKey {
    (0u32..)
        .find_map(|attempt| {
            let mut data = b"cairn-differential".to_vec();
            data.extend(seed.to_le_bytes());
            data.extend(index.to_le_bytes());
            data.extend(attempt.to_le_bytes());
            SecretKey::from_slice(sha256::Hash::hash(&data).as_byte_array()).ok()
        })
        .unwrap()
}
