//! `cairn snapshot DIR` on a running node: a copy of everything a new node starts from, taken
//! while the servers keep answering. Block submissions wait while the index reaches the
//! kernel's tip, the index is checkpointed, and the kernel is closed (it writes its chainstate
//! and block index whole), its files linked or copied, and opened again: the pause. The
//! manifest and the move into `DIR` come after, with blocks flowing again.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::watch;

use crate::datadir::snapshot::{self, Manifest, ManifestTip, SnapshotError, Staged};
use crate::datadir::{
    write_snapshot_identity, DataDir, IDENTITY_FILE, KERNEL_TIP_FILE, LAYOUT_VERSION,
};
use crate::index::Index;
use crate::kernel::{ChainTip, KernelError, Validator};
use crate::mempool::Mempool;
use crate::store::{StoreError, SCHEMA_VERSION};

/// How long the index may take to reach the kernel's tip once blocks are held back.
const CATCH_UP: Duration = Duration::from_secs(120);

/// Saves the address book to a given file.
pub type BookSaver = Box<dyn Fn(&Path) -> std::io::Result<usize> + Send + Sync>;

/// Errors of taking a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    /// Writing the snapshot's files failed.
    #[error(transparent)]
    Files(#[from] SnapshotError),
    /// Another snapshot is being taken.
    #[error("a snapshot is already being taken")]
    Busy,
    /// The index did not reach the kernel's tip in time.
    #[error("the index did not reach the kernel's tip ({kernel}) within {CATCH_UP:?}: it is at {index:?}")]
    Behind {
        /// The kernel's tip.
        kernel: i64,
        /// The index's.
        index: Option<u32>,
    },
    /// The kernel could not be closed.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The index could not be checkpointed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The mempool or address book could not be saved.
    #[error("saving {what}: {message}")]
    Save {
        /// What.
        what: &'static str,
        /// Why.
        message: String,
    },
}

/// What `cairn snapshot` reports.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotReport {
    /// The snapshot's network folder.
    pub path: PathBuf,
    /// Its network.
    pub network: String,
    /// The tip it is at.
    pub height: i64,
    /// That tip's hash.
    pub hash: String,
    /// Files in it.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// How its files came there.
    pub staged: Staged,
    /// How long block submissions waited, in milliseconds.
    pub pause_ms: u64,
    /// The whole snapshot, in seconds.
    pub seconds: f64,
}

/// A snapshot written: its tip, manifest, how its files came, and how long blocks waited.
struct Taken {
    tip: ChainTip,
    manifest: Manifest,
    staged: Staged,
    pause: Duration,
}

/// Takes snapshots of one running node, one at a time.
pub struct Snapshotter {
    network: String,
    datadir: DataDir,
    validator: Arc<Validator>,
    index: Arc<Index>,
    mempool: Option<Arc<Mempool>>,
    save_book: Option<BookSaver>,
    /// Raised when the node stops: a snapshot under way gives up.
    stopping: watch::Receiver<bool>,
    busy: Mutex<()>,
}

impl Snapshotter {
    /// A snapshotter of the node's parts; `save_book` saves its address book, if it has one;
    /// a snapshot under way gives up once `stopping` is raised.
    pub fn new(
        node: &super::Node,
        index: Arc<Index>,
        save_book: Option<BookSaver>,
        stopping: watch::Receiver<bool>,
    ) -> Self {
        Snapshotter {
            network: super::network_label(&node.settings),
            datadir: node.datadir.clone(),
            validator: node.validator.clone(),
            index,
            mempool: node.mempool.clone(),
            save_book,
            stopping,
            busy: Mutex::new(()),
        }
    }

