//! Bitcoin Core's kernel log lines, forwarded to `tracing` and kept briefly so that a rejected
//! block can be reported with the kernel's own reason.

use std::collections::VecDeque;
use std::sync::{Mutex, Once, PoisonError};

use bitcoinkernel::{Log, Logger};

/// How many recent kernel lines are kept for error reports.
const RECENT_LINES: usize = 64;

static RECENT: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
static INSTALL: Once = Once::new();

struct TracingLog;

impl Log for TracingLog {
    fn log(&self, message: &str) {
        let line = message.trim_end_matches(['\r', '\n']);
        if line.contains("ERROR") || line.contains("rror:") || line.contains("failed") {
            tracing::warn!(target: "kernel", "{line}");
        } else {
            tracing::debug!(target: "kernel", "{line}");
        }
        let mut recent = RECENT.lock().unwrap_or_else(PoisonError::into_inner);
        if recent.len() == RECENT_LINES {
            recent.pop_front();
        }
        recent.push_back(line.to_string());
    }
}

/// Routes the kernel's log into `tracing` (target `kernel`); idempotent.
pub fn install() {
    INSTALL.call_once(|| match Logger::new(TracingLog) {
        // The connection lives as long as the process: the kernel logs until it exits.
        Ok(logger) => std::mem::forget(logger),
        Err(e) => tracing::warn!("kernel logging unavailable: {e}"),
    });
}

/// The kernel's reason for rejecting `block_hash` (display hex), found in the lines logged since
/// the last [`clear`]: Core writes the validation state (e.g. `bad-txnmrklroot, hashMerkleRoot
/// mismatch`) into its error lines.
pub(crate) fn rejection_reason(block_hash: &str) -> Option<String> {
    let recent = RECENT.lock().unwrap_or_else(PoisonError::into_inner);
    // Core's lines that carry the validation state, most specific first.
    let patterns: [(&str, &str); 5] = [
        ("ConnectBlock", "failed, "),
        ("CheckBlock", "FAILED ("),
        ("AcceptBlock", "FAILED ("),
        ("CheckBlock:", "CheckBlock: "),
        ("InvalidBlockFound", "InvalidBlockFound: "),
    ];
    for (anchor, lead) in patterns {
        for line in recent.iter().rev() {
            if !line.contains(anchor) {
                continue;
            }
            if anchor == "ConnectBlock" && !line.contains(block_hash) {
                continue;
            }
            if let Some(pos) = line.find(lead) {
                let reason = line[pos + lead.len()..].trim_end_matches(')').trim();
                if !reason.is_empty() {
                    return Some(reason.to_string());
                }
            }
        }
    }
    None
}

/// Clears the recent-lines buffer (before a call whose lines will be searched).
pub(crate) fn clear() {
    let mut recent = RECENT.lock().unwrap_or_else(PoisonError::into_inner);
    recent.clear();
}
