//! The Electrum methods cairn serves, in one table ([`METHODS`]: each name with the protocol
//! versions that have it and its parameters' parser), and a call parsed once from it into a
//! typed [`Request`]. The dispatcher (`Session::call`) matches on the request; the metrics'
//! labels ([`method_label`]) and the method table of `contrib/docs/electrum.md` (checked by a
//! test) come from the same table.

use bitcoin::{OutPoint, Txid};
use serde_json::Value;

use super::frigate_scan::{Start, MAX_LABELS};
use super::params::{
    add_peer_params, bool_param, labels_param, merkle_height_param, outpoint_params,
    package_params, ping_params, raw_tx_param, raw_txs_param, scripthash_param, scriptpubkey_param,
    sp_keys, txid_param, u32_param, version_params,
};
use super::rpc::{RpcError, METHOD_NOT_FOUND};
use crate::types::ScriptHash;

pub use super::params::SpKeys;
use crate::types::ProtocolVersion;

/// Protocol 1.4, the oldest served, and the rules of a session that has not sent
/// `server.version`.
const V1_4: ProtocolVersion = ProtocolVersion::new(1, 4, 0);
/// Protocol 1.6 (1.5 was never released).
const V1_6: ProtocolVersion = ProtocolVersion::new(1, 6, 0);
/// Protocol 1.7.
const V1_7: ProtocolVersion = ProtocolVersion::new(1, 7, 0);

/// Protocol versions served, oldest first.
pub(crate) const VERSIONS: [ProtocolVersion; 5] = [
    V1_4,
    ProtocolVersion::new(1, 4, 1),
    ProtocolVersion::new(1, 4, 2),
    V1_6,
    V1_7,
];
/// The oldest protocol version served.
pub const PROTOCOL_MIN: (u32, u32) = (1, 4);
/// The newest protocol version served.
pub const PROTOCOL_MAX: (u32, u32) = (1, 7);

