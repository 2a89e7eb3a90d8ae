//! Topic filter matching (MQTT wildcards and shared subscriptions), used to work out which
//! subscriber should receive which publisher's messages.

/// A subscription as the broker sees it: the filter to match and, for `$share/GROUP/filter`,
/// the group (one delivery per group, not per member).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    pub filter: String,
    pub share_group: Option<String>,
}

impl Subscription {
    pub fn parse(filter: &str) -> Subscription {
        if let Some(rest) = filter.strip_prefix("$share/") {
            if let Some((group, f)) = rest.split_once('/') {
                return Subscription { filter: f.to_string(), share_group: Some(group.to_string()) };
            }
        }
        Subscription { filter: filter.to_string(), share_group: None }
    }
}

pub fn matches(filter: &str, topic: &str) -> bool {
    // Topics starting with '$' are not matched by a leading wildcard (MQTT 4.7.2).
    if topic.starts_with('$') && (filter.starts_with('+') || filter.starts_with('#')) {
        return false;
    }
    let mut f = filter.split('/');
    let mut t = topic.split('/');
    loop {
        match (f.next(), t.next()) {
            (Some("#"), _) => return true,
            (Some("+"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_the_spec_says() {
        assert!(matches("a/b", "a/b"));
        assert!(!matches("a/b", "a/c"));
        assert!(matches("a/+", "a/b"));
        assert!(!matches("a/+", "a/b/c"));
        assert!(matches("a/#", "a"));
        assert!(matches("a/#", "a/b/c"));
        assert!(matches("#", "a/b"));
        assert!(matches("+/+", "/x"));
        assert!(!matches("#", "$SYS/x"));
        assert!(matches("$SYS/#", "$SYS/x"));
    }

    #[test]
    fn shared_subscription_is_split_into_group_and_filter() {
        let s = Subscription::parse("$share/g1/bench/+");
        assert_eq!(s.filter, "bench/+");
        assert_eq!(s.share_group.as_deref(), Some("g1"));
        assert_eq!(Subscription::parse("bench/#").share_group, None);
    }
}
