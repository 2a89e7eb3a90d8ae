//! Delivery accounting: which receiver should get which publisher's messages, and what each
//! receiver actually got, per (publisher, receiver) pair.
//!
//! A receiver ("unit") is a subscriber, or a shared-subscription group as a whole: a message
//! published to a `$share/G/filter` is owed once to group G, not to each member.
use crate::plan::RunPlan;
use crate::topic::{matches, Subscription};
use std::collections::HashMap;

/// The plan's receivers and the publishers they are owed messages from. Every shard builds the
/// same table from the plan, so unit ids mean the same thing everywhere.
pub struct UnitTable {
    /// Unit names: `sub:<index>` or `share:<group>:<filter>`.
    pub names: Vec<String>,
    /// Per subscriber index: its own unit (if it has non-shared filters) and shared-group units,
    /// each with the filters that lead to it.
    pub routes: Vec<Vec<(u32, Vec<String>)>>,
    pub publisher_topics: Vec<String>,
}

impl UnitTable {
    pub fn build(plan: &RunPlan) -> UnitTable {
        let mut names: Vec<String> = Vec::new();
        let mut group_ids: HashMap<String, u32> = HashMap::new();
        let mut routes = Vec::with_capacity(plan.subscribers.count as usize);
        // Subscriber units first, so `sub:i` has id i whatever the shared groups are.
        for i in 0..plan.subscribers.count {
            names.push(format!("sub:{i}"));
        }
        for i in 0..plan.subscribers.count {
            let mut own = Vec::new();
            let mut shared: Vec<(u32, Vec<String>)> = Vec::new();
            for f in plan.subscriber_filters(i) {
                let sub = Subscription::parse(&f);
                match sub.share_group {
                    None => own.push(sub.filter),
                    Some(g) => {
                        let key = format!("share:{g}:{}", sub.filter);
                        let id = *group_ids.entry(key.clone()).or_insert_with(|| {
                            names.push(key);
                            names.len() as u32 - 1
                        });
                        match shared.iter_mut().find(|(u, _)| *u == id) {
                            Some((_, fs)) => fs.push(sub.filter),
                            None => shared.push((id, vec![sub.filter])),
                        }
                    }
                }
            }
            let mut r = Vec::new();
            if !own.is_empty() {
                r.push((i, own));
            }
            r.extend(shared);
            routes.push(r);
        }
        let publisher_topics = (0..plan.publishers.count).map(|p| plan.publisher_topic(p)).collect();
        UnitTable { names, routes, publisher_topics }
    }

    /// The unit a message on `topic` counts for when subscriber `sub` receives it: its own
    /// subscription first, else the first shared group whose filter matches.
    pub fn unit_for(&self, sub: u32, topic: &str) -> Option<u32> {
        self.routes.get(sub as usize)?.iter().find(|(_, filters)| filters.iter().any(|f| matches(f, topic))).map(|(u, _)| *u)
    }

    /// For each publisher, the units owed its messages (ascending ids). Exact filters are looked
    /// up by topic; each distinct wildcard filter is matched once per publisher.
    pub fn expected_units(&self) -> Vec<Vec<u32>> {
        let (exact, wildcard) = self.filters_by_kind();
        self.publisher_topics
            .iter()
            .map(|t| {
                let mut units: Vec<u32> = exact.get(t.as_str()).cloned().unwrap_or_default();
                for (f, us) in &wildcard {
                    if matches(f, t) {
                        units.extend(us.iter().copied());
                    }
                }
                units.sort_unstable();
                units.dedup();
                units
            })
            .collect()
    }

    /// How many (publisher topic, wildcard filter) matches `expected_units` makes: its cost.
    pub fn wildcard_checks(&self) -> u64 {
        self.publisher_topics.len() as u64 * self.filters_by_kind().1.len() as u64
    }

    /// The units behind each filter: exact filters by text, wildcard filters in a list.
    #[allow(clippy::type_complexity)]
    fn filters_by_kind(&self) -> (HashMap<&str, Vec<u32>>, Vec<(&str, Vec<u32>)>) {
        let mut exact: HashMap<&str, Vec<u32>> = HashMap::new();
        let mut wildcard: HashMap<&str, Vec<u32>> = HashMap::new();
        for r in &self.routes {
            for (u, fs) in r {
                for f in fs {
                    let map = if f.contains(['+', '#']) { &mut wildcard } else { &mut exact };
                    map.entry(f.as_str()).or_default().push(*u);
                }
            }
        }
        (exact, wildcard.into_iter().collect())
    }

