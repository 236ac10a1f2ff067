//! The embedded validator: Bitcoin Core's consensus engine (`bitcoinkernel`) behind a small,
//! typed API. It validates blocks, reports the tip, reads blocks with their undo data, and turns
//! the kernel's notifications into [`KernelEvent`]s on a channel.

pub mod blockfiles;
mod events;
pub mod log;
mod reader;
mod reopen;
pub mod scripts;
pub mod sync_state;
mod undo;
mod work;

use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex, PoisonError};

use bitcoin::hashes::Hash;
use bitcoin::BlockHash;
use bitcoinkernel::prelude::*;
use bitcoinkernel::{
    Block as KernelBlock, ChainType, ChainstateManager, Context, ContextBuilder,
    ProcessBlockHeaderResult, ProcessBlockResult,
};

use crate::types::Network;
pub use events::KernelEvent;
use events::{to_hash, with_handlers, Shared};
pub use reader::ChainReader;
use reader::{entry_at, entry_of, read_entry_bytes, read_entry_undo};
pub use sync_state::SyncProgress;
pub use undo::{BlockUndo, SpentOutput};
pub use work::{header_work, HeaderEntry};

/// Errors from the validator.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The kernel could not be set up or opened.
    #[error("cannot open the kernel's chainstate in {dir}: {message}")]
    Open {
        /// The kernel's data folder.
        dir: PathBuf,
        /// The kernel's message.
        message: String,
    },
    /// The bytes are not a block.
    #[error("not a valid block serialization: {0}")]
    Malformed(String),
    /// The block's parent is unknown to the kernel, so it cannot be connected yet.
    #[error("block {hash} has unknown parent {prev}")]
    UnknownParent {
        /// The block.
        hash: BlockHash,
        /// Its parent.
        prev: BlockHash,
    },
    /// The kernel rejected the block as invalid.
    #[error("block {hash} at height {height} is invalid: {reason}")]
    Invalid {
        /// The block.
        hash: BlockHash,
        /// Its height (its parent's height plus one).
        height: i64,
        /// The kernel's reason (Core's validation state).
        reason: String,
    },
    /// Reading a block or its undo data failed (pruned, missing or damaged files).
    #[error("cannot read {what} of block at height {height}: {message}")]
    Read {
        /// Block or undo data.
        what: &'static str,
        /// The height asked for.
        height: i64,
        /// The kernel's message.
        message: String,
    },
    /// The kernel hit an unrecoverable error (disk full, corrupt database) and must be stopped.
    #[error("kernel fatal error: {0}")]
    Fatal(String),
}

/// A block's place in the active chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ChainTip {
    /// Height of the block (0 is genesis).
    pub height: i64,
    /// The block's hash.
    pub hash: BlockHash,
}

/// What the kernel did with a submitted valid block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// The block was new and is now part of the active chain.
    Connected,
    /// The block was new and valid as far as checked, but it is on a branch with less work.
    Stored,
    /// The kernel already had this block.
    Duplicate,
}

/// Where and how to open the validator.
#[derive(Debug, Clone)]
pub struct ValidatorConfig {
    /// The network.
    pub network: Network,
    /// A custom signet's challenge.
    pub signet_challenge: Option<Vec<u8>>,
    /// The kernel's data folder (chainstate and block index).
    pub kernel_dir: PathBuf,
    /// The kernel's block files folder.
    pub blocks_dir: PathBuf,
    /// Script-check worker threads (0..=15).
    pub script_threads: i32,
}

/// The embedded validator. Cheap to share behind an `Arc`; every method takes `&self` and may be
/// called from any thread. Block submissions are taken one at a time ([`Validator::submit_block`]).
pub struct Validator {
    // Field order matters: the chainstate manager must be dropped before its context.
    chainman: reopen::Reopenable,
    context: Context,
    /// How the manager is opened again after a snapshot closed it.
    config: ValidatorConfig,
    shared: Arc<Shared>,
    network: Network,
    on_disk_at_open: Option<ChainTip>,
    /// Set once the initial download is over ([`Validator::initial_download`]).
    caught_up: std::sync::atomic::AtomicBool,
    /// Chain work sums along the branch last asked about ([`Validator::header_entry`]).
    work_sums: work::WorkSums,
}