    /// Writes a snapshot into `root/<network>`, which must not exist; an interrupted earlier
    /// one there (`<network>.partial`) is replaced.
    pub fn take(&self, root: &Path) -> Result<SnapshotReport, TakeError> {
        let _one = self.busy.try_lock().map_err(|_| TakeError::Busy)?;
        let started = Instant::now();
        let root = self.destination(root)?;
        let finished = root.join(&self.network);
        if finished.exists() {
            return Err(SnapshotError::Exists { path: finished }.into());
        }
        let partial = root.join(format!("{}{}", self.network, snapshot::PARTIAL_SUFFIX));
        replace_partial(&partial)?;
        // Claimed at once: from now until it is whole, a node started on `root` refuses.
        create_dir(&partial)?;
        let staging = self.datadir.snapshot_staging_dir();
        let taken = self.take_into(&staging, &partial, &finished);
        // Nothing is left behind of one that failed (a full disk): the space comes back.
        let _ = remove_dir(&staging);
        if taken.is_err() {
            let _ = remove_dir(&partial);
        }
        let Taken {
            tip,
            manifest,
            staged,
            pause,
        } = taken?;
        Ok(SnapshotReport {
            path: finished,
            network: self.network.clone(),
            height: tip.height,
            hash: tip.hash.to_string(),
            files: manifest.files.len(),
            bytes: manifest.files.iter().map(|f| f.size).sum(),
            staged,
            pause_ms: pause.as_millis() as u64,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// `root`, created if missing, as an absolute path outside the node's own folder (where a
    /// later snapshot would stage this one's files with the kernel's).
    fn destination(&self, root: &Path) -> Result<PathBuf, SnapshotError> {
        create_dir(root)?;
        let root = at(root, root.canonicalize())?;
        let ours = self.datadir.root();
        let ours = at(ours, ours.canonicalize())?;
        if root.starts_with(&ours) {
            return Err(SnapshotError::InsideDataDir { path: root });
        }
        Ok(root)
    }

    /// Stages everything in `staging`, moves it to `partial`, writes the manifest and renames
    /// it `finished`.
    fn take_into(
        &self,
        staging: &Path,
        partial: &Path,
        finished: &Path,
    ) -> Result<Taken, TakeError> {
        remove_dir(staging)?;
        create_dir(staging)?;
        let mark = staging.join(snapshot::PARTIAL_MARK);
        at(&mark, std::fs::write(&mark, b""))?;
        let (tip, mut staged, pause) = self.stage_paused(staging)?;
        let cancelled = || *self.stopping.borrow();
        let kernel = self.datadir.kernel_dir();
        staged.add(snapshot::stage_undo(
            &kernel,
            &staging.join("kernel"),
            &cancelled,
        )?);
        tracing::info!(
            "snapshot at height {}: block submissions waited {} ms",
            tip.height,
            pause.as_millis()
        );
        if let Some(save) = &self.save_book {
            let path = staging.join("addrbook.dat");
            save(&path).map_err(|e| TakeError::Save {
                what: "the address book",
                message: e.to_string(),
            })?;
        }
        let moved = snapshot::place(staging, partial, &cancelled)?;
        let mark = partial.join(snapshot::PARTIAL_MARK);
        at(&mark, std::fs::remove_file(&mark))?;
        let files = snapshot::list_files(partial, &cancelled)?;
        // Not listed: checking the snapshot clears its mark. Until then a copy of the folder
        // without its manifest (an interrupted copy) is refused.
        write_snapshot_identity(&partial.join(IDENTITY_FILE), &self.network).map_err(|e| {
            TakeError::Save {
                what: "the identity",
                message: e.to_string(),
            }
        })?;
        let manifest = self.manifest(tip, files);
        snapshot::complete(partial, finished, &manifest)?;
        // Where DIR is on another file system, everything was copied there.
        let staged = if moved.copied > 0 { moved } else { staged };
        Ok(Taken {
            tip,
            manifest,
            staged,
            pause,
        })
    }

    /// With block submissions held back: the index at the kernel's tip checkpointed, the
    /// mempool saved, the kernel closed and its files staged. The tip, how the files came,
    /// and how long submissions waited.
    fn stage_paused(&self, staging: &Path) -> Result<(ChainTip, Staged, Duration), TakeError> {
        let _span = tracing::info_span!("snapshot_pause").entered();
        let paused = self.validator.pause();
        let held_from = Instant::now();
        let tip = self.validator.tip();
        self.wait_for_index(tip)?;
        let checkpoint = staging.join("index");
        self.index.store().checkpoint(&checkpoint)?;
        let mut staged = snapshot::count_staged(&checkpoint)?;
        if let Some(mempool) = &self.mempool {
            mempool
                .save(&staging.join("mempool.dat"))
                .map_err(|e| TakeError::Save {
                    what: "the mempool",
                    message: e.to_string(),
                })?;
        }
        let kernel = self.datadir.kernel_dir();
        staged.add(
            paused.closed_for(|| snapshot::stage_kernel(&kernel, &staging.join("kernel")))??,
        );
        // The close wrote the kernel's state: unless that failed, it is at `tip`. Checked while
        // submissions still wait: once they resume, a waiting block moves the tip on (a block a
        // few milliseconds after the pause failed the snapshot here).
        if let Some(message) = self.validator.fatal() {
            return Err(KernelError::Fatal(message).into());
        }
        if self.validator.tip() != tip {
            return Err(KernelError::Fatal(
                "the kernel opened again at another tip than it closed at".into(),
            )
            .into());
        }
        drop(paused);
        // The kernel's files are at `tip`: as after a clean exit, `cairn status` can tell.
        super::record_kernel_tip(&staging.join(KERNEL_TIP_FILE), tip);
        Ok((tip, staged, held_from.elapsed()))
    }

    /// Waits until the index is at `tip` (no more blocks come while submissions wait).
    fn wait_for_index(&self, tip: ChainTip) -> Result<(), TakeError> {
        let deadline = Instant::now() + CATCH_UP;
        loop {
            if *self.stopping.borrow() {
                return Err(SnapshotError::Cancelled.into());
            }
            let at = self.index.tip();
            if at.is_some_and(|(height, hash)| i64::from(height) == tip.height && hash == tip.hash)
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(TakeError::Behind {
                    kernel: tip.height,
                    index: at.map(|(h, _)| h),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn manifest(&self, tip: ChainTip, files: Vec<snapshot::ManifestFile>) -> Manifest {
        Manifest {
            program: "cairn".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            network: self.network.clone(),
            tip: ManifestTip {
                height: tip.height,
                hash: tip.hash.to_string(),
            },
            schema: SCHEMA_VERSION,
            layout: LAYOUT_VERSION,
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            files,
        }
    }
}

/// Names `path` in an I/O error.
fn at<T>(path: &Path, result: std::io::Result<T>) -> Result<T, SnapshotError> {
    result.map_err(|source| SnapshotError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn create_dir(dir: &Path) -> Result<(), SnapshotError> {
    at(dir, std::fs::create_dir_all(dir))
}

fn remove_dir(dir: &Path) -> Result<(), SnapshotError> {
    at(dir, super::remove_if_present(dir))
}

/// Makes way for a new partial folder: an earlier one is removed only if cairn left it (it
/// holds the mark, or nothing).
fn replace_partial(partial: &Path) -> Result<(), SnapshotError> {
    let empty = std::fs::read_dir(partial).map(|mut d| d.next().is_none());
    match empty {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Ok(true) => remove_dir(partial),
        _ if partial.join(snapshot::PARTIAL_MARK).exists() => remove_dir(partial),
        _ => Err(SnapshotError::Exists {
            path: partial.to_path_buf(),
        }),
    }
}
