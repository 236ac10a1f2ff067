//! The tables' consistency check, as Core's `AddrManImpl::CheckAddrman` (run there with
//! `-checkaddrman`): every entry placed where its keys say, counted as often as it is placed,
//! and listed once. A broken invariant would make `select` scan empty buckets for ever or lose
//! entries, so the property tests and the fuzz target run it after every operation.

use std::collections::HashMap;

use super::{Id, Table, Tables, BUCKET_SIZE, NEW_BUCKETS_PER_ADDRESS};

impl Tables {
    /// Checks every invariant of the tables; the error names the first one broken.
    pub fn check(&self) -> Result<(), String> {
        if self.by_addr.len() != self.infos.len() {
            return Err("address index and entries differ in size".into());
        }
        for (addr, id) in &self.by_addr {
            if self.infos.get(id).map(|i| i.addr) != Some(*addr) {
                return Err(format!("address index points {addr} elsewhere"));
            }
        }
        if self.new_list.len() + self.tried_list.len() != self.infos.len() {
            return Err("an entry is in neither list, or in both".into());
        }
        self.check_list(Table::New)?;
        self.check_list(Table::Tried)?;
        self.check_new_places()?;
        self.check_tried_places()?;
        if self.collisions.len() > super::MAX_COLLISIONS {
            return Err("too many collisions waiting".into());
        }
        Ok(())
    }

    fn check_list(&self, table: Table) -> Result<(), String> {
        let list = match table {
            Table::New => &self.new_list,
            Table::Tried => &self.tried_list,
        };
        for (pos, id) in list.iter().enumerate() {
            let info = self.infos.get(id).ok_or("a listed entry does not exist")?;
            if info.list_pos != pos {
                return Err(format!(
                    "{} listed at {pos}, noted at {}",
                    info.addr, info.list_pos
                ));
            }
            if info.in_tried != (table == Table::Tried) {
                return Err(format!("{} listed in the wrong table", info.addr));
            }
        }
        Ok(())
    }

    fn check_new_places(&self) -> Result<(), String> {
        let mut held: HashMap<Id, u8> = HashMap::new();
        for (place, slot) in self.new_slots.iter().enumerate() {
            let Some(id) = slot else { continue };
            let info = self.infos.get(id).ok_or("a new place holds no entry")?;
            if info.in_tried {
                return Err(format!("{} is tried and holds a new place", info.addr));
            }
            let bucket = place / BUCKET_SIZE;
            if self.place(Table::New, bucket, &info.addr) != place {
                return Err(format!("{} held at a new place not its own", info.addr));
            }
            let count = held.entry(*id).or_default();
            *count = count.saturating_add(1);
        }
        for id in &self.new_list {
            let info = &self.infos[id];
            let places = held.get(id).copied().unwrap_or(0);
            if places == 0 || places != info.ref_count || places > NEW_BUCKETS_PER_ADDRESS {
                return Err(format!(
                    "{} counts {} places and holds {places}",
                    info.addr, info.ref_count
                ));
            }
        }
        Ok(())
    }

    fn check_tried_places(&self) -> Result<(), String> {
        let mut placed = 0;
        for (place, slot) in self.tried_slots.iter().enumerate() {
            let Some(id) = slot else { continue };
            let info = self.infos.get(id).ok_or("a tried place holds no entry")?;
            if !info.in_tried || info.ref_count != 0 {
                return Err(format!(
                    "{} holds a tried place and is not tried",
                    info.addr
                ));
            }
            if self.tried_place(&info.addr) != place {
                return Err(format!("{} held at a tried place not its own", info.addr));
            }
            placed += 1;
        }
        if placed != self.tried_list.len() {
            return Err("a tried entry holds no place".into());
        }
        Ok(())
    }
}
