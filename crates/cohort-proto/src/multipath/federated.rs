//! Sharing MS-UCB's per-path statistics with the team (seed 001 §4.1, Eqs. 17-19), sans-IO.
//!
//! A path is named by a [`PathKey`] the robots agree on (an access point, a channel, a link:
//! `ap:north-5g`, `chan:36`). Each robot keeps a [`StatsStore`]: what it measured itself per
//! key, with when, and the team's view. Sharing follows the group's request-reply (GCBRR),
//! where only the coordinator asks: every round the coordinator sends the team's view to
//! every member, each member adopts it and answers with a report of its own measurements,
//! and the coordinator combines those reports and its own into the next view
//! ([`StatsStore::gather`]: per key, the age-weighted mean of Eqs. 17-18,
//! [`super::bandit::federated_start`]). A robot about to use paths starts each from the
//! team's view, or from its own measurement of a path the view lacks
//! ([`StatsStore::start_for`]). Only a robot's own measurements are reported, never what it
//! learned from the view, so no figure is counted twice.
//!
//! One wire form (big-endian), small enough for one group frame, for the view and the
//! reports alike:
//!
//! ```text
//! "CFR1" | n u8 (≤ 16) | n × ( len u8 | key | u f64 | v f64 | age_ms u32 )
//! ```
//!
//! Parsing never panics: a short, foreign or out-of-range input is a [`FedError`].

use super::bandit::{ArmStats, SharedStats, federated_start};
use cohort_time::Instant;
use std::collections::BTreeMap;

/// The longest key, bytes.
pub const MAX_KEY: usize = 48;
/// At most this many keys per query or report (a report then fits one 1500-byte frame).
pub const MAX_ENTRIES: usize = 16;
/// A store keeps at most this many keys (the oldest go first).
pub const MAX_STORED: usize = 256;
/// Reports older than this say nothing (and are not sent).
pub const MAX_AGE_MS: u32 = 24 * 3600 * 1000;
/// A path's `u` (rounds it was chosen) beyond this is not believed.
const MAX_U: f64 = 1e12;

const REPORT: &[u8; 4] = b"CFR1";

/// Why a key, a query or a report is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FedError {
    #[error("truncated")]
    Truncated,
    #[error("not a Cohort path-statistics message")]
    Foreign,
    #[error("path key {0:?}: 1 to 48 printable ASCII characters without spaces")]
    BadKey(String),
    #[error("{0} entries: at most 16")]
    TooMany(usize),
    #[error("statistics out of range: u {u}, v {v}")]
    BadStats { u: f64, v: f64 },
    #[error("{0} bytes after the last entry")]
    Trailing(usize),
}

/// A path's name the team agrees on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathKey(String);

