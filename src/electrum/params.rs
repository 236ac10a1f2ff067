//! Reading a request's positional parameters, each checked for its type.

use bitcoin::hex::FromHex;
use bitcoin::{OutPoint, Txid};
use serde_json::Value;

use super::rpc::RpcError;
use crate::mempool::MAX_PACKAGE_COUNT;
use crate::types::{ProtocolVersion, ScriptHash};

/// Most hex characters a `server.ping` may ask back (protocol 1.7): the hex of the largest
/// transaction consensus allows (4,000,000 weight units, so at most 4,000,000 bytes), as the
/// spec asks pings to support.
pub(crate) const MAX_PONG_LEN: u64 = 2 * bitcoin::Weight::MAX_BLOCK.to_wu();

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

/// Parameter `i`, a raw transaction in hex, as its bytes.
pub fn raw_tx_param(params: &[Value], i: usize) -> Result<Vec<u8>, RpcError> {
    let text = str_param(params, i, "raw_tx")?;
    Vec::<u8>::from_hex(text).map_err(|_| RpcError::invalid_params("raw_tx is not hex"))
}

/// Parameters `tx_hash, txout_idx` (and the optional `spk_hint`, checked to be hex and not
/// needed: the index finds every output from its transaction).
pub fn outpoint_params(params: &[Value], hint: bool) -> Result<OutPoint, RpcError> {
    let txid = txid_param(params, 0)?;
    let vout = u32_param(params, 1, "txout_idx", None)?;
    if hint {
        match params.get(2) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if Vec::<u8>::from_hex(s).is_ok() => {}
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "spk_hint must be a hex script, not {other}"
                )))
            }
        }
    }
    Ok(OutPoint::new(txid, vout))
}

/// Parameter 1 of the merkle methods, the block height a client expects the transaction in:
/// any non-negative integer (checked against the transaction's height), `None` when absent or
/// null, which only a method whose height is optional accepts.
pub fn merkle_height_param(params: &[Value], required: bool) -> Result<Option<u64>, RpcError> {
    match params.get(1).filter(|v| !v.is_null()) {
        Some(asked) => asked
            .as_u64()
            .map(Some)
            .ok_or_else(|| RpcError::invalid_params("height must be an integer")),
        None if required => Err(RpcError::invalid_params("missing parameter height")),
        None => Ok(None),
    }
}

/// The parameters of `broadcast_package(raw_txs, verbose=false)`: the transactions' bytes, 1 to
/// [`MAX_PACKAGE_COUNT`] of them. `verbose=true` (bitcoind's own `submitpackage` answer) is
/// refused: cairn does not offer it.
pub fn package_params(params: &[Value]) -> Result<Vec<Vec<u8>>, RpcError> {
    if params.get(1).and_then(Value::as_bool) == Some(true) {
        return Err(RpcError::bad_request(
            "verbose package results are not offered by cairn; use verbose=false",
        ));
    }
    raw_txs_param(params)
}

/// Parameter 0 of the package methods, `raw_txs`: a list of 1 to [`MAX_PACKAGE_COUNT`] hex
/// transactions (bitcoind's bound on `submitpackage` and `testmempoolaccept`).
pub fn raw_txs_param(params: &[Value]) -> Result<Vec<Vec<u8>>, RpcError> {
    let list = params
        .first()
        .and_then(Value::as_array)
        .ok_or_else(|| RpcError::invalid_params("raw_txs must be a list of hex transactions"))?;
    if list.is_empty() || list.len() > MAX_PACKAGE_COUNT {
        return Err(RpcError::invalid_params(format!(
            "a package has 1 to {MAX_PACKAGE_COUNT} transactions"
        )));
    }
    list.iter()
        .map(|v| v.as_str().and_then(|t| Vec::<u8>::from_hex(t).ok()))
        .collect::<Option<Vec<Vec<u8>>>>()
        .ok_or_else(|| RpcError::invalid_params("every raw_txs entry must be a hex string"))
}

/// The parameters of `server.ping(pong_len=0, data="")` as 1.7 defines it: `pong_len`, at most
/// [`MAX_PONG_LEN`]; `data` is checked to be hex and ignored.
pub fn ping_params(params: &[Value]) -> Result<u64, RpcError> {
    let pong_len = match params.first() {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_u64().ok_or_else(|| {
            RpcError::invalid_params(format!("pong_len must be a non-negative integer, not {v}"))
        })?,
    };
    if pong_len > MAX_PONG_LEN {
        return Err(RpcError::bad_request(format!(
            "pong_len over {MAX_PONG_LEN}"
        )));
    }
    match params.get(1) {
        None | Some(Value::Null) => {}
        Some(Value::String(data)) if data.bytes().all(|b| b.is_ascii_hexdigit()) => {}
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "data must be a hex string, not {other}"
            )))
        }
    }
    Ok(pong_len)
}

