use super::*;
use proptest::prelude::*;

fn mask(pids: &[u32]) -> PidMask {
    PidMask::from_pids(pids.iter().copied()).unwrap()
}

fn entry(pid: u32, incarnation: u32, ticket: u64, new: bool) -> ViewEntry {
    ViewEntry { pid, incarnation, ticket, new }
}

fn samples() -> Vec<GroupRepr<'static>> {
    let r = |msg| GroupRepr { pid: 7, incarnation: 3, msg };
    vec![
        r(Message::Areq { ticket: 1, seqno: 42, rmask: mask(&[2, 3, 9, 100]), data: b"move to 4,5" }),
        r(Message::Areq { ticket: 1, seqno: 43, rmask: PidMask::new(), data: b"" }),
        r(Message::Arpl { coord: 1, coord_inc: 9, seqno: 42, heard: PidMask::new(), data: b"done" }),
        r(Message::Arpl { coord: 1, coord_inc: 9, seqno: 42, heard: mask(&[2, 3]), data: b"done" }),
        r(Message::Arpl { coord: 1, coord_inc: 9, seqno: 42, heard: mask(&[2]), data: b"" }),
        r(Message::Again { ticket: 1, seqno: 42, rmask: mask(&[3, 100]) }),
        r(Message::Jpoll { ticket: 1, poll: 5 }),
        r(Message::Join { coord: 1, poll: 5 }),
        r(Message::Lpoll { ticket: 2, poll: 6 }),
        r(Message::Left),
        r(Message::Vpush {
            ticket: 1,
            push: 8,
            next_ticket: 5,
            rmask: mask(&[3, 4]),
            view: vec![entry(1, 1, 1, false), entry(3, 2, 3, false), entry(4, 1, 4, true)],
        }),
        r(Message::Vack { coord: 1, coord_inc: 1, push: 8 }),
        r(Message::Hbeat { ticket: 3, view: 4, coord: false, members: mask(&[1, 3, 4]) }),
        r(Message::Hbeat { ticket: 1, view: 0, coord: true, members: mask(&[1]) }),
    ]
}

#[test]
fn every_message_round_trips_and_rejects_truncation() {
    for r in samples() {
        let mut buf = vec![0xEEu8; r.buffer_len() + 8];
        let n = r.emit(&mut buf).unwrap();
        assert_eq!(n, r.buffer_len());
        assert_eq!(GroupRepr::parse(&buf[..n]).unwrap(), r);
        let open_ended = matches!(r.msg, Message::Areq { .. } | Message::Arpl { .. });
        for cut in 0..n {
            let parsed = GroupRepr::parse(&buf[..cut]);
            if !open_ended {
                assert!(parsed.is_err(), "{r:?} truncated to {cut}");
            } else if let Ok(p) = parsed {
                // Only the trailing data may be cut.
                assert_eq!((p.pid, p.msg.kind()), (r.pid, r.msg.kind()));
            }
        }
        assert!(r.emit(&mut buf[..n - 1]).is_none());
        if !open_ended {
            buf[n] = 0;
            assert!(matches!(GroupRepr::parse(&buf[..n + 1]), Err(GroupError::Trailing { .. })), "{r:?}");
        }
    }
}

#[test]
fn request_and_heartbeat_bytes() {
    let r = GroupRepr {
        pid: 1,
        incarnation: 2,
        msg: Message::Areq { ticket: 1, seqno: 5, rmask: mask(&[2, 4]), data: b"go" },
    };
    let mut b = [0u8; 64];
    let n = r.emit(&mut b).unwrap();
    #[rustfmt::skip]
    let expect = [
        1, 0, 0, 0, 0, 1, 0, 0, 0, 2,       // AREQ, no flags, pid 1, incarnation 2
        0, 0, 0, 0, 0, 0, 0, 1,             // ticket 1
        0, 0, 0, 0, 0, 0, 0, 5,             // seqno 5
        0, 0, 0, 2, 0, 1, 0b101,            // rmask {2, 4}
        b'g', b'o',
    ];
    assert_eq!(&b[..n], &expect);
    let hb = GroupRepr {
        pid: 1,
        incarnation: 2,
        msg: Message::Hbeat { ticket: 1, view: 2, coord: true, members: mask(&[1]) },
    };
    let n = hb.emit(&mut b).unwrap();
    assert_eq!(
        &b[..n],
        &[9, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 1, 1]
    );
}

