//! A real Linux host's card load, from mac80211's per-station debugfs files: what the agent
//! reads where no emulator publishes a card file ([`super::card`]).
//!
//! For the station a robot sends to (its access point, or each peer in an ad-hoc or mesh
//! network), mac80211 keeps under
//! `/sys/kernel/debug/ieee80211/PHY/netdev:IFACE/stations/MAC/`:
//!
//! * `aql`: the airtime queue limit's pending airtime per access category, the estimated
//!   airtime of the frames handed to the driver and not yet completed (`net/mac80211/
//!   debugfs_sta.c`, `sta_aql_read`: `"Q depth: VO: %u us VI: %u us BE: %u us BK: %u us\n"`,
//!   then a `Q limit[low/high]` line);
//! * `airtime`: the airtime the station's completed transmissions took, cumulative
//!   (`sta_airtime_read`: `"RX: %llu us\nTX: %llu us\nWeight: %u\n"` and a deficit or
//!   virtual-time line, which differs between kernel versions and is not read);
//! * `aqm`: per TID, what waits in mac80211's queue above the driver (`sta_aqm_read`: a
//!   `target ... interval ... ecn ...` line, a header naming the columns, one row per TID;
//!   `backlog-bytes` and `backlog-packets` are read by their header's position).
//!
//! The agent's estimate (seed 000's Algorithm 2: drain time = what the card holds / the rate
//! it completes) needs one unit for both. Pending and completed airtime are converted to bytes
//! at the link's rate `R` (`--link-mbps`), the queue's backlog is in bytes already: the drain
//! time comes out as pending airtime over completed airtime per second, exact in airtime
//! whatever `R` is, plus the backlog at the card's measured byte rate. Needs root (debugfs)
//! and a kernel with AQL; kernels that print the `Q depth` line in `airtime` (before `aql`
//! was split out of it) are read from there, and a station with neither is refused at start.

use super::card::{CardError, CardLoad};
use std::path::{Path, PathBuf};

/// Why a debugfs file's text was not what mac80211 writes.
fn malformed(path: &Path, why: &'static str) -> CardError {
    CardError::NotACardFile { path: path.to_path_buf(), why }
}

/// The `Q depth` line of `aql`: pending airtime per access category (VO, VI, BE, BK), µs.
pub fn parse_aql(text: &str) -> Option<[u64; 4]> {
    let line = text.lines().find_map(|l| l.trim().strip_prefix("Q depth:"))?;
    let mut out = [0u64; 4];
    let mut w = line.split_whitespace();
    for (i, ac) in ["VO:", "VI:", "BE:", "BK:"].iter().enumerate() {
        if w.next()? != *ac {
            return None;
        }
        out[i] = w.next()?.parse().ok()?;
        if w.next()? != "us" {
            return None;
        }
    }
    Some(out)
}

/// The `TX:` line of `airtime`: the completed transmissions' airtime, µs.
pub fn parse_airtime_tx(text: &str) -> Option<u64> {
    let rest = text.lines().find_map(|l| l.trim().strip_prefix("TX:"))?;
    let mut w = rest.split_whitespace();
    let us = w.next()?.parse().ok()?;
    (w.next()? == "us").then_some(us)
}

/// `aqm`'s backlog over every TID: (bytes, packets) waiting above the driver.
pub fn parse_aqm_backlog(text: &str) -> Option<(u64, u64)> {
    let mut lines = text.lines().map(str::trim).skip_while(|l| !l.starts_with("tid "));
    let header: Vec<&str> = lines.next()?.split_whitespace().collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (bytes, packets) = (col("backlog-bytes")?, col("backlog-packets")?);
    let (mut b, mut p) = (0u64, 0u64);
    for row in lines.filter(|l| !l.is_empty()) {
        let f: Vec<&str> = row.split_whitespace().collect();
        b = b.checked_add(f.get(bytes)?.parse().ok()?)?;
        p = p.checked_add(f.get(packets)?.parse().ok()?)?;
    }
    Some((b, p))
}

/// One station's load as mac80211 reports it; see the module docs.
#[derive(Debug)]
pub struct DebugfsCard {
    dir: PathBuf,
    rate_bps: u64,
    aqm: bool,
    /// Whether the `Q depth` line is in its own `aql` file (else in `airtime`).
    aql: bool,
}

impl DebugfsCard {
    /// Reads the station directory `dir` (`.../stations/MAC`), converting airtime to bytes at
    /// `rate_bps`. `aql` and `airtime` must read now; `aqm` is used when the kernel has it.
    pub fn open(dir: &Path, rate_bps: u64) -> Result<Self, CardError> {
        if rate_bps == 0 {
            return Err(malformed(dir, "a link rate of 0 turns no airtime into bytes"));
        }
        let has = |name: &str| std::fs::metadata(dir.join(name)).is_ok();
        let mut c = DebugfsCard { dir: dir.to_path_buf(), rate_bps, aqm: has("aqm"), aql: has("aql") };
        c.read()?;
        Ok(c)
    }

    fn text(&self, name: &str) -> Result<(PathBuf, String), CardError> {
        let path = self.dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(|source| CardError::Io { path: path.clone(), source })?;
        Ok((path, text))
    }

    fn bytes_of(&self, us: u64) -> u64 {
        (u128::from(us) * u128::from(self.rate_bps) / 8_000_000).min(u128::from(u64::MAX)) as u64
    }