/// One method call, its arguments read and checked. The `blockchain.scripthash.*` methods (1.4
/// to 1.6) and the `blockchain.scriptpubkey.*` ones (1.7) are the same requests: each names a
/// script by its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `blockchain.block.header(height, cp_height=0)`.
    BlockHeader {
        /// The header's height.
        height: u32,
        /// The checkpoint to prove it against; 0 for no proof.
        cp_height: u32,
    },
    /// `blockchain.block.headers(start_height, count, cp_height=0)`.
    BlockHeaders {
        /// The first header's height.
        start_height: u32,
        /// How many headers (at most `electrum_max_headers` are answered).
        count: u32,
        /// The checkpoint to prove the last one against; 0 for no proof.
        cp_height: u32,
    },
    /// `blockchain.block.tweaks(height)` (Cake Wallet's silent-payment dialect).
    BlockTweaks {
        /// The block's height.
        height: u32,
    },
    /// `blockchain.tweaks.subscribe(height, count, historical)` (Cake Wallet's silent-payment
    /// dialect): a stream of each height's tweaks.
    TweaksSubscribe {
        /// The first height.
        height: u32,
        /// How many heights.
        count: u32,
        /// Whether spent outputs are told too.
        historical: bool,
    },
    /// `blockchain.silentpayments.subscribe(scan_private_key, spend_public_key, start?,
    /// labels?)` (Frigate's remote scanner).
    SilentPaymentsSubscribe {
        /// The wallet's scan secret and spend public key.
        keys: SpKeys,
        /// A height, a time or a range of heights; the first height with tweaks when absent.
        start: Option<Start>,
        /// The labels (`m`) to scan for besides the address itself.
        labels: Vec<u32>,
    },
    /// `blockchain.silentpayments.unsubscribe(scan_private_key, spend_public_key)`.
    SilentPaymentsUnsubscribe {
        /// The keys subscribed.
        keys: SpKeys,
    },
    /// `blockchain.estimatefee(number)`.
    EstimateFee {
        /// Within how many blocks the transaction should confirm.
        number: u32,
    },
    /// `blockchain.headers.subscribe()`.
    HeadersSubscribe,
    /// `blockchain.outpoint.get_status(tx_hash, txout_idx, spk_hint=None)` (1.7).
    OutpointGetStatus(OutPoint),
    /// `blockchain.outpoint.subscribe(tx_hash, txout_idx, spk_hint=None)` (1.7).
    OutpointSubscribe(OutPoint),
    /// `blockchain.outpoint.unsubscribe(tx_hash, txout_idx)` (1.7).
    OutpointUnsubscribe(OutPoint),
    /// `blockchain.relayfee()` (before 1.6).
    RelayFee,
    /// `blockchain.scripthash.get_balance` / `blockchain.scriptpubkey.get_balance`.
    GetBalance(ScriptHash),
    /// `blockchain.scripthash.get_history` / `blockchain.scriptpubkey.get_history`.
    GetHistory(ScriptHash),
    /// `blockchain.scripthash.get_mempool` / `blockchain.scriptpubkey.get_mempool`.
    GetMempool(ScriptHash),
    /// `blockchain.scripthash.listunspent` / `blockchain.scriptpubkey.listunspent`.
    ListUnspent(ScriptHash),
    /// `blockchain.scripthash.subscribe` / `blockchain.scriptpubkey.subscribe`.
    Subscribe(ScriptHash),
    /// `blockchain.scripthash.unsubscribe` / `blockchain.scriptpubkey.unsubscribe`.
    Unsubscribe(ScriptHash),
    /// `blockchain.transaction.broadcast(raw_tx)`.
    Broadcast {
        /// The transaction's bytes.
        raw_tx: Vec<u8>,
    },
    /// `blockchain.transaction.broadcast_package(raw_txs, verbose=false)` (1.6); `verbose=true`
    /// is refused by the parser.
    BroadcastPackage {
        /// The transactions' bytes, a child last.
        raw_txs: Vec<Vec<u8>>,
    },
    /// `blockchain.transaction.testmempoolaccept(raw_txs)` (1.7, ElectrumX's): a dry run.
    TestMempoolAccept {
        /// The transactions' bytes, parents before children.
        raw_txs: Vec<Vec<u8>>,
    },
    /// `blockchain.transaction.get(tx_hash, verbose=false)`.
    TransactionGet {
        /// The transaction.
        txid: Txid,
        /// Whether to answer bitcoind's decoded form instead of the hex.
        verbose: bool,
    },
    /// `blockchain.transaction.get_merkle(tx_hash, height)`; the height is optional from 1.7.
    GetMerkle {
        /// The transaction.
        txid: Txid,
        /// The height the client expects it at, checked when given.
        height: Option<u64>,
    },
    /// `blockchain.transaction.get_merkle_witness(tx_hash, height=None, cb=false)` (1.7).
    GetMerkleWitness {
        /// The transaction.
        txid: Txid,
        /// The height the client expects it at, checked when given.
        height: Option<u64>,
        /// Whether to add the coinbase and its branch.
        cb: bool,
    },
    /// `blockchain.transaction.id_from_pos(height, tx_pos, merkle=false)`.
    IdFromPos {
        /// The block's height.
        height: u32,
        /// The transaction's position in the block.
        tx_pos: u32,
        /// Whether to add its merkle branch.
        merkle: bool,
    },
    /// `mempool.get_fee_histogram()`.
    FeeHistogram,
    /// `mempool.get_info()` (1.6).
    MempoolInfo,
    /// `mempool.recent()` (1.7, ElectrumX's): the last 10 transactions to enter.
    MempoolRecent,
    /// `server.add_peer(features)`: the features object is checked, not kept.
    AddPeer,
    /// `server.banner()`.
    Banner,
    /// `server.donation_address()`.
    DonationAddress,
    /// `server.features()`.
    Features,
    /// `server.peers.subscribe()`.
    PeersSubscribe,
    /// `server.ping()`; from 1.7 `server.ping(pong_len=0, data="")`.
    Ping {
        /// How many hex characters to answer (1.7); `None` before 1.7, answered `null`.
        pong_len: Option<u64>,
    },
    /// `server.version(client_name, protocol_version)`.
    ServerVersion {
        /// The oldest version the client accepts.
        min: ProtocolVersion,
        /// The newest version the client accepts.
        max: ProtocolVersion,
    },
}