/// The parameter of `server.add_peer(features)`: the object `server.features` returns (checked,
/// not kept: cairn adds no peers).
pub fn add_peer_params(params: &[Value]) -> Result<(), RpcError> {
    match params.first() {
        Some(Value::Object(_)) => Ok(()),
        _ => Err(RpcError::invalid_params(
            "server.add_peer takes the features object of server.features",
        )),
    }
}

/// The protocol versions `server.version(client_name, protocol_version)` accepts, as
/// (oldest, newest): a version, a `[min, max]` pair, or 1.4 when absent. The client's name is
/// not read.
pub fn version_params(params: &[Value]) -> Result<(ProtocolVersion, ProtocolVersion), RpcError> {
    match params.get(1) {
        None | Some(Value::Null) => {
            Ok((ProtocolVersion::new(1, 4, 0), ProtocolVersion::new(1, 4, 0)))
        }
        Some(Value::String(v)) => {
            let v = parse_version(v)
                .ok_or_else(|| RpcError::invalid_params(format!("bad protocol version {v:?}")))?;
            Ok((v, v))
        }
        Some(Value::Array(pair)) if pair.len() == 2 => {
            let get = |i: usize| {
                pair[i].as_str().and_then(parse_version).ok_or_else(|| {
                    RpcError::invalid_params(format!("bad protocol version {}", pair[i]))
                })
            };
            Ok((get(0)?, get(1)?))
        }
        Some(other) => Err(RpcError::invalid_params(format!(
            "bad protocol version {other}"
        ))),
    }
}

/// A protocol version as a client writes it: `1.4`, `1.4.2`.
pub(crate) fn parse_version(text: &str) -> Option<ProtocolVersion> {
    let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next().unwrap_or(Some(0))?;
    let patch = parts.next().unwrap_or(Some(0))?;
    if parts.next().is_some() {
        return None;
    }
    Some(ProtocolVersion::new(major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version("1.4"), Some(ProtocolVersion::new(1, 4, 0)));
        assert_eq!(parse_version("1.4.2"), Some(ProtocolVersion::new(1, 4, 2)));
        assert_eq!(parse_version("x"), None);
    }
}

/// A silent-payment wallet's keys as a remote scan is asked for with them: the scan secret and
/// the compressed spend public key, checked as keys when the scan is set up. Never printed
/// (not in `Debug`, not in an error), and overwritten when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct SpKeys {
    /// The scan private key.
    pub scan: [u8; 32],
    /// The spend public key, compressed.
    pub spend: [u8; 33],
}

impl std::fmt::Debug for SpKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpKeys { .. }")
    }
}

impl Drop for SpKeys {
    fn drop(&mut self) {
        // Volatile, so the compiler keeps a write nothing reads after.
        for byte in self.scan.iter_mut() {
            // SAFETY: `byte` is a valid, aligned, exclusive reference.
            unsafe { std::ptr::write_volatile(byte, 0) };
        }
    }
}

/// Parameter `i`, `N` bytes in hex named `name` (the text is not echoed: it may be a secret).
fn key_param<const N: usize>(params: &[Value], i: usize, name: &str) -> Result<[u8; N], RpcError> {
    let text = str_param(params, i, name)?;
    <[u8; N]>::from_hex(text)
        .map_err(|_| RpcError::invalid_params(format!("{name} must be {} hex characters", 2 * N)))
}

/// Parameters `scan_private_key, spend_public_key` (Frigate's).
pub fn sp_keys(params: &[Value]) -> Result<SpKeys, RpcError> {
    Ok(SpKeys {
        scan: key_param(params, 0, "scan_private_key")?,
        spend: key_param(params, 1, "spend_public_key")?,
    })
}

/// Parameter `i`, a list of at most `most` labels (`m`, from 1 to 2^31 - 1: change's 0 is
/// always scanned, and Frigate refuses it), sorted without repeats; empty when absent or null.
pub fn labels_param(params: &[Value], i: usize, most: usize) -> Result<Vec<u32>, RpcError> {
    let list = match params.get(i) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "labels must be a list of integers",
            ))
        }
    };
    if list.len() > most {
        return Err(RpcError::invalid_params(format!(
            "at most {most} labels per subscription"
        )));
    }
    let mut labels: Vec<u32> = list
        .iter()
        .map(|m| {
            m.as_u64()
                .filter(|m| (1..1 << 31).contains(m))
                .map(|m| m as u32)
        })
        .collect::<Option<_>>()
        .ok_or_else(|| RpcError::invalid_params("each label must satisfy 0 < label < 2^31"))?;
    labels.sort_unstable();
    labels.dedup();
    Ok(labels)
}
