//! The address book on disk (`addrbook.dat` in the network's data dir), so that a restart
//! reconnects to known peers without asking DNS seeds again, and keeps the tables' places
//! (their secret key is saved too). Saved every 15 minutes and on shutdown (Bitcoin Core's
//! `DUMP_PEERS_INTERVAL`), written to a temporary file, synced and renamed over the old one.
//! Read once at start; a file that is corrupt or belongs to another network is renamed aside
//! (`addrbook.dat.bad-<unix time>`) with a warning, never fatal.
//!
//! Format 2 (`cairnab2`): the tag (8), the network magic (4), the key (32), the entry count
//! (u32 LE), then per entry an IPv6 or IPv4-mapped address (16), the port (u16 BE), the
//! services (u64 LE), the time (i64 LE), the source (16), the last success (i64 LE), the
//! failed attempts (u32 LE) and 1 if it is in the tried table, else 0; then SHA-256d of
//! everything before (32).
//!
//! Format 1 (`cairnab1`, before the tables): no key; per entry the address (16), port (2),
//! services (8) and last-seen time (u32 LE). It is read once: its entries go to the new table,
//! all filed under one internal source (which peer told of each was not kept, and a book
//! filled by the old, unbounded gossip must reach no more than one source group's buckets),
//! and the next save writes format 2.
//!
//! `anchors.dat` beside it (`cairnan1`, the magic, a count, then address and port per entry,
//! then SHA-256d) holds the outbound peers cairn was connected to when it stopped (Core's
//! `anchors.dat`): they are dialled first at the next start, and the file is deleted once read.

use std::io::Write;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use bitcoin::hashes::{sha256d, Hash};
use bitcoin::p2p::ServiceFlags;

use super::addrbook::{internal_source, AddrBook, Info, KnownAddr, MAX_ADDRESSES};

/// How often a running node saves its book.
pub const SAVE_INTERVAL: Duration = Duration::from_secs(15 * 60);
/// Most anchors kept (Core's `MAX_BLOCK_RELAY_ONLY_ANCHORS`).
pub const MAX_ANCHORS: usize = 2;
const TAG_V1: &[u8; 8] = b"cairnab1";
const TAG_V2: &[u8; 8] = b"cairnab2";
const TAG_ANCHORS: &[u8; 8] = b"cairnan1";
const ENTRY_V1: usize = 16 + 2 + 8 + 4;
const ENTRY_V2: usize = 16 + 2 + 8 + 8 + 16 + 8 + 4 + 1;
const CHECKSUM: usize = 32;
/// Failed attempts read back at most (far past every threshold that counts them).
const MAX_SAVED_ATTEMPTS: u32 = 1_000;

/// Why a saved book was not read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// It could not be read at all.
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    /// It is not a whole, unaltered cairn address book.
    #[error("it is corrupt: {0}")]
    Corrupt(String),
    /// It is a cairn address book of another network.
    #[error("it belongs to another network (magic {0})")]
    Foreign(String),
}

/// What a saved book holds.
#[derive(Debug)]
pub enum Saved {
    /// Format 2: the key and the entries as they were.
    Tables([u8; 32], Vec<Info>),
    /// Format 1: addresses only.
    Addresses(Vec<KnownAddr>),
}

fn ip_bytes(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

fn ip_of(b: &[u8]) -> IpAddr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&b[..16]);
    let v6 = Ipv6Addr::from(octets);
    v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
}

fn socket_of(b: &[u8]) -> SocketAddr {
    SocketAddr::new(ip_of(b), u16::from_be_bytes([b[16], b[17]]))
}

fn put_socket(out: &mut Vec<u8>, addr: &SocketAddr) {
    out.extend_from_slice(&ip_bytes(addr.ip()));
    out.extend_from_slice(&addr.port().to_be_bytes());
}

fn u64_at(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[..8]);
    u64::from_le_bytes(x)
}

fn u32_at(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// A file's start: its tag, the network magic, then (after `key`, if any) the entry count.
fn begin(tag: &[u8; 8], magic: [u8; 4], key: &[u8], count: usize, entry: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + key.len() + count * entry + CHECKSUM);
    out.extend_from_slice(tag);
    out.extend_from_slice(&magic);
    out.extend_from_slice(key);
    out.extend_from_slice(&(count as u32).to_le_bytes());
    out
}

fn seal(mut out: Vec<u8>) -> Vec<u8> {
    let checksum = sha256d::Hash::hash(&out);
    out.extend_from_slice(checksum.as_byte_array());
    out
}

