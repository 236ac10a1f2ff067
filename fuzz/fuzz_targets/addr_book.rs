//! The address book (`cairn::p2p::addrbook`): a third of the inputs are replayed as operations
//! on the tables (gossip, connections, failures, picks, collisions, restarts; the tables are
//! checked after each, as Core's `CheckAddrman`), the rest are read as a saved `addrbook.dat`
//! (half of them sealed here with the right checksum, so the entry decoder is reached), put
//! back into tables that must then be consistent, and saved again to the same entries. Saved
//! times are clamped to the wall clock as they are read, so a crash in that half may need the
//! clock of its day to reproduce.
#![no_main]

use bitcoin::hashes::{sha256d, Hash};
use cairn::p2p::addrbook::tables::{replay::replay, Tables};
use cairn::p2p::addrbook_file::{decode, encode, Saved};
use libfuzzer_sys::fuzz_target;

const MAGIC: [u8; 4] = [0xfa, 0xbf, 0xb5, 0xda];

fn sealed(body: &[u8]) -> Vec<u8> {
    let mut out = b"cairnab2".to_vec();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(body);
    let checksum = sha256d::Hash::hash(&out);
    out.extend_from_slice(checksum.as_byte_array());
    out
}

fn read_saved(bytes: &[u8]) {
    let Ok(Saved::Tables(key, infos)) = decode(bytes, MAGIC) else {
        return;
    };
    let now = cairn::p2p::addrbook::now_secs();
    let mut tables = Tables::new(key);
    for info in &infos {
        tables.restore(info.clone(), now);
    }
    if let Err(e) = tables.check() {
        panic!("restored tables inconsistent: {e}");
    }
    let entries: Vec<_> = tables.entries().cloned().collect();
    let again = encode(key, &entries, MAGIC);
    match decode(&again, MAGIC) {
        Ok(Saved::Tables(k, back)) => assert!(k == key && back.len() == entries.len()),
        other => panic!("a saved book did not read back: {other:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            if let Err(e) = replay(rest) {
                panic!("{e}");
            }
        }
        1 => read_saved(&sealed(rest)),
        _ => read_saved(rest),
    }
});
