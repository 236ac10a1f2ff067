//! A block's page: its header, its fee range, its BIP158 filter with the filter header, and its
//! transactions a page at a time.

use bitcoin::hashes::Hash;
use bitcoin::hex::DisplayHex;
use bitcoin::{Block, BlockHash, TxOut};
use hyper::StatusCode;

use super::html::{self, btc, utc, Html};
use super::{Page, PageError, TXS_PER_PAGE};
use crate::http::context::Query;
use crate::kernel::BlockUndo;
use crate::view::{fee_paid, ChainView, FilterState};

/// `GET /explorer/block-height/:height`: to the page of the block at that height.
pub fn at_height(ctx: &Query, from: &str, text: &str) -> Page {
    let height: u32 = text
        .parse()
        .map_err(|_| PageError::bad(format!("not a block height: {text:?}")))?;
    let view = ctx.view();
    match view.block_hash(height) {
        Some(hash) => Ok(html::see_other(from, &format!("/explorer/block/{hash}"))),
        None => {
            let tip = view.tip().map_or(-1, |(h, _)| i64::from(h));
            Err(PageError::not_found(format!(
                "no block at height {height}: the chain's tip is at {tip}"
            )))
        }
    }
}

/// `GET /explorer/block/:hash[?start=N]`: the block and its transactions from `start`.
pub fn page(ctx: &Query, mut body: Html, hash: &BlockHash, start: usize) -> Page {
    let view = ctx.view();
    let height = view
        .height_of(hash)
        .ok_or_else(|| PageError::not_found(format!("no block {hash} in the chain")))?;
    let (block, size) = view.block(hash)?;
    // The genesis block spends nothing and has no undo data.
    let spent = match height {
        0 => BlockUndo { txs: Vec::new() },
        _ => view.undo(hash)?,
    };
    header(&view, height, &block, size, &mut body);
    fees(&block, &spent, &mut body);
    filter(&view, height, &mut body)?;
    transactions(hash, &block, &spent, start, &mut body)?;
    Ok(html::page(StatusCode::OK, &format!("Block {height}"), body))
}

fn header(view: &ChainView<'_>, height: u32, block: &Block, size: usize, body: &mut Html) {
    let h = &block.header;
    body.raw("<section><h2>Header</h2><dl>")
        .pair("hash", block.block_hash())
        .pair("height", height)
        .pair(
            "confirmations",
            view.tip()
                .map_or(0, |(tip, _)| tip.saturating_sub(height) + 1),
        );
    if h.prev_blockhash != BlockHash::all_zeros() {
        body.raw("<dt>previous</dt><dd class=\"hash\">")
            .link(
                &format!("/explorer/block/{}", h.prev_blockhash),
                h.prev_blockhash,
            )
            .raw("</dd>");
    }
    if let Some(next) = view.block_hash(height.saturating_add(1)) {
        body.raw("<dt>next</dt><dd class=\"hash\">")
            .link(&format!("/explorer/block/{next}"), next)
            .raw("</dd>");
    }
    body.pair("time", utc(i64::from(h.time)))
        .pair("median time", utc(i64::from(view.median_time_past(height))))
        .pair("version", format!("0x{:08x}", h.version.to_consensus()))
        .pair("merkle root", h.merkle_root)
        .pair("bits", format!("{:08x}", h.bits.to_consensus()))
        .pair("nonce", h.nonce)
        .pair("difficulty", h.difficulty_float())
        .pair("transactions", block.txdata.len())
        .pair("size", format!("{size} bytes"))
        .pair("weight", format!("{} WU", block.weight().to_wu()))
        .raw("</dl></section>");
}

