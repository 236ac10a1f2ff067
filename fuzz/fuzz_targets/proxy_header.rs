//! The PROXY header reader (`cairn::listen::proxy::read_header`), versions 1 and 2, on any
//! bytes: it never panics, never reads more than the longest header it takes, and what it
//! accepts is exactly the bytes it read, which parse to the same client on their own.
#![no_main]

use std::time::Duration;

use cairn::listen::proxy::{parse, read_header, MAX_HEADER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let mut input = data;
    let read = rt.block_on(read_header(&mut input, Duration::from_secs(1)));
    let used = data.len() - input.len();
    assert!(used <= MAX_HEADER, "read {used} bytes");
    if let Ok(proxied) = read {
        assert_eq!(parse(&data[..used]).ok(), Some(proxied));
    }
});
