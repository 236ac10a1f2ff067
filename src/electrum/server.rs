//! The `server.*` namespace: the server's version, features, banner, peers and pings (the
//! requests, and the pings a 1.7 client gets as cover traffic).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::context::Ctx;
use super::request::{PROTOCOL_MAX, PROTOCOL_MIN, VERSIONS};
use super::rpc::RpcError;
use crate::config::SERVER_SOFTWARE;
use crate::types::ProtocolVersion;

/// `server.add_peer(features)`: a server introducing itself. cairn does no peer discovery (the
/// peers it lists are `electrum_peers`), so it answers `false`, as ElectrumX does with discovery
/// off; `features` must still be the object `server.features` returns (the parser checks it).
pub(crate) fn add_peer() -> Result<Value, RpcError> {
    Ok(json!(false))
}

/// `server.ping(pong_len=0, data="")` as 1.7 defines it: `data` (hex, ignored) and an answer
/// `{"data"}` of `pong_len` hex characters (at most `MAX_PONG_LEN`, the parser checks), as
/// JSON text written once.
pub(crate) fn pong_text(pong_len: u64) -> String {
    let n = pong_len as usize;
    // Room for the envelope the session puts around it, so that it is never copied.
    let mut text = String::with_capacity(n + 12 + 128);
    text.push_str("{\"data\":\"");
    text.extend(std::iter::repeat_n('0', n));
    text.push_str("\"}");
    text
}

/// A protocol version as `server.version` answers it: `1.4`, `1.4.2`.
pub(crate) fn version_text(v: ProtocolVersion) -> String {
    v.to_string()
}

impl Ctx<'_> {
    pub(crate) fn features(&self) -> Value {
        let genesis = self.view().block_hash(0).map(|h| h.to_string());
        let mut features = json!({
            "genesis_hash": genesis,
            "hosts": {},
            "protocol_min": version_text(VERSIONS[0]),
            "protocol_max": version_text(VERSIONS[VERSIONS.len() - 1]),
            "pruning": null,
            "server_version": SERVER_SOFTWARE,
        });
        if self.v17() {
            // Every optional feature of 1.7 is served and no optional argument is required, so
            // no method has a flavour to declare.
            features["method_flavours"] = json!({});
        } else {
            features["hash_function"] = json!("sha256");
        }
        if self.tweaks_ready().is_ok() {
            // Frigate's: the silent-payment protocol versions served (`blockchain.silentpayments.*`).
            features["silent_payments"] = json!([0]);
        }
        if let Some(sync) = self.backend.model.validator().initial_download() {
            // Not a key of the spec: clients ignore what they do not know.
            features["syncing"] = json!({"height": sync.height, "headers": sync.headers});
        }
        features
    }

    pub(crate) fn peers(&self) -> Value {
        Value::Array(
            self.backend
                .config
                .peers
                .iter()
                .map(|host| json!([host, host, ["v1.4", "t"]]))
                .collect(),
        )
    }

    /// `server.banner`: the operator's text (`electrum_banner`).
    pub(crate) fn banner(&self) -> Value {
        json!(self.backend.config.banner)
    }

    /// `server.donation_address`: the operator's (`electrum_donation_address`), or empty.
    pub(crate) fn donation_address(&self) -> Value {
        json!(self.backend.config.donation_address)
    }
}

/// `server.version`: the newest version served within what the client accepts.
pub(crate) fn negotiate(
    min: ProtocolVersion,
    max: ProtocolVersion,
) -> Result<ProtocolVersion, RpcError> {
    let chosen = VERSIONS
        .iter()
        .rev()
        .find(|v| **v >= min && **v <= max)
        .copied();
    chosen.ok_or_else(|| {
        RpcError::bad_request(format!(
            "unsupported protocol version: this server speaks {}.{} to {}.{}",
            PROTOCOL_MIN.0, PROTOCOL_MIN.1, PROTOCOL_MAX.0, PROTOCOL_MAX.1
        ))
    })
}

/// `server.version`'s answer once `chosen`: the software and the version agreed.
pub(crate) fn version_answer(chosen: ProtocolVersion) -> Value {
    json!([SERVER_SOFTWARE, version_text(chosen)])
}

/// The `server.ping` notifications a 1.7 client gets as cover traffic, as ElectrumX sends
/// them: after a block that brought it fewer than two notifications (`sent`), one (and another
/// each time a 1-in-10 draw says so); after mempool changes, one when none was sent for ten
/// minutes (`last_ping`, moved on when one is sent). Each carries 128 hex characters, about a
/// script notification's length.
pub(crate) fn pings(last_ping: &mut Instant, sent: usize, new_block: bool) -> Vec<String> {
    use rand::Rng;
    const QUIET: Duration = Duration::from_secs(600);
    let mut count = 0;
    if new_block {
        count += usize::from(sent < 2);
        let mut rng = rand::thread_rng();
        while count < 8 && rng.gen_bool(0.1) {
            count += 1;
        }
    } else if last_ping.elapsed() >= QUIET {
        count = 1;
    }
    if count > 0 {
        *last_ping = Instant::now();
    }
    let ping =
        json!({"jsonrpc": "2.0", "method": "server.ping", "params": ["0".repeat(128)]}).to_string();
    vec![ping; count]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_print() {
        assert_eq!(version_text(ProtocolVersion::new(1, 6, 0)), "1.6");
        assert_eq!(version_text(ProtocolVersion::new(1, 4, 2)), "1.4.2");
    }
}
