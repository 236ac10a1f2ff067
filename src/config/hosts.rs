//! How many connections one host may hold: the rule every server's listener applies.

use crate::types::Subnet;

/// Connections one host may hold at once, and the hosts the limit spares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLimits {
    /// Most connections from one IPv4 address or one IPv6 /64 (a host is given a whole /64
    /// and picks any address in it), as Fulcrum's `max_clients_per_ip`.
    pub per_ip: usize,
    /// Most connections from one IPv4 /24 or IPv6 /48 (ElectrumX's session groups).
    pub per_subnet: usize,
    /// Hosts no per-host limit applies to (a Tor onion service's or a proxy's address).
    pub exempt: Vec<Subnet>,
    /// Balancers whose connections open with a PROXY header naming the client, whose address
    /// then counts as the host (`proxy_protocol_from`).
    pub balancers: Vec<Subnet>,
}

/// Hosts exempt unless `host_limit_exempt` says otherwise: Fulcrum's default
/// (`subnets_to_exclude_from_per_ip_limits`), the addresses a Tor onion service or a proxy on
/// the same machine connects from, and not the rest of 127/8.
const DEFAULT_EXEMPT: [&str; 2] = ["127.0.0.1/32", "::1/128"];

impl HostLimits {
    /// `per_ip` and `per_subnet` with the default exemptions.
    pub fn new(per_ip: usize, per_subnet: usize) -> Self {
        HostLimits {
            per_ip,
            per_subnet,
            exempt: DEFAULT_EXEMPT
                .iter()
                .filter_map(|s| s.parse().ok())
                .collect(),
            balancers: Vec::new(),
        }
    }
}