impl Validator {
    /// Opens (or creates) the kernel's chainstate and loads it; the receiver gets every event.
    pub fn open(config: &ValidatorConfig) -> Result<(Self, Receiver<KernelEvent>), KernelError> {
        log::install();
        let open_err = |message: String| KernelError::Open {
            dir: config.kernel_dir.clone(),
            message,
        };
        std::fs::create_dir_all(&config.blocks_dir).map_err(|e| open_err(e.to_string()))?;
        let (tx, rx) = channel();
        let shared = Arc::new(Shared {
            events: Mutex::new(Some(tx)),
            ..Shared::default()
        });
        let mut builder = ContextBuilder::new();
        builder = match (&config.signet_challenge, config.network) {
            (Some(challenge), _) => builder.signet(challenge),
            (None, Network::Mainnet) => builder.chain_type(ChainType::Mainnet),
            (None, Network::Testnet4) => builder.chain_type(ChainType::Testnet4),
            (None, Network::Signet) => builder.chain_type(ChainType::Signet),
            (None, Network::Regtest) => builder.chain_type(ChainType::Regtest),
        };
        let context = with_handlers(builder, &shared)
            .build()
            .map_err(|e| open_err(e.to_string()))?;
        let chainman = open_manager(&context, config).map_err(open_err)?;
        // What the kernel loaded from disk, before `import_blocks` connects anything more.
        let on_disk = {
            let chain = chainman.active_chain();
            usize::try_from(chain.height())
                .ok()
                .and_then(|h| chain.at_height(h))
                .map(|entry| ChainTip {
                    height: i64::from(entry.height()),
                    hash: to_hash(entry.block_hash().to_bytes()),
                })
        };
        chainman
            .import_blocks()
            .map_err(|e| open_err(e.to_string()))?;
        let validator = Validator {
            chainman: reopen::Reopenable::new(chainman),
            context,
            config: config.clone(),
            shared,
            network: config.network,
            on_disk_at_open: on_disk,
            caught_up: Default::default(),
            work_sums: Default::default(),
        };
        if let Some(message) = validator.fatal() {
            return Err(KernelError::Fatal(message));
        }
        Ok((validator, rx))
    }

    /// The tip the kernel loaded from its files when opened: a chain it certainly has on disk
    /// (whatever it validated after may be lost in a crash until it flushes again). `None` for a
    /// new data folder.
    pub fn on_disk_at_open(&self) -> Option<ChainTip> {
        self.on_disk_at_open
    }

    /// The network this validator checks.
    pub fn network(&self) -> Network {
        self.network
    }

