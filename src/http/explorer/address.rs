//! An address's page: its balance confirmed and unconfirmed, how many transactions it has,
//! its history newest first 25 at a time (the mempool's on the first page), and its unspent
//! outputs.

use std::collections::HashSet;
use std::str::FromStr;

use bitcoin::{Address, Script, Txid};
use hyper::StatusCode;

use super::html::{self, btc, signed_btc, utc, Html};
use super::{Page, PageError, TXS_PER_PAGE};
use crate::http::context::Query;
use crate::index::query::QueryError;
use crate::types::ScriptHash;
use crate::view::{ChainView, FoundTx, ViewError};

/// Confirmed transactions counted at most (keys only, on the first page: 400 units of cost);
/// a longer history says "more than", as Esplora's statistics stop at 20,000.
const MAX_COUNTED: usize = 20_000;
/// Mempool transactions the first page lists at most (Esplora's `MAX_MEMPOOL_TXS`).
const MEMPOOL_TXS: usize = 50;
/// Unspent outputs listed at most.
const MAX_UNSPENT: usize = 500;

/// `GET /explorer/address/:address[?after=txid]`: `after` is the last transaction of the page
/// before (the history goes on below it).
pub fn page(ctx: &Query, mut body: Html, text: &str, after: Option<&str>) -> Page {
    let network = ctx.model.validator().network().to_bitcoin();
    let address = Address::from_str(text)
        .map_err(|e| PageError::bad(format!("not an address: {e}")))?
        .require_network(network)
        .map_err(|_| {
            PageError::bad(format!(
                "not an address of this server's network ({network})"
            ))
        })?;
    let after = match after {
        Some(txid) => Some(
            Txid::from_str(txid)
                .map_err(|_| PageError::bad("not a transaction id after 'after='"))?,
        ),
        None => None,
    };
    let script = address.script_pubkey();
    let sh = ScriptHash::of(&script);
    let view = ctx.view();
    summary(&view, &sh, after.is_none(), &mut body)?;
    history(&view, &address, &script, &sh, after, &mut body)?;
    unspent(&view, &sh, &mut body)?;
    Ok(html::page(
        StatusCode::OK,
        &format!("Address {address}"),
        body,
    ))
}

/// The balance, and on the first page (`first`) how many transactions the address has.
fn summary(
    view: &ChainView<'_>,
    sh: &ScriptHash,
    first: bool,
    body: &mut Html,
) -> Result<(), PageError> {
    let balance = view.balance(sh)?;
    body.raw("<section><h2>Balance</h2><dl>")
        .pair("confirmed", btc(balance.confirmed.to_sat()))
        .pair("unconfirmed", signed_btc(balance.unconfirmed.to_sat()));
    if first {
        let confirmed = match view.confirmed_len(sh, MAX_COUNTED) {
            Ok(n) => n.to_string(),
            Err(ViewError::Query(QueryError::TooLarge { limit })) => format!("more than {limit}"),
            Err(e) => return Err(e.into()),
        };
        let unconfirmed = view.mempool_stats(sh).tx_count;
        body.pair(
            "transactions",
            format!("{confirmed} confirmed, {unconfirmed} unconfirmed"),
        );
    }
    body.raw("</dl></section>");
    Ok(())
}

/// What a transaction did to `script`: what it paid the script minus what it spent of it.
fn net(found: &FoundTx, script: &Script) -> i64 {
    let paid: u64 = found
        .tx
        .output
        .iter()
        .filter(|o| o.script_pubkey.as_script() == script)
        .map(|o| o.value.to_sat())
        .sum();
    let spent: u64 = found
        .prevouts
        .iter()
        .flatten()
        .filter(|p| p.script_pubkey.as_script() == script)
        .map(|p| p.value.to_sat())
        .sum();
    i64::try_from(paid).unwrap_or(i64::MAX) - i64::try_from(spent).unwrap_or(i64::MAX)
}

fn history(
    view: &ChainView<'_>,
    address: &Address,
    script: &Script,
    sh: &ScriptHash,
    after: Option<Txid>,
    body: &mut Html,
) -> Result<(), PageError> {
    let mut rows = match after {
        None => view.mempool_transactions(sh, MEMPOOL_TXS),
        Some(_) => Vec::new(),
    };
    let Some(entries) = view.confirmed_page(sh, after.as_ref(), TXS_PER_PAGE)? else {
        return Err(PageError::not_found(
            "that transaction is not in this address's history",
        ));
    };
    let confirmed = view.history_transactions(&entries)?;
    let last = entries.last().map(|e| e.txid);
    // A transaction confirmed between the two reads shows once, confirmed.
    let known: HashSet<Txid> = entries.iter().map(|e| e.txid).collect();
    rows.retain(|m| !known.contains(&m.tx.compute_txid()));
    rows.extend(confirmed);
    body.raw("<section><h2>Transactions, newest first</h2><table><tr><th>txid</th><th>time</th><th>height</th><th class=\"num\">net</th><th class=\"num\">fee</th></tr>");
    for found in &rows {
        let txid = found.tx.compute_txid();
        body.raw("<tr><td class=\"hash\">")
            .link(&format!("/explorer/tx/{txid}"), txid)
            .raw("</td><td>");
        match found.confirmation {
            Some(block) => {
                body.text(utc(i64::from(block.time)))
                    .raw("</td><td>")
                    .link(&format!("/explorer/block/{}", block.hash), block.height);
            }
            None => {
                body.raw("unconfirmed</td><td>");
            }
        }
        body.raw("</td><td class=\"num\">")
            .text(signed_btc(net(found, script)))
            .raw("</td><td class=\"num\">")
            .text(found.fee())
            .raw(" sat</td></tr>");
    }
    body.raw("</table>");
    if rows.is_empty() {
        body.raw("<p>no transactions</p>");
    }
    if let (Some(last), true) = (last, entries.len() == TXS_PER_PAGE) {
        body.raw("<p>")
            .link(
                &format!("/explorer/address/{address}?after={last}"),
                "older →",
            )
            .raw("</p>");
    }
    body.raw("</section>");
    Ok(())
}

fn unspent(view: &ChainView<'_>, sh: &ScriptHash, body: &mut Html) -> Result<(), PageError> {
    body.raw("<section><h2>Unspent outputs</h2>");
    let outputs = match view.unspent(sh, MAX_UNSPENT) {
        Ok(outputs) => outputs,
        Err(ViewError::Query(QueryError::TooLarge { limit })) => {
            body.raw("<p>more than ")
                .text(limit)
                .raw(" unspent outputs: not listed</p></section>");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    body.raw("<table><tr><th>output</th><th>height</th><th class=\"num\">amount</th></tr>");
    for u in &outputs {
        body.raw("<tr><td class=\"hash\">")
            .link(
                &format!("/explorer/tx/{}#output-{}", u.txid, u.vout),
                format!("{}:{}", u.txid, u.vout),
            )
            .raw("</td><td>")
            .text(
                u.height
                    .map_or("unconfirmed".to_string(), |h| h.to_string()),
            )
            .raw("</td><td class=\"num\">")
            .text(btc(u.value.to_sat()))
            .raw("</td></tr>");
    }
    body.raw("</table>");
    if outputs.is_empty() {
        body.raw("<p>none</p>");
    }
    body.raw("</section>");
    Ok(())
}
