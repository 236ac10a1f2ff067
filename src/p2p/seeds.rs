//! Where a node with an empty address book finds its first peers: the networks' DNS seeds,
//! and a few fixed addresses for when DNS gives nothing. Regtest and custom signets have none.

use std::net::SocketAddr;
use std::time::Duration;

use bitcoin::p2p::ServiceFlags;

use super::addrbook::KnownAddr;
use crate::types::Network;

/// How long one DNS seed may take to answer.
const DNS_TIMEOUT: Duration = Duration::from_secs(15);

/// The DNS seeds Bitcoin Core queries for each network.
pub fn dns_seeds(network: Network, custom_signet: bool) -> &'static [&'static str] {
    match network {
        Network::Mainnet => &[
            "seed.bitcoin.sipa.be",
            "dnsseed.bluematt.me",
            "seed.bitcoin.jonasschnelli.ch",
            "seed.btc.petertodd.net",
            "seed.bitcoin.sprovoost.nl",
            "dnsseed.emzy.de",
            "seed.bitcoin.wiz.biz",
            "seed.mainnet.achownodes.xyz",
        ],
        Network::Testnet4 => &[
            "seed.testnet4.bitcoin.sprovoost.nl",
            "seed.testnet4.wiz.biz",
        ],
        Network::Signet if !custom_signet => &[
            "seed.signet.bitcoin.sprovoost.nl",
            "seed.signet.achownodes.xyz",
        ],
        Network::Signet | Network::Regtest => &[],
    }
}

/// A handful of long-lived public nodes per network (from Bitcoin Core's published seed
/// lists), tried only when the DNS seeds give nothing.
pub fn fixed_seeds(network: Network, custom_signet: bool) -> Vec<SocketAddr> {
    let text: &[&str] = match network {
        Network::Mainnet => &[
            "185.8.106.179:8333",
            "185.26.99.171:8333",
            "188.138.88.47:8333",
            "192.3.11.20:8333",
            "193.72.32.187:8333",
            "195.154.172.177:8333",
            "198.27.174.140:8333",
            "204.194.220.39:8333",
            "209.141.37.57:8333",
            "212.51.129.60:8333",
            "213.174.156.81:8333",
            "217.20.131.64:8333",
        ],
        Network::Testnet4 => &[
            "2.59.134.244:48333",
            "34.232.194.104:48333",
            "51.158.61.33:48333",
            "65.108.143.22:48333",
            "89.58.9.219:48333",
            "104.237.131.138:48333",
            "158.69.118.2:48333",
            "168.119.11.220:48333",
            "195.154.199.2:48333",
            "198.58.102.18:48333",
        ],
        Network::Signet if !custom_signet => &[
            "34.135.189.101:38333",
            "37.120.177.204:38333",
            "49.13.117.253:38333",
            "51.79.229.113:38333",
            "89.58.37.164:38333",
            "136.144.237.250:38333",
            "159.203.133.144:38333",
            "172.105.179.233:38333",
            "176.9.62.27:38333",
            "188.165.201.163:38333",
        ],
        Network::Signet | Network::Regtest => &[],
    };
    text.iter().filter_map(|s| s.parse().ok()).collect()
}

/// Resolves the network's DNS seeds (all at once, each bounded by a timeout) into addresses
/// on the network's default port, marked as full nodes as the seeds promise.
pub async fn resolve_dns_seeds(
    network: Network,
    custom_signet: bool,
) -> Vec<(&'static str, Vec<KnownAddr>)> {
    let port = network.default_p2p_port();
    let lookups = dns_seeds(network, custom_signet)
        .iter()
        .map(|host| async move {
            let found =
                match tokio::time::timeout(DNS_TIMEOUT, tokio::net::lookup_host((*host, port)))
                    .await
                {
                    Ok(Ok(addrs)) => addrs.collect::<Vec<_>>(),
                    Ok(Err(e)) => {
                        tracing::info!("DNS seed {host}: {e}");
                        Vec::new()
                    }
                    Err(_) => {
                        tracing::info!("DNS seed {host}: no answer in {}s", DNS_TIMEOUT.as_secs());
                        Vec::new()
                    }
                };
            (*host, as_known(found))
        });
    futures_join_all(lookups).await
}

/// Addresses from a seed, as book entries seen a day ago (fresher news from peers wins).
pub fn as_known(addrs: Vec<SocketAddr>) -> Vec<KnownAddr> {
    let day_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs().saturating_sub(86_400) as u32)
        .unwrap_or(0);
    addrs
        .into_iter()
        .map(|addr| KnownAddr {
            addr,
            services: ServiceFlags::NETWORK | ServiceFlags::WITNESS,
            last_seen: day_ago,
        })
        .collect()
}

async fn futures_join_all<
    T: Send + 'static,
    F: std::future::Future<Output = T> + Send + 'static,
>(
    futures: impl Iterator<Item = F>,
) -> Vec<T> {
    let mut set = tokio::task::JoinSet::new();
    for f in futures {
        set.spawn(f);
    }
    let mut out = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(v) = r {
            out.push(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fixed_seed_parses_and_uses_the_network_port() {
        for network in Network::ALL {
            let text_count = fixed_seeds(network, false).len();
            if network == Network::Regtest {
                assert_eq!(text_count, 0);
                continue;
            }
            assert!(text_count >= 10, "{network}");
            for a in fixed_seeds(network, false) {
                assert_eq!(a.port(), network.default_p2p_port(), "{a}");
                assert!(super::super::addrbook::is_routable(a.ip()), "{a}");
            }
        }
        assert!(fixed_seeds(Network::Signet, true).is_empty());
        assert!(dns_seeds(Network::Signet, true).is_empty());
        assert!(dns_seeds(Network::Regtest, false).is_empty());
    }
}
