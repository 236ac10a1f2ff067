//! Transactions as Esplora shows them, and the `/tx` endpoints.

use bitcoin::consensus::Decodable;
use bitcoin::hashes::Hash;
use bitcoin::hex::{DisplayHex, FromHex};
use bitcoin::script::Instruction;
use bitcoin::{BlockHash, OutPoint, Script, ScriptBuf, Transaction, TxIn, TxOut, Txid};
use serde::Serialize;

use super::{binary, text, Failure, Reply, TxStatus};
use crate::http::HttpContext;
use crate::kernel::BlockUndo;
use crate::mempool::Rejection;

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
            fee: fee(tx, prevouts),
            status,
        }
    }
}

/// What the inputs spend minus what the outputs pay; 0 for a coinbase (as Esplora).
fn fee(tx: &Transaction, prevouts: &[Option<TxOut>]) -> u64 {
    if tx.is_coinbase() {
        return 0;
    }
    let spent = prevouts
        .iter()
        .flatten()
        .try_fold(0u64, |sum, p| sum.checked_add(p.value.to_sat()));
    let paid = tx
        .output
        .iter()
        .try_fold(0u64, |sum, o| sum.checked_add(o.value.to_sat()));
    match (spent, paid) {
        (Some(spent), Some(paid)) => spent.saturating_sub(paid),
        _ => 0,
    }
}

/// The outputs the inputs of the block's transaction at `pos` spend, from the block's undo data.
pub fn spent_outputs(
    undo: &BlockUndo,
    pos: u32,
    tx: &Transaction,
) -> Result<Vec<Option<TxOut>>, Failure> {
    if pos == 0 {
        return Ok(vec![None; tx.input.len()]);
    }
    let spent = undo
        .txs
        .get(pos as usize - 1)
        .filter(|spent| spent.len() == tx.input.len())
        .ok_or_else(|| {
            Failure::internal(format!(
                "the undo data does not fit transaction {}",
                tx.compute_txid()
            ))
        })?;
    Ok(spent.iter().map(|s| Some(s.txout.clone())).collect())
}

/// A transaction of the chain or the mempool, with its bytes, the outputs its inputs spend and
/// its status.
pub struct Found {
    /// The transaction.
    pub tx: Transaction,
    /// Its serialization.
    pub raw: Vec<u8>,
    /// The outputs its inputs spend, in input order (`None` for a coinbase's).
    pub prevouts: Vec<Option<TxOut>>,
    /// Where it is.
    pub status: TxStatus,
}

/// Decodes a stored transaction.
pub fn decode(raw: &[u8]) -> Result<Transaction, Failure> {
    Transaction::consensus_decode(&mut &raw[..])
        .map_err(|e| Failure::internal(format!("a stored transaction does not decode: {e}")))
}

/// The chain's transaction `txid`, else the mempool's; `with_prevouts` reads what its inputs
/// spend (the block's undo data for a confirmed one).
pub fn find(ctx: &HttpContext, txid: &Txid, with_prevouts: bool) -> Result<Option<Found>, Failure> {
    if let Some((raw, pos)) = ctx.index.confirmed_tx_bytes(&ctx.validator, txid)? {
        let tx = decode(&raw)?;
        let status = TxStatus::at(ctx, pos.height);
        let prevouts = match (with_prevouts, status.block_hash) {
            (true, Some(hash)) => spent_outputs(&undo_of(ctx, &hash)?, pos.pos, &tx)?,
            _ => Vec::new(),
        };
        return Ok(Some(Found {
            tx,
            raw,
            prevouts,
            status,
        }));
    }
    let Some(entry) = ctx.mempool.as_ref().and_then(|m| m.entry(txid)) else {
        return Ok(None);
    };
    Ok(Some(Found {
        prevouts: entry.prevouts.into_iter().map(Some).collect(),
        tx: entry.tx,
        raw: entry.raw,
        status: TxStatus::UNCONFIRMED,
    }))
}

/// A block's undo data, from the kernel.
pub fn undo_of(ctx: &HttpContext, hash: &BlockHash) -> Result<BlockUndo, Failure> {
    ctx.validator
        .read_undo_by_hash(hash)
        .map_err(Failure::internal)
}

fn not_found() -> Failure {
    Failure::not_found("Transaction not found")
}

/// `GET /tx/:txid`.
pub fn json(ctx: &HttpContext, txid: &Txid) -> Reply {
    let found = find(ctx, txid, true)?.ok_or_else(not_found)?;
    let network = ctx.validator.network().to_bitcoin();
    super::json(&TxValue::new(
        &found.tx,
        &found.prevouts,
        found.status,
        network,
    ))
}

/// `GET /tx/:txid/hex`.
pub fn hex(ctx: &HttpContext, txid: &Txid) -> Reply {
    let found = find(ctx, txid, false)?.ok_or_else(not_found)?;
    text(found.raw.to_lower_hex_string())
}

/// `GET /tx/:txid/raw`.
pub fn raw(ctx: &HttpContext, txid: &Txid) -> Reply {
    let found = find(ctx, txid, false)?.ok_or_else(not_found)?;
    binary(found.raw)
}

/// `GET /tx/:txid/status`: unconfirmed also for a transaction nobody knows (as Esplora).
pub fn status(ctx: &HttpContext, txid: &Txid) -> Reply {
    let status = match ctx.index.tx_position(txid)? {
        Some(pos) => TxStatus::at(ctx, pos.height),
        None => TxStatus::UNCONFIRMED,
    };
    super::json(&status)
}

