//! The search box: what the visitor typed, sent to the page of what it names (303), or a page
//! saying why nothing is.

use std::str::FromStr;

use bitcoin::{BlockHash, Txid};

use super::{html, Page, PageError};
use crate::http::context::Query;

/// Longest query looked at: an address is at most 90 characters (BIP173), an outpoint 75.
const MAX_QUERY: usize = 100;

/// What a query names, once parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sought {
    /// 64 hex digits: a transaction or a block.
    Id(String),
    /// A block height.
    Height(u32),
    /// `txid:vout`.
    Output(Txid, u32),
    /// An address (network checked by its page).
    Address(String),
}

/// Parses a query, or says why it is none of the things searched for.
fn parse(query: &str) -> Result<Sought, PageError> {
    let query = query.trim();
    if query.is_empty() {
        return Err(PageError::bad(
            "type an address, a transaction id, a block hash or height, or txid:vout",
        ));
    }
    if query.len() > MAX_QUERY {
        return Err(PageError::bad(format!(
            "a query of {} characters is none of the things searched for",
            query.len()
        )));
    }
    if let Some((txid, vout)) = query.split_once(':') {
        let txid = Txid::from_str(txid).map_err(|_| {
            PageError::bad("not an output: the part before ':' is not a transaction id")
        })?;
        let vout = vout.parse().map_err(|_| {
            PageError::bad("not an output: the part after ':' is not an output index")
        })?;
        return Ok(Sought::Output(txid, vout));
    }
    if query.len() == 64 && query.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(Sought::Id(query.to_ascii_lowercase()));
    }
    if !query.is_empty() && query.len() <= 10 && query.bytes().all(|b| b.is_ascii_digit()) {
        let height = query
            .parse()
            .map_err(|_| PageError::bad(format!("no block can be at height {query}")))?;
        return Ok(Sought::Height(height));
    }
    match bitcoin::Address::from_str(query) {
        // Its own writing of itself, not the visitor's text.
        Ok(address) => Ok(Sought::Address(address.assume_checked().to_string())),
        Err(e) => Err(PageError::bad(format!(
            "not an address ({e}), a transaction id, a block hash or height, or txid:vout"
        ))),
    }
}

/// `GET /explorer/search?q=...`.
pub fn route(ctx: &Query, from: &str, query: &str) -> Page {
    match parse(query)? {
        Sought::Output(txid, vout) => Ok(html::see_other(
            from,
            &format!("/explorer/tx/{txid}#output-{vout}"),
        )),
        Sought::Height(height) => Ok(html::see_other(
            from,
            &format!("/explorer/block-height/{height}"),
        )),
        Sought::Address(address) => Ok(html::see_other(
            from,
            &format!("/explorer/address/{address}"),
        )),
        Sought::Id(id) => {
            let view = ctx.view();
            if let Ok(txid) = Txid::from_str(&id) {
                // Where it is, not its bytes: the page it is sent to reads them.
                let pooled = || ctx.model.mempool().is_some_and(|p| p.raw(&txid).is_some());
                if view.tx_position(&txid)?.is_some() || pooled() {
                    return Ok(html::see_other(from, &format!("/explorer/tx/{txid}")));
                }
            }
            if let Ok(hash) = BlockHash::from_str(&id) {
                if view.height_of(&hash).is_some() {
                    return Ok(html::see_other(from, &format!("/explorer/block/{hash}")));
                }
            }
            Err(PageError::not_found(format!(
                "no transaction or block of the chain or the mempool has the id {id}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_told_apart() {
        let txid = "a".repeat(64);
        assert_eq!(parse(&format!(" {txid} ")), Ok(Sought::Id(txid.clone())));
        assert_eq!(parse(&txid.to_uppercase()), Ok(Sought::Id(txid.clone())));
        assert_eq!(parse("0"), Ok(Sought::Height(0)));
        assert_eq!(parse("840000"), Ok(Sought::Height(840_000)));
        assert_eq!(
            parse(&format!("{txid}:3")),
            Ok(Sought::Output(txid.parse().unwrap(), 3))
        );
        let address = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq";
        assert_eq!(parse(address), Ok(Sought::Address(address.into())));
        // A testnet address parses here; its page refuses it on mainnet.
        let testnet = "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx";
        assert_eq!(parse(testnet), Ok(Sought::Address(testnet.into())));
    }

    #[test]
    fn anything_else_is_a_bad_query() {
        let long = "1".repeat(200);
        let txid = "b".repeat(64);
        for query in [
            "",
            "   ",
            "hello",
            "<script>alert(1)</script>",
            "99999999999",
            &long,
            &format!("{txid}:x"),
            &format!("{}:1", "z".repeat(64)),
            &"c".repeat(63),
        ] {
            let refused = parse(query).unwrap_err();
            assert_eq!(refused.0, hyper::StatusCode::BAD_REQUEST, "{query:?}");
        }
    }
}
