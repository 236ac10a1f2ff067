//! Bitcoin Core's consensus checks of a transaction outside a block: `CheckTransaction`
//! (consensus/tx_check.cpp) on the transaction alone, and the value rules of
//! `Consensus::CheckTxInputs` (consensus/tx_verify.cpp) once the outputs it spends are known.
//! Every sum is checked: amounts are attacker-chosen 64-bit numbers.

use std::collections::HashSet;

use bitcoin::{Amount, Transaction, TxOut, Weight};

use super::rejection::Rejection;

/// Core's `WITNESS_SCALE_FACTOR`: a byte outside the witness weighs four units.
const WITNESS_SCALE_FACTOR: u64 = 4;

fn invalid(reason: &'static str, detail: impl Into<String>) -> Rejection {
    Rejection::Invalid {
        reason,
        detail: detail.into(),
    }
}

/// Core's `MoneyRange`: 0 to 21 million BTC.
fn money_range(sats: u64) -> bool {
    sats <= Amount::MAX_MONEY.to_sat()
}

/// Decodes a transaction as Core's `UnserializeTransaction` does. The `bitcoin` crate reads one
/// more thing than Core: a segwit-flagged encoding whose witnesses are all empty, which it also
/// writes for a transaction without inputs. Core refuses those bytes ("Superfluous witness
/// record"), so a transaction without inputs never gets past decoding there; neither does it here
/// (found by the differential test against `testmempoolaccept`).
pub fn decode(raw: &[u8]) -> Result<Transaction, Rejection> {
    let tx: Transaction =
        bitcoin::consensus::deserialize(raw).map_err(|e| Rejection::Decode(e.to_string()))?;
    let segwit_flag = raw.get(4..6) == Some(&[0, 1][..]);
    if segwit_flag && tx.input.iter().all(|i| i.witness.is_empty()) {
        return Err(Rejection::Decode("Superfluous witness record".into()));
    }
    Ok(tx)
}

/// `CheckTransaction`: inputs and outputs present, the size without witness under the block
/// weight limit, every output and their total within the money range, no input twice, and
/// (outside a coinbase) no null prevout; a coinbase's script sig of 2 to 100 bytes.
pub fn check_transaction(tx: &Transaction) -> Result<(), Rejection> {
    if tx.input.is_empty() {
        return Err(invalid("bad-txns-vin-empty", "no inputs"));
    }
    if tx.output.is_empty() {
        return Err(invalid("bad-txns-vout-empty", "no outputs"));
    }
    let stripped = tx.base_size() as u64;
    if stripped.saturating_mul(WITNESS_SCALE_FACTOR) > Weight::MAX_BLOCK.to_wu() {
        return Err(invalid(
            "bad-txns-oversize",
            format!("{stripped} bytes without witness"),
        ));
    }
    let mut total: u64 = 0;
    for (vout, out) in tx.output.iter().enumerate() {
        let value = out.value.to_sat();
        // An amount is signed in Core; above i64::MAX it would be negative there.
        if i64::try_from(value).is_err() {
            return Err(invalid("bad-txns-vout-negative", format!("output {vout}")));
        }
        if !money_range(value) {
            return Err(invalid(
                "bad-txns-vout-toolarge",
                format!("output {vout}: {value} sat"),
            ));
        }
        total = total
            .checked_add(value)
            .filter(|t| money_range(*t))
            .ok_or_else(|| {
                invalid(
                    "bad-txns-txouttotal-toolarge",
                    "outputs over 21 million BTC",
                )
            })?;
    }
    let mut seen = HashSet::with_capacity(tx.input.len());
    if let Some(dup) = tx.input.iter().find(|i| !seen.insert(i.previous_output)) {
        return Err(invalid(
            "bad-txns-inputs-duplicate",
            format!("{} spent twice", dup.previous_output),
        ));
    }
    if tx.is_coinbase() {
        let len = tx.input[0].script_sig.len();
        if !(2..=100).contains(&len) {
            return Err(invalid(
                "bad-cb-length",
                format!("script sig of {len} bytes"),
            ));
        }
    } else if let Some(null) = tx.input.iter().position(|i| i.previous_output.is_null()) {
        return Err(invalid("bad-txns-prevout-null", format!("input {null}")));
    }
    Ok(())
}

/// The value rules of `CheckTxInputs`, for a transaction that passed [`check_transaction`]:
/// every spent amount and their total within the money range, inputs not below outputs.
/// Returns the fee.
pub fn check_tx_inputs(tx: &Transaction, prevouts: &[TxOut]) -> Result<u64, Rejection> {
    let mut inputs: u64 = 0;
    for prev in prevouts {
        let value = prev.value.to_sat();
        inputs = inputs
            .checked_add(value)
            .filter(|t| money_range(value) && money_range(*t))
            .ok_or_else(|| {
                invalid(
                    "bad-txns-inputvalues-outofrange",
                    "spent amounts over 21 million BTC",
                )
            })?;
    }
    // check_transaction bounded every output and their total, so this sum cannot overflow.
    let outputs: u64 = tx.output.iter().map(|o| o.value.to_sat()).sum();
    let fee = inputs
        .checked_sub(outputs)
        .ok_or(Rejection::InBelowOut { inputs, outputs })?;
    if !money_range(fee) {
        return Err(invalid("bad-txns-fee-outofrange", format!("fee {fee}")));
    }
    Ok(fee)
}

