//! The sink's side of MQTT 3.1.1, packet by packet: where a packet ends, what it is answered with,
//! and what it asks the server to do. Pure functions over byte slices, so the server can parse a
//! whole read in place and the tests need no sockets.

/// What one connection has told us that later packets depend on. Nothing else is kept: no client
/// id, no session, no filters, no messages in flight.
#[derive(Default)]
pub struct Client {
    /// Filters subscribed minus filters unsubscribed; above 0 the connection receives the fan-out.
    pub subscriptions: u32,
    /// The highest QoS granted to any of its filters: forwards go at min(publish QoS, this).
    pub granted: u8,
    /// Packet identifier of the next forward at QoS 1 or 2.
    next_id: u16,
}

impl Client {
    pub fn take_id(&mut self) -> u16 {
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        self.next_id
    }
}

/// What the server does after a packet, beside writing its answer.
#[derive(Debug, PartialEq)]
pub enum Step<'a> {
    Continue,
    /// A PUBLISH to hand to every subscribed connection.
    Forward {
        qos: u8,
        topic: &'a [u8],
        payload: &'a [u8],
    },
    /// DISCONNECT, a refused CONNECT or a packet we cannot read: flush the answers, then close.
    Close,
}

#[derive(Debug, PartialEq)]
pub struct Malformed;

/// The length of the first packet in `buf` (fixed header included) and of its fixed header, once
/// the whole packet is there.
pub fn frame(buf: &[u8]) -> Result<Option<(usize, usize)>, Malformed> {
    let mut length = 0usize;
    for i in 1..5 {
        let Some(&byte) = buf.get(i) else { return Ok(None) };
        length |= ((byte & 0x7f) as usize) << (7 * (i - 1));
        if byte & 0x80 == 0 {
            let total = i + 1 + length;
            return Ok((buf.len() >= total).then_some((total, i + 1)));
        }
    }
    Err(Malformed)
}

pub fn remaining_length(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let byte = (n % 128) as u8;
        n /= 128;
        out.push(if n > 0 { byte | 0x80 } else { byte });
        if n == 0 {
            return;
        }
    }
}

fn u16_at(body: &[u8], at: usize) -> Result<u16, Malformed> {
    body.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]])).ok_or(Malformed)
}

/// A length-prefixed string at `at`: its bytes and the offset after it.
fn string_at(body: &[u8], at: usize) -> Result<(&[u8], usize), Malformed> {
    let len = u16_at(body, at)? as usize;
    let end = at + 2 + len;
    Ok((body.get(at + 2..end).ok_or(Malformed)?, end))
}

