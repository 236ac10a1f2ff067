//! Scanning for silent payments (BIP352's receiving side) with a wallet's scan key: the
//! arithmetic of a remote scanner, which holds the scan secret and the spend public key and
//! finds the outputs of an eligible transaction paid to them (and to their labels) from the
//! transaction's tweak data alone. One shared context serves every call (the `silentpayments`
//! crate makes a signing context, with its randomisation, per call of its scan); the crate's
//! scan is the oracle of the tests.

use std::collections::HashMap;
use std::sync::LazyLock;

use bitcoin::hashes::{sha256, sha256t_hash_newtype, Hash, HashEngine};
use bitcoin::secp256k1::{
    ecdh, All, Parity, PublicKey, Scalar, Secp256k1, SecretKey, XOnlyPublicKey,
};

/// BIP352's `K_max`: no group of outputs pays one recipient more than this many, and a scan
/// looks no further.
pub const K_MAX: u32 = 2323;

/// One context for every scan: the scan's multiplications need a signing one.
static SECP: LazyLock<Secp256k1<All>> = LazyLock::new(Secp256k1::new);

sha256t_hash_newtype! {
    /// BIP352's shared-secret tag, hashed once at compile time (its midstate).
    struct SharedSecretTag = hash_str("BIP0352/SharedSecret");
    /// `hash_BIP0352/SharedSecret`, made once per `k` of every transaction scanned.
    #[hash_newtype(forward)]
    struct SharedSecretHash(_);
}

/// BIP352's `t_k = hash_BIP0352/SharedSecret(ser_P(ecdh_shared_secret) || ser32(k))`, from the
/// tag's midstate.
fn shared_secret_hash(shared: &[u8; 33], k: u32) -> [u8; 32] {
    let mut engine = SharedSecretHash::engine();
    engine.input(shared);
    engine.input(&k.to_be_bytes());
    SharedSecretHash::from_engine(engine).to_byte_array()
}

/// BIP340's tagged hash `tag` of `parts` (BIP352's hashes are such).
pub fn tagged(tag: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let tag = sha256::Hash::hash(tag).to_byte_array();
    let mut engine = sha256::Hash::engine();
    engine.input(&tag);
    engine.input(&tag);
    for part in parts {
        engine.input(part);
    }
    sha256::Hash::from_engine(engine).to_byte_array()
}

/// An output a scan found: which of the outputs scanned, the tweak its spender adds to the
/// spend secret (BIP352's `priv_key_tweak`), and the label it was paid to (`None`: the
/// address without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Its index among the keys scanned.
    pub index: usize,
    /// `t_k` (plus the label's tweak): the spend secret plus it spends the output.
    pub key_tweak: [u8; 32],
    /// The label `m` it was paid to, if any.
    pub label: Option<u32>,
}

/// Why scan keys cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// The scan secret is not a valid secret key.
    #[error("the scan private key is not a valid secp256k1 secret key")]
    ScanKey,
    /// The spend key is not a valid compressed public key.
    #[error("the spend public key is not a valid compressed secp256k1 public key")]
    SpendKey,
    /// A label's key added to the spend key is the point at infinity (2^-128 odds).
    #[error("label {0} cannot be used with this spend key")]
    Label(u32),
}

/// A wallet's keys as a scanner holds them: the scan secret, the spend public key, and each
/// label's point `label_m·G` with its `m` and tweak. The secret is wiped when dropped by the
/// secp256k1 crate's `SecretKey::non_secure_erase`, as well as it can be.
pub struct ScanKeys {
    scan: SecretKey,
    spend: PublicKey,
    labels: HashMap<PublicKey, (u32, Scalar)>,
}

impl std::fmt::Debug for ScanKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the scan secret (it would land in a log).
        f.debug_struct("ScanKeys")
            .field("spend", &self.spend)
            .field("labels", &self.labels.len())
            .finish_non_exhaustive()
    }
}

impl Drop for ScanKeys {
    fn drop(&mut self) {
        self.scan.non_secure_erase();
    }
}

/// BIP352's label tweak `hash_BIP0352/Label(ser256(b_scan) || ser32(m))`.
fn label_tweak(scan: &SecretKey, m: u32) -> [u8; 32] {
    tagged(b"BIP0352/Label", &[&scan.secret_bytes(), &m.to_be_bytes()])
}

