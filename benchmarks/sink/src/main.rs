//! sink [--host 127.0.0.1] [--port 0] [--fanout]
//!
//! A minimal MQTT 3.1.1 server for benchmarking generators (README.md says what it is not). It
//! prints the port it listens on as one line, serves until SIGTERM or SIGINT, then prints one JSON
//! line of what it saw (connections, publishes by QoS, forwards, bytes read, its own CPU seconds)
//! and exits.
//!
//! One thread, one edge-triggered epoll loop. Each readable connection gets one large read per
//! pass; every whole packet in it is answered in place (no copy, no allocation per packet) and the
//! answers of that read leave in one write. With --fanout a PUBLISH is also written to every
//! subscribed connection, at min(its QoS, the QoS granted), and the forwards of one pass leave in
//! one write per subscriber.
mod protocol;

use protocol::{answer, forward, frame, Client, Step};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

/// One read's size: at saturation one read carries thousands of small publishes, so the per-read
/// cost (system call, wake-up) is spread thin.
const READ: usize = 256 * 1024;
/// Unwritten output above which no connection is read: a subscriber slower than the publishers
/// slows the publishers down (as TCP would through a broker) instead of growing memory.
const BACKLOG: usize = 4 << 20;
const LISTENER: u64 = u64::MAX;
const SIGNALS: u64 = u64::MAX - 1;

struct Conn {
    stream: TcpStream,
    client: Client,
    /// The start of a packet the last read cut off.
    carry: Vec<u8>,
    /// Answers and forwards not yet written.
    out: Vec<u8>,
    /// Edge-triggered readiness: set by epoll, cleared when a read or write would block.
    readable: bool,
    writable: bool,
    queued: bool,
    dirty: bool,
    closing: bool,
    backlogged: bool,
}

#[derive(Default)]
struct Counts {
    connections: u64,
    publishes: [u64; 3],
    forwards: u64,
    bytes_read: u64,
}

struct Sink {
    epoll: i32,
    fanout: bool,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    subscribers: Vec<usize>,
    /// Connections to read (in order, one read each per pass) and to flush.
    ready: Vec<usize>,
    dirty: Vec<usize>,
    backlogged: usize,
    buf: Vec<u8>,
    counts: Counts,
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.to_string())
}

fn epoll_add(epoll: i32, fd: i32, events: u32, token: u64) {
    let mut ev = libc::epoll_event { events, u64: token };
    assert_eq!(unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut ev) }, 0, "epoll_ctl");
}

/// SIGTERM and SIGINT as a readable descriptor in the loop, so stopping needs no handler.
fn signal_fd() -> i32 {
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        libc::sigaddset(&mut mask, libc::SIGTERM);
        libc::sigaddset(&mut mask, libc::SIGINT);
        libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut());
        let fd = libc::signalfd(-1, &mask, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
        assert!(fd >= 0, "signalfd");
        fd
    }
}

fn cpu_s() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

