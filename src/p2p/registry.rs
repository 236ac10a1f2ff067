//! The connected peers (for `cairn status`), and the nonces of our own
//! version messages in flight (to notice a connection to ourselves).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

use super::sync::PeerId;

/// One connected peer, as `cairn status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PeerInfo {
    /// Its address.
    pub addr: SocketAddr,
    /// Whether it connected to us.
    pub inbound: bool,
    /// Its user agent.
    pub user_agent: String,
}

/// The connected peers, and the nonces of our own version messages in flight (a version
/// coming back with one of them means we connected to ourselves).
#[derive(Default)]
pub struct Registry {
    peers: Mutex<HashMap<PeerId, PeerInfo>>,
    /// Misbehaviour found outside a peer's own task (an invalid block, found by the validating
    /// thread), waiting for that task to end the connection.
    offences: Mutex<HashMap<PeerId, String>>,
    nonces: Mutex<HashSet<u64>>,
}

/// Removes a peer from the [`Registry`] when its connection ends.
pub struct Registered<'a> {
    registry: &'a Registry,
    id: PeerId,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let mut m = self
            .registry
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        m.remove(&self.id);
        let mut o = self
            .registry
            .offences
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        o.remove(&self.id);
    }
}

impl Registry {
    /// Records a peer that finished its handshake, until the guard is dropped.
    pub fn register(
        &self,
        id: PeerId,
        addr: SocketAddr,
        inbound: bool,
        user_agent: &str,
    ) -> Registered<'_> {
        {
            let mut m = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
            m.insert(
                id,
                PeerInfo {
                    addr,
                    inbound,
                    user_agent: user_agent.to_string(),
                },
            );
        }
        Registered { registry: self, id }
    }

    /// The connected peers.
    pub fn list(&self) -> Vec<PeerInfo> {
        let mut v: Vec<PeerInfo> = self
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        v.sort_by_key(|p| (p.inbound, p.addr));
        v
    }

    /// Whether any outbound peer is connected.
    pub fn has_outbound(&self) -> bool {
        self.peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .any(|p| !p.inbound)
    }

    /// Records that a connected peer misbehaved; its task ends the connection as for any
    /// misbehaviour ([`Registry::take_offence`]). Ignored once the peer has gone.
    pub fn report_offence(&self, id: PeerId, what: String) {
        if !self
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&id)
        {
            return;
        }
        self.offences
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, what);
    }

    /// The misbehaviour reported for `id`, if any, taken out.
    pub fn take_offence(&self, id: PeerId) -> Option<String> {
        self.offences
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id)
    }

    /// Notes the nonce of a version message we sent.
    pub fn remember_nonce(&self, nonce: u64) {
        let mut s = self.nonces.lock().unwrap_or_else(PoisonError::into_inner);
        s.insert(nonce);
    }

    /// Forgets it once that handshake is over.
    pub fn forget_nonce(&self, nonce: u64) {
        let mut s = self.nonces.lock().unwrap_or_else(PoisonError::into_inner);
        s.remove(&nonce);
    }

    /// Whether a received version carries one of our own nonces.
    pub fn is_own_nonce(&self, nonce: u64) -> bool {
        self.nonces
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&nonce)
    }
}