/// A method's parameters' parser, for a session of the given protocol version.
type Parser = fn(&[Value], ProtocolVersion) -> Result<Request, RpcError>;

/// One method cairn serves: its name, the protocol versions that have it, and how its
/// parameters are read.
pub struct Method {
    /// The name clients call.
    pub name: &'static str,
    /// The first protocol version that has it.
    pub from: ProtocolVersion,
    /// The first protocol version that no longer has it; `None` while the newest has it.
    pub until: Option<ProtocolVersion>,
    parse: Parser,
}

impl Method {
    /// Whether a session of protocol `version` has this method.
    pub fn serves(&self, version: ProtocolVersion) -> bool {
        version >= self.from && self.until.is_none_or(|until| version < until)
    }
}

/// A table entry.
const fn method(
    name: &'static str,
    from: ProtocolVersion,
    until: Option<ProtocolVersion>,
    parse: Parser,
) -> Method {
    Method {
        name,
        from,
        until,
        parse,
    }
}

/// Every method cairn serves, in some protocol version, in the order of the protocol's list.
pub const METHODS: &[Method] = &[
    method("blockchain.block.header", V1_4, None, |p, _| {
        Ok(Request::BlockHeader {
            height: u32_param(p, 0, "height", None)?,
            cp_height: u32_param(p, 1, "cp_height", Some(0))?,
        })
    }),
    method("blockchain.block.headers", V1_4, None, |p, _| {
        Ok(Request::BlockHeaders {
            start_height: u32_param(p, 0, "start_height", None)?,
            count: u32_param(p, 1, "count", None)?,
            cp_height: u32_param(p, 2, "cp_height", Some(0))?,
        })
    }),
    method("blockchain.block.tweaks", V1_4, None, |p, _| {
        Ok(Request::BlockTweaks {
            height: u32_param(p, 0, "height", None)?,
        })
    }),
    method("blockchain.tweaks.subscribe", V1_4, None, |p, _| {
        Ok(Request::TweaksSubscribe {
            height: u32_param(p, 0, "height", None)?,
            count: u32_param(p, 1, "count", None)?,
            historical: bool_param(p, 2, "historical")?,
        })
    }),
    method("blockchain.silentpayments.subscribe", V1_4, None, |p, _| {
        Ok(Request::SilentPaymentsSubscribe {
            keys: sp_keys(p)?,
            start: Start::parse(p.get(2).unwrap_or(&Value::Null))?,
            labels: labels_param(p, 3, MAX_LABELS)?,
        })
    }),
    method(
        "blockchain.silentpayments.unsubscribe",
        V1_4,
        None,
        |p, _| Ok(Request::SilentPaymentsUnsubscribe { keys: sp_keys(p)? }),
    ),
    method("blockchain.estimatefee", V1_4, None, |p, _| {
        Ok(Request::EstimateFee {
            number: u32_param(p, 0, "number", None)?,
        })
    }),
    method("blockchain.headers.subscribe", V1_4, None, |_, _| {
        Ok(Request::HeadersSubscribe)
    }),
    method("blockchain.outpoint.get_status", V1_7, None, |p, _| {
        Ok(Request::OutpointGetStatus(outpoint_params(p, true)?))
    }),
    method("blockchain.outpoint.subscribe", V1_7, None, |p, _| {
        Ok(Request::OutpointSubscribe(outpoint_params(p, true)?))
    }),
    method("blockchain.outpoint.unsubscribe", V1_7, None, |p, _| {
        Ok(Request::OutpointUnsubscribe(outpoint_params(p, false)?))
    }),
    method("blockchain.relayfee", V1_4, Some(V1_6), |_, _| {
        Ok(Request::RelayFee)
    }),
    method(
        "blockchain.scripthash.get_balance",
        V1_4,
        Some(V1_7),
        |p, _| Ok(Request::GetBalance(scripthash_param(p, 0)?)),
    ),
    method(
        "blockchain.scripthash.get_history",
        V1_4,
        Some(V1_7),
        |p, _| Ok(Request::GetHistory(scripthash_param(p, 0)?)),
    ),
    method(
        "blockchain.scripthash.get_mempool",
        V1_4,
        Some(V1_7),
        |p, _| Ok(Request::GetMempool(scripthash_param(p, 0)?)),
    ),
    method(
        "blockchain.scripthash.listunspent",
        V1_4,
        Some(V1_7),
        |p, _| Ok(Request::ListUnspent(scripthash_param(p, 0)?)),
    ),
    method(
        "blockchain.scripthash.subscribe",
        V1_4,
        Some(V1_7),
        |p, _| Ok(Request::Subscribe(scripthash_param(p, 0)?)),
    ),
    method(
        "blockchain.scripthash.unsubscribe",
        V1_4,
        Some(V1_7),
        |p, _| Ok(Request::Unsubscribe(scripthash_param(p, 0)?)),
    ),
    method("blockchain.scriptpubkey.get_balance", V1_7, None, |p, _| {
        Ok(Request::GetBalance(scriptpubkey_param(p, 0)?))
    }),
    method("blockchain.scriptpubkey.get_history", V1_7, None, |p, _| {
        Ok(Request::GetHistory(scriptpubkey_param(p, 0)?))
    }),
    method("blockchain.scriptpubkey.get_mempool", V1_7, None, |p, _| {
        Ok(Request::GetMempool(scriptpubkey_param(p, 0)?))
    }),
    method("blockchain.scriptpubkey.listunspent", V1_7, None, |p, _| {
        Ok(Request::ListUnspent(scriptpubkey_param(p, 0)?))
    }),
    method("blockchain.scriptpubkey.subscribe", V1_7, None, |p, _| {
        Ok(Request::Subscribe(scriptpubkey_param(p, 0)?))
    }),
    method("blockchain.scriptpubkey.unsubscribe", V1_7, None, |p, _| {
        Ok(Request::Unsubscribe(scriptpubkey_param(p, 0)?))
    }),
    method("blockchain.transaction.broadcast", V1_4, None, |p, _| {
        Ok(Request::Broadcast {
            raw_tx: raw_tx_param(p, 0)?,
        })
    }),
    method(
        "blockchain.transaction.broadcast_package",
        V1_6,
        None,
        |p, _| {
            Ok(Request::BroadcastPackage {
                raw_txs: package_params(p)?,
            })
        },
    ),
    method(
        "blockchain.transaction.testmempoolaccept",
        V1_7,
        None,
        |p, _| {
            Ok(Request::TestMempoolAccept {
                raw_txs: raw_txs_param(p)?,
            })
        },
    ),
    method("blockchain.transaction.get", V1_4, None, |p, _| {
        Ok(Request::TransactionGet {
            txid: txid_param(p, 0)?,
            verbose: bool_param(p, 1, "verbose")?,
        })
    }),
    // 1.7 made the height optional.
    method("blockchain.transaction.get_merkle", V1_4, None, |p, v| {
        Ok(Request::GetMerkle {
            txid: txid_param(p, 0)?,
            height: merkle_height_param(p, v < V1_7)?,
        })
    }),
    method(
        "blockchain.transaction.get_merkle_witness",
        V1_7,
        None,
        |p, _| {
            let txid = txid_param(p, 0)?;
            let cb = bool_param(p, 2, "cb")?;
            let height = merkle_height_param(p, false)?;
            Ok(Request::GetMerkleWitness { txid, height, cb })
        },
    ),
    method("blockchain.transaction.id_from_pos", V1_4, None, |p, _| {
        Ok(Request::IdFromPos {
            height: u32_param(p, 0, "height", None)?,
            tx_pos: u32_param(p, 1, "tx_pos", None)?,
            merkle: bool_param(p, 2, "merkle")?,
        })
    }),
    method("mempool.get_fee_histogram", V1_4, None, |_, _| {
        Ok(Request::FeeHistogram)
    }),
    method("mempool.get_info", V1_6, None, |_, _| {
        Ok(Request::MempoolInfo)
    }),
    method("mempool.recent", V1_7, None, |_, _| {
        Ok(Request::MempoolRecent)
    }),
    method("server.add_peer", V1_4, None, |p, _| {
        add_peer_params(p).map(|()| Request::AddPeer)
    }),
    method("server.banner", V1_4, None, |_, _| Ok(Request::Banner)),
    method("server.donation_address", V1_4, None, |_, _| {
        Ok(Request::DonationAddress)
    }),
    method("server.features", V1_4, None, |_, _| Ok(Request::Features)),
    method("server.peers.subscribe", V1_4, None, |_, _| {
        Ok(Request::PeersSubscribe)
    }),
    // Before 1.7 a ping takes no parameters and answers `null`.
    method("server.ping", V1_4, None, |p, v| {
        let pong_len = match v >= V1_7 {
            true => Some(ping_params(p)?),
            false => None,
        };
        Ok(Request::Ping { pong_len })
    }),
    method("server.version", V1_4, None, |p, _| {
        let (min, max) = version_params(p)?;
        Ok(Request::ServerVersion { min, max })
    }),
];

