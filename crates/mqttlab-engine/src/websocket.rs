//! MQTT over WebSocket, client side (RFC 6455; MQTT 3.1.1 §6, MQTT 5 §6): the HTTP/1.1 upgrade
//! and the framing between the MQTT byte stream and the socket.
//!
//! The MQTT layer stays a byte stream: what the client queued since the last write leaves as one
//! binary frame (several packets in one frame, a large batch split across frames), and the
//! payloads of the broker's data frames are appended to the read buffer whatever their
//! boundaries, so packets that span frames need nothing special. This costs one masked copy per
//! write and one copy per read, and no allocation per message.
use bytes::{Buf, BufMut, BytesMut};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use ring::digest::{digest, SHA1_FOR_LEGACY_USE_ONLY};
use ring::rand::{SecureRandom, SystemRandom};
use std::io;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Appended to the client's key before hashing (RFC 6455 §1.3).
const ACCEPT_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Largest frame payload we send. Up to 65,535 bytes the length fits in two bytes, so a header is
/// at most 8 bytes; and Netty (HiveMQ) closes on frames over 64 KiB unless configured otherwise.
const MAX_FRAME: usize = 65_535;

/// Largest upgrade response we read before giving up on it.
const MAX_RESPONSE: usize = 16 * 1024;

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// One connection's WebSocket state, between the MQTT buffers of `Conn` and the socket.
pub struct WebSocket {
    /// Bytes from the socket not yet taken apart into frames.
    pub raw: BytesMut,
    /// Frames ready for the socket, masked.
    pub out: BytesMut,
    /// Payload bytes of the current data frame still to come.
    data_left: u64,
    /// Masking keys (RFC 6455 §5.3): seeded from the system's random source per connection.
    rng: SmallRng,
    /// Bytes on the wire beyond the MQTT packets: the upgrade request and response, frame
    /// headers and masking keys, control frames.
    pub overhead_in: u64,
    pub overhead_out: u64,
    /// The broker sent a Close frame (its status code, 1005 when it gave none).
    pub closed: Option<u16>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum FrameError {
    Text,
    Masked,
    BadOpcode(u8),
    BadControl,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Text => write!(f, "the broker sent a WebSocket text frame (MQTT needs binary frames)"),
            FrameError::Masked => write!(f, "the broker sent a masked WebSocket frame (servers must not mask)"),
            FrameError::BadOpcode(op) => write!(f, "the broker sent a WebSocket frame with unknown opcode {op:#x}"),
            FrameError::BadControl => write!(f, "the broker sent a fragmented or oversized WebSocket control frame"),
        }
    }
}

impl From<FrameError> for io::Error {
    fn from(e: FrameError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, e.to_string())
    }
}

impl WebSocket {
    fn new(rng: SmallRng) -> WebSocket {
        WebSocket { raw: BytesMut::new(), out: BytesMut::new(), data_left: 0, rng, overhead_in: 0, overhead_out: 0, closed: None }
    }

    /// Moves all of `mqtt` into `out` as masked binary frames.
    pub fn frame(&mut self, mqtt: &mut BytesMut) {
        for chunk in mqtt.chunks(MAX_FRAME) {
            self.put_frame(OP_BINARY, chunk);
        }
        mqtt.clear();
    }

    /// A Close frame with status 1000 (normal closure), as a polite goodbye.
    pub fn close_frame(&mut self) {
        self.put_frame(OP_CLOSE, &1000u16.to_be_bytes());
    }

    fn put_frame(&mut self, opcode: u8, payload: &[u8]) {
        let key = self.rng.next_u32().to_ne_bytes();
        let header = put_header(&mut self.out, opcode, payload.len(), key);
        let start = self.out.len();
        self.out.extend_from_slice(payload);
        mask(&mut self.out[start..], key);
        self.overhead_out += header as u64;
        if opcode != OP_BINARY {
            self.overhead_out += payload.len() as u64;
        }
    }