impl ScanKeys {
    /// The keys from a scan secret and a compressed spend public key (33 bytes), with `labels`
    /// (their `m`; BIP352's change label is `m = 0`).
    pub fn new(scan: &[u8], spend: &[u8], labels: &[u32]) -> Result<Self, KeyError> {
        let scan = SecretKey::from_slice(scan).map_err(|_| KeyError::ScanKey)?;
        if spend.len() != 33 {
            return Err(KeyError::SpendKey);
        }
        let spend = PublicKey::from_slice(spend).map_err(|_| KeyError::SpendKey)?;
        let mut keys = ScanKeys {
            scan,
            spend,
            labels: HashMap::with_capacity(labels.len()),
        };
        for &m in labels {
            let tweak = label_tweak(&keys.scan, m);
            let secret = SecretKey::from_slice(&tweak).map_err(|_| KeyError::Label(m))?;
            let point = secret.public_key(&SECP);
            point.combine(&spend).map_err(|_| KeyError::Label(m))?;
            let scalar = Scalar::from_be_bytes(tweak).map_err(|_| KeyError::Label(m))?;
            keys.labels.insert(point, (m, scalar));
        }
        Ok(keys)
    }

    /// The scan public key (`B_scan`).
    pub fn scan_public(&self) -> PublicKey {
        self.scan.public_key(&SECP)
    }

    /// The spend public key (`B_spend`).
    pub fn spend_public(&self) -> PublicKey {
        self.spend
    }

    /// The labels' `m`, in no order.
    pub fn labels(&self) -> impl Iterator<Item = u32> + '_ {
        self.labels.values().map(|(m, _)| *m)
    }

    /// The outputs among `outputs` (x-only keys of one transaction's taproot outputs) paid to
    /// these keys, given the transaction's tweak data: BIP352's scan, `k` from 0 while each
    /// finds one, at most [`K_MAX`]. Empty when the tweak is not a point.
    pub fn scan(&self, tweak: &[u8; 33], outputs: &[[u8; 32]]) -> Vec<Found> {
        let Ok(tweak) = PublicKey::from_slice(tweak) else {
            return Vec::new();
        };
        // ecdh_shared_secret = b_scan·(input_hash·A), in constant time (the secret's).
        let xy = ecdh::shared_secret_point(&tweak, &self.scan);
        let mut shared = [0u8; 33];
        shared[0] = 0x02 | (xy[63] & 1);
        shared[1..].copy_from_slice(&xy[..32]);
        let mut open: HashMap<[u8; 32], usize> = outputs
            .iter()
            .enumerate()
            .rev()
            .map(|(i, key)| (*key, i))
            .collect();
        let mut found = Vec::new();
        for k in 0..K_MAX {
            let Some(hit) = self.scan_k(&shared, k, &open) else {
                break;
            };
            open.retain(|_, i| *i != hit.index);
            found.push(hit);
        }
        found
    }

    /// The output among `open` (x-only key to index) paid with `t_k`, if one is.
    fn scan_k(&self, shared: &[u8; 33], k: u32, open: &HashMap<[u8; 32], usize>) -> Option<Found> {
        let t_k = shared_secret_hash(shared, k);
        let t_k = SecretKey::from_slice(&t_k).ok()?;
        // P_k = B_spend + t_k·G: t_k·G by the constant-time generator multiplication (t_k tells
        // whether the transaction pays the wallet), no slower here than `tweak_add`'s
        // variable-time `ecmult` (`cargo bench --bench sp_scan -- steps`).
        let p_k = t_k.public_key(&SECP).combine(&self.spend).ok()?;
        let x_of = |p: &PublicKey| p.x_only_public_key().0.serialize();
        if let Some(&index) = open.get(&x_of(&p_k)) {
            return Some(Found {
                index,
                key_tweak: t_k.secret_bytes(),
                label: None,
            });
        }
        let (m, label, index) = match self.labels.len() <= 2 * open.len() {
            // A labelled output is P_k + label·G, for some label: as many additions as labels.
            true => self.labels.iter().find_map(|(point, (m, label))| {
                let index = *open.get(&x_of(&p_k.combine(point).ok()?))?;
                Some((*m, label, index))
            })?,
            // Or output - P_k is a label's point, for the output's even or odd lift: two
            // additions an output, when that is fewer.
            false => {
                let minus_p_k = p_k.negate(&SECP);
                open.iter().find_map(|(key, index)| {
                    let key = XOnlyPublicKey::from_slice(key).ok()?;
                    [Parity::Even, Parity::Odd].into_iter().find_map(|parity| {
                        let diff = key.public_key(parity).combine(&minus_p_k).ok()?;
                        let (m, label) = self.labels.get(&diff)?;
                        Some((*m, label, *index))
                    })
                })?
            }
        };
        Some(Found {
            index,
            key_tweak: t_k.add_tweak(label).ok()?.secret_bytes(),
            label: Some(m),
        })
    }
}

#[cfg(test)]
mod tests;
