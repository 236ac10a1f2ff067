//! BlindBit Oracle's filters: BIP158's Golomb-coded sets (P = 19, M = 784,931, SipHash key =
//! the first 16 bytes of the block's hash in internal byte order) over elements as BlindBit
//! hashes them, and *without* BIP158's deduplication, since btcutil's `BuildGCSFilter` (which
//! BlindBit calls) keeps repeated elements: the bytes equal BlindBit's, and every BIP158 reader
//! (rust-bitcoin's, btcd's) matches them.

use bitcoin::consensus::Encodable;
use bitcoin::hashes::{sha256, siphash24, Hash};
use bitcoin::{BlockHash, OutPoint};

/// BIP158's Golomb-Rice parameter of basic filters.
const P: u8 = 19;
/// BIP158's false-positive rate parameter of basic filters.
const M: u64 = 784_931;

/// The filter of `elements` keyed by `block`: a CompactSize count, then the Golomb-Rice coded
/// sorted deltas, zero-padded to a whole byte. Empty: the single byte 0.
pub(super) fn filter<E: AsRef<[u8]>>(block: &BlockHash, elements: &[E]) -> Vec<u8> {
    let hash = block.to_byte_array();
    let k0 = u64::from_le_bytes(hash[0..8].try_into().unwrap_or_default());
    let k1 = u64::from_le_bytes(hash[8..16].try_into().unwrap_or_default());
    let range = elements.len() as u128 * u128::from(M);
    let mut values: Vec<u64> = elements
        .iter()
        .map(|e| {
            let h = siphash24::Hash::hash_to_u64_with_keys(k0, k1, e.as_ref());
            ((u128::from(h) * range) >> 64) as u64
        })
        .collect();
    values.sort_unstable();
    let mut out = Vec::with_capacity(9 + elements.len() * 3);
    bitcoin::consensus::encode::VarInt(elements.len() as u64)
        .consensus_encode(&mut out)
        .unwrap_or_default();
    let mut bits = Bits::new(out);
    let mut last = 0;
    for value in values {
        let delta = value - last;
        last = value;
        for _ in 0..(delta >> P) {
            bits.push(true);
        }
        bits.push(false);
        for i in (0..P).rev() {
            bits.push((delta >> i) & 1 == 1);
        }
    }
    bits.finish()
}

/// BlindBit's element for an outpoint spent in `block`: the first 8 bytes of
/// `SHA256(txid ‖ vout (LE) ‖ spending block's hash)`, hashes in internal byte order.
pub(super) fn spent_element(outpoint: &OutPoint, block: &BlockHash) -> [u8; 8] {
    let mut preimage = [0u8; 68];
    preimage[..32].copy_from_slice(&outpoint.txid.to_byte_array());
    preimage[32..36].copy_from_slice(&outpoint.vout.to_le_bytes());
    preimage[36..].copy_from_slice(&block.to_byte_array());
    let hash = sha256::Hash::hash(&preimage).to_byte_array();
    let mut element = [0u8; 8];
    element.copy_from_slice(&hash[..8]);
    element
}

/// Bits written most significant first into bytes after a prefix.
struct Bits {
    out: Vec<u8>,
    used: u8,
}

impl Bits {
    fn new(out: Vec<u8>) -> Self {
        Bits { out, used: 8 }
    }

    fn push(&mut self, bit: bool) {
        if self.used == 8 {
            self.out.push(0);
            self.used = 0;
        }
        if bit {
            if let Some(last) = self.out.last_mut() {
                *last |= 0x80 >> self.used;
            }
        }
        self.used += 1;
    }

    fn finish(self) -> Vec<u8> {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::bip158::BlockFilter;
    use bitcoin::hex::{DisplayHex, FromHex};
    use proptest::prelude::*;
    use std::str::FromStr;

    /// BlindBit's recorded answers for signet block 200,000 (cygnet3/spdk's test resources,
    /// `spdk-wallet/tests/resources/blocks/200000/{spent-index,filter-spent}.json`): the spent
    /// filter built from its spent-index is BlindBit's, byte for byte.
    #[test]
    fn spent_filter_is_blindbits() {
        let block =
            BlockHash::from_str("0000007d60f5ffc47975418ac8331c0ea52cf551730ef7ead7ff9082a536f13c")
                .unwrap();
        let index = [
            "5ea6df04ec36f675",
            "9a1d90bb03803026",
            "7bc4e53858293570",
            "330d66139bb64141",
            "09bab772d78ca0ee",
            "ecad3af91fc6a131",
            "6fff52b302fb40f9",
            "70413efe0a452ce1",
            "186aa67d84e6d0d1",
            "a05712d36dc861eb",
            "13a3176c922da116",
        ]
        .map(|e| Vec::<u8>::from_hex(e).unwrap());
        assert_eq!(
            filter(&block, &index).to_lower_hex_string(),
            "0b312ff7c3ad07780f48dfa75a4462d805eff4ea296a11420c7f35c7bf18"
        );
        assert_eq!(filter::<[u8; 8]>(&block, &[]), vec![0]);
    }

    /// An outpoint spent in signet block 200,001, entry 37 of that block's spent-index as
    /// BlindBit serves it (spdk's test resources).
    #[test]
    fn spent_element_is_blindbits() {
        let outpoint = OutPoint::from_str(
            "072d71102a0833384f3192c896d4b41d2e9316499e6a8fa0b3220ab310cfa631:1",
        )
        .unwrap();
        let block =
            BlockHash::from_str("000000ad6bf1ea934186822de99a611924d94aff8fbcb1ad6be2c790c3b92ae1")
                .unwrap();
        assert_eq!(
            spent_element(&outpoint, &block).to_lower_hex_string(),
            "9f146344f96ff554"
        );
    }

    proptest! {
        /// rust-bitcoin's BIP158 reader finds every element in the filter, repeated ones
        /// included, whatever the block.
        #[test]
        fn readers_find_every_element(
            hash in any::<[u8; 32]>(),
            elements in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..60),
            repeat in any::<proptest::sample::Index>(),
        ) {
            let block = BlockHash::from_byte_array(hash);
            let mut elements = elements;
            let again = elements[repeat.index(elements.len())].clone();
            elements.push(again);
            let bytes = filter(&block, &elements);
            let read = BlockFilter::new(&bytes);
            for e in &elements {
                prop_assert!(read.match_any(&block, std::iter::once(e.as_slice())).unwrap());
            }
        }
    }
}
