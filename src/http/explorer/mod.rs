//! A small block explorer on the HTTP listener: server-rendered pages (no script) for an
//! address, a transaction, a block and the mempool, and a search that routes to them, all read
//! from the same view as the Esplora API and charged to the visitor's host like any request.
//! Every field a page shows is escaped ([`html::Html::text`]); a query that is not one of
//! the things searched for gets 400, one that names nothing known 404, each as a page.

mod address;
mod block;
mod html;
mod mempool;
mod search;
mod tx;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};

use crate::http::context::Query;
use crate::view::ViewError;
use html::Html;

/// Confirmed transactions a page of an address or a block lists (Esplora's page).
const TXS_PER_PAGE: usize = 25;

/// Why a page could not be shown: its status and what the page says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageError(StatusCode, String);

impl PageError {
    fn bad(message: impl Into<String>) -> Self {
        PageError(StatusCode::BAD_REQUEST, message.into())
    }

    fn not_found(message: impl Into<String>) -> Self {
        PageError(StatusCode::NOT_FOUND, message.into())
    }
}

impl From<ViewError> for PageError {
    /// The status Esplora's API answers the same failure with.
    fn from(e: ViewError) -> Self {
        let crate::http::esplora::Failure(status, message) = e.into();
        PageError(status, message)
    }
}

/// What a page's builder answers.
type Page = Result<Response<Full<Bytes>>, PageError>;

/// Answers `GET /explorer/...` (`rest` is the path after `/explorer`, `query` its query
/// string); any other method is refused.
pub fn answer(
    ctx: &Query,
    method: &hyper::Method,
    rest: &str,
    query: Option<&str>,
) -> Response<Full<Bytes>> {
    let path = format!("/explorer{rest}");
    let page = match *method == hyper::Method::GET {
        true => route(ctx, &path, query.unwrap_or("")),
        false => Err(PageError(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET is served".into(),
        )),
    };
    page.unwrap_or_else(|PageError(status, message)| {
        let mut body = Html::at(&path);
        body.raw("<section><p>")
            .text(&message)
            .raw("</p></section>");
        let title = status.canonical_reason().unwrap_or("Error");
        html::page(status, title, body)
    })
}

/// The page at `path` (`/explorer/...`).
fn route(ctx: &Query, path: &str, query: &str) -> Page {
    let parts: Vec<&str> = path.split('/').skip(2).take(3).collect();
    let at = Html::at(path);
    match parts.as_slice() {
        [] | [""] => Ok(html::see_other(path, "/")),
        ["search"] => search::route(ctx, path, &param(query, "q").unwrap_or_default()),
        ["tx", txid] => tx::page(ctx, at, &parse_txid(txid)?),
        ["block", hash] => block::page(ctx, at, &parse_hash(hash)?, start(query)?),
        ["block-height", height] => block::at_height(ctx, path, height),
        ["address", address] => address::page(ctx, at, address, param(query, "after").as_deref()),
        ["mempool"] => mempool::page(ctx, at),
        _ => Err(PageError::not_found(format!("no page at {path}"))),
    }
}

/// The value of `name` in a query string (form-encoded: `+` for a space, `%3A` for `:`).
fn param(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// A page's first position (`?start=`), 0 when absent.
fn start(query: &str) -> Result<usize, PageError> {
    match param(query, "start") {
        None => Ok(0),
        Some(text) => text
            .parse()
            .map_err(|_| PageError::bad(format!("not a position: {text:?}"))),
    }
}

fn parse_txid(text: &str) -> Result<bitcoin::Txid, PageError> {
    text.parse()
        .map_err(|_| PageError::bad(format!("not a transaction id (64 hex digits): {text:?}")))
}

fn parse_hash(text: &str) -> Result<bitcoin::BlockHash, PageError> {
    text.parse()
        .map_err(|_| PageError::bad(format!("not a block hash (64 hex digits): {text:?}")))
}