    /// The kernel's fatal error, if one happened: after it nothing more may be validated.
    pub fn fatal(&self) -> Option<String> {
        self.shared
            .fatal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What tells the kernel's fatal error from elsewhere, also after the validator is gone
    /// (its last flush happens as it is dropped).
    pub fn fatal_flag(&self) -> FatalFlag {
        FatalFlag(self.shared.clone())
    }

    /// The tip of the active chain.
    pub fn tip(&self) -> ChainTip {
        // Height and entry are read under two separate kernel locks; if a reorg shortened the
        // chain in between, read again (the crate's `Chain::tip` would hand out a null entry).
        loop {
            let cm = self.chainman.get();
            let chain = cm.active_chain();
            let height = chain.height();
            if let Some(entry) = usize::try_from(height)
                .ok()
                .and_then(|h| chain.at_height(h))
            {
                return ChainTip {
                    height: i64::from(entry.height()),
                    hash: to_hash(entry.block_hash().to_bytes()),
                };
            }
            std::thread::yield_now();
        }
    }

    /// The hash of the active chain's block at `height`.
    pub fn hash_at(&self, height: i64) -> Option<BlockHash> {
        let h = usize::try_from(height).ok()?;
        let cm = self.chainman.get();
        let entry = cm.active_chain().at_height(h)?;
        Some(to_hash(entry.block_hash().to_bytes()))
    }

    /// The height of a block in the active chain, or `None` if it is not in it.
    pub fn active_height(&self, hash: &BlockHash) -> Option<i64> {
        let kernel_hash = bitcoinkernel::BlockHash::from(hash.to_byte_array());
        let cm = self.chainman.get();
        let entry = cm.get_block_tree_entry(&kernel_hash)?;
        let chain = cm.active_chain();
        chain.contains(&entry).then(|| i64::from(entry.height()))
    }

    /// The height of a known header (in any branch).
    pub fn header_height(&self, hash: &BlockHash) -> Option<i64> {
        let kernel_hash = bitcoinkernel::BlockHash::from(hash.to_byte_array());
        self.chainman
            .get()
            .get_block_tree_entry(&kernel_hash)
            .map(|e| i64::from(e.height()))
    }

    /// Whether the kernel knows this block's header (in any branch).
    pub fn knows(&self, hash: &BlockHash) -> bool {
        let kernel_hash = bitcoinkernel::BlockHash::from(hash.to_byte_array());
        self.chainman
            .get()
            .get_block_tree_entry(&kernel_hash)
            .is_some()
    }

    /// Validates one serialized block and, if it has the most work, connects it. Submissions
    /// from several threads wait for each other, so each gets its own block's rejection reason.
    pub fn submit_block(&self, raw: &[u8]) -> Result<Accepted, KernelError> {
        let _one_at_a_time = self
            .shared
            .submitting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(message) = self.fatal() {
            return Err(KernelError::Fatal(message));
        }
        let header: bitcoin::block::Header = bitcoin::consensus::deserialize_partial(raw)
            .map(|(h, _)| h)
            .map_err(|e| KernelError::Malformed(e.to_string()))?;
        let hash = header.block_hash();
        let block = KernelBlock::new(raw).map_err(|e| KernelError::Malformed(e.to_string()))?;
        let parent = bitcoinkernel::BlockHash::from(header.prev_blockhash.to_byte_array());
        let parent_height = self
            .chainman
            .get()
            .get_block_tree_entry(&parent)
            .map(|e| i64::from(e.height()));
        let height = parent_height.map(|h| h + 1).unwrap_or(-1);
        *self
            .shared
            .last_checked
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        log::clear();
        let result = self.chainman.get().process_block(&block);
        if let Some(message) = self.fatal() {
            return Err(KernelError::Fatal(message));
        }
        if parent_height.is_none() && result.is_rejected() {
            return Err(KernelError::UnknownParent {
                hash,
                prev: header.prev_blockhash,
            });
        }
        self.outcome(result, hash, height)
    }

    /// What `process_block` did with the block `hash` at `height`: an invalid block carries the
    /// kernel's reason (its log line, else its `block_checked` verdict).
    fn outcome(
        &self,
        result: ProcessBlockResult,
        hash: BlockHash,
        height: i64,
    ) -> Result<Accepted, KernelError> {
        let checked = self
            .shared
            .last_checked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let verdict = checked.filter(|c| c.hash == hash).and_then(|c| c.invalid);
        if verdict.is_some() || matches!(result, ProcessBlockResult::Rejected) {
            let reason = log::rejection_reason(&hash.to_string())
                .or(verdict)
                .unwrap_or_else(|| "rejected by the kernel".to_string());
            return Err(KernelError::Invalid {
                hash,
                height,
                reason,
            });
        }
        match result {
            ProcessBlockResult::Duplicate => Ok(Accepted::Duplicate),
            _ if self.active_height(&hash).is_some() => Ok(Accepted::Connected),
            _ => Ok(Accepted::Stored),
        }
    }

    /// Validates a header alone (headers-first sync) and adds it to the block tree.
    pub fn submit_header(&self, header: &bitcoin::block::Header) -> Result<(), KernelError> {
        let raw = bitcoin::consensus::serialize(header);
        let kernel_header = bitcoinkernel::BlockHeader::new(&raw)
            .map_err(|e| KernelError::Malformed(e.to_string()))?;
        let parent = bitcoinkernel::BlockHash::from(header.prev_blockhash.to_byte_array());
        let height = self
            .chainman
            .get()
            .get_block_tree_entry(&parent)
            .map(|e| i64::from(e.height()) + 1)
            .unwrap_or(-1);
        if height < 0 {
            return Err(KernelError::UnknownParent {
                hash: header.block_hash(),
                prev: header.prev_blockhash,
            });
        }
        let processed = self.chainman.get().process_block_header(&kernel_header);
        match processed {
            Ok(ProcessBlockHeaderResult::Valid) => Ok(()),
            Ok(ProcessBlockHeaderResult::Invalid(state)) => Err(KernelError::Invalid {
                hash: header.block_hash(),
                height,
                reason: format!("invalid header: {:?} {:?}", state.mode(), state.result()),
            }),
            Err(e) => Err(KernelError::Malformed(e.to_string())),
        }
    }

    /// The header with the most work the kernel knows (it may be ahead of the active tip).
    pub fn best_header(&self) -> ChainTip {
        let cm = self.chainman.get();
        match cm.best_entry() {
            Some(entry) => ChainTip {
                height: i64::from(entry.height()),
                hash: to_hash(entry.block_hash().to_bytes()),
            },
            None => self.tip(),
        }
    }

    /// A block locator from the best header: hashes going back exponentially to genesis.
    pub fn locator(&self) -> Vec<BlockHash> {
        let cm = self.chainman.get();
        let Some(best) = cm.best_entry() else {
            return vec![self.tip().hash];
        };
        work::locator_entries(&best)
    }

    /// Up to `max` blocks to download: the best header's ancestors above the active tip's fork
    /// point, lowest first, with their heights.
    pub fn blocks_to_download(&self, max: usize) -> Vec<(i64, BlockHash)> {
        let cm = self.chainman.get();
        let Some(best) = cm.best_entry() else {
            return Vec::new();
        };
        let chain = cm.active_chain();
        // The fork point: the highest ancestor of the best header in the active chain.
        let mut low = chain.height().min(best.height());
        while low > 0 {
            match best.ancestor(low) {
                Some(e) if chain.contains(&e) => break,
                _ => low -= 1,
            }
        }
        let mut out = Vec::new();
        let mut h = low + 1;
        while h <= best.height() && out.len() < max {
            if let Some(e) = best.ancestor(h) {
                out.push((i64::from(h), to_hash(e.block_hash().to_bytes())));
            }
            h += 1;
        }
        out
    }

    /// Serialized headers of the active chain after the first locator hash found in it (or
    /// after genesis), at most `max`, stopping at `stop`: the answer to a peer's getheaders.
    pub fn headers_after(
        &self,
        locator: &[BlockHash],
        stop: &BlockHash,
        max: usize,
    ) -> Vec<bitcoin::block::Header> {
        let start = locator
            .iter()
            .find_map(|h| self.active_height(h))
            .unwrap_or(0);
        let cm = self.chainman.get();
        let chain = cm.active_chain();
        let mut out = Vec::new();
        let mut h = start + 1;
        while out.len() < max {
            let Some(e) = usize::try_from(h).ok().and_then(|x| chain.at_height(x)) else {
                break;
            };
            let hash = to_hash(e.block_hash().to_bytes());
            let Some(header) = e
                .header()
                .consensus_encode()
                .ok()
                .and_then(|raw| bitcoin::consensus::deserialize(&raw).ok())
            else {
                break;
            };
            out.push(header);
            if hash == *stop {
                break;
            }
            h += 1;
        }
        out
    }

    /// Reads a serialized block by hash, in or out of the active chain (a reorg's old blocks).
    pub fn read_block_bytes_by_hash(&self, hash: &BlockHash) -> Result<Vec<u8>, KernelError> {
        let cm = self.chainman.get();
        read_entry_bytes(&cm, &entry_of(&cm, hash)?)
    }

    /// Reads a block's undo data by hash, in or out of the active chain.
    pub fn read_undo_by_hash(&self, hash: &BlockHash) -> Result<BlockUndo, KernelError> {
        let cm = self.chainman.get();
        read_entry_undo(&cm, &entry_of(&cm, hash)?)
    }

    /// Reads the serialized block at `height` of the active chain.
    pub fn read_block_bytes(&self, height: i64) -> Result<Vec<u8>, KernelError> {
        let cm = self.chainman.get();
        read_entry_bytes(&cm, &entry_at(&cm, height)?)
    }

    /// Reads the serialized block at `height` of the active chain together with its undo data,
    /// both of the same block even if the chain changes meanwhile.
    pub fn read_block_with_undo(&self, height: i64) -> Result<(Vec<u8>, BlockUndo), KernelError> {
        let cm = self.chainman.get();
        let entry = entry_at(&cm, height)?;
        Ok((
            read_entry_bytes(&cm, &entry)?,
            read_entry_undo(&cm, &entry)?,
        ))
    }

    /// A reader of the active chain's blocks up to `last`, all ancestors of the block now at
    /// `last` (one chain even if the kernel reorganizes meanwhile). It finds each block without
    /// the kernel's main lock, which a validating kernel holds nearly all the time: each read
    /// then takes it only for the file position of what it reads. The kernel is not closed (for
    /// a snapshot) while a reader lives.
    pub fn chain_reader(&self, last: i64) -> Result<ChainReader<'_>, KernelError> {
        let held = self.chainman.get();
        // SAFETY: the reader keeps `held` and drops it after `manager` and `last` (field order).
        let manager = unsafe { held.outliving() };
        Ok(ChainReader {
            last: entry_at(manager, last)?,
            manager,
            _held: held,
        })
    }