/// Answers one whole packet (as `frame` cut it, header `header` bytes long) into `out`.
pub fn answer<'a>(packet: &'a [u8], header: usize, client: &mut Client, out: &mut Vec<u8>) -> Result<Step<'a>, Malformed> {
    let body = &packet[header..];
    let id = || u16_at(body, 0).map(u16::to_be_bytes);
    match packet[0] >> 4 {
        1 => {
            // CONNECT: 3.1.1 ("MQTT", level 4) or 3.1 ("MQIsdp", level 3), whose packets are alike.
            let (name, at) = string_at(body, 0)?;
            let level = *body.get(at).ok_or(Malformed)?;
            if (name, level) == (b"MQTT".as_slice(), 4) || (name, level) == (b"MQIsdp".as_slice(), 3) {
                out.extend_from_slice(&[0x20, 2, 0, 0]);
                Ok(Step::Continue)
            } else {
                out.extend_from_slice(&[0x20, 2, 0, 1]); // unacceptable protocol version
                Ok(Step::Close)
            }
        }
        3 => {
            let qos = (packet[0] >> 1) & 3;
            let (topic, mut at) = string_at(body, 0)?;
            match qos {
                0 => {}
                1 | 2 => {
                    let [hi, lo] = u16_at(body, at)?.to_be_bytes();
                    out.extend_from_slice(&[if qos == 1 { 0x40 } else { 0x50 }, 2, hi, lo]); // PUBACK, PUBREC
                    at += 2;
                }
                _ => return Err(Malformed),
            }
            Ok(Step::Forward { qos, topic, payload: &body[at..] })
        }
        6 => {
            // PUBREL: the PUBCOMP that ends a QoS 2 publish (nothing was held, nothing is released).
            let [hi, lo] = id()?;
            out.extend_from_slice(&[0x70, 2, hi, lo]);
            Ok(Step::Continue)
        }
        5 => {
            // PUBREC from a subscriber for a forward at QoS 2: answered without remembering it.
            let [hi, lo] = id()?;
            out.extend_from_slice(&[0x62, 2, hi, lo]);
            Ok(Step::Continue)
        }
        4 | 7 => Ok(Step::Continue), // PUBACK, PUBCOMP of a forward: nothing to retransmit
        8 => {
            let [hi, lo] = id()?;
            let mut granted = Vec::new();
            let mut at = 2;
            while at < body.len() {
                let (_, end) = string_at(body, at)?;
                let requested = *body.get(end).ok_or(Malformed)?;
                if requested <= 2 {
                    granted.push(requested);
                    client.granted = client.granted.max(requested);
                    client.subscriptions += 1;
                } else {
                    granted.push(0x80); // failure: no such QoS
                }
                at = end + 1;
            }
            if granted.is_empty() {
                return Err(Malformed);
            }
            out.push(0x90);
            remaining_length(2 + granted.len(), out);
            out.extend_from_slice(&[hi, lo]);
            out.extend_from_slice(&granted);
            Ok(Step::Continue)
        }
        10 => {
            let [hi, lo] = id()?;
            let mut at = 2;
            while at < body.len() {
                at = string_at(body, at)?.1;
                client.subscriptions = client.subscriptions.saturating_sub(1);
            }
            out.extend_from_slice(&[0xb0, 2, hi, lo]);
            Ok(Step::Continue)
        }
        12 => {
            out.extend_from_slice(&[0xd0, 0]);
            Ok(Step::Continue)
        }
        14 => Ok(Step::Close),
        _ => Err(Malformed),
    }
}

