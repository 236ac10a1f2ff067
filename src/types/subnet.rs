//! An IP subnet (`203.0.113.0/24`, `2001:db8::/48`, or one address), as operators list hosts.

use std::net::IpAddr;
use std::str::FromStr;

/// A subnet: an address with its host bits cleared and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subnet {
    net: IpAddr,
    prefix: u8,
}

/// Why a subnet did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an IP address or subnet (such as 203.0.113.7, 203.0.113.0/24, ::1/128)")]
pub struct BadSubnet(pub String);

impl Subnet {
    /// The subnet of `prefix` bits around `ip` (an IPv4-mapped IPv6 address counts as IPv4);
    /// a prefix longer than the address is cut to its length.
    pub fn around(ip: IpAddr, prefix: u8) -> Subnet {
        let ip = ip.to_canonical();
        let prefix = prefix.min(bits(ip));
        Subnet {
            net: mask(ip, prefix),
            prefix,
        }
    }

    /// Whether this subnet and `other` share an address (one holds the other).
    pub fn overlaps(&self, other: &Subnet) -> bool {
        self.contains(other.net) || other.contains(self.net)
    }

    /// Whether it is every address of its family (a prefix of 0).
    pub fn is_everything(&self) -> bool {
        self.prefix == 0
    }

    /// Whether `ip` is in this subnet.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.net.is_ipv4() && mask(ip, self.prefix) == self.net
    }
}

/// The bits of `ip`'s kind of address.
fn bits(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// `ip` with all but its first `prefix` bits cleared.
fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let keep = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & keep).into())
        }
        IpAddr::V6(v6) => {
            let keep = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & keep).into())
        }
    }
}

impl FromStr for Subnet {
    type Err = BadSubnet;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadSubnet(text.to_string());
        let (addr, prefix) = match text.trim().split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text.trim(), None),
        };
        let ip: IpAddr = addr.parse().map_err(|_| bad())?;
        let bits = if ip.to_canonical().is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= bits)
                .ok_or_else(bad)?,
            None => bits,
        };
        Ok(Subnet::around(ip, prefix))
    }
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_parse_and_contain_what_they_should() {
        let net: Subnet = "203.0.113.77/24".parse().unwrap();
        assert_eq!(net.to_string(), "203.0.113.0/24");
        assert!(net.contains("203.0.113.1".parse().unwrap()));
        assert!(!net.contains("203.0.114.1".parse().unwrap()));
        assert!(
            net.contains("::ffff:203.0.113.9".parse().unwrap()),
            "v4-mapped"
        );
        let one: Subnet = "127.0.0.1".parse().unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        let v6: Subnet = "2001:db8:1:2::5/48".parse().unwrap();
        assert_eq!(v6.to_string(), "2001:db8:1::/48");
        assert!(v6.contains("2001:db8:1:ffff::1".parse().unwrap()));
        assert!(!v6.contains("2001:db8:2::1".parse().unwrap()));
        let all: Subnet = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        assert!(
            !all.contains("::1".parse().unwrap()),
            "IPv4 nets hold no IPv6"
        );
        for bad in ["", "1.2.3.4/33", "::1/129", "x", "1.2.3.4/-1", "1.2.3/24"] {
            assert!(bad.parse::<Subnet>().is_err(), "{bad:?}");
        }
    }

    proptest::proptest! {
        /// Any address is in every subnet around it, the subnet's text parses back to it, and
        /// an address that differs in a bit the prefix keeps is outside.
        #[test]
        fn subnets_hold_what_their_prefix_says(v4: u32, v6: u128, p4 in 0u8..=32, p6 in 0u8..=128, bit: u8) {
            for (ip, prefix) in [
                (IpAddr::V4(v4.into()), p4),
                (IpAddr::V6(v6.into()), p6),
            ] {
                let net = Subnet::around(ip, prefix);
                proptest::prop_assert!(net.contains(ip));
                proptest::prop_assert_eq!(net.to_string().parse::<Subnet>(), Ok(net));
                if prefix > 0 {
                    let flip = u32::from(bit) % u32::from(prefix);
                    let other = match ip {
                        IpAddr::V4(a) => IpAddr::V4((u32::from(a) ^ (1u32 << (31 - flip))).into()),
                        IpAddr::V6(a) => IpAddr::V6((u128::from(a) ^ (1u128 << (127 - flip))).into()),
                    };
                    proptest::prop_assert!(!net.contains(other), "{} in {}", other, net);
                }
            }
        }
    }
}
