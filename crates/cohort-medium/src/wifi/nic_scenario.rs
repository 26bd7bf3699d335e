//! The "VO message behind a bulk backlog" experiment that compares [`NicProfile`]s: on an
//! 802.11ac-like channel with aggregation, station 1 keeps an AC_BE backlog to station 0
//! (the leader) and sends a latency-sensitive AC_VO message of `vo_bytes` at `vo_hz`;
//! stations `2..=bulk_stations` keep AC_BE backlogs too. Its report gives each VO message's
//! delay (enqueue of the first fragment to delivery of the last) and a hash of the whole
//! event trace, which pins the model's behaviour for a seed.

use super::scenario::{CHANNEL_QDISC_PACKETS, CHANNEL_QUEUE_DEPTH, CHANNEL_TIMING};
use super::{Ac, Aggregation, Dest, EdcaParams, Medium, MediumError, MediumEvent, NicProfile, Phy, StationConfig};
use cohort_time::Instant;
use std::time::Duration;

/// See the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
pub struct VoBehindBulk {
    /// Stations, the leader (station 0) included.
    pub stations: usize,
    /// Stations `1..=bulk_stations` keep an AC_BE backlog to the leader.
    pub bulk_stations: usize,
    /// VHT data rate (433.3: 80 MHz, one stream, MCS 9).
    pub data_mbps: f64,
    /// Station 1's VO message size and rate; the message goes in MSDUs of at most `msdu_bytes`.
    pub vo_bytes: usize,
    pub vo_hz: f64,
    pub msdu_bytes: usize,
    /// Frames per AC the station queues hold (card and host together): the channel default,
    /// a 64-frame hardware queue plus a 1000-packet qdisc.
    pub queue_depth: usize,
    pub nic: NicProfile,
    pub duration: Duration,
    /// Messages sent before this do not count.
    pub warmup: Duration,
    pub seed: u64,
}

impl Default for VoBehindBulk {
    fn default() -> Self {
        VoBehindBulk {
            stations: 5,
            bulk_stations: 1,
            data_mbps: 433.3,
            vo_bytes: 4096,
            vo_hz: 30.0,
            msdu_bytes: 1508,
            queue_depth: CHANNEL_QUEUE_DEPTH + CHANNEL_QDISC_PACKETS,
            nic: NicProfile::PerAc,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(1),
            seed: 1,
        }
    }
}

/// What a [`VoBehindBulk`] run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct VoBehindBulkReport {
    /// Delay of each counted VO message, in sending order (lost messages left out).
    pub vo_delays: Vec<Duration>,
    pub vo_lost: usize,
    /// AC_BE payload delivered per second, all bulk stations, after the warm-up.
    pub be_mbps: f64,
    /// FNV-1a over every event of the run.
    pub trace_hash: u64,
}

impl VoBehindBulkReport {
    /// The `q`-quantile (0..=1) of the VO delays (nearest rank).
    pub fn vo_quantile(&self, q: f64) -> Option<Duration> {
        let mut d = self.vo_delays.clone();
        d.sort();
        let i = ((q.clamp(0.0, 1.0) * d.len() as f64).ceil() as usize).clamp(1, d.len().max(1)) - 1;
        d.get(i).copied()
    }
}

const VO_TAG: usize = 1 << 40;

fn fnv(h: &mut u64, x: u64) {
    for b in x.to_le_bytes() {
        *h ^= u64::from(b);
        *h = h.wrapping_mul(0x0100_0000_01b3);
    }
}