/// The book's bytes in format 2.
pub fn encode(key: [u8; 32], entries: &[Info], magic: [u8; 4]) -> Vec<u8> {
    let mut out = begin(TAG_V2, magic, &key, entries.len(), ENTRY_V2);
    for e in entries {
        put_socket(&mut out, &e.addr);
        out.extend_from_slice(&e.services.to_u64().to_le_bytes());
        out.extend_from_slice(&e.time.to_le_bytes());
        out.extend_from_slice(&ip_bytes(e.source));
        out.extend_from_slice(&e.last_success.to_le_bytes());
        out.extend_from_slice(&e.attempts.to_le_bytes());
        out.push(u8::from(e.in_tried));
    }
    seal(out)
}

/// The body of a sealed file with `tag` of the network with `magic` (checksum checked).
fn open<'a>(bytes: &'a [u8], tag: &[u8; 8], magic: [u8; 4]) -> Result<&'a [u8], LoadError> {
    let corrupt = |why: &str| LoadError::Corrupt(why.to_string());
    if bytes.len() < 12 + CHECKSUM || &bytes[..8] != tag {
        return Err(corrupt("not a cairn file of this kind"));
    }
    let (body, checksum) = bytes.split_at(bytes.len() - CHECKSUM);
    if sha256d::Hash::hash(body).as_byte_array() != checksum {
        return Err(corrupt("checksum mismatch"));
    }
    if body[8..12] != magic {
        return Err(LoadError::Foreign(
            body[8..12].iter().map(|b| format!("{b:02x}")).collect(),
        ));
    }
    Ok(&body[12..])
}

/// `count` entries of `size` bytes after a u32 count at the start of `rest`.
fn entries(rest: &[u8], size: usize) -> Result<std::slice::ChunksExact<'_, u8>, LoadError> {
    let count = rest.get(..4).map(u32_at).unwrap_or(u32::MAX) as usize;
    if count > MAX_ADDRESSES || rest.len() != 4 + count * size {
        return Err(LoadError::Corrupt(
            "entry count does not fit the length".into(),
        ));
    }
    Ok(rest[4..].chunks_exact(size))
}

/// What a saved book of the network with `magic` holds, in either format.
pub fn decode(bytes: &[u8], magic: [u8; 4]) -> Result<Saved, LoadError> {
    if bytes.starts_with(TAG_V1) {
        let rest = open(bytes, TAG_V1, magic)?;
        return Ok(Saved::Addresses(
            entries(rest, ENTRY_V1)?.map(entry_v1).collect(),
        ));
    }
    let rest = open(bytes, TAG_V2, magic)?;
    if rest.len() < 32 {
        return Err(LoadError::Corrupt("no key".into()));
    }
    let mut key = [0u8; 32];
    key.copy_from_slice(&rest[..32]);
    let infos = entries(&rest[32..], ENTRY_V2)?.map(entry_v2);
    Ok(Saved::Tables(key, infos.collect::<Result<_, _>>()?))
}

fn entry_v1(b: &[u8]) -> KnownAddr {
    KnownAddr {
        addr: socket_of(b),
        services: ServiceFlags::from(u64_at(&b[18..])),
        last_seen: u32_at(&b[26..]),
    }
}

fn entry_v2(b: &[u8]) -> Result<Info, LoadError> {
    let in_tried = match b[62] {
        0 => false,
        1 => true,
        other => return Err(LoadError::Corrupt(format!("tried flag {other}"))),
    };
    let mut info = Info::restored(socket_of(b), ip_of(&b[34..]));
    info.services = ServiceFlags::from(u64_at(&b[18..]));
    // A file is input too: times beyond now (a clock that jumped back, or an edited file)
    // would make an entry never terrible or its tried place never testable.
    let now = super::addrbook::now_secs();
    let time = |at: usize| (u64_at(&b[at..]).min(i64::MAX as u64) as i64).min(now);
    info.time = time(26);
    info.last_success = time(50);
    info.attempts = u32_at(&b[58..]).min(MAX_SAVED_ATTEMPTS);
    info.in_tried = in_tried;
    Ok(info)
}

/// Writes `bytes` to `path`: a temporary file, synced, renamed over the old one.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("dat.new");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Writes the book to `path`; returns how many entries it holds.
pub fn save(book: &AddrBook, path: &Path, magic: [u8; 4]) -> std::io::Result<usize> {
    let (key, entries) = book.saved();
    write_atomically(path, &encode(key, &entries, magic))?;
    Ok(entries.len())
}

