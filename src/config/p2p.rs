//! The P2P side's settings: which peers cairn talks to and how many.

use crate::types::Network;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Which peers cairn talks to, how many, and on which network.
#[derive(Debug, Clone)]
pub struct P2pConfig {
    /// Peers to connect to (and keep reconnecting to); no others are looked for.
    pub connect: Vec<SocketAddr>,
    /// Peers to keep connected to besides the ones found through the address book.
    pub addnode: Vec<SocketAddr>,
    /// Where to accept peers, if anywhere.
    pub listen: Option<SocketAddr>,
    /// Whether failing to bind `listen` is an error (it was asked for) or only a warning
    /// (it is the regtest default).
    pub listen_required: bool,
    /// The network (for seeds and ports).
    pub network: Network,
    /// A custom signet (no public seeds).
    pub custom_signet: bool,
    /// The network magic.
    pub magic: [u8; 4],
    /// Outbound connections to keep, besides `addnode` peers (ignored with `connect`).
    pub max_outbound: usize,
    /// Most inbound connections at once.
    pub max_inbound: usize,
    /// Most inbound connections from one host (an IPv4 address, an IPv6 /64) at once.
    pub max_inbound_per_host: usize,
    /// Hosts `max_inbound_per_host` spares (`host_limit_exempt`: a local Tor onion service's).
    pub inbound_exempt: Vec<crate::types::Subnet>,
    /// Balancers whose inbound connections open with a PROXY header (`proxy_protocol_from`).
    pub inbound_balancers: Vec<crate::types::Subnet>,
    /// How long a peer may send nothing, or read nothing of what it is owed, before it is
    /// dropped.
    pub timeout: std::time::Duration,
    /// Whether to ask the network's DNS seeds for addresses when the book is empty.
    pub dns_seeds: bool,
    /// Whether to speak BIP324 (v2 transport): outbound first, inbound when the peer does;
    /// advertised as NODE_P2P_V2.
    pub v2_transport: bool,
    /// Where the address book is saved and loaded from (set by the node from its data dir;
    /// `None`: the book lives in memory only).
    pub addrbook_file: Option<PathBuf>,
}

impl P2pConfig {
    /// Whether the P2P side has anything to do: peers to reach, seeds to ask, or a listener.
    pub fn enabled(&self) -> bool {
        !self.connect.is_empty()
            || !self.addnode.is_empty()
            || self.listen.is_some()
            || (self.network != Network::Regtest && self.max_outbound > 0)
    }

    /// The same settings with `hosts` spared the per-host cap on inbound places.
    pub fn exempting(mut self, hosts: &[crate::types::Subnet]) -> Self {
        self.inbound_exempt = hosts.to_vec();
        self
    }

    /// The same settings, inbound connections from `balancers` opening with a PROXY header
    /// (`proxy_protocol_from`).
    pub fn behind(mut self, balancers: &[crate::types::Subnet]) -> Self {
        self.inbound_balancers = balancers.to_vec();
        self
    }
}
