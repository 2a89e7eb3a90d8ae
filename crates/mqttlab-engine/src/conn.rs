//! One MQTT connection: TCP or TLS transport, optionally WebSocket over either (`websocket`), the
//! CONNECT handshake, and non-blocking packet I/O.
//!
//! Reading and writing are polled from one future (`io`) so a client task can wait on the socket,
//! its pacer and its control channel in a single `select!` without splitting the stream: writes
//! never block reads, and neither side of the connection can stall the other.
use crate::clock::now_ns;
use crate::plan::RunPlan;
use crate::submit::{Outbox, Submitter};
use crate::websocket::WebSocket;
use bytes::{Buf, BufMut, BytesMut};
use mqttlab_codec::{decode, encode, ConnAck, Connect, DecodeError, Packet, Properties, Protocol};
use serde::Serialize;
use std::future::poll_fn;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::{client::TlsStream, TlsConnector};

/// Largest packet we accept from the broker: a bound on memory per connection.
pub const MAX_INCOMING_PACKET: usize = 64 << 20;

pub enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Where to connect, resolved once per run.
pub struct Target {
    pub url: String,
    pub addrs: Vec<SocketAddr>,
    pub tls: Option<(TlsConnector, ServerName<'static>)>,
    /// WebSocket: the Host header (name:port) and the path of the upgrade request.
    pub websocket: Option<(String, String)>,
    pub protocol: Protocol,
    pub connect_timeout: Duration,
    pub tcp_nodelay: bool,
    /// Receptions stamped by the kernel on plain TCP (`rx_stamp`).
    pub kernel_timestamps: bool,
}

impl Target {
    pub async fn resolve(plan: &RunPlan) -> Result<Arc<Target>, ConnectError> {
        let b = &plan.broker;
        let (host, port) = b.address().expect("run::start refuses a plan without a broker address");
        let path = b.websocket.as_ref().map(|w| w.path.as_str());
        let url = match (b.tls.is_some(), path) {
            (false, None) => format!("mqtt://{host}:{port}"),
            (true, None) => format!("mqtts://{host}:{port}"),
            (false, Some(p)) => format!("ws://{host}:{port}{p}"),
            (true, Some(p)) => format!("wss://{host}:{port}{p}"),
        };
        let addrs: Vec<SocketAddr> = match tokio::net::lookup_host((host, port)).await {
            Ok(a) => a.collect(),
            Err(e) => return Err(ConnectError::new("dns", format!("cannot connect to {url}: unknown host ({e})"))),
        };
        if addrs.is_empty() {
            return Err(ConnectError::new("dns", format!("cannot connect to {url}: host has no address")));
        }
        let tls = match &b.tls {
            None => None,
            Some(opts) => {
                let cfg = crate::tls::client_config(opts).map_err(|e| ConnectError::new("tls_config", e))?;
                let name = opts.server_name.clone().unwrap_or_else(|| host.to_string());
                let server_name = ServerName::try_from(name.clone())
                    .map_err(|_| ConnectError::new("tls_config", format!("tls.server_name: {name:?} is not a valid name")))?;
                Some((TlsConnector::from(cfg), server_name))
            }
        };
        let protocol = if plan.mqtt.version == 5 { Protocol::V5 } else { Protocol::V311 };
        // The Host header: an IPv6 literal in brackets, as in a URL (RFC 7230 §5.4).
        let host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
        let websocket = b.websocket.as_ref().map(|w| (format!("{host}:{port}"), w.path.clone()));
        let connect_timeout = Duration::from_millis(plan.mqtt.connect_timeout_ms.max(1));
        Ok(Arc::new(Target {
            url,
            addrs,
            tls,
            websocket,
            protocol,
            connect_timeout,
            tcp_nodelay: plan.options.tcp_nodelay,
            kernel_timestamps: plan.options.kernel_timestamps,
        }))
    }
}

/// Why a client could not connect, as data for programs (`kind` and the fields that tell the
/// cases of a kind apart) beside the one-line `message` for people: the Python front chooses its
/// remedy from these, never by reading the message.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectError {
    /// `dns`, `tls_config`, `refused`, `unreachable`, `timeout`, `tls`, `websocket`, `io`,
    /// `not_mqtt` (the peer's first packet is none an MQTT broker sends), `protocol`, `closed`
    /// (before CONNACK), `connack` (refused by its code), `subscribe`, `lost` (before the load);
    /// over MQTT-SN `udp`, `register` and `connack`.
    pub kind: &'static str,
    /// The reason for people (the exception's message in Python; not among the details).
    #[serde(skip_serializing)]
    pub message: String,
    /// The first byte the peer answered with, when that answer was no CONNACK.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_byte: Option<u8>,
    /// The CONNACK's return or reason code, also one the protocol version does not define (a
    /// 3.1.1 broker's 0x01 "unacceptable protocol version" read as MQTT 5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connack_code: Option<u8>,
    /// The SUBACK's refusal code (`subscribe`: 0x80 under 3.1.1, an MQTT 5 reason such as 0x87).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suback_code: Option<u8>,
    /// A TLS certificate's fault: `unknown_issuer`, `not_valid_for_name`, `expired`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate: Option<&'static str>,
}