/// A confirmed transaction's block: its height, hash, txids and the transaction's position.
fn confirming_block(
    ctx: &HttpContext,
    txid: &Txid,
) -> Result<(u32, bitcoin::block::Header, Vec<Txid>, u32), Failure> {
    let unconfirmed = || Failure::not_found("Transaction not found or is unconfirmed");
    let pos = ctx.index.tx_position(txid)?.ok_or_else(unconfirmed)?;
    let header = ctx
        .index
        .with_chain(|c| c.header(pos.height).copied())
        .ok_or_else(unconfirmed)?;
    let txids = ctx.index.block_txids(pos.height)?.ok_or_else(unconfirmed)?;
    if txids.get(pos.pos as usize) != Some(txid) {
        return Err(unconfirmed());
    }
    Ok((pos.height, header, txids, pos.pos))
}

/// `GET /tx/:txid/merkle-proof`: Electrum's `get_merkle` answer.
pub fn merkle_proof(ctx: &HttpContext, txid: &Txid) -> Reply {
    let (height, _, txids, pos) = confirming_block(ctx, txid)?;
    let leaves: Vec<[u8; 32]> = txids.iter().map(|t| t.to_byte_array()).collect();
    let (branch, _) = crate::electrum::merkle::branch_and_root(&leaves, pos as usize);
    let merkle: Vec<String> = branch
        .iter()
        .map(crate::electrum::merkle::rpc_hex)
        .collect();
    super::json(&serde_json::json!({ "block_height": height, "merkle": merkle, "pos": pos }))
}

/// `GET /tx/:txid/merkleblock-proof`: bitcoind's `gettxoutproof` for this one transaction.
pub fn merkleblock_proof(ctx: &HttpContext, txid: &Txid) -> Reply {
    let (_, header, txids, _) = confirming_block(ctx, txid)?;
    let block =
        bitcoin::MerkleBlock::from_header_txids_with_predicate(&header, &txids, |t| t == txid);
    text(bitcoin::consensus::encode::serialize_hex(&block))
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

    fn by(txid: Txid, vin: u32, status: TxStatus) -> Self {
        Spending {
            spent: true,
            txid: Some(txid),
            vin: Some(vin),
            status: Some(status),
        }
    }
}

/// The mempool transaction that spends `op`, if any.
fn mempool_spender(ctx: &HttpContext, op: &OutPoint) -> Option<Spending> {
    let pool = ctx.mempool.as_ref()?;
    let (txid, _) = pool.spender(op)?;
    let entry = pool.entry(&txid)?;
    let vin = entry
        .tx
        .input
        .iter()
        .position(|i| i.previous_output == *op)?;
    Some(Spending::by(txid, vin as u32, TxStatus::UNCONFIRMED))
}

/// `GET /tx/:txid/outspend/:vout`: not spent also for an output nobody knows (as Esplora).
pub fn outspend(ctx: &HttpContext, txid: &Txid, vout: u32) -> Reply {
    if let Some((by, vin, height)) = ctx.index.spender(txid, vout)? {
        return super::json(&Spending::by(by, vin, TxStatus::at(ctx, height)));
    }
    let op = OutPoint::new(*txid, vout);
    super::json(&mempool_spender(ctx, &op).unwrap_or(Spending::UNSPENT))
}

/// `GET /tx/:txid/outspends`: one answer per output.
pub fn outspends(ctx: &HttpContext, txid: &Txid) -> Reply {
    let found = find(ctx, txid, false)?.ok_or_else(not_found)?;
    let mut answers: Vec<Spending> = (0..found.tx.output.len())
        .map(|_| Spending::UNSPENT)
        .collect();
    if found.status.confirmed {
        for spend in ctx.index.spenders(txid)?.unwrap_or_default() {
            if let Some(slot) = answers.get_mut(spend.vout as usize) {
                *slot = Spending::by(spend.txid, spend.vin, TxStatus::at(ctx, spend.height));
            }
        }
    }
    for (vout, slot) in answers.iter_mut().enumerate() {
        if !slot.spent {
            if let Some(spending) = mempool_spender(ctx, &OutPoint::new(*txid, vout as u32)) {
                *slot = spending;
            }
        }
    }
    super::json(&answers)
}

/// `POST /tx`: the body is the transaction in hex; the answer its txid, or bitcoind's
/// `sendrawtransaction` error as Esplora passes it on (400).
pub fn broadcast(ctx: &HttpContext, body: &[u8]) -> Reply {
    let rpc_error = |code: i32, message: String| {
        let error = serde_json::json!({ "code": code, "message": message });
        Failure::bad(format!("sendrawtransaction RPC error: {error}"))
    };
    let hex = std::str::from_utf8(body)
        .map_err(|_| Failure::bad("the body is not UTF-8 text"))?
        .trim();
    // bitcoind's -22 (RPC_DESERIALIZATION_ERROR) for text that is not a transaction.
    let raw = Vec::<u8>::from_hex(hex).map_err(|_| rpc_error(-22, "TX decode failed".into()))?;
    let pool = ctx.mempool.as_ref().ok_or_else(|| {
        Failure(
            hyper::StatusCode::SERVICE_UNAVAILABLE,
            "this server keeps no mempool (mempool = false)".into(),
        )
    })?;
    match pool.accept(&raw, &ctx.index) {
        Ok(accepted) => {
            let txid = accepted.txid;
            ctx.notifier.accepted(&ctx.index, accepted);
            text(txid.to_string())
        }
        // bitcoind answers a transaction it already has with its txid.
        Err(Rejection::AlreadyInMempool) => text(decode(&raw)?.compute_txid().to_string()),
        Err(e) => Err(rpc_error(rejection_code(&e), e.to_string())),
    }
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
