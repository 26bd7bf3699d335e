//! COORP: coordinated preemption (seed 000), sans-IO.
//!
//! Two halves, as in the paper's Fig. 5:
//!
//! * **Global preemption** (§III-B a, §IV-A, Algorithm 1): at most [`Config::limit`] robots
//!   of the team send bandwidth-hungry (BH) traffic at once, each for at most one
//!   [`Config::timeslice`], taking turns in request order. The [`arbiter::Arbiter`] runs on
//!   the team's coordinator; every robot runs a [`client::Client`] that requests the token,
//!   holds it, renews it, releases it early and tells the local layer when BH may flow.
//! * **Local preemption** (§III-B b, §IV-B, §IV-C, Algorithm 2): the
//!   [`controller::Controller`] learns each latency-sensitive (LS) flow's period and phase and
//!   turns them into protection windows; the [`vpl::Vpl`] releases BH data to the network card
//!   only as far as it can finish before the next window starts.
//!
//! # Mapping to seed 000
//!
//! | paper | here |
//! |---|---|
//! | Alg. 1 `schedule()`: `Q`, `S`, `LIMIT`, `TIMESLICE` | [`arbiter::Arbiter`]: FIFO queue, slots, [`Config::limit`], [`Config::timeslice`] |
//! | Alg. 1 `send()`: `request_wait`, transmit ≤ TIMESLICE, `release` | [`client::Client::want`], [`client::ClientEvent::MaySend`], [`client::Client::finished`] |
//! | §IV-B time model `{p, q, σ}`, `T_k ~ N(pk + q, σ²)` | [`controller::FlowModel`] (`period`, `phase`, `sigma`) |
//! | §IV-B `Δ ≈ 2σ` for `C = 95 %`, PW merging | [`controller::ControllerConfig::window_sigmas`], [`controller::Controller::windows`] |
//! | §IV-C "PW extended with a constant (2 ms)" | [`controller::ControllerConfig::margin`] |
//! | Alg. 2 CTT, `percentile(CTT[n], p_prot)`, `N_samp` | [`vpl::CompletionTable`], [`vpl::VplConfig`] |
//! | Alg. 2 line 5: no BH in the card when a window starts | [`vpl::VplConfig::empty_card`]; by default one A-MPDU may stay ([`vpl::VplConfig::window_allowance_bytes`]) |
//!
//! # What the paper leaves out, built here: leases, epochs, fencing
//!
//! The paper's global controller keeps its state in one process and trusts robots to release.
//! Cohort's arbiter moves with the coordinator and survives silent robots:
//!
//! * **Leases.** A grant is a lease of at most [`Config::lease`] that the holder renews every
//!   [`Config::renew_interval`] and that never reaches past the end of its slice. The arbiter
//!   frees a slot when the holder releases it or when the lease runs out on the arbiter's
//!   clock. The holder counts its lease from the *stamp* of the request or renewal the grant
//!   answers (a moment before the arbiter granted), on its own clock, shortened for drift: with
//!   clocks whose rates are within `ρ` = [`Config::max_drift_ppm`] of true time, the holder
//!   believes it may send for `lease · (1 − ρ)/(1 + ρ) − guard` of its own time. That is at
//!   most `lease/(1 + ρ) − guard/(1 + ρ)` of true time after it stamped the request, while the
//!   arbiter, which granted later, waits at least `lease/(1 + ρ)` of true time: **the holder
//!   stops at least `guard/(1 + ρ)` (default ≈ 10 ms) before the arbiter can grant the slot
//!   again**, whatever the message delays.
//! * **Epochs.** An arbiter starts with an [`Epoch`] newer than any it has heard (epochs
//!   order by round, then arbiter id, so they never tie). Robots adopt the newest epoch they
//!   hear and from then on refuse grants and answers from older ones.
//! * **Take-over.** A new arbiter broadcasts QUERY; every robot answers with a REPORT: the
//!   grant it holds (fencing token, lease and slice left) and whether and since when it waits.
//!   The arbiter adopts reported grants (stretching their remaining lease for drift), queues
//!   waiters longest-waiting first, and grants nothing until either every team member has
//!   reported (a robot that reported has heard the new epoch and will refuse any late grant
//!   of an older one) or `lease · (1 + ρ)/(1 − ρ) + guard` has passed on its clock (every
//!   lease an older arbiter promised has then run out). **It never grants twice** provided
//!   the old arbiter is crashed or has stood down (the group layer's fail-stop emulation gives
//!   that; an old arbiter that hears a newer epoch stands down by itself).
//! * **Fencing tokens.** Every grant carries `(epoch, seq)`; RENEW, RELEASE and REVOKE name
//!   the grant they mean, so a stale message never touches a newer grant.
//!
//! # Bounds
//!
//! With `L` = lease, `S` = timeslice, `R` = retry interval, `W` = take-over wait
//! ([`Config::takeover_wait`]), `D` = the group layer's fault detection:
//!
//! * at most `LIMIT` robots believe they may send BH at any instant (the lease argument
//!   above; checked at every event of the fault simulation);
//! * a holder that crashes costs the team at most `L` of BH time (its slot expires);
//! * an arbiter that crashes costs at most `D + W`: the holder keeps sending until its lease
//!   runs out (the slice survives, adopted, if `D` plus a round trip is shorter than the lease
//!   left), and the new arbiter grants at once when every member has reported, else after `W`;
//! * a request waits at most `(⌈(n − 1)/LIMIT⌉ + 1) · (S + L + 2R + 2·delay)` in a team of
//!   `n` (every robot ahead holds one slice plus a hand-over that may lose its grant for a
//!   lease), plus the cost of each crash. A grant whose every copy was lost runs out unrenewed
//!   and puts its robot back at the head of the queue, so loss never costs a robot its turn.
//!
//! A slice ends up to one renew interval early (a renewal that finds less left is revoked).
//!
//! All machines here never read a clock, touch a socket or draw a random number.

