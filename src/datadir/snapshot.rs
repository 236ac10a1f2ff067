//! A data folder's snapshot on disk: the files a new node starts from, a manifest listing them
//! with their sizes and SHA-256 hashes, and the check a node makes before it starts from one.
//!
//! A snapshot of network `label` into `DIR` is built in `DIR/label.partial` and renamed to
//! `DIR/label` only once its manifest is written and everything is on disk: an interrupted one
//! (killed, or a full disk) is never a folder a node would start from, and a node started on
//! `DIR` refuses while the partial one is there.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// The manifest of a snapshot not yet started from, at the top of its network folder.
pub const MANIFEST_FILE: &str = "snapshot.json";
/// The manifest once a node checked the snapshot and started from it (kept for the record).
pub const VERIFIED_FILE: &str = "snapshot.verified.json";
/// What a snapshot's folder is called while it is built.
pub const PARTIAL_SUFFIX: &str = ".partial";
/// The file that says a partial folder is cairn's (only such a one is replaced).
pub const PARTIAL_MARK: &str = "cairn-snapshot-partial";

/// Errors of taking or checking a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Reading or writing a file failed.
    #[error("snapshot {path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The destination holds this network's data already.
    #[error("{path} exists; a snapshot is written only where none is")]
    Exists {
        /// The folder.
        path: PathBuf,
    },
    /// An interrupted snapshot is in the data folder.
    #[error("{path} is a snapshot that was interrupted before it was complete; remove it and take another")]
    Incomplete {
        /// The partial folder.
        path: PathBuf,
    },
    /// The snapshot is of another network.
    #[error("{path} holds a snapshot of {found}, not {wanted}; pass --network {found} or another --datadir")]
    OtherNetwork {
        /// The snapshot's folder.
        path: PathBuf,
        /// Its network.
        found: String,
        /// The network asked for.
        wanted: String,
    },
    /// The snapshot's index is newer than this cairn knows.
    #[error("{path} is a snapshot with index schema {found}; this cairn knows schema {ours} at most: use a newer cairn")]
    NewerSchema {
        /// The snapshot's folder.
        path: PathBuf,
        /// Its schema version.
        found: u32,
        /// This cairn's.
        ours: u32,
    },
    /// The snapshot's data-folder layout is newer than this cairn knows.
    #[error("{path} is a snapshot with data-dir layout {found}; this cairn knows layout {ours}: use a newer cairn")]
    NewerLayout {
        /// The snapshot's folder.
        path: PathBuf,
        /// Its layout.
        found: u32,
        /// This cairn's.
        ours: u32,
    },
    /// The manifest is unreadable.
    #[error("{path}: not a cairn snapshot manifest: {message}")]
    BadManifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The node is stopping.
    #[error("the snapshot was given up: the node is stopping")]
    Cancelled,
    /// The destination is inside the node's own data folder.
    #[error("{path} is inside the node's data folder; write the snapshot elsewhere")]
    InsideDataDir {
        /// The destination.
        path: PathBuf,
    },
    /// A file differs from what the manifest lists.
    #[error("snapshot {path} is damaged: {file} {message}; copy it again")]
    Damaged {
        /// The snapshot's folder.
        path: PathBuf,
        /// The file, relative to it.
        file: String,
        /// How it differs.
        message: String,
    },
}

/// What a snapshot records about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always `cairn`.
    pub program: String,
    /// The cairn version that took it.
    pub version: String,
    /// The network label (`regtest`, `signet`, `signet-1a2b3c4d`, ...).
    pub network: String,
    /// The block both the kernel's chainstate and the index are at.
    pub tip: ManifestTip,
    /// The index's schema version.
    pub schema: u32,
    /// The data folder's layout version.
    pub layout: u32,
    /// When it was taken, in seconds since 1970.
    pub created: u64,
    /// Every file, relative to the network folder, with `/` between folders.
    pub files: Vec<ManifestFile>,
}

/// The tip a snapshot is at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestTip {
    /// Its height.
    pub height: i64,
    /// Its hash.
    pub hash: String,
}

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Its path below the network folder.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256, hex.
    pub sha256: String,
}

/// How the files of a staged snapshot came there.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Staged {
    /// Files hard-linked (written once and never again by their owner).
    pub linked: u64,
    /// Files copied (the owner may still write them).
    pub copied: u64,
    /// Bytes copied.
    pub copied_bytes: u64,
}

