//! Reading any Bitcoin Core `blocks/` folder for an import ([`BlkDir`]) and writing block files
//! ([`BlkWriter`], for generated chains). The record format is [`crate::kernel::blockfiles`]'s.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use bitcoin::hex::DisplayHex;
use crate::config::Network;
use crate::kernel::blockfiles::{read_xor_key, xor_in_place, BlkError, MAX_BLOCK_SIZE};

/// Where one block sits in the block files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlkPos {
    /// Index into [`BlkDir::files`].
    pub file: usize,
    /// Byte offset of the block (after magic and size).
    pub offset: u64,
    /// Serialized block length.
    pub len: u32,
}

/// A Core `blocks/` folder: its block files in number order and its obfuscation key.
#[derive(Debug)]
pub struct BlkDir {
    files: Vec<PathBuf>,
    key: [u8; 8],
    magic: [u8; 4],
    network: String,
}

impl BlkDir {
    /// Lists `blk*.dat` in `dir` and reads `xor.dat` if present.
    pub fn open(dir: &Path, magic: [u8; 4], network: &str) -> Result<Self, BlkError> {
        let io = |source| BlkError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut files: Vec<(u32, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(num) = name
                .strip_prefix("blk")
                .and_then(|n| n.strip_suffix(".dat"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            files.push((num, entry.path()));
        }
        if files.is_empty() {
            return Err(BlkError::NoFiles(dir.to_path_buf()));
        }
        files.sort();
        let key = read_xor_key(dir)?;
        Ok(BlkDir {
            files: files.into_iter().map(|(_, p)| p).collect(),
            key,
            magic,
            network: network.to_string(),
        })
    }

    /// The block files, in number order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Total size of all block files, for progress.
    pub fn total_bytes(&self) -> u64 {
        self.files
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    }

    fn deobfuscate(&self, buf: &mut [u8], file_offset: u64) {
        xor_in_place(&self.key, buf, file_offset);
    }

    /// Reads one whole file (deobfuscated) and lists the positions of its blocks.
    pub fn scan_file(&self, file: usize) -> Result<(Vec<u8>, Vec<BlkPos>), BlkError> {
        let path = &self.files[file];
        let mut data = std::fs::read(path).map_err(|source| BlkError::Io {
            path: path.clone(),
            source,
        })?;
        self.deobfuscate(&mut data, 0);
        let mut positions = Vec::new();
        let mut pos = 0usize;
        while pos < data.len() {
            let rest = &data[pos..];
            if rest.iter().all(|&b| b == 0) {
                break; // zero padding at the end of a pre-allocated file
            }
            if rest.len() < 8 {
                return Err(BlkError::Truncated {
                    path: path.clone(),
                    offset: pos as u64,
                    needed: 8,
                    available: rest.len() as u64,
                });
            }
            if rest[..4] != self.magic {
                return Err(self.bad_magic(path, pos as u64, &rest[..4]));
            }
            let size = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
            if size > MAX_BLOCK_SIZE || size < 81 {
                return Err(BlkError::BadSize {
                    path: path.clone(),
                    offset: pos as u64,
                    size,
                });
            }
            if (rest.len() as u64) < 8 + u64::from(size) {
                return Err(BlkError::Truncated {
                    path: path.clone(),
                    offset: pos as u64,
                    needed: 8 + u64::from(size),
                    available: rest.len() as u64,
                });
            }
            positions.push(BlkPos {
                file,
                offset: (pos + 8) as u64,
                len: size,
            });
            pos += 8 + size as usize;
        }
        Ok((data, positions))
    }

    /// Reads one block back from disk (for blocks held until their parent arrives).
    pub fn read_at(&self, at: BlkPos) -> Result<Vec<u8>, BlkError> {
        let path = &self.files[at.file];
        let io = |source| BlkError::Io {
            path: path.clone(),
            source,
        };
        let mut f = File::open(path).map_err(io)?;
        f.seek(SeekFrom::Start(at.offset)).map_err(io)?;
        let mut buf = vec![0u8; at.len as usize];
        f.read_exact(&mut buf).map_err(io)?;
        self.deobfuscate(&mut buf, at.offset);
        Ok(buf)
    }

    fn bad_magic(&self, path: &Path, offset: u64, found: &[u8]) -> BlkError {
        let hint = Network::ALL
            .iter()
            .find(|n| n.magic() == found)
            .map(|n| format!(" (these are {n} blocks; pass --network {n})"))
            .unwrap_or_else(|| " (a damaged file, or not a Bitcoin Core block file)".into());
        BlkError::BadMagic {
            path: path.to_path_buf(),
            offset,
            network: self.network.clone(),
            expected: self.magic.to_lower_hex_string(),
            found: found.to_lower_hex_string(),
            hint,
        }
    }
}

/// Writes blocks as Core's block files: `blk00000.dat`, `blk00001.dat`, ... of at most
/// `max_file_size` bytes each, unobfuscated.
pub struct BlkWriter {
    dir: PathBuf,
    magic: [u8; 4],
    max_file_size: u64,
    file_num: u32,
    current: Option<std::io::BufWriter<File>>,
    current_size: u64,
}

impl BlkWriter {
    /// Core's limit on one block file.
    pub const MAX_FILE_SIZE: u64 = 128 * 1024 * 1024;

    /// Starts writing into `dir` (created if missing).
    pub fn new(dir: &Path, magic: [u8; 4], max_file_size: u64) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(BlkWriter {
            dir: dir.to_path_buf(),
            magic,
            max_file_size,
            file_num: 0,
            current: None,
            current_size: 0,
        })
    }

    /// Appends one serialized block.
    pub fn write_block(&mut self, block: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let record = 8 + block.len() as u64;
        if self.current.is_some() && self.current_size + record > self.max_file_size {
            self.finish_file()?;
            self.file_num += 1;
        }
        if self.current.is_none() {
            let path = self.dir.join(format!("blk{:05}.dat", self.file_num));
            self.current = Some(std::io::BufWriter::new(File::create(path)?));
            self.current_size = 0;
        }
        if let Some(w) = self.current.as_mut() {
            w.write_all(&self.magic)?;
            w.write_all(&(block.len() as u32).to_le_bytes())?;
            w.write_all(block)?;
        }
        self.current_size += record;
        Ok(())
    }

    fn finish_file(&mut self) -> std::io::Result<()> {
        use std::io::Write;
        if let Some(mut w) = self.current.take() {
            w.flush()?;
            w.get_ref().sync_all()?;
        }
        Ok(())
    }

    /// Flushes and closes the last file.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.finish_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_xor_and_padding() {
        let tmp = tempfile::tempdir().unwrap();
        let magic = Network::Regtest.magic();
        let blocks: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100 + i as usize]).collect();
        let mut w = BlkWriter::new(tmp.path(), magic, 300).unwrap();
        for b in &blocks {
            w.write_block(b).unwrap();
        }
        w.finish().unwrap();
        // Obfuscate every file with a key, as Core 28+ does, and pad the first with zeros.
        let key = [1u8, 2, 3, 4, 5, 6, 7, 8];
        std::fs::write(tmp.path().join("xor.dat"), key).unwrap();
        let dir = BlkDir::open(tmp.path(), magic, "regtest").unwrap();
        for (n, path) in dir.files().iter().enumerate() {
            let mut data = std::fs::read(path).unwrap();
            if n == 0 {
                data.extend_from_slice(&[0u8; 50]);
            }
            for (i, b) in data.iter_mut().enumerate() {
                *b ^= key[i % 8];
            }
            std::fs::write(path, data).unwrap();
        }
        let mut seen = Vec::new();
        for f in 0..dir.files().len() {
            let (data, positions) = dir.scan_file(f).unwrap();
            for p in positions {
                let slice = &data[p.offset as usize..p.offset as usize + p.len as usize];
                assert_eq!(dir.read_at(p).unwrap(), slice);
                seen.push(slice.to_vec());
            }
        }
        assert_eq!(seen, blocks);
    }

    #[test]
    fn truncated_and_foreign_files_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let mut w = BlkWriter::new(tmp.path(), Network::Mainnet.magic(), 1 << 20).unwrap();
        w.write_block(&[7u8; 200]).unwrap();
        w.finish().unwrap();
        let dir = BlkDir::open(tmp.path(), Network::Regtest.magic(), "regtest").unwrap();
        let err = dir.scan_file(0).unwrap_err().to_string();
        assert!(err.contains("mainnet blocks"), "{err}");

        let path = tmp.path().join("blk00000.dat");
        let mut data = std::fs::read(&path).unwrap();
        data[..4].copy_from_slice(&Network::Regtest.magic());
        data.truncate(100);
        std::fs::write(&path, data).unwrap();
        let err = dir.scan_file(0).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
    }
}