impl PathKey {
    pub fn new(key: &str) -> Result<Self, FedError> {
        let ok = !key.is_empty() && key.len() <= MAX_KEY && key.bytes().all(|b| b.is_ascii_graphic());
        if ok { Ok(PathKey(key.to_string())) } else { Err(FedError::BadKey(key.chars().take(64).collect())) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for PathKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One path's statistics in a report.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: PathKey,
    pub stats: ArmStats,
    pub age_ms: u32,
}

fn check_stats(s: ArmStats) -> Result<ArmStats, FedError> {
    if s.u.is_finite() && (0.0..=MAX_U).contains(&s.u) && s.v.is_finite() && (0.0..=1.0).contains(&s.v) {
        Ok(s)
    } else {
        Err(FedError::BadStats { u: s.u, v: s.v })
    }
}

fn count(n: usize) -> Result<u8, FedError> {
    if n > MAX_ENTRIES { Err(FedError::TooMany(n)) } else { Ok(n as u8) }
}

fn put_key(out: &mut Vec<u8>, k: &PathKey) {
    out.push(k.0.len() as u8);
    out.extend_from_slice(k.0.as_bytes());
}

/// A cursor over a message that refuses to read past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FedError> {
        if self.0.len() < n {
            return Err(FedError::Truncated);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, FedError> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FedError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn key(&mut self) -> Result<PathKey, FedError> {
        let n = usize::from(self.u8()?);
        let raw = self.take(n)?;
        PathKey::new(std::str::from_utf8(raw).map_err(|_| FedError::BadKey(String::from_utf8_lossy(raw).into()))?)
    }

    /// The magic, then the entry count.
    fn start(&mut self, magic: &[u8; 4]) -> Result<usize, FedError> {
        if self.take(4)? != magic {
            return Err(FedError::Foreign);
        }
        let n = usize::from(self.u8()?);
        count(n)?;
        Ok(n)
    }

    fn end(self) -> Result<(), FedError> {
        if self.0.is_empty() { Ok(()) } else { Err(FedError::Trailing(self.0.len())) }
    }
}

pub fn encode_report(entries: &[Entry]) -> Result<Vec<u8>, FedError> {
    let mut out = REPORT.to_vec();
    out.push(count(entries.len())?);
    for e in entries {
        let s = check_stats(e.stats)?;
        put_key(&mut out, &e.key);
        out.extend_from_slice(&s.u.to_be_bytes());
        out.extend_from_slice(&s.v.to_be_bytes());
        out.extend_from_slice(&e.age_ms.to_be_bytes());
    }
    Ok(out)
}

pub fn parse_report(bytes: &[u8]) -> Result<Vec<Entry>, FedError> {
    let mut r = Reader(bytes);
    let n = r.start(REPORT)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let key = r.key()?;
        let u = f64::from_be_bytes(r.array()?);
        let v = f64::from_be_bytes(r.array()?);
        let age_ms = u32::from_be_bytes(r.array()?);
        out.push(Entry { key, stats: check_stats(ArmStats { u, v })?, age_ms });
    }
    r.end()?;
    Ok(out)
}

/// A view entry: the team's statistics of a key, how old they were and when they came.
#[derive(Debug, Clone, Copy)]
struct Viewed {
    stats: ArmStats,
    age_ms: u32,
    at: Instant,
}

/// What one robot measured itself per path key, with when, and the team's view. See the
/// [module docs](self).
#[derive(Debug, Clone, Default)]
pub struct StatsStore {
    own: BTreeMap<PathKey, (ArmStats, Instant)>,
    view: BTreeMap<PathKey, Viewed>,
}

fn age_ms(now: Instant, at: Instant, plus: u32) -> Option<u32> {
    let age = u64::try_from(now.saturating_duration_since(at).as_millis()).ok()?.checked_add(u64::from(plus))?;
    u32::try_from(age).ok().filter(|&a| a <= MAX_AGE_MS)
}

/// The freshest `MAX_ENTRIES` of `entries`.
fn freshest(mut entries: Vec<Entry>) -> Vec<Entry> {
    entries.sort_by_key(|e| e.age_ms);
    entries.truncate(MAX_ENTRIES);
    entries
}

impl StatsStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records this robot's statistics of `key` (measured at `now`). Statistics out of range
    /// are refused; beyond [`MAX_STORED`] keys the oldest is forgotten.
    pub fn record(&mut self, key: PathKey, stats: ArmStats, now: Instant) -> Result<(), FedError> {
        let stats = check_stats(stats)?;
        if !self.own.contains_key(&key)
            && self.own.len() >= MAX_STORED
            && let Some(oldest) = self.own.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| k.clone())
        {
            self.own.remove(&oldest);
        }
        self.own.insert(key, (stats, now));
        Ok(())
    }

    /// This robot's own statistics of `key`.
    pub fn get(&self, key: &PathKey) -> Option<ArmStats> {
        self.own.get(key).map(|(s, _)| *s)
    }

    pub fn len(&self) -> usize {
        self.own.len()
    }

    pub fn is_empty(&self) -> bool {
        self.own.is_empty()
    }

    fn own_entries(&self, now: Instant) -> Vec<Entry> {
        self.own
            .iter()
            .filter_map(|(k, (stats, at))| Some(Entry { key: k.clone(), stats: *stats, age_ms: age_ms(now, *at, 0)? }))
            .collect()
    }

    /// A member's answer to the coordinator: its own freshest measurements.
    pub fn own_report(&self, now: Instant) -> Vec<u8> {
        encode_report(&freshest(self.own_entries(now))).unwrap_or_default()
    }

    /// The team's view as it stands, to send to the members.
    pub fn view_report(&self, now: Instant) -> Vec<u8> {
        let entries = self
            .view
            .iter()
            .filter_map(|(k, v)| Some(Entry { key: k.clone(), stats: v.stats, age_ms: age_ms(now, v.at, v.age_ms)? }))
            .collect();
        encode_report(&freshest(entries)).unwrap_or_default()
    }

    /// A member adopts the view the coordinator sent.
    pub fn adopt(&mut self, view: &[u8], now: Instant) -> Result<(), FedError> {
        let entries = parse_report(view)?;
        for e in entries {
            self.view.insert(e.key, Viewed { stats: e.stats, age_ms: e.age_ms, at: now });
        }
        Ok(())
    }

    /// The coordinator's round: the members' `reports` and its own measurements make the new
    /// view (per key, Eqs. 17-18 weighted by age with `half_life_s`; the view's age is the
    /// freshest report's). Returns how many reports were malformed (they are skipped).
    pub fn gather(&mut self, reports: &[&[u8]], now: Instant, half_life_s: f64) -> usize {
        let mut all = vec![self.own_entries(now)];
        let mut malformed = 0;
        for r in reports {
            match parse_report(r) {
                Ok(e) => all.push(e),
                Err(_) => malformed += 1,
            }
        }
        let mut keys: Vec<&PathKey> = all.iter().flatten().map(|e| &e.key).collect();
        keys.sort();
        keys.dedup();
        let keys: Vec<PathKey> = keys.into_iter().cloned().collect();
        let combined = combine(&keys, &all, half_life_s);
        for (k, c) in keys.into_iter().zip(combined) {
            let Some(stats) = c else { continue };
            let age = all.iter().flatten().filter(|e| e.key == k).map(|e| e.age_ms).min().unwrap_or(0);
            self.view.insert(k, Viewed { stats, age_ms: age, at: now });
        }
        malformed
    }

    /// What to start each of `keys` with: the team's view where it has the key (it already
    /// holds this robot's figures as reported), else this robot's own measurement (`None` for
    /// a key neither knows). No figure counts twice.
    pub fn start_for(&self, keys: &[PathKey], now: Instant, half_life_s: f64) -> Vec<Option<ArmStats>> {
        let mut known: Vec<Entry> = self
            .view
            .iter()
            .filter_map(|(k, v)| Some(Entry { key: k.clone(), stats: v.stats, age_ms: age_ms(now, v.at, v.age_ms)? }))
            .collect();
        known.extend(self.own_entries(now).into_iter().filter(|e| !self.view.contains_key(&e.key)));
        combine(keys, &[known], half_life_s)
    }

    /// Whether a view has come (or been gathered).
    pub fn has_view(&self) -> bool {
        !self.view.is_empty()
    }
}

