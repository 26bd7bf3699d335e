//! `cohort bench group`: GCBRR against point-to-point request-reply and Zenoh over the
//! emulated 802.11 channel of seed 003 §VI (1 Mbit/s, 1500-byte payloads).

pub mod baselines;
