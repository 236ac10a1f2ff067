//! The mempool kept across restarts, in Bitcoin Core's `mempool.dat` format (`DumpMempool` and
//! `LoadMempool`, `node/mempool_persist.cpp`): version 2 with a random obfuscation key when
//! written, versions 1 and 2 when read, so a file Core saved loads here and one saved here loads
//! in Core (`importmempool`). Loaded transactions go through every check of a new one.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use bitcoin::consensus::{Decodable, Encodable};
use bitcoin::{Transaction, Txid, VarInt};

use super::{Accepted, Mempool, Rejection};
use crate::index::Index;

/// The file version without obfuscation (Core's `MEMPOOL_DUMP_VERSION_NO_XOR_KEY`).
const VERSION_PLAIN: u64 = 1;
/// The file version with an obfuscation key (Core's `MEMPOOL_DUMP_VERSION`).
const VERSION_OBFUSCATED: u64 = 2;
/// Transactions older than this are not loaded (Core's default `-mempoolexpiry`, 336 hours).
pub const EXPIRY_SECS: i64 = 336 * 3600;

/// Errors reading or writing `mempool.dat`.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not a mempool file this version reads.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// What loading a file did, counted as Core's log line counts it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LoadStats {
    /// Transactions accepted.
    pub accepted: u64,
    /// Transactions refused (spent meanwhile, conflicting, invalid).
    pub failed: u64,
    /// Transactions older than [`EXPIRY_SECS`].
    pub expired: u64,
    /// Transactions the mempool or the chain already had.
    pub already_there: u64,
}

/// Seconds since 1970 now.
pub fn now() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// Reads and writes with Core's obfuscation: the byte at file offset `p` is XORed with
/// `key[p % 8]`.
struct Obfuscated<T> {
    inner: T,
    key: [u8; 8],
    pos: u64,
}

impl<T> Obfuscated<T> {
    fn apply(&self, buf: &mut [u8], from: u64) {
        crate::kernel::blockfiles::xor_in_place(&self.key, buf, from);
    }
}

impl<R: Read> Read for Obfuscated<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.apply(&mut buf[..n], self.pos);
        self.pos += n as u64;
        Ok(n)
    }
}

impl<W: Write> Write for Obfuscated<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut copy = buf.to_vec();
        self.apply(&mut copy, self.pos);
        self.inner.write_all(&copy)?;
        self.pos += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Saves the mempool to `path` (through `path.new`, synced, then renamed over it, as Core), parents
/// before children; returns how many transactions were written.
pub fn save(mempool: &Mempool, path: &Path) -> Result<usize, PersistError> {
    let io = |source| PersistError::Io {
        path: path.display().to_string(),
        source,
    };
    let txs = parents_first(mempool);
    let tmp = path.with_extension("dat.new");
    let file = File::create(&tmp).map_err(io)?;
    let key: [u8; 8] = rand::random();
    let mut out = bitcoin::io::FromStd::new(Obfuscated {
        inner: BufWriter::new(file),
        key: [0; 8],
        pos: 0,
    });
    write_all(&mut out, key, &txs).map_err(|e| io(e.into()))?;
    let file = out
        .into_inner()
        .inner
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(txs.len())
}

/// Version, key, count, then each transaction with its time and a zero fee delta; then Core's
/// (empty) fee-delta map and unbroadcast set.
fn write_all<W: Write>(
    out: &mut bitcoin::io::FromStd<Obfuscated<W>>,
    key: [u8; 8],
    txs: &[(Transaction, i64)],
) -> Result<(), bitcoin::io::Error> {
    VERSION_OBFUSCATED.consensus_encode(out)?;
    key.to_vec().consensus_encode(out)?;
    out.inner_mut().key = key;
    (txs.len() as u64).consensus_encode(out)?;
    for (tx, time) in txs {
        tx.consensus_encode(out)?;
        time.consensus_encode(out)?;
        0i64.consensus_encode(out)?;
    }
    VarInt(0).consensus_encode(out)?;
    VarInt(0).consensus_encode(out)?;
    bitcoin::io::Write::flush(out)
}

