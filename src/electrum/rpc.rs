//! JSON-RPC 2.0 as Electrum servers speak it: error codes and objects, and a method's result.

use serde_json::{json, Value};

/// A JSON-RPC error as Electrum servers send it.
#[derive(Debug, Clone)]
pub struct RpcError {
    /// The code: JSON-RPC's (-32xxx) or ElectrumX's application codes (1 bad request, 2 back end).
    pub code: i64,
    /// The message.
    pub message: String,
}

impl RpcError {
    /// An error with this code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }
    /// ElectrumX's "bad request" (code 1).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(BAD_REQUEST, message)
    }
    /// JSON-RPC's "invalid params".
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }
}

/// ElectrumX's code for a request the server will not satisfy.
pub const BAD_REQUEST: i64 = 1;
/// ElectrumX's code for a failure of the server's back end (daemon, index, mempool).
pub const BACKEND_ERROR: i64 = 2;
/// Protocol 1.7's code for a history over the server's limit (ElectrumX uses it since 1.7).
pub const HISTORY_TOO_LARGE: i64 = 10_001;
/// JSON-RPC: not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: unknown method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: wrong parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// aiorpcX's code for a session closed for its cost (`JSONRPC.EXCESSIVE_RESOURCE_USAGE`).
pub const EXCESSIVE_RESOURCE_USAGE: i64 = -101;

/// A method's result: a JSON value, or JSON text already written (for the large answers).
pub enum Reply {
    /// A value to serialize.
    Json(Value),
    /// Serialized JSON.
    Text(String),
    /// A script's history too long to build in memory: the session streams it.
    History(crate::types::ScriptHash),
    /// Silent-payment tweaks of a range of heights: the session streams them.
    Tweaks {
        /// The first height asked for.
        height: u32,
        /// How many heights.
        count: u32,
        /// Whether spent outputs are told too.
        historical: bool,
    },
}

/// One piece of a streamed answer; `true` with the last.
pub type Piece = (String, bool);

/// The error answer to the request with `id`, as a JSON value.
pub fn error_value(id: Value, e: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}})
}