impl ConnectError {
    pub fn new(kind: &'static str, message: String) -> ConnectError {
        ConnectError { kind, message, first_byte: None, connack_code: None, suback_code: None, certificate: None }
    }
}

/// The first answer could not be decoded: a CONNACK the protocol version does not allow (its code
/// kept), or a peer that does not speak MQTT at all (its first byte kept, to say what it is).
fn unreadable_answer(url: &str, answer: &[u8], e: DecodeError) -> ConnectError {
    const CONNACK: u8 = 2;
    let first = answer.first().copied();
    let mut error = match first {
        Some(byte) if byte >> 4 == CONNACK => ConnectError::new("protocol", format!("cannot connect to {url}: malformed CONNACK: {e}")),
        _ => ConnectError::new("not_mqtt", format!("cannot connect to {url}: the answer is not MQTT: {e}")),
    };
    error.first_byte = first;
    // CONNACK: fixed header, remaining length (2 or more, one byte), flags, then the code.
    if first.map(|b| b >> 4) == Some(CONNACK) && answer.len() > 3 {
        error.connack_code = Some(answer[3]);
    }
    error
}

/// Durations of the connection's steps, in µs.
pub struct ConnectTimings {
    pub tcp_us: u64,
    pub tls_us: Option<u64>,
    /// The WebSocket upgrade (request sent → 101 answer checked).
    pub ws_us: Option<u64>,
    pub connack_us: u64,
}

pub enum IoEvent {
    Read(usize),
    Wrote,
}

pub struct Conn {
    stream: Stream,
    rbuf: BytesMut,
    /// How much to read at once: small at first, doubled whenever a read fills it, so that a
    /// connection that gets a CONNACK and a PUBACK now and then never touches more than a page.
    read_size: usize,
    /// The last read took less than it had room for: the socket was empty then (`poll_read_tcp`).
    drained: bool,
    /// MQTT packets queued for the socket (framed on their way out over WebSocket).
    pub wbuf: BytesMut,
    /// MQTT over WebSocket: the framing between the buffers above and the socket.
    ws: Option<Box<WebSocket>>,
    pub protocol: Protocol,
    /// MQTT bytes, without WebSocket framing (`websocket_overhead`).
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Largest packet the broker accepts (5.0 CONNACK), for our own sends.
    pub broker_max_packet: Option<u32>,
    pub broker_receive_max: Option<u16>,
    /// Topic aliases the broker accepts from us (5.0 CONNACK; none when absent).
    pub broker_alias_max: u16,
    /// Size on the wire of the packet `next_packet` returned last.
    pub last_in_size: usize,
    /// The kernel stamps what this connection receives (`rx_stamp`: plain TCP, when asked).
    pub stamps_rx: bool,
    /// The last read's kernel timestamp (monotonic ns), until `rx_ns` takes it.
    last_rx_ns: Option<u64>,
    /// A publisher's messages awaiting the kernel's send stamp (`send_stamp`: plain TCP, direct
    /// writes, when asked).
    sends: Option<Box<crate::send_stamp::PendingSends>>,
    /// Back-pressure: since when the socket has held our bytes back (the broker not reading),
    /// and for how long it did before, in all (`take_socket_full_ns`).
    full_since: Option<u64>,
    full_ns: u64,
    /// The worker's count of connections held back now, for the live display (a publisher's).
    held_back_gauge: Option<Arc<AtomicU64>>,
    /// The broker ended the connection with DISCONNECT (its reason code): what a broker that
    /// shuts down cleanly sends. The connection is then as lost as a closed socket.
    pub broker_disconnect: Option<u8>,
    /// Batched submission (plain TCP only): the worker's submitter and this connection's outbox,
    /// whose bytes go to the socket before anything in `wbuf`.
    batch: Option<(Rc<Submitter>, Rc<Outbox>)>,
}

