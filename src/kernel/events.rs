//! The kernel's notifications and validation callbacks, turned into typed [`KernelEvent`]s on a
//! channel, and the state they share with the validator.

use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};

use bitcoin::hashes::Hash;
use bitcoin::BlockHash;
use bitcoinkernel::prelude::*;
use bitcoinkernel::{
    Block as KernelBlock, BlockValidationStateRef, ContextBuilder, SynchronizationState,
    ValidationMode,
};

/// What the kernel reports while it works; the indexer and the servers consume these.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelEvent {
    /// A block was connected to the active chain.
    BlockConnected {
        /// The block.
        hash: BlockHash,
        /// Its height.
        height: i64,
    },
    /// A block was disconnected from the active chain (a reorg).
    BlockDisconnected {
        /// The block.
        hash: BlockHash,
        /// Its height.
        height: i64,
    },
    /// The tip moved.
    Tip {
        /// The new tip's hash.
        hash: BlockHash,
        /// Verification progress, 0.0 to 1.0.
        progress: f64,
        /// Whether the kernel still considers itself in initial block download.
        initial_download: bool,
    },
    /// A new best header.
    HeaderTip {
        /// Its height.
        height: i64,
        /// Its timestamp.
        timestamp: i64,
    },
    /// A block was found invalid.
    BlockInvalid {
        /// The block.
        hash: BlockHash,
        /// The kind of failure the kernel reports.
        result: String,
    },
    /// Progress of a long kernel task (loading, reindexing).
    Progress {
        /// The task.
        title: String,
        /// Percent done.
        percent: i32,
    },
    /// A warning was raised (e.g. unknown new rules activated) or cleared (`None`).
    Warning(Option<String>),
    /// Writing to disk failed.
    FlushError(String),
    /// The kernel hit an unrecoverable error.
    Fatal(String),
}

/// The outcome of the last `block_checked` notification, read right after `process_block`.
#[derive(Debug, Clone)]
pub(super) struct Checked {
    /// The block checked.
    pub hash: BlockHash,
    /// Why it is invalid, if it is.
    pub invalid: Option<String>,
}

/// What the kernel's callbacks and the validator share.
#[derive(Default)]
pub(super) struct Shared {
    /// Where events go, until nobody listens.
    pub events: Mutex<Option<Sender<KernelEvent>>>,
    /// The last `block_checked` outcome.
    pub last_checked: Mutex<Option<Checked>>,
    /// The kernel's fatal error, once it had one.
    pub fatal: Mutex<Option<String>>,
    /// Held through one block submission: a rejection's reason is read from the kernel's
    /// notification and log after `process_block` returns, which another submission at the
    /// same time would overwrite.
    pub submitting: Mutex<()>,
}

impl Shared {
    /// Sends an event to whoever listens.
    pub fn send(&self, event: KernelEvent) {
        let mut guard = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tx) = guard.as_ref() {
            if tx.send(event).is_err() {
                // Nobody listens any more; stop queueing.
                *guard = None;
            }
        }
    }
}

/// A kernel hash's bytes as a `bitcoin` block hash.
pub(super) fn to_hash(bytes: [u8; 32]) -> BlockHash {
    BlockHash::from_byte_array(bytes)
}

/// The kernel's notifications and validation callbacks, turned into [`KernelEvent`]s on
/// `shared`'s channel and into what [`super::Validator::submit_block`] reads back. The
/// notifications: tips, progress, warnings, flush and fatal errors.
pub(super) fn with_handlers(builder: ContextBuilder, shared: &Arc<Shared>) -> ContextBuilder {
    let s = shared.clone();
    let builder = builder.with_block_tip_notification(
        move |state, hash: bitcoinkernel::BlockHash, progress| {
            s.send(KernelEvent::Tip {
                hash: to_hash(hash.to_bytes()),
                progress,
                initial_download: !matches!(state, SynchronizationState::PostInit),
            });
        },
    );
    let s = shared.clone();
    let builder =
        builder.with_header_tip_notification(move |_state, height, timestamp, _presync| {
            s.send(KernelEvent::HeaderTip { height, timestamp });
        });
    let s = shared.clone();
    let builder = builder.with_progress_notification(move |title, percent, _resume| {
        tracing::debug!(target: "kernel", "{title}: {percent}%");
        s.send(KernelEvent::Progress { title, percent });
    });
    let s = shared.clone();
    let builder = builder.with_warning_set_notification(move |_warning, message| {
        tracing::warn!(target: "kernel", "warning: {message}");
        s.send(KernelEvent::Warning(Some(message)));
    });
    let s = shared.clone();
    let builder = builder.with_warning_unset_notification(move |_warning| {
        s.send(KernelEvent::Warning(None));
    });
    let s = shared.clone();
    let builder = builder.with_flush_error_notification(move |message| {
        tracing::error!(target: "kernel", "flush error: {message}");
        s.fatal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| format!("flush error: {message}"));
        s.send(KernelEvent::FlushError(message));
    });
    let s = shared.clone();
    let builder = builder.with_fatal_error_notification(move |message: String| {
        tracing::error!(target: "kernel", "fatal error: {message}");
        s.fatal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| message.clone());
        s.send(KernelEvent::Fatal(message));
    });
    validation_callbacks(builder, shared)
}

/// The validation callbacks: a block checked (its verdict, kept for
/// [`super::Validator::submit_block`]), connected or disconnected.
fn validation_callbacks(builder: ContextBuilder, shared: &Arc<Shared>) -> ContextBuilder {
    let s = shared.clone();
    let builder = builder.with_block_checked_validation(
        move |block: KernelBlock, state: BlockValidationStateRef<'_>| {
            let hash = to_hash(block.hash().to_bytes());
            let invalid = match state.mode() {
                ValidationMode::Valid => None,
                mode => Some(format!("{mode:?} {:?}", state.result())),
            };
            if let Some(result) = &invalid {
                s.send(KernelEvent::BlockInvalid {
                    hash,
                    result: result.clone(),
                });
            }
            *s.last_checked
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(Checked { hash, invalid });
        },
    );
    let s = shared.clone();
    let builder = builder.with_block_connected_validation(
        move |block: KernelBlock, entry: bitcoinkernel::BlockTreeEntry<'_>| {
            s.send(KernelEvent::BlockConnected {
                hash: to_hash(block.hash().to_bytes()),
                height: i64::from(entry.height()),
            });
        },
    );
    let s = shared.clone();
    builder.with_block_disconnected_validation(
        move |block: KernelBlock, entry: bitcoinkernel::BlockTreeEntry<'_>| {
            s.send(KernelEvent::BlockDisconnected {
                hash: to_hash(block.hash().to_bytes()),
                height: i64::from(entry.height()),
            });
        },
    )
}
