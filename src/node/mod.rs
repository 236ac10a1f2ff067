//! One opened cairn node: its settings, its locked data folder, its validator, index and
//! mempool; the indexer thread that keeps them in step ([`runner`]) and the servers wired to
//! them ([`services`]).

pub mod durability;
mod gauges;
pub mod runner;
pub mod services;
pub mod snapshot;

use std::sync::mpsc::Receiver;
use std::sync::Arc;

use crate::admin::{Status, SyncStatus, TipStatus};
use crate::config::Settings;
use crate::datadir::snapshot::{check_before_start, SnapshotError, MANIFEST_FILE};
use crate::datadir::space::SpaceWatch;
use crate::datadir::{DataDir, DataDirError, DataDirLock};
use crate::index::{silent_payments, Index, IndexError, IndexOptions};
use crate::kernel::blockfiles::KernelBlockFiles;
use crate::kernel::{KernelError, KernelEvent, Validator, ValidatorConfig};
use crate::mempool::Mempool;
use crate::store::{Store, StoreError, SCHEMA_VERSION};

/// Errors from opening a node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The data folder is unusable.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// The kernel failed to open.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The index store failed to open.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The index is damaged.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A snapshot in the data folder cannot be started from.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

/// An open node: the data folder is locked for as long as it lives.
pub struct Node {
    /// The settings it was opened with.
    pub settings: Settings,
    /// Its data folder.
    pub datadir: DataDir,
    /// The embedded validator.
    pub validator: Arc<Validator>,
    /// The validator's events, for whoever consumes them.
    pub events: Option<Receiver<KernelEvent>>,
    /// The index, unless the node was opened without one.
    pub index: Option<Arc<Index>>,
    /// The mempool (it needs the index to find the outputs transactions spend).
    pub mempool: Option<Arc<Mempool>>,
    /// Free space under the data folder: no more blocks are taken while it is low.
    pub space: SpaceWatch,
    // Dropped after the fields above, before the lock: records the kernel's tip once flushed.
    recorder: TipRecorder,
    _lock: DataDirLock,
}

/// Writes the kernel's tip into the data folder ([`DataDir::kernel_tip_file`]) when the last
/// hold on the validator ends with it here: the kernel then writes that tip to disk, and a
/// stopped node's `cairn status` reads it from there without opening anything.
struct TipRecorder {
    file: std::path::PathBuf,
    validator: Option<Arc<Validator>>,
}

impl TipRecorder {
    /// Drops the validator (the kernel flushes) and records its tip, waiting until `deadline`
    /// for other holds on it to end; without a deadline, only if there are none.
    fn finish(&mut self, deadline: Option<std::time::Instant>) {
        let Some(mut held) = self.validator.take() else {
            return;
        };
        loop {
            match Arc::try_unwrap(held) {
                Ok(validator) => {
                    let (tip, fatal) = (validator.tip(), validator.fatal_flag());
                    // The kernel's last flush: its failure is a fatal error too.
                    drop(validator);
                    if fatal.get().is_none() {
                        record_kernel_tip(&self.file, tip);
                    }
                    return;
                }
                Err(back) if deadline.is_some_and(|d| std::time::Instant::now() < d) => {
                    held = back;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(_) => {
                    if deadline.is_some() {
                        tracing::error!("the validator is still in use after a minute; exiting without the kernel's final flush");
                    }
                    return;
                }
            }
        }
    }
}

impl Drop for TipRecorder {
    fn drop(&mut self) {
        self.finish(None);
    }
}

/// Writes `tip` as the kernel's on-disk tip into `file` (best effort: without it a stopped
/// node's status says its tip is not known).
fn record_kernel_tip(file: &std::path::Path, tip: crate::kernel::ChainTip) {
    let text = serde_json::to_vec(&TipStatus::from(tip)).unwrap_or_default();
    if let Err(e) = crate::datadir::write_private_file(file, &text) {
        tracing::warn!("the kernel's tip not recorded: {e}");
    }
}

/// What a stopped node's data folder tells without opening it: the kernel's tip its last clean
/// exit recorded (`None` after a crash, or before anything ran to the end) and the index's tip.
pub fn stopped_tips(
    datadir: &DataDir,
) -> Result<(Option<TipStatus>, Option<TipStatus>), StoreError> {
    let kernel = std::fs::read(datadir.kernel_tip_file())
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let index = Store::read_tip(&datadir.index_dir())?.map(|t| TipStatus {
        height: i64::from(t.height),
        hash: t.hash.to_string(),
    });
    Ok((kernel, index))
}

/// The label that names a network's chain (and its data subfolder).
pub fn network_label(settings: &Settings) -> String {
    settings
        .network_dir()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| settings.network.name().to_string())
}

