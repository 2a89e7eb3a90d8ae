//! Kernel send timestamps (plain TCP, direct writes): when a publisher's PUBLISH left the host's
//! stack for the network device, so the uncorrected latency starts where the packet left, not
//! where the engine stamped it just before its write (on loopback the write itself carries the
//! packet to the broker's socket, 4–30 µs on this kind of host: calibration.rs measures it).
//!
//! The kernel reports a transmit timestamp per write on the socket's error queue, keyed by the
//! offset of the write's last byte in the stream (SO_TIMESTAMPING with OPT_ID). Each connection
//! keeps the stream offset at which each of its messages ends (`PendingSends`); a report then
//! stamps every message that ended within the bytes it covers. Messages written together in one
//! write share its stamp, that of the segment holding its last byte: an earlier message of the
//! same write is stamped late by at most the time between its segment and the last (one segment
//! on loopback up to 64 KB). The error queue is read right after each write (on loopback the
//! stamp is already there) and before each read, so nothing waits for a wake-up of its own.
//!
//! The receiver, perhaps on another thread, finds the stamp in `SendStamps` by publisher and
//! sequence number. Where it is not there (the publisher's thread not yet back from its write,
//! a socket that held the bytes back, a ring overwritten, a publisher in another process) the
//! delivery is timed from the engine's own send stamp, and counted as such in the summary.
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Release},
};
use std::sync::Arc;

/// The error queue's report of a transmit stamp (`sock_extended_err.ee_info`).
const SCM_TSTAMP_SND: u32 = 0;

/// Asks the kernel to stamp what this socket sends, each stamp keyed by stream offset, without
/// the packet's bytes (OPT_TSONLY). Returns the stream offset (bytes written through the socket
/// before, `written`) that key 0 stands for, or None where the kernel refuses.
pub fn enable(fd: RawFd, written: u64) -> Option<u64> {
    let flags = libc::SOF_TIMESTAMPING_TX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE | libc::SOF_TIMESTAMPING_OPT_ID | libc::SOF_TIMESTAMPING_OPT_TSONLY;
    // SAFETY: a valid socket and an int option of the right size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            &flags as *const _ as *const libc::c_void,
            std::mem::size_of_val(&flags) as libc::socklen_t,
        )
    };
    if r != 0 {
        return None;
    }
    // Keys count from the oldest byte not yet acknowledged (TCP's snd_una when the option was
    // set): the bytes written less those still in the send queue.
    let mut queued: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one int.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) };
    (r == 0).then(|| written.saturating_sub(queued as u64))
}

/// Every transmit stamp waiting on `fd`'s error queue, as (key, monotonic ns), to `each`.
pub fn drain(fd: RawFd, mut each: impl FnMut(u32, u64)) {
    while let Some(report) = next_report(fd) {
        if let Some((key, stamp)) = report {
            each(key, stamp);
        }
    }
}

/// The next entry of `fd`'s error queue: None when it is empty, Some(None) for an entry that is
/// no transmit stamp, else its key and software stamp (monotonic ns).
pub fn next_report(fd: RawFd) -> Option<Option<(u32, u64)>> {
    // Room for the stamps (3 timespecs) and the extended error with its address.
    let mut control = [0u64; 24];
    // SAFETY: zeroed msghdr is its documented empty state; the control buffer outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: no data buffer (OPT_TSONLY reports carry none); the kernel fills the control buffer.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    // n < 0: EAGAIN, the queue is empty (any other error shows on the next write or read).
    (n >= 0).then(|| report_of(&msg))
}

/// The key and software stamp of one error-queue report, when it is a transmit stamp.
fn report_of(msg: &libc::msghdr) -> Option<(u32, u64)> {
    let (mut key, mut stamp) = (None, None);
    // SAFETY: walking the control messages recvmsg filled, with the libc macros made for it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            let data = libc::CMSG_DATA(cmsg);
            match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPING) => {
                    // struct scm_timestamping: three timespecs, the first the software one.
                    let ts = std::ptr::read_unaligned(data as *const libc::timespec);
                    let real = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                    stamp = (real > 0).then(|| crate::rx_stamp::on_monotonic(real));
                }
                (libc::SOL_IP, libc::IP_RECVERR) | (libc::SOL_IPV6, libc::IPV6_RECVERR) => {
                    let err = std::ptr::read_unaligned(data as *const libc::sock_extended_err);
                    if err.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING && err.ee_info == SCM_TSTAMP_SND {
                        key = Some(err.ee_data);
                    }
                }
                _ => {}
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    Some((key?, stamp?))
}

/// One publisher connection's messages written (or queued) and not yet stamped: where each ends
/// in the stream, counted in the kernel's keys.
pub struct PendingSends {
    fd: RawFd,
    stamps: Arc<SendStamps>,
    publisher: u32,
    /// The stream offset (bytes the connection queued, `Conn::bytes_out`) that key 0 stands for.
    base: u64,
    /// (key of the message's last byte, its sequence number), oldest first.
    messages: VecDeque<(u32, u32)>,
}

impl PendingSends {
    pub fn new(fd: RawFd, stamps: Arc<SendStamps>, publisher: u32, base: u64) -> PendingSends {
        PendingSends { fd, stamps, publisher, base, messages: VecDeque::new() }
    }

    /// Message `seq` was queued and ends at stream offset `end` (`Conn::bytes_out` after it).
    pub fn queued(&mut self, seq: u32, end: u64) {
        // Keys are 32 bits and wrap: compared as differences below.
        self.messages.push_back(((end - 1).wrapping_sub(self.base) as u32, seq));
    }

