//! What a worker's client tasks share: the plan, the target, the accounting tables, the
//! worker's statistics, and the coordinator's phases as the clients see them. Its own module so
//! that clients depend on it and the worker depends on the clients, not both ways.
use crate::accounting::UnitTable;
use crate::clock::now_ns;
use crate::conn::Target;
use crate::plan::RunPlan;
use crate::stats::{WorkerShared, WorkerStats};
use crate::timer::{LocalSignal, PacerQueue};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Clients connect and subscribe.
    Connect,
    /// Publishers follow their schedules from `start_ns`.
    Run,
    /// No more sends; waiting for deliveries and acknowledgements still under way.
    Drain,
    /// Disconnect and report.
    Close,
}

#[derive(Clone, Copy, Debug)]
pub struct Ctl {
    pub phase: Phase,
    pub start_ns: u64,
}

/// Everything a client task of this worker shares.
pub struct WorkerCtx {
    pub plan: Arc<RunPlan>,
    pub target: Arc<Target>,
    pub units: Arc<UnitTable>,
    /// Number of receivers owed each publisher's messages.
    pub fanout: Arc<Vec<u32>>,
    /// Send records for the topic-sequence method; None with the header.
    pub sequence: Option<Arc<crate::sequence::SequenceTable>>,
    /// The kernel's send stamps (`send_stamp`), where the plan's sends are stamped by it.
    pub send_stamps: Option<Arc<crate::send_stamp::SendStamps>>,
    /// Closed loop completing on delivery: the receivers tell the publishers.
    pub tracker: Option<Arc<crate::delivery_tracker::DeliveryTracker>>,
    /// Offline sessions (`subscribers.offline`): the publishers' progress every worker reads.
    pub offline: Option<Arc<crate::offline::OfflineShared>>,
    /// Wills (`publishers.will`): each publisher's exit instant, which its watchers time from.
    pub wills: Option<Arc<crate::wills::WillShared>>,
    /// MQTT-SN: the messages whose datagram was sent again (an order they may break is UDP's).
    pub resent: Option<Arc<crate::resent::Resent>>,
    pub stats: RefCell<WorkerStats>,
    pub shared: Arc<WorkerShared>,
    pub(crate) ctl: watch::Receiver<Ctl>,
    /// The latest control state, relayed by `report_progress` to the clients' signals: a
    /// `watch::Receiver::changed()` in every client's select! loop registers and drops a waiter
    /// under tokio's mutex each time round, which a client paid once per message.
    pub(crate) ctl_now: Cell<Ctl>,
    pub(crate) phase_listeners: RefCell<Vec<Rc<LocalSignal>>>,
    pub(crate) keepalive_listeners: RefCell<Vec<Rc<LocalSignal>>>,
    pub pacer: Rc<PacerQueue>,
    /// Batched submission (`options.submission: batched`), where io_uring could be set up.
    pub submitter: Option<Rc<crate::submit::Submitter>>,
    /// When this worker may open its next connection (connection ramp).
    pub(crate) next_connect_ns: Cell<u64>,
    pub(crate) connect_interval_ns: u64,
}

impl WorkerCtx {
    /// The control state as this worker's clients see it.
    pub fn ctl_now(&self) -> Ctl {
        self.ctl_now.get()
    }

    /// A signal set whenever the control state changes. It starts set, so a client's first wait
    /// returns at once and it picks up a run that began while it was connecting.
    pub fn phase_changes(&self) -> Rc<LocalSignal> {
        let signal = Rc::new(LocalSignal::default());
        signal.notify();
        self.phase_listeners.borrow_mut().push(signal.clone());
        signal
    }

    /// A signal set every quarter of the scenario's keep-alive, when clients check whether a
    /// PINGREQ is due. One worker timer instead of one per client: a tokio timer polled in a
    /// client's select! loop re-registers its waker once per message.
    pub fn keepalive_ticks(&self) -> Rc<LocalSignal> {
        let signal = Rc::new(LocalSignal::default());
        self.keepalive_listeners.borrow_mut().push(signal.clone());
        signal
    }

    /// How long a client may stay silent: half the keep-alive, so a PINGREQ goes out well before
    /// the broker would give up on it (1.5 keep-alives).
    pub fn ping_after_ns(&self) -> u64 {
        let ka = self.plan.mqtt.keepalive_s as u64;
        if ka == 0 {
            3_600_000_000_000
        } else {
            ka * 500_000_000
        }
    }

    pub(crate) fn relay_ctl(&self, ctl: Ctl) {
        self.ctl_now.set(ctl);
        for s in self.phase_listeners.borrow().iter() {
            s.notify();
        }
    }

    /// Waits for this worker's next connection slot.
    pub async fn connect_slot(&self) {
        if self.connect_interval_ns == 0 {
            return;
        }
        let now = now_ns();
        let slot = self.next_connect_ns.get().max(now);
        self.next_connect_ns.set(slot + self.connect_interval_ns);
        if slot > now {
            tokio::time::sleep(Duration::from_nanos(slot - now)).await;
        }
    }
}

#[cfg(test)]
impl WorkerCtx {
    /// A worker's context for `plan` with no broker behind it, its run not yet started.
    pub(crate) fn for_test(plan: RunPlan) -> WorkerCtx {
        let units = UnitTable::build(&plan);
        let offline = crate::offline::OfflineShared::for_plan(&plan, &units).map(Arc::new);
        let target = Target {
            url: "mqtt://127.0.0.1:1883".into(),
            addrs: Vec::new(),
            tls: None,
            websocket: None,
            protocol: mqttlab_codec::Protocol::V311,
            connect_timeout: Duration::from_secs(1),
            tcp_nodelay: true,
            kernel_timestamps: false,
        };
        let initial = Ctl { phase: Phase::Connect, start_ns: 0 };
        let (_, ctl) = watch::channel(initial);
        WorkerCtx {
            fanout: Arc::new(units.expected_units().iter().map(|v| v.len() as u32).collect()),
            units: Arc::new(units),
            target: Arc::new(target),
            sequence: None,
            send_stamps: None,
            tracker: crate::delivery_tracker::DeliveryTracker::for_plan(&plan).map(Arc::new),
            offline,
            wills: crate::wills::WillShared::for_plan(&plan).map(Arc::new),
            resent: crate::resent::Resent::for_plan(&plan).map(Arc::new),
            stats: RefCell::new(WorkerStats::new(plan.options.record_latency)),
            shared: Arc::new(WorkerShared::default()),
            ctl_now: Cell::new(initial),
            ctl,
            phase_listeners: RefCell::new(Vec::new()),
            keepalive_listeners: RefCell::new(Vec::new()),
            pacer: Rc::new(PacerQueue::new(plan.options.send_ahead_us * 1000)),
            submitter: None,
            next_connect_ns: Cell::new(0),
            connect_interval_ns: 0,
            plan: Arc::new(plan),
        }
    }
}
