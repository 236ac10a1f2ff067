//! Feeding blocks to the validator from files: Core's `blk*.dat` folder or one hex block per line.
//! Blocks whose parent has not been seen yet wait (as a file position, not in memory) until it has.

pub mod blkfiles;
mod progress;

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bitcoin::hex::FromHex;
use bitcoin::BlockHash;

use crate::datadir::space::SpaceWatch;
use crate::kernel::blockfiles::BlkError;
use crate::kernel::{Accepted, KernelError, Validator};
pub use blkfiles::{BlkDir, BlkPos, BlkWriter};
pub use progress::Progress;

/// Errors that stop an import.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A block file is unreadable or damaged.
    #[error(transparent)]
    Blk(#[from] BlkError),
    /// The hex file is unreadable.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A line of the hex file is not hex.
    #[error("{path} line {line}: {message}")]
    BadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The kernel refused a block or failed.
    #[error("{source} ({origin})")]
    Kernel {
        /// The kernel's error.
        source: KernelError,
        /// Where the block came from.
        origin: String,
    },
    /// The import was interrupted (Ctrl-C); what was validated is kept.
    #[error("interrupted")]
    Interrupted,
}

/// What an import did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ImportStats {
    /// Blocks read from the input.
    pub blocks_read: u64,
    /// Blocks the kernel validated and connected.
    pub connected: u64,
    /// Blocks validated and stored on a branch with less work.
    pub stored: u64,
    /// Blocks skipped because the active chain already had them.
    pub already_had: u64,
    /// Blocks left over because their parent never appeared.
    pub orphans: u64,
    /// Transactions in the blocks submitted to the kernel.
    pub txs: u64,
    /// Wall time in seconds.
    pub seconds: f64,
}

impl ImportStats {
    /// Blocks submitted per second.
    pub fn blocks_per_sec(&self) -> f64 {
        (self.connected + self.stored) as f64 / self.seconds.max(1e-9)
    }

    /// Transactions submitted per second.
    pub fn txs_per_sec(&self) -> f64 {
        self.txs as f64 / self.seconds.max(1e-9)
    }
}

/// A block waiting for its parent: where to find it again.
enum Held {
    /// In a block file: read again from disk once its parent is in.
    Blk(BlkPos),
    /// A line of a hex file, kept in memory; its line number names it in messages.
    Line {
        /// The block.
        raw: Vec<u8>,
        /// 1-based line number.
        line: usize,
    },
}

/// Drives the validator with blocks in any order, holding children until their parent is in.
pub struct Importer<'a> {
    validator: &'a Validator,
    held: HashMap<BlockHash, Vec<Held>>,
    stats: ImportStats,
    progress: Progress,
    stop: &'a AtomicBool,
    started: Instant,
    space: Option<&'a SpaceWatch>,
}

impl<'a> Importer<'a> {
    /// A new import into `validator`; `stop` is raised (by Ctrl-C) to end it early.
    pub fn new(validator: &'a Validator, progress: Progress, stop: &'a AtomicBool) -> Self {
        Importer {
            validator,
            held: HashMap::new(),
            stats: ImportStats::default(),
            progress,
            stop,
            started: Instant::now(),
            space: None,
        }
    }

    /// Waits before each block while `space` says the disk is too low (until space is freed or
    /// the import is stopped), instead of letting the kernel fill it and stop for good.
    pub fn with_space(mut self, space: &'a SpaceWatch) -> Self {
        self.space = Some(space);
        self
    }

