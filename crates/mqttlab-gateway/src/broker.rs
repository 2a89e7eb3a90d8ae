//! The gateway's side of one MQTT 3.1.1 connection to the broker: connect with a CONNECT/CONNACK
//! handshake, write packets, read whole packets.
use bytes::BytesMut;
use mqttlab_codec::{decode, encode, Connect, Packet, Properties, Protocol};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

const MAX_PACKET: usize = 1 << 20;

pub struct BrokerReader {
    half: OwnedReadHalf,
    buf: BytesMut,
}

pub struct BrokerWriter {
    half: OwnedWriteHalf,
    buf: BytesMut,
}

/// Opens a connection and completes the handshake; returns the CONNACK return code with the
/// halves (which are only worth keeping when the code is 0).
pub async fn connect(
    host: &str,
    port: u16,
    client_id: &str,
    clean_session: bool,
    keep_alive: u16,
    timeout: Duration,
) -> Result<(u8, BrokerReader, BrokerWriter), String> {
    let handshake = async {
        let stream = TcpStream::connect((host, port)).await.map_err(|e| format!("cannot connect to broker {host}:{port}: {e}"))?;
        // Each MQTT-SN datagram becomes one small MQTT packet: Nagle would hold it back.
        let _ = stream.set_nodelay(true);
        let (r, w) = stream.into_split();
        let mut reader = BrokerReader { half: r, buf: BytesMut::with_capacity(4096) };
        let mut writer = BrokerWriter { half: w, buf: BytesMut::with_capacity(4096) };
        let connect = Connect {
            protocol: Protocol::V311,
            client_id: client_id.to_string(),
            clean_start: clean_session,
            keep_alive,
            username: None,
            password: None,
            will: None,
            properties: Properties::default(),
        };
        writer.send(&Packet::Connect(Box::new(connect))).await?;
        match reader.next().await? {
            Packet::ConnAck(ack) => Ok((ack.code, reader, writer)),
            other => Err(format!("broker answered CONNECT with {other:?}")),
        }
    };
    tokio::time::timeout(timeout, handshake).await.map_err(|_| format!("broker {host}:{port} sent no CONNACK within {timeout:?}"))?
}

impl BrokerReader {
    /// The next whole packet; cancel-safe (bytes read so far stay in the buffer).
    pub async fn next(&mut self) -> Result<Packet, String> {
        loop {
            match decode(&mut self.buf, Protocol::V311, MAX_PACKET) {
                Ok(Some(p)) => return Ok(p),
                Ok(None) => {}
                Err(e) => return Err(format!("malformed packet from broker: {e}")),
            }
            let n = self.half.read_buf(&mut self.buf).await.map_err(|e| format!("broker connection: {e}"))?;
            if n == 0 {
                return Err("the broker closed the connection".into());
            }
        }
    }
}

impl BrokerWriter {
    pub async fn send(&mut self, packet: &Packet) -> Result<(), String> {
        self.buf.clear();
        encode(packet, Protocol::V311, &mut self.buf).map_err(|e| format!("cannot encode {packet:?}: {e}"))?;
        self.half.write_all(&self.buf).await.map_err(|e| format!("broker connection: {e}"))
    }

    pub async fn close(&mut self) {
        let _ = self.send(&Packet::Disconnect(mqttlab_codec::Disconnect { reason: 0, properties: Properties::default() })).await;
        let _ = self.half.shutdown().await;
    }
}
