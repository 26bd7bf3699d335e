//! An established LRT connection fed arbitrary datagrams (the harness is
//! `cohort_proto::lrt::fuzzing`, which the regression tests of its finds also run): nothing
//! panics and events stay bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cohort_proto::lrt::fuzzing::feed_arbitrary(data));
