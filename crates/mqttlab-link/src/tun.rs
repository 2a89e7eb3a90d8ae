//! Attaching to a TUN device inside a given network namespace.
//!
//! /dev/net/tun binds a file to the namespace of the thread that opens it, so the open and the
//! TUNSETIFF ioctl run on a short-lived thread that first joins the namespace with setns(2); the
//! calling thread never changes namespace.
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

const TUNSETIFF: libc::c_ulong = 0x400454ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Opens the TUN device `device` (packets without the 4-byte info header) in `netns`.
pub fn open_in(netns: Option<&str>, device: &str) -> io::Result<OwnedFd> {
    let netns = netns.map(str::to_owned);
    let device = device.to_owned();
    std::thread::spawn(move || {
        if let Some(path) = &netns {
            let ns = File::open(path).map_err(|e| io::Error::new(e.kind(), format!("cannot open {path}: {e}")))?;
            // SAFETY: plain syscall on a valid descriptor; affects only this thread.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(e.kind(), format!("cannot join network namespace {path}: {e}")));
            }
        }
        attach(&device)
    })
    .join()
    .map_err(|_| io::Error::other("the TUN opener thread panicked"))?
}

fn attach(device: &str) -> io::Result<OwnedFd> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open /dev/net/tun: {e}")))?;
    let mut req = IfReq { name: [0; libc::IFNAMSIZ], flags: IFF_TUN | IFF_NO_PI, _pad: [0; 22] };
    req.name[..device.len()].copy_from_slice(device.as_bytes());
    // SAFETY: TUNSETIFF reads and writes an ifreq, which IfReq lays out (40 bytes).
    if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF as _, &mut req) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("cannot attach to TUN device {device}: {e}")));
    }
    Ok(file.into())
}

/// Waits up to `timeout_ms` for `fd` to become readable.
pub fn wait_readable(fd: &OwnedFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    Ok(n > 0)
}

pub fn read_packet(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

pub fn write_packet(fd: &OwnedFd, packet: &[u8]) -> io::Result<()> {
    // SAFETY: packet is valid for packet.len() bytes. A TUN write takes a whole packet or fails.
    let n = unsafe { libc::write(fd.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