impl Staged {
    /// Counts `other`'s files too.
    pub fn add(&mut self, other: Staged) {
        self.linked += other.linked;
        self.copied += other.copied;
        self.copied_bytes += other.copied_bytes;
    }
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> SnapshotError + '_ {
    move |source| SnapshotError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Stages the kernel's folder `from` into `to` (on the same file system), while the kernel is
/// closed: files their owner never writes again are hard-linked, the others copied. Never
/// written again: LevelDB's table files (`*.ldb`) and every block file but the newest (blocks
/// are appended to the newest only). Undo files are left for [`stage_undo`]; lock files out.
pub fn stage_kernel(from: &Path, to: &Path) -> Result<Staged, SnapshotError> {
    let newest_blk = newest_numbered(&from.join("blocks"), "blk")?;
    let immutable = |name: &str| {
        name.ends_with(".ldb")
            || numbered(name, "blk").is_some_and(|n| newest_blk.is_some_and(|newest| n < newest))
    };
    let wanted = |name: &str| numbered(name, "rev").is_none() && name != "LOCK" && name != ".lock";
    stage_tree(from, to, &wanted, &immutable, &|| false)
}

/// Copies the kernel's undo files (`blocks/rev*.dat`) from `from` into the staged `to`, with the
/// kernel open again: undo data is written to the file of the block's own block file, old ones
/// too (a reorg onto blocks stored long ago), so none is linked; what the kernel appends while
/// one is copied lies past the end the snapshot's block index knows, and is written over there.
pub fn stage_undo(
    from: &Path,
    to: &Path,
    cancelled: &dyn Fn() -> bool,
) -> Result<Staged, SnapshotError> {
    let (from, to) = (from.join("blocks"), to.join("blocks"));
    let wanted = |name: &str| numbered(name, "rev").is_some();
    stage_tree(&from, &to, &wanted, &|_| false, cancelled)
}

/// The number in `prefixNNNNN.dat`.
fn numbered(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?
        .strip_suffix(".dat")?
        .parse()
        .ok()
}

/// The highest `prefixNNNNN.dat` number in `dir`.
fn newest_numbered(dir: &Path, prefix: &str) -> Result<Option<u32>, SnapshotError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_at(dir)(e)),
    };
    Ok(entries
        .filter_map(Result::ok)
        .filter_map(|e| numbered(&e.file_name().to_string_lossy(), prefix))
        .max())
}

/// Links (where `immutable` says so) or copies every file below `from` that `wanted` names into
/// `to`. Symbolic links are followed: a block folder on another disk is staged as any.
fn stage_tree(
    from: &Path,
    to: &Path,
    wanted: &dyn Fn(&str) -> bool,
    immutable: &dyn Fn(&str) -> bool,
    cancelled: &dyn Fn() -> bool,
) -> Result<Staged, SnapshotError> {
    fs::create_dir_all(to).map_err(io_at(to))?;
    let mut staged = Staged::default();
    for entry in fs::read_dir(from).map_err(io_at(from))? {
        if cancelled() {
            return Err(SnapshotError::Cancelled);
        }
        let entry = entry.map_err(io_at(from))?;
        let name = entry.file_name();
        let (source, target) = (entry.path(), to.join(&name));
        let name = name.to_string_lossy();
        let meta = match fs::metadata(&source) {
            Ok(meta) => meta,
            // Gone since the listing (a live LevelDB's file compacted away): nothing asked for.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !wanted(&name) => continue,
            Err(e) => return Err(io_at(&source)(e)),
        };
        if meta.is_dir() {
            staged.add(stage_tree(&source, &target, wanted, immutable, cancelled)?);
        } else if meta.is_file() && wanted(&name) {
            staged.add(stage_file(&source, &target, immutable(&name))?);
        }
    }
    Ok(staged)
}

/// Links `source` to `target` when `link` (copying where the file system cannot link), or
/// copies it.
pub fn stage_file(source: &Path, target: &Path, link: bool) -> Result<Staged, SnapshotError> {
    let symlink = fs::symlink_metadata(source).is_ok_and(|m| m.file_type().is_symlink());
    if link && !symlink && fs::hard_link(source, target).is_ok() {
        return Ok(Staged {
            linked: 1,
            ..Staged::default()
        });
    }
    let bytes = copy_synced(source, target)?;
    Ok(Staged {
        copied: 1,
        copied_bytes: bytes,
        ..Staged::default()
    })
}

