//! Transactions as Esplora shows them, and the `/tx` endpoints.

use bitcoin::hex::{DisplayHex, FromHex};
use bitcoin::script::Instruction;
use bitcoin::{OutPoint, Script, ScriptBuf, Transaction, TxIn, TxOut, Txid};
use serde::Serialize;

use super::api::{self, binary, text, Failure, Reply, TxStatus};
use crate::http::context::Query;
use crate::mempool::Rejection;
use crate::view::merkle::rpc_hex;
use crate::view::{decode, fee_paid, BlockOfTx, ChainView, FoundTx, Spender};

/// An output as Esplora shows it (also each input's `prevout`).
#[derive(Debug, Serialize)]
pub struct Vout {
    scriptpubkey: String,
    scriptpubkey_asm: String,
    scriptpubkey_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    scriptpubkey_address: Option<String>,
    value: u64,
}

impl Vout {
    fn of(out: &TxOut, network: bitcoin::Network) -> Self {
        let script = &out.script_pubkey;
        Vout {
            scriptpubkey: script.as_bytes().to_lower_hex_string(),
            scriptpubkey_asm: script.to_asm_string(),
            scriptpubkey_type: script_type(script),
            scriptpubkey_address: bitcoin::Address::from_script(script, network)
                .ok()
                .map(|a| a.to_string()),
            value: out.value.to_sat(),
        }
    }
}

/// Esplora's name for a script's kind, tested in Esplora's order.
fn script_type(script: &Script) -> &'static str {
    if script.is_empty() {
        "empty"
    } else if script.is_op_return() {
        "op_return"
    } else if script.is_p2pk() {
        "p2pk"
    } else if script.is_p2pkh() {
        "p2pkh"
    } else if script.is_p2sh() {
        "p2sh"
    } else if script.is_p2wpkh() {
        "v0_p2wpkh"
    } else if script.is_p2wsh() {
        "v0_p2wsh"
    } else if script.is_p2tr() {
        "v1_p2tr"
    } else {
        "unknown"
    }
}

/// An input as Esplora shows it.
#[derive(Debug, Serialize)]
struct Vin {
    txid: Txid,
    vout: u32,
    prevout: Option<Vout>,
    scriptsig: String,
    scriptsig_asm: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    witness: Option<Vec<String>>,
    is_coinbase: bool,
    sequence: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    inner_redeemscript_asm: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inner_witnessscript_asm: Option<String>,
}

impl Vin {
    fn of(input: &TxIn, prevout: Option<&TxOut>, network: bitcoin::Network) -> Self {
        let witness = (!input.witness.is_empty()).then(|| {
            input
                .witness
                .iter()
                .map(|item| item.to_lower_hex_string())
                .collect()
        });
        let (redeem, witness_script) = match prevout {
            Some(prevout) => inner_scripts(input, prevout),
            None => (None, None),
        };
        Vin {
            txid: input.previous_output.txid,
            vout: input.previous_output.vout,
            prevout: prevout.map(|p| Vout::of(p, network)),
            scriptsig: input.script_sig.as_bytes().to_lower_hex_string(),
            scriptsig_asm: input.script_sig.to_asm_string(),
            witness,
            is_coinbase: input.previous_output.is_null(),
            sequence: input.sequence.0,
            inner_redeemscript_asm: redeem.map(|s| s.to_asm_string()),
            inner_witnessscript_asm: witness_script.map(|s| s.to_asm_string()),
        }
    }
}

/// The redeem script of a P2SH spend (the script sig's last push) and the witness script of a
/// P2WSH or P2SH-P2WSH spend (the witness's last item), as Esplora finds them.
fn inner_scripts(input: &TxIn, prevout: &TxOut) -> (Option<ScriptBuf>, Option<ScriptBuf>) {
    let redeem = if prevout.script_pubkey.is_p2sh() {
        match input.script_sig.instructions().last() {
            Some(Ok(Instruction::PushBytes(push))) => {
                Some(ScriptBuf::from_bytes(push.as_bytes().to_vec()))
            }
            _ => None,
        }
    } else {
        None
    };
    let wrapped_p2wsh = redeem.as_ref().is_some_and(|s| s.is_p2wsh());
    let witness_script = if prevout.script_pubkey.is_p2wsh() || wrapped_p2wsh {
        input
            .witness
            .last()
            .map(|item| ScriptBuf::from_bytes(item.to_vec()))
    } else {
        None
    };
    (redeem, witness_script)
}

