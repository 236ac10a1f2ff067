//! The address book on disk (`addrbook.dat` in the network's data dir), so that a restart
//! reconnects to known peers without asking DNS seeds again. Saved every 15 minutes and on
//! shutdown (Bitcoin Core's `DUMP_PEERS_INTERVAL`), written to a temporary file, synced and
//! renamed over the old one. Read once at start; a file that is corrupt or belongs to another
//! network is renamed aside (`addrbook.dat.bad-<unix time>`) with a warning, never fatal.
//!
//! Format: the 8 bytes `cairnab1`, the network magic (4), the entry count (u32 LE), then per
//! entry an IPv6 or IPv4-mapped address (16), the port (u16 BE), the services (u64 LE) and the
//! last-seen time (u32 LE); then SHA-256d of everything before (32).

use std::io::Write;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use bitcoin::hashes::{sha256d, Hash};
use bitcoin::p2p::ServiceFlags;

use super::addrbook::{AddrBook, KnownAddr, MAX_ADDRESSES};

/// How often a running node saves its book.
pub const SAVE_INTERVAL: Duration = Duration::from_secs(15 * 60);
const TAG: &[u8; 8] = b"cairnab1";
const HEADER: usize = 8 + 4 + 4;
const ENTRY: usize = 16 + 2 + 8 + 4;
const CHECKSUM: usize = 32;

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

/// The book's bytes in the format above.
pub fn encode(entries: &[KnownAddr], magic: [u8; 4]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + entries.len() * ENTRY + CHECKSUM);
    out.extend_from_slice(TAG);
    out.extend_from_slice(&magic);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        let ip = match e.addr.ip() {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        out.extend_from_slice(&ip.octets());
        out.extend_from_slice(&e.addr.port().to_be_bytes());
        out.extend_from_slice(&e.services.to_u64().to_le_bytes());
        out.extend_from_slice(&e.last_seen.to_le_bytes());
    }
    let checksum = sha256d::Hash::hash(&out);
    out.extend_from_slice(checksum.as_byte_array());
    out
}

/// The entries of a saved book of the network with `magic`.
pub fn decode(bytes: &[u8], magic: [u8; 4]) -> Result<Vec<KnownAddr>, LoadError> {
    let corrupt = |why: &str| LoadError::Corrupt(why.to_string());
    if bytes.len() < HEADER + CHECKSUM || &bytes[..8] != TAG {
        return Err(corrupt("not a cairn address book"));
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
    let count = u32::from_le_bytes([body[12], body[13], body[14], body[15]]) as usize;
    if count > MAX_ADDRESSES || body.len() != HEADER + count * ENTRY {
        return Err(corrupt("entry count does not fit the length"));
    }
    Ok(body[HEADER..].chunks_exact(ENTRY).map(entry).collect())
}

fn entry(b: &[u8]) -> KnownAddr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&b[..16]);
    let v6 = Ipv6Addr::from(octets);
    let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
    let port = u16::from_be_bytes([b[16], b[17]]);
    let mut services = [0u8; 8];
    services.copy_from_slice(&b[18..26]);
    KnownAddr {
        addr: SocketAddr::new(ip, port),
        services: ServiceFlags::from(u64::from_le_bytes(services)),
        last_seen: u32::from_le_bytes([b[26], b[27], b[28], b[29]]),
    }
}

/// Writes the book to `path`: a temporary file, synced, renamed over the old one.
pub fn save(book: &AddrBook, path: &Path, magic: [u8; 4]) -> std::io::Result<usize> {
    let entries = book.all();
    let tmp = path.with_extension("dat.new");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(&encode(&entries, magic))?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(entries.len())
}

/// Adds a saved book to `book`; a missing file is an empty book, one that cannot be used is
/// renamed aside with a warning. Returns how many addresses it added.
pub fn load(book: &AddrBook, path: &Path, magic: [u8; 4]) -> usize {
    let read = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return 0,
        Ok(meta) if meta.len() > (HEADER + MAX_ADDRESSES * ENTRY + CHECKSUM) as u64 => Err(
            LoadError::Corrupt(format!("{} bytes, more than a full book", meta.len())),
        ),
        _ => std::fs::read(path)
            .map_err(LoadError::from)
            .and_then(|bytes| decode(&bytes, magic)),
    };
    match read {
        Ok(entries) => {
            let added = book.add(entries);
            tracing::info!("address book: {added} addresses from {}", path.display());
            added
        }
        Err(e) => {
            set_aside(path, &e);
            0
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

    fn sample() -> Vec<KnownAddr> {
        vec![
            KnownAddr {
                addr: "203.0.113.7:8333".parse().unwrap(),
                services: ServiceFlags::NETWORK | ServiceFlags::WITNESS,
                last_seen: 1_700_000_000,
            },
            KnownAddr {
                addr: "[2001:db8::1]:18444".parse().unwrap(),
                services: ServiceFlags::NONE,
                last_seen: 5,
            },
        ]
    }

    #[test]
    fn entries_round_trip_and_every_damage_is_refused() {
        let bytes = encode(&sample(), MAGIC);
        assert_eq!(decode(&bytes, MAGIC).unwrap(), sample());
        assert_eq!(bytes.len(), HEADER + 2 * ENTRY + CHECKSUM);
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
    fn a_bad_file_is_set_aside_and_a_good_one_fills_the_book() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("addrbook.dat");
        let book = AddrBook::new(true);
        assert_eq!(load(&book, &path, MAGIC), 0, "no file: an empty book");
        std::fs::write(&path, b"not a book").unwrap();
        assert_eq!(load(&book, &path, MAGIC), 0);
        assert!(!path.exists(), "moved aside");
        let aside: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            aside.iter().any(|n| n.starts_with("addrbook.dat.bad-")),
            "{aside:?}"
        );

        let full = AddrBook::new(true);
        full.add(sample());
        assert_eq!(save(&full, &path, MAGIC).unwrap(), 2);
        assert_eq!(load(&book, &path, MAGIC), 2);
        let mut got = book.all();
        got.sort_by_key(|k| k.last_seen);
        let mut want = sample();
        want.sort_by_key(|k| k.last_seen);
        assert_eq!(got, want);
        // Another network's book is not read, but set aside, not deleted.
        assert_eq!(load(&AddrBook::new(true), &path, [9, 9, 9, 9]), 0);
        assert!(!path.exists());
    }
}