pub fn connack_reason(protocol: Protocol, code: u8) -> &'static str {
    match (protocol, code) {
        (Protocol::V311, 1) => "unacceptable protocol version",
        (Protocol::V311, 2) => "client identifier rejected",
        (Protocol::V311, 3) => "server unavailable",
        (Protocol::V311, 4) => "bad user name or password",
        (Protocol::V311, 5) => "not authorized",
        (Protocol::V5, 0x80) => "unspecified error",
        (Protocol::V5, 0x81) => "malformed packet",
        (Protocol::V5, 0x82) => "protocol error",
        (Protocol::V5, 0x83) => "implementation specific error",
        (Protocol::V5, 0x84) => "unsupported protocol version",
        (Protocol::V5, 0x85) => "client identifier not valid",
        (Protocol::V5, 0x86) => "bad user name or password",
        (Protocol::V5, 0x87) => "not authorized",
        (Protocol::V5, 0x88) => "server unavailable",
        (Protocol::V5, 0x89) => "server busy",
        (Protocol::V5, 0x8A) => "banned",
        (Protocol::V5, 0x8C) => "bad authentication method",
        (Protocol::V5, 0x90) => "topic name invalid",
        (Protocol::V5, 0x95) => "packet too large",
        (Protocol::V5, 0x97) => "quota exceeded",
        (Protocol::V5, 0x99) => "payload format invalid",
        (Protocol::V5, 0x9A) => "retain not supported",
        (Protocol::V5, 0x9B) => "QoS not supported",
        (Protocol::V5, 0x9C) => "use another server",
        (Protocol::V5, 0x9D) => "server moved",
        (Protocol::V5, 0x9F) => "connection rate exceeded",
        _ => "refused",
    }
}

impl Conn {
    /// TCP (+ TLS) connect and the CONNECT/CONNACK exchange, all within the connect timeout.
    pub async fn open(target: &Target, connect: Connect) -> Result<(Conn, ConnAck, ConnectTimings), ConnectError> {
        Self::open_from(target, connect, None).await
    }

    /// As `open`, from a chosen local address: one address offers ~60k source ports, so more
    /// connections than that from one host need several.
    pub async fn open_from(target: &Target, connect: Connect, source: Option<IpAddr>) -> Result<(Conn, ConnAck, ConnectTimings), ConnectError> {
        let url = target.url.clone();
        match tokio::time::timeout(target.connect_timeout, Self::open_inner(target, connect, source)).await {
            Ok(r) => r,
            Err(_) => Err(ConnectError::new("timeout", format!("cannot connect to {url}: no answer within {} ms", target.connect_timeout.as_millis()))),
        }
    }

