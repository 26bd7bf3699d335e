//! A robot team moving past multi-chain access points, joined to multipath (seed 001 Fig. 4).
//!
//! Every scheduling round (`round`, 100 ms by default) each access point runs the RF-chain
//! and beam allocation of `cohort_medium::beams` over the team's positions; robot 0 runs a
//! multipath connection with one path through each access point, and the throughput `θ` its
//! allocation gives it there (the sum over the chains serving it, Eq. 1) becomes that path's
//! rate for the round. The team drives round [`Mobility`]'s ellipse in a convoy, robot `k`
//! `spacing` ahead of robot 0.
//!
//! * **Rates** ([`RateSource`]): `Allocated` follows the allocation (Algorithm 1, or the
//!   one-to-one baseline); `EqualSplit` ignores it: each robot gets the allocation's sum
//!   divided equally (airtime-fair sharing of the same capacity).
//! * **`share`**: the part of its `θ` robot 0's transfer gets (the access point carries the
//!   team's other traffic; it also keeps the simulated rates, Shannon rates of Gbit/s at 60
//!   GHz, in the range a simulation of every packet runs quickly). A path whose rate falls
//!   below `min_rate_bps` is out for the round (no chain serves the robot there).
//! * **Rate hints** ([`Hints`]): what the sender's scheduler is told each round
//!   (`MpConnection::set_rate_hint`): nothing (measurement alone), the allocated rate of each
//!   path (seed 001's `P_m^i = size/θ`), or the same rate for every path (an equal split).
//!
//! A team file (`scenarios/beams_team.toml`, [`TeamFile`]) describes the access points, the
//! team and the drive.

use crate::mobility::Mobility;
use crate::multipath::MpPath;
use cohort_medium::beams::alloc::{Greedy, Mapping};
use cohort_medium::beams::{ApConfig, Band, BeamsError, Channel};
use cohort_medium::link::LinkParams;
use serde::Deserialize;
use std::time::Duration;

/// Where each path's rate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateSource {
    /// The allocation (`mapping`) of each round.
    Allocated(Mapping),
    /// The allocation's sum (Algorithm 1) divided equally among the team.
    EqualSplit,
}

/// What the sender's scheduler is told of the paths' rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hints {
    /// Nothing: delay balancing measures.
    None,
    /// Each path's allocated rate (allocation-aware).
    Allocated,
    /// Every path the mean of the paths' rates (an equal split).
    Equal,
}

/// A team past multi-chain access points.
#[derive(Debug, Clone, PartialEq)]
pub struct BeamTeam {
    /// One path of robot 0 per access point.
    pub aps: Vec<ApConfig>,
    pub team: usize,
    /// The drive (only the ellipse and the speed are used).
    pub mobility: Mobility,
    pub spacing: Duration,
    /// Where on the drive the run starts (robot 0 at `mobility.position(start)`).
    pub start: Duration,
    pub round: Duration,
    pub rates: RateSource,
    pub share: f64,
    pub min_rate_bps: f64,
    /// One-way delay of every path.
    pub owd: Duration,
}

impl BeamTeam {
    /// `team` robots 3 s apart at `speed_mps` round the 60 × 30 m ellipse, a 60 GHz access
    /// point (4 chains, 16 beams) 10 m below it facing up and a 5 GHz one (4 chains, 16 beams)
    /// 10 m above it facing down; allocation every 100 ms by Algorithm 1; 1% of `θ` for the
    /// transfer, out below 0.5 Mbit/s; 5 ms one way.
    pub fn ellipse(team: usize, speed_mps: f64) -> Self {
        let mobility = Mobility::elliptical(speed_mps);
        let mut sixty = ApConfig::new(Band::G60, 4, 16);
        (sixty.y, sixty.boresight_rad) = (-(mobility.b + 10.0), std::f64::consts::FRAC_PI_2);
        let mut five = ApConfig::new(Band::G5, 4, 16);
        (five.y, five.boresight_rad) = (mobility.b + 10.0, -std::f64::consts::FRAC_PI_2);
        BeamTeam {
            aps: vec![sixty, five],
            team,
            mobility,
            spacing: Duration::from_secs(3),
            start: Duration::ZERO,
            round: Duration::from_millis(100),
            rates: RateSource::Allocated(Mapping::OneToMany),
            share: 0.01,
            min_rate_bps: 0.5e6,
            owd: Duration::from_millis(5),
        }
    }

    fn validate(&self) -> Result<(), BeamsError> {
        if self.aps.is_empty() || self.team == 0 || self.round.is_zero() {
            return Err(BeamsError::Empty);
        }
        for (what, v) in [("share", self.share), ("min_rate_bps", self.min_rate_bps)] {
            if !v.is_finite() || v <= 0.0 || (what == "share" && v > 1.0) {
                return Err(BeamsError::Invalid { what, extra: " and positive (share at most 1)", value: v });
            }
        }
        for ap in &self.aps {
            ap.validate()?;
        }
        Ok(())
    }

    /// Robot `k`'s position at `t`.
    pub fn position(&self, k: usize, t: Duration) -> (f64, f64) {
        self.mobility.position(self.start + t + self.spacing * k as u32)
    }
}

