//! The session key exchange (`cohort_proto::session`) on arbitrary bytes: a responder given any
//! message 1 and an initiator given any message 2 refuse it without panicking, and the
//! initiator still completes with the genuine message 2 afterwards.
#![no_main]

use cohort_proto::session::{Initiator, respond};
use cohort_time::Instant;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

const PSK: [u8; 32] = [7; 32];

fuzz_target!(|data: &[u8]| {
    // Arbitrary bytes as message 1: only a genuine one (which needs the PSK) is answered.
    assert!(respond(&PSK, 1, data, [1; 32]).is_err(), "forged message 1 accepted");
    let mut init = Initiator::new(&PSK, 1, Duration::from_millis(100), Instant::ZERO, [2; 32]).unwrap();
    let msg1 = *init.poll_transmit(Instant::ZERO).unwrap();
    assert!(init.handle(data).is_err(), "forged message 2 accepted");
    let (_, msg2) = respond(&PSK, 1, &msg1, [3; 32]).unwrap();
    assert!(init.handle(&msg2).is_ok(), "a forged message 2 spoiled the exchange");
});
