//! A minimal BIP157 client for benchmarks: connects to a node, learns its chain with
//! getheaders, then asks for every block's filter in getcfilters batches of 1,000 and prints the
//! seconds the whole pass took (and the filter bytes received) as JSON.
//!
//! Usage: cargo run --release --example cfilters_client -- HOST:PORT [PASSES]

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bitcoin::consensus::{serialize, Decodable};
use bitcoin::hashes::Hash;
use bitcoin::p2p::address::Address;
use bitcoin::p2p::message::{NetworkMessage, RawNetworkMessage};
use bitcoin::p2p::message_blockdata::GetHeadersMessage;
use bitcoin::p2p::message_filter::GetCFilters;
use bitcoin::p2p::message_network::VersionMessage;
use bitcoin::p2p::{Magic, ServiceFlags};
use bitcoin::BlockHash;

struct Peer {
    out: TcpStream,
    reader: bitcoin::io::FromStd<BufReader<TcpStream>>,
}

impl Peer {
    fn send(&mut self, msg: NetworkMessage) -> std::io::Result<()> {
        self.out
            .write_all(&serialize(&RawNetworkMessage::new(Magic::REGTEST, msg)))
    }

    fn recv(&mut self) -> Result<NetworkMessage, String> {
        RawNetworkMessage::consensus_decode(&mut self.reader)
            .map(|m| m.payload().clone())
            .map_err(|e| e.to_string())
    }
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let addr: SocketAddr = args
        .get(1)
        .ok_or("usage: cfilters_client HOST:PORT [PASSES]")?
        .parse()
        .map_err(|e| format!("{e}"))?;
    let passes: u32 = args.get(2).map(|p| p.parse().unwrap_or(1)).unwrap_or(1);
    let stream = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let reader = bitcoin::io::FromStd::new(BufReader::with_capacity(
        1 << 20,
        stream.try_clone().map_err(|e| e.to_string())?,
    ));
    let mut peer = Peer {
        out: stream,
        reader,
    };
    let any: SocketAddr = ([0, 0, 0, 0], 0).into();
    let mut version = VersionMessage::new(
        ServiceFlags::NONE,
        0,
        Address::new(&any, ServiceFlags::NONE),
        Address::new(&any, ServiceFlags::NONE),
        1,
        "/cfilters_client/".into(),
        0,
    );
    version.version = 70016;
    version.relay = false;
    peer.send(NetworkMessage::Version(version))
        .map_err(|e| e.to_string())?;
    peer.send(NetworkMessage::Verack)
        .map_err(|e| e.to_string())?;
    loop {
        if let NetworkMessage::Verack = peer.recv()? {
            break;
        }
    }
    // The chain, by getheaders from genesis (2,000 at a time).
    let mut hashes =
        vec![bitcoin::constants::genesis_block(bitcoin::Network::Regtest).block_hash()];
    loop {
        let tip = *hashes.last().ok_or("no genesis")?;
        peer.send(NetworkMessage::GetHeaders(GetHeadersMessage {
            version: 70016,
            locator_hashes: vec![tip],
            stop_hash: BlockHash::all_zeros(),
        }))
        .map_err(|e| e.to_string())?;
        let headers = loop {
            if let NetworkMessage::Headers(h) = peer.recv()? {
                break h;
            }
        };
        let more = headers.len() == 2000;
        hashes.extend(headers.iter().map(|h| h.block_hash()));
        if !more {
            break;
        }
    }
    let tip = hashes.len() as u32 - 1;
    let mut seconds = Vec::new();
    let mut bytes = 0usize;
    for _ in 0..passes {
        let started = Instant::now();
        bytes = 0;
        let mut start = 0u32;
        while start <= tip {
            let stop = (start + 999).min(tip);
            peer.send(NetworkMessage::GetCFilters(GetCFilters {
                filter_type: 0,
                start_height: start,
                stop_hash: hashes[stop as usize],
            }))
            .map_err(|e| e.to_string())?;
            let mut got = 0;
            while got < stop - start + 1 {
                if let NetworkMessage::CFilter(f) = peer.recv()? {
                    bytes += f.filter.len();
                    got += 1;
                }
            }
            start = stop + 1;
        }
        seconds.push(started.elapsed().as_secs_f64());
    }
    println!(
        "{{\"blocks\": {}, \"filter_bytes\": {bytes}, \"seconds\": {seconds:?}}}",
        tip + 1
    );
    Ok(())
}