/// A transaction as Esplora shows it.
#[derive(Debug, Serialize)]
pub struct TxValue {
    txid: Txid,
    version: u32,
    locktime: u32,
    vin: Vec<Vin>,
    vout: Vec<Vout>,
    size: usize,
    weight: u64,
    fee: u64,
    status: TxStatus,
}

impl TxValue {
    /// `tx` with the outputs its inputs spend (`None` for a coinbase's) and its status.
    pub fn new(
        tx: &Transaction,
        prevouts: &[Option<TxOut>],
        status: TxStatus,
        network: bitcoin::Network,
    ) -> Self {
        let vin = tx
            .input
            .iter()
            .enumerate()
            .map(|(i, input)| Vin::of(input, prevouts.get(i).and_then(Option::as_ref), network))
            .collect();
        TxValue {
            txid: tx.compute_txid(),
            version: tx.version.0 as u32,
            locktime: tx.lock_time.to_consensus_u32(),
            vin,
            vout: tx.output.iter().map(|o| Vout::of(o, network)).collect(),
            size: tx.total_size(),
            weight: tx.weight().to_wu(),
            fee: fee_paid(tx, prevouts),
            status,
        }
    }
}

impl TxValue {
    /// A transaction the view found, with what its inputs spent.
    pub fn found(found: &FoundTx, network: bitcoin::Network) -> Self {
        TxValue::new(
            &found.tx,
            &found.prevouts,
            TxStatus::of(found.confirmation),
            network,
        )
    }
}

fn not_found() -> Failure {
    Failure::not_found("Transaction not found")
}

/// `GET /tx/:txid`.
pub fn json(ctx: &Query, txid: &Txid) -> Reply {
    let view = ctx.view();
    let found = view.transaction(txid, true)?.ok_or_else(not_found)?;
    api::json(&TxValue::found(&found, view.network()))
}

/// The bytes of the chain's or the mempool's transaction.
fn raw_bytes(ctx: &Query, txid: &Txid) -> Result<Vec<u8>, Failure> {
    let view = ctx.view();
    let raw = view.raw_transaction(txid)?.ok_or_else(not_found)?;
    Ok(raw)
}

/// `GET /tx/:txid/hex`.
pub fn hex(ctx: &Query, txid: &Txid) -> Reply {
    text(raw_bytes(ctx, txid)?.to_lower_hex_string())
}

/// `GET /tx/:txid/raw`.
pub fn raw(ctx: &Query, txid: &Txid) -> Reply {
    binary(raw_bytes(ctx, txid)?)
}

/// `GET /tx/:txid/status`: unconfirmed also for a transaction nobody knows (as Esplora).
pub fn status(ctx: &Query, txid: &Txid) -> Reply {
    let confirmation = ctx.view().tx_confirmation(txid)?;
    api::json(&TxStatus::of(confirmation))
}

/// A confirmed transaction's block with its txids.
fn confirming_block(ctx: &Query, txid: &Txid) -> Result<BlockOfTx, Failure> {
    ctx.view()
        .confirming_block(txid)?
        .ok_or_else(|| Failure::not_found("Transaction not found or is unconfirmed"))
}

/// `GET /tx/:txid/merkle-proof`: Electrum's `get_merkle` answer.
pub fn merkle_proof(ctx: &Query, txid: &Txid) -> Reply {
    let block = confirming_block(ctx, txid)?;
    let merkle: Vec<String> = block.branch().iter().map(rpc_hex).collect();
    api::json(
        &serde_json::json!({ "block_height": block.height, "merkle": merkle, "pos": block.pos }),
    )
}

/// `GET /tx/:txid/merkleblock-proof`: bitcoind's `gettxoutproof` for this one transaction.
pub fn merkleblock_proof(ctx: &Query, txid: &Txid) -> Reply {
    let block = confirming_block(ctx, txid)?;
    let proof = bitcoin::MerkleBlock::from_header_txids_with_predicate(
        &block.header,
        &block.txids(),
        |t| t == txid,
    );
    text(bitcoin::consensus::encode::serialize_hex(&proof))
}

/// Whether and by what an output is spent (`/tx/:txid/outspend/:vout`).
#[derive(Debug, Serialize)]
struct Spending {
    spent: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    txid: Option<Txid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vin: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<TxStatus>,
}

impl Spending {
    const UNSPENT: Spending = Spending {
        spent: false,
        txid: None,
        vin: None,
        status: None,
    };

    /// The answer for an output the view found spent (or not).
    fn of(view: &ChainView<'_>, spender: Option<Spender>) -> Self {
        let Some(spender) = spender else {
            return Spending::UNSPENT;
        };
        let confirmation = spender.height.and_then(|h| view.confirmation(h));
        Spending {
            spent: true,
            txid: Some(spender.txid),
            vin: Some(spender.vin),
            status: Some(TxStatus::of(confirmation)),
        }
    }
}

