//! One client's topic names and ids: the normal ids it registered (or that the gateway registered
//! towards it), the predefined ids of the configuration, and short two-character names.
use mqttlab_codec::sn::TopicRef;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub struct TopicRegistry {
    predefined: Arc<BTreeMap<u16, String>>,
    by_name: HashMap<String, u16>,
    by_id: HashMap<u16, String>,
    next_id: u16,
}

impl TopicRegistry {
    pub fn new(predefined: Arc<BTreeMap<u16, String>>) -> TopicRegistry {
        TopicRegistry { predefined, by_name: HashMap::new(), by_id: HashMap::new(), next_id: 0 }
    }

    /// The normal id of `name`, assigned on first use. Ids are per client and never reused
    /// within a session; None when all 65534 are taken.
    pub fn register(&mut self, name: &str) -> Option<u16> {
        if let Some(id) = self.by_name.get(name) {
            return Some(*id);
        }
        if self.next_id >= 0xFFFE {
            return None;
        }
        self.next_id += 1;
        self.by_name.insert(name.to_string(), self.next_id);
        self.by_id.insert(self.next_id, name.to_string());
        Some(self.next_id)
    }

    /// The topic name a PUBLISH from the client refers to, if the id is known.
    pub fn resolve(&self, topic: TopicRef) -> Option<String> {
        match topic {
            TopicRef::Normal(id) => self.by_id.get(&id).cloned(),
            TopicRef::Predefined(id) => self.predefined.get(&id).cloned(),
            TopicRef::Short(s) => String::from_utf8(s.to_vec()).ok(),
        }
    }

    /// How to name `topic` in a PUBLISH to the client without registering: its normal id if it
    /// has one, else its predefined id, else the short form of a two-character name.
    pub fn known_ref(&self, topic: &str) -> Option<TopicRef> {
        if let Some(id) = self.by_name.get(topic) {
            return Some(TopicRef::Normal(*id));
        }
        if let Some((id, _)) = self.predefined.iter().find(|(_, n)| n.as_str() == topic) {
            return Some(TopicRef::Predefined(*id));
        }
        match topic.as_bytes() {
            [a, b] => Some(TopicRef::Short([*a, *b])),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_every_kind_resolves() {
        let pre = Arc::new(BTreeMap::from([(7u16, "pre/seven".to_string())]));
        let mut r = TopicRegistry::new(pre);
        let a = r.register("a/b").unwrap();
        assert_eq!(r.register("a/b"), Some(a));
        assert_ne!(r.register("c"), Some(a));
        assert_eq!(r.resolve(TopicRef::Normal(a)).as_deref(), Some("a/b"));
        assert_eq!(r.resolve(TopicRef::Normal(999)), None);
        assert_eq!(r.resolve(TopicRef::Predefined(7)).as_deref(), Some("pre/seven"));
        assert_eq!(r.resolve(TopicRef::Short(*b"xy")).as_deref(), Some("xy"));
        assert_eq!(r.known_ref("a/b"), Some(TopicRef::Normal(a)));
        assert_eq!(r.known_ref("pre/seven"), Some(TopicRef::Predefined(7)));
        assert_eq!(r.known_ref("xy"), Some(TopicRef::Short(*b"xy")));
        assert_eq!(r.known_ref("unknown/topic"), None);
    }
}
