//! Reading a request's positional parameters, each checked for its type.

use bitcoin::hex::FromHex;
use bitcoin::Txid;
use serde_json::Value;

use super::rpc::RpcError;
use crate::types::ScriptHash;

/// Parameter `i`, a string named `name`.
pub fn str_param<'a>(params: &'a [Value], i: usize, name: &str) -> Result<&'a str, RpcError> {
    match params.get(i) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(RpcError::invalid_params(format!(
            "{name} must be a string, not {other}"
        ))),
        None => Err(RpcError::invalid_params(format!(
            "missing parameter {name}"
        ))),
    }
}

/// Parameter `i`, a non-negative integer below 2^32; `default` when absent or null.
pub fn u32_param(
    params: &[Value],
    i: usize,
    name: &str,
    default: Option<u32>,
) -> Result<u32, RpcError> {
    match params.get(i) {
        None | Some(Value::Null) => {
            default.ok_or_else(|| RpcError::invalid_params(format!("missing parameter {name}")))
        }
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                RpcError::invalid_params(format!("{name} must be a non-negative integer, not {v}"))
            }),
    }
}

/// Parameter `i`, a boolean; false when absent or null.
pub fn bool_param(params: &[Value], i: usize, name: &str) -> Result<bool, RpcError> {
    match params.get(i) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(RpcError::invalid_params(format!(
            "{name} must be a boolean, not {other}"
        ))),
    }
}

/// Parameter `i`, a script hash in Electrum's hex form.
pub fn scripthash_param(params: &[Value], i: usize) -> Result<ScriptHash, RpcError> {
    let text = str_param(params, i, "scripthash")?;
    ScriptHash::from_electrum_hex(text).ok_or_else(|| {
        RpcError::invalid_params(format!("{text:?} is not a 32-byte hex script hash"))
    })
}

/// Parameter `i`, an output script in hex, as its script hash.
pub fn scriptpubkey_param(params: &[Value], i: usize) -> Result<ScriptHash, RpcError> {
    let text = str_param(params, i, "scriptpubkey")?;
    let bytes = Vec::<u8>::from_hex(text)
        .map_err(|_| RpcError::invalid_params(format!("{text:?} is not a hex script")))?;
    Ok(ScriptHash::of(bitcoin::Script::from_bytes(&bytes)))
}

/// Parameter `i`, a transaction hash.
pub fn txid_param(params: &[Value], i: usize) -> Result<Txid, RpcError> {
    let text = str_param(params, i, "tx_hash")?;
    text.parse()
        .map_err(|_| RpcError::invalid_params(format!("{text:?} is not a transaction hash")))
}