/// Opens the data folder without locking it (for read-only checks such as `status`).
pub fn open_datadir(settings: &Settings) -> Result<DataDir, DataDirError> {
    DataDir::open(
        &settings.network_dir(),
        settings.network,
        &network_label(settings),
    )
}

/// The network's data folder if something has run there, opened writing nothing
/// ([`DataDir::existing`]).
pub fn existing_datadir(settings: &Settings) -> Result<Option<DataDir>, DataDirError> {
    DataDir::existing(
        &settings.network_dir(),
        settings.network,
        &network_label(settings),
    )
}

impl Node {
    /// Locks the data folder and opens the validator and, with `with_index`, the index.
    pub fn open(settings: Settings, with_index: bool) -> Result<Node, NodeError> {
        check_snapshot(&settings)?;
        let datadir = open_datadir(&settings)?;
        let lock = datadir.lock()?;
        let staging = datadir.snapshot_staging_dir();
        remove_if_present(&staging).map_err(|source| DataDirError::Io {
            path: staging,
            source,
        })?;
        // Until this run exits cleanly, what the kernel has on disk is not known without it.
        let recorded = datadir.kernel_tip_file();
        let removed = match std::fs::remove_file(&recorded) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            // Gone for good before anything else is written: a power cut brings nothing back.
            other => other.and_then(|()| std::fs::File::open(datadir.root())?.sync_all()),
        };
        removed.map_err(|source| DataDirError::Io {
            path: recorded,
            source,
        })?;
        let config = ValidatorConfig {
            network: settings.network,
            signet_challenge: settings.signet_challenge.clone(),
            kernel_dir: datadir.kernel_dir(),
            blocks_dir: datadir.blocks_dir(),
            script_threads: settings.kernel_script_threads,
        };
        let (validator, events) = Validator::open(&config)?;
        let validator = Arc::new(validator);
        let index = match with_index {
            true => Some(open_index(&datadir, &settings, &validator)?),
            false => None,
        };
        let mempool = index
            .as_ref()
            .map(|_| Arc::new(Mempool::new(settings.mempool)));
        let space = SpaceWatch::new(
            vec![datadir.root().to_path_buf(), datadir.blocks_dir()],
            settings.min_free_space,
        );
        Ok(Node {
            recorder: TipRecorder {
                file: datadir.kernel_tip_file(),
                validator: Some(validator.clone()),
            },
            settings,
            datadir,
            validator,
            events: Some(events),
            index,
            mempool,
            space,
            _lock: lock,
        })
    }

    /// Throws the index away and opens an empty one in its place, with a fresh mempool, for
    /// `cairn reindex` (which then rebuilds it from the kernel's blocks and undo data; the kernel
    /// is untouched). The old index is first renamed, in one step, then deleted: a crash at any
    /// point leaves either the old index or none, and no index means a full rebuild at the next
    /// start.
    pub fn fresh_index(&mut self) -> Result<Arc<Index>, NodeError> {
        self.mempool = None;
        self.index = None;
        let dir = self.datadir.index_dir();
        let discarded = dir.with_file_name("index.discarded");
        let io = |path: &std::path::Path| {
            let path = path.to_path_buf();
            move |source| DataDirError::Io { path, source }
        };
        remove_if_present(&discarded).map_err(io(&discarded))?;
        match std::fs::rename(&dir, &discarded) {
            Ok(()) => remove_if_present(&discarded).map_err(io(&discarded))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&dir)(e).into()),
        }
        let index = open_index(&self.datadir, &self.settings, &self.validator)?;
        self.index = Some(index.clone());
        self.mempool = Some(Arc::new(Mempool::new(self.settings.mempool)));
        Ok(index)
    }

    /// Closes the node cleanly: waits (up to a minute) until nothing else holds the validator,
    /// then drops it, which makes the kernel flush its chainstate and block index. Without this a
    /// thread still holding the validator at exit would skip the flush and the kernel would
    /// forget the blocks it validated since its last periodic flush.
    pub fn close(self) {
        let Node {
            validator,
            index,
            mempool,
            mut recorder,
            ..
        } = self;
        drop(mempool);
        drop(index);
        drop(validator);
        recorder.finish(Some(
            std::time::Instant::now() + std::time::Duration::from_secs(60),
        ));
    }

    /// The node's status, read directly.
    pub fn status(&self) -> Status {
        self.status_source().read()
    }

    /// What reads the node's status later, from elsewhere (the admin RPC).
    pub fn status_source(&self) -> StatusSource {
        StatusSource {
            network: network_label(&self.settings),
            datadir: self.datadir.root().display().to_string(),
            validator: self.validator.clone(),
            index: self.index.clone(),
        }
    }
}

