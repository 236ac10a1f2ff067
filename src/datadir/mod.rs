//! A network's data folder: who owns it, which network it holds, and the lock that keeps one
//! process writing it.

pub mod snapshot;
pub mod space;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::types::Network;
use serde::{Deserialize, Serialize};

/// The name of the identity file at the top of every network folder.
pub const IDENTITY_FILE: &str = "cairn.json";
/// The kernel's tip as its last clean exit left it ([`DataDir::kernel_tip_file`]).
pub const KERNEL_TIP_FILE: &str = "kernel-tip.json";
/// The data-folder layout version written into the identity file.
pub const LAYOUT_VERSION: u32 = 1;

/// Errors from opening a data folder.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// Reading or creating the folder failed.
    #[error("data dir {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The folder holds files but no cairn identity: another program's data.
    #[error("{path} is not empty and is not a cairn data dir (no {IDENTITY_FILE}); refusing to use it. Point --datadir at an empty or cairn folder")]
    Foreign {
        /// The folder.
        path: PathBuf,
    },
    /// The identity file is unreadable or garbled.
    #[error("{path} is damaged: {message}")]
    BadIdentity {
        /// The identity file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The folder holds another network's chain.
    #[error(
        "{path} holds a {found} chain, not {wanted}; pass --network {found} or another --datadir"
    )]
    WrongNetwork {
        /// The folder.
        path: PathBuf,
        /// The network in its identity file.
        found: String,
        /// The network asked for.
        wanted: String,
    },
    /// The folder was written by a newer cairn with another layout.
    #[error("{path} has data-dir layout {found}, this cairn knows only layout {LAYOUT_VERSION}; use a newer cairn")]
    NewerLayout {
        /// The folder.
        path: PathBuf,
        /// The layout it claims.
        found: u32,
    },
    /// The folder is a snapshot's copy without its manifest (an interrupted copy).
    #[error("{path} is a copy of a snapshot without its manifest ({}): the copy is incomplete; copy the whole snapshot again", snapshot::MANIFEST_FILE)]
    UncheckedSnapshot {
        /// The folder.
        path: PathBuf,
    },
    /// Another process holds the folder's lock.
    #[error("{path} is in use by another cairn process")]
    Locked {
        /// The folder.
        path: PathBuf,
    },
}

/// What the identity file records.
#[derive(Debug, Serialize, Deserialize)]
struct Identity {
    program: String,
    network: String,
    layout: u32,
    /// A snapshot's copy not yet checked against its manifest ([`snapshot`]): a node refuses
    /// it without the manifest (an interrupted copy), and clears it once checked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    snapshot: bool,
}