/// How the files below `dir` came there as far as the file system tells: those with other
/// links are counted linked, the rest copied (a RocksDB checkpoint's, which links and copies by
/// itself).
pub fn count_staged(dir: &Path) -> Result<Staged, SnapshotError> {
    use std::os::unix::fs::MetadataExt;
    let mut staged = Staged::default();
    for path in files_below(dir)? {
        let meta = fs::metadata(dir.join(&path)).map_err(io_at(dir))?;
        if meta.nlink() > 1 {
            staged.linked += 1;
        } else {
            staged.copied += 1;
            staged.copied_bytes += meta.len();
        }
    }
    Ok(staged)
}

/// Copies a file and writes it to disk before returning.
fn copy_synced(source: &Path, target: &Path) -> Result<u64, SnapshotError> {
    let bytes = fs::copy(source, target).map_err(io_at(source))?;
    fs::File::open(target)
        .and_then(|f| f.sync_all())
        .map_err(io_at(target))?;
    Ok(bytes)
}

/// Moves the staged folder `staging` to `partial` (an empty folder): renamed where both are on
/// one file system, so every link stays a link; copied otherwise, and the staging removed.
pub fn place(
    staging: &Path,
    partial: &Path,
    cancelled: &dyn Fn() -> bool,
) -> Result<Staged, SnapshotError> {
    match fs::rename(staging, partial) {
        Ok(()) => return Ok(Staged::default()),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {}
        Err(e) => return Err(io_at(staging)(e)),
    }
    let copied = stage_tree(staging, partial, &|_| true, &|_| false, cancelled)?;
    fs::remove_dir_all(staging).map_err(io_at(staging))?;
    Ok(copied)
}

/// Every file below `root`, relative to it with `/` between folders, sorted.
fn files_below(root: &Path) -> Result<Vec<String>, SnapshotError> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), SnapshotError> {
        for entry in fs::read_dir(dir).map_err(io_at(dir))? {
            let path = entry.map_err(io_at(dir))?.path();
            if path.is_dir() {
                walk(root, &path, out)?;
            } else if let Ok(relative) = path.strip_prefix(root) {
                let parts: Vec<_> = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                out.push(parts.join("/"));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.sort();
    Ok(out)
}

/// A file's size and SHA-256, read through; also written to disk (a copy may not be yet).
fn hash_file(path: &Path) -> Result<(u64, String), SnapshotError> {
    let mut file = fs::File::open(path).map_err(io_at(path))?;
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io_at(path))?;
        if n == 0 {
            break;
        }
        context.update(&buf[..n]);
        size += n as u64;
    }
    file.sync_all().map_err(io_at(path))?;
    let digest = context.finish();
    Ok((
        size,
        bitcoin::hex::DisplayHex::to_lower_hex_string(digest.as_ref()),
    ))
}

/// Lists and hashes every file of the network folder `dir` into the manifest's file list, one
/// after another (on the caller's thread: not on the pool the indexer prepares blocks on).
pub fn list_files(
    dir: &Path,
    cancelled: &dyn Fn() -> bool,
) -> Result<Vec<ManifestFile>, SnapshotError> {
    files_below(dir)?
        .into_iter()
        .map(|path| {
            if cancelled() {
                return Err(SnapshotError::Cancelled);
            }
            let (size, sha256) = hash_file(&dir.join(&path))?;
            Ok(ManifestFile { path, size, sha256 })
        })
        .collect()
}

/// Writes the manifest into the partial folder, then renames it to its final name: from then on
/// it is a whole snapshot.
pub fn complete(partial: &Path, finished: &Path, manifest: &Manifest) -> Result<(), SnapshotError> {
    let path = partial.join(MANIFEST_FILE);
    let text = serde_json::to_vec_pretty(manifest).map_err(|e| SnapshotError::BadManifest {
        path: path.clone(),
        message: e.to_string(),
    })?;
    let mut file = fs::File::create(&path).map_err(io_at(&path))?;
    file.write_all(&text)
        .and_then(|()| file.sync_all())
        .map_err(io_at(&path))?;
    sync_dirs_below(partial)?;
    fs::rename(partial, finished).map_err(io_at(partial))?;
    sync_dir(finished.parent().unwrap_or(Path::new(".")))
}

fn sync_dir(dir: &Path) -> Result<(), SnapshotError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_at(dir))
}