pub mod agent;
pub mod arbiter;
pub mod client;
pub mod controller;
pub mod vpl;

pub use cohort_wire::preempt::{Epoch, HeldGrant, Message, PreemptError, PreemptRepr};

use std::time::Duration;

/// Timing and limits of the bulk-token protocol, shared by arbiter and clients (all robots
/// of a team must use the same values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// `LIMIT` of Algorithm 1: robots that may send BH at once. Default 1 (§VI: "for the
    /// lowest contention").
    pub limit: usize,
    /// `TIMESLICE` of Algorithm 1. Default 5 s (§IV-A, "e.g., 5s").
    pub timeslice: Duration,
    /// Longest lease one grant or renewal gives. A crashed holder costs at most this much BH
    /// time. Default 1 s.
    pub lease: Duration,
    /// A holder renews this often. Default 250 ms: three renewals in a row may be lost before
    /// the lease runs out.
    pub renew_interval: Duration,
    /// A waiting robot re-sends its request, and a recovering arbiter its query, this often.
    /// Default 250 ms.
    pub retry_interval: Duration,
    /// Largest clock-rate error of any robot against true time, parts per million. Default
    /// 500 (crystal oscillators are within ±100 ppm; the rest is margin).
    pub max_drift_ppm: u32,
    /// Safety margin a holder keeps between stopping and the arbiter's earliest regrant.
    /// Default 10 ms.
    pub guard: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            limit: 1,
            timeslice: Duration::from_secs(5),
            lease: Duration::from_secs(1),
            renew_interval: Duration::from_millis(250),
            retry_interval: Duration::from_millis(250),
            max_drift_ppm: 500,
            guard: Duration::from_millis(10),
        }
    }
}

/// An invalid [`Config`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("limit must be at least 1")]
    Limit,
    #[error("timeslice {0:?} must be positive and below 4000 s")]
    Timeslice(Duration),
    #[error("lease {lease:?} must be positive, below 4000 s and above twice the guard {guard:?}")]
    Lease { lease: Duration, guard: Duration },
    #[error("renew_interval {renew:?} must be positive and below half the lease {lease:?}")]
    Renew { renew: Duration, lease: Duration },
    #[error("retry_interval must be positive")]
    Retry,
    #[error("max_drift_ppm {0} above 100 000")]
    Drift(u32),
}

/// Largest duration carried in a 32-bit microsecond field, with room to spare.
const MAX_FIELD: Duration = Duration::from_secs(4000);

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.limit == 0 {
            return Err(ConfigError::Limit);
        }
        if self.timeslice.is_zero() || self.timeslice > MAX_FIELD {
            return Err(ConfigError::Timeslice(self.timeslice));
        }
        if self.lease.is_zero() || self.lease > MAX_FIELD || self.lease <= 2 * self.guard {
            return Err(ConfigError::Lease { lease: self.lease, guard: self.guard });
        }
        if self.renew_interval.is_zero() || 2 * self.renew_interval >= self.lease {
            return Err(ConfigError::Renew { renew: self.renew_interval, lease: self.lease });
        }
        if self.retry_interval.is_zero() {
            return Err(ConfigError::Retry);
        }
        if self.max_drift_ppm > 100_000 {
            return Err(ConfigError::Drift(self.max_drift_ppm));
        }
        Ok(())
    }

    /// `d · (1 − ρ)/(1 + ρ)`: a span of the arbiter's promise that a holder may count on its
    /// own clock.
    pub fn shrink(&self, d: Duration) -> Duration {
        let ppm = u128::from(self.max_drift_ppm);
        nanos((d.as_nanos() * (1_000_000 - ppm)) / (1_000_000 + ppm))
    }

    /// `d · (1 + ρ)/(1 − ρ)`, rounded up: a span another robot measured that this robot must
    /// wait out on its own clock to be sure it has passed.
    pub fn stretch(&self, d: Duration) -> Duration {
        let ppm = u128::from(self.max_drift_ppm);
        nanos((d.as_nanos() * (1_000_000 + ppm)).div_ceil(1_000_000 - ppm))
    }

    /// How long a holder may send on its own clock after the stamp a grant of `lease` echoes.
    pub fn holder_lease(&self, lease: Duration) -> Duration {
        self.shrink(lease).saturating_sub(self.guard)
    }

    /// How long a new arbiter waits before granting unless every member has reported.
    pub fn takeover_wait(&self) -> Duration {
        self.stretch(self.lease) + self.guard
    }
}

fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

pub(crate) fn micros_u32(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

pub use crate::{Dest, Transmit};

/// Buffer size that holds any arbiter message.
pub const MAX_DATAGRAM: usize = cohort_wire::preempt::MAX_LEN;

/// Writes `repr` for `poll_transmit`; a too-short buffer leaves the message unsent.
pub(crate) fn write(repr: &PreemptRepr, dest: Dest, buf: &mut [u8]) -> Option<Transmit> {
    repr.emit(buf).map(|len| Transmit { dest, len })
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_faults;
#[cfg(test)]
mod tests_local;