    /// Takes apart what `raw` holds: data frame payloads go to `mqtt`, pings are answered (into
    /// `out`), a Close is noted in `closed`. A frame cut short waits in `raw` for the next read.
    pub fn deframe(&mut self, mqtt: &mut BytesMut) -> Result<(), FrameError> {
        loop {
            if self.data_left > 0 {
                let n = (self.data_left.min(self.raw.len() as u64)) as usize;
                if n == 0 {
                    return Ok(());
                }
                mqtt.extend_from_slice(&self.raw[..n]);
                self.raw.advance(n);
                self.data_left -= n as u64;
                continue;
            }
            let Some((opcode, header, len)) = parse_header(&self.raw)? else { return Ok(()) };
            match opcode {
                OP_BINARY | OP_CONTINUATION => {
                    // MQTT is a byte stream: where a message or a fragment ends does not matter.
                    self.raw.advance(header);
                    self.overhead_in += header as u64;
                    self.data_left = len;
                }
                OP_TEXT => return Err(FrameError::Text),
                OP_CLOSE | OP_PING | OP_PONG => {
                    let len = len as usize;
                    if self.raw.len() < header + len {
                        return Ok(());
                    }
                    let frame = self.raw.split_to(header + len);
                    self.overhead_in += frame.len() as u64;
                    let payload = &frame[header..];
                    match opcode {
                        OP_PING => self.put_frame(OP_PONG, payload),
                        OP_CLOSE => {
                            let code = if payload.len() >= 2 { u16::from_be_bytes([payload[0], payload[1]]) } else { 1005 };
                            if self.closed.is_none() {
                                // The closing handshake: the same code back, then the socket goes.
                                self.put_frame(OP_CLOSE, &payload[..payload.len().min(2)]);
                            }
                            self.closed = Some(code);
                        }
                        _ => {}
                    }
                }
                other => return Err(FrameError::BadOpcode(other)),
            }
        }
    }
}

/// Parses a frame header at the start of `buf`: (opcode, header length, payload length), or None
/// when the header is not all there yet.
fn parse_header(buf: &[u8]) -> Result<Option<(u8, usize, u64)>, FrameError> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let (b0, b1) = (buf[0], buf[1]);
    let opcode = b0 & 0x0F;
    if b1 & 0x80 != 0 {
        return Err(FrameError::Masked);
    }
    let (header, len) = match b1 & 0x7F {
        126 if buf.len() < 4 => return Ok(None),
        126 => (4, u16::from_be_bytes([buf[2], buf[3]]) as u64),
        127 if buf.len() < 10 => return Ok(None),
        127 => (10, u64::from_be_bytes(buf[2..10].try_into().expect("eight bytes"))),
        n => (2, n as u64),
    };
    if opcode & 0x8 != 0 && (b0 & 0x80 == 0 || len > 125) {
        return Err(FrameError::BadControl);
    }
    Ok(Some((opcode, header, len)))
}

/// Writes a masked frame header (FIN set) for a payload of `len` bytes; returns its length.
fn put_header(out: &mut BytesMut, opcode: u8, len: usize, key: [u8; 4]) -> usize {
    out.reserve(14 + len);
    out.put_u8(0x80 | opcode);
    let header = if len < 126 {
        out.put_u8(0x80 | len as u8);
        2
    } else if len <= 0xFFFF {
        out.put_u8(0x80 | 126);
        out.put_u16(len as u16);
        4
    } else {
        out.put_u8(0x80 | 127);
        out.put_u64(len as u64);
        10
    };
    out.put_slice(&key);
    header + 4
}

/// XORs `buf` with the masking key (RFC 6455 §5.3), eight bytes at a time.
fn mask(buf: &mut [u8], key: [u8; 4]) {
    let wide = u64::from_ne_bytes([key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3]]);
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        let v = u64::from_ne_bytes((&*c).try_into().expect("eight bytes")) ^ wide;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    // Chunks start at multiples of 8, so the tail starts at key byte 0 again.
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= key[i % 4];
    }
}

/// The Sec-WebSocket-Accept a server must answer `key` with.
fn accept_for(key: &str) -> String {
    use base64::Engine;
    let mut input = key.as_bytes().to_vec();
    input.extend_from_slice(ACCEPT_GUID);
    base64::engine::general_purpose::STANDARD.encode(digest(&SHA1_FOR_LEGACY_USE_ONLY, &input))
}

