//! The connection's own checks; whole transfers over simulated links are in
//! `cohort_sim::multipath`'s tests.

use super::*;
use crate::lrt::Config;

fn conn(paths: usize) -> MpConnection {
    MpConnection::new(Connection::accept(Config::default(), Instant::ZERO).unwrap(), MpConfig::default(), paths)
}

#[test]
fn garbage_is_counted_not_parsed() {
    let mut c = conn(1);
    c.handle_datagram(Instant::ZERO, 0, &[]);
    c.handle_datagram(Instant::ZERO, 0, &[7, 1, 2]);
    c.handle_datagram(Instant::ZERO, 9, &[1; 40]);
    c.handle_datagram(Instant::ZERO, 0, &[2; 10]);
    let mut ack = [0u8; wire::PATH_ACK_LEN];
    wire::PathAck {
        path: 5,
        received: 1,
        highest: 0,
        highest_sent_us: 0,
        held_us: 0,
        owd_raw_us: 0,
        arrival_us: 0,
        probe_mark: 0,
    }
    .emit(&mut ack);
    c.handle_datagram(Instant::ZERO, 0, &ack);
    assert_eq!(c.stats().malformed, 5, "short, unknown type, unknown path (data and report)");
}

/// A receiver reports each path on that path, after `ack_every` datagrams or `ack_delay`.
#[test]
fn reports_go_back_on_their_path() {
    let mut c = conn(2);
    let mut d = vec![0u8; wire::DATA_HEADER + 10];
    wire::DataHeader { path: 1, seq: 0, sent_us: 0, pn: 0 }.emit(&mut d);
    c.handle_datagram(Instant::ZERO, 1, &d);
    let mut buf = [0u8; 2048];
    assert_eq!(c.poll_transmit(Instant::ZERO, &mut buf), None, "not yet due");
    let t = Instant::ZERO + MpConfig::default().ack_delay;
    assert!(c.poll_timeout().is_some_and(|w| w <= t));
    assert_eq!(c.poll_transmit(t, &mut buf), Some((1, wire::PATH_ACK_LEN)));
    match wire::MpRepr::parse(&buf[..wire::PATH_ACK_LEN]) {
        Ok(wire::MpRepr::PathAck(a)) => assert_eq!((a.path, a.received, a.highest), (1, 1, 0)),
        other => panic!("{other:?}"),
    }
}
