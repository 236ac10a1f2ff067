//! The mempool's fee rates in one sorted list, from which the fee estimates and the fee
//! histogram are read: built once per change of the mempool, shared by every request.

/// Every transaction's fee rate (sat/vB) and virtual size, highest rate first, and the fee
/// histogram made from them.
#[derive(Debug)]
pub struct FeeRates {
    /// The mempool generation these are of.
    pub(super) generation: u64,
    /// (fee rate, vsize), highest rate first.
    sorted: Vec<(f64, u64)>,
    /// The fee histogram as ElectrumX builds it: [fee rate, vsize] bins from the highest rate
    /// down, the first closed at 100 kvB and each next one 10% larger; the rest in a last bin
    /// at the lowest rate.
    pub histogram: Vec<(f64, u64)>,
}

impl FeeRates {
    /// The rates of `txs` ((fee rate, vsize) pairs), sorted, with their histogram.
    pub(super) fn of(generation: u64, txs: impl Iterator<Item = (f64, u64)>) -> Self {
        let mut sorted: Vec<(f64, u64)> = txs.collect();
        sorted.sort_by(|a, b| b.0.total_cmp(&a.0));
        let histogram = histogram(&sorted);
        FeeRates {
            generation,
            sorted,
            histogram,
        }
    }

    /// A fee rate (BTC/kvB) that would place a transaction within the first `blocks` blocks'
    /// worth (1,000,000 vB each) of the mempool, or `None` when the mempool would clear sooner.
    pub fn estimate(&self, blocks: u32) -> Option<f64> {
        let room = u64::from(blocks.max(1)) * 1_000_000;
        let mut cum = 0u64;
        for (rate, vsize) in &self.sorted {
            cum += vsize;
            if cum >= room {
                return Some(rate * 1000.0 / bitcoin::Amount::ONE_BTC.to_sat() as f64);
            }
        }
        None
    }
}

/// The histogram of `sorted` (highest rate first).
fn histogram(sorted: &[(f64, u64)]) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    let mut bin_size = 100_000u64;
    let mut cum = 0u64;
    for &(rate, vsize) in sorted {
        cum += vsize;
        if cum >= bin_size {
            out.push((rate, cum));
            cum = 0;
            bin_size += bin_size / 10;
        }
    }
    if let (true, Some(&(lowest, _))) = (cum > 0, sorted.last()) {
        out.push((lowest, cum));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_and_bins_walk_the_rates_from_the_highest() {
        // 300 transactions of 10 kvB at 1 to 300 sat/vB: 3 MvB in all.
        let rates = FeeRates::of(7, (1..=300).map(|r| (f64::from(r), 10_000)));
        assert_eq!(rates.generation, 7);
        // The first 1 MvB is the 100 highest: 300 down to 201.
        assert_eq!(rates.estimate(1), Some(201.0 * 1000.0 / 1e8));
        assert_eq!(rates.estimate(3), Some(1.0 * 1000.0 / 1e8));
        assert_eq!(
            rates.estimate(4),
            None,
            "the mempool clears within 3 blocks"
        );
        // Bins close at 100 kvB, then 110 kvB, 121 kvB...: the first at the 10th rate.
        assert_eq!(rates.histogram[0], (291.0, 100_000));
        assert_eq!(rates.histogram[1], (280.0, 110_000));
        let total: u64 = rates.histogram.iter().map(|(_, v)| v).sum();
        assert_eq!(total, 3_000_000, "every vbyte is in a bin");
        assert_eq!(rates.histogram.last().map(|b| b.0), Some(1.0));
    }
}