/// The upgrade: sends the request for `path` on `host` (the Host header: name and port), checks
/// the broker's 101 answer (status, Upgrade, Connection, Sec-WebSocket-Accept, the `mqtt`
/// subprotocol) and returns the framing state, with any bytes that followed the answer kept.
pub async fn upgrade<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, host: &str, path: &str) -> Result<WebSocket, String> {
    use base64::Engine;
    let random = SystemRandom::new();
    let mut nonce = [0u8; 24];
    random.fill(&mut nonce).map_err(|_| "no system random source for the WebSocket key".to_string())?;
    let key = base64::engine::general_purpose::STANDARD.encode(&nonce[..16]);
    let seed = u64::from_ne_bytes(nonce[16..24].try_into().expect("eight bytes"));
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.map_err(|e| format!("WebSocket upgrade: {e}"))?;
    stream.flush().await.map_err(|e| format!("WebSocket upgrade: {e}"))?;
    let mut buf = BytesMut::with_capacity(1024);
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_RESPONSE {
            return Err(format!("WebSocket upgrade: no end to the broker's answer within {MAX_RESPONSE} bytes"));
        }
        match stream.read_buf(&mut buf).await {
            Ok(0) => return Err("WebSocket upgrade: the broker closed the connection before answering (is this port a WebSocket listener?)".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("WebSocket upgrade: {e}")),
        }
    };
    check_response(&buf[..end], &accept_for(&key), path)?;
    let mut ws = WebSocket::new(SmallRng::seed_from_u64(seed));
    ws.overhead_out = request.len() as u64;
    ws.overhead_in = end as u64;
    buf.advance(end);
    ws.raw = buf;
    Ok(ws)
}