impl Request {
    /// The call of method `name` with `params` in a session of protocol `version`: a method
    /// that version does not have is unknown (-32601), and a parameter of the wrong type or
    /// form is refused as the method's parser says (mostly -32602).
    pub fn parse(
        name: &str,
        params: &[Value],
        version: ProtocolVersion,
    ) -> Result<Request, RpcError> {
        let method = METHODS
            .iter()
            .find(|m| m.name == name && m.serves(version))
            .ok_or_else(|| RpcError::new(METHOD_NOT_FOUND, format!("unknown method {name:?}")))?;
        (method.parse)(params, version)
    }

    /// The bytes its answer takes, where they are known before it is built (so they are asked
    /// of the answer budget first): a pong's, a run of headers'; 0 where only the answer can
    /// tell (its bytes are asked once it is built).
    pub fn answer_bytes(&self, max_headers: u32) -> usize {
        // The envelope, `{"jsonrpc":"2.0","id":,"result":}`, the id aside.
        const ENVELOPE: usize = 64;
        match self {
            Request::Ping { pong_len: Some(n) } => usize::try_from(*n)
                .unwrap_or(usize::MAX)
                .saturating_add(ENVELOPE),
            // 163 characters a header (hex, quotes, comma), and a checkpoint proof of a few kB;
            // no more headers than are answered.
            Request::BlockHeaders { count, .. } => {
                let answered = (*count).min(max_headers) as usize;
                answered.saturating_mul(163).saturating_add(4096 + ENVELOPE)
            }
            _ => 0,
        }
    }

