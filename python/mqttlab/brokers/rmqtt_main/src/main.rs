//! RMQTT as mqttlab launches it: the `rmqtt` library's server, configured from the same TOML file
//! rmqttd reads (`-f rmqtt.toml`, parsed by `rmqtt-conf`), with TCP, TLS, WebSocket and secure
//! WebSocket listeners and two of rmqttd's plugins: the retainer (in memory) and shared
//! subscriptions. Sessions, routing, QoS flows, queues and the listeners' limits are the
//! library's; this file only wires them, so a result measured here is RMQTT's.

use std::time::Duration;

use clap::Parser;
use rmqtt::context::{CircuitBreakerConfig, CountBasedWindowConfig, ServerContext, TimeBasedWindowConfig, WindowConfig};
use rmqtt::net::{tls_provider, Builder};
use rmqtt::node::Node;
use rmqtt::server::MqttServer;
use rmqtt_conf::listener::Listener;
use rmqtt_conf::logging::Level;
use rmqtt_conf::{Options, Settings};

#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const RETAINER: &str = "rmqtt-retainer";
const SHARED_SUBSCRIPTION: &str = "rmqtt-shared-subscription";

/// Warnings and errors to stderr, which the launcher keeps in the broker's log.
struct StderrLog(log::LevelFilter);

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= self.0
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!("{} {}: {}", record.level(), record.target(), record.args());
        }
    }

    fn flush(&self) {}
}

fn level_filter(level: &Level) -> log::LevelFilter {
    match level {
        Level::Trace => log::LevelFilter::Trace,
        Level::Debug => log::LevelFilter::Debug,
        Level::Info => log::LevelFilter::Info,
        Level::Warn => log::LevelFilter::Warn,
        Level::Error => log::LevelFilter::Error,
    }
}

#[tokio::main]
async fn main() {
    if let Err(error) = serve().await {
        eprintln!("rmqtt: {error}");
        std::process::exit(1);
    }
}

async fn serve() -> rmqtt::Result<()> {
    let options = Options::parse_from(std::env::args());
    if options.version {
        println!("{} rustc/{}", Node::version(), Node::rustc_version());
        return Ok(());
    }
    let conf = Settings::init(options)?;
    let filter = level_filter(&conf.log.level);
    log::set_boxed_logger(Box::new(StderrLog(filter)))?;
    log::set_max_level(filter);
    tls_provider::default_provider().install_default().map_err(|_| anyhow::anyhow!("a rustls crypto provider was already installed"))?;

    let node = Node::new(conf.node.id, conf.node.busy.loadavg, conf.node.busy.cpuloadavg, conf.node.busy.update_interval);
    let scx = ServerContext::new()
        .node(node)
        .task_exec_workers(conf.task.exec_workers)
        .task_exec_queue_max(conf.task.exec_queue_max)
        .busy_check_enable(conf.node.busy.check_enable)
        .busy_handshaking_limit(conf.node.busy.handshaking)
        .mqtt_max_sessions(conf.mqtt.max_sessions)
        .plugins_config_dir(conf.plugins.dir.as_str())
        .circuit_breaker_config(circuit_breaker(conf))
        .build()
        .await;

    // Each started on the same terms as in rmqttd: only when the configuration lists it.
    let wanted = |name: &str| conf.plugins.default_startups.iter().any(|n| n == name) && !conf.plugins.disabled_default_startups.iter().any(|n| n == name);
    rmqtt_retainer::register_named(&scx, RETAINER, wanted(RETAINER), false).await?;
    rmqtt_shared_subscription::register_named(&scx, SHARED_SUBSCRIPTION, wanted(SHARED_SUBSCRIPTION), false).await?;

    let listeners = &conf.listeners;
    let mut server = MqttServer::new(scx);
    for cfg in listeners.tcps.values() {
        server = server.listener(builder(cfg).bind().map_err(|e| bind_error("TCP", cfg, e))?.tcp()?);
    }
    for cfg in listeners.tlss.values() {
        server = server.listener(builder(cfg).bind().map_err(|e| bind_error("TLS", cfg, e))?.tls()?);
    }
    for cfg in listeners.wss.values() {
        server = server.listener(builder(cfg).bind().map_err(|e| bind_error("WebSocket", cfg, e))?.ws()?);
    }
    for cfg in listeners.wsss.values() {
        server = server.listener(builder(cfg).bind().map_err(|e| bind_error("WSS", cfg, e))?.wss()?);
    }
    server.build().start();

    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    // A moment for the listeners' tasks to see the runtime go, as rmqttd allows.
    tokio::time::sleep(Duration::from_millis(100)).await;
    std::process::exit(0);
}

