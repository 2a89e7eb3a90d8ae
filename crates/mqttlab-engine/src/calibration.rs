//! The instrument's own overhead on this host, measured through a loopback TCP pair with no
//! broker between: what a latency figure of this host carries besides the broker's time, so that
//! figures from two hosts or two days can be read together (the manifest records it).
//!
//! Each message is stamped four times: by the sender just before its write (as the engine stamps a
//! send), by the kernel as it left the sender's socket (a software TX timestamp, SO_TIMESTAMPING:
//! on loopback where a packet capture sees it), by the kernel as it reached the receiver's socket
//! (SO_TIMESTAMPNS, as `rx_stamp` stamps the engine's reads), and by the receiver when its task
//! woke and read it (tokio's readiness, as the engine's connections wait). The differences are
//!
//! * `send_us`: stamp to wire, the part of a send the engine's stamp cannot take out;
//! * `loopback_us`: wire to wire, the kernel's own path between two sockets;
//! * `wake_us`: arrival to read, what kernel receive stamps take out of the engine's figures;
//! * `client_us`: stamp to read, a client-stamped latency over a path with no broker.
//!
//! A floor, not the engine's exact cost: the sender here writes each message at once, where the
//! engine may batch several into one write; the receiver is one task on an idle runtime.
use crate::histogram::{self, Hist, Stats};
use crate::{rx_stamp, send_stamp};
use bytes::BytesMut;
use serde::Serialize;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Each message: its sequence number, padded to a small MQTT PUBLISH's size.
const MESSAGE_LEN: usize = 32;

#[derive(Debug, Serialize)]
pub struct Calibration {
    /// Messages sent, and how many a second.
    pub messages: u32,
    pub rate: f64,
    /// Messages all four stamps were taken of (the kernel may miss the first instants' packets
    /// while it switches its stamping on).
    pub stamped: u32,
    /// The sender's stamp → the kernel's TX stamp.
    pub send_us: Option<Stats>,
    /// The kernel's TX stamp → its RX stamp at the receiving socket.
    pub loopback_us: Option<Stats>,
    /// The kernel's RX stamp → the reading task's read.
    pub wake_us: Option<Stats>,
    /// The sender's stamp → the reading task's read: the three above, per message.
    pub client_us: Option<Stats>,
}

/// Sends `messages` messages at `rate` a second through a loopback pair and times their way.
pub fn calibrate(messages: u32, rate: f64) -> io::Result<Calibration> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let mut sender = std::net::TcpStream::connect(listener.local_addr()?)?;
    let (receiver, _) = listener.accept()?;
    sender.set_nodelay(true)?;
    // Nothing written yet: key 0 is the first byte.
    if send_stamp::enable(sender.as_raw_fd(), 0).is_none() {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "the kernel refuses transmit timestamps"));
    }
    if !rx_stamp::enable(receiver.as_raw_fd()) {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "the kernel refuses receive timestamps"));
    }
    // The kernel switches stamping on by deferred work: give it the moment it takes.
    std::thread::sleep(Duration::from_millis(20));
    let reading = std::thread::spawn(move || read_all(receiver, messages));
    let interval = Duration::from_secs_f64(1.0 / rate.max(1.0));
    let mut sent: Vec<(u64, Option<u64>)> = Vec::with_capacity(messages as usize);
    let mut written: u64 = 0;
    let start = std::time::Instant::now();
    for seq in 0..messages {
        if let Some(wait) = (start + interval * seq).checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(wait);
        }
        let mut message = [0u8; MESSAGE_LEN];
        message[..4].copy_from_slice(&seq.to_be_bytes());
        let stamped = crate::clock::now_ns();
        sender.write_all(&message)?;
        written += MESSAGE_LEN as u64;
        sent.push((stamped, tx_stamp(sender.as_raw_fd(), written - 1)));
    }
    let received = reading.join().map_err(|_| io::Error::other("the calibration's reader panicked"))??;
    let (mut send, mut loopback, mut wake, mut client) = (histogram::new_hist(), histogram::new_hist(), histogram::new_hist(), histogram::new_hist());
    let mut stamped = 0;
    for (seq, (arrived, read)) in received.iter().enumerate() {
        let (Some(&(stamp, Some(left))), Some(arrived), Some(read)) = (sent.get(seq), arrived, read) else { continue };
        stamped += 1;
        histogram::record(&mut send, left.saturating_sub(stamp) / 1000);
        histogram::record(&mut loopback, arrived.saturating_sub(left) / 1000);
        histogram::record(&mut wake, read.saturating_sub(*arrived) / 1000);
        histogram::record(&mut client, read.saturating_sub(stamp) / 1000);
    }
    let figures = |h: &Hist| histogram::stats(h);
    Ok(Calibration { messages, rate, stamped, send_us: figures(&send), loopback_us: figures(&loopback), wake_us: figures(&wake), client_us: figures(&client) })
}

