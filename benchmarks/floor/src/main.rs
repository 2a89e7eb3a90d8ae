//! floor pub  HOST:PORT --clients N --rate TOTAL --seconds S [--grid-us G] [--ahead-us A] [--batch uring]
//! floor sub  HOST:PORT --clients N --messages M
//!
//! `pub`: N connections, each publishing 64-byte QoS 0 messages on bench/<i> at TOTAL/N msg/s
//! with random phases; the thread sleeps on a timerfd (absolute time) until the earliest
//! due send, writes it, and repeats. With --grid-us, due times are rounded up to that grid; with
//! --ahead-us, a send due within that much of now goes at once instead of after a sleep (the
//! engine's options.send_ahead). With --batch uring, everything due at a wake-up, across all
//! connections, goes to the kernel in one io_uring submission (one SEND per connection with its
//! due bytes) instead of one write per message.
//! `sub`: N connections subscribed to bench/<i>; one epoll loop reads and counts PUBLISH packets
//! until M have arrived (or 3 s pass without one).
//! Both print one JSON line: messages, CPU seconds (user, sys) and µs of CPU per message, counted
//! over the load only (connecting excluded); `pub` adds the batch mode, sends per submission
//! (write or io_uring_enter) and sends per wake-up.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.to_string())
}

fn remaining_length(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let mut b = (n % 128) as u8;
        n /= 128;
        if n > 0 {
            b |= 0x80;
        }
        out.push(b);
        if n == 0 {
            break;
        }
    }
}

fn packet(first: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![first];
    remaining_length(body.len(), &mut out);
    out.extend_from_slice(body);
    out
}

fn string(s: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// MQTT 3.1.1 CONNECT (clean session, keepalive 60 s) and a wait for CONNACK.
fn connect(addr: &str, client_id: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).unwrap();
    let mut body = Vec::new();
    string("MQTT", &mut body);
    body.extend_from_slice(&[4, 0x02, 0, 60]);
    string(client_id, &mut body);
    s.write_all(&packet(0x10, &body)).unwrap();
    let mut connack = [0u8; 4];
    s.read_exact(&mut connack).expect("CONNACK");
    assert_eq!(connack[0], 0x20, "not a CONNACK");
    assert_eq!(connack[3], 0, "connection refused");
    s
}

fn cpu_s() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps on a timerfd, as the engine does (clock_nanosleep measured the same here).
fn sleep_until(tfd: i32, ns: u64) {
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: (ns / 1_000_000_000) as _, tv_nsec: (ns % 1_000_000_000).max(1) as _ },
    };
    let mut expirations = [0u8; 8];
    unsafe {
        libc::timerfd_settime(tfd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut());
        libc::read(tfd, expirations.as_mut_ptr() as *mut _, 8);
    }
}

fn report(messages: u64, cpu0: (f64, f64), extra: &str) {
    let (u, s) = cpu_s();
    let (u, s) = (u - cpu0.0, s - cpu0.1);
    println!(
        "{{\"messages\": {messages}, \"cpu_user_s\": {u:.6}, \"cpu_sys_s\": {s:.6}, \"us_per_msg\": {:.3}{extra}}}",
        (u + s) * 1e6 / messages.max(1) as f64
    );
}

/// One io_uring SEND per connection that has bytes due, all in one io_uring_enter, which also
/// waits for their completions (a send that finds room in its socket buffer completes during the
/// submission itself, so the wait adds no sleep).
/// `out[i]` must stay untouched until this returns: the kernel reads it.
fn send_batch(ring: &mut io_uring::IoUring, socks: &mut [TcpStream], out: &[Vec<u8>]) {
    let mut n = 0;
    for (i, bytes) in out.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
        let fd = io_uring::types::Fd(socks[i].as_raw_fd());
        let sqe = io_uring::opcode::Send::new(fd, bytes.as_ptr(), bytes.len() as u32).build().user_data(i as u64);
        unsafe { ring.submission().push(&sqe).expect("ring has an entry per connection") };
        n += 1;
    }
    ring.submit_and_wait(n).expect("io_uring_enter");
    for cqe in ring.completion() {
        let (i, r) = (cqe.user_data() as usize, cqe.result());
        assert!(r >= 0, "send on connection {i}: {}", std::io::Error::from_raw_os_error(-r));
        // A full socket buffer can take part of the bytes; the rest goes the plain way.
        socks[i].write_all(&out[i][r as usize..]).unwrap();
    }
}