/// The book saved at `path`; a missing file is an empty book, one that cannot be used is
/// renamed aside with a warning (and an empty book is returned).
pub fn load(path: &Path, magic: [u8; 4], allow_local: bool) -> AddrBook {
    let max = (48 + MAX_ADDRESSES * ENTRY_V2 + CHECKSUM) as u64;
    let read = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return AddrBook::new(allow_local),
        Ok(meta) if meta.len() > max => Err(LoadError::Corrupt(format!(
            "{} bytes, more than a full book",
            meta.len()
        ))),
        _ => std::fs::read(path)
            .map_err(LoadError::from)
            .and_then(|bytes| decode(&bytes, magic)),
    };
    match read {
        Ok(Saved::Tables(key, infos)) => {
            let book = AddrBook::with_key(allow_local, key);
            let placed = book.restore(infos);
            tracing::info!("address book: {placed} addresses from {}", path.display());
            book
        }
        Ok(Saved::Addresses(known)) => {
            let book = AddrBook::new(allow_local);
            let placed = book.add(known, internal_source("addrbook-v1"));
            tracing::info!(
                "address book: {placed} addresses from {} (format 1, rewritten as 2 on the next save)",
                path.display()
            );
            book
        }
        Err(e) => {
            set_aside(path, &e);
            AddrBook::new(allow_local)
        }
    }
}

/// Saves the outbound peers to dial first at the next start (at most [`MAX_ANCHORS`]).
pub fn save_anchors(path: &Path, anchors: &[SocketAddr], magic: [u8; 4]) -> std::io::Result<()> {
    let anchors = &anchors[..anchors.len().min(MAX_ANCHORS)];
    let mut out = begin(TAG_ANCHORS, magic, &[], anchors.len(), 18);
    for a in anchors {
        put_socket(&mut out, a);
    }
    write_atomically(path, &seal(out))
}

/// The anchors saved at `path`, which is deleted (as Core's `ReadAnchors`): a crash after
/// this start does not bring back the same peers for ever. Anything unreadable is none.
pub fn take_anchors(path: &Path, magic: [u8; 4]) -> Vec<SocketAddr> {
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!("anchors {} not deleted: {e}", path.display());
    }
    let anchors = open(&bytes, TAG_ANCHORS, magic)
        .and_then(|rest| Ok(entries(rest, 18)?.map(socket_of).collect::<Vec<_>>()));
    match anchors {
        Ok(mut a) => {
            a.truncate(MAX_ANCHORS);
            a
        }
        Err(e) => {
            tracing::warn!("anchors {} not used, {e}", path.display());
            Vec::new()
        }
    }
}

