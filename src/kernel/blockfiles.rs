//! Bitcoin Core's block files as the kernel writes them: records of `[magic][size LE u32][block]`
//! in `blkNNNNN.dat`, in arrival order, obfuscated with the key in `xor.dat`. Where a block sits
//! in them ([`FilePos`]) and reading blocks straight from them ([`KernelBlockFiles`]), so the
//! index can serve transactions without the kernel's lock; also the record format's checks that
//! reading any blocks folder shares.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The largest serialized block consensus allows: its weight limit, every byte counted once
/// (all of it witness).
pub const MAX_BLOCK_SIZE: u32 = bitcoin::Weight::MAX_BLOCK.to_wu() as u32;

/// Errors from reading block files.
#[derive(Debug, thiserror::Error)]
pub enum BlkError {
    /// A file or folder could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The folder has no `blk*.dat` files.
    #[error("{0} holds no blk*.dat files")]
    NoFiles(PathBuf),
    /// `xor.dat` is not an 8-byte key.
    #[error("{path} is {len} bytes, expected an 8-byte obfuscation key")]
    BadXorKey {
        /// The key file.
        path: PathBuf,
        /// Its length.
        len: u64,
    },
    /// A record does not start with this network's magic.
    #[error(
        "{path} at offset {offset}: expected the {network} magic {expected}, found {found}{hint}"
    )]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// Where the record should start.
        offset: u64,
        /// This network's name.
        network: String,
        /// The expected magic, hex.
        expected: String,
        /// What is there, hex.
        found: String,
        /// Which network the bytes belong to, when they are another network's magic.
        hint: String,
    },
    /// A file larger than any block file Core writes.
    #[error("{path} is {len} bytes, larger than any Bitcoin Core block file (128 MiB)")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
    },
}

/// Undoes Core's block-file obfuscation: byte i of a file is XORed with key[i % 8].
pub fn xor_in_place(key: &[u8; 8], buf: &mut [u8], file_offset: u64) {
    if *key == [0u8; 8] {
        return;
    }
    for (i, b) in buf.iter_mut().enumerate() {
        *b ^= key[((file_offset + i as u64) % 8) as usize];
    }
}

/// Reads `dir/xor.dat`, Core's obfuscation key; all zeros (plain files) when absent.
pub fn read_xor_key(dir: &Path) -> Result<[u8; 8], BlkError> {
    let mut key = [0u8; 8];
    let key_path = dir.join("xor.dat");
    if key_path.exists() {
        let bytes = std::fs::read(&key_path).map_err(|source| BlkError::Io {
            path: key_path.clone(),
            source,
        })?;
        if bytes.len() != 8 {
            return Err(BlkError::BadXorKey {
                path: key_path,
                len: bytes.len() as u64,
            });
        }
        key.copy_from_slice(&bytes);
    }
    Ok(key)
}

/// A position in a block-file folder: file number and byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct FilePos {
    /// The `blkNNNNN.dat` number.
    pub file: u32,
    /// Byte offset inside it.
    pub offset: u64,
}

/// A block found in the kernel's block files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoundBlock {
    /// The block's hash (from its header).
    pub hash: bitcoin::BlockHash,
    /// Where its bytes start (after magic and size).
    pub at: FilePos,
    /// Its serialized length.
    pub len: u32,
}

/// The block files the embedded kernel writes, read directly: so serving a block or a
/// transaction never takes the kernel's lock.
#[derive(Debug, Clone)]
pub struct KernelBlockFiles {
    dir: PathBuf,
    magic: [u8; 4],
    /// The obfuscation key, read once `xor.dat` exists (the kernel writes it when it starts).
    key: std::sync::Arc<std::sync::OnceLock<[u8; 8]>>,
}

impl KernelBlockFiles {
    /// The kernel's `blocks/` folder and the network magic.
    pub fn new(dir: &Path, magic: [u8; 4]) -> Self {
        KernelBlockFiles {
            dir: dir.to_path_buf(),
            magic,
            key: Default::default(),
        }
    }

    fn key(&self) -> Result<[u8; 8], BlkError> {
        if let Some(k) = self.key.get() {
            return Ok(*k);
        }
        let key = read_xor_key(&self.dir)?;
        if self.dir.join("xor.dat").exists() {
            let _ = self.key.set(key);
        }
        Ok(key)
    }

    fn path(&self, file: u32) -> PathBuf {
        self.dir.join(format!("blk{file:05}.dat"))
    }

    /// Reads `len` bytes at `at` (deobfuscated).
    pub fn read(&self, at: FilePos, len: u32) -> Result<Vec<u8>, BlkError> {
        let path = self.path(at.file);
        let io = |source| BlkError::Io {
            path: path.clone(),
            source,
        };
        let key = self.key()?;
        let mut f = File::open(&path).map_err(io)?;
        f.seek(SeekFrom::Start(at.offset)).map_err(io)?;
        let mut buf = vec![0u8; len as usize];
        f.read_exact(&mut buf).map_err(io)?;
        xor_in_place(&key, &mut buf, at.offset);
        Ok(buf)
    }

