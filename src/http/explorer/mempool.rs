//! The mempool's page: its size, its fee-rate histogram drawn as bars (an inline SVG, no
//! script), the blocks a miner would build next from it, and the transactions that entered
//! last.

use std::fmt::Write;

use hyper::StatusCode;

use super::html::{self, btc, utc, Html};
use super::Page;
use crate::http::context::Query;

/// Projected blocks listed.
const BLOCKS_SHOWN: usize = 8;
/// Recent transactions listed (Esplora's `/mempool/recent`).
const RECENT: usize = 10;

/// `GET /explorer/mempool`.
pub fn page(ctx: &Query, mut body: Html) -> Page {
    let Some(pool) = ctx.model.mempool() else {
        body.raw("<section><p>this node keeps no mempool</p></section>");
        return Ok(html::page(StatusCode::OK, "Mempool", body));
    };
    let (count, vsize, fees) = pool.info();
    body.raw("<section><h2>Size</h2><dl>")
        .pair("transactions", count)
        .pair("virtual size", format!("{vsize} vB"))
        .pair("fees", btc(fees))
        .raw("</dl></section>");
    let rates = pool.fee_rates();
    body.raw("<section><h2>Fee rates (virtual size in each bin, from the highest rate down)</h2>")
        .raw(&histogram_svg(&rates.histogram))
        .raw("</section>");
    body.raw("<section><h2>Next blocks, as projected</h2><table><tr><th>block</th><th class=\"num\">transactions</th><th class=\"num\">virtual size</th><th class=\"num\">fees</th><th class=\"num\">fee range (packages)</th><th class=\"num\">average rate</th></tr>");
    for (n, block) in rates.blocks.iter().take(BLOCKS_SHOWN).enumerate() {
        body.raw("<tr><td>+")
            .text(n + 1)
            .raw("</td><td class=\"num\">")
            .text(block.txids.len())
            .raw("</td><td class=\"num\">")
            .text(block.vsize)
            .raw(" vB</td><td class=\"num\">")
            .text(btc(block.fees))
            .raw("</td><td class=\"num\">")
            .text(format!(
                "{:.2} to {:.2} sat/vB",
                block.min_rate, block.max_rate
            ))
            .raw("</td><td class=\"num\">")
            .text(format!(
                "{:.2} sat/vB",
                block.fees as f64 / block.vsize.max(1) as f64
            ))
            .raw("</td></tr>");
    }
    body.raw("</table>");
    if rates.blocks.len() > BLOCKS_SHOWN {
        body.raw("<p>and ")
            .text(rates.blocks.len() - BLOCKS_SHOWN)
            .raw(" more blocks</p>");
    }
    body.raw("</section><section><h2>Entered last</h2><table><tr><th>txid</th><th class=\"num\">paid out</th><th class=\"num\">fee</th><th class=\"num\">vsize</th></tr>");
    for tx in pool.recent(RECENT) {
        body.raw("<tr><td class=\"hash\">")
            .link(&format!("/explorer/tx/{}", tx.txid), tx.txid)
            .raw("</td><td class=\"num\">")
            .text(btc(tx.value))
            .raw("</td><td class=\"num\">")
            .text(tx.fee)
            .raw(" sat</td><td class=\"num\">")
            .text(tx.vsize)
            .raw("</td></tr>");
    }
    body.raw("</table><p>as of ")
        .text(utc(now()))
        .raw("</p></section>");
    Ok(html::page(StatusCode::OK, "Mempool", body))
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The histogram's bins (fee rate, virtual size) as bars, highest rate first, each labelled
/// with its rate. Only numbers go in: nothing to escape.
fn histogram_svg(bins: &[(f64, u64)]) -> String {
    if bins.is_empty() {
        return "<p>empty</p>".into();
    }
    let (width, height) = (800.0, 140.0);
    let most = bins.iter().map(|b| b.1).max().unwrap_or(1).max(1) as f64;
    let step = width / bins.len() as f64;
    let mut svg = format!(
        "<svg viewBox=\"0 0 {width} {}\" role=\"img\" aria-label=\"fee histogram\">",
        height + 16.0
    );
    for (i, (rate, size)) in bins.iter().enumerate() {
        let h = (*size as f64 / most * height).max(1.0);
        let x = i as f64 * step;
        let _ = write!(
            svg,
            "<rect class=\"bar\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\"><title>{rate:.2} sat/vB: {size} vB</title></rect><text x=\"{x:.1}\" y=\"{:.1}\">{rate:.1}</text>",
            height - h,
            (step - 2.0).max(1.0),
            height + 12.0
        );
    }
    svg.push_str("</svg>");
    svg
}
