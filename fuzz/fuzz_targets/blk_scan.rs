//! The blk-file reader (`cairn::import::blkfiles::find_records`): the records it finds must lie
//! inside the file, not overlap, start after this network's magic and the length they were read
//! with, and together with the bytes it skipped cover the file exactly.
#![no_main]

use cairn::import::blkfiles::find_records;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let magic = bitcoin::Network::Regtest.magic().to_bytes();
    let (records, skipped) = find_records(data, magic, 7);
    let mut end = 0u64;
    let mut covered = 0u64;
    for record in &records {
        assert_eq!(record.file, 7);
        assert!(record.offset >= end + 8, "records overlap");
        let head = (record.offset - 8) as usize;
        assert_eq!(data[head..head + 4], magic);
        assert_eq!(data[head + 4..head + 8], record.len.to_le_bytes());
        end = record.offset + u64::from(record.len);
        assert!(end <= data.len() as u64, "record past the end of the file");
        covered += 8 + u64::from(record.len);
    }
    assert_eq!(covered + skipped, data.len() as u64);
});