impl Sink {
    fn accept(&mut self, listener: &TcpListener) {
        loop {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    eprintln!("sink: accept: {e}"); // e.g. out of descriptors: the others go on
                    return;
                }
            };
            stream.set_nonblocking(true).unwrap();
            stream.set_nodelay(true).unwrap(); // we batch answers ourselves; Nagle would only delay them
            let slot = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            let events = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
            epoll_add(self.epoll, stream.as_raw_fd(), events, slot as u64);
            self.conns[slot] = Some(Conn {
                stream,
                client: Client::default(),
                carry: Vec::new(),
                out: Vec::new(),
                readable: false,
                writable: true,
                queued: false,
                dirty: false,
                closing: false,
                backlogged: false,
            });
            self.counts.connections += 1;
        }
    }

    fn mark(&mut self, slot: usize, events: u32) {
        let Some(conn) = self.conns[slot].as_mut() else { return };
        if events & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
            conn.readable = true;
            if !conn.queued {
                conn.queued = true;
                self.ready.push(slot);
            }
        }
        if events & libc::EPOLLOUT as u32 != 0 {
            conn.writable = true;
            if !conn.out.is_empty() && !conn.dirty {
                conn.dirty = true;
                self.dirty.push(slot);
            }
        }
    }

    /// One read for each ready connection, while no output is backlogged; a connection whose read
    /// filled the buffer may have more and stays ready.
    fn serve(&mut self) {
        let ready = std::mem::take(&mut self.ready);
        for (i, &slot) in ready.iter().enumerate() {
            if self.backlogged > 0 {
                self.ready.extend_from_slice(&ready[i..]); // the rest waits for the backlog to drain
                return;
            }
            let Some(mut conn) = self.conns[slot].take() else { continue };
            conn.queued = false;
            let open = self.read(slot, &mut conn);
            self.conns[slot] = Some(conn);
            if !open {
                self.close(slot);
                continue;
            }
            self.flush(slot);
            if let Some(conn) = self.conns[slot].as_mut() {
                if conn.readable && !conn.queued {
                    conn.queued = true;
                    self.ready.push(slot);
                }
            }
        }
    }

    /// Reads once from `conn` (taken out of its slot) and answers every whole packet; false when
    /// the connection is to be closed now.
    fn read(&mut self, slot: usize, conn: &mut Conn) -> bool {
        let carried = conn.carry.len();
        if self.buf.len() < carried + READ {
            self.buf.resize(carried + READ, 0); // a packet longer than a read: the buffer grows to it
        }
        self.buf[..carried].copy_from_slice(&conn.carry);
        let filled = match (&conn.stream).read(&mut self.buf[carried..carried + READ]) {
            Ok(0) => return false,
            Ok(n) => {
                // A short read emptied the socket, and new data will raise a new edge.
                conn.readable = n == READ;
                carried + n
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                conn.readable = false;
                return true;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => return true,
            Err(_) => return false,
        };
        self.counts.bytes_read += (filled - carried) as u64;
        let was_subscribed = conn.client.subscriptions > 0;
        let mut at = 0;
        while !conn.closing {
            let (total, header) = match frame(&self.buf[at..filled]) {
                Ok(Some(whole)) => whole,
                Ok(None) => break,
                Err(_) => {
                    conn.closing = true;
                    break;
                }
            };
            let packet = &self.buf[at..at + total];
            at += total;
            match answer(packet, header, &mut conn.client, &mut conn.out) {
                Ok(Step::Continue) => {}
                Ok(Step::Forward { qos, topic, payload }) => {
                    self.counts.publishes[qos as usize] += 1;
                    if self.fanout {
                        for &s in &self.subscribers {
                            let sub = if s == slot { &mut *conn } else { self.conns[s].as_mut().unwrap() };
                            forward(qos.min(sub.client.granted), topic, payload, &mut sub.client, &mut sub.out);
                            if s != slot && !sub.dirty {
                                sub.dirty = true;
                                self.dirty.push(s);
                            }
                        }
                        self.counts.forwards += self.subscribers.len() as u64;
                    }
                }
                Ok(Step::Close) | Err(_) => conn.closing = true,
            }
        }
        conn.carry.clear();
        if !conn.closing {
            conn.carry.extend_from_slice(&self.buf[at..filled]);
        }
        if was_subscribed != (conn.client.subscriptions > 0) {
            if was_subscribed {
                self.subscribers.retain(|&s| s != slot);
            } else {
                self.subscribers.push(slot);
            }
        }
        true
    }

    /// Writes what `slot` has pending, as far as the socket takes it; closes it once a closing
    /// connection's answers are out.
    fn flush(&mut self, slot: usize) {
        let Some(conn) = self.conns[slot].as_mut() else { return };
        conn.dirty = false;
        let mut written = 0;
        while written < conn.out.len() && conn.writable {
            match (&conn.stream).write(&conn.out[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => conn.writable = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.close(slot),
            }
        }
        conn.out.drain(..written);
        if conn.closing && conn.out.is_empty() {
            return self.close(slot);
        }
        let backlogged = conn.out.len() > BACKLOG;
        if backlogged != conn.backlogged {
            conn.backlogged = backlogged;
            if backlogged {
                self.backlogged += 1;
            } else {
                self.backlogged -= 1;
            }
        }
    }

    fn flush_dirty(&mut self) {
        for slot in std::mem::take(&mut self.dirty) {
            self.flush(slot);
        }
    }

    /// Dropping the stream closes the socket, which also takes it out of the epoll set.
    fn close(&mut self, slot: usize) {
        if let Some(conn) = self.conns[slot].take() {
            if conn.backlogged {
                self.backlogged -= 1;
            }
            if conn.client.subscriptions > 0 {
                self.subscribers.retain(|&s| s != slot);
            }
            self.free.push(slot);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("sink [--host 127.0.0.1] [--port 0] [--fanout]: a minimal MQTT 3.1.1 server for benchmarks");
        return;
    }
    let host = arg(&args, "--host", "127.0.0.1");
    let port: u16 = arg(&args, "--port", "0").parse().expect("--port");
    let signals = signal_fd();
    let listener = TcpListener::bind((host.as_str(), port)).expect("bind");
    listener.set_nonblocking(true).unwrap();
    let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(epoll >= 0, "epoll_create1");
    epoll_add(epoll, listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER);
    epoll_add(epoll, signals, libc::EPOLLIN as u32, SIGNALS);
    println!("{}", listener.local_addr().unwrap().port());
    std::io::stdout().flush().unwrap();

    let mut sink = Sink {
        epoll,
        fanout: args.iter().any(|a| a == "--fanout"),
        conns: Vec::new(),
        free: Vec::new(),
        subscribers: Vec::new(),
        ready: Vec::new(),
        dirty: Vec::new(),
        backlogged: 0,
        buf: vec![0; READ],
        counts: Counts::default(),
    };
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    'run: loop {
        // Connections still readable from the last pass are served again after a look at new events.
        let timeout = if sink.ready.is_empty() || sink.backlogged > 0 { -1 } else { 0 };
        let n = unsafe { libc::epoll_wait(epoll, events.as_mut_ptr(), events.len() as i32, timeout) };
        if n < 0 {
            assert_eq!(std::io::Error::last_os_error().kind(), ErrorKind::Interrupted, "epoll_wait");
            continue;
        }
        for ev in &events[..n as usize] {
            match ev.u64 {
                LISTENER => sink.accept(&listener),
                SIGNALS => break 'run,
                slot => sink.mark(slot as usize, ev.events),
            }
        }
        sink.serve();
        sink.flush_dirty();
    }
    let (user, sys) = cpu_s();
    let c = &sink.counts;
    println!(
        "{{\"connections\": {}, \"publishes\": {}, \"qos\": [{}, {}, {}], \"forwards\": {}, \"bytes_read\": {}, \"cpu_user_s\": {user:.3}, \"cpu_sys_s\": {sys:.3}}}",
        c.connections, c.publishes.iter().sum::<u64>(), c.publishes[0], c.publishes[1], c.publishes[2], c.forwards, c.bytes_read
    );
}