impl VoBehindBulk {
    pub fn run(&self) -> Result<VoBehindBulkReport, MediumError> {
        if self.stations < 2 || self.bulk_stations >= self.stations || !(self.vo_hz > 0.0 && self.vo_hz <= 1e4) {
            return Err(MediumError::Station("need 2+ stations, bulk_stations < stations, vo_hz in (0, 1e4]"));
        }
        let phy = Phy::vht(self.data_mbps);
        let cfg = StationConfig {
            queue_depth: self.queue_depth,
            ampdu: Aggregation::default().limits(&phy),
            nic: self.nic,
            ..StationConfig::default()
        };
        let mut m: Medium<usize> = Medium::new(phy, EdcaParams::defaults(&phy), &vec![cfg; self.stations], self.seed)?
            .with_timing(CHANNEL_TIMING);
        let period = Duration::from_secs_f64(1.0 / self.vo_hz);
        let frags = self.vo_bytes.div_ceil(self.msdu_bytes).max(1);
        let end = Instant::ZERO + self.duration;
        let begin = Instant::ZERO + self.warmup;
        let mut next_vo = Instant::ZERO + period / 2;
        // Per message: when sent, fragments still to arrive, when the last arrived.
        let mut msgs: Vec<(Instant, usize, Option<Instant>)> = Vec::new();
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        let mut be_frames = 0u64;
        let mut bulk_seq = 0usize;
        let mut now = Instant::ZERO;
        loop {
            for st in 1..=self.bulk_stations {
                while m.queue_len(st, Ac::Be) < self.queue_depth {
                    m.enqueue(now, st, Ac::Be, Dest::Unicast(0), self.msdu_bytes, bulk_seq % VO_TAG)?;
                    bulk_seq += 1;
                }
            }
            let t = m.poll_timeout().map_or(next_vo, |t| t.min(next_vo));
            if t > end {
                break;
            }
            now = t;
            if t == next_vo {
                let k = msgs.len();
                let mut left = self.vo_bytes;
                for f in 0..frags {
                    let bytes = left.min(self.msdu_bytes).max(1);
                    left = left.saturating_sub(bytes);
                    // A full VO queue drops the fragment: the message is then lost.
                    let _ = m.enqueue(t, 1, Ac::Vo, Dest::Unicast(0), bytes, VO_TAG | (k << 8) | f);
                }
                msgs.push((t, frags, None));
                next_vo += period;
                continue;
            }
            m.handle_timeout(t);
            while let Some(ev) = m.poll_event(t) {
                match &ev {
                    MediumEvent::Delivered { from, to, handle, at } => {
                        for x in [0, *from as u64, *to as u64, *handle as u64, at.as_nanos()] {
                            fnv(&mut hash, x);
                        }
                        if handle & VO_TAG != 0 {
                            let msg = &mut msgs[(handle & (VO_TAG - 1)) >> 8];
                            msg.1 -= 1;
                            if msg.1 == 0 {
                                msg.2 = Some(*at);
                            }
                        } else if *at > begin {
                            be_frames += 1;
                        }
                    }
                    MediumEvent::Sent { station, ac, handle, at, attempts } => {
                        for x in
                            [1, *station as u64, ac.index() as u64, *handle as u64, at.as_nanos(), *attempts as u64]
                        {
                            fnv(&mut hash, x);
                        }
                    }
                    MediumEvent::Dropped { station, ac, handle, at, .. } => {
                        for x in [2, *station as u64, ac.index() as u64, *handle as u64, at.as_nanos()] {
                            fnv(&mut hash, x);
                        }
                    }
                }
            }
        }
        let counted = msgs.iter().filter(|m| m.0 >= begin && m.0 + period <= end);
        let (mut vo_delays, mut vo_lost) = (Vec::new(), 0);
        for (sent, _, done) in counted {
            match done {
                Some(d) => vo_delays.push(*d - *sent),
                None => vo_lost += 1,
            }
        }
        let secs = (self.duration.saturating_sub(self.warmup)).as_secs_f64().max(1e-9);
        Ok(VoBehindBulkReport {
            vo_delays,
            vo_lost,
            be_mbps: be_frames as f64 * self.msdu_bytes as f64 * 8.0 / secs / 1e6,
            trace_hash: hash,
        })
    }
}
