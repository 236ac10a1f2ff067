//! Bitcoin Core's kernel log lines, forwarded to `tracing` and kept briefly so that a rejected
//! block can be reported with the kernel's own reason.
//!
//! The kernel calls the log callback on the thread that logs, and `process_block` logs a block's
//! rejection on the thread that submitted it, so the recent lines are kept per thread: two
//! validators in one process (tests, or a node beside `cairn generate --check`) never clear or
//! crowd out each other's reasons.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Once;

use bitcoinkernel::{Log, Logger};

/// How many recent kernel lines are kept for error reports.
const RECENT_LINES: usize = 64;

thread_local! {
    static RECENT: RefCell<VecDeque<String>> = const { RefCell::new(VecDeque::new()) };
}
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
        // `try_with`: a line logged while this thread's locals are torn down is not kept (a
        // panic here, inside the kernel's C callback, would abort the process).
        let _ = RECENT.try_with(|recent| {
            let mut recent = recent.borrow_mut();
            if recent.len() == RECENT_LINES {
                recent.pop_front();
            }
            recent.push_back(line.to_string());
        });
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
/// the last [`clear`] on this thread: Core writes the validation state (e.g. `bad-txnmrklroot, hashMerkleRoot
/// mismatch`) into its error lines.
pub(crate) fn rejection_reason(block_hash: &str) -> Option<String> {
    RECENT.with_borrow(|recent| reason_in(recent, block_hash))
}

/// The validation state in `recent`'s lines about `block_hash`, most specific line first.
fn reason_in(recent: &VecDeque<String>, block_hash: &str) -> Option<String> {
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

/// Clears this thread's recent lines (before a call whose lines will be searched).
pub(crate) fn clear() {
    RECENT.with_borrow_mut(VecDeque::clear);
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str =
        "ERROR: ProcessNewBlock: AcceptBlock FAILED (bad-txnmrklroot, hashMerkleRoot mismatch)";

    #[test]
    fn another_threads_submission_neither_clears_nor_crowds_out_this_threads_reason() {
        clear();
        TracingLog.log(LINE);
        std::thread::spawn(|| {
            clear();
            for i in 0..2 * RECENT_LINES {
                TracingLog.log(&format!("UpdateTip: new best={i}"));
            }
            assert_eq!(rejection_reason("00"), None);
        })
        .join()
        .expect("the other thread");
        assert_eq!(
            rejection_reason("00").as_deref(),
            Some("bad-txnmrklroot, hashMerkleRoot mismatch")
        );
        clear();
        assert_eq!(rejection_reason("00"), None);
    }
}
