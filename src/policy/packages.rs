//! Core's rules on a package's shape (policy/packages.cpp): how many transactions, how much
//! weight, and how they may spend each other.

use super::rejection::Rejection;

/// Most transactions in a package (Bitcoin Core's MAX_PACKAGE_COUNT).
pub const MAX_PACKAGE_COUNT: usize = 25;
/// Most weight of a package (Bitcoin Core's MAX_PACKAGE_WEIGHT).
pub const MAX_PACKAGE_WEIGHT: u64 = 404_000;

/// Checks a package is a child with its parents: at most 25 transactions and 404,000 weight,
/// no duplicates, the last one spending an output of every other, no parent spending another
/// member, no two members spending the same output.
pub fn check_package_shape(txs: &[bitcoin::Transaction]) -> Result<(), Rejection> {
    use std::collections::HashSet;
    use Rejection::PackageShape;
    if txs.is_empty() || txs.len() > MAX_PACKAGE_COUNT {
        return Err(PackageShape(format!(
            "{} transactions (1 to {MAX_PACKAGE_COUNT})",
            txs.len()
        )));
    }
    let weight: u64 = txs.iter().map(|t| t.weight().to_wu()).sum();
    if weight > MAX_PACKAGE_WEIGHT {
        return Err(PackageShape(format!(
            "weight {weight} over {MAX_PACKAGE_WEIGHT}"
        )));
    }
    let ids: Vec<bitcoin::Txid> = txs.iter().map(|t| t.compute_txid()).collect();
    let unique: HashSet<&bitcoin::Txid> = ids.iter().collect();
    if unique.len() != ids.len() {
        return Err(PackageShape("a transaction appears twice".into()));
    }
    let mut spent = HashSet::new();
    for tx in txs {
        for input in &tx.input {
            if !spent.insert(input.previous_output) {
                return Err(PackageShape(format!(
                    "two members spend {}",
                    input.previous_output
                )));
            }
        }
    }
    let (parents, child) = txs.split_at(txs.len() - 1);
    let parent_ids: HashSet<&bitcoin::Txid> = ids[..parents.len()].iter().collect();
    for (parent, id) in parents.iter().zip(&ids) {
        if parent
            .input
            .iter()
            .any(|i| parent_ids.contains(&i.previous_output.txid))
        {
            return Err(PackageShape(format!("parent {id} spends another member")));
        }
        if !child[0].input.iter().any(|i| i.previous_output.txid == *id) {
            return Err(PackageShape(format!(
                "{id} is not a parent of the last transaction"
            )));
        }
    }
    Ok(())
}

/// Core's `IsWellFormedPackage` with its sort required (policy/packages.cpp), for a package of
/// more than one transaction: at most 25 of them and 404,000 weight, no duplicate, parents
/// before children, no two spending the same output. The error is Core's reject reason.
pub fn check_well_formed(txs: &[bitcoin::Transaction]) -> Result<(), &'static str> {
    use std::collections::HashSet;
    if txs.len() > MAX_PACKAGE_COUNT {
        return Err("package-too-many-transactions");
    }
    let weight: u64 = txs.iter().map(|t| t.weight().to_wu()).sum();
    if txs.len() > 1 && weight > MAX_PACKAGE_WEIGHT {
        return Err("package-too-large");
    }
    let mut later: HashSet<bitcoin::Txid> = txs.iter().map(|t| t.compute_txid()).collect();
    if later.len() != txs.len() {
        return Err("package-contains-duplicates");
    }
    for tx in txs {
        if tx
            .input
            .iter()
            .any(|i| later.contains(&i.previous_output.txid))
        {
            return Err("package-not-sorted");
        }
        later.remove(&tx.compute_txid());
    }
    let mut spent = HashSet::new();
    if !txs
        .iter()
        .flat_map(|t| &t.input)
        .all(|i| spent.insert(i.previous_output))
    {
        return Err("conflict-in-package");
    }
    Ok(())
}
