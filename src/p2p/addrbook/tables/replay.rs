//! A replay of operations spelt by bytes against fresh tables, each followed by
//! [`Tables::check`]: the fuzz target `addr_book` and the property tests drive the tables
//! through it. The addresses come from two network groups and the sources from eight, so that
//! places collide, tried entries are evicted to the new table and collisions wait.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use bitcoin::p2p::ServiceFlags;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Info, Tables};
use crate::p2p::addrbook::KnownAddr;

/// Where the replay's clock starts (2026-01-01).
const START: i64 = 1_767_225_600;

fn address(a: u8) -> SocketAddr {
    SocketAddr::new(Ipv4Addr::new(1, 2 + (a & 1), a >> 1, 7).into(), 8333)
}

fn source(s: u8) -> IpAddr {
    Ipv4Addr::new(9, s & 7, 0, 1).into()
}

/// Replays `bytes` (a seed of 8 bytes, then operations of 3 bytes: code, address, argument);
/// the error names the operation after which the tables broke an invariant.
pub fn replay(bytes: &[u8]) -> Result<(), String> {
    let (seed, ops) = bytes.split_at(bytes.len().min(8));
    let mut seed_bytes = [0u8; 8];
    seed_bytes[..seed.len()].copy_from_slice(seed);
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from_le_bytes(seed_bytes));
    let mut tables = Tables::new([7; 32]);
    let mut now = START;
    for (n, op) in ops.chunks_exact(3).enumerate() {
        let (code, a, arg) = (op[0], op[1], op[2]);
        let addr = address(a);
        match code % 10 {
            0 => {
                let known = KnownAddr {
                    addr,
                    services: ServiceFlags::NETWORK,
                    last_seen: (now - i64::from(arg & 0x7f) * 3600).max(0) as u32,
                };
                let penalty = if arg & 0x80 != 0 { 7200 } else { 0 };
                tables.add(&known, source(arg), penalty, now, &mut rng);
            }
            1 => tables.good(&addr, now),
            2 => tables.attempt(&addr, arg & 1 == 1, now),
            3 => tables.connected(&addr, now),
            4 => select(&tables, arg & 1 == 1, now, &mut rng)?,
            5 => tables.resolve_collisions(now),
            6 => now += i64::from(arg) * i64::from(a) * 60,
            7 => collision(&tables, &mut rng)?,
            8 => sample(&tables, now, &mut rng)?,
            _ => tables = reload(&tables, now)?,
        }
        tables
            .check()
            .map_err(|e| format!("after operation {n} ({op:?}): {e}"))?;
    }
    Ok(())
}

fn select(tables: &Tables, new_only: bool, now: i64, rng: &mut ChaCha8Rng) -> Result<(), String> {
    let (new, tried) = tables.counts();
    let picked = tables.select(new_only, now, rng);
    match picked {
        None if new > 0 || (tried > 0 && !new_only) => Err("select found nothing".into()),
        Some(info) if new_only && info.in_tried => Err("a new-only pick was tried".into()),
        Some(info) if tables.get(&info.addr).is_none() => Err("picked an unknown entry".into()),
        _ => Ok(()),
    }
}

fn collision(tables: &Tables, rng: &mut ChaCha8Rng) -> Result<(), String> {
    match tables.tried_collision(rng) {
        Some(info) if !info.in_tried => Err("a collision's holder is not tried".into()),
        _ => Ok(()),
    }
}

fn sample(tables: &Tables, now: i64, rng: &mut ChaCha8Rng) -> Result<(), String> {
    let answer = tables.sample(1000, 23, now, rng);
    let (new, tried) = tables.counts();
    if answer.len() > (new + tried) * 23 / 100 || answer.iter().any(|i| i.is_terrible(now)) {
        return Err("a sample too large or with a terrible entry".into());
    }
    Ok(())
}

/// Saves and restores, as a restart does: every restored entry was saved, no more are placed
/// than were saved, and a saved tried entry comes back tried unless its place was taken.
fn reload(tables: &Tables, now: i64) -> Result<Tables, String> {
    let saved: Vec<Info> = tables.entries().cloned().collect();
    let mut back = Tables::new(tables.key());
    // Tried entries first, as they came out of one table each in its own place.
    let (tried, new): (Vec<Info>, Vec<Info>) = saved.into_iter().partition(|i| i.in_tried);
    for info in tried.iter().chain(&new) {
        back.restore(info.clone(), now);
    }
    if tried
        .iter()
        .any(|i| back.get(&i.addr).is_none_or(|b| !b.in_tried))
    {
        return Err("a tried entry lost its place across a restart".into());
    }
    if back.counts().0 + back.counts().1 > tried.len() + new.len() {
        return Err("a restart made entries".into());
    }
    Ok(back)
}