impl Identity {
    fn read(path: &Path) -> Result<Identity, DataDirError> {
        let text = fs::read_to_string(path).map_err(|source| DataDirError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| DataDirError::BadIdentity {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Writes it to `path` ([`write_private_file`]).
    fn write(&self, path: &Path) -> Result<(), DataDirError> {
        let text = serde_json::to_vec_pretty(self).map_err(|e| DataDirError::BadIdentity {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        write_private_file(path, &text)
    }
}

/// Writes the identity of a snapshot of `network_label` into `path`, marked not yet checked.
pub fn write_snapshot_identity(path: &Path, network_label: &str) -> Result<(), DataDirError> {
    Identity {
        program: "cairn".into(),
        network: network_label.to_string(),
        layout: LAYOUT_VERSION,
        snapshot: true,
    }
    .write(path)
}

/// Clears the not-yet-checked mark of the identity in `root` (a snapshot just checked).
pub fn clear_snapshot_mark(root: &Path) -> Result<(), DataDirError> {
    let path = root.join(IDENTITY_FILE);
    let mut id = Identity::read(&path)?;
    if id.snapshot {
        id.snapshot = false;
        id.write(&path)?;
    }
    Ok(())
}

/// A network's data folder, checked to be cairn's and of the right network.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
}

impl DataDir {
    /// Opens the folder, creating it (and its identity) when missing or empty.
    /// `network_label` names the chain, e.g. `regtest` or `signet-1a2b3c4d`.
    pub fn open(root: &Path, network: Network, network_label: &str) -> Result<Self, DataDirError> {
        let io = |source| DataDirError::Io {
            path: root.to_path_buf(),
            source,
        };
        fs::create_dir_all(root).map_err(io)?;
        let id_path = root.join(IDENTITY_FILE);
        if !id_path.exists() {
            create_identity(root, &id_path, network_label)?;
        }
        {
            let id = Identity::read(&id_path)?;
            if id.program != "cairn" {
                return Err(DataDirError::Foreign {
                    path: root.to_path_buf(),
                });
            }
            if id.network != network_label {
                return Err(DataDirError::WrongNetwork {
                    path: root.to_path_buf(),
                    found: id.network,
                    wanted: network_label.to_string(),
                });
            }
            if id.layout > LAYOUT_VERSION {
                return Err(DataDirError::NewerLayout {
                    path: root.to_path_buf(),
                    found: id.layout,
                });
            }
            if id.snapshot {
                return Err(DataDirError::UncheckedSnapshot {
                    path: root.to_path_buf(),
                });
            }
        }
        let _ = network;
        Ok(DataDir {
            root: root.to_path_buf(),
        })
    }

    /// The folder when it already holds a cairn data dir, opened writing nothing (as `cairn
    /// status` must, beside a `cairn run` starting on it): `None` when it is missing or empty,
    /// or holds only an identity being written (nothing has run there yet).
    pub fn existing(
        root: &Path,
        network: Network,
        network_label: &str,
    ) -> Result<Option<Self>, DataDirError> {
        if !root.join(IDENTITY_FILE).exists() {
            let entries = match fs::read_dir(root) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(source) => {
                    return Err(DataDirError::Io {
                        path: root.to_path_buf(),
                        source,
                    })
                }
            };
            let being_written = |name: &std::ffi::OsStr| {
                name.to_str()
                    .is_some_and(|n| n.starts_with(&format!("{IDENTITY_FILE}.tmp")))
            };
            let names: Vec<_> = entries
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .collect();
            if names.iter().all(|n| being_written(n)) {
                return Ok(None);
            }
            // Its identity may have come meanwhile; without one it is another program's.
            if !root.join(IDENTITY_FILE).exists() {
                return Err(DataDirError::Foreign {
                    path: root.to_path_buf(),
                });
            }
        }
        // With its identity in place, opening writes nothing.
        Self::open(root, network, network_label).map(Some)
    }

    /// The network folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the kernel keeps its chainstate and block index.
    pub fn kernel_dir(&self) -> PathBuf {
        self.root.join("kernel")
    }

    /// Where the kernel keeps its `blk*.dat` and `rev*.dat` files.
    pub fn blocks_dir(&self) -> PathBuf {
        self.root.join("kernel").join("blocks")
    }

    /// cairn's own index store (created by the indexer).
    pub fn index_dir(&self) -> PathBuf {
        self.root.join("index")
    }

    /// Where the mempool is saved on shutdown (Core's `mempool.dat` format).
    pub fn mempool_file(&self) -> PathBuf {
        self.root.join("mempool.dat")
    }

    /// The kernel's tip as its last clean exit wrote it to disk, for `cairn status` on a stopped
    /// node (removed when a node opens the folder: after a crash there is none).
    pub fn kernel_tip_file(&self) -> PathBuf {
        self.root.join(KERNEL_TIP_FILE)
    }

    /// Where a snapshot is staged while the kernel is closed (on the data folder's own file
    /// system, so its files can be linked); removed when done, or at the next start.
    pub fn snapshot_staging_dir(&self) -> PathBuf {
        self.root.join("snapshot.staging")
    }

    /// Where the P2P address book is saved, periodically and on shutdown.
    pub fn addrbook_file(&self) -> PathBuf {
        self.root.join("addrbook.dat")
    }

    /// The admin RPC cookie file, written by `cairn run` while it serves.
    pub fn cookie_file(&self) -> PathBuf {
        self.root.join(".cookie")
    }

    /// The file where a running cairn writes the address of its admin RPC.
    pub fn admin_addr_file(&self) -> PathBuf {
        self.root.join("admin.addr")
    }

    /// Takes the folder's exclusive lock; fails at once if another process holds it.
    pub fn lock(&self) -> Result<DataDirLock, DataDirError> {
        let path = self.root.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| DataDirError::Io {
                path: path.clone(),
                source,
            })?;
        match file.try_lock() {
            Ok(()) => Ok(DataDirLock { _file: file }),
            Err(fs::TryLockError::WouldBlock) => Err(DataDirError::Locked {
                path: self.root.clone(),
            }),
            Err(fs::TryLockError::Error(source)) => Err(DataDirError::Io { path, source }),
        }
    }

    /// Writes a file atomically (temp file, then rename) with owner-only permissions.
    pub fn write_private(&self, path: &Path, contents: &[u8]) -> Result<(), DataDirError> {
        write_private_file(path, contents)
    }
}

/// Writes a file atomically with owner-only permissions: a temporary file beside it, synced,
/// then renamed over it.
pub fn write_private_file(path: &Path, contents: &[u8]) -> Result<(), DataDirError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| DataDirError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(contents).map_err(io)?;
    f.sync_all().map_err(io)?;
    fs::rename(&tmp, path).map_err(io)
}

/// Writes the identity of a new data folder, unless another process (a `cairn run` and a
/// `cairn status` started together) wrote one first: the content goes to a file of this
/// process's own and is linked into place, which only one process can do; the others then read
/// the winner's. A folder holding anything but such temporary files is another program's.
fn create_identity(root: &Path, id_path: &Path, network_label: &str) -> Result<(), DataDirError> {
    let io = |source| DataDirError::Io {
        path: root.to_path_buf(),
        source,
    };
    let temporary = |name: &std::ffi::OsStr| {
        name.to_str()
            .is_some_and(|n| n == IDENTITY_FILE || n.starts_with(&format!("{IDENTITY_FILE}.tmp")))
    };
    let foreign = fs::read_dir(root)
        .map_err(io)?
        .filter_map(Result::ok)
        .any(|entry| !temporary(&entry.file_name()));
    if foreign {
        // The process that won put its identity in place before anything else.
        if id_path.exists() {
            return Ok(());
        }
        return Err(DataDirError::Foreign {
            path: root.to_path_buf(),
        });
    }
    let id = Identity {
        program: "cairn".into(),
        network: network_label.to_string(),
        layout: LAYOUT_VERSION,
        snapshot: false,
    };
    let text = serde_json::to_string_pretty(&id).map_err(|e| DataDirError::BadIdentity {
        path: id_path.to_path_buf(),
        message: e.to_string(),
    })?;
    static WRITTEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITTEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = root.join(format!("{IDENTITY_FILE}.tmp.{}.{n}", std::process::id()));
    fs::write(&tmp, text).map_err(io)?;
    let linked = fs::hard_link(&tmp, id_path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(()),
        // Another process's identity is in place: it is read and checked as any.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io(e)),
    }
}

/// The held lock of a data folder; released when dropped or when the process dies.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_foreign_and_other_network() {
        let tmp = tempfile::tempdir().unwrap();
        let foreign = tmp.path().join("foreign");
        fs::create_dir_all(&foreign).unwrap();
        fs::write(foreign.join("blk00000.dat"), b"x").unwrap();
        let err = DataDir::open(&foreign, Network::Regtest, "regtest").unwrap_err();
        assert!(matches!(err, DataDirError::Foreign { .. }), "{err}");

