//! A silent-payment (BIP352) wallet that a share of the generated transactions pay, to its
//! address, its labels and its change label, with the `silentpayments` crate's sending side
//! (not cairn's scan): the test of a scanner is whether it finds exactly these payments.

use bitcoin::hashes::Hash;
use bitcoin::hex::DisplayHex;
use bitcoin::key::TweakedPublicKey;
use bitcoin::secp256k1::{All, PublicKey, Secp256k1, SecretKey, XOnlyPublicKey};
use bitcoin::{ScriptBuf, TxOut, Txid};
use rand::Rng;
use silentpayments::receiving::Label;
use silentpayments::utils::sending::calculate_partial_secret;
use silentpayments::utils::OutPoint as SpOutPoint;
use silentpayments::SilentPaymentCode;

use super::wallet::{derive_key, Owner};

/// The seed of the wallet's scan and spend keys.
const SEED: u64 = 0x5350_5741_4c4c_4554;
/// The labels it gives out besides change's 0.
pub const LABELS: [u32; 2] = [1, 2];

/// The wallet and the payments made to it so far.
#[derive(Clone)]
pub(super) struct SpWallet {
    scan: SecretKey,
    spend: PublicKey,
    /// Its codes: no label, then change's 0, then [`LABELS`].
    codes: Vec<(Option<u32>, SilentPaymentCode)>,
    /// Transactions per thousand that pay it (when they have an input key that counts).
    per_mille: u32,
    payments: Vec<SpPayment>,
}

/// One output paid to the wallet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpPayment {
    /// The block's height.
    pub height: u32,
    /// The paying transaction.
    pub txid: Txid,
    /// The output.
    pub vout: u32,
    /// The label paid (0 is change), `None` for the address without one.
    pub label: Option<u32>,
    /// The output's x-only key.
    pub key: XOnlyPublicKey,
}

/// What one transaction pays the wallet: output index, label, key (its txid not known yet).
pub(super) type Paid = Vec<(u32, Option<u32>, XOnlyPublicKey)>;

impl SpWallet {
    /// The wallet, paid by `per_mille` transactions out of a thousand.
    pub(super) fn new(secp: &Secp256k1<All>, per_mille: u32) -> Result<Self, String> {
        let scan = derive_key(SEED, 0);
        let spend = derive_key(SEED, 1).public_key(secp);
        let scan_pub = scan.public_key(secp);
        let network = silentpayments::Network::Regtest;
        let mut codes = vec![(None, SilentPaymentCode::new_v0(scan_pub, spend, network))];
        for m in std::iter::once(0).chain(LABELS) {
            let tweak = *Label::new(scan, m).as_inner();
            let labelled = spend
                .add_exp_tweak(secp, &tweak)
                .map_err(|e| e.to_string())?;
            codes.push((
                Some(m),
                SilentPaymentCode::new_v0(scan_pub, labelled, network),
            ));
        }
        Ok(SpWallet {
            scan,
            spend,
            codes,
            per_mille: per_mille.min(1000),
            payments: Vec::new(),
        })
    }

    /// Whether the next transaction pays the wallet.
    pub(super) fn draws(&self, rng: &mut impl Rng) -> bool {
        rng.gen_range(0..1000) < self.per_mille
    }

    /// Makes one or two of `outputs` (a quarter of the time two, when there are two) pay the
    /// wallet at codes drawn at random, from the keys of `inputs` (their owners') that BIP352
    /// counts; nothing when none counts.
    pub(super) fn pay(
        &self,
        rng: &mut impl Rng,
        inputs: &[(bitcoin::OutPoint, &Owner)],
        outputs: &mut [TxOut],
    ) -> Result<Paid, String> {
        let keys: Vec<(SecretKey, bool)> = inputs
            .iter()
            .filter_map(|(_, owner)| owner.bip352_key())
            .collect();
        if keys.is_empty() || outputs.is_empty() {
            return Ok(Vec::new());
        }
        let outpoints: Vec<SpOutPoint> = inputs
            .iter()
            .map(|(o, _)| SpOutPoint::from_txid_bytes_and_vout(o.txid.to_byte_array(), o.vout))
            .collect();
        let partial = calculate_partial_secret(&keys, &outpoints).map_err(|e| e.to_string())?;
        let count = if outputs.len() > 1 && rng.gen_range(0..4) == 0 {
            2
        } else {
            1
        };
        let mut chosen: Vec<(u32, usize)> = Vec::with_capacity(count);
        while chosen.len() < count {
            let vout = rng.gen_range(0..outputs.len()) as u32;
            if chosen.iter().all(|(v, _)| *v != vout) {
                chosen.push((vout, rng.gen_range(0..self.codes.len())));
            }
        }
        let recipients: Vec<SilentPaymentCode> =
            chosen.iter().map(|(_, c)| self.codes[*c].1).collect();
        let mut keys = silentpayments::sending::generate_recipient_pubkeys(recipients, partial)
            .map_err(|e| e.to_string())?;
        let mut paid = Vec::with_capacity(count);
        for (vout, code) in chosen {
            let (label, code) = &self.codes[code];
            let list = keys.get_mut(code).ok_or("no key for a recipient")?;
            let key = list.remove(0);
            let tweaked = TweakedPublicKey::dangerous_assume_tweaked(key);
            outputs[vout as usize].script_pubkey = ScriptBuf::new_p2tr_tweaked(tweaked);
            paid.push((vout, *label, key));
        }
        Ok(paid)
    }

    /// Records what a transaction at `height` paid.
    pub(super) fn record(&mut self, height: u32, txid: Txid, paid: Paid) {
        for (vout, label, key) in paid {
            self.payments.push(SpPayment {
                height,
                txid,
                vout,
                label,
                key,
            });
        }
    }

    /// The wallet's keys, labels and payments as JSON: `scan_private_key`, `spend_public_key`
    /// (hex, as Frigate's subscribe takes them), `labels`, `address` and `labelled` addresses,
    /// `payments` (`height`, `txid`, `vout`, `label`, `key`) in chain order.
    pub(super) fn to_json(&self) -> serde_json::Value {
        let addresses: serde_json::Map<String, serde_json::Value> = self
            .codes
            .iter()
            .filter_map(|(label, code)| Some(((*label)?.to_string(), code.to_string().into())))
            .collect();
        let payments: Vec<serde_json::Value> = self
            .payments
            .iter()
            .map(|p| {
                serde_json::json!({
                    "height": p.height, "txid": p.txid.to_string(), "vout": p.vout,
                    "label": p.label, "key": p.key.serialize().to_lower_hex_string(),
                })
            })
            .collect();
        serde_json::json!({
            "scan_private_key": self.scan.secret_bytes().to_lower_hex_string(),
            "spend_public_key": self.spend.serialize().to_lower_hex_string(),
            "labels": LABELS,
            "address": self.codes[0].1.to_string(),
            "labelled": addresses,
            "payments": payments,
        })
    }

    /// The payments so far, in chain order.
    pub(super) fn payments(&self) -> &[SpPayment] {
        &self.payments
    }
}