/// The statistics to start each of `keys` with, from `reports` (Eqs. 17-18 with weights
/// halving every `half_life_s` of a report's age): `None` for a key no report has.
pub fn combine(keys: &[PathKey], reports: &[Vec<Entry>], half_life_s: f64) -> Vec<Option<ArmStats>> {
    keys.iter()
        .map(|k| {
            let shared: Vec<SharedStats> = reports
                .iter()
                .flatten()
                .filter(|e| &e.key == k)
                .map(|e| SharedStats { stats: e.stats, age_s: f64::from(e.age_ms) / 1e3 })
                .collect();
            federated_start(&shared, half_life_s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    fn key(s: &str) -> PathKey {
        PathKey::new(s).unwrap()
    }

    /// A round: members report their own figures, the coordinator combines them with its
    /// own into a view, a member adopts the view and starts its paths from it.
    #[test]
    fn a_gathering_round_makes_the_view_a_member_starts_from() {
        let t0 = Instant::ZERO + Duration::from_secs(10);
        let (mut coord, mut a, mut b) = (StatsStore::new(), StatsStore::new(), StatsStore::new());
        a.record(key("ap:north-5g"), ArmStats { u: 120.0, v: 0.8 }, t0).unwrap();
        b.record(key("ap:north-5g"), ArmStats { u: 40.0, v: 0.4 }, t0).unwrap();
        b.record(key("chan:36"), ArmStats { u: 3.0, v: 0.25 }, t0 + Duration::from_secs(1)).unwrap();
        let now = t0 + Duration::from_secs(3);
        assert_eq!(
            parse_report(&b.own_report(now)).unwrap(),
            vec![
                Entry { key: key("chan:36"), stats: ArmStats { u: 3.0, v: 0.25 }, age_ms: 2000 },
                Entry { key: key("ap:north-5g"), stats: ArmStats { u: 40.0, v: 0.4 }, age_ms: 3000 },
            ]
        );
        let malformed = coord.gather(&[&a.own_report(now), &b.own_report(now), b"junk"], now, 300.0);
        assert_eq!(malformed, 1);
        let c = Instant::ZERO + Duration::from_secs(20);
        let mut fresh = StatsStore::new();
        fresh.adopt(&coord.view_report(now), c).unwrap();
        assert!(fresh.has_view());
        let got = fresh.start_for(&[key("ap:north-5g"), key("chan:36"), key("ap:east")], c, 300.0);
        // Two reports of the same age: the plain mean.
        let north = got[0].unwrap();
        assert!((north.u - 80.0).abs() < 1e-9 && (north.v - 0.6).abs() < 1e-9, "{north:?}");
        assert_eq!(got[1], Some(ArmStats { u: 3.0, v: 0.25 }));
        assert_eq!(got[2], None);
    }

    /// The coordinator's own figures enter the view once; starting from the view does not
    /// count them again, and a path only this robot measured starts from its own figures.
    #[test]
    fn own_figures_count_once() {
        let t = Instant::ZERO + Duration::from_secs(1);
        let mut coord = StatsStore::new();
        coord.record(key("p"), ArmStats { u: 10.0, v: 1.0 }, t).unwrap();
        let mut member = StatsStore::new();
        member.record(key("p"), ArmStats { u: 30.0, v: 0.0 }, t).unwrap();
        coord.gather(&[&member.own_report(t)], t, 300.0);
        let got = coord.start_for(&[key("p")], t, 300.0)[0].unwrap();
        assert!((got.u - 20.0).abs() < 1e-9 && (got.v - 0.5).abs() < 1e-9, "{got:?}");
        member.record(key("q"), ArmStats { u: 2.0, v: 0.5 }, t).unwrap();
        assert_eq!(member.start_for(&[key("q")], t, 300.0), vec![Some(ArmStats { u: 2.0, v: 0.5 })]);
    }

    /// Eqs. 17-18 weighted by age: a fresh report outweighs a stale one, an unknown key stays
    /// unknown.
    #[test]
    fn reports_combine_by_age() {
        let a = vec![Entry { key: key("p"), stats: ArmStats { u: 10.0, v: 1.0 }, age_ms: 0 }];
        let b = vec![Entry { key: key("p"), stats: ArmStats { u: 30.0, v: 0.0 }, age_ms: 60_000 }];
        let got = combine(&[key("p"), key("q")], &[a, b], 60.0);
        // Weights 1 and 1/2.
        let s = got[0].unwrap();
        assert!((s.u - (10.0 + 15.0) / 1.5).abs() < 1e-9 && (s.v - 1.0 / 1.5).abs() < 1e-9, "{s:?}");
        assert_eq!(got[1], None);
    }

    #[test]
    fn bad_keys_stats_and_messages_are_typed_errors() {
        for bad in ["", "has space", &"x".repeat(49), "é"] {
            assert!(matches!(PathKey::new(bad), Err(FedError::BadKey(_))), "{bad:?}");
        }
        let mut store = StatsStore::new();
        for s in [ArmStats { u: -1.0, v: 0.5 }, ArmStats { u: 1.0, v: 1.5 }, ArmStats { u: f64::NAN, v: 0.5 }] {
            assert!(matches!(store.record(key("k"), s, Instant::ZERO), Err(FedError::BadStats { .. })));
        }
        let many: Vec<Entry> =
            (0..17).map(|i| Entry { key: key(&format!("k{i}")), stats: ArmStats::default(), age_ms: 0 }).collect();
        assert_eq!(encode_report(&many), Err(FedError::TooMany(17)));
        assert_eq!(parse_report(b"CFR"), Err(FedError::Truncated));
        // Another kind of message (a view must start with its own magic).
        assert_eq!(parse_report(b"HBT1\x00"), Err(FedError::Foreign));
        assert_eq!(parse_report(b"CFR1\x00extra"), Err(FedError::Trailing(5)));
        assert_eq!(parse_report(b"CFR1\x11"), Err(FedError::TooMany(17)));
        assert_eq!(store.adopt(b"CFQ1\x00", Instant::ZERO), Err(FedError::Foreign));
        let mut r = encode_report(&[Entry { key: key("k"), stats: ArmStats { u: 1.0, v: 0.5 }, age_ms: 0 }]).unwrap();
        let v_at = 5 + 2 + 8;
        r[v_at..v_at + 8].copy_from_slice(&2.0f64.to_be_bytes());
        assert!(matches!(parse_report(&r), Err(FedError::BadStats { .. })));
    }

    #[test]
    fn a_full_report_fits_one_group_frame_and_the_store_is_bounded() {
        let entries: Vec<Entry> = (0..MAX_ENTRIES)
            .map(|i| Entry { key: key(&format!("{i:0>48}")), stats: ArmStats { u: 1.0, v: 0.5 }, age_ms: 1 })
            .collect();
        assert!(encode_report(&entries).unwrap().len() <= 1200);
        let mut store = StatsStore::new();
        for i in 0..MAX_STORED + 10 {
            store.record(key(&format!("k{i}")), ArmStats::default(), Instant::from_millis(i as u64)).unwrap();
        }
        assert_eq!(store.len(), MAX_STORED);
        assert_eq!(store.get(&key("k0")), None, "the oldest went first");
        assert!(store.get(&key(&format!("k{}", MAX_STORED + 9))).is_some());
    }

    proptest! {
        /// Any bytes: a typed error or a message that encodes back to the same bytes.
        #[test]
        fn any_bytes_parse_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(entries) = parse_report(&bytes) {
                prop_assert_eq!(encode_report(&entries).unwrap(), bytes.clone());
            }
            let mut s = StatsStore::new();
            let _ = s.adopt(&bytes, Instant::ZERO);
            let _ = s.gather(&[&bytes], Instant::ZERO, 1.0);
        }
    }
}
