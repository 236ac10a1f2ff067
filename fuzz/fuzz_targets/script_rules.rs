//! The mempool's readers of untrusted scripts: Core's `Solver` (`solve`), Knots's data
//! counting (`datacarrier_bytes`, with an OPNet-shaped witness half the time) and its constant
//! propagation (`find_dead_parts`).
//!
//! Input: one byte `k`, then the script; when `k` is odd the script is also the leaf of a
//! five-item taproot witness whose first item is the script's first `k` bytes.
#![no_main]

use bitcoin::{Script, Witness};
use cairn::policy::data_rules::datacarrier_bytes;
use cairn::policy::dead_parts::{find_dead_parts, parse_ops};
use cairn::policy::solver::solve;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&k, script)) = data.split_first() else {
        return;
    };
    let _ = solve(Script::from_bytes(script));
    let witness = (k % 2 == 1).then(|| {
        let first = &script[..usize::from(k).min(script.len())];
        Witness::from_slice(&[first, &[][..], &[][..], script, &[0xc0; 65][..]])
    });
    let counted = datacarrier_bytes(script, witness.as_ref());
    assert!(counted.standard == 0 || counted.nonstandard == 0);
    assert!(counted.standard == 0 || counted.standard == script.len());
    let parsed = parse_ops(script);
    // The opcodes follow each other from the start, each ending where the next begins.
    let mut at = 0;
    for op in &parsed.ops {
        assert_eq!(op.at, at);
        assert!(op.at < op.data.start || op.data.is_empty());
        at = op.data.end;
    }
    if witness.is_none() && !parsed.complete {
        assert_eq!(counted.standard + counted.nonstandard, script.len());
    }
    if !parsed.complete {
        return;
    }
    assert_eq!(at, script.len());
    // Within the script (and the witness's first item) and one byte per conditional: a dead
    // part counts its guard's byte even when a drop counted it already, as Knots's does.
    let conditionals = parsed
        .ops
        .iter()
        .filter(|o| matches!(o.code, 0x63 | 0x64))
        .count();
    let first_item = witness
        .as_ref()
        .map_or(0, |_| usize::from(k).min(script.len()));
    assert!(counted.nonstandard <= script.len() + conditionals + first_item);
    let dead = find_dead_parts(script, &parsed.ops);
    assert!(dead.at_if.iter().all(|&o| matches!(script[o], 0x63 | 0x64)));
    assert!(dead.at_else.iter().all(|&o| script[o] == 0x67));
    assert!(dead.at_if.windows(2).all(|w| w[0] < w[1]));
    assert!(dead.at_else.windows(2).all(|w| w[0] < w[1]));
});
