//! The networks cairn runs on and their per-network defaults.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A Bitcoin network cairn can validate and serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// The main Bitcoin network.
    Mainnet,
    /// Testnet version 4 (BIP94).
    Testnet4,
    /// Signet: the default one, or a custom one given by `signetchallenge`.
    Signet,
    /// A local regression-test chain.
    Regtest,
}

impl Network {
    /// Every network, in the order the CLI lists them.
    pub const ALL: [Network; 4] = [
        Network::Mainnet,
        Network::Testnet4,
        Network::Signet,
        Network::Regtest,
    ];

    /// The name used on the command line, in config files and as the data-dir subfolder.
    pub fn name(self) -> &'static str {
        match self {
            Network::Mainnet => "mainnet",
            Network::Testnet4 => "testnet4",
            Network::Signet => "signet",
            Network::Regtest => "regtest",
        }
    }

    /// The conventional Electrum TCP port of this network (electrs and Fulcrum use the same).
    pub fn default_electrum_port(self) -> u16 {
        match self {
            Network::Mainnet => 50001,
            Network::Testnet4 | Network::Signet => 60001,
            Network::Regtest => 60401,
        }
    }

    /// The conventional Electrum-over-TLS port: 50002 mainnet, 60002 testnet4 and signet, 60402
    /// regtest (the TCP port plus one, as Electrum, ElectrumX and Fulcrum number them).
    pub fn default_electrum_tls_port(self) -> u16 {
        self.default_electrum_port() + 1
    }

    /// The WebSocket-over-TLS port when none is given: the TCP port plus three (ElectrumX's
    /// 50004 on mainnet).
    pub fn default_electrum_wss_port(self) -> u16 {
        self.default_electrum_port() + 3
    }

    /// The P2P port nodes of this network listen on by default (as Bitcoin Core).
    pub fn default_p2p_port(self) -> u16 {
        match self {
            Network::Mainnet => 8333,
            Network::Testnet4 => 48333,
            Network::Signet => 38333,
            Network::Regtest => 18444,
        }
    }

    /// The default port of cairn's loopback admin JSON-RPC.
    pub fn default_admin_port(self) -> u16 {
        match self {
            Network::Mainnet => 8486,
            Network::Testnet4 => 48486,
            Network::Signet => 38486,
            Network::Regtest => 18486,
        }
    }

    /// The message-start bytes (magic) of this network, as written in `blk*.dat` records and
    /// P2P messages (the `bitcoin` crate's). A custom signet has its own: see [`signet_magic`].
    pub fn magic(self) -> [u8; 4] {
        self.to_bitcoin().magic().to_bytes()
    }

    /// The `bitcoin` crate's view of this network (for addresses and genesis blocks).
    pub fn to_bitcoin(self) -> bitcoin::Network {
        match self {
            Network::Mainnet => bitcoin::Network::Bitcoin,
            Network::Testnet4 => bitcoin::Network::Testnet4,
            Network::Signet => bitcoin::Network::Signet,
            Network::Regtest => bitcoin::Network::Regtest,
        }
    }
}

/// The message-start bytes of a signet with the given challenge script: the first four bytes of
/// the double SHA-256 of the challenge serialized with its length prefix (BIP325).
pub fn signet_magic(challenge: &[u8]) -> [u8; 4] {
    use bitcoin::hashes::{sha256d, Hash};
    let hash = sha256d::Hash::hash(&bitcoin::consensus::serialize(&challenge.to_vec()));
    let mut magic = [0u8; 4];
    magic.copy_from_slice(&hash.as_byte_array()[..4]);
    magic
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for a network name cairn does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown network {0:?}: expected one of mainnet, testnet4, signet, regtest")]
pub struct UnknownNetwork(pub String);

impl FromStr for Network {
    type Err = UnknownNetwork;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mainnet" | "bitcoin" | "main" => Ok(Network::Mainnet),
            "testnet4" => Ok(Network::Testnet4),
            "signet" => Ok(Network::Signet),
            "regtest" => Ok(Network::Regtest),
            other => Err(UnknownNetwork(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::hex::FromHex;

    #[test]
    fn default_signet_challenge_gives_default_signet_magic() {
        // The default signet challenge from Bitcoin Core's chainparams.
        let challenge = Vec::<u8>::from_hex("512103ad5e0edad18cb1f0fc0d28a3d4f1f3e445640337489abb10404f2d1e086be430210359ef5021964fe22d6f8e05b2463c9540ce96883fe3b278760f048f5189f2e6c452ae",)
        .unwrap();
        assert_eq!(signet_magic(&challenge), Network::Signet.magic());
    }

    #[test]
    fn names_round_trip() {
        for n in Network::ALL {
            assert_eq!(n.name().parse::<Network>().unwrap(), n);
        }
        assert!("testnet".parse::<Network>().is_err());
    }
}
