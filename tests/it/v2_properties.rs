//! Properties of BIP324 message contents (`cairn::p2p::v2`), 2,000 cases each: what cairn
//! writes reads back as the same command and payload, and no byte string makes the reader or
//! the message decoder behind it panic.

use bitcoin::p2p::Magic;
use cairn::p2p::codec::{decode, max_payload};
use cairn::p2p::v2::{contents, split_contents};
use proptest::prelude::*;

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
    "filterload",
    "merkleblock",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn contents_round_trip(i in 0..COMMANDS.len(), payload in proptest::collection::vec(any::<u8>(), 0..300)) {
        let command = COMMANDS[i];
        let written = contents(command, &payload);
        let (read, body) = split_contents(&written).unwrap();
        prop_assert_eq!(read, command);
        prop_assert_eq!(body, &payload[..]);
    }

    #[test]
    fn any_contents_are_refused_or_decoded_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok((command, payload)) = split_contents(&bytes) {
            prop_assert!(command.len() <= 12);
            if payload.len() <= max_payload(&command) as usize {
                let _ = decode(Magic::REGTEST, &command, payload.to_vec());
            }
        }
    }

    #[test]
    fn a_known_type_with_any_payload_decodes_or_is_refused(i in 0..COMMANDS.len(), payload in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode(Magic::REGTEST, COMMANDS[i], payload);
    }
}
