//! The P2P message decoder (`cairn::p2p::codec::read_message`): a stream of framed messages, as
//! a peer sends them. Half the inputs are taken as raw bytes (magic, header and checksum up to
//! the fuzzer); the other half are framed here with the right magic, length and checksum around
//! a fuzzed payload of a command picked from the list, so the payload decoders are reached.
#![no_main]

use bitcoin::hashes::{sha256d, Hash};
use cairn::p2p::codec::{max_payload, read_message, CodecError, Incoming};
use libfuzzer_sys::fuzz_target;

const COMMANDS: &[&str] = &[
    "version",
    "verack",
    "addr",
    "addrv2",
    "inv",
    "getdata",
    "notfound",
    "getblocks",
    "getheaders",
    "tx",
    "block",
    "headers",
    "sendheaders",
    "getaddr",
    "mempool",
    "ping",
    "pong",
    "feefilter",
    "sendcmpct",
    "cmpctblock",
    "getblocktxn",
    "blocktxn",
    "getcfilters",
    "cfilter",
    "getcfheaders",
    "cfheaders",
    "getcfcheckpt",
    "cfcheckpt",
    "wtxidrelay",
    "sendaddrv2",
    "reject",
    "alert",
];

fn frame(command: &str, payload: &[u8], magic: [u8; 4]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + payload.len());
    out.extend_from_slice(&magic);
    let mut name = [0u8; 12];
    name[..command.len()].copy_from_slice(command.as_bytes());
    out.extend_from_slice(&name);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&sha256d::Hash::hash(payload).as_byte_array()[..4]);
    out.extend_from_slice(payload);
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let magic = bitcoin::Network::Regtest.magic();
    let stream = if mode & 1 == 0 {
        rest.to_vec()
    } else {
        let command = COMMANDS[usize::from(mode >> 1) % COMMANDS.len()];
        frame(command, rest, magic.to_bytes())
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut reader = &stream[..];
        loop {
            let before = reader.len();
            match read_message(&mut reader, magic).await {
                Ok(Incoming::Block(raw)) => assert!(raw.len() as u32 <= max_payload("block")),
                Ok(Incoming::Message(_)) => {}
                Err(CodecError::Oversized { command, len }) => assert!(len > max_payload(&command)),
                Err(_) => break,
            }
            // Every message read consumes at least its header.
            assert!(reader.len() + 24 <= before);
        }
    });
});
