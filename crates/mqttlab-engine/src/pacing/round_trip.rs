//! Round-trip mode: every subscriber sends each delivery straight back on its echo topic
//! (`Echo`), and the publisher, subscribed to its own echoes (`Echoes`), measures the round trip
//! from the message's intended send time. In a closed loop, an echo is one of the deliveries that
//! complete a message.
//!
//! With MQTT 5 request/response (`publishers.request_response`) the reply topic travels in each
//! request as its Response Topic, with the header's first 8 bytes (publisher, sequence) as its
//! Correlation Data: the subscriber answers on the topic the request names, carrying the
//! correlation back, and the publisher checks that it came back unchanged. A broker that drops or
//! changes either property is named (`response_topic_missing`, `correlation_data_changed`).
use crate::accounting::{PairState, Receipt};
use crate::clock::now_ns;
use crate::conn::Conn;
use crate::context::WorkerCtx;
use crate::payload::Header;
use crate::stats::{Timing, WorkerShared};
use bytes::Bytes;
use mqttlab_codec::{encode_publish, Properties, Publish, QoS};
use rustc_hash::FxHashSet;

/// The publisher's side: the echoes of its own messages.
pub struct Echoes {
    index: u32,
    /// The filter it subscribes to (`publishers.reply_filter`, expanded for it).
    pub filter: String,
    seen: PairState,
    /// Packet ids of QoS 2 echoes received and not yet released (PUBREL).
    pub awaiting_release: FxHashSet<u16>,
    /// SUBACK received: the publisher counts as connected from then on.
    pub ready: bool,
    pub subscribe_sent: u64,
}

impl Echoes {
    /// In round-trip mode, the echoes publisher `index` (`client_id`) subscribes to now.
    pub fn for_publisher(ctx: &WorkerCtx, index: u32, client_id: &str) -> Option<Echoes> {
        let filter = ctx.plan.publishers.reply_filter.as_ref()?;
        Some(Echoes {
            index,
            filter: crate::template::expand(filter, index, client_id),
            seen: PairState::default(),
            awaiting_release: FxHashSet::default(),
            ready: false,
            subscribe_sent: now_ns(),
        })
    }

    /// An echo arrived at `now`: counted once, its round trip recorded from the intended send
    /// time, and (closed loop on delivery) its message told it is one delivery nearer complete.
    pub fn received(&mut self, ctx: &WorkerCtx, p: &Publish, now: u64) {
        let mut st = ctx.stats.borrow_mut();
        if ctx.plan.publishers.request_response {
            let correlation = p.properties.values().and_then(|v| v.correlation_data.as_deref());
            if correlation != p.payload.get(..CORRELATION_LEN) {
                st.violation("correlation_data_changed", &format!("a response came back with correlation data {correlation:?}, not its request's"));
            }
        }
        let identified = match ctx.sequence.as_deref() {
            None => Header::read(&p.payload).filter(|h| h.publisher == self.index).map(|h| (h.seq, Some(h.intended_us * 1000))),
            Some(table) => table.identify_from(self.index, &p.payload).map(|m| (m.seq, m.sent.map(|s| s.0))),
        };
        let Some((seq, intended)) = identified else {
            st.counters.unexpected += 1;
            return;
        };
        match self.seen.record(seq, true) {
            Receipt::First => {
                st.counters.replies += 1;
                WorkerShared::inc(&ctx.shared.unique_deliveries);
                if let Some(t) = ctx.tracker.as_deref() {
                    t.delivered(self.index, seq);
                }
                match intended {
                    Some(intended_ns) if st.measured(intended_ns) => st.record(Timing::Rtt, now.saturating_sub(intended_ns) / 1000),
                    Some(_) => {}
                    None => st.counters.unmeasured += 1,
                }
            }
            Receipt::Duplicate => st.counters.reply_duplicates += 1,
        }
    }
}

/// The bytes of a request's header that are its Correlation Data: publisher and sequence number.
pub const CORRELATION_LEN: usize = 8;

/// A request's properties: `base` (the publisher's others), the topic to answer on, and its
/// correlation (from its payload's header).
pub fn request_properties(base: Option<&Properties>, response_topic: &str, payload: &[u8]) -> Properties {
    let mut properties = base.cloned().unwrap_or_default();
    properties.response_topic = Some(response_topic.to_string());
    properties.correlation_data = Some(Bytes::copy_from_slice(&payload[..CORRELATION_LEN.min(payload.len())]));
    properties
}

