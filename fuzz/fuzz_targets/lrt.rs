//! The LRT packet parser (`cohort_wire::lrt`) on arbitrary bytes: nothing panics, and whatever
//! parses is emitted back to bytes that parse to the same packet.
#![no_main]

use cohort_wire::lrt::LrtRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = LrtRepr::parse(data) {
        let mut out = vec![0u8; r.buffer_len()];
        let n = r.emit(&mut out).expect("buffer_len fits the packet");
        assert_eq!(LrtRepr::parse(&out[..n]), Ok(r), "emit then parse gives the packet back");
    }
});