    /// Lists the complete block records written since `from`, and the position after the last
    /// one. Stops at the end of written data (zero padding, a partly written record, or the end
    /// of the newest file). Reads only each record's first 88 bytes (magic, size, header), not
    /// the blocks, nor the zeros Core preallocates files with (up to 16 MiB a scan).
    pub fn scan_from(&self, from: FilePos) -> Result<(Vec<FoundBlock>, FilePos), BlkError> {
        let key = self.key()?;
        let mut found = Vec::new();
        let mut pos = from;
        loop {
            let path = self.path(pos.file);
            let io = |source| BlkError::Io {
                path: path.clone(),
                source,
            };
            let file = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((found, pos)),
                Err(source) => return Err(BlkError::Io { path, source }),
            };
            let file_len = file.metadata().map_err(io)?.len();
            while let Some(block) = self.record_at(&file, &key, pos, file_len).map_err(io)? {
                found.push(block);
                pos.offset = block.at.offset + u64::from(block.len);
            }
            // Core only starts the next file once this one is full.
            if self.path(pos.file + 1).exists() {
                pos = FilePos {
                    file: pos.file + 1,
                    offset: 0,
                };
            } else {
                return Ok((found, pos));
            }
        }
    }

    /// The complete block record at `at` in `file` (`file_len` bytes), if one is there: its
    /// magic, a plausible size, all of it within the file.
    fn record_at(
        &self,
        file: &File,
        key: &[u8; 8],
        at: FilePos,
        file_len: u64,
    ) -> std::io::Result<Option<FoundBlock>> {
        use std::os::unix::fs::FileExt;
        let mut head = [0u8; 8 + 80];
        if at.offset.saturating_add(head.len() as u64) > file_len {
            return Ok(None);
        }
        match file.read_exact_at(&mut head, at.offset) {
            Ok(()) => {}
            // Core truncates a finished file's preallocated zeros when it moves to the next
            // file: what was past the end of the records may be gone since `file_len` was read.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        xor_in_place(key, &mut head, at.offset);
        if head[..4] != self.magic {
            return Ok(None); // zero padding: nothing written here yet
        }
        let size = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let end = at.offset + 8 + u64::from(size);
        if !(81..=MAX_BLOCK_SIZE).contains(&size) || end > file_len {
            return Ok(None);
        }
        let header: bitcoin::block::Header = bitcoin::consensus::deserialize(&head[8..])
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        Ok(Some(FoundBlock {
            hash: header.block_hash(),
            at: FilePos {
                file: at.file,
                offset: at.offset + 8,
            },
            len: size,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A blk file of two records followed by zero padding: both found with their places, the
    /// scan stops at the zeros, and a length read before Core truncated the file (a stale
    /// `file_len` past its end) finds nothing rather than failing.
    #[test]
    fn the_scan_finds_whole_records_and_stops_at_zeros_or_the_end() {
        let tmp = tempfile::tempdir().unwrap();
        let network = bitcoin::Network::Regtest;
        let magic = network.magic().to_bytes();
        let block = bitcoin::consensus::serialize(&bitcoin::constants::genesis_block(network));
        let mut data = Vec::new();
        for _ in 0..2 {
            data.extend_from_slice(&magic);
            data.extend_from_slice(&(block.len() as u32).to_le_bytes());
            data.extend_from_slice(&block);
        }
        let written = data.len() as u64;
        data.extend_from_slice(&[0u8; 4096]);
        let path = tmp.path().join("blk00000.dat");
        std::fs::write(&path, &data).unwrap();
        let files = KernelBlockFiles::new(tmp.path(), magic);
        let (found, next) = files.scan_from(FilePos::default()).unwrap();
        let hash = bitcoin::constants::genesis_block(network).block_hash();
        assert_eq!(found.len(), 2);
        assert_eq!(found[1].at.offset, 8 + block.len() as u64 + 8);
        assert!(found
            .iter()
            .all(|b| b.hash == hash && b.len == block.len() as u32));
        assert_eq!(next.offset, written);
        assert_eq!(files.read(found[1].at, found[1].len).unwrap(), block);
        // Again from where it stopped: nothing new.
        assert_eq!(files.scan_from(next).unwrap(), (Vec::new(), next));
        // The zeros truncated away after the length was read.
        std::fs::write(&path, &data[..written as usize]).unwrap();
        let file = File::open(&path).unwrap();
        let stale = files.record_at(&file, &[0; 8], next, written + 4096);
        assert_eq!(stale.unwrap(), None);
    }
}