/// A forward of a publish to one subscriber, at `qos` (already the lower of the two).
pub fn forward(qos: u8, topic: &[u8], payload: &[u8], client: &mut Client, out: &mut Vec<u8>) {
    out.push(0x30 | (qos << 1));
    remaining_length(2 + topic.len() + if qos > 0 { 2 } else { 0 } + payload.len(), out);
    out.extend_from_slice(&(topic.len() as u16).to_be_bytes());
    out.extend_from_slice(topic);
    if qos > 0 {
        out.extend_from_slice(&client.take_id().to_be_bytes());
    }
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(first: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![first];
        remaining_length(body.len(), &mut out);
        out.extend_from_slice(body);
        out
    }

    fn publish(qos: u8, id: u16, payload: &[u8]) -> Vec<u8> {
        let mut body = vec![0, 3, b'a', b'/', b'b'];
        if qos > 0 {
            body.extend_from_slice(&id.to_be_bytes());
        }
        body.extend_from_slice(payload);
        packet(0x30 | (qos << 1), &body)
    }

    /// Answers every whole packet in `buf` as the server does: the answers, the forwards, and the
    /// bytes left for the next read.
    fn answer_all<'a>(buf: &'a [u8], client: &mut Client, out: &mut Vec<u8>) -> (Vec<Step<'a>>, usize) {
        let (mut steps, mut at) = (Vec::new(), 0);
        while let Some((total, header)) = frame(&buf[at..]).unwrap() {
            steps.push(answer(&buf[at..at + total], header, client, out).unwrap());
            at += total;
        }
        (steps, at)
    }

    #[test]
    fn frame_waits_for_the_whole_packet_and_reads_long_lengths() {
        let big = packet(0x30, &[7u8; 200]); // remaining length in two bytes
        assert_eq!(frame(&big[..1]), Ok(None));
        assert_eq!(frame(&big[..2]), Ok(None));
        assert_eq!(frame(&big[..big.len() - 1]), Ok(None));
        assert_eq!(frame(&big), Ok(Some((203, 3))));
        assert_eq!(frame(&[0x30, 0xff, 0xff, 0xff, 0xff, 0]), Err(Malformed));
    }

    #[test]
    fn connect_is_accepted_at_3_1_1_and_refused_at_5() {
        let mut body = vec![0, 4, b'M', b'Q', b'T', b'T', 4, 2, 0, 60, 0, 1, b'c'];
        let (mut client, mut out) = (Client::default(), Vec::new());
        assert_eq!(answer(&packet(0x10, &body), 2, &mut client, &mut out), Ok(Step::Continue));
        assert_eq!(out, [0x20, 2, 0, 0]);
        body[6] = 5;
        out.clear();
        assert_eq!(answer(&packet(0x10, &body), 2, &mut client, &mut out), Ok(Step::Close));
        assert_eq!(out, [0x20, 2, 0, 1]);
    }

    #[test]
    fn one_read_of_publishes_gets_its_acks_in_one_buffer() {
        let mut read = Vec::new();
        read.extend(publish(0, 0, b"zero"));
        read.extend(publish(1, 7, b"one"));
        read.extend(publish(2, 8, b"two"));
        read.extend(packet(0x62, &[0, 8])); // PUBREL
        read.extend(packet(0xc0, &[])); // PINGREQ
        let whole = read.len();
        read.extend(&publish(1, 9, b"cut")[..4]); // the next read completes it
        let (mut client, mut out) = (Client::default(), Vec::new());
        let (steps, used) = answer_all(&read, &mut client, &mut out);
        assert_eq!(used, whole);
        assert_eq!(out, [0x40, 2, 0, 7, 0x50, 2, 0, 8, 0x70, 2, 0, 8, 0xd0, 0]);
        assert_eq!(steps[0], Step::Forward { qos: 0, topic: b"a/b", payload: b"zero" });
        assert_eq!(steps[1], Step::Forward { qos: 1, topic: b"a/b", payload: b"one" });
        assert_eq!(steps[3..], [Step::Continue, Step::Continue]);
    }

    #[test]
    fn subscribe_grants_what_was_asked_and_fans_out_at_the_lower_qos() {
        let (mut client, mut out) = (Client::default(), Vec::new());
        let subscribe = packet(0x82, &[0, 5, 0, 1, b'x', 1, 0, 1, b'y', 0, 0, 1, b'z', 3]);
        answer(&subscribe, 2, &mut client, &mut out).unwrap();
        assert_eq!(out, [0x90, 5, 0, 5, 1, 0, 0x80]);
        assert_eq!((client.subscriptions, client.granted), (2, 1));
        out.clear();
        forward(2.min(client.granted), b"t", b"p", &mut client, &mut out);
        forward(0, b"t", b"p", &mut client, &mut out);
        assert_eq!(out, [0x32, 6, 0, 1, b't', 0, 1, b'p', 0x30, 4, 0, 1, b't', b'p']);
        out.clear();
        answer(&packet(0xa2, &[0, 6, 0, 1, b'x', 0, 1, b'y']), 2, &mut client, &mut out).unwrap();
        assert_eq!(out, [0xb0, 2, 0, 6]);
        assert_eq!(client.subscriptions, 0);
    }

    #[test]
    fn disconnect_and_unknown_packets_end_the_connection() {
        let (mut client, mut out) = (Client::default(), Vec::new());
        assert_eq!(answer(&[0xe0, 0], 2, &mut client, &mut out), Ok(Step::Close));
        assert_eq!(answer(&[0xf0, 0], 2, &mut client, &mut out), Err(Malformed));
        assert_eq!(answer(&publish(3, 1, b"")[..], 2, &mut client, &mut out), Err(Malformed));
        assert!(out.is_empty());
    }
}