    /// Returns once the disk has room for another block, or with `Interrupted` when stopped.
    fn wait_for_space(&self) -> Result<(), ImportError> {
        while self.space.is_some_and(SpaceWatch::is_low) {
            if self.stop.load(Ordering::Relaxed) {
                return Err(ImportError::Interrupted);
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        Ok(())
    }

    /// Imports every block of a Core `blocks/` folder.
    pub fn import_blk_dir(mut self, dir: &BlkDir) -> Result<ImportStats, ImportError> {
        self.progress.set_length(dir.total_bytes());
        let mut done_bytes = 0u64;
        for file in 0..dir.files().len() {
            let scan = dir.scan_file(file)?;
            let name = dir.files()[file].display().to_string();
            if scan.skipped > 0 {
                tracing::debug!(
                    "{name}: {} bytes outside block records (pre-allocated space or torn writes)",
                    scan.skipped
                );
            }
            let data = &scan.data;
            for pos in scan.blocks.iter().copied() {
                let start = pos.offset as usize;
                let raw = &data[start..start + pos.len as usize];
                self.offer(
                    raw,
                    Held::Blk(pos),
                    &|held| match held {
                        Held::Blk(p) => dir.read_at(*p).map_err(ImportError::from),
                        Held::Line { raw, .. } => Ok(raw.clone()),
                    },
                    &|held| match held {
                        Held::Blk(p) => {
                            format!("{} offset {}", dir.files()[p.file].display(), p.offset)
                        }
                        Held::Line { line, .. } => format!("line {line}"),
                    },
                )?;
                self.progress
                    .set_position(done_bytes + pos.offset + u64::from(pos.len));
            }
            done_bytes += data.len() as u64;
            tracing::debug!("read {name}");
        }
        Ok(self.finish())
    }

    /// Imports a file with one hex-encoded block per line (blank lines are skipped).
    pub fn import_hex_file(mut self, path: &Path) -> Result<ImportStats, ImportError> {
        let io = |source| ImportError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        self.progress
            .set_length(file.metadata().map(|m| m.len()).unwrap_or(0));
        let reader = std::io::BufReader::new(file);
        let mut read = 0u64;
        for (i, line) in reader.lines().enumerate() {
            let line = line.map_err(io)?;
            read += line.len() as u64 + 1;
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            let raw = Vec::<u8>::from_hex(text).map_err(|e| ImportError::BadLine {
                path: path.to_path_buf(),
                line: i + 1,
                message: format!("not a hex block: {e}"),
            })?;
            let held = Held::Line {
                raw: raw.clone(),
                line: i + 1,
            };
            let origin = |h: &Held| match h {
                Held::Line { line, .. } => format!("{} line {line}", path.display()),
                Held::Blk(_) => String::new(),
            };
            self.offer(
                &raw,
                held,
                &|h| match h {
                    Held::Line { raw, .. } => Ok(raw.clone()),
                    Held::Blk(_) => Ok(Vec::new()),
                },
                &origin,
            )?;
            self.progress.set_position(read);
        }
        Ok(self.finish())
    }

    /// Submits `raw` if its parent is known, else holds it; then submits every held
    /// descendant that became connectable.
    fn offer(
        &mut self,
        raw: &[u8],
        held: Held,
        reload: &dyn Fn(&Held) -> Result<Vec<u8>, ImportError>,
        origin: &dyn Fn(&Held) -> String,
    ) -> Result<(), ImportError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(ImportError::Interrupted);
        }
        self.stats.blocks_read += 1;
        let header: bitcoin::block::Header = match bitcoin::consensus::deserialize_partial(raw) {
            Ok((h, _)) => h,
            Err(e) => {
                return Err(ImportError::Kernel {
                    source: KernelError::Malformed(e.to_string()),
                    origin: origin(&held),
                })
            }
        };
        if self.validator.active_height(&header.block_hash()).is_some() {
            // Already in the active chain (genesis, or a block of an earlier import).
            self.stats.already_had += 1;
            return Ok(());
        }
        if !self.validator.knows(&header.prev_blockhash) {
            self.held
                .entry(header.prev_blockhash)
                .or_default()
                .push(held);
            return Ok(());
        }
        self.submit(raw, &header, &held, origin)?;
        // Children that were waiting for this block (and their children) can go in now.
        let mut ready: Vec<BlockHash> = vec![header.block_hash()];
        while let Some(parent) = ready.pop() {
            let Some(children) = self.held.remove(&parent) else {
                continue;
            };
            for child in children {
                if self.stop.load(Ordering::Relaxed) {
                    return Err(ImportError::Interrupted);
                }
                let bytes = reload(&child)?;
                let child_header: bitcoin::block::Header =
                    bitcoin::consensus::deserialize_partial(&bytes)
                        .map(|(h, _)| h)
                        .map_err(|e| ImportError::Kernel {
                            source: KernelError::Malformed(e.to_string()),
                            origin: origin(&child),
                        })?;
                self.submit(&bytes, &child_header, &child, origin)?;
                ready.push(child_header.block_hash());
            }
        }
        Ok(())
    }

    fn submit(
        &mut self,
        raw: &[u8],
        header: &bitcoin::block::Header,
        held: &Held,
        origin: &dyn Fn(&Held) -> String,
    ) -> Result<(), ImportError> {
        if self.validator.active_height(&header.block_hash()).is_some() {
            self.stats.already_had += 1;
            return Ok(());
        }
        self.wait_for_space()?;
        match self.validator.submit_block(raw) {
            Ok(Accepted::Connected) => self.stats.connected += 1,
            Ok(Accepted::Stored) => self.stats.stored += 1,
            Ok(Accepted::Duplicate) => self.stats.already_had += 1,
            Err(source) => {
                return Err(ImportError::Kernel {
                    source,
                    origin: origin(held),
                })
            }
        }
        self.stats.txs += tx_count(raw);
        let tip = self.validator.tip();
        self.progress
            .block(tip.height, self.stats.connected + self.stats.stored);
        Ok(())
    }

    fn finish(mut self) -> ImportStats {
        self.stats.orphans = self.held.values().map(|v| v.len() as u64).sum();
        if self.stats.orphans > 0 {
            tracing::warn!(
                "{} blocks were not imported: their parents are in none of the input",
                self.stats.orphans
            );
        }
        self.stats.seconds = self.started.elapsed().as_secs_f64();
        self.progress.finish();
        self.stats
    }
}

/// The number of transactions in a serialized block (the varint after the header).
fn tx_count(raw: &[u8]) -> u64 {
    raw.get(80..)
        .and_then(|rest| bitcoin::consensus::deserialize_partial::<bitcoin::VarInt>(rest).ok())
        .map(|(n, _)| n.0)
        .unwrap_or(0)
}