/// The mempool's transactions with their entry times, each after the mempool parents it spends.
fn parents_first(mempool: &Mempool) -> Vec<(Transaction, i64)> {
    let inner = mempool.read();
    let mut done: std::collections::HashSet<Txid> = std::collections::HashSet::new();
    let mut order = Vec::with_capacity(inner.txs.len());
    for start in inner.txs.keys() {
        // Depth-first, a parent before its child, without recursion (chains can be long).
        let mut stack = vec![(*start, false)];
        while let Some((txid, parents_done)) = stack.pop() {
            if done.contains(&txid) {
                continue;
            }
            let Some(entry) = inner.txs.get(&txid) else {
                continue;
            };
            if parents_done {
                done.insert(txid);
                order.push((entry.tx.clone(), entry.time));
                continue;
            }
            stack.push((txid, true));
            for input in &entry.tx.input {
                let parent = input.previous_output.txid;
                if inner.txs.contains_key(&parent) && !done.contains(&parent) {
                    stack.push((parent, false));
                }
            }
        }
    }
    order
}

/// Reads the version and, in version 2, the obfuscation key; returns the key and where the
/// obfuscated part starts. Read unbuffered, so nothing after it is read under the wrong key.
fn read_header(file: &mut File) -> std::io::Result<([u8; 8], u64)> {
    let invalid = |message: String| std::io::Error::new(std::io::ErrorKind::InvalidData, message);
    let mut version = [0u8; 8];
    file.read_exact(&mut version)?;
    match u64::from_le_bytes(version) {
        VERSION_PLAIN => Ok(([0; 8], 8)),
        VERSION_OBFUSCATED => {
            let mut len = [0u8; 1];
            file.read_exact(&mut len)?;
            if len[0] != 8 {
                return Err(invalid(format!(
                    "an obfuscation key of {} bytes, not 8",
                    len[0]
                )));
            }
            let mut key = [0u8; 8];
            file.read_exact(&mut key)?;
            Ok((key, 17))
        }
        other => Err(invalid(format!(
            "version {other}; this cairn reads versions 1 and 2"
        ))),
    }
}

/// Loads `path` into the mempool, each transaction checked as a new one would be and handed to
/// `on_accepted` once in; those older than [`EXPIRY_SECS`] are skipped. `None` without a file.
/// Reads as it goes: memory is bounded by the mempool's own limit, not by what the file claims.
pub fn load(
    mempool: &Mempool,
    index: &Index,
    path: &Path,
    mut on_accepted: impl FnMut(Accepted),
) -> Result<Option<LoadStats>, PersistError> {
    let name = path.display().to_string();
    let io = |source| PersistError::Io {
        path: name.clone(),
        source,
    };
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let format = |message: String| PersistError::Format {
        path: name.clone(),
        message,
    };
    let (key, pos) = read_header(&mut file).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => format(e.to_string()),
        _ => io(e),
    })?;
    let mut input = bitcoin::io::FromStd::new(BufReader::new(Obfuscated {
        inner: file,
        key,
        pos,
    }));
    let count = u64::consensus_decode(&mut input).map_err(|e| format(e.to_string()))?;
    let oldest = now() - EXPIRY_SECS;
    let mut stats = LoadStats::default();
    for _ in 0..count {
        let tx = Transaction::consensus_decode(&mut input).map_err(|e| format(e.to_string()))?;
        let time = i64::consensus_decode(&mut input).map_err(|e| format(e.to_string()))?;
        let _fee_delta = i64::consensus_decode(&mut input).map_err(|e| format(e.to_string()))?;
        if time <= oldest {
            stats.expired += 1;
            continue;
        }
        let raw = bitcoin::consensus::serialize(&tx);
        match mempool.accept_with(&raw, index, true, time) {
            Ok(accepted) => {
                stats.accepted += 1;
                on_accepted(accepted);
            }
            Err(Rejection::AlreadyKnown | Rejection::AlreadyInMempool) => stats.already_there += 1,
            Err(Rejection::Backend(e)) => {
                return Err(format(format!("the index cannot answer: {e}")))
            }
            Err(e) => {
                tracing::debug!("{name}: transaction {} not loaded: {e}", tx.compute_txid());
                stats.failed += 1;
            }
        }
    }
    Ok(Some(stats))
}
