//! The coordinated-preemption message parser (`cohort_wire::preempt`) on arbitrary bytes:
//! nothing panics, and whatever parses is canonical (emitting it gives back the same bytes).
#![no_main]

use cohort_wire::preempt::PreemptRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = PreemptRepr::parse(data) {
        let mut out = vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut out), Some(data.len()));
        assert_eq!(out, data, "accepted bytes are canonical");
    }
});
