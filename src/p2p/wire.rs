//! A peer connection's two directions over the transport agreed when it opened: v1 framing or
//! BIP324 v2 ([`super::v2`]). The handshake, the reader task and the writer task use these and
//! never see which.

use std::io::Cursor;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bitcoin::p2p::message::NetworkMessage;
use bitcoin::p2p::Magic;
use tokio::io::{
    AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter, Chain, ReadBuf,
};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use super::codec::{
    self, read_within, write_outgoing, CodecError, Held, Incoming, Outgoing, RecvBudget,
};
use super::v2::{self, Ciphers};

/// Bytes read from the socket, after the ones an inbound connection's first look took.
pub type Reader = Chain<Cursor<Vec<u8>>, BufReader<Counted<OwnedReadHalf>>>;

/// A socket half that counts the bytes through it (`cairn_p2p_{received,sent}_bytes_total`),
/// and this connection's own count (how the send timeout sees a peer read).
pub struct Counted<T> {
    inner: T,
    bytes: prometheus::IntCounter,
    mine: Arc<AtomicU64>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.bytes.inc_by(n);
        self.mine.fetch_add(n, Ordering::Relaxed);
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.bytes.inc_by(n as u64);
            self.mine.fetch_add(n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Which transport a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Plain v1 messages.
    V1,
    /// BIP324.
    V2,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::V1 => "v1",
            Transport::V2 => "v2",
        })
    }
}

/// The receiving direction.
pub struct ReadWire {
    reader: Reader,
    magic: Magic,
    v2: Option<bip324::InboundCipher>,
}

/// The sending direction.
pub struct WriteWire {
    writer: BufWriter<Counted<OwnedWriteHalf>>,
    magic: Magic,
    v2: Option<bip324::OutboundCipher>,
    /// Reused for encoding: a connection allocates nothing per message once it has grown.
    buf: Vec<u8>,
}

/// Why opening a transport failed.
#[derive(Debug)]
pub enum OpenError {
    /// An outbound v2 handshake the peer closed before answering: it speaks v1 only (Core then
    /// reconnects with v1).
    NoV2,
    /// Anything else.
    Failed(CodecError),
}

/// Opens the connection's transport: an inbound peer's first 16 bytes say whether it speaks v1
/// (a `version` message) or v2 (accepted when `v2` is on); outbound, v2 when `v2` is on, else
/// v1.
pub async fn open(
    stream: TcpStream,
    inbound: bool,
    v2: bool,
    magic: Magic,
) -> Result<(ReadWire, WriteWire, Transport), OpenError> {
    let (r, w) = stream.into_split();
    let m = crate::metrics::metrics();
    let mut plain = BufReader::with_capacity(
        256 * 1024,
        Counted {
            inner: r,
            bytes: m.p2p_received_bytes.clone(),
            mine: Arc::default(),
        },
    );
    let mut writer = BufWriter::new(Counted {
        inner: w,
        bytes: m.p2p_sent_bytes.clone(),
        mine: Arc::default(),
    });
    let mut first = Vec::new();
    if inbound {
        let mut head = [0u8; 16];
        plain
            .read_exact(&mut head)
            .await
            .map_err(|e| OpenError::Failed(e.into()))?;
        first.extend_from_slice(&head);
        if !v2 || v2::is_v1_version(&head, magic) {
            return Ok(v1(Cursor::new(first).chain(plain), writer, magic));
        }
    } else if !v2 {
        return Ok(v1(Cursor::new(first).chain(plain), writer, magic));
    }
    let mut reader = Cursor::new(first).chain(plain);
    let role = if inbound {
        bip324::Role::Responder
    } else {
        bip324::Role::Initiator
    };
    match v2::handshake(magic, role, &mut reader, &mut writer).await {
        Ok(Ciphers {
            inbound: read_cipher,
            outbound: write_cipher,
        }) => Ok((
            ReadWire {
                reader,
                magic,
                v2: Some(read_cipher),
            },
            WriteWire {
                writer,
                magic,
                v2: Some(write_cipher),
                buf: Vec::new(),
            },
            Transport::V2,
        )),
        Err(CodecError::Io(_)) if !inbound => Err(OpenError::NoV2),
        Err(e) => Err(OpenError::Failed(e)),
    }
}

fn v1(
    reader: Reader,
    writer: BufWriter<Counted<OwnedWriteHalf>>,
    magic: Magic,
) -> (ReadWire, WriteWire, Transport) {
    (
        ReadWire {
            reader,
            magic,
            v2: None,
        },
        WriteWire {
            writer,
            magic,
            v2: None,
            buf: Vec::new(),
        },
        Transport::V1,
    )
}

impl ReadWire {
    /// Reads one message (decoys skipped), first taking its size out of `budget` when given.
    pub async fn read(
        &mut self,
        budget: Option<&RecvBudget>,
    ) -> Result<(Incoming, Option<Held>), CodecError> {
        let Some(cipher) = &mut self.v2 else {
            return read_within(&mut self.reader, self.magic, budget).await;
        };
        loop {
            let len = v2::read_packet_len(&mut self.reader, cipher).await?;
            let held = match budget {
                Some(budget) => Some(budget.acquire(len as u32).await),
                None => None,
            };
            if let Some((command, payload)) =
                v2::read_packet_body(&mut self.reader, cipher, len).await?
            {
                return Ok((codec::decode(self.magic, &command, payload)?, held));
            }
        }
    }

    /// Reads one message, without a budget (the handshake).
    pub async fn read_message(&mut self) -> Result<Incoming, CodecError> {
        self.read(None).await.map(|(message, _)| message)
    }
}

impl WriteWire {
    /// Queues one message in the write buffer (written out by [`WriteWire::flush`] or when the
    /// buffer fills).
    pub async fn send(&mut self, item: Outgoing) -> Result<(), CodecError> {
        let Some(cipher) = &mut self.v2 else {
            return write_outgoing(&mut self.writer, self.magic, item, &mut self.buf).await;
        };
        let contents = match item {
            Outgoing::Block(bytes) => v2::contents("block", &bytes),
            Outgoing::Message(message) => {
                let command = codec::encode_v1(message, &mut self.buf)?;
                v2::contents(&command, self.buf.get(24..).unwrap_or_default())
            }
        };
        if self.buf.capacity() > 1 << 20 {
            self.buf = Vec::new();
        }
        v2::write_packet(&mut self.writer, cipher, &contents).await
    }

    /// Sends one message and flushes it.
    pub async fn send_now(&mut self, message: NetworkMessage) -> Result<(), CodecError> {
        self.send(Outgoing::Message(message)).await?;
        self.flush().await
    }

    /// Writes out what is buffered.
    pub async fn flush(&mut self) -> Result<(), CodecError> {
        Ok(self.writer.flush().await?)
    }

    /// How many bytes this connection has written to its socket so far, kept up to date.
    pub fn sent(&self) -> Arc<AtomicU64> {
        self.writer.get_ref().mine.clone()
    }
}