/// The subscriber's side: every delivery goes straight back on the echo topic, or on the
/// request's Response Topic.
pub struct Echo {
    /// Empty for request/response: each request names its own.
    topic: Vec<u8>,
    qos: QoS,
    /// Packet ids of echoes not yet acknowledged.
    inflight: FxHashSet<u16>,
    next_pkid: u16,
}

impl Echo {
    /// In round-trip mode, the echo of subscriber `index` (`client_id`), at the publishers' QoS.
    pub fn for_subscriber(ctx: &WorkerCtx, index: u32, client_id: &str) -> Option<Echo> {
        let topic = match &ctx.plan.subscribers.echo_topic {
            Some(t) => crate::template::expand(t, index, client_id).into_bytes(),
            None if ctx.plan.publishers.request_response => Vec::new(),
            None => return None,
        };
        Some(Echo { topic, qos: QoS::from_u8(ctx.plan.publishers.qos).unwrap_or(QoS::AtMostOnce), inflight: FxHashSet::default(), next_pkid: 1 })
    }

    /// The broker acknowledged echo `pkid` (PUBACK, or PUBCOMP).
    pub fn acknowledged(&mut self, pkid: u16) {
        self.inflight.remove(&pkid);
    }

    /// Answers delivery `p`: on the echo topic, or (request/response) on its Response Topic with
    /// its Correlation Data, unless the broker dropped the Response Topic (a violation).
    pub fn send(&mut self, ctx: &WorkerCtx, conn: &mut Conn, p: &Publish) {
        let (topic, properties) = if self.topic.is_empty() {
            let request = p.properties.values();
            let Some(t) = request.and_then(|v| v.response_topic.as_deref()) else {
                return ctx.stats.borrow_mut().violation("response_topic_missing", "a request came without its Response Topic");
            };
            let mut answer = Properties::default();
            answer.correlation_data = request.and_then(|v| v.correlation_data.clone());
            (t.as_bytes(), Some(answer))
        } else {
            (&self.topic[..], None)
        };
        let pkid = if self.qos == QoS::AtMostOnce {
            0
        } else {
            loop {
                self.next_pkid = if self.next_pkid == u16::MAX { 2 } else { self.next_pkid + 1 };
                if self.inflight.insert(self.next_pkid) {
                    break self.next_pkid;
                }
            }
        };
        let n = encode_publish(&mut conn.wbuf, conn.protocol, self.qos, false, false, topic, pkid, properties.as_ref(), &p.payload)
            .expect("echo within MQTT limits");
        conn.bytes_out += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pacing::testing::ctx;
    use crate::payload::HEADER_LEN;
    use bytes::Bytes;
    use mqttlab_codec::Properties;
    use serde_json::json;

    /// An echo of message `seq` of publisher `publisher`, intended at `intended_ns`.
    fn echo(publisher: u32, seq: u32, intended_ns: u64) -> Publish {
        let mut payload = vec![0u8; 32];
        Header { publisher, seq, intended_us: intended_ns / 1000, lag_us: 0 }.write(&mut payload[..HEADER_LEN]);
        Publish {
            dup: false,
            qos: QoS::AtMostOnce,
            retain: false,
            topic: Bytes::from_static(b"echo/0"),
            pkid: 0,
            properties: Properties::default(),
            payload: payload.into(),
        }
    }

    #[test]
    fn an_echo_is_counted_once_with_its_round_trip_from_the_intended_send() {
        let ctx = ctx(json!({"reply_filter": "echo/%i"}), json!({}));
        let mut echoes = Echoes::for_publisher(&ctx, 0, "p0").expect("round-trip mode");
        assert_eq!(echoes.filter, "echo/0");
        let now = now_ns();
        ctx.stats.borrow_mut().set_window(now - 10_000_000, 0);
        echoes.received(&ctx, &echo(0, 5, now - 2_000_000), now);
        echoes.received(&ctx, &echo(0, 5, now - 2_000_000), now);
        echoes.received(&ctx, &echo(1, 5, now - 2_000_000), now);
        let st = ctx.stats.borrow();
        assert_eq!((st.counters.replies, st.counters.reply_duplicates, st.counters.unexpected), (1, 1, 1));
        let rtt = &st.hists[Timing::Rtt as usize];
        assert_eq!(rtt.len(), 1);
        assert!(rtt.min() >= 1_990 && rtt.max() <= 2_010, "round trip {}..{} µs", rtt.min(), rtt.max());
    }

    #[test]
    fn without_a_reply_filter_there_is_no_round_trip() {
        assert!(Echoes::for_publisher(&ctx(json!({}), json!({})), 0, "p0").is_none());
    }
}