/// `GET /tx/:txid/outspend/:vout`: not spent also for an output nobody knows (as Esplora).
pub fn outspend(ctx: &Query, txid: &Txid, vout: u32) -> Reply {
    let view = ctx.view();
    let spender = view.spender(&OutPoint::new(*txid, vout))?;
    api::json(&Spending::of(&view, spender))
}

/// `GET /tx/:txid/outspends`: one answer per output.
pub fn outspends(ctx: &Query, txid: &Txid) -> Reply {
    let view = ctx.view();
    let found = view.transaction(txid, false)?.ok_or_else(not_found)?;
    let spenders = view.spenders(txid, found.tx.output.len(), found.confirmation.is_some())?;
    let answers: Vec<Spending> = spenders
        .into_iter()
        .map(|s| Spending::of(&view, s))
        .collect();
    api::json(&answers)
}

/// `POST /tx`: the body is the transaction in hex; the answer its txid, or bitcoind's
/// `sendrawtransaction` error as Esplora passes it on (400). The checks' estimated cost is
/// paid before they run (429 unrun when that takes the host to the hard limit), and a refusal
/// is answered again, unrun, for the same transaction against the same mempool and tip.
pub fn broadcast(ctx: &Query, body: &[u8]) -> Reply {
    let hex = std::str::from_utf8(body)
        .map_err(|_| Failure::bad("the body is not UTF-8 text"))?
        .trim();
    // bitcoind's -22 (RPC_DESERIALIZATION_ERROR) for text that is not a transaction.
    let raw = Vec::<u8>::from_hex(hex).map_err(|_| rpc_error(-22, "TX decode failed"))?;
    let no_mempool = || {
        Failure(
            hyper::StatusCode::SERVICE_UNAVAILABLE,
            "this server keeps no mempool".into(),
        )
    };
    let pool = ctx.model.mempool().ok_or_else(no_mempool)?;
    let (key, kept) = ctx.kept_verdict(KIND, &[&raw]).ok_or_else(no_mempool)?;
    if let Some(Err(refused)) = kept {
        ctx.charge(crate::work::cost::repeated());
        return Err(Failure::bad(refused));
    }
    let paid = crate::work::broadcast_checks(&[&raw], false, 0);
    if !ctx.pay_ahead(paid) {
        crate::metrics::metrics().http_refused_ahead.inc();
        return Err(Failure(
            hyper::StatusCode::TOO_MANY_REQUESTS,
            "excessive resource usage: this host's requests cost too much; try later".into(),
        ));
    }
    let (accepted, linearized) =
        crate::mempool::linearize::metered(|| pool.accept(&raw, ctx.model.index()));
    let cost = crate::work::broadcast_checks(&[&raw], accepted.is_err(), linearized);
    ctx.charge(crate::view::Cost {
        rows: cost.rows.saturating_sub(paid.rows),
        bytes: 0,
    });
    match accepted {
        Ok(accepted) => {
            let txid = accepted.txid;
            ctx.notifier.accepted(ctx.model.index(), accepted);
            text(txid.to_string())
        }
        // bitcoind answers a transaction it already has with its txid.
        Err(Rejection::AlreadyInMempool) => text(decode(&raw)?.compute_txid().to_string()),
        Err(e) => {
            let Failure(_, refused) = rpc_error(rejection_code(&e), &e.to_string());
            // A store that failed may answer next time. A refusal writes nothing: kept only
            // when nothing else wrote meanwhile either (else the refusal may be stale).
            if !matches!(e, Rejection::Backend(_)) {
                ctx.keep_verdict(KIND, &[&raw], key, 0, Err(refused.clone()));
            }
            Err(Failure::bad(refused))
        }
    }
}

/// The kind `POST /tx`'s refusals are kept under.
const KIND: &str = "esplora broadcast";

/// bitcoind's `sendrawtransaction` error as Esplora passes it on.
fn rpc_error(code: i32, message: &str) -> Failure {
    let error = serde_json::json!({ "code": code, "message": message });
    Failure::bad(format!("sendrawtransaction RPC error: {error}"))
}

/// bitcoind's RPC error code for a refused transaction (rpc/protocol.h).
fn rejection_code(rejection: &Rejection) -> i32 {
    match rejection {
        Rejection::Decode(_) => -22,
        Rejection::AlreadyKnown => -27,
        Rejection::MissingInputs(_) => -25,
        _ => -26,
    }
}
