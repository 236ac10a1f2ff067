//! The Electrum method table of `contrib/docs/electrum.md` (`| method | versions | state |`)
//! checked against the methods served ([`METHODS`]): every served method is listed with exactly
//! the protocol versions that have it, and a row marked **missing** names no served method.

use std::collections::{BTreeMap, BTreeSet};

use super::request::{method_label, METHODS, VERSIONS};
use crate::types::ProtocolVersion;

/// The table's header row.
const HEADER: &str = "| method | versions | state |";
/// The namespaces of full method names; any other name is short for the previous one's prefix.
const NAMESPACES: [&str; 3] = ["blockchain.", "mempool.", "server."];

/// One row of the table: its method names in full, its versions column and whether it is a
/// **missing** row.
struct Row {
    names: Vec<String>,
    versions: String,
    missing: bool,
}

/// The rows of the method table in `readme`.
fn rows(readme: &str) -> Vec<Row> {
    let section = readme
        .split_once("# Electrum server")
        .expect("the Electrum page has its title")
        .1;
    let table = section
        .split_once(HEADER)
        .expect("the Electrum section has the method table")
        .1;
    table
        .lines()
        .skip(2) // the rest of the header line, and the |---| line
        .take_while(|line| line.starts_with('|'))
        .map(row)
        .collect()
}

/// One table line read as a [`Row`].
fn row(line: &str) -> Row {
    let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
    let [method, versions, state] = cells[..] else {
        panic!("a method table row has three cells: {line}");
    };
    let mut names = Vec::new();
    let mut prefix = String::new();
    // Odd pieces between backticks are the names.
    for name in method.split('`').skip(1).step_by(2) {
        let full = if NAMESPACES.iter().any(|ns| name.starts_with(ns)) {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        prefix = full.rsplit_once('.').map_or("", |(p, _)| p).to_string();
        names.push(full);
    }
    assert!(!names.is_empty(), "a row without a method name: {line}");
    Row {
        names,
        versions: versions.to_string(),
        missing: state.contains("**missing**"),
    }
}

/// The served versions a versions cell names: `all`, `A`, `A, B, ...` or `A to B`, where `1.4`
/// is every 1.4.x and `1.4.2` that one version.
fn versions_of(cell: &str) -> BTreeSet<ProtocolVersion> {
    let range = |v: &str| -> (ProtocolVersion, ProtocolVersion) {
        let parts: Vec<u32> = v
            .split('.')
            .map(|p| p.parse().unwrap_or_else(|_| panic!("bad version {v:?}")))
            .collect();
        match parts[..] {
            [a, b] => (
                ProtocolVersion::new(a, b, 0),
                ProtocolVersion::new(a, b, u32::MAX),
            ),
            [a, b, c] => (ProtocolVersion::new(a, b, c), ProtocolVersion::new(a, b, c)),
            _ => panic!("bad version {v:?} in {cell:?}"),
        }
    };
    let within = |(lo, hi): (ProtocolVersion, ProtocolVersion)| {
        VERSIONS.into_iter().filter(move |v| lo <= *v && *v <= hi)
    };
    if cell == "all" {
        return VERSIONS.into_iter().collect();
    }
    if let Some((from, to)) = cell.split_once(" to ") {
        return within((range(from).0, range(to).1)).collect();
    }
    cell.split(", ").flat_map(|v| within(range(v))).collect()
}

#[test]
fn the_readme_method_table_lists_exactly_the_served_methods() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/docs/electrum.md");
    let readme = std::fs::read_to_string(path).expect("contrib/docs/electrum.md");
    let mut listed: BTreeMap<String, BTreeSet<ProtocolVersion>> = BTreeMap::new();
    for row in rows(&readme) {
        for name in row.names {
            if row.missing {
                assert_eq!(
                    method_label(&name),
                    "other",
                    "{name} is marked missing but served"
                );
                continue;
            }
            let versions = versions_of(&row.versions);
            assert!(
                !versions.is_empty(),
                "{name}: no served version in {:?}",
                row.versions
            );
            assert!(
                listed.insert(name.clone(), versions).is_none(),
                "{name} is listed twice"
            );
        }
    }
    let served: BTreeMap<String, BTreeSet<ProtocolVersion>> = METHODS
        .iter()
        .map(|m| {
            let versions = VERSIONS.into_iter().filter(|v| m.serves(*v)).collect();
            (m.name.to_string(), versions)
        })
        .collect();
    for (name, versions) in &served {
        assert_eq!(
            listed.get(name),
            Some(versions),
            "README versions of {name}"
        );
    }
    for name in listed.keys() {
        assert!(
            served.contains_key(name),
            "README lists {name}, which is not served"
        );
    }
}

#[test]
fn version_cells_name_the_served_versions() {
    let all: BTreeSet<ProtocolVersion> = VERSIONS.into_iter().collect();
    assert_eq!(versions_of("all"), all);
    assert_eq!(
        versions_of("1.4"),
        BTreeSet::from([
            ProtocolVersion::new(1, 4, 0),
            ProtocolVersion::new(1, 4, 1),
            ProtocolVersion::new(1, 4, 2)
        ])
    );
    assert_eq!(
        versions_of("1.6, 1.7"),
        BTreeSet::from([ProtocolVersion::new(1, 6, 0), ProtocolVersion::new(1, 7, 0)])
    );
    assert_eq!(versions_of("1.4 to 1.6").len(), 4);
    assert_eq!(
        versions_of("1.4.2 to 1.6"),
        BTreeSet::from([ProtocolVersion::new(1, 4, 2), ProtocolVersion::new(1, 6, 0)])
    );
    let short =
        row("| `blockchain.outpoint.subscribe`, `get_status` (x), `server.ping` | 1.7 | y |");
    assert_eq!(
        short.names,
        [
            "blockchain.outpoint.subscribe",
            "blockchain.outpoint.get_status",
            "server.ping"
        ]
    );
}