/// Robot 0's rate (after `share`) at each access point, each round over `duration`:
/// `(start of the round, rate per access point)`.
pub fn rates(team: &BeamTeam, duration: Duration) -> Result<Vec<(Duration, Vec<f64>)>, BeamsError> {
    team.validate()?;
    let mut greedy = Greedy::new();
    let mut out = Vec::new();
    let mut t = Duration::ZERO;
    let mut pos = Vec::with_capacity(team.team);
    while t <= duration {
        pos.clear();
        pos.extend((0..team.team).map(|k| team.position(k, t)));
        let mut row = Vec::with_capacity(team.aps.len());
        for ap in &team.aps {
            let ch = Channel::new(ap, &pos)?;
            let bps = match team.rates {
                RateSource::Allocated(m) => {
                    greedy.run(&ch, m);
                    ch.evaluate(greedy.streams())?.device_bps[0]
                }
                RateSource::EqualSplit => greedy.run(&ch, Mapping::OneToMany) / team.team as f64,
            };
            row.push(bps * team.share);
        }
        out.push((t, row));
        t += team.round;
    }
    Ok(out)
}

/// Robot 0's multipath paths over `duration`: one per access point, its link's rate
/// following [`rates`] (out while below `min_rate_bps`), and the scheduler told `hints`.
pub fn paths(team: &BeamTeam, duration: Duration, hints: Hints) -> Result<Vec<MpPath>, BeamsError> {
    let schedule = rates(team, duration)?;
    Ok(paths_from(&schedule, team.owd, team.min_rate_bps, hints))
}

/// [`paths`] from a rate schedule already computed.
pub fn paths_from(schedule: &[(Duration, Vec<f64>)], owd: Duration, min_rate_bps: f64, hints: Hints) -> Vec<MpPath> {
    let n = schedule.first().map_or(0, |r| r.1.len());
    let params = |bps: f64| LinkParams::clean(owd, bps.max(1.0) as u64);
    (0..n)
        .map(|p| {
            let first = schedule.iter().map(|r| r.1[p]).find(|&b| b >= min_rate_bps).unwrap_or(min_rate_bps);
            let mut path = MpPath::new(params(first));
            let mut out_since: Option<Duration> = None;
            let mut last: Option<u64> = None;
            for (t, row) in schedule {
                let bps = row[p];
                if bps < min_rate_bps {
                    out_since.get_or_insert(*t);
                } else {
                    if let Some(a) = out_since.take() {
                        path.outages.push((a, *t));
                    }
                    if last != Some(bps as u64) {
                        path.changes.push((*t, params(bps)));
                        last = Some(bps as u64);
                    }
                }
                // A path out for the round has no rate to tell: the transport's failure
                // detector and probes handle an absent link, as without hints.
                let hint = match hints {
                    _ if bps < min_rate_bps => None,
                    Hints::None => None,
                    Hints::Allocated => Some(bps),
                    Hints::Equal => Some(row.iter().sum::<f64>() / row.len() as f64),
                };
                if hints != Hints::None {
                    path.rate_hints.push((*t, hint));
                }
            }
            if let Some(a) = out_since {
                path.outages.push((a, Duration::MAX / 2));
            }
            path
        })
        .collect()
}

/// A team file: the access points, the team and its drive (see `scenarios/beams_team.toml`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamFile {
    pub name: String,
    pub team: usize,
    pub speed_mps: f64,
    /// Semi-axes of the ellipse, metres.
    pub a: f64,
    pub b: f64,
    pub spacing_s: f64,
    /// Where on the drive the run starts, seconds (0 if absent).
    #[serde(default)]
    pub start_s: f64,
    pub round_ms: f64,
    pub share: f64,
    pub min_rate_mbps: f64,
    pub owd_ms: f64,
    /// "greedy" (Algorithm 1), "one_to_one" or "equal_split".
    pub rates: String,
    pub aps: Vec<ApFile>,
}

/// An access point of a team file (the band's constants are [`ApConfig::new`]'s).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApFile {
    /// "5" or "60" (GHz).
    pub band: String,
    pub chains: usize,
    pub beams: usize,
    pub x: f64,
    pub y: f64,
    pub boresight_deg: f64,
}

/// A team file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TeamFileError {
    #[error("team file: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("team file: {0}")]
    Invalid(String),
    #[error("team file: {0}")]
    Model(#[from] BeamsError),
}

