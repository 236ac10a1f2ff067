//! The block-header methods: `blockchain.headers.subscribe` (the tip, and its notification when
//! it changes), `blockchain.block.header` and `blockchain.block.headers`, with checkpoint proofs
//! (`cp_height`).

use bitcoin::hex::DisplayHex;
use bitcoin::BlockHash;
use serde_json::{json, Value};

use super::context::Ctx;
use super::rpc::{RpcError, BACKEND_ERROR};
use crate::view::merkle::rpc_hex;
use crate::view::ChainView;

impl Ctx<'_> {
    fn tip_height(view: &ChainView<'_>) -> Result<u32, RpcError> {
        view.tip()
            .map(|(h, _)| h)
            .ok_or_else(|| RpcError::new(BACKEND_ERROR, "the index is empty"))
    }

    fn header_hex(view: &ChainView<'_>, height: u32) -> Option<String> {
        // The `hex` crate's loop: formatting through `bitcoin`'s hex goes a character at a time.
        view.header(height)
            .map(|h| hex::encode(bitcoin::consensus::serialize(&h)))
    }

    /// `headers.subscribe`'s answer, and the tip it names (the session's last notified).
    pub(crate) fn headers_subscribe(&self) -> Result<(Value, Option<(u32, BlockHash)>), RpcError> {
        let view = self.view();
        let height = Self::tip_height(&view)?;
        let hex = Self::header_hex(&view, height)
            .ok_or_else(|| RpcError::new(BACKEND_ERROR, "no tip header"))?;
        let tip = view.block_hash(height).map(|h| (height, h));
        Ok((json!({"height": height, "hex": hex}), tip))
    }

    /// The checkpoint proof of the header at `height` against all headers up to `cp_height`.
    fn header_proof(
        view: &ChainView<'_>,
        height: u32,
        cp_height: u32,
    ) -> Result<(Vec<String>, String), RpcError> {
        let tip = Self::tip_height(view)?;
        let (branch, root) = view.header_proof(height, cp_height).ok_or_else(|| {
            RpcError::bad_request(format!(
                "header height {height} must be <= cp_height {cp_height} <= tip height {tip}"
            ))
        })?;
        Ok((branch.iter().map(rpc_hex).collect(), rpc_hex(&root)))
    }

    pub(crate) fn block_header(&self, height: u32, cp_height: u32) -> Result<Value, RpcError> {
        let view = self.view();
        let hex = Self::header_hex(&view, height)
            .ok_or_else(|| RpcError::bad_request(format!("height {height} out of range")))?;
        if cp_height == 0 {
            return Ok(json!(hex));
        }
        let (branch, root) = Self::header_proof(&view, height, cp_height)?;
        Ok(json!({"branch": branch, "header": hex, "root": root}))
    }

    pub(crate) fn block_headers(
        &self,
        start: u32,
        count: u32,
        cp_height: u32,
    ) -> Result<Value, RpcError> {
        let max = self.backend.config.max_headers;
        let view = self.view();
        // The headers' bytes one after another, hex-encoded at once (1.4's one string) or 80
        // bytes at a time (1.6's list).
        let mut raw = Vec::with_capacity(80 * count.min(max) as usize);
        let mut found: u32 = 0;
        for header in (start..start.saturating_add(count.min(max))).map_while(|h| view.header(h)) {
            raw.extend_from_slice(&bitcoin::consensus::serialize(&header));
            found += 1;
        }
        let mut result = if self.v16() {
            let headers: Vec<String> = raw.chunks(80).map(hex::encode).collect();
            json!({"count": found, "headers": headers, "max": max})
        } else {
            json!({"count": found, "hex": hex::encode(&raw), "max": max})
        };
        if cp_height != 0 && found > 0 {
            let last = start + found - 1;
            let (branch, root) = Self::header_proof(&view, last, cp_height)?;
            result["branch"] = json!(branch);
            result["root"] = json!(root);
        }
        Ok(result)
    }
}

/// The notification of a new tip to a `headers.subscribe` subscriber.
pub(crate) fn header_note(height: u32, header: &bitcoin::block::Header) -> String {
    let hex = bitcoin::consensus::serialize(header).to_lower_hex_string();
    json!({"jsonrpc": "2.0", "method": "blockchain.headers.subscribe",
           "params": [{"height": height, "hex": hex}]})
    .to_string()
}