fn publish(addr: &str, clients: usize, rate: f64, seconds: f64, grid_ns: u64, ahead_ns: u64, uring: bool) {
    let mut socks: Vec<TcpStream> = (0..clients).map(|i| connect(addr, &format!("floor-pub-{i}"))).collect();
    let packets: Vec<Vec<u8>> = (0..clients)
        .map(|i| {
            let mut body = Vec::new();
            string(&format!("bench/{i}"), &mut body);
            body.extend_from_slice(&[0u8; 64]);
            packet(0x30, &body)
        })
        .collect();
    let mut ring = uring.then(|| {
        io_uring::IoUring::new(clients.next_power_of_two() as u32).unwrap_or_else(|e| {
            eprintln!("floor: io_uring setup failed: {e}");
            std::process::exit(1)
        })
    });
    let mut out: Vec<Vec<u8>> = vec![Vec::new(); clients];
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0, 0, 0) };
    let tfd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
    let interval = clients as f64 * 1e9 / rate;
    let start = mono_ns() + 100_000_000;
    let end = start + (seconds * 1e9) as u64;
    // Next intended send per client, with uniformly random phases (as the engine draws them).
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut uniform = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut next: Vec<f64> = (0..clients).map(|_| uniform() * interval).collect();
    let due = |t: f64| {
        let t = start + t as u64;
        if grid_ns > 1 { t.div_ceil(grid_ns) * grid_ns } else { t }
    };
    let cpu0 = cpu_s();
    let (mut sent, mut submits, mut wakes) = (0u64, 0u64, 0u64);
    loop {
        let (i, t) = next.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)).map(|(i, t)| (i, due(*t))).unwrap();
        if t >= end {
            break;
        }
        if t > mono_ns() + ahead_ns {
            sleep_until(tfd, t);
            wakes += 1;
        }
        let Some(ring) = ring.as_mut() else {
            socks[i].write_all(&packets[i]).unwrap();
            sent += 1;
            submits += 1;
            next[i] += interval;
            continue;
        };
        // Everything the plain loop would write before sleeping again: due by now + ahead (and at
        // least the earliest, which may be a hair ahead of the clock after a wake-up).
        let horizon = (mono_ns() + ahead_ns).max(t).min(end - 1);
        for (j, n) in next.iter_mut().enumerate() {
            while due(*n) <= horizon {
                out[j].extend_from_slice(&packets[j]);
                sent += 1;
                *n += interval;
            }
        }
        send_batch(ring, &mut socks, &out);
        submits += 1;
        out.iter_mut().for_each(Vec::clear);
    }
    let mode = if ring.is_some() { "uring" } else { "none" };
    let per = |k: u64| sent as f64 / k.max(1) as f64;
    report(sent, cpu0, &format!(", \"batch\": \"{mode}\", \"sends_per_submit\": {:.3}, \"sends_per_wake\": {:.3}", per(submits), per(wakes)));
}

fn subscribe(addr: &str, clients: usize, messages: u64) {
    let mut socks: Vec<TcpStream> = (0..clients).map(|i| connect(addr, &format!("floor-sub-{i}"))).collect();
    for (i, s) in socks.iter_mut().enumerate() {
        let mut body = vec![0, 1];
        string(&format!("bench/{i}"), &mut body);
        body.push(0);
        s.write_all(&packet(0x82, &body)).unwrap();
        let mut suback = [0u8; 5];
        s.read_exact(&mut suback).expect("SUBACK");
        assert_eq!(suback[0], 0x90, "not a SUBACK");
        s.set_nonblocking(true).unwrap();
    }
    let ep = unsafe { libc::epoll_create1(0) };
    for (i, s) in socks.iter().enumerate() {
        let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLET) as u32, u64: i as u64 };
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) };
    }
    println!("{{\"ready\": true}}");
    std::io::stdout().flush().unwrap();
    // Per connection: bytes still to skip of the current packet, and a partial header.
    let mut skip = vec![0usize; clients];
    let mut header: Vec<Vec<u8>> = vec![Vec::new(); clients];
    let mut buf = vec![0u8; 64 * 1024];
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
    let mut received = 0u64;
    let mut cpu0 = None;
    let mut last = Instant::now();
    while received < messages && last.elapsed() < Duration::from_secs(3) {
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), 64, 100) };
        for ev in &events[..n.max(0) as usize] {
            let i = ev.u64 as usize;
            loop {
                let r = match socks[i].read(&mut buf) {
                    Ok(0) => panic!("broker closed the connection"),
                    Ok(r) => r,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                };
                cpu0.get_or_insert_with(cpu_s);
                last = Instant::now();
                let mut pos = 0;
                while pos < r {
                    if skip[i] > 0 {
                        let k = skip[i].min(r - pos);
                        skip[i] -= k;
                        pos += k;
                        continue;
                    }
                    let h = &mut header[i];
                    h.push(buf[pos]);
                    pos += 1;
                    if h.len() >= 2 && h[h.len() - 1] & 0x80 == 0 {
                        let len = h[1..].iter().rev().fold(0usize, |acc, b| acc * 128 + (b & 0x7f) as usize);
                        if h[0] >> 4 == 3 {
                            received += 1;
                        }
                        skip[i] = len;
                        h.clear();
                    }
                }
                if r < buf.len() {
                    break;
                }
            }
        }
    }
    report(received, cpu0.unwrap_or_else(cpu_s), "");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (mode, addr) = (args.get(1).map(String::as_str), args.get(2).cloned().unwrap_or_default());
    let clients: usize = arg(&args, "--clients", "10").parse().unwrap();
    match mode {
        Some("pub") => publish(
            &addr,
            clients,
            arg(&args, "--rate", "10000").parse().unwrap(),
            arg(&args, "--seconds", "8").parse().unwrap(),
            arg(&args, "--grid-us", "0").parse::<u64>().unwrap() * 1000,
            arg(&args, "--ahead-us", "0").parse::<u64>().unwrap() * 1000,
            match arg(&args, "--batch", "none").as_str() {
                "none" => false,
                "uring" => true,
                other => {
                    eprintln!("floor: --batch must be none or uring, not {other}");
                    std::process::exit(2)
                }
            },
        ),
        Some("sub") => subscribe(&addr, clients, arg(&args, "--messages", "80000").parse().unwrap()),
        _ => {
            eprintln!("usage: floor pub|sub HOST:PORT [--clients N] [--rate R --seconds S --grid-us G --ahead-us A --batch none|uring | --messages M]");
            std::process::exit(2);
        }
    }
}
