//! Kernel receive timestamps (plain TCP): each read asks the kernel when the data reached the
//! host's stack (SO_TIMESTAMPNS, read with recvmsg), so a latency ends where the packet arrived,
//! not when an engine thread woke to read it: the instrument's own wake-up is taken out.
//!
//! TCP gives one timestamp per read: that of the last segment the read took in. A read that holds
//! several messages stamps them all with it, so a message from an earlier segment of the same read
//! is stamped late by at most the time between its segment and the last one (a bound the summary
//! names; on a busy connection reads are frequent and small). The kernel stamps with the real-time
//! clock; it is moved onto the engine's monotonic clock by the two clocks' offset read beside it.
//!
//! The kernel switches its stamping on, for the first socket that asks, by deferred work: a read
//! in the first instants may come without a stamp, and is then stamped when read.
//!
//! TLS decrypts inside its library, which reads the socket itself: no timestamp reaches us, and
//! such connections are stamped as the client saw them (`Conn::rx_ns`), as are MQTT-SN's.
use bytes::{BufMut, BytesMut};
use std::io;
use std::os::fd::RawFd;

/// Asks the kernel to timestamp what this socket receives; false where it refuses.
pub fn enable(fd: RawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and an int option of the right size.
    let r = unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &on as *const _ as *const libc::c_void, std::mem::size_of_val(&on) as libc::socklen_t)
    };
    r == 0
}

/// One recvmsg into `buf`'s spare room: the bytes read, and the kernel's timestamp of the data on
/// the monotonic clock (None when the kernel gave none).
pub fn read(fd: RawFd, buf: &mut BytesMut) -> io::Result<(usize, Option<u64>)> {
    let spare = buf.chunk_mut();
    let mut iov = libc::iovec { iov_base: spare.as_mut_ptr() as *mut libc::c_void, iov_len: spare.len() };
    // Room for SCM_TIMESTAMPNS (a timespec) and, on a socket that also stamps its sends
    // (send_stamp.rs), the SCM_TIMESTAMPING the kernel adds (three), aligned as cmsghdr wants.
    let mut control = [0u64; 16];
    // SAFETY: zeroed msghdr is its documented empty state; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: recvmsg writes at most iov_len bytes into the spare room and the control buffer.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    // SAFETY: the kernel initialised these n bytes.
    unsafe { buf.advance_mut(n) };
    Ok((n, stamp_of(&msg)))
}

/// The SCM_TIMESTAMPNS in `msg`'s control messages, moved onto CLOCK_MONOTONIC.
fn stamp_of(msg: &libc::msghdr) -> Option<u64> {
    // SAFETY: walking the control messages recvmsg filled, with the libc macros made for it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec);
                let real = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                return (real > 0).then(|| on_monotonic(real));
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// A CLOCK_REALTIME instant on CLOCK_MONOTONIC: both clocks read back to back, the offset between
/// them applied (exact to the few hundred nanoseconds between the two reads).
pub fn on_monotonic(real_ns: u64) -> u64 {
    let mono_now = crate::clock::now_ns();
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let real_now = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    mono_now.saturating_sub(real_now.saturating_sub(real_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_read_is_stamped_when_its_data_arrived_not_when_it_was_read() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut sender = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (receiver, _) = listener.accept().unwrap();
        assert!(enable(receiver.as_raw_fd()));
        // The kernel turns its stamping on for the first such socket by deferred work: a packet in
        // the next instants may come unstamped (the engine then falls back to the read's time).
        std::thread::sleep(std::time::Duration::from_millis(20));
        let sent = crate::clock::now_ns();
        sender.write_all(b"hello").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut buf = BytesMut::with_capacity(64);
        let (n, stamp) = read(receiver.as_raw_fd(), &mut buf).unwrap();
        let read_at = crate::clock::now_ns();
        assert_eq!((n, &buf[..]), (5, &b"hello"[..]));
        let stamp = stamp.expect("the kernel stamps it");
        // Stamped on arrival: after the send, about 50 ms before the read.
        assert!(stamp >= sent.saturating_sub(100_000) && read_at - stamp >= 40_000_000, "sent {sent}, stamp {stamp}, read {read_at}");
    }
}