/// Checks the broker's answer to the upgrade request; the error names what was wrong.
fn check_response(head: &[u8], accept: &str, path: &str) -> Result<(), String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or("");
    let code = status.split_whitespace().nth(1).unwrap_or("");
    if !status.starts_with("HTTP/1.") || code != "101" {
        let hint = if code == "404" { format!(" (no WebSocket listener on path {path:?}?)") } else { String::new() };
        return Err(format!("WebSocket upgrade refused: {:?}{hint}", status.chars().take(80).collect::<String>()));
    }
    let header = |name: &str| {
        text.split("\r\n").skip(1).filter_map(|l| l.split_once(':')).find(|(k, _)| k.trim().eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_string())
    };
    if !header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket")) {
        return Err("WebSocket upgrade: the broker's answer lacks Upgrade: websocket".into());
    }
    if !header("connection").is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade"))) {
        return Err("WebSocket upgrade: the broker's answer lacks Connection: Upgrade".into());
    }
    if header("sec-websocket-accept").as_deref() != Some(accept) {
        return Err("WebSocket upgrade: the broker's Sec-WebSocket-Accept does not match our key".into());
    }
    match header("sec-websocket-protocol") {
        Some(p) if p.eq_ignore_ascii_case("mqtt") => Ok(()),
        Some(p) => Err(format!("WebSocket upgrade: the broker chose subprotocol {p:?}, not mqtt")),
        None => Err("WebSocket upgrade: the broker did not agree to the mqtt subprotocol (no Sec-WebSocket-Protocol in its answer)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> WebSocket {
        WebSocket::new(SmallRng::seed_from_u64(7))
    }

    /// A server's (unmasked) frame.
    fn server_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![(fin as u8) << 7 | opcode];
        match payload.len() {
            n if n < 126 => f.push(n as u8),
            n if n <= 0xFFFF => {
                f.push(126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(payload);
        f
    }

    /// Reads our own (masked) frames back: (opcode, unmasked payload) each.
    fn read_client_frames(mut buf: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut frames = Vec::new();
        while !buf.is_empty() {
            assert_eq!(buf[0] & 0x80, 0x80, "FIN set");
            assert_eq!(buf[1] & 0x80, 0x80, "client frames are masked");
            let (mut at, len) = match buf[1] & 0x7F {
                126 => (4, u16::from_be_bytes([buf[2], buf[3]]) as usize),
                127 => (10, u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize),
                n => (2, n as usize),
            };
            let key: [u8; 4] = buf[at..at + 4].try_into().unwrap();
            at += 4;
            let payload: Vec<u8> = buf[at..at + len].iter().enumerate().map(|(i, b)| b ^ key[i % 4]).collect();
            frames.push((buf[0] & 0x0F, payload));
            buf = &buf[at + len..];
        }
        frames
    }

    #[test]
    fn the_accept_value_is_the_rfc_example() {
        // RFC 6455 §1.3's worked example.
        assert_eq!(accept_for("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn masking_is_its_own_inverse_and_matches_the_bytewise_rule_at_every_length() {
        let key = [0x37, 0xfa, 0x21, 0x3d];
        for len in 0..40 {
            let data: Vec<u8> = (0..len as u8).collect();
            let mut buf = data.clone();
            mask(&mut buf, key);
            let expected: Vec<u8> = data.iter().enumerate().map(|(i, b)| b ^ key[i % 4]).collect();
            assert_eq!(buf, expected, "length {len}");
            mask(&mut buf, key);
            assert_eq!(buf, data);
        }
    }

    #[test]
    fn queued_packets_leave_as_masked_binary_frames_with_fresh_keys_and_large_batches_are_split() {
        let mut w = ws();
        let mut mqtt = BytesMut::from(&b"\x30\x05\x00\x01ahi\xc0\x00"[..]);
        w.frame(&mut mqtt);
        assert!(mqtt.is_empty());
        let big = vec![0x5a; MAX_FRAME + 10];
        w.frame(&mut BytesMut::from(&big[..]));
        let frames = read_client_frames(&w.out);
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0], (OP_BINARY, b"\x30\x05\x00\x01ahi\xc0\x00".to_vec()));
        assert_eq!(frames[1].1.len(), MAX_FRAME);
        assert_eq!(frames[2].1.len(), 10);
        assert!(frames[1..].iter().all(|(op, p)| *op == OP_BINARY && p.iter().all(|b| *b == 0x5a)));
        // 2+4 for the small frame, 4+4 for the split one (length 65,535 and 10).
        assert_eq!(w.overhead_out, 6 + 8 + 6);
        // The wire must not show the payload in clear (its key is not zero).
        assert_ne!(&w.out[6..15], b"\x30\x05\x00\x01ahi\xc0\x00");
    }

    #[test]
    fn several_packets_in_one_frame_and_one_packet_over_several_frames_read_the_same() {
        let stream = b"\x90\x03\x00\x01\x00\x30\x07\x00\x03a/bxy\xd0\x00".to_vec();
        let mut whole = ws();
        whole.raw.extend_from_slice(&server_frame(true, OP_BINARY, &stream));
        let mut got = BytesMut::new();
        whole.deframe(&mut got).unwrap();
        assert_eq!(&got[..], &stream[..]);

        // Split across a fragmented message (binary + continuations), with a ping in between.
        let mut split = ws();
        split.raw.extend_from_slice(&server_frame(false, OP_BINARY, &stream[..4]));
        split.raw.extend_from_slice(&server_frame(true, OP_PING, b"hb"));
        split.raw.extend_from_slice(&server_frame(false, OP_CONTINUATION, &stream[4..9]));
        split.raw.extend_from_slice(&server_frame(true, OP_CONTINUATION, &stream[9..]));
        let mut got = BytesMut::new();
        split.deframe(&mut got).unwrap();
        assert_eq!(&got[..], &stream[..]);
        assert_eq!(read_client_frames(&split.out), vec![(OP_PONG, b"hb".to_vec())]);
    }

    #[test]
    fn frames_cut_anywhere_by_the_socket_deframe_to_the_same_stream() {
        let payload: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let mut wire = server_frame(true, OP_BINARY, &payload[..200]);
        wire.extend(server_frame(true, OP_PONG, b""));
        wire.extend(server_frame(true, OP_BINARY, &payload[200..]));
        for cut in [1, 2, 3, 5, 7, 64, 199] {
            let mut w = ws();
            let mut got = BytesMut::new();
            for piece in wire.chunks(cut) {
                w.raw.extend_from_slice(piece);
                w.deframe(&mut got).unwrap();
            }
            assert_eq!(&got[..], &payload[..], "pieces of {cut}");
            assert!(w.raw.is_empty());
            // Headers 4 + 2 + 2, and the 2-byte pong frame.
            assert_eq!(w.overhead_in, 4 + 2 + 2, "pieces of {cut}");
        }
    }

    #[test]
    fn a_close_is_answered_once_and_recorded_and_bad_frames_are_refused() {
        let mut w = ws();
        w.raw.extend_from_slice(&server_frame(true, OP_CLOSE, &1001u16.to_be_bytes()));
        w.deframe(&mut BytesMut::new()).unwrap();
        assert_eq!(w.closed, Some(1001));
        assert_eq!(read_client_frames(&w.out), vec![(OP_CLOSE, 1001u16.to_be_bytes().to_vec())]);

        for (frame, err) in [
            (server_frame(true, OP_TEXT, b"hi"), FrameError::Text),
            (vec![0x82, 0x81, 1, 2, 3, 4, 0], FrameError::Masked),
            (server_frame(false, OP_PING, b""), FrameError::BadControl),
            (server_frame(true, 0x3, b""), FrameError::BadOpcode(3)),
        ] {
            let mut w = ws();
            w.raw.extend_from_slice(&frame);
            assert_eq!(w.deframe(&mut BytesMut::new()), Err(err));
        }
    }

    #[test]
    fn the_upgrade_answer_is_checked_field_by_field() {
        let accept = accept_for("dGhlIHNhbXBsZSBub25jZQ==");
        let ok = format!("HTTP/1.1 101 Switching Protocols\r\nupgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n");
        assert_eq!(check_response(ok.as_bytes(), &accept, "/mqtt"), Ok(()));
        let not_found = check_response(b"HTTP/1.1 404 Not Found\r\n\r\n", &accept, "/x").unwrap_err();
        assert!(not_found.contains("404") && not_found.contains("\"/x\""), "{not_found}");
        let wrong_key = ok.replace(&accept, "AAAA");
        assert!(check_response(wrong_key.as_bytes(), &accept, "/mqtt").unwrap_err().contains("Sec-WebSocket-Accept"));
        let no_proto = ok.replace("Sec-WebSocket-Protocol: mqtt\r\n", "");
        assert!(check_response(no_proto.as_bytes(), &accept, "/mqtt").unwrap_err().contains("mqtt subprotocol"));
    }

    #[tokio::test]
    async fn an_upgrade_against_a_scripted_server_keeps_the_bytes_behind_its_answer() {
        let (mut client, mut server) = tokio::io::duplex(4096);
        let serve = async move {
            let mut req = vec![0u8; 4096];
            let n = server.read(&mut req).await.unwrap();
            let req = String::from_utf8_lossy(&req[..n]).to_string();
            assert!(req.starts_with("GET /mqtt HTTP/1.1\r\n") && req.contains("Host: b:9001\r\n") && req.contains("Sec-WebSocket-Protocol: mqtt\r\n"));
            let key = req.lines().find_map(|l| l.strip_prefix("Sec-WebSocket-Key: ")).unwrap().to_string();
            let mut answer = format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n",
                accept_for(&key)
            )
            .into_bytes();
            // A CONNACK already behind the answer, in the same segment.
            answer.extend(server_frame(true, OP_BINARY, b"\x20\x02\x00\x00"));
            server.write_all(&answer).await.unwrap();
            server
        };
        let (ws, _server) = tokio::join!(upgrade(&mut client, "b:9001", "/mqtt"), serve);
        let mut ws = ws.unwrap();
        let mut got = BytesMut::new();
        ws.deframe(&mut got).unwrap();
        assert_eq!(&got[..], b"\x20\x02\x00\x00");
    }
}
