//! A rolling Bloom filter, as Core's `CRollingBloomFilter`: it answers "seen recently?" for
//! the last `n` items at least, in bounded memory, with rare false positives. Three
//! generations of `n / 2` items each; when the newest is full the oldest is cleared and reused,
//! so the newest `n / 2` to `n` items are always found.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// A filter remembering the last `n` items (and a few more).
pub struct RollingBloom {
    generations: [Vec<u64>; 3],
    /// Items in the newest generation.
    in_newest: usize,
    newest: usize,
    per_generation: usize,
    bits: usize,
    hashes: u32,
    salt: RandomState,
}

impl RollingBloom {
    /// Remembers at least the last `n` items, each false positive with about `fp_rate` for
    /// each of the three generations.
    pub fn new(n: usize, fp_rate: f64) -> Self {
        let per_generation = (n / 2).max(1);
        let ln2 = std::f64::consts::LN_2;
        let bits = ((-(per_generation as f64) * fp_rate.ln()) / (ln2 * ln2)).ceil() as usize;
        let bits = bits.max(64);
        let hashes = ((bits as f64 / per_generation as f64) * ln2)
            .round()
            .clamp(1.0, 30.0) as u32;
        let words = bits.div_ceil(64);
        RollingBloom {
            generations: [vec![0; words], vec![0; words], vec![0; words]],
            in_newest: 0,
            newest: 0,
            per_generation,
            bits: words * 64,
            hashes,
            salt: RandomState::new(),
        }
    }

    /// The bit positions of `item`.
    fn positions(&self, item: &[u8]) -> impl Iterator<Item = usize> + '_ {
        let h = self.salt.hash_one(item);
        let (h1, h2) = (h, h.rotate_left(32) | 1);
        (0..u64::from(self.hashes))
            .map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % self.bits as u64) as usize)
    }

    /// Adds an item.
    pub fn insert(&mut self, item: &[u8]) {
        if self.in_newest >= self.per_generation {
            self.newest = (self.newest + 1) % 3;
            self.generations[self.newest]
                .iter_mut()
                .for_each(|w| *w = 0);
            self.in_newest = 0;
        }
        let positions: Vec<usize> = self.positions(item).collect();
        let newest = &mut self.generations[self.newest];
        for p in positions {
            newest[p / 64] |= 1 << (p % 64);
        }
        self.in_newest += 1;
    }

    /// Whether the item was added recently (or, rarely, looks so).
    pub fn contains(&self, item: &[u8]) -> bool {
        let positions: Vec<usize> = self.positions(item).collect();
        self.generations
            .iter()
            .any(|g| positions.iter().all(|p| g[p / 64] >> (p % 64) & 1 == 1))
    }

    /// Forgets everything (Core resets its recent rejects when the tip moves).
    pub fn clear(&mut self) {
        for g in &mut self.generations {
            g.iter_mut().for_each(|w| *w = 0);
        }
        self.in_newest = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_n_items_are_remembered_and_strangers_rarely_match() {
        let mut f = RollingBloom::new(1000, 0.000_001);
        for i in 0u32..5000 {
            f.insert(&i.to_le_bytes());
        }
        assert!((4000u32..5000).all(|i| f.contains(&i.to_le_bytes())));
        let strangers = (1_000_000u32..1_100_000)
            .filter(|i| f.contains(&i.to_le_bytes()))
            .count();
        assert!(strangers < 10, "{strangers} false positives in 100,000");
        // Long gone.
        let old = (0u32..1000)
            .filter(|i| f.contains(&i.to_le_bytes()))
            .count();
        assert!(old < 10, "{old} of the oldest still match");
        f.clear();
        assert!(!f.contains(&4999u32.to_le_bytes()));
    }
}
