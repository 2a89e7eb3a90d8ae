//! What the broker announced in its MQTT 5 CONNACK: the limits it holds its clients to and the
//! features it offers. Recorded once per run (the first CONNACK a worker saw), so a summary says
//! what the broker promised beside what it did; an absent value means the spec's default (e.g. no
//! Receive Maximum = 65,535, no Maximum QoS = 2, no Retain Available = retain offered).
use mqttlab_codec::PropertyValues;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BrokerLimits {
    pub receive_maximum: Option<u16>,
    pub maximum_qos: Option<u8>,
    pub retain_available: Option<bool>,
    pub maximum_packet_size: Option<u32>,
    pub topic_alias_maximum: Option<u16>,
    pub server_keep_alive: Option<u16>,
    pub session_expiry_interval: Option<u32>,
    pub wildcard_subscription_available: Option<bool>,
    pub subscription_identifiers_available: Option<bool>,
    pub shared_subscription_available: Option<bool>,
    /// The broker chose the client's identifier (the client sent an empty one).
    pub assigned_client_identifier: bool,
}

impl BrokerLimits {
    pub fn from_connack(p: &PropertyValues) -> BrokerLimits {
        let flag = |v: Option<u8>| v.map(|b| b != 0);
        BrokerLimits {
            receive_maximum: p.receive_maximum,
            maximum_qos: p.maximum_qos,
            retain_available: flag(p.retain_available),
            maximum_packet_size: p.maximum_packet_size,
            topic_alias_maximum: p.topic_alias_maximum,
            server_keep_alive: p.server_keep_alive,
            session_expiry_interval: p.session_expiry_interval,
            wildcard_subscription_available: flag(p.wildcard_subscription_available),
            subscription_identifiers_available: flag(p.subscription_identifier_available),
            shared_subscription_available: flag(p.shared_subscription_available),
            assigned_client_identifier: p.assigned_client_identifier.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_as_booleans_and_absent_values_stay_absent() {
        let p = PropertyValues { receive_maximum: Some(20), retain_available: Some(0), shared_subscription_available: Some(1), ..Default::default() };
        let l = BrokerLimits::from_connack(&p);
        assert_eq!((l.receive_maximum, l.retain_available, l.shared_subscription_available), (Some(20), Some(false), Some(true)));
        assert_eq!((l.maximum_qos, l.topic_alias_maximum, l.assigned_client_identifier), (None, None, false));
    }
}
