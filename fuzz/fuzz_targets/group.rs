//! The group message parser (GCBRR, `cohort_wire::group`) on arbitrary bytes: nothing panics,
//! whatever parses is canonical (emitting it gives back the same bytes), and the zero-copy
//! view agrees with the parsed header.
#![no_main]

use cohort_wire::group::{GroupPacket, GroupRepr, PidMask};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = GroupPacket::new_checked(data) {
        let _ = (p.msg_type(), p.flags(), p.pid(), p.incarnation(), p.body());
    }
    if let Ok(r) = GroupRepr::parse(data) {
        let p = GroupPacket::new_checked(data).expect("a parsed message has a header");
        assert_eq!((r.pid, r.incarnation, r.msg.kind()), (p.pid(), p.incarnation(), p.msg_type()));
        let mut out = vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut out), Some(data.len()));
        assert_eq!(out, data, "accepted bytes are canonical");
    }
    if let Ok((m, n)) = PidMask::parse(data) {
        assert_eq!(m.buffer_len(), n);
        let mut out = vec![0u8; n];
        assert_eq!(m.emit(&mut out), Some(n));
        assert_eq!(&out[..], &data[..n]);
        for (i, pid) in m.iter().enumerate() {
            assert_eq!(m.position(pid), Some(i + 1));
        }
    }
});