    /// Whether it may be tried on the connection's task ([`crate::types::try_inline`]): not
    /// what reads a transaction (from its block file, every time: a try would be thrown away),
    /// validates transactions (the kernel's CPU and locks), starts silent-payment scans,
    /// projects the mempool's next blocks (fee estimates and histogram: once per change, but
    /// the whole pool then) or proves a header against a checkpoint (its first proof after a
    /// start hashes every header up to it), nor an answer known to be over
    /// [`INLINE_ANSWER_BYTES`].
    pub fn may_answer_inline(&self, max_headers: u32) -> bool {
        let never = match self {
            Request::BlockHeader { cp_height, .. } | Request::BlockHeaders { cp_height, .. } => {
                *cp_height > 0
            }
            Request::Broadcast { .. }
            | Request::BroadcastPackage { .. }
            | Request::TestMempoolAccept { .. }
            | Request::SilentPaymentsSubscribe { .. }
            | Request::SilentPaymentsUnsubscribe { .. }
            | Request::TransactionGet { .. }
            | Request::EstimateFee { .. }
            | Request::FeeHistogram
            | Request::MempoolInfo => true,
            _ => false,
        };
        !never && self.answer_bytes(max_headers) <= INLINE_ANSWER_BYTES
    }
}

/// The largest answer known before it is built (a run of headers, a pong) that is built on
/// the connection's task: a longer one is built in the query pool.
pub const INLINE_ANSWER_BYTES: usize = 64 << 10;