/// The kernel's TX timestamp (monotonic ns) of the write that ended at byte `last_byte`, taken off
/// the error queue (`send_stamp`). On loopback the kernel queues it within the write; a few tries
/// cover a scheduler's delay, then the message counts as unstamped.
fn tx_stamp(fd: RawFd, last_byte: u64) -> Option<u64> {
    for _ in 0..1000 {
        match send_stamp::next_report(fd) {
            Some(Some((key, at))) if key == last_byte as u32 => return Some(at),
            Some(_) => continue,
            None => std::thread::yield_now(),
        }
    }
    None
}

/// The receiver: one task on a current-thread runtime, as an engine worker waits for its reads.
/// Per message, when the kernel stamped its arrival and when the task read it.
fn read_all(receiver: std::net::TcpStream, messages: u32) -> io::Result<Vec<(Option<u64>, Option<u64>)>> {
    receiver.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
    runtime.block_on(async move {
        let stream = tokio::net::TcpStream::from_std(receiver)?;
        let fd = stream.as_raw_fd();
        let mut times = vec![(None, None); messages as usize];
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let mut whole = 0usize;
        while whole < messages as usize {
            let ready = tokio::time::timeout(Duration::from_secs(5), stream.readable()).await;
            ready.map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the calibration's messages stopped arriving"))??;
            let (n, arrived) = match stream.try_io(tokio::io::Interest::READABLE, || rx_stamp::read(fd, &mut buf)) {
                Ok(read) => read,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the calibration's sender closed early"));
            }
            let read = crate::clock::now_ns();
            while buf.len() >= MESSAGE_LEN {
                let message = buf.split_to(MESSAGE_LEN);
                let seq = u32::from_be_bytes([message[0], message[1], message[2], message[3]]) as usize;
                if let Some(slot) = times.get_mut(seq) {
                    *slot = (arrived, Some(read));
                }
                whole += 1;
            }
            if buf.capacity() - buf.len() < MESSAGE_LEN {
                buf.reserve(64 * 1024);
            }
        }
        Ok(times)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_is_stamped_four_times_in_their_order() {
        let c = calibrate(200, 2000.0).expect("a loopback pair");
        assert_eq!(c.messages, 200);
        // The first instants' packets may go unstamped while the kernel switches stamping on.
        assert!(c.stamped >= 150, "{} of 200 stamped", c.stamped);
        let (send, loopback, wake, client) = (c.send_us.unwrap(), c.loopback_us.unwrap(), c.wake_us.unwrap(), c.client_us.unwrap());
        // The parts add up to the whole (each per message; medians need not add, maxima bound).
        assert!(client.max_us <= send.max_us + loopback.max_us + wake.max_us + 3, "{client:?}");
        assert!(client.min_us >= send.min_us + loopback.min_us + wake.min_us, "{client:?}");
        assert!(send.p50_us < 10_000 && wake.p50_us < 10_000, "send {send:?}, wake {wake:?}");
    }
}