impl TeamFile {
    /// Reads and checks a team file.
    pub fn from_toml(text: &str) -> Result<BeamTeam, TeamFileError> {
        let f: TeamFile = toml::from_str(text)?;
        let bad = |s: String| TeamFileError::Invalid(s);
        let secs = |what: &str, v: f64, max: f64| {
            if v.is_finite() && v >= 0.0 && v <= max {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(bad(format!("{what} {v} must be in [0, {max}]")))
            }
        };
        for (what, v) in [("speed_mps", f.speed_mps), ("a", f.a), ("b", f.b)] {
            if !v.is_finite() || v <= 0.0 || v > 1e5 {
                return Err(bad(format!("{what} {v} must be in (0, 100 000]")));
            }
        }
        if f.team == 0 || f.team > 256 {
            return Err(bad(format!("team {} must be 1 to 256 robots", f.team)));
        }
        let rates = match f.rates.as_str() {
            "greedy" => RateSource::Allocated(Mapping::OneToMany),
            "one_to_one" => RateSource::Allocated(Mapping::OneToOne),
            "equal_split" => RateSource::EqualSplit,
            other => return Err(bad(format!("rates `{other}`: greedy, one_to_one or equal_split"))),
        };
        let mut aps = Vec::new();
        for a in &f.aps {
            let band = match a.band.as_str() {
                "5" => Band::G5,
                "60" => Band::G60,
                other => return Err(bad(format!("band `{other}`: \"5\" or \"60\""))),
            };
            let mut ap = ApConfig::new(band, a.chains, a.beams);
            (ap.x, ap.y, ap.boresight_rad) = (a.x, a.y, a.boresight_deg.to_radians());
            ap.validate()?;
            aps.push(ap);
        }
        let mut mobility = Mobility::elliptical(f.speed_mps);
        (mobility.a, mobility.b) = (f.a, f.b);
        let team = BeamTeam {
            aps,
            team: f.team,
            mobility,
            spacing: secs("spacing_s", f.spacing_s, 3600.0)?,
            start: secs("start_s", f.start_s, 86_400.0)?,
            round: secs("round_ms", f.round_ms / 1e3, 60.0)?,
            rates,
            share: f.share,
            min_rate_bps: f.min_rate_mbps * 1e6,
            owd: secs("owd_ms", f.owd_ms / 1e3, 10.0)?,
        };
        team.validate()?;
        Ok(team)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multipath::{MpRun, run};

    /// Over a lap the robot's allocated rates change, the rounds where no chain serves it at
    /// an access point are outages, and the equal split gives every robot the same.
    #[test]
    fn the_allocation_sets_each_paths_rate() {
        let team = BeamTeam::ellipse(6, 10.0);
        let lap = Duration::from_secs(14);
        let r = rates(&team, lap).unwrap();
        assert_eq!(r.len(), 141);
        assert!(r.iter().all(|(_, row)| row.len() == 2 && row.iter().all(|b| b.is_finite() && *b >= 0.0)));
        let distinct = |p: usize| {
            let mut v: Vec<u64> = r.iter().map(|x| x.1[p] as u64).collect();
            v.sort_unstable();
            v.dedup();
            v.len()
        };
        assert!(distinct(0) > 20 && distinct(1) > 20, "{} {}", distinct(0), distinct(1));
        let eq = rates(&BeamTeam { rates: RateSource::EqualSplit, ..team.clone() }, lap).unwrap();
        assert!(eq.iter().all(|(_, row)| row.iter().all(|b| *b > 0.0)));
        let p = paths_from(&r, team.owd, team.min_rate_bps, Hints::Allocated);
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|q| q.rate_hints.len() == 141 && !q.changes.is_empty()));
        for (q, k) in p.iter().zip(0..) {
            for (t, row) in &r {
                let out = q.outages.iter().any(|&(a, b)| *t >= a && *t < b);
                assert_eq!(out, row[k] < team.min_rate_bps, "path {k} at {t:?}");
            }
        }
    }

    /// A transfer over the allocated paths delivers everything in order, with and without
    /// hints.
    #[test]
    fn a_transfer_runs_over_allocated_paths() {
        let team = BeamTeam::ellipse(4, 10.0);
        for hints in [Hints::Allocated, Hints::Equal, Hints::None] {
            let p = paths(&team, Duration::from_secs(30), hints).unwrap();
            let o = run(&MpRun::new(Default::default(), p, 1500, 1200, 5)).unwrap();
            assert_eq!((o.delivered, o.in_order), (1500, true), "{hints:?}");
        }
    }

    #[test]
    fn the_team_file_is_read_and_checked() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/beams_team.toml")).unwrap();
        let t = TeamFile::from_toml(&text).unwrap();
        assert_eq!(t.aps.len(), 2);
        assert!(rates(&t, Duration::from_secs(1)).is_ok());
        for (from, to) in [
            ("team = 6", "team = 0"),
            ("rates = \"greedy\"", "rates = \"best\""),
            ("band = \"60\"", "band = \"24\""),
            ("chains = 4", "chains = 0"),
            ("share = 0.01", "share = 2.0"),
            ("round_ms = 100.0", "round_ms = -1.0"),
            ("speed_mps = 10.0", "speed_mps = nan"),
        ] {
            assert!(text.contains(from), "{from}");
            assert!(TeamFile::from_toml(&text.replacen(from, to, 1)).is_err(), "{to}");
        }
        assert!(BeamTeam { team: 0, ..t.clone() }.validate().is_err());
        let near =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/beams_team_colocated.toml"))
                .unwrap();
        let t = TeamFile::from_toml(&near).unwrap();
        assert_eq!((t.aps[0].y, t.aps[1].y), (-40.0, -40.0));
    }
}