fn sync_dirs_below(dir: &Path) -> Result<(), SnapshotError> {
    for entry in fs::read_dir(dir).map_err(io_at(dir))? {
        let path = entry.map_err(io_at(dir))?.path();
        if path.is_dir() {
            sync_dirs_below(&path)?;
        }
    }
    sync_dir(dir)
}

/// Before a node opens the network folder `network_dir` of its data folder: refuses an
/// interrupted snapshot there, or a snapshot of another network where this one has no folder
/// yet; checks a snapshot not yet started from (its network, versions, and every file's size and
/// hash) and marks it started from. Its manifest when it checked one.
pub fn check_before_start(
    network_dir: &Path,
    label: &str,
    schema: u32,
    layout: u32,
) -> Result<Option<Manifest>, SnapshotError> {
    let partial = PathBuf::from(format!("{}{PARTIAL_SUFFIX}", network_dir.display()));
    if partial.exists() {
        return Err(SnapshotError::Incomplete { path: partial });
    }
    if !network_dir.exists() {
        refuse_other_networks(network_dir, label)?;
        return Ok(None);
    }
    let path = network_dir.join(MANIFEST_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let manifest = read_manifest(&path)?;
    check_manifest(network_dir, &manifest, label, schema, layout)?;
    super::clear_snapshot_mark(network_dir).map_err(|e| SnapshotError::BadManifest {
        path: network_dir.join(super::IDENTITY_FILE),
        message: e.to_string(),
    })?;
    fs::rename(&path, network_dir.join(VERIFIED_FILE)).map_err(io_at(&path))?;
    sync_dir(network_dir)?;
    Ok(Some(manifest))
}

/// A snapshot beside where `network_dir` would be, of another network, is refused: the
/// operator meant to start from it.
fn refuse_other_networks(network_dir: &Path, label: &str) -> Result<(), SnapshotError> {
    let Some(root) = network_dir.parent() else {
        return Ok(());
    };
    let Ok(entries) = fs::read_dir(root) else {
        return Ok(());
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let manifest = entry.path().join(MANIFEST_FILE);
        if manifest.exists() && name != label {
            let found = read_manifest(&manifest).map(|m| m.network).unwrap_or(name);
            return Err(SnapshotError::OtherNetwork {
                path: entry.path(),
                found,
                wanted: label.to_string(),
            });
        }
    }
    Ok(())
}

/// Reads a manifest.
pub fn read_manifest(path: &Path) -> Result<Manifest, SnapshotError> {
    let text = fs::read(path).map_err(io_at(path))?;
    serde_json::from_slice(&text).map_err(|e| SnapshotError::BadManifest {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Checks a manifest against what this node is and what the folder holds.
fn check_manifest(
    dir: &Path,
    manifest: &Manifest,
    label: &str,
    schema: u32,
    layout: u32,
) -> Result<(), SnapshotError> {
    let path = dir.to_path_buf();
    if manifest.program != "cairn" {
        return Err(SnapshotError::BadManifest {
            path: dir.join(MANIFEST_FILE),
            message: format!("written by {}", manifest.program),
        });
    }
    if manifest.network != label {
        return Err(SnapshotError::OtherNetwork {
            path,
            found: manifest.network.clone(),
            wanted: label.to_string(),
        });
    }
    if manifest.schema > schema {
        return Err(SnapshotError::NewerSchema {
            path,
            found: manifest.schema,
            ours: schema,
        });
    }
    if manifest.layout > layout {
        return Err(SnapshotError::NewerLayout {
            path,
            found: manifest.layout,
            ours: layout,
        });
    }
    manifest.files.par_iter().try_for_each(|file| {
        let damaged = |message: String| SnapshotError::Damaged {
            path: path.clone(),
            file: file.path.clone(),
            message,
        };
        let relative = Path::new(&file.path);
        if relative.is_absolute() || relative.components().any(|c| c.as_os_str() == "..") {
            return Err(damaged("is not a path inside the snapshot".into()));
        }
        if fs::symlink_metadata(dir.join(relative)).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(damaged("is a symbolic link".into()));
        }
        let (size, sha256) = match hash_file(&dir.join(relative)) {
            Ok(found) => found,
            Err(SnapshotError::Io { source, .. }) => return Err(damaged(source.to_string())),
            Err(e) => return Err(e),
        };
        if size != file.size {
            return Err(damaged(format!(
                "has {size} bytes, the manifest {}",
                file.size
            )));
        }
        if sha256 != file.sha256 {
            return Err(damaged("has another SHA-256 than the manifest's".into()));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests;