        let ours = tmp.path().join("ours");
        DataDir::open(&ours, Network::Regtest, "regtest").unwrap();
        DataDir::open(&ours, Network::Regtest, "regtest").unwrap();
        let err = DataDir::open(&ours, Network::Signet, "signet").unwrap_err();
        assert!(err.to_string().contains("holds a regtest chain"), "{err}");
    }

    #[test]
    fn openers_racing_on_a_new_folder_all_get_it() {
        for round in 0..20 {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("regtest");
            let opened: Vec<_> = (0..8)
                .map(|_| {
                    let root = root.clone();
                    std::thread::spawn(move || {
                        let dir = DataDir::open(&root, Network::Regtest, "regtest")?;
                        // As `cairn run` does next: files of its own beside the identity.
                        fs::create_dir_all(dir.kernel_dir()).map_err(|source| {
                            DataDirError::Io {
                                path: root.clone(),
                                source,
                            }
                        })?;
                        Ok::<_, DataDirError>(())
                    })
                })
                .collect();
            for opener in opened {
                let result = opener.join().unwrap();
                assert!(result.is_ok(), "round {round}: {result:?}");
            }
            let left: Vec<_> = fs::read_dir(&root)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert!(
                left.iter().all(|n| n == IDENTITY_FILE || n == "kernel"),
                "round {round}: {left:?}"
            );
        }
    }

    #[test]
    fn lock_is_exclusive() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(tmp.path(), Network::Regtest, "regtest").unwrap();
        let held = dir.lock().unwrap();
        assert!(matches!(dir.lock(), Err(DataDirError::Locked { .. })));
        drop(held);
        dir.lock().unwrap();
    }
}