    /// For each unit with a subscription, the subscribers behind it, by unit name.
    pub fn members(&self) -> std::collections::BTreeMap<&str, Vec<u32>> {
        let mut out: std::collections::BTreeMap<&str, Vec<u32>> = std::collections::BTreeMap::new();
        for (s, r) in self.routes.iter().enumerate() {
            for (u, _) in r {
                out.entry(self.names[*u as usize].as_str()).or_default().push(s as u32);
            }
        }
        out
    }

    pub fn is_shared(&self, unit: u32) -> bool {
        self.names.get(unit as usize).is_some_and(|n| n.starts_with("share:"))
    }
}

/// What one unit received from one publisher. Sequence numbers are remembered in a bitset so
/// duplicates are told apart from new messages whatever order they arrive in.
#[derive(Default)]
pub struct PairState {
    seen: Vec<u64>,
    pub unique: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    /// First deliveries past the plan's deadline.
    pub late: u64,
    max_seq: Option<u32>,
}

/// Whether a delivery is the pair's first of its sequence number or a repeat.
pub enum Receipt {
    First,
    Duplicate,
}

impl PairState {
    /// Records one delivery; `ordered` = count a sequence number below the highest seen so far
    /// as out of order (not meaningful for shared groups, whose members race).
    pub fn record(&mut self, seq: u32, ordered: bool) -> Receipt {
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        let mask = 1u64 << bit;
        if self.seen[word] & mask != 0 {
            self.duplicates += 1;
            return Receipt::Duplicate;
        }
        self.seen[word] |= mask;
        self.unique += 1;
        if ordered {
            match self.max_seq {
                Some(m) if seq < m => self.out_of_order += 1,
                _ => self.max_seq = Some(seq),
            }
        }
        Receipt::First
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(pubs: u32, topic: &str, subs: u32, filters: &[&str]) -> RunPlan {
        let json = serde_json::json!({
            "broker": {"host": "127.0.0.1", "port": 1883},
            "mqtt": {"version": 4, "keepalive_s": 60, "clean_start": true, "connect_timeout_ms": 1000},
            "publishers": {"count": pubs, "client_id": "p%i", "topic": topic, "qos": 0, "rate": 1.0,
                           "arrival": "constant", "payload": {"dist": "fixed", "size": 16}, "inflight": 10},
            "subscribers": {"count": subs, "client_id": "s%i", "filters": filters, "qos": 0},
            "load": {"duration_ms": 1000, "grace_ms": 100, "seed": 1},
            "shard": {"publishers": [0, pubs], "subscribers": [0, subs]}
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn point_to_point_fan_in_and_fan_out_owe_the_right_units() {
        let t = UnitTable::build(&plan(3, "b/%i", 3, &["b/%i"]));
        assert_eq!(t.expected_units(), vec![vec![0], vec![1], vec![2]]);
        let t = UnitTable::build(&plan(3, "b/%i", 1, &["b/+"]));
        assert_eq!(t.expected_units(), vec![vec![0], vec![0], vec![0]]);
        let t = UnitTable::build(&plan(1, "b/0", 3, &["b/0"]));
        assert_eq!(t.expected_units(), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn a_shared_group_is_owed_each_message_once() {
        let t = UnitTable::build(&plan(2, "b/%i", 3, &["$share/g/b/+"]));
        assert_eq!(t.names.len(), 4);
        assert_eq!(t.expected_units(), vec![vec![3], vec![3]]);
        assert_eq!(t.unit_for(1, "b/0"), Some(3));
        assert!(t.is_shared(3));
    }

    #[test]
    fn pair_state_counts_duplicates_and_reordering() {
        let mut s = PairState::default();
        for seq in [0, 1, 3, 2, 3, 200] {
            s.record(seq, true);
        }
        assert_eq!((s.unique, s.duplicates, s.out_of_order), (5, 1, 1));
    }
}
