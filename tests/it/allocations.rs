//! BIP157 messages are encoded and decoded with a constant number of allocations, however many
//! hashes or how large a filter they carry (issue 5; btcd once allocated per hash). Counted with
//! a counting global allocator around cairn's own codec.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bitcoin::bip158::{FilterHash, FilterHeader};
use bitcoin::hashes::Hash;
use bitcoin::p2p::message::NetworkMessage;
use bitcoin::p2p::message_filter::{CFCheckpt, CFHeaders, CFilter};
use bitcoin::p2p::Magic;
use bitcoin::BlockHash;
use cairn::p2p::codec::{read_message, write_message_with, Incoming};

/// Counts the allocations of the thread that asks: the suite's other tests allocate on their
/// own threads meanwhile (one test binary), and the codec runs on this one (a current-thread
/// runtime).
struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with`: a thread being torn down no longer has its counter, and is not counted.
    let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn counted<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCS.with(Cell::get);
    let out = f();
    (out, ALLOCS.with(Cell::get) - before)
}

fn cfheaders(n: usize) -> NetworkMessage {
    NetworkMessage::CFHeaders(CFHeaders {
        filter_type: 0,
        stop_hash: BlockHash::all_zeros(),
        previous_filter_header: FilterHeader::all_zeros(),
        filter_hashes: (0..n).map(|i| FilterHash::hash(&i.to_le_bytes())).collect(),
    })
}

fn cfcheckpt(n: usize) -> NetworkMessage {
    NetworkMessage::CFCheckpt(CFCheckpt {
        filter_type: 0,
        stop_hash: BlockHash::all_zeros(),
        filter_headers: (0..n)
            .map(|i| FilterHeader::hash(&i.to_le_bytes()))
            .collect(),
    })
}

fn cfilter(bytes: usize) -> NetworkMessage {
    NetworkMessage::CFilter(CFilter {
        filter_type: 0,
        block_hash: BlockHash::all_zeros(),
        filter: vec![7u8; bytes],
    })
}

#[test]
fn bip157_messages_cost_a_constant_number_of_allocations() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let magic = Magic::REGTEST;
    let mut buf = Vec::new();
    let mut sink = Vec::with_capacity(1 << 20);
    // Warm the reused encode buffer with the largest message.
    rt.block_on(write_message_with(
        &mut sink,
        magic,
        cfheaders(2000),
        &mut buf,
    ))
    .unwrap();
    for (small, large, what) in [
        (
            cfheaders(20),
            cfheaders(2000),
            "cfheaders 20 vs 2000 hashes",
        ),
        (cfcheckpt(2), cfcheckpt(1000), "cfcheckpt 2 vs 1000 headers"),
        (cfilter(10), cfilter(30_000), "cfilter 10 vs 30,000 bytes"),
    ] {
        // Encoding into the connection's reused buffer: nothing once it has grown.
        sink.clear();
        let (small_msg, large_msg) = (small.clone(), large.clone());
        let (_, enc_small) = counted(|| {
            rt.block_on(write_message_with(&mut sink, magic, small_msg, &mut buf))
                .unwrap()
        });
        let small_bytes = sink.clone();
        sink.clear();
        let (_, enc_large) = counted(|| {
            rt.block_on(write_message_with(&mut sink, magic, large_msg, &mut buf))
                .unwrap()
        });
        let large_bytes = sink.clone();
        assert_eq!(enc_small, 0, "{what}: encoding allocated {enc_small} times");
        assert_eq!(enc_large, 0, "{what}: encoding allocated {enc_large} times");
        // Decoding: the payload buffer and the message's one vector, whatever the count.
        let (msg, dec_small) = counted(|| {
            rt.block_on(read_message(&mut small_bytes.as_slice(), magic))
                .unwrap()
        });
        let (msg_large, dec_large) = counted(|| {
            rt.block_on(read_message(&mut large_bytes.as_slice(), magic))
                .unwrap()
        });
        assert!(
            matches!(msg, Incoming::Message(ref m) if *m == small),
            "{what}: round trip"
        );
        assert!(
            matches!(msg_large, Incoming::Message(ref m) if *m == large),
            "{what}: round trip"
        );
        assert_eq!(
            dec_small, dec_large,
            "{what}: decoding allocated {dec_small} vs {dec_large} times"
        );
        assert!(
            dec_large <= 8,
            "{what}: decoding allocated {dec_large} times"
        );
    }
}