#[cfg(test)]
mod tests {
    use bitcoin::absolute::LockTime;
    use bitcoin::hashes::Hash;
    use bitcoin::transaction::Version;
    use bitcoin::{OutPoint, ScriptBuf, Sequence, TxIn, Txid, Witness};

    use super::*;

    fn input(n: u8, vout: u32) -> TxIn {
        TxIn {
            previous_output: OutPoint::new(Txid::from_byte_array([n; 32]), vout),
            script_sig: ScriptBuf::new(),
            sequence: Sequence::MAX,
            witness: Witness::new(),
        }
    }

    fn output(sats: u64) -> TxOut {
        TxOut {
            value: Amount::from_sat(sats),
            script_pubkey: ScriptBuf::new_p2wpkh(&bitcoin::WPubkeyHash::from_byte_array([7; 20])),
        }
    }

    fn tx(input: Vec<TxIn>, output: Vec<TxOut>) -> Transaction {
        Transaction {
            version: Version::TWO,
            lock_time: LockTime::ZERO,
            input,
            output,
        }
    }

    fn reason(r: Result<impl std::fmt::Debug, Rejection>) -> &'static str {
        match r {
            Err(Rejection::Invalid { reason, .. }) => reason,
            other => panic!("expected a consensus rejection, got {other:?}"),
        }
    }

    #[test]
    fn core_check_transaction_rules() {
        assert!(check_transaction(&tx(vec![input(1, 0)], vec![output(1000)])).is_ok());
        assert_eq!(
            reason(check_transaction(&tx(vec![], vec![output(1000)]))),
            "bad-txns-vin-empty"
        );
        assert_eq!(
            reason(check_transaction(&tx(vec![input(1, 0)], vec![]))),
            "bad-txns-vout-empty"
        );
        let dup = tx(
            vec![input(1, 0), input(2, 0), input(1, 0)],
            vec![output(1000)],
        );
        assert_eq!(reason(check_transaction(&dup)), "bad-txns-inputs-duplicate");
        // Two outputs of 2^63 sat: each negative as Core reads an amount, and their u64 sum wraps
        // to 0, which an unchecked sum would let through.
        let wrap = tx(vec![input(1, 0)], vec![output(1 << 63), output(1 << 63)]);
        assert_eq!(reason(check_transaction(&wrap)), "bad-txns-vout-negative");
        let big = tx(
            vec![input(1, 0)],
            vec![output(Amount::MAX_MONEY.to_sat() + 1)],
        );
        assert_eq!(reason(check_transaction(&big)), "bad-txns-vout-toolarge");
        let half = Amount::MAX_MONEY.to_sat() / 2 + 1;
        let total = tx(vec![input(1, 0)], vec![output(half), output(half)]);
        assert_eq!(
            reason(check_transaction(&total)),
            "bad-txns-txouttotal-toolarge"
        );
        let null = tx(
            vec![
                input(1, 0),
                TxIn {
                    previous_output: OutPoint::null(),
                    ..input(0, 0)
                },
            ],
            vec![output(1000)],
        );
        assert_eq!(reason(check_transaction(&null)), "bad-txns-prevout-null");
        let mut coinbase = tx(
            vec![TxIn {
                previous_output: OutPoint::null(),
                ..input(0, 0)
            }],
            vec![output(1000)],
        );
        assert_eq!(reason(check_transaction(&coinbase)), "bad-cb-length");
        coinbase.input[0].script_sig = ScriptBuf::from_bytes(vec![1, 2]);
        assert!(check_transaction(&coinbase).is_ok());
        let huge = tx(
            vec![input(1, 0)],
            vec![TxOut {
                value: Amount::ZERO,
                script_pubkey: ScriptBuf::from_bytes(vec![0x6a; 1_000_001]),
            }],
        );
        assert_eq!(reason(check_transaction(&huge)), "bad-txns-oversize");
    }

    #[test]
    fn core_check_tx_inputs_value_rules() {
        let t = tx(vec![input(1, 0), input(2, 0)], vec![output(1500)]);
        assert_eq!(
            check_tx_inputs(&t, &[output(1000), output(1000)]).unwrap(),
            500
        );
        assert!(matches!(
            check_tx_inputs(&t, &[output(1000), output(100)]),
            Err(Rejection::InBelowOut {
                inputs: 1100,
                outputs: 1500
            })
        ));
        let max = Amount::MAX_MONEY.to_sat();
        assert_eq!(
            reason(check_tx_inputs(&t, &[output(max), output(1)])),
            "bad-txns-inputvalues-outofrange"
        );
        assert_eq!(
            reason(check_tx_inputs(&t, &[output(u64::MAX), output(2)])),
            "bad-txns-inputvalues-outofrange"
        );
    }
}
