//! MQTT-SN: the messages whose datagram was sent again, which every worker's subscribers consult
//! before they call a message that came after a later one an ordering violation.
use rustc_hash::FxHashSet;
use std::sync::Mutex;

/// The messages (publisher, seq) whose datagram was sent again, by their publisher or by the
/// gateway to a subscriber (DUP set), shared by every worker: over UDP such a message may arrive
/// after a later one, which is at-least-once over datagrams, not a broken order.
#[derive(Default)]
pub struct Resent(Mutex<FxHashSet<(u32, u32)>>);

impl Resent {
    /// One for an MQTT-SN run (None over TCP, where a late message is the broker's doing).
    pub fn for_plan(plan: &crate::plan::RunPlan) -> Option<Resent> {
        matches!(plan.transport, crate::plan::Transport::MqttSn(_)).then(Resent::default)
    }

    pub(crate) fn mark(&self, payload: &[u8]) {
        if let Some(h) = crate::payload::Header::read(payload) {
            self.0.lock().unwrap().insert((h.publisher, h.seq));
        }
    }

    pub fn contains(&self, publisher: u32, seq: u32) -> bool {
        self.0.lock().unwrap().contains(&(publisher, seq))
    }
}