/// Before the data folder is opened: a snapshot there not yet started from is checked (and an
/// interrupted one, or one of another network, refused).
fn check_snapshot(settings: &Settings) -> Result<(), SnapshotError> {
    let label = network_label(settings);
    let dir = settings.network_dir();
    if dir.join(MANIFEST_FILE).exists() {
        tracing::info!(
            "checking the snapshot in {} before starting from it",
            dir.display()
        );
    }
    let layout = crate::datadir::LAYOUT_VERSION;
    if let Some(manifest) = check_before_start(&dir, &label, SCHEMA_VERSION, layout)? {
        tracing::info!(
            "starting from the snapshot at height {} ({}): {} files checked",
            manifest.tip.height,
            manifest.tip.hash,
            manifest.files.len()
        );
    }
    Ok(())
}

/// Opens (or creates) the data folder's index store with the configured cache and filters;
/// what the block files cannot give it reads through `validator`.
fn open_index(
    datadir: &DataDir,
    settings: &Settings,
    validator: &Arc<Validator>,
) -> Result<Arc<Index>, NodeError> {
    let store = Arc::new(Store::open_with_cache(
        &datadir.index_dir(),
        settings.index_cache_bytes,
    )?);
    let files = KernelBlockFiles::new(&datadir.blocks_dir(), settings.magic());
    let options = IndexOptions {
        filters: settings.block_filters,
        tweaks_from: settings
            .silent_payments
            .then(|| silent_payments::first_height(settings.network)),
    };
    let index = Index::open_with_options(store, Some(files), options)?;
    index.read_through(validator);
    Ok(Arc::new(index))
}

/// Deletes a folder and what it holds; nothing there is not an error.
fn remove_if_present(dir: &std::path::Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Reads a node's tips for `cairn status`, holding what the node lends it.
pub struct StatusSource {
    network: String,
    datadir: String,
    validator: Arc<Validator>,
    index: Option<Arc<Index>>,
}

impl StatusSource {
    /// The status now, as a node that is not serving reports it (`running` false, no P2P).
    pub fn read(&self) -> Status {
        Status {
            network: self.network.clone(),
            kernel_tip: self.validator.tip().into(),
            index_tip: index_tip(self.index.as_deref()),
            datadir: self.datadir.clone(),
            running: false,
            p2p: None,
            syncing: self.validator.initial_download().map(|s| SyncStatus {
                height: s.height,
                headers: s.headers,
            }),
            kernel_error: self.validator.fatal(),
            disk: None,
        }
    }
}

/// The index tip as `status` shows it.
pub fn index_tip(index: Option<&Index>) -> Option<TipStatus> {
    index.and_then(|i| i.tip()).map(|(height, hash)| TipStatus {
        height: i64::from(height),
        hash: hash.to_string(),
    })
}