#[test]
fn bad_messages_are_typed_errors() {
    assert_eq!(GroupRepr::parse(&[1, 0, 0]), Err(GroupError::Truncated(3)));
    assert_eq!(GroupRepr::parse(&[0; 10]), Err(GroupError::UnknownType(0)));
    assert_eq!(GroupRepr::parse(&[11, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Err(GroupError::UnknownType(11)));
    assert_eq!(GroupRepr::parse(&[6, 1, 0, 0, 0, 0, 0, 0, 0, 0]), Err(GroupError::Reserved { kind: 6 }));
    assert_eq!(GroupRepr::parse(&[9, 2, 0, 0, 0, 0, 0, 0, 0, 0]), Err(GroupError::Reserved { kind: 9 }));
    assert_eq!(GroupRepr::parse(&[2, 2, 0, 0, 0, 0, 0, 0, 0, 0]), Err(GroupError::Reserved { kind: 2 }));
    assert_eq!(GroupRepr::parse(&[10, 1, 0, 0, 0, 0, 0, 0, 0, 0]), Err(GroupError::Reserved { kind: 10 }));
    // A reply that flags a `heard` mask must carry a non-empty one (the empty set goes unflagged).
    let mut arpl = [0u8; 32];
    arpl[..2].copy_from_slice(&[kind::ARPL, 1]);
    assert_eq!(GroupRepr::parse(&arpl), Err(GroupError::Mask(MaskError::NotCanonical)));
    assert_eq!(GroupRepr::parse(&arpl[..30]), Err(GroupError::Mask(MaskError::Truncated { need: 6, got: 4 })));
    assert_eq!(
        GroupRepr::parse(&[3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
        Err(GroupError::Short { kind: 3, need: 26, got: 11 })
    );
    // A VPUSH whose entries are out of order, or carry an undefined flag.
    let v = GroupRepr {
        pid: 1,
        incarnation: 1,
        msg: Message::Vpush {
            ticket: 1,
            push: 1,
            next_ticket: 3,
            rmask: mask(&[2]),
            view: vec![entry(2, 1, 2, true), entry(1, 1, 1, false)],
        },
    };
    let mut b = vec![0u8; v.buffer_len()];
    v.emit(&mut b).unwrap();
    assert_eq!(GroupRepr::parse(&b), Err(GroupError::Unsorted));
    let n = b.len();
    b[n - 1] = 2;
    assert_eq!(GroupRepr::parse(&b), Err(GroupError::Reserved { kind: kind::VPUSH }));
    // A non-canonical mask inside a message.
    let mut areq = [0u8; 33];
    areq[0] = kind::AREQ;
    areq[26..33].copy_from_slice(&[0, 0, 0, 2, 0, 1, 0b10]);
    assert_eq!(GroupRepr::parse(&areq), Err(GroupError::Mask(MaskError::NotCanonical)));
}

#[test]
fn views_of_hundreds_of_members_fit_a_datagram() {
    let view: Vec<ViewEntry> = (1..=300).map(|p| entry(p, 1, u64::from(p), false)).collect();
    let rmask: PidMask = (2..=300).collect();
    let v =
        GroupRepr { pid: 1, incarnation: 1, msg: Message::Vpush { ticket: 1, push: 1, next_ticket: 301, rmask, view } };
    assert!(v.buffer_len() < 65_000);
    let mut b = vec![0u8; v.buffer_len()];
    v.emit(&mut b).unwrap();
    assert_eq!(GroupRepr::parse(&b).unwrap(), v);
}

fn arb_mask() -> impl Strategy<Value = PidMask> {
    (any::<u32>(), proptest::collection::vec(0u32..2000, 0..40))
        .prop_map(|(base, offs)| offs.into_iter().filter_map(|o| base.checked_add(o)).collect())
}

fn arb_view() -> impl Strategy<Value = Vec<ViewEntry>> {
    proptest::collection::btree_map(any::<u32>(), (any::<u32>(), any::<u64>(), any::<bool>()), 0..20).prop_map(|m| {
        m.into_iter().map(|(pid, (incarnation, ticket, new))| ViewEntry { pid, incarnation, ticket, new }).collect()
    })
}

fn arb_msg() -> impl Strategy<Value = (u32, u32, Message<'static>)> {
    let data = proptest::collection::vec(any::<u8>(), 0..64).prop_map(|v| &*Box::leak(v.into_boxed_slice()));
    let msg =
        prop_oneof![
            (any::<u64>(), any::<u64>(), arb_mask(), data.clone())
                .prop_map(|(ticket, seqno, rmask, data)| Message::Areq { ticket, seqno, rmask, data }),
            (any::<u32>(), any::<u32>(), any::<u64>(), arb_mask(), data).prop_map(
                |(coord, coord_inc, seqno, heard, data)| Message::Arpl { coord, coord_inc, seqno, heard, data }
            ),
            (any::<u64>(), any::<u64>(), arb_mask()).prop_map(|(ticket, seqno, rmask)| Message::Again {
                ticket,
                seqno,
                rmask
            }),
            (any::<u64>(), any::<u64>()).prop_map(|(ticket, poll)| Message::Jpoll { ticket, poll }),
            (any::<u32>(), any::<u64>()).prop_map(|(coord, poll)| Message::Join { coord, poll }),
            (any::<u64>(), any::<u64>()).prop_map(|(ticket, poll)| Message::Lpoll { ticket, poll }),
            Just(Message::Left),
            (any::<u64>(), any::<u64>(), any::<u64>(), arb_mask(), arb_view()).prop_map(
                |(ticket, push, next_ticket, rmask, view)| Message::Vpush { ticket, push, next_ticket, rmask, view }
            ),
            (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(coord, coord_inc, push)| Message::Vack {
                coord,
                coord_inc,
                push
            }),
            (any::<u64>(), any::<u64>(), any::<bool>(), arb_mask())
                .prop_map(|(ticket, view, coord, members)| Message::Hbeat { ticket, view, coord, members }),
        ];
    (any::<u32>(), any::<u32>(), msg)
}

proptest! {
    #[test]
    fn any_message_round_trips((pid, incarnation, msg) in arb_msg()) {
        let r = GroupRepr { pid, incarnation, msg };
        let mut buf = vec![0u8; r.buffer_len()];
        prop_assert_eq!(r.emit(&mut buf), Some(buf.len()));
        prop_assert_eq!(GroupRepr::parse(&buf).unwrap(), r);
    }

    /// Whatever parses is canonical: emitting it gives back the very same bytes.
    #[test]
    fn parse_never_panics_and_accepted_bytes_are_canonical(
        kind in 0u8..12,
        flags in prop_oneof![Just(0u8), any::<u8>()],
        rest in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut b = vec![kind, flags];
        b.extend_from_slice(&rest);
        if let Ok(r) = GroupRepr::parse(&b) {
            let mut out = vec![0u8; r.buffer_len()];
            prop_assert_eq!(r.emit(&mut out), Some(b.len()));
            prop_assert_eq!(out, b);
        }
    }

    /// Flipping any bit of a valid message either is refused or yields another canonical one.
    #[test]
    fn mutations_are_refused_or_canonical((pid, incarnation, msg) in arb_msg(), at in any::<usize>(), bit in 0u8..8) {
        let r = GroupRepr { pid, incarnation, msg };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf).unwrap();
        let i = at % buf.len();
        buf[i] ^= 1 << bit;
        if let Ok(m) = GroupRepr::parse(&buf) {
            let mut out = vec![0u8; m.buffer_len()];
            prop_assert_eq!(m.emit(&mut out), Some(buf.len()));
            prop_assert_eq!(out, buf);
        }
    }
}
