//! The mempool kept across restarts, in Bitcoin Core's `mempool.dat` format (`DumpMempool` and
//! `LoadMempool`, `node/mempool_persist.cpp`): version 2 with a random obfuscation key when
//! written, versions 1 and 2 when read, so a file Core saved loads here and one saved here loads
//! in Core (`importmempool`). This is the file alone; the mempool saves itself through it and
//! checks every loaded transaction as a new one ([`super::Mempool::load`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use bitcoin::consensus::{Decodable, Encodable};
use bitcoin::{Transaction, Txid, VarInt};

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

/// Writes `txs` (each with its txid and entry time) to `path`, parents before children (through
/// `path.new`, synced, then renamed over it, as Core); returns how many were written.
pub fn save(txs: Vec<(Txid, Transaction, i64)>, path: &Path) -> Result<usize, PersistError> {
    let io = |source| PersistError::Io {
        path: path.display().to_string(),
        source,
    };
    let txs = parents_first(txs);
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

/// The same transactions, each after those of them it spends.
fn parents_first(txs: Vec<(Txid, Transaction, i64)>) -> Vec<(Transaction, i64)> {
    let by_txid: HashMap<Txid, usize> = txs
        .iter()
        .enumerate()
        .map(|(i, (txid, _, _))| (*txid, i))
        .collect();
    let mut done = vec![false; txs.len()];
    let mut order = Vec::with_capacity(txs.len());
    for start in 0..txs.len() {
        // Depth-first, a parent before its child, without recursion (chains can be long).
        let mut stack = vec![(start, false)];
        while let Some((i, parents_done)) = stack.pop() {
            if done[i] {
                continue;
            }
            if parents_done {
                done[i] = true;
                order.push(i);
                continue;
            }
            stack.push((i, true));
            for input in &txs[i].1.input {
                match by_txid.get(&input.previous_output.txid) {
                    Some(&parent) if !done[parent] => stack.push((parent, false)),
                    _ => {}
                }
            }
        }
    }
    let mut slots: Vec<Option<(Transaction, i64)>> = txs
        .into_iter()
        .map(|(_, tx, time)| Some((tx, time)))
        .collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
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

/// A saved mempool being read: each transaction with its entry time, read as it goes, so memory
/// is bounded by what the reader keeps, not by what the file claims.
pub struct MempoolFile {
    input: bitcoin::io::FromStd<BufReader<Obfuscated<File>>>,
    left: u64,
    name: String,
}

impl MempoolFile {
    /// Opens `path` and reads its header; `None` without a file.
    pub fn open(path: &Path) -> Result<Option<MempoolFile>, PersistError> {
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
        let (key, pos) = read_header(&mut file).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => format_error(&name, e),
            _ => io(e),
        })?;
        let mut input = bitcoin::io::FromStd::new(BufReader::new(Obfuscated {
            inner: file,
            key,
            pos,
        }));
        let left = u64::consensus_decode(&mut input).map_err(|e| format_error(&name, e))?;
        Ok(Some(MempoolFile { input, left, name }))
    }

    /// The file's name, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn next_entry(&mut self) -> Result<(Transaction, i64), PersistError> {
        let name = &self.name;
        let tx =
            Transaction::consensus_decode(&mut self.input).map_err(|e| format_error(name, e))?;
        let time = i64::consensus_decode(&mut self.input).map_err(|e| format_error(name, e))?;
        let _fee_delta =
            i64::consensus_decode(&mut self.input).map_err(|e| format_error(name, e))?;
        Ok((tx, time))
    }
}

impl Iterator for MempoolFile {
    type Item = Result<(Transaction, i64), PersistError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let entry = self.next_entry();
        if entry.is_err() {
            // Nothing after a damaged entry can be read in step.
            self.left = 0;
        }
        Some(entry)
    }
}

/// A file that is not what it should be.
pub fn format_error(name: &str, message: impl std::fmt::Display) -> PersistError {
    PersistError::Format {
        path: name.to_string(),
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::{absolute, transaction, Amount, OutPoint, ScriptBuf, TxIn, TxOut};

    /// A transaction spending `parents`' first outputs (or a made-up coin), told apart by `tag`.
    fn spending(parents: &[&Transaction], tag: u64) -> Transaction {
        let mut input: Vec<TxIn> = parents
            .iter()
            .map(|p| TxIn {
                previous_output: OutPoint::new(p.compute_txid(), 0),
                ..TxIn::default()
            })
            .collect();
        if input.is_empty() {
            input.push(TxIn::default());
        }
        Transaction {
            version: transaction::Version::TWO,
            lock_time: absolute::LockTime::ZERO,
            input,
            output: vec![TxOut {
                value: Amount::from_sat(tag),
                script_pubkey: ScriptBuf::new(),
            }],
        }
    }

    /// Each transaction with its txid, as the mempool hands them over.
    fn with_txids(txs: Vec<(Transaction, i64)>) -> Vec<(Txid, Transaction, i64)> {
        txs.into_iter()
            .map(|(tx, time)| (tx.compute_txid(), tx, time))
            .collect()
    }

    #[test]
    fn parents_first_puts_every_transaction_after_those_it_spends() {
        let a = spending(&[], 1);
        let b = spending(&[&a], 2);
        let c = spending(&[&b, &a], 3);
        let lone = spending(&[], 4);
        let given = with_txids(vec![(c, 3), (lone, 4), (b, 2), (a, 1)]);
        let order: Vec<i64> = parents_first(given).into_iter().map(|(_, t)| t).collect();
        assert_eq!(order.len(), 4, "each once: {order:?}");
        let at = |t: i64| order.iter().position(|&x| x == t).unwrap();
        assert!(at(1) < at(2) && at(2) < at(3), "{order:?}");
    }

    #[test]
    fn a_saved_file_reads_back_entry_by_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mempool.dat");
        let a = spending(&[], 1);
        let b = spending(&[&a], 2);
        assert_eq!(
            save(with_txids(vec![(b.clone(), 20), (a.clone(), 10)]), &path).unwrap(),
            2
        );
        let read: Vec<(Transaction, i64)> = MempoolFile::open(&path)
            .unwrap()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(read, vec![(a, 10), (b, 20)]);
        assert!(MempoolFile::open(&dir.path().join("none.dat"))
            .unwrap()
            .is_none());
    }
}
