//! A transaction's page: where it stands (its block, or the mempool with its fee rate and the
//! projected block it would enter), its figures, every input with what it spent and every
//! output with what spends it.

use bitcoin::hex::DisplayHex;
use bitcoin::{Transaction, TxOut, Txid};
use hyper::StatusCode;

use super::html::{self, btc, utc, Html};
use super::{Page, PageError};
use crate::http::context::Query;
use crate::view::{ChainView, FoundTx, Spender};

/// Inputs and outputs a page lists at most (a transaction can have tens of thousands).
const MAX_ROWS: usize = 1_000;

/// `GET /explorer/tx/:txid`.
pub fn page(ctx: &Query, mut body: Html, txid: &Txid) -> Page {
    let view = ctx.view();
    let found = view.transaction(txid, true)?.ok_or_else(|| {
        PageError::not_found(format!("no transaction {txid} in the chain or the mempool"))
    })?;
    status(ctx, &view, &found, &mut body);
    details(&found, &mut body);
    inputs(&found, view.network(), &mut body);
    let outputs = found.tx.output.len().min(MAX_ROWS);
    let spenders = view.spenders(txid, outputs, found.confirmation.is_some())?;
    outputs_of(&found.tx, &spenders, view.network(), &mut body);
    Ok(html::page(
        StatusCode::OK,
        &format!("Transaction {txid}"),
        body,
    ))
}

fn status(ctx: &Query, view: &ChainView<'_>, found: &FoundTx, body: &mut Html) {
    body.raw("<section><h2>Status</h2><dl>");
    match found.confirmation {
        Some(block) => {
            let tip = view.tip().map_or(block.height, |(h, _)| h);
            let pos = view
                .tx_position(&found.tx.compute_txid())
                .ok()
                .flatten()
                .map(|p| p.pos);
            body.pair("confirmations", tip.saturating_sub(block.height) + 1)
                .raw("<dt>block</dt><dd>")
                .link(&format!("/explorer/block/{}", block.hash), block.height)
                .raw(" <span class=\"hash\">")
                .text(block.hash)
                .raw("</span></dd>")
                .pair("position", pos.map_or("?".into(), |p| p.to_string()))
                .pair("block time", utc(i64::from(block.time)));
        }
        None => mempool_status(ctx, found, body),
    }
    body.raw("</dl></section>");
}

fn mempool_status(ctx: &Query, found: &FoundTx, body: &mut Html) {
    let txid = found.tx.compute_txid();
    body.pair("status", "unconfirmed, in the mempool");
    let pool = ctx.model.mempool();
    // The mempool's own figures: its virtual size counts sigops as Core's `getmempoolentry`.
    if let Some(entry) = pool.and_then(|p| p.entry(&txid)) {
        let rate = entry.fee as f64 / entry.vsize.max(1) as f64;
        body.pair("fee rate", format!("{rate:.2} sat/vB"))
            .pair("first seen", utc(entry.time));
    }
    let rates = pool.map(|p| p.fee_rates());
    let projected = rates
        .as_ref()
        .and_then(|r| r.blocks.iter().position(|b| b.txids.contains(&txid)));
    body.pair(
        "projected block",
        match projected {
            Some(0) => "the next block".to_string(),
            Some(n) => format!("{} blocks from now", n + 1),
            None => "not in the projected blocks".to_string(),
        },
    )
    // Both profiles replace by fee whatever a transaction signals (full RBF).
    .pair(
        "replaceable",
        "yes: by a transaction paying more (full RBF)",
    );
}

fn details(found: &FoundTx, body: &mut Html) {
    let tx = &found.tx;
    let txid = tx.compute_txid();
    let fee = found.fee();
    let vsize = tx.vsize() as u64;
    body.raw("<section><h2>Details</h2><dl>")
        .pair("txid", txid)
        .pair("wtxid", tx.compute_wtxid())
        .pair("fee", format!("{} ({fee} sat)", btc(fee)))
        .pair(
            "fee rate",
            format!("{:.2} sat/vB", fee as f64 / vsize.max(1) as f64),
        )
        .pair("size", format!("{} bytes", tx.total_size()))
        .pair("virtual size", format!("{vsize} vB"))
        .pair("weight", format!("{} WU", tx.weight().to_wu()))
        // Unsigned, as Core 28 and later show it.
        .pair("version", tx.version.0 as u32)
        .pair("lock time", tx.lock_time.to_consensus_u32())
        .pair(
            "witness",
            match tx.input.iter().any(|i| !i.witness.is_empty()) {
                true => "yes",
                false => "no",
            },
        )
        .raw("<dt>raw</dt><dd>")
        .link(&format!("/tx/{txid}/hex"), "hex");
    if found.confirmation.is_some() {
        body.raw(" · ")
            .link(&format!("/tx/{txid}/merkle-proof"), "merkle proof");
    }
    body.raw("</dd></dl></section>");
}