fn bind_error(kind: &str, cfg: &Listener, error: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("cannot bind the {kind} listener on {}: {error}", cfg.addr)
}

fn circuit_breaker(conf: &Settings) -> CircuitBreakerConfig {
    let cb = &conf.circuit_breaker;
    let window = if cb.sliding_window_type == "CountBased" {
        WindowConfig::CountBased(CountBasedWindowConfig { sliding_window_size: cb.sliding_window_size })
    } else {
        WindowConfig::TimeBased(TimeBasedWindowConfig { sliding_window_duration: cb.sliding_window_duration, sliding_window_size: cb.sliding_window_size })
    };
    CircuitBreakerConfig {
        failure_rate_threshold: cb.failure_rate_threshold,
        window,
        minimum_number_of_calls: cb.minimum_number_of_calls,
        wait_duration_in_open: cb.wait_duration_in_open,
        slow_call_duration_threshold: cb.slow_call_duration_threshold,
        slow_call_rate_threshold: cb.slow_call_rate_threshold,
        name: "storage".into(),
    }
}

/// Every listener setting of the configuration file, so that each one means what it means for
/// rmqttd (limits, keepalive, in-flight window, queue length, TLS material).
fn builder(cfg: &Listener) -> Builder {
    Builder::new()
        .name(cfg.name.as_str())
        .laddr(cfg.addr)
        .max_connections(cfg.max_connections)
        .max_handshaking_limit(cfg.max_handshaking_limit)
        .max_packet_size(cfg.max_packet_size.as_u32())
        .backlog(cfg.backlog)
        .nodelay(cfg.nodelay)
        .reuseaddr(cfg.reuseaddr)
        .reuseport(cfg.reuseport)
        .tcp_keepalive(cfg.tcp_keepalive)
        .allow_anonymous(cfg.allow_anonymous)
        .min_keepalive(cfg.min_keepalive)
        .max_keepalive(cfg.max_keepalive)
        .allow_zero_keepalive(cfg.allow_zero_keepalive)
        .keepalive_backoff(cfg.keepalive_backoff)
        .max_inflight(cfg.max_inflight)
        .handshake_timeout(cfg.handshake_timeout)
        .max_mqueue_len(cfg.max_mqueue_len)
        .mqueue_rate_limit(cfg.mqueue_rate_limit.0, cfg.mqueue_rate_limit.1)
        .max_clientid_len(cfg.max_clientid_len)
        .max_qos_allowed(cfg.max_qos_allowed)
        .max_topic_levels(cfg.max_topic_levels)
        .session_expiry_interval(cfg.session_expiry_interval)
        .max_session_expiry_interval(cfg.max_session_expiry_interval)
        .message_retry_interval(cfg.message_retry_interval)
        .message_expiry_interval(cfg.message_expiry_interval)
        .max_subscriptions(cfg.max_subscriptions)
        .max_topic_aliases(cfg.max_topic_aliases)
        .tls_cross_certificate(cfg.cross_certificate)
        .tls_cert(cfg.cert.clone())
        .tls_key(cfg.key.clone())
        .tls_client_ca_certs(cfg.client_ca_certs.clone())
        .limit_subscription(cfg.limit_subscription)
        .proxy_protocol(cfg.proxy_protocol)
        .proxy_protocol_timeout(cfg.proxy_protocol_timeout)
        .cert_cn_as_username(cfg.cert_cn_as_username)
        .cert_subject_dn_as_username(cfg.cert_subject_dn_as_username)
        .collect_cert_info(cfg.collect_cert_info)
        .idle_timeout(cfg.idle_timeout)
}
