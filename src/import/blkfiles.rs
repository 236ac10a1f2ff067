//! Reading any Bitcoin Core `blocks/` folder for an import ([`BlkDir`]) and writing block files
//! ([`BlkWriter`], for generated chains). The record format is [`crate::kernel::blockfiles`]'s.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::kernel::blockfiles::{read_xor_key, xor_in_place, BlkError, MAX_BLOCK_SIZE};
use crate::types::Network;
use bitcoin::hex::DisplayHex;

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

    /// Reads one whole file (deobfuscated) and lists the positions of its blocks, as Core's
    /// `-reindex` reads them (`LoadExternalBlockFile`): it searches for the network magic, skips
    /// a size outside 80 bytes to [`MAX_BLOCK_SIZE`] and a record cut short, and goes on from the
    /// byte after that magic. So a pre-allocated tail (raw zeros on disk, which come out of the
    /// obfuscation as the key itself) and a record torn by a node killed mid-write are passed
    /// over, not fatal.
    pub fn scan_file(&self, file: usize) -> Result<FileScan, BlkError> {
        let path = &self.files[file];
        let io = |source| BlkError::Io {
            path: path.clone(),
            source,
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_BLK_FILE_SIZE {
            return Err(BlkError::TooLarge {
                path: path.clone(),
                len,
            });
        }
        let mut data = std::fs::read(path).map_err(io)?;
        self.deobfuscate(&mut data, 0);
        let (blocks, skipped) = find_records(&data, self.magic, file);
        if blocks.is_empty() && data.len() >= 4 && data[..4] != self.magic {
            if let Some(other) = Network::ALL.iter().find(|n| n.magic() == data[..4]) {
                return Err(self.bad_magic(path, other));
            }
        }
        Ok(FileScan {
            data,
            blocks,
            skipped,
        })
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

    fn bad_magic(&self, path: &Path, found: &Network) -> BlkError {
        BlkError::BadMagic {
            path: path.to_path_buf(),
            offset: 0,
            network: self.network.clone(),
            expected: self.magic.to_lower_hex_string(),
            found: found.magic().to_lower_hex_string(),
            hint: format!(" (these are {found} blocks; pass --network {found})"),
        }
    }
}

/// Core's limit on one block file (`MAX_BLOCKFILE_SIZE`): no file it writes is larger, and
/// [`BlkDir::scan_file`] reads a whole file into memory, so a larger one is refused.
pub const MAX_BLK_FILE_SIZE: u64 = 128 * 1024 * 1024;

/// One block file read by [`BlkDir::scan_file`].
#[derive(Debug)]
pub struct FileScan {
    /// The whole file, deobfuscated.
    pub data: Vec<u8>,
    /// Where its blocks are, in file order.
    pub blocks: Vec<BlkPos>,
    /// Bytes that belong to no complete record: pre-allocated space, torn or damaged records.
    pub skipped: u64,
}

/// The complete records of this network in `data`, found by searching for the magic as Core's
/// reindex does, and the count of bytes outside them. Public for the blk-file fuzzer
/// (`fuzz/fuzz_targets/blk_scan.rs`); [`BlkDir::scan_file`] is what an import calls.
pub fn find_records(data: &[u8], magic: [u8; 4], file: usize) -> (Vec<BlkPos>, u64) {
    let mut blocks = Vec::new();
    let mut covered = 0u64;
    let mut pos = 0usize;
    while let Some(found) = find_magic(&data[pos..], magic) {
        let start = pos + found;
        let body = start + 8;
        let Some(head) = data.get(start..body) else {
            break;
        };
        let size = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let end = body.checked_add(size as usize);
        match end {
            Some(end) if (80..=MAX_BLOCK_SIZE).contains(&size) && end <= data.len() => {
                blocks.push(BlkPos {
                    file,
                    offset: body as u64,
                    len: size,
                });
                covered += 8 + u64::from(size);
                pos = end;
            }
            // Not a record (a stray magic, a torn write): go on from the next byte, as Core.
            _ => pos = start + 1,
        }
    }
    (blocks, data.len() as u64 - covered)
}

/// The offset of the first `magic` in `data`.
fn find_magic(data: &[u8], magic: [u8; 4]) -> Option<usize> {
    let mut from = 0usize;
    while let Some(i) = data.get(from..)?.iter().position(|&b| b == magic[0]) {
        let at = from + i;
        if data.get(at..at + 4)? == magic {
            return Some(at);
        }
        from = at + 1;
    }
    None
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
    pub const MAX_FILE_SIZE: u64 = MAX_BLK_FILE_SIZE;

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

    /// Writes `blocks` as block files of at most 300 bytes, obfuscated with `key` as Core 28+
    /// does, and returns the folder.
    fn obfuscated_dir(tmp: &Path, blocks: &[Vec<u8>], key: [u8; 8]) -> BlkDir {
        let magic = Network::Regtest.magic();
        let mut w = BlkWriter::new(tmp, magic, 300).unwrap();
        for b in blocks {
            w.write_block(b).unwrap();
        }
        w.finish().unwrap();
        std::fs::write(tmp.join("xor.dat"), key).unwrap();
        let dir = BlkDir::open(tmp, magic, "regtest").unwrap();
        for path in dir.files() {
            let mut data = std::fs::read(path).unwrap();
            xor_in_place(&key, &mut data, 0);
            std::fs::write(path, data).unwrap();
        }
        dir
    }

    fn read_all(dir: &BlkDir) -> Vec<Vec<u8>> {
        let mut seen = Vec::new();
        for f in 0..dir.files().len() {
            let scan = dir.scan_file(f).unwrap();
            for p in scan.blocks {
                let slice = &scan.data[p.offset as usize..p.offset as usize + p.len as usize];
                assert_eq!(dir.read_at(p).unwrap(), slice);
                seen.push(slice.to_vec());
            }
        }
        seen
    }

    fn append(path: &Path, bytes: &[u8]) {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
    }

    #[test]
    fn round_trip_with_xor() {
        let tmp = tempfile::tempdir().unwrap();
        let blocks: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100 + i as usize]).collect();
        let dir = obfuscated_dir(tmp.path(), &blocks, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(dir.files().len() > 1);
        assert_eq!(read_all(&dir), blocks);
    }

    #[test]
    fn preallocated_raw_zero_tails_are_passed_over() {
        // Core pre-allocates in 16 MiB steps with raw zeros, never obfuscated: read through the
        // key they come out as the key itself.
        let tmp = tempfile::tempdir().unwrap();
        let blocks: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100 + i as usize]).collect();
        let dir = obfuscated_dir(tmp.path(), &blocks, [0xfc, 0x13, 0x27, 0x8c, 9, 8, 7, 6]);
        for path in dir.files() {
            append(path, &[0u8; 4099]);
        }
        assert_eq!(read_all(&dir), blocks);
        assert!(dir.scan_file(0).unwrap().skipped >= 4099);
    }

    #[test]
    fn torn_records_and_stray_magic_are_skipped_as_core_reindex_does() {
        let tmp = tempfile::tempdir().unwrap();
        let blocks: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100 + i as usize]).collect();
        let dir = obfuscated_dir(tmp.path(), &blocks, [0; 8]);
        let magic = Network::Regtest.magic();
        let last = dir.files().last().unwrap().clone();
        // A stray magic with an impossible size, then a record whose write was cut short.
        let mut junk = magic.to_vec();
        junk.extend_from_slice(&5u32.to_le_bytes());
        junk.extend_from_slice(&magic);
        junk.extend_from_slice(&100_000u32.to_le_bytes());
        junk.extend_from_slice(&[9u8; 120]);
        append(&last, &junk);
        assert_eq!(read_all(&dir), blocks);
        // A complete record after the torn one is still found (the search goes on from the byte
        // after a magic whose record does not fit).
        let mut more = magic.to_vec();
        more.extend_from_slice(&90u32.to_le_bytes());
        more.extend_from_slice(&[7u8; 90]);
        append(&last, &more);
        let mut want = blocks.clone();
        want.push(vec![7u8; 90]);
        assert_eq!(read_all(&dir), want);
    }

    #[test]
    fn another_networks_files_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let mut w = BlkWriter::new(tmp.path(), Network::Mainnet.magic(), 1 << 20).unwrap();
        w.write_block(&[7u8; 200]).unwrap();
        w.finish().unwrap();
        let dir = BlkDir::open(tmp.path(), Network::Regtest.magic(), "regtest").unwrap();
        let err = dir.scan_file(0).unwrap_err().to_string();
        assert!(err.contains("mainnet blocks"), "{err}");
    }

    #[test]
    fn magic_search_finds_every_offset() {
        let magic = [0xfa, 0xbf, 0xb5, 0xda];
        for at in 0..12 {
            let mut data = vec![0xfau8; 16];
            data[at..at + 4].copy_from_slice(&magic);
            assert_eq!(find_magic(&data, magic), Some(at));
            assert_eq!(find_magic(&data[..at + 3], magic), None);
        }
    }
}
