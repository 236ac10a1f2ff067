//! One peer connection: its reader and writer tasks, the handshake, then the session that
//! answers the peer ([`super::session`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::codec::{CodecError, Held, Incoming, RecvBudget};
use super::context::PeerContext;
use super::error::PeerError;
use super::handshake::{handshake, PeerTraits};
use super::send::spawn_writer;
use super::session::Session;
use super::sync::PeerId;
use super::wire::{self, OpenError, ReadWire, WriteWire};

/// How long the handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);

/// Messages read from a peer and not yet handled, at most.
const INCOMING: usize = 16;

/// Ends a connection's tasks and forgets its requests and orphans when the connection ends,
/// however it ends (an eviction drops the connection's future wherever it is).
struct Ending<'a> {
    ctx: &'a PeerContext,
    id: PeerId,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Ending<'_> {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.ctx.downloader.forget_peer(self.id);
        self.ctx.orphans.forget_peer(self.id);
        self.ctx.tx_budgets.leave(self.id);
        self.ctx.tx_requests.forget_peer(self.id);
    }
}

/// Runs one connection (outbound or inbound) until it ends; returns why it ended. `v2`: whether
/// to speak BIP324 (outbound: start with it; inbound: accept it). Dropping the future ends the
/// connection too, with everything it held.
pub async fn run(
    stream: TcpStream,
    addr: SocketAddr,
    inbound: bool,
    v2: bool,
    id: PeerId,
    ctx: Arc<PeerContext>,
) -> PeerError {
    let _ = stream.set_nodelay(true);
    let mut ending = Ending {
        ctx: &ctx,
        id,
        tasks: Vec::new(),
    };
    let result = async {
        let (reader, writer, transport, traits) = open(stream, addr, inbound, v2, &ctx).await?;
        // Peers cairn chose are news; inbound ones only when debugging, as Core logs them
        // with `-debug=net` (a host that connects in a loop would write the log).
        let agent = &traits.user_agent;
        match inbound {
            true => tracing::debug!("peer {id} {addr}: connected (inbound, {transport}, {agent})"),
            false => tracing::info!("peer {id} {addr}: connected (outbound, {transport}, {agent})"),
        }
        if !inbound {
            ctx.book.mark_good(addr, traits.services);
        }
        let _registered = ctx.registry.register(id, addr, inbound, &traits.user_agent);
        let (reading, incoming) = spawn_reader(reader);
        let (writing, outgoing) = spawn_writer(writer);
        ending.tasks.extend([reading, writing]);
        let ended = Session::new(&outgoing, id, addr, &ctx, &traits, inbound)
            .run(incoming)
            .await;
        if !inbound {
            ctx.book.disconnected(&addr);
        }
        ended
    }
    .await;
    drop(ending);
    match result {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

/// Opens the transport and runs the handshake, within [`HANDSHAKE_TIMEOUT`].
async fn open(
    stream: TcpStream,
    addr: SocketAddr,
    inbound: bool,
    v2: bool,
    ctx: &PeerContext,
) -> Result<(ReadWire, WriteWire, wire::Transport, PeerTraits), PeerError> {
    let opened = async {
        let (mut reader, mut writer, transport) = wire::open(stream, inbound, v2, ctx.magic)
            .await
            .map_err(|e| match e {
                OpenError::NoV2 => PeerError::NoV2,
                OpenError::Failed(e) => PeerError::Codec(e),
            })?;
        let traits = match handshake(&mut reader, &mut writer, addr, ctx).await {
            Err(PeerError::OtherChain { services }) if !inbound => {
                // Remembered, so outbound picks pass it over.
                ctx.book.mark_other_chain(addr);
                return Err(PeerError::OtherChain { services });
            }
            traits => traits?,
        };
        Ok::<_, PeerError>((reader, writer, transport, traits))
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, opened)
        .await
        .map_err(|_| PeerError::Timeout)?
}

/// A feeler connection: the handshake (which marks the address good), then nothing more.
pub async fn feel(
    stream: TcpStream,
    addr: SocketAddr,
    v2: bool,
    ctx: &PeerContext,
) -> Result<(), PeerError> {
    let _ = stream.set_nodelay(true);
    let (_, _, _, traits) = open(stream, addr, false, v2, ctx).await?;
    ctx.book.mark_good(addr, traits.services);
    Ok(())
}

/// What the reader task hands over: a whole message with its share of the receive budget, or
/// the error that ended the reading.
type Inbound = Result<(Incoming, Option<Held>), CodecError>;

/// Reading is not cancel-safe, so one task reads and hands whole messages over, each with its
/// share of the peer's receive budget; it ends after handing over the first error.
fn spawn_reader(mut reader: ReadWire) -> (JoinHandle<()>, mpsc::Receiver<Inbound>) {
    let (tx, rx) = mpsc::channel(INCOMING);
    let budget = RecvBudget::default();
    let task = tokio::spawn(async move {
        loop {
            let msg = reader.read(Some(&budget)).await;
            // As Core's `V1Transport`: a message whose checksum fails is dropped, the connection
            // kept (its bytes were read in full, so the next message starts where it ended).
            if let Err(CodecError::BadChecksum(command)) = &msg {
                tracing::debug!("dropped a {command} message with a bad checksum");
                continue;
            }
            let end = msg.is_err();
            if tx.send(msg).await.is_err() || end {
                break;
            }
        }
    });
    (task, rx)
}
