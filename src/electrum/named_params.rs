//! Parameters by name: JSON-RPC 2.0 lets a request give its parameters as an object, and
//! ElectrumX (aiorpcx calls the handler with them as keyword arguments) and Frigate take them.
//! Each method's names are ElectrumX's handler arguments (Frigate's and Cake's for the
//! silent-payment methods); an object is read into the positional list the method's parser
//! takes, so both forms are checked by the same code.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::rpc::RpcError;

/// The names of `method`'s parameters, in their positional order; `None` for a method cairn
/// does not serve.
pub fn param_names(method: &str) -> Option<&'static [&'static str]> {
    const SCRIPTHASH: &[&str] = &["scripthash"];
    const SCRIPTPUBKEY: &[&str] = &["scriptpubkey"];
    const NONE: &[&str] = &[];
    Some(match method {
        "blockchain.block.header" => &["height", "cp_height"],
        "blockchain.block.headers" => &["start_height", "count", "cp_height"],
        "blockchain.block.tweaks" => &["height"],
        "blockchain.tweaks.subscribe" => &["height", "count", "historical"],
        "blockchain.silentpayments.subscribe" => {
            &["scan_private_key", "spend_public_key", "start", "labels"]
        }
        "blockchain.silentpayments.unsubscribe" => &["scan_private_key", "spend_public_key"],
        "blockchain.estimatefee" => &["number", "mode"],
        "blockchain.outpoint.get_status" | "blockchain.outpoint.subscribe" => {
            &["tx_hash", "txout_idx", "spk_hint"]
        }
        "blockchain.outpoint.unsubscribe" => &["tx_hash", "txout_idx"],
        "blockchain.scripthash.get_balance"
        | "blockchain.scripthash.get_history"
        | "blockchain.scripthash.get_mempool"
        | "blockchain.scripthash.listunspent"
        | "blockchain.scripthash.subscribe"
        | "blockchain.scripthash.unsubscribe" => SCRIPTHASH,
        "blockchain.scriptpubkey.get_balance"
        | "blockchain.scriptpubkey.get_history"
        | "blockchain.scriptpubkey.get_mempool"
        | "blockchain.scriptpubkey.listunspent"
        | "blockchain.scriptpubkey.subscribe"
        | "blockchain.scriptpubkey.unsubscribe" => SCRIPTPUBKEY,
        "blockchain.transaction.broadcast" => &["raw_tx"],
        "blockchain.transaction.broadcast_package" => &["raw_txs", "verbose"],
        "blockchain.transaction.testmempoolaccept" => &["raw_txs"],
        "blockchain.transaction.get" => &["tx_hash", "verbose"],
        "blockchain.transaction.get_merkle" => &["tx_hash", "height"],
        "blockchain.transaction.get_merkle_witness" => &["tx_hash", "height", "cb"],
        "blockchain.transaction.id_from_pos" => &["height", "tx_pos", "merkle"],
        "server.add_peer" => &["features"],
        "server.ping" => &["pong_len", "data"],
        "server.version" => &["client_name", "protocol_version"],
        "blockchain.headers.subscribe"
        | "blockchain.relayfee"
        | "mempool.get_fee_histogram"
        | "mempool.get_info"
        | "mempool.recent"
        | "server.banner"
        | "server.donation_address"
        | "server.features"
        | "server.peers.subscribe" => NONE,
        _ => return None,
    })
}

/// A request's `params` as the positional list `method` takes: a list as it is, none for
/// absent or `null`, an object by name ([`positional`]); anything else is refused.
pub fn params_of<'a>(
    method: &str,
    params: Option<&'a Value>,
) -> Result<Cow<'a, [Value]>, RpcError> {
    match params {
        None | Some(Value::Null) => Ok(Cow::Borrowed(&[])),
        Some(Value::Array(list)) => Ok(Cow::Borrowed(list)),
        Some(Value::Object(named)) => positional(method, named).map(Cow::Owned),
        Some(_) => Err(RpcError::invalid_params(
            "params must be an array or an object",
        )),
    }
}

/// `named` as the positional list `method` takes: each name's value at its place, `null` where
/// one is not given, trailing ones left out. A name the method does not take is refused (and
/// only its first 40 characters are echoed). A method cairn does not serve gets an empty list,
/// so it is refused as unknown.
pub fn positional(method: &str, named: &Map<String, Value>) -> Result<Vec<Value>, RpcError> {
    let Some(names) = param_names(method) else {
        return Ok(Vec::new());
    };
    if let Some(unknown) = named.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(RpcError::invalid_params(format!(
            "{method} takes no parameter named {unknown:.40}"
        )));
    }
    let mut list: Vec<Value> = names
        .iter()
        .map(|name| named.get(*name).cloned().unwrap_or(Value::Null))
        .collect();
    while list.last().is_some_and(Value::is_null) {
        list.pop();
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::electrum::request::{Request, METHODS, VERSIONS};
    use serde_json::json;

    #[test]
    fn every_served_method_has_its_names() {
        for m in METHODS {
            assert!(param_names(m.name).is_some(), "{}", m.name);
        }
        assert_eq!(param_names("blockchain.nope"), None);
    }

    #[test]
    fn by_name_reads_as_by_position() {
        let v = *VERSIONS.last().unwrap();
        let cases = [
            (
                "blockchain.block.headers",
                json!({"count": 2, "start_height": 5}),
                json!([5, 2]),
            ),
            (
                "blockchain.transaction.get",
                json!({"tx_hash": "00".repeat(32), "verbose": true}),
                json!(["00".repeat(32), true]),
            ),
            (
                "blockchain.transaction.id_from_pos",
                json!({"height": 3, "tx_pos": 1, "merkle": null}),
                json!([3, 1]),
            ),
            (
                "server.version",
                json!({"protocol_version": "1.4"}),
                json!([null, "1.4"]),
            ),
        ];
        for (method, named, list) in cases {
            let by_name = positional(method, named.as_object().unwrap()).unwrap();
            assert_eq!(by_name, *list.as_array().unwrap(), "{method}");
            assert_eq!(
                Request::parse(method, &by_name, v).unwrap(),
                Request::parse(method, list.as_array().unwrap(), v).unwrap(),
                "{method}"
            );
        }
    }

    #[test]
    fn unknown_names_are_refused_and_cut() {
        let named = json!({"height": 1, "x".repeat(1000): 2});
        let err = positional("blockchain.block.header", named.as_object().unwrap()).unwrap_err();
        assert!(err.message.ends_with(&"x".repeat(40)), "{}", err.message);
        assert!(err.message.len() < 120, "{}", err.message);
        let named = json!({"anything": 1});
        let list = positional("no.such.method", named.as_object().unwrap()).unwrap();
        assert!(list.is_empty());
    }
}