    /// Reads the stamps the kernel reported and gives each message they cover its stamp.
    pub fn collect(&mut self) {
        if self.messages.is_empty() {
            return;
        }
        let (stamps, publisher, messages) = (&self.stamps, self.publisher, &mut self.messages);
        drain(self.fd, |key, at| {
            // Every message whose last byte is at or before the write's last byte went with it
            // (or with an earlier write whose report is lost: stamped later than it left, never earlier).
            while let Some(&(last, seq)) = messages.front() {
                if key.wrapping_sub(last) as i32 >= 0 {
                    stamps.record(publisher, seq, at);
                    messages.pop_front();
                } else {
                    break;
                }
            }
        });
    }
}

/// The kernel's send stamps of this shard's publishers, by sequence number, shared by every
/// worker thread: a ring per publisher, each slot the stamp (µs from the table's start, 40 bits:
/// 12 days) beside the low 24 bits of its sequence number, so a slot overwritten by a later send
/// is told apart.
pub struct SendStamps {
    first: u32,
    start_ns: u64,
    ring: u64,
    slots: Vec<AtomicU64>,
}

const SEQ_BITS: u32 = 24;

impl SendStamps {
    /// For publishers `first..end`, each sending up to `rate` msg/s (0: as fast as it can).
    pub fn new(first: u32, end: u32, rate: f64) -> SendStamps {
        let publishers = (end - first) as u64;
        // A message stays in a ring for about a quarter second of its publisher's sends, at
        // least 64, at most 8,192, and the whole table at most 32 MB.
        let wanted = if rate > 0.0 { (rate / 4.0).ceil() as u64 } else { 8192 };
        let cap = ((32 << 20) / 8 / publishers.max(1)).max(64);
        let ring = wanted.clamp(64, 8192).min(cap).next_power_of_two();
        SendStamps { first, start_ns: crate::clock::now_ns(), ring, slots: (0..publishers * ring).map(|_| AtomicU64::new(0)).collect() }
    }

    fn slot(&self, publisher: u32, seq: u32) -> Option<&AtomicU64> {
        let p = publisher.checked_sub(self.first)? as u64;
        self.slots.get((p * self.ring + (seq as u64 & (self.ring - 1))) as usize)
    }

    pub fn record(&self, publisher: u32, seq: u32, at_ns: u64) {
        if let Some(slot) = self.slot(publisher, seq) {
            // +1: an empty slot (0) is never a stamp.
            let us = (at_ns.saturating_sub(self.start_ns) + 500) / 1000 + 1;
            slot.store((us << SEQ_BITS) | (seq as u64 & ((1 << SEQ_BITS) - 1)), Release);
        }
    }

    /// When message `seq` of `publisher` left (monotonic ns), if its stamp is here.
    pub fn get(&self, publisher: u32, seq: u32) -> Option<u64> {
        let packed = self.slot(publisher, seq)?.load(Acquire);
        let us = packed >> SEQ_BITS;
        (us > 0 && packed & ((1 << SEQ_BITS) - 1) == seq as u64 & ((1 << SEQ_BITS) - 1)).then(|| self.start_ns + (us - 1) * 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{self, Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn each_write_is_stamped_when_it_left_and_keyed_by_its_last_byte() -> io::Result<()> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let mut sender = std::net::TcpStream::connect(listener.local_addr()?)?;
        let (mut receiver, _) = listener.accept()?;
        sender.write_all(b"before")?; // written before stamping began
        std::thread::sleep(std::time::Duration::from_millis(20));
        let base = enable(sender.as_raw_fd(), 6).expect("the kernel stamps sends");
        assert_eq!(base, 6, "everything written before was acknowledged");
        let t0 = crate::clock::now_ns();
        sender.write_all(b"0123456789")?;
        let t1 = crate::clock::now_ns();
        sender.write_all(b"abc")?;
        let mut got = Vec::new();
        drain(sender.as_raw_fd(), |key, at| got.push((key, at)));
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![9, 12], "keys: the last byte of each write after `base`");
        assert!(got[0].1 >= t0 && got[0].1 <= t1, "stamped inside its write: {t0} <= {} <= {t1}", got[0].1);
        let mut buf = [0u8; 19];
        receiver.read_exact(&mut buf)?;
        Ok(())
    }

    #[test]
    fn messages_take_the_stamp_of_the_write_that_carried_their_last_byte() -> io::Result<()> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let mut sender = std::net::TcpStream::connect(listener.local_addr()?)?;
        let (_receiver, _) = listener.accept()?;
        let base = enable(sender.as_raw_fd(), 0).expect("the kernel stamps sends");
        let stamps = Arc::new(SendStamps::new(3, 4, 100.0));
        let mut pending = PendingSends::new(sender.as_raw_fd(), stamps.clone(), 3, base);
        // Messages 0 and 1 go in one write, 2 in the next.
        pending.queued(0, 4);
        pending.queued(1, 10);
        sender.write_all(b"aaaabbbbbb")?;
        pending.queued(2, 15);
        assert_eq!(stamps.get(3, 2), None);
        pending.collect();
        assert_eq!(stamps.get(3, 2), None, "not written yet");
        assert!(stamps.get(3, 0).is_some() && stamps.get(3, 0) == stamps.get(3, 1));
        sender.write_all(b"ccccc")?;
        pending.collect();
        assert!(stamps.get(3, 2) >= stamps.get(3, 1));
        assert_eq!(stamps.get(3, 2 + stamps.ring as u32), None, "a later message in the same slot is not this one");
        assert_eq!(stamps.get(9, 0), None, "a publisher of another shard");
        Ok(())
    }
}
