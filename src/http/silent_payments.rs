//! Silent-payment data over HTTP in BlindBit Oracle's v1 shapes (the API BIP352 light wallets
//! such as Dana, BlindBit Scan and spdk call) under `/silent-payments/`: a wallet's base URL is
//! `http://HOST:PORT/silent-payments`. Served: `info`, `block-height`, `tweak-index/{height}`
//! (every eligible transaction) and `tweaks/{height}` (cut-through: those with a taproot output
//! still unspent), both `?dustLimit=N` (or `dust=N`): only transactions whose largest (unspent,
//! for `tweaks`) taproot output is worth N sat or more, each a JSON list of 66-hex tweaks in
//! block order; `filter/new-utxos/{height}`, `filter/spent/{height}`, `spent-index/{height}`
//! and `utxos/{height}` ([`blocks`]); and BlindBit v2's `compute-index/{height}`.

mod blocks;
mod gcs;

use bitcoin::hex::DisplayHex;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Response, StatusCode};
use serde_json::json;

use super::{error, reply};
use crate::view::{ChainView, TweakState, TxTweak, ViewError};

/// Answers a request under `/silent-payments/` (`path` is what follows it).
pub(super) fn answer(
    view: &ChainView,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> Response<Full<Bytes>> {
    if method != Method::GET {
        return error(StatusCode::METHOD_NOT_ALLOWED, "only GET is served");
    }
    match view.tweak_state() {
        Ok(TweakState::Ready) => {}
        Ok(TweakState::Off) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "silent-payment tweaks are not indexed here (silent_payments = false)",
            )
        }
        Ok(TweakState::Building) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "silent-payment tweaks of indexed blocks are still being built",
            )
        }
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
    let tip = view.tip().map_or(0, |(h, _)| h);
    match path {
        "info" => reply(
            StatusCode::OK,
            json!({
                "network": network_name(view.network()),
                "height": tip,
                // BlindBit's word for a server without its filters, `utxos` and `spent-index`.
                "tweaks_only": false,
                "tweaks_full_basic": true,
                "tweaks_full_with_dust_filter": true,
                "tweaks_cut_through_with_dust_filter": true,
            }),
        ),
        "block-height" => reply(StatusCode::OK, json!({ "block_height": tip })),
        _ => {
            if let Some(height) = path.strip_prefix("tweak-index/") {
                return tweaks(view, height, query, false);
            }
            if let Some(height) = path.strip_prefix("tweaks/") {
                return tweaks(view, height, query, true);
            }
            if let Some(height) = path.strip_prefix("filter/new-utxos/") {
                return blocks::new_utxos_filter(view, height);
            }
            if let Some(height) = path.strip_prefix("filter/spent/") {
                return blocks::spent_filter(view, height);
            }
            if let Some(height) = path.strip_prefix("spent-index/") {
                return blocks::spent_index(view, height);
            }
            if let Some(height) = path.strip_prefix("utxos/") {
                return blocks::utxos(view, height);
            }
            if let Some(height) = path.strip_prefix("compute-index/") {
                return blocks::compute_index(view, height);
            }
            error(
                StatusCode::NOT_FOUND,
                "unknown path: try info, block-height, tweaks/{height}, tweak-index/{height}, \
                 filter/new-utxos/{height}, filter/spent/{height}, spent-index/{height}, \
                 utxos/{height} or compute-index/{height}",
            )
        }
    }
}

/// Bitcoin Core's name of a network (`-chain=`), which BlindBit's `/info` answers with.
fn network_name(network: bitcoin::Network) -> &'static str {
    match network {
        bitcoin::Network::Bitcoin => "main",
        bitcoin::Network::Testnet => "test",
        bitcoin::Network::Testnet4 => "testnet4",
        bitcoin::Network::Signet => "signet",
        _ => "regtest",
    }
}

/// `tweaks/{height}` (`cut_through`) and `tweak-index/{height}`.
fn tweaks(
    view: &ChainView,
    height: &str,
    query: Option<&str>,
    cut_through: bool,
) -> Response<Full<Bytes>> {
    let height = match parse_height(height) {
        Ok(height) => height,
        Err(response) => return response,
    };
    let dust = match dust_limit(query.unwrap_or("")) {
        Ok(dust) => dust,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let block = match view.block_tweaks(height) {
        Ok(Some(block)) => block,
        Ok(None) => return above_tip(height),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    let mut out = Vec::with_capacity(block.len());
    for tx in &block {
        match kept(view, tx, dust, cut_through) {
            Ok(true) => out.push(tx.tweak[..].to_lower_hex_string()),
            Ok(false) => {}
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
        }
    }
    reply(StatusCode::OK, json!(out))
}

/// The block height of a path (400 with BlindBit's message when it is not one).
fn parse_height(height: &str) -> Result<u32, Response<Full<Bytes>>> {
    height
        .parse::<u32>()
        .map_err(|_| error(StatusCode::BAD_REQUEST, "could not parse block height"))
}

/// The answer for a height above the view's tip.
fn above_tip(height: u32) -> Response<Full<Bytes>> {
    error(
        StatusCode::NOT_FOUND,
        format!("height {height} is above the tip"),
    )
}

/// Whether `tx` is served: its largest taproot output (of those unspent, with `cut_through`)
/// is worth `dust` or more.
fn kept(view: &ChainView, tx: &TxTweak, dust: u64, cut_through: bool) -> Result<bool, ViewError> {
    match cut_through {
        true => view.has_unspent_taproot(tx, dust),
        false => Ok(tx.outputs.iter().any(|(_, _, value)| *value >= dust)),
    }
}

/// The `dustLimit` (or `dust`) of a query, 0 when absent; other parameters are ignored, as
/// BlindBit ignores them.
fn dust_limit(query: &str) -> Result<u64, String> {
    let mut dust = 0;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "dustLimit" | "dust" => {
                dust = value
                    .parse()
                    .map_err(|_| "Invalid dustLimit parameter".to_string())?;
            }
            _ => {}
        }
    }
    Ok(dust)
}
