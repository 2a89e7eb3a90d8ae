//! What the host must allow for a shard to run: one file descriptor per connection.
//!
//! The usual soft limit (1,024, or 20,000 on some hosts) is far below what a benchmark of many
//! connections opens, and a connect failing with EMFILE halfway through the ramp would be read as
//! the broker refusing clients. So the limit is raised before connecting, and a host that cannot
//! give enough is told so before any load.

/// Descriptors beyond the connections: the runtime's epoll and timers, stdio, files written.
const SPARE: u64 = 256;

/// Raises RLIMIT_NOFILE so that `connections` sockets fit: the soft limit up to the hard one,
/// and the hard one as well where the process may (CAP_SYS_RESOURCE, as root), up to the
/// kernel's `fs.nr_open`. Err says what is needed, what is allowed and what to change.
pub fn ensure_open_files(connections: u64) -> Result<(), String> {
    let needed = connections + SPARE;
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain syscalls on a local struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 || limit.rlim_cur >= needed {
        return Ok(());
    }
    if limit.rlim_max >= needed {
        let raised = libc::rlimit { rlim_cur: needed, rlim_max: limit.rlim_max };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
    }
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open").ok().and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(0);
    let mut refused = None;
    if nr_open >= needed {
        let raised = libc::rlimit { rlim_cur: needed, rlim_max: needed.max(limit.rlim_max) };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
        refused = Some(std::io::Error::last_os_error());
    }
    let why = match (refused, nr_open) {
        // Root in a container or sandbox often runs without CAP_SYS_RESOURCE.
        (Some(e), _) if e.raw_os_error() == Some(libc::EPERM) => " (raising the hard limit needs CAP_SYS_RESOURCE, which this process lacks)".to_string(),
        (_, n) if n > 0 && n < needed => format!(" (the kernel allows {n} per process: fs.nr_open)"),
        _ => String::new(),
    };
    Err(format!(
        "this shard opens {connections} connections, but the process may open only {} files, hard limit {}{why}: \
         raise the hard limit for mqttlab and the broker (ulimit -Hn {needed}, LimitNOFILE= for a service, a container's --ulimit nofile) \
         or spread the clients over more processes with --dask",
        limit.rlim_cur, limit.rlim_max,
    ))
}