    async fn open_inner(target: &Target, connect: Connect, source: Option<IpAddr>) -> Result<(Conn, ConnAck, ConnectTimings), ConnectError> {
        let url = &target.url;
        let t0 = now_ns();
        let mut last_err = None;
        let mut tcp = None;
        for addr in &target.addrs {
            match connect_tcp(*addr, source).await {
                Ok(s) => {
                    tcp = Some(s);
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        let tcp = match tcp {
            Some(s) => s,
            None => {
                let e = last_err.expect("at least one address was tried");
                let (kind, what) = match e.kind() {
                    io::ErrorKind::ConnectionRefused => ("refused", "connection refused".to_string()),
                    _ => ("unreachable", e.to_string()),
                };
                return Err(ConnectError::new(kind, format!("cannot connect to {url}: {what}")));
            }
        };
        // Latency, not bandwidth, is what we measure: small packets must go out at once (unless
        // the plan runs clients as Nagle's algorithm would).
        let _ = tcp.set_nodelay(target.tcp_nodelay);
        let t1 = now_ns();
        let (mut stream, tls_us) = match &target.tls {
            None => (Stream::Tcp(tcp), None),
            Some((connector, name)) => match connector.connect(name.clone(), tcp).await {
                Ok(s) => (Stream::Tls(Box::new(s)), Some((now_ns() - t1) / 1000)),
                Err(e) => {
                    let mut error = ConnectError::new("tls", format!("cannot connect to {url}: {}", crate::tls::describe_error(&e)));
                    error.certificate = crate::tls::certificate_fault(&e);
                    return Err(error);
                }
            },
        };
        let t_ws = now_ns();
        let (ws, ws_us) = match &target.websocket {
            None => (None, None),
            Some((host, path)) => match crate::websocket::upgrade(&mut stream, host, path).await {
                Ok(ws) => (Some(Box::new(ws)), Some((now_ns() - t_ws) / 1000)),
                Err(e) => return Err(ConnectError::new("websocket", format!("cannot connect to {url}: {e}"))),
            },
        };
        let t2 = now_ns();
        let protocol = connect.protocol;
        let stamps_rx = match &stream {
            Stream::Tcp(tcp) if target.kernel_timestamps => crate::rx_stamp::enable(tcp.as_raw_fd()),
            _ => false,
        };
        let mut conn = Conn {
            stream,
            // Both grow when used: an idle connection holds no buffer (100,000 of them would
            // otherwise hold 1.6 GB), a busy one keeps what it needs.
            rbuf: BytesMut::new(),
            read_size: MIN_READ,
            drained: false,
            wbuf: BytesMut::new(),
            ws,
            protocol,
            bytes_in: 0,
            bytes_out: 0,
            broker_max_packet: None,
            broker_receive_max: None,
            broker_alias_max: 0,
            last_in_size: 0,
            stamps_rx,
            last_rx_ns: None,
            sends: None,
            full_since: None,
            full_ns: 0,
            held_back_gauge: None,
            broker_disconnect: None,
            batch: None,
        };
        conn.send(&Packet::Connect(Box::new(connect)));
        let io_err = |e: io::Error| ConnectError::new("io", format!("cannot connect to {url}: {e}"));
        conn.flush().await.map_err(io_err)?;
        let ack = loop {
            // Decoding consumes an invalid packet: its first bytes are kept to say what it was.
            let head: Vec<u8> = conn.rbuf.iter().take(4).copied().collect();
            match conn.next_packet() {
                Ok(Some(Packet::ConnAck(a))) => break a,
                Ok(Some(other)) => {
                    return Err(ConnectError::new("protocol", format!("cannot connect to {url}: broker sent {} before CONNACK", packet_name(&other))))
                }
                Ok(None) => {}
                Err(e) => return Err(unreadable_answer(url, &head, e)),
            }
            match conn.io().await {
                Ok(IoEvent::Read(0)) => {
                    return Err(ConnectError::new("closed", format!("cannot connect to {url}: broker closed the connection before CONNACK")))
                }
                Ok(_) => {}
                Err(e) => return Err(io_err(e)),
            }
        };
        if ack.code != 0 {
            let mut error = ConnectError::new(
                "connack",
                format!("broker {url} refused the connection: CONNACK reason {:#04x} ({})", ack.code, connack_reason(protocol, ack.code)),
            );
            error.connack_code = Some(ack.code);
            return Err(error);
        }
        conn.broker_max_packet = ack.properties.maximum_packet_size;
        conn.broker_receive_max = ack.properties.receive_maximum;
        conn.broker_alias_max = ack.properties.topic_alias_maximum.unwrap_or(0);
        let timings = ConnectTimings { tcp_us: (t1 - t0) / 1000, tls_us, ws_us, connack_us: conn.rx_ns().saturating_sub(t2) / 1000 };
        Ok((conn, ack, timings))
    }

    pub fn send(&mut self, p: &Packet) {
        // Our own packets are built from validated plans; a failure here is a bug, not input.
        let n = encode(p, self.protocol, &mut self.wbuf).expect("encodable packet");
        self.bytes_out += n as u64;
    }

    /// When what was last read arrived: the kernel's timestamp where it stamps this connection,
    /// else now (the client's view, taken when its thread handles the read).
    pub fn rx_ns(&mut self) -> u64 {
        self.last_rx_ns.take().unwrap_or_else(now_ns)
    }

    /// From now on, the kernel stamps this publisher connection's sends into `stamps` (plain TCP
    /// with direct writes only: TLS writes through its library, batched sends through io_uring).
    /// Whether it does.
    pub fn stamp_sends(&mut self, stamps: &Arc<crate::send_stamp::SendStamps>, publisher: u32) -> bool {
        let (Stream::Tcp(tcp), None, None) = (&self.stream, &self.ws, &self.batch) else { return false };
        let written = self.bytes_out - self.wbuf.len() as u64;
        self.sends = crate::send_stamp::enable(tcp.as_raw_fd(), written)
            .map(|base| Box::new(crate::send_stamp::PendingSends::new(tcp.as_raw_fd(), stamps.clone(), publisher, base)));
        self.sends.is_some()
    }

    /// Message `seq` was just queued (its bytes the last of `bytes_out`): it awaits its send stamp.
    pub fn awaits_send_stamp(&mut self, seq: u32) {
        if let Some(sends) = self.sends.as_mut() {
            sends.queued(seq, self.bytes_out);
        }
    }

    /// Takes the send stamps the kernel has reported (after a write, and before a read).
    fn collect_send_stamps(&mut self) {
        if let Some(sends) = self.sends.as_mut() {
            sends.collect();
        }
    }

    pub fn next_packet(&mut self) -> Result<Option<Packet>, DecodeError> {
        let before = self.rbuf.len();
        let packet = decode(&mut self.rbuf, self.protocol, MAX_INCOMING_PACKET)?;
        self.last_in_size = before - self.rbuf.len();
        Ok(packet)
    }

    /// Bytes waiting for the socket: queued packets, those handed to the submitter and, over
    /// WebSocket, frames not yet written.
    pub fn pending_write(&self) -> usize {
        self.wbuf.len() + self.ws.as_ref().map_or(0, |ws| ws.out.len()) + self.batch.as_ref().map_or(0, |(_, o)| o.bytes.borrow().len())
    }

    /// From now on, `write_now` hands this connection's bytes to `submitter` (plain TCP only:
    /// TLS and WebSocket frame their bytes on the way out, and keep writing themselves).
    pub fn submit_through(&mut self, submitter: Option<&Rc<Submitter>>) {
        if let (Some(submitter), Stream::Tcp(tcp), None) = (submitter, &self.stream, &self.ws) {
            self.batch = Some((submitter.clone(), Rc::new(Outbox::new(tcp.as_raw_fd()))));
        }
    }

    /// WebSocket bytes beyond the MQTT packets (upgrade, frame headers, control frames), in and
    /// out, taken (zeroed) so a connection's traffic is counted once; (0, 0) over plain MQTT.
    pub fn take_websocket_overhead(&mut self) -> (u64, u64) {
        match self.ws.as_deref_mut() {
            Some(ws) => (std::mem::take(&mut ws.overhead_in), std::mem::take(&mut ws.overhead_out)),
            None => (0, 0),
        }
    }

    /// What goes to the socket next: the write buffer itself, or over WebSocket the frames it
    /// was just wrapped into (all of it as one frame: one header and one mask per write).
    fn outgoing<'a>(wbuf: &'a mut BytesMut, ws: &'a mut Option<Box<WebSocket>>) -> &'a mut BytesMut {
        match ws.as_deref_mut() {
            None => wbuf,
            Some(ws) => {
                if !wbuf.is_empty() {
                    ws.frame(wbuf);
                }
                &mut ws.out
            }
        }
    }

    /// Writes what is pending, or reads what has arrived, whichever the socket allows first.
    pub fn poll_io(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<IoEvent>> {
        let outbox = self.batch.as_ref().map(|(_, outbox)| outbox.clone());
        let written = match outbox.as_deref() {
            // Handed to this turn's submission: nothing is written here meanwhile, and the
            // submitter wakes us if the socket leaves some of it behind or we have more to write.
            Some(outbox) if outbox.queued.get() => {
                let mut waker = outbox.waker.borrow_mut();
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
                outbox.wants_write.set(!self.wbuf.is_empty());
                None
            }
            // Left behind by a submission (a full socket): these go before the write buffer.
            Some(outbox) if !outbox.bytes.borrow().is_empty() => poll_write_some(&mut self.stream, cx, &mut outbox.bytes.borrow_mut()),
            _ => {
                let out = Self::outgoing(&mut self.wbuf, &mut self.ws);
                if out.is_empty() {
                    None
                } else {
                    poll_write_some(&mut self.stream, cx, out)
                }
            }
        };
        if let Some(event) = written {
            self.note_full_socket();
            self.collect_send_stamps();
            return event;
        }
        // Stamps of bytes a full socket sent late are read here, before what the read brings.
        self.collect_send_stamps();
        let Some(ws) = self.ws.as_deref_mut() else {
            let n = ready!(self.poll_read(cx))?;
            self.bytes_in += n as u64;
            return Poll::Ready(Ok(IoEvent::Read(n)));
        };
        if ws.closed.is_some() {
            // The broker closed the WebSocket (our answer went out above): as good as a closed socket.
            return Poll::Ready(Ok(IoEvent::Read(0)));
        }
        let n = ready!(self.poll_read(cx))?;
        let ws = self.ws.as_deref_mut().expect("checked above");
        if self.rbuf.is_empty() && self.rbuf.capacity() > 0 {
            self.rbuf = BytesMut::new();
        }
        let before = self.rbuf.len();
        ws.deframe(&mut self.rbuf)?;
        self.bytes_in += (self.rbuf.len() - before) as u64;
        Poll::Ready(Ok(IoEvent::Read(n)))
    }

    /// Reads what the socket has into the read buffer (over WebSocket, the frame buffer): the
    /// count, 0 at the end of the stream.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if matches!(self.stream, Stream::Tcp(_)) {
            return self.poll_read_tcp(cx);
        }
        let buf = match self.ws.as_deref_mut() {
            Some(ws) => &mut ws.raw,
            None => &mut self.rbuf,
        };
        room_to_read(buf, self.read_size);
        let room = buf.capacity() - buf.len();
        let dst = buf.chunk_mut();
        // SAFETY: ReadBuf only writes initialised bytes into the uninitialised tail and reports
        // how many; we advance by exactly that count.
        let dst = unsafe { &mut *(dst as *mut _ as *mut [std::mem::MaybeUninit<u8>]) };
        let mut rb = ReadBuf::uninit(dst);
        ready!(Pin::new(&mut self.stream).poll_read(cx, &mut rb))?;
        let n = rb.filled().len();
        unsafe { buf.advance_mut(n) };
        if n == room {
            self.read_size = (self.read_size * 2).min(MAX_READ);
        }
        Poll::Ready(Ok(n))
    }

    /// Plain TCP reads only once the socket is readable, so the read buffer is taken only then;
    /// one whose bytes were all consumed is let go, so idle connections hold none.
    fn poll_read_tcp(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let Conn { stream: Stream::Tcp(tcp), rbuf, ws, .. } = self else { unreachable!("plain TCP only") };
        let buf = match ws.as_deref_mut() {
            Some(ws) => &mut ws.raw,
            None => rbuf,
        };
        if buf.is_empty() && buf.capacity() > 0 {
            *buf = BytesMut::new();
        }
        if std::mem::take(&mut self.drained) {
            // A short read emptied the socket: its readiness is cleared here, without the read
            // that would only find nothing (one syscall per wake-up saved). Bytes that arrived
            // since are a new edge for the runtime, which keeps the readiness then.
            let _ = tcp.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
        }
        loop {
            if let Err(e) = ready!(tcp.poll_read_ready(cx)) {
                return Poll::Ready(Err(e));
            }
            room_to_read(buf, self.read_size);
            let room = buf.capacity() - buf.len();
            let read = if self.stamps_rx {
                tcp.try_io(Interest::READABLE, || crate::rx_stamp::read(tcp.as_raw_fd(), buf)).map(|(n, stamp)| {
                    self.last_rx_ns = stamp;
                    n
                })
            } else {
                tcp.try_read_buf(buf)
            };
            match read {
                Ok(n) => {
                    if n == room {
                        self.read_size = (self.read_size * 2).min(MAX_READ);
                    } else {
                        self.drained = n > 0;
                    }
                    return Poll::Ready(Ok(n));
                }
                // The readiness was stale; try_read_buf cleared it, and the next poll waits anew.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Writes what is pending at once where the socket takes it (plain TCP), sparing the client
    /// task a round through its `select!`; what it does not take (or an error) goes by `poll_io`.
    /// With batched submission, hands them to this turn's submission instead.
    pub fn write_now(&mut self) {
        if let Some((submitter, outbox)) = &self.batch {
            if self.wbuf.is_empty() {
                return;
            }
            let mut bytes = outbox.bytes.borrow_mut();
            if bytes.is_empty() {
                std::mem::swap(&mut *bytes, &mut self.wbuf); // the two buffers trade places: no copy
            } else if outbox.queued.get() {
                bytes.extend_from_slice(&self.wbuf);
                self.wbuf.clear();
            } else {
                return; // a full socket left bytes behind: poll_io writes those, then these
            }
            drop(bytes);
            submitter.queue(outbox);
            return;
        }
        if let Stream::Tcp(tcp) = &self.stream {
            let out = Self::outgoing(&mut self.wbuf, &mut self.ws);
            while !out.is_empty() {
                match tcp.try_write(out) {
                    Ok(n) if n > 0 => out.advance(n),
                    _ => break,
                }
            }
            self.note_full_socket();
            self.collect_send_stamps();
        }
    }

    /// Called after a write: bytes still waiting mean the socket is full, the broker not reading
    /// fast enough (back-pressure); the time until none wait is added up.
    fn note_full_socket(&mut self) {
        match (self.pending_write() > 0, self.full_since) {
            (true, None) => {
                self.full_since = Some(now_ns());
                self.gauge_add(1);
            }
            (false, Some(since)) => {
                self.full_ns += now_ns().saturating_sub(since);
                self.full_since = None;
                self.gauge_add(-1);
            }
            _ => {}
        }
    }

    /// Counts this connection in `gauge` while its socket holds its bytes back.
    pub fn count_held_back_in(&mut self, gauge: Arc<AtomicU64>) {
        if self.full_since.is_some() {
            gauge.fetch_add(1, Relaxed);
        }
        self.held_back_gauge = Some(gauge);
    }

    fn gauge_add(&self, delta: i64) {
        if let Some(g) = &self.held_back_gauge {
            g.fetch_add(delta as u64, Relaxed);
        }
    }

    /// Whether the socket is holding our bytes back now.
    pub fn held_back(&self) -> bool {
        self.full_since.is_some()
    }

    /// How long the socket held our bytes back since last asked (ns), a wait still going included.
    pub fn take_socket_full_ns(&mut self) -> u64 {
        let now = now_ns();
        let ongoing = self.full_since.map_or(0, |since| now.saturating_sub(since));
        if self.full_since.is_some() {
            self.full_since = Some(now);
        }
        std::mem::take(&mut self.full_ns) + ongoing
    }

    pub async fn io(&mut self) -> io::Result<IoEvent> {
        poll_fn(|cx| self.poll_io(cx)).await
    }

    pub async fn flush(&mut self) -> io::Result<()> {
        if let Some((_, outbox)) = &self.batch {
            // Written here, ahead of the write buffer; the submitter then finds the outbox empty.
            let mut first = std::mem::take(&mut *outbox.bytes.borrow_mut());
            if !first.is_empty() {
                first.extend_from_slice(&self.wbuf);
                self.wbuf = first;
            }
        }
        let out = Self::outgoing(&mut self.wbuf, &mut self.ws);
        while !out.is_empty() {
            let n = self.stream.write(out).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            out.advance(n);
        }
        self.stream.flush().await
    }

    /// Ends our side of a connection the broker gave up on (after its DISCONNECT the network
    /// connection is to be closed), without a word: nothing more is sent on it.
    pub async fn abandon(&mut self) {
        self.wbuf.clear();
        if let Some((_, outbox)) = &self.batch {
            outbox.bytes.borrow_mut().clear();
        }
        if let Some(ws) = self.ws.as_deref_mut() {
            ws.out.clear();
        }
        let _ = tokio::time::timeout(Duration::from_millis(500), self.stream.shutdown()).await;
    }

    /// Ends the connection with a reset (RST), as a client whose host crashed: no DISCONNECT, no
    /// FIN; what was waiting to be written is dropped.
    pub fn reset(mut self) {
        self.wbuf.clear();
        if let Some((_, outbox)) = &self.batch {
            outbox.bytes.borrow_mut().clear();
        }
        let fd = match &self.stream {
            Stream::Tcp(tcp) => tcp.as_raw_fd(),
            Stream::Tls(tls) => tls.get_ref().0.as_raw_fd(),
        };
        let linger = libc::linger { l_onoff: 1, l_linger: 0 };
        // SAFETY: a valid socket of ours and a linger value that lives across the call.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                &linger as *const libc::linger as *const libc::c_void,
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
        // Closing a socket that lingers 0 s sends RST.
        drop(self);
    }

    /// Polite goodbye: DISCONNECT (and over WebSocket a Close frame), flush, close; bounded so a
    /// dead broker cannot hold us.
    pub async fn close(mut self) {
        let disconnect = Packet::Disconnect(mqttlab_codec::Disconnect { reason: 0, properties: Properties::default() });
        self.send(&disconnect);
        if let Some(ws) = self.ws.as_deref_mut() {
            ws.frame(&mut self.wbuf);
            ws.close_frame();
        }
        let _ = tokio::time::timeout(Duration::from_millis(500), async {
            let _ = self.flush().await;
            let _ = self.stream.shutdown().await;
        })
        .await;
    }
}

/// Writes what the socket takes of `out`: the event, or None when the socket has no room now.
fn poll_write_some(stream: &mut Stream, cx: &mut Context<'_>, out: &mut BytesMut) -> Option<Poll<io::Result<IoEvent>>> {
    match Pin::new(&mut *stream).poll_write(cx, out) {
        Poll::Ready(Ok(0)) => Some(Poll::Ready(Err(io::ErrorKind::WriteZero.into()))),
        Poll::Ready(Ok(n)) => {
            out.advance(n);
            // TLS keeps records in its own buffer until flushed.
            let _ = Pin::new(stream).poll_flush(cx);
            Some(Poll::Ready(Ok(IoEvent::Wrote)))
        }
        Poll::Ready(Err(e)) => Some(Poll::Ready(Err(e))),
        Poll::Pending => None,
    }
}

const MIN_READ: usize = 1024;
const MAX_READ: usize = 64 * 1024;

/// Space for the next read: at least `size`, less a quarter that may already be there.
fn room_to_read(buf: &mut BytesMut, size: usize) {
    if buf.capacity() - buf.len() < size / 4 {
        buf.reserve(size);
    }
}

async fn connect_tcp(addr: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let Some(ip) = source else { return TcpStream::connect(addr).await };
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.bind(SocketAddr::new(ip, 0))?;
    socket.connect(addr).await
}

pub fn packet_name(p: &Packet) -> &'static str {
    match p {
        Packet::Connect(_) => "CONNECT",
        Packet::ConnAck(_) => "CONNACK",
        Packet::Publish(_) => "PUBLISH",
        Packet::PubAck(_) => "PUBACK",
        Packet::PubRec(_) => "PUBREC",
        Packet::PubRel(_) => "PUBREL",
        Packet::PubComp(_) => "PUBCOMP",
        Packet::Subscribe(_) => "SUBSCRIBE",
        Packet::SubAck(_) => "SUBACK",
        Packet::Unsubscribe(_) => "UNSUBSCRIBE",
        Packet::UnsubAck(_) => "UNSUBACK",
        Packet::PingReq => "PINGREQ",
        Packet::PingResp => "PINGRESP",
        Packet::Disconnect(_) => "DISCONNECT",
        Packet::Auth(_) => "AUTH",
    }
}

impl Drop for Conn {
    /// A connection that ends held back is no longer counted as held back.
    fn drop(&mut self) {
        if self.full_since.is_some() {
            self.gauge_add(-1);
        }
    }
}