fn set_aside(path: &Path, why: &LoadError) {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let aside = path.with_extension(format!("dat.bad-{stamp}"));
    match std::fs::rename(path, &aside) {
        Ok(()) => tracing::warn!(
            "address book {} not used, {why}; moved to {}",
            path.display(),
            aside.display()
        ),
        Err(e) => tracing::warn!(
            "address book {} not used, {why}; could not move it aside: {e}",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAGIC: [u8; 4] = [0xfa, 0xbf, 0xb5, 0xda];

    /// Two addresses in network groups of their own (two unroutable ones would share group 0,
    /// so one bucket, and take the same place one time in 64).
    fn sample() -> Vec<KnownAddr> {
        let now = super::super::addrbook::now_secs() as u32;
        vec![
            KnownAddr {
                addr: "8.8.4.7:8333".parse().unwrap(),
                services: ServiceFlags::NETWORK | ServiceFlags::WITNESS,
                last_seen: now - 7200,
            },
            KnownAddr {
                addr: "[2a01:4f8::1]:18444".parse().unwrap(),
                services: ServiceFlags::NONE,
                last_seen: now - 100,
            },
        ]
    }

    fn book() -> AddrBook {
        // A fixed key whose places for these do not collide.
        let book = AddrBook::with_key(true, [3; 32]);
        book.add(sample(), "127.0.0.2".parse().unwrap());
        book.mark_good("127.0.0.9:18444".parse().unwrap(), ServiceFlags::NETWORK);
        book
    }

    fn sorted(book: &AddrBook) -> Vec<(SocketAddr, IpAddr, i64, bool)> {
        let mut all: Vec<_> = (book.saved().1.into_iter())
            .map(|i| (i.addr, i.source, i.time, i.in_tried))
            .collect();
        all.sort();
        all
    }

    #[test]
    fn entries_round_trip_and_every_damage_is_refused() {
        let (key, entries) = book().saved();
        let bytes = encode(key, &entries, MAGIC);
        assert_eq!(bytes.len(), 48 + 3 * ENTRY_V2 + CHECKSUM);
        let Ok(Saved::Tables(k, back)) = decode(&bytes, MAGIC) else {
            panic!("not read back");
        };
        assert_eq!(k, key);
        let fields = |i: &Info| {
            let saved = (i.services, i.time, i.last_success, i.attempts, i.in_tried);
            (i.addr, i.source, saved)
        };
        assert_eq!(
            back.iter().map(fields).collect::<Vec<_>>(),
            entries.iter().map(fields).collect::<Vec<_>>()
        );
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x40;
            assert!(
                matches!(decode(&damaged, MAGIC), Err(LoadError::Corrupt(_))),
                "byte {i} flipped"
            );
        }
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len], MAGIC).is_err(), "cut at {len}");
        }
        assert!(
            matches!(decode(&bytes, [1, 2, 3, 4]), Err(LoadError::Foreign(m)) if m == "fabfb5da")
        );
    }

    #[test]
    fn a_bad_file_is_set_aside_and_a_good_one_brings_the_tables_back() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("addrbook.dat");
        assert!(
            load(&path, MAGIC, true).is_empty(),
            "no file: an empty book"
        );
        std::fs::write(&path, b"not a book").unwrap();
        assert!(load(&path, MAGIC, true).is_empty());
        assert!(!path.exists(), "moved aside");
        let aside: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            aside.iter().any(|n| n.starts_with("addrbook.dat.bad-")),
            "{aside:?}"
        );

        let full = book();
        assert_eq!(save(&full, &path, MAGIC).unwrap(), 3);
        let back = load(&path, MAGIC, true);
        assert_eq!(sorted(&back), sorted(&full));
        assert_eq!(back.counts(), (2, 1));
        // Another network's book is not read, but set aside, not deleted.
        assert!(load(&path, MAGIC_OTHER, true).is_empty());
        assert!(!path.exists());
    }

    const MAGIC_OTHER: [u8; 4] = [9, 9, 9, 9];

    /// Format 1 as cairn wrote it before the tables.
    fn encode_v1(entries: &[KnownAddr], magic: [u8; 4]) -> Vec<u8> {
        let mut out = begin(TAG_V1, magic, &[], entries.len(), ENTRY_V1);
        for e in entries {
            put_socket(&mut out, &e.addr);
            out.extend_from_slice(&e.services.to_u64().to_le_bytes());
            out.extend_from_slice(&e.last_seen.to_le_bytes());
        }
        seal(out)
    }

    #[test]
    fn a_format_1_book_is_read_once_and_saved_as_format_2() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("addrbook.dat");
        std::fs::write(&path, encode_v1(&sample(), MAGIC)).unwrap();
        let book = load(&path, MAGIC, true);
        assert_eq!(book.counts(), (2, 0));
        let first = sample()[0];
        let info = book.info(&first.addr).unwrap();
        // Filed under one internal source, so in one group's buckets, with the penalty.
        let time = i64::from(first.last_seen) - 2 * 3600;
        assert_eq!(
            (info.source, info.time),
            (internal_source("addrbook-v1"), time)
        );
        save(&book, &path, MAGIC).unwrap();
        assert!(std::fs::read(&path).unwrap().starts_with(TAG_V2));
        assert_eq!(sorted(&load(&path, MAGIC, true)), sorted(&book));
    }

    #[test]
    fn saved_times_from_the_future_are_read_as_now() {
        let (key, mut entries) = book().saved();
        for e in &mut entries {
            (e.time, e.last_success, e.attempts) = (i64::MAX, -1, u32::MAX);
        }
        let Ok(Saved::Tables(_, back)) = decode(&encode(key, &entries, MAGIC), MAGIC) else {
            panic!("not read back");
        };
        let now = super::super::addrbook::now_secs();
        for e in back {
            assert!(e.time <= now && e.last_success <= now, "{e:?}");
            assert_eq!(e.attempts, MAX_SAVED_ATTEMPTS);
        }
    }

    #[test]
    fn anchors_are_read_once() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("anchors.dat");
        let peers: Vec<SocketAddr> = ["1.2.3.4:8333", "[2a01::1]:8333", "5.6.7.8:8333"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        save_anchors(&path, &peers, MAGIC).unwrap();
        assert_eq!(take_anchors(&path, MAGIC_OTHER), Vec::<SocketAddr>::new());
        save_anchors(&path, &peers, MAGIC).unwrap();
        assert_eq!(take_anchors(&path, MAGIC), peers[..2]);
        assert!(!path.exists());
        assert!(take_anchors(&path, MAGIC).is_empty());
    }
}