    /// Reads and decodes the block at `height` of the active chain.
    pub fn read_block(&self, height: i64) -> Result<bitcoin::Block, KernelError> {
        let bytes = self.read_block_bytes(height)?;
        bitcoin::consensus::deserialize(&bytes).map_err(|e| KernelError::Read {
            what: "block",
            height,
            message: e.to_string(),
        })
    }

    /// Reads the undo data of the block at `height`: the output spent by every input.
    pub fn read_undo(&self, height: i64) -> Result<BlockUndo, KernelError> {
        let cm = self.chainman.get();
        read_entry_undo(&cm, &entry_at(&cm, height)?)
    }

    /// Holds back block submissions until the returned pause is dropped: the chain stays where
    /// it is (headers are still taken).
    pub fn pause(&self) -> Paused<'_> {
        Paused {
            validator: self,
            _submissions: self
                .shared
                .submitting
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        }
    }
}

/// The kernel's fatal error, read from outside the validator ([`Validator::fatal_flag`]).
pub struct FatalFlag(Arc<Shared>);

impl FatalFlag {
    /// The kernel's fatal error, if it had one.
    pub fn get(&self) -> Option<String> {
        self.0
            .fatal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Block submissions held back ([`Validator::pause`]).
pub struct Paused<'a> {
    validator: &'a Validator,
    _submissions: std::sync::MutexGuard<'a, ()>,
}

impl Paused<'_> {
    /// Closes the kernel, which writes its chainstate, block index and block files to disk
    /// whole, runs `while_closed` on its files, and opens it again; every read of the kernel
    /// waits meanwhile. An error when this thread holds a read of the kernel itself.
    pub fn closed_for<T>(&self, while_closed: impl FnOnce() -> T) -> Result<T, KernelError> {
        let v = self.validator;
        v.chainman
            .closed_for(while_closed, || open_manager(&v.context, &v.config))
            .ok_or_else(|| {
                KernelError::Fatal("the kernel cannot be closed by a thread reading it".into())
            })
    }
}

/// Opens the chainstate manager on the configured folders.
fn open_manager(context: &Context, config: &ValidatorConfig) -> Result<ChainstateManager, String> {
    let kernel_dir = path_str(&config.kernel_dir)?;
    let blocks_dir = path_str(&config.blocks_dir)?;
    ChainstateManager::builder(context, kernel_dir, blocks_dir)
        .map_err(|e| e.to_string())?
        .worker_threads(config.script_threads)
        .build()
        .map_err(|e| format!("{e} (a damaged chainstate or another network's data?)"))
}

fn path_str(path: &std::path::Path) -> Result<&str, String> {
    path.to_str()
        .ok_or_else(|| format!("{} is not valid UTF-8", path.display()))
}