/// An output's script: a link to its address, else its kind and script (escaped).
fn script_cell(out: &TxOut, network: bitcoin::Network, body: &mut Html) {
    match bitcoin::Address::from_script(&out.script_pubkey, network) {
        Ok(address) => {
            body.link(&format!("/explorer/address/{address}"), &address);
        }
        Err(_) => {
            body.raw("<span class=\"hash\">")
                .short_text(&out.script_pubkey.to_asm_string())
                .raw("</span>");
            if let Some(text) = op_return_text(&out.script_pubkey) {
                body.raw("<br>text: <bdi>").short_text(&text).raw("</bdi>");
            }
        }
    }
}

/// The data an OP_RETURN output carries, when it reads as text (as explorers show it): the
/// pushes joined, valid UTF-8 without control characters. Attacker-chosen: escaped like any
/// field.
fn op_return_text(script: &bitcoin::Script) -> Option<String> {
    if !script.is_op_return() {
        return None;
    }
    let mut data = Vec::new();
    for instruction in script.instructions().skip(1) {
        if let Ok(bitcoin::script::Instruction::PushBytes(push)) = instruction {
            data.extend_from_slice(push.as_bytes());
        }
    }
    let text = String::from_utf8(data).ok()?;
    (!text.is_empty() && !text.chars().any(char::is_control)).then_some(text)
}

fn inputs(found: &FoundTx, network: bitcoin::Network, body: &mut Html) {
    let tx = &found.tx;
    body.raw("<section><h2>Inputs (")
        .text(tx.input.len())
        .raw(")</h2><table><tr><th>#</th><th>spends</th><th>address</th><th class=\"num\">amount</th></tr>");
    for (i, input) in tx.input.iter().enumerate().take(MAX_ROWS) {
        body.raw("<tr><td>").text(i).raw("</td><td class=\"hash\">");
        if tx.is_coinbase() {
            body.raw("coinbase</td><td class=\"hash\">")
                .text(input.script_sig.as_bytes().to_lower_hex_string())
                .raw("</td><td></td></tr>");
            continue;
        }
        let op = input.previous_output;
        body.link(&format!("/explorer/tx/{}#output-{}", op.txid, op.vout), op)
            .raw("</td><td>");
        let prevout = found.prevouts.get(i).and_then(Option::as_ref);
        if let Some(prevout) = prevout {
            script_cell(prevout, network, body);
        }
        body.raw("</td><td class=\"num\">")
            .text(prevout.map_or(String::new(), |p| btc(p.value.to_sat())))
            .raw("</td></tr>");
    }
    body.raw("</table>");
    more_rows(tx.input.len(), body);
    body.raw("</section>");
}

fn outputs_of(
    tx: &Transaction,
    spenders: &[Option<Spender>],
    network: bitcoin::Network,
    body: &mut Html,
) {
    body.raw("<section><h2>Outputs (")
        .text(tx.output.len())
        .raw(")</h2><table><tr><th>#</th><th>address or script</th><th class=\"num\">amount</th><th>spent by</th></tr>");
    for (vout, out) in tx.output.iter().enumerate().take(MAX_ROWS) {
        body.raw("<tr id=\"output-")
            .text(vout)
            .raw("\"><td>")
            .text(vout)
            .raw("</td><td>");
        script_cell(out, network, body);
        body.raw("</td><td class=\"num\">")
            .text(btc(out.value.to_sat()))
            .raw("</td><td class=\"hash\">");
        match spenders.get(vout).copied().flatten() {
            Some(spender) => {
                let text = format!("{}:{}", spender.txid, spender.vin);
                body.link(&format!("/explorer/tx/{}", spender.txid), text);
                if spender.height.is_none() {
                    body.raw(" (unconfirmed)");
                }
            }
            None if out.script_pubkey.is_op_return() => {
                body.raw("unspendable");
            }
            None => {
                body.raw("unspent");
            }
        }
        body.raw("</td></tr>");
    }
    body.raw("</table>");
    more_rows(tx.output.len(), body);
    body.raw("</section>");
}

fn more_rows(total: usize, body: &mut Html) {
    if total > MAX_ROWS {
        body.raw("<p>the first ")
            .text(MAX_ROWS)
            .raw(" of ")
            .text(total)
            .raw(" are listed</p>");
    }
}