    /// The station's load now: pending = the AQL airtime at the link rate plus the queue's
    /// backlog; sent = the completed airtime at the link rate. Frames: the queue's backlog
    /// only (mac80211 counts no completed frames per station).
    pub fn read(&mut self) -> Result<CardLoad, CardError> {
        let (path, airtime) = self.text("airtime")?;
        let tx = parse_airtime_tx(&airtime).ok_or_else(|| malformed(&path, "no `TX: .. us` line"))?;
        let (path, aql) = if self.aql { self.text("aql")? } else { (path, airtime) };
        let depth =
            parse_aql(&aql).ok_or_else(|| malformed(&path, "no `Q depth: VO: .. us VI: .. BE: .. BK: .. us` line"))?;
        let (backlog_bytes, backlog_frames) = if self.aqm {
            let (path, aqm) = self.text("aqm")?;
            parse_aqm_backlog(&aqm)
                .ok_or_else(|| malformed(&path, "no `tid ... backlog-bytes backlog-packets` table"))?
        } else {
            (0, 0)
        };
        let pending_us = depth.iter().sum::<u64>();
        Ok(CardLoad {
            pending_bytes: self.bytes_of(pending_us).saturating_add(backlog_bytes),
            pending_frames: backlog_frames,
            sent_bytes: self.bytes_of(tx),
            sent_frames: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // As mac80211 prints them (net/mac80211/debugfs_sta.c, Linux 6.x), with figures of a
    // station under load.
    const AQL: &str = "Q depth: VO: 0 us VI: 0 us BE: 11744 us BK: 0 us\n\
                       Q limit[low/high]: VO: 5000/12000 VI: 5000/12000 BE: 5000/12000 BK: 5000/12000\n";
    const AIRTIME: &str = "RX: 1203337 us\nTX: 98234112 us\nWeight: 256\n\
                           Virt-T: VO: 0 us VI: 0 us BE: 1204 us BK: 0 us\n";
    const AQM: &str = "target 19999us interval 99999us ecn yes\n\
                       tid ac backlog-bytes backlog-packets new-flows drops marks overlimit collisions tx-bytes tx-packets flags\n\
                       0 2 30280 20 11 0 0 0 0 883712 593 0x0(RUN)\n\
                       1 3 0 0 0 0 0 0 0 0 0 0x0()\n\
                       6 0 1514 1 1 0 0 0 0 2828 2 0x0(RUN)\n";

    #[test]
    fn the_kernels_formats_parse() {
        assert_eq!(parse_aql(AQL), Some([0, 0, 11744, 0]));
        assert_eq!(parse_airtime_tx(AIRTIME), Some(98_234_112));
        assert_eq!(parse_aqm_backlog(AQM), Some((31_794, 21)));
        // The older airtime file (a Deficit line, Q depth in it) reads the same way.
        let old = "RX: 5 us\nTX: 7 us\nWeight: 256\nDeficit: VO: -1 us VI: 0 us BE: 3 us BK: 0 us\n\
                   Q depth: VO: 1 us VI: 2 us BE: 3 us BK: 4 us\n";
        assert_eq!((parse_airtime_tx(old), parse_aql(old)), (Some(7), Some([1, 2, 3, 4])));
    }

    #[test]
    fn other_text_is_refused() {
        for bad in ["", "Q depth: VO: x us VI: 0 us BE: 0 us BK: 0 us", "Q depth: VO: 1 us VI: 2 us", "TX: 12"] {
            assert_eq!(parse_aql(bad), None, "{bad:?}");
            assert_eq!(parse_airtime_tx(bad), None, "{bad:?}");
        }
        assert_eq!(parse_aqm_backlog("tid ac tx-bytes\n0 2 5\n"), None, "no backlog columns");
        assert_eq!(parse_aqm_backlog("tid ac backlog-bytes backlog-packets\n0 2 5\n"), None, "a short row");
    }

    #[test]
    fn a_station_directory_reads_as_a_card_load() {
        let dir = std::env::temp_dir().join(format!("cohort-mac80211-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("aql"), AQL).unwrap();
        std::fs::write(dir.join("airtime"), AIRTIME).unwrap();
        // Without aqm (a driver without mac80211's TXQs): airtime only.
        let mut c = DebugfsCard::open(&dir, 40_000_000).unwrap();
        assert_eq!(
            c.read().unwrap(),
            CardLoad { pending_bytes: 58_720, pending_frames: 0, sent_bytes: 491_170_560, sent_frames: 0 }
        );
        std::fs::write(dir.join("aqm"), AQM).unwrap();
        let mut c = DebugfsCard::open(&dir, 40_000_000).unwrap();
        assert_eq!(c.read().unwrap().pending_bytes, 58_720 + 31_794);
        std::fs::write(dir.join("aql"), "garbage").unwrap();
        assert!(matches!(c.read(), Err(CardError::NotACardFile { .. })));
        // An older kernel: no `aql` file, the Q depth in `airtime`.
        std::fs::remove_file(dir.join("aql")).unwrap();
        let old = "RX: 5 us\nTX: 8 us\nWeight: 256\nDeficit: VO: 0 us VI: 0 us BE: 0 us BK: 0 us\n\
                   Q depth: VO: 0 us VI: 0 us BE: 16 us BK: 0 us\n";
        std::fs::write(dir.join("airtime"), old).unwrap();
        let mut c = DebugfsCard::open(&dir, 40_000_000).unwrap();
        let l = c.read().unwrap();
        assert_eq!((l.pending_bytes, l.sent_bytes), (80 + 31_794, 40));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(c.read(), Err(CardError::Io { .. })), "a station gone (disassociated) is an error");
        assert!(DebugfsCard::open(&dir, 40_000_000).is_err());
        assert!(DebugfsCard::open(&dir, 0).is_err());
    }
}