/// The fee range: the lowest and highest fee rate of the block's transactions (the coinbase
/// left out) in whole sat/vB as Core's `getblockstats` counts them (`fee * 4 / weight`, rounded
/// down), and what they paid in all.
fn fees(block: &Block, spent: &BlockUndo, body: &mut Html) {
    let mut total = 0u64;
    let mut range: Option<(u64, u64)> = None;
    for (pos, tx) in block.txdata.iter().enumerate().skip(1) {
        let paid = fee_paid(tx, &prevouts_at(spent, pos));
        total = total.saturating_add(paid);
        let rate = paid.saturating_mul(4) / tx.weight().to_wu().max(1);
        range = Some(range.map_or((rate, rate), |(lo, hi)| (lo.min(rate), hi.max(rate))));
    }
    body.raw("<section><h2>Fees</h2><dl>")
        .pair("total", btc(total))
        .pair(
            "fee rates",
            match range {
                Some((lo, hi)) => format!("{lo} to {hi} sat/vB"),
                None => "no transaction but the coinbase".into(),
            },
        )
        .raw("</dl></section>");
}

fn filter(view: &ChainView<'_>, height: u32, body: &mut Html) -> Result<(), PageError> {
    body.raw("<section><h2>BIP158 filter</h2><dl>");
    match view.filter_state()? {
        FilterState::Off => {
            body.pair("filter", "not built (block_filters = false)");
        }
        FilterState::Building => {
            body.pair("filter", "being built");
        }
        FilterState::Ready => match view.block_filter(height)? {
            Some(found) => {
                body.pair("filter header", found.header)
                    .pair("filter", found.filter.to_lower_hex_string());
            }
            None => {
                body.pair("filter", "none");
            }
        },
    }
    body.raw("</dl></section>");
    Ok(())
}

/// What the inputs of the block's transaction at `pos` spent (none for the coinbase).
fn prevouts_at(spent: &BlockUndo, pos: usize) -> Vec<Option<TxOut>> {
    match pos.checked_sub(1).and_then(|i| spent.txs.get(i)) {
        Some(coins) => coins.iter().map(|c| Some(c.txout.clone())).collect(),
        None => Vec::new(),
    }
}

fn transactions(
    hash: &BlockHash,
    block: &Block,
    spent: &BlockUndo,
    start: usize,
    body: &mut Html,
) -> Result<(), PageError> {
    let count = block.txdata.len();
    if start >= count {
        return Err(PageError::not_found(format!(
            "block {hash} has {count} transactions: none at position {start}"
        )));
    }
    let page = &block.txdata[start..count.min(start + TXS_PER_PAGE)];
    body.raw("<section><h2>Transactions ")
        .text(start + 1)
        .raw(" to ")
        .text(start + page.len())
        .raw(" of ")
        .text(count)
        .raw("</h2><table><tr><th>#</th><th>txid</th><th class=\"num\">paid out</th><th class=\"num\">fee</th><th class=\"num\">vsize</th></tr>");
    for (pos, tx) in (start..).zip(page) {
        let txid = tx.compute_txid();
        let out: u64 = tx.output.iter().map(|o| o.value.to_sat()).sum();
        body.raw("<tr><td>")
            .text(pos)
            .raw("</td><td class=\"hash\">")
            .link(&format!("/explorer/tx/{txid}"), txid)
            .raw("</td><td class=\"num\">")
            .text(btc(out))
            .raw("</td><td class=\"num\">")
            .text(fee_paid(tx, &prevouts_at(spent, pos)))
            .raw(" sat</td><td class=\"num\">")
            .text(tx.vsize())
            .raw("</td></tr>");
    }
    body.raw("</table><p>");
    if start > 0 {
        let back = start.saturating_sub(TXS_PER_PAGE);
        body.link(
            &format!("/explorer/block/{hash}?start={back}"),
            "← earlier positions",
        );
        body.raw(" ");
    }
    if start + page.len() < count {
        let next = start + page.len();
        body.link(
            &format!("/explorer/block/{hash}?start={next}"),
            "later positions →",
        );
    }
    body.raw("</p></section>");
    Ok(())
}
