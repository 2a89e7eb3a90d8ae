//! Shared subscriptions: how a group's messages split over its members. The exact accounting
//! already holds each message to one delivery per group; this says who got them, so a broker
//! that sends everything to one member, or starves one, shows it: each member's share, the most
//! and the least, beside the even share.
use crate::accounting::UnitTable;
use crate::plan::RunPlan;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One member's first deliveries from its group (the result keeps these; they add up across
/// workers and shards).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct MemberDeliveries {
    pub group: String,
    pub subscriber: u32,
    pub delivered: u64,
}

/// Adds `from` into `into`, one row per group and member.
pub fn add(into: &mut Vec<MemberDeliveries>, from: &[MemberDeliveries]) {
    for m in from {
        match into.iter_mut().find(|x| x.group == m.group && x.subscriber == m.subscriber) {
            Some(x) => x.delivered += m.delivered,
            None => into.push(m.clone()),
        }
    }
    into.sort_by(|a, b| (a.group.as_str(), a.subscriber).cmp(&(b.group.as_str(), b.subscriber)));
}

/// A group's split: its members (every subscriber with a route to it, those that got nothing
/// included), what the group got, and the largest and smallest member's share of it.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GroupSplit {
    pub group: String,
    pub members: u32,
    pub delivered: u64,
    pub most: u64,
    pub least: u64,
    /// most / delivered and least / delivered; an even split gives 1 / members for both.
    pub most_share: f64,
    pub least_share: f64,
}

/// The split of every shared group of the plan's subscribers in this shard.
pub fn splits(units: &UnitTable, plan: &RunPlan, members: &[MemberDeliveries]) -> Vec<GroupSplit> {
    let [from, to] = plan.shard.subscribers;
    let mut out = Vec::new();
    for (unit, name) in units.names.iter().enumerate() {
        if !units.is_shared(unit as u32) {
            continue;
        }
        let member_ids: Vec<u32> = (from..to).filter(|s| units.routes[*s as usize].iter().any(|(u, _)| *u == unit as u32)).collect();
        let counts: Vec<u64> = member_ids.iter().map(|s| members.iter().find(|m| &m.group == name && m.subscriber == *s).map_or(0, |m| m.delivered)).collect();
        let delivered: u64 = counts.iter().sum();
        let (most, least) = (counts.iter().copied().max().unwrap_or(0), counts.iter().copied().min().unwrap_or(0));
        let share = |n: u64| if delivered > 0 { n as f64 / delivered as f64 } else { 0.0 };
        out.push(GroupSplit {
            group: name.clone(),
            members: member_ids.len() as u32,
            delivered,
            most,
            least,
            most_share: share(most),
            least_share: share(least),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_that_got_nothing_is_the_least_and_shares_add_up() {
        let json = serde_json::json!({
            "broker": {"host": "127.0.0.1", "port": 1883},
            "mqtt": {"version": 4, "keepalive_s": 60, "clean_start": true, "connect_timeout_ms": 1000},
            "publishers": {"count": 1, "client_id": "p-%i", "topic": "t/%i", "qos": 1, "rate": 1.0,
                           "arrival": "constant", "payload": {"dist": "fixed", "size": 16}, "inflight": 1},
            "subscribers": {"count": 3, "client_id": "s-%i", "filters": ["$share/g/t/#"], "qos": 1},
            "load": {"duration_ms": 1000, "grace_ms": 100, "seed": 1},
            "shard": {"publishers": [0, 1], "subscribers": [0, 3]}
        });
        let plan: RunPlan = serde_json::from_value(json).unwrap();
        let units = UnitTable::build(&plan);
        let group = units.names.iter().find(|n| n.starts_with("share:")).unwrap().clone();
        let mut members = Vec::new();
        add(&mut members, &[MemberDeliveries { group: group.clone(), subscriber: 0, delivered: 6 }]);
        add(
            &mut members,
            &[MemberDeliveries { group: group.clone(), subscriber: 1, delivered: 2 }, MemberDeliveries { group: group.clone(), subscriber: 0, delivered: 2 }],
        );
        let split = &splits(&units, &plan, &members)[0];
        assert_eq!((split.members, split.delivered, split.most, split.least), (3, 10, 8, 0));
        assert!((split.most_share - 0.8).abs() < 1e-9 && split.least_share == 0.0);
    }
}
