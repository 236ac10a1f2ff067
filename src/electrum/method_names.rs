//! The names of the methods cairn serves, as the metrics label requests: a client's own method
//! name never becomes a label.

/// Every method the dispatcher answers (in some protocol version): the metrics' labels.
const METHODS: &[&str] = &[
    "blockchain.block.header",
    "blockchain.block.headers",
    "blockchain.estimatefee",
    "blockchain.headers.subscribe",
    "blockchain.outpoint.get_status",
    "blockchain.outpoint.subscribe",
    "blockchain.outpoint.unsubscribe",
    "blockchain.relayfee",
    "blockchain.scripthash.get_balance",
    "blockchain.scripthash.get_history",
    "blockchain.scripthash.get_mempool",
    "blockchain.scripthash.listunspent",
    "blockchain.scripthash.subscribe",
    "blockchain.scripthash.unsubscribe",
    "blockchain.scriptpubkey.get_balance",
    "blockchain.scriptpubkey.get_history",
    "blockchain.scriptpubkey.get_mempool",
    "blockchain.scriptpubkey.listunspent",
    "blockchain.scriptpubkey.subscribe",
    "blockchain.scriptpubkey.unsubscribe",
    "blockchain.transaction.broadcast",
    "blockchain.transaction.broadcast_package",
    "blockchain.transaction.get",
    "blockchain.transaction.get_merkle",
    "blockchain.transaction.get_merkle_witness",
    "blockchain.transaction.id_from_pos",
    "mempool.get_fee_histogram",
    "mempool.get_info",
    "server.add_peer",
    "server.banner",
    "server.donation_address",
    "server.features",
    "server.peers.subscribe",
    "server.ping",
    "server.version",
];

/// The metrics label of a requested method: its name when cairn serves it, else `other` (a
/// client never adds labels of its own).
pub(crate) fn method_label(method: &str) -> &'static str {
    METHODS
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_labels_come_from_the_served_methods_only() {
        assert_eq!(
            method_label("blockchain.scripthash.get_history"),
            "blockchain.scripthash.get_history"
        );
        assert_eq!(method_label("server.version"), "server.version");
        assert_eq!(method_label("blockchain.scripthash.get_history\n"), "other");
        assert_eq!(method_label(&"x".repeat(10_000)), "other");
        let unique: std::collections::HashSet<_> = METHODS.iter().collect();
        assert_eq!(unique.len(), METHODS.len());
    }
}