/// The metrics label of a requested method: its name when cairn serves it (in some protocol
/// version), else `other` (a client never adds labels of its own).
pub(crate) fn method_label(name: &str) -> &'static str {
    METHODS
        .iter()
        .find(|m| m.name == name)
        .map_or("other", |m| m.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::electrum::params::MAX_PONG_LEN;
    use crate::electrum::rpc::{BAD_REQUEST, INVALID_PARAMS};
    use serde_json::json;

    #[test]
    fn method_labels_come_from_the_served_methods_only() {
        assert_eq!(
            method_label("blockchain.scripthash.get_history"),
            "blockchain.scripthash.get_history"
        );
        assert_eq!(method_label("server.version"), "server.version");
        assert_eq!(method_label("blockchain.scripthash.get_history\n"), "other");
        assert_eq!(method_label(&"x".repeat(10_000)), "other");
        let unique: std::collections::HashSet<_> = METHODS.iter().map(|m| m.name).collect();
        assert_eq!(unique.len(), METHODS.len());
    }

    #[test]
    fn every_method_is_served_in_some_version() {
        for m in METHODS {
            assert!(VERSIONS.iter().any(|v| m.serves(*v)), "{}", m.name);
        }
    }

    #[test]
    fn the_version_decides_which_methods_exist() {
        let sh = ScriptHash::of(bitcoin::Script::from_bytes(&[0x51]));
        let by_hash = json!([sh.to_electrum_hex()]);
        let by_script = json!(["51"]);
        let parse = |name: &str, params: &Value, v: ProtocolVersion| {
            Request::parse(name, params.as_array().unwrap(), v)
        };
        for v in [V1_4, ProtocolVersion::new(1, 4, 2), V1_6] {
            let history = parse("blockchain.scripthash.get_history", &by_hash, v);
            assert_eq!(history.unwrap(), Request::GetHistory(sh));
            let err = parse("blockchain.scriptpubkey.get_history", &by_script, v).unwrap_err();
            assert_eq!(err.code, METHOD_NOT_FOUND);
        }
        let history = parse("blockchain.scriptpubkey.get_history", &by_script, V1_7);
        assert_eq!(history.unwrap(), Request::GetHistory(sh));
        let err = parse("blockchain.scripthash.get_history", &by_hash, V1_7).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (
                METHOD_NOT_FOUND,
                "unknown method \"blockchain.scripthash.get_history\""
            )
        );
        assert!(parse(
            "blockchain.relayfee",
            &json!([]),
            ProtocolVersion::new(1, 4, 1)
        )
        .is_ok());
        assert!(parse("blockchain.relayfee", &json!([]), V1_6).is_err());
        assert!(parse(
            "mempool.get_info",
            &json!([]),
            ProtocolVersion::new(1, 4, 2)
        )
        .is_err());
        assert!(parse("no.such", &json!([]), V1_7).is_err());
    }

    #[test]
    fn parameters_are_read_as_each_version_has_them() {
        let p = |v: Value| v.as_array().unwrap().clone();
        let txid = "4a19a360f71814c566977114c49ccfeb8a7e4719eda26cee27fa504f3f02ca09";
        let merkle = |v| Request::parse("blockchain.transaction.get_merkle", &p(json!([txid])), v);
        let err = merkle(V1_6).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (INVALID_PARAMS, "missing parameter height")
        );
        assert!(matches!(
            merkle(V1_7),
            Ok(Request::GetMerkle { height: None, .. })
        ));
        let ping = |v| Request::parse("server.ping", &p(json!([5, "00"])), v);
        assert_eq!(ping(V1_6).unwrap(), Request::Ping { pong_len: None });
        assert_eq!(ping(V1_7).unwrap(), Request::Ping { pong_len: Some(5) });
        let long = Request::parse("server.ping", &p(json!([MAX_PONG_LEN + 1])), V1_7);
        assert_eq!(long.unwrap_err().code, BAD_REQUEST);
        let header = Request::parse("blockchain.block.header", &p(json!(["x"])), V1_4);
        let err = header.unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (
                INVALID_PARAMS,
                "height must be a non-negative integer, not \"x\""
            )
        );
        let version = Request::parse("server.version", &p(json!(["t", ["1.1", "1.4.2"]])), V1_4);
        assert_eq!(
            version.unwrap(),
            Request::ServerVersion {
                min: ProtocolVersion::new(1, 1, 0),
                max: ProtocolVersion::new(1, 4, 2)
            }
        );
    }
}
