//! PHY timing: slot, SIFS, preambles and frame durations per 802.11 PHY.
//!
//! Values are those of IEEE 802.11-2016: Clause 15/16 (DSSS/HR-DSSS, 802.11b: 20 µs slot,
//! 10 µs SIFS, 192 µs long or 96 µs short PLCP preamble and header), Clause 17 (OFDM, 802.11a
//! and the non-HT rates of n/ac in 5 GHz: 9 µs slot, 16 µs SIFS, 20 µs preamble and SIGNAL,
//! 4 µs symbols), Clause 18 (ERP-OFDM, 802.11g: short 9 µs slot, 10 µs SIFS, OFDM symbols and a
//! 6 µs signal extension). HT/VHT data frames use the OFDM symbol timing with their own data
//! rate and a longer preamble (HT-mixed 36 µs, VHT 40 µs, one spatial stream, 800 ns GI);
//! control frames (ACK, BlockAck, RTS, CTS) and basic-rate broadcasts go as non-HT (legacy)
//! PPDUs, as 802.11 10.6.6 requires of control responses. Every field is public: any value
//! may be overridden after construction and is checked by [`Phy::validate`].

use std::time::Duration;

/// Which PHY a channel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PhyKind {
    /// 802.11b, DSSS/HR-DSSS.
    Dsss,
    /// 802.11a (and n/ac non-HT in 5 GHz): OFDM, 9 µs slots.
    Ofdm,
    /// 802.11g ERP-OFDM, short slots (9 µs) and a 6 µs signal extension.
    ErpOfdm,
    /// 802.11n HT-mixed format (OFDM symbols, 36 µs preamble).
    Ht,
    /// 802.11ac VHT (OFDM symbols, 40 µs preamble).
    Vht,
}

/// PHY parameters of a channel.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Phy {
    pub kind: PhyKind,
    /// Data rate of unicast frames, Mbit/s (per station it can be overridden).
    pub data_mbps: f64,
    /// Basic (control) rate: broadcast frames, ACKs, RTS/CTS, Mbit/s.
    pub basic_mbps: f64,
    pub slot: Duration,
    pub sifs: Duration,
    /// PLCP preamble and header of a data PPDU (DSSS long 192 µs, short 96 µs; OFDM 20 µs;
    /// HT-mixed 36 µs; VHT 40 µs).
    #[serde(default = "default_plcp")]
    pub plcp: Duration,
}

fn default_plcp() -> Duration {
    Duration::from_micros(20)
}

/// The longest slot, SIFS or preamble [`Phy::validate`] accepts: ten times anything 802.11
/// defines; larger values are configuration mistakes.
const MAX_PHY_TIME: Duration = Duration::from_millis(2);
/// The fastest rate [`Phy::validate`] accepts (802.11ax tops out near 10 Gbit/s).
const MAX_RATE_MBPS: f64 = 100_000.0;
/// The slowest: a frame of 64 KiB then takes about a minute.
const MIN_RATE_MBPS: f64 = 0.01;

impl Phy {
    /// 802.11b at `data_mbps` (1, 2, 5.5 or 11), long preamble, basic rate 1 Mbit/s (the
    /// only rate every DSSS station must receive, Clause 15.4.4.2).
    pub fn dsss(data_mbps: f64) -> Self {
        Phy {
            kind: PhyKind::Dsss,
            data_mbps,
            basic_mbps: 1.0,
            slot: Duration::from_micros(20),
            sifs: Duration::from_micros(10),
            plcp: Duration::from_micros(192),
        }
    }

    /// 802.11b with the short PLCP preamble (72 µs preamble + 24 µs header at 2 Mbit/s,
    /// Clause 16.2.2.3), basic rate 2 Mbit/s.
    pub fn dsss_short_preamble(data_mbps: f64) -> Self {
        Phy { basic_mbps: 2.0, plcp: Duration::from_micros(96), ..Self::dsss(data_mbps) }
    }

    /// 802.11a at `data_mbps` (6..54), control rate chosen per 802.11 10.6.6.5 (the highest
    /// mandatory rate not above the data rate: 6, 12 or 24).
    pub fn ofdm(data_mbps: f64) -> Self {
        Phy {
            kind: PhyKind::Ofdm,
            data_mbps,
            basic_mbps: Self::mandatory_below(data_mbps),
            slot: Duration::from_micros(9),
            sifs: Duration::from_micros(16),
            plcp: Duration::from_micros(20),
        }
    }

    /// 802.11g ERP-OFDM at `data_mbps`, short slot.
    pub fn erp_ofdm(data_mbps: f64) -> Self {
        Phy {
            kind: PhyKind::ErpOfdm,
            data_mbps,
            basic_mbps: Self::mandatory_below(data_mbps),
            slot: Duration::from_micros(9),
            sifs: Duration::from_micros(10),
            plcp: Duration::from_micros(20),
        }
    }

    /// 802.11n (5 GHz, HT-mixed) at an HT data rate, e.g. 65 (MCS 7, 20 MHz, 1 stream).
    pub fn ht(data_mbps: f64) -> Self {
        Phy { kind: PhyKind::Ht, plcp: Duration::from_micros(36), ..Self::ofdm(data_mbps) }
    }

    /// 802.11ac at a VHT data rate, e.g. 86.7 (MCS 8, 20 MHz, 1 stream).
    pub fn vht(data_mbps: f64) -> Self {
        Phy { kind: PhyKind::Vht, plcp: Duration::from_micros(40), ..Self::ofdm(data_mbps) }
    }

    fn mandatory_below(rate: f64) -> f64 {
        [24.0, 12.0, 6.0].into_iter().find(|&r| r <= rate).unwrap_or(6.0)
    }

    /// Checks that every rate is positive and finite and every time is positive (slot) and
    /// plausible, so that no duration computed from them can overflow.
    pub fn validate(&self) -> Result<(), &'static str> {
        let rate_ok = |r: f64| (MIN_RATE_MBPS..=MAX_RATE_MBPS).contains(&r);
        if !rate_ok(self.data_mbps) || !rate_ok(self.basic_mbps) {
            return Err("PHY rates must lie in [0.01, 100000] Mbit/s");
        }
        if self.slot.is_zero() || self.slot > MAX_PHY_TIME || self.sifs > MAX_PHY_TIME || self.plcp > MAX_PHY_TIME {
            return Err("slot must be positive; slot, SIFS and PLCP at most 2 ms");
        }
        Ok(())
    }

    /// Checks a per-station data rate the way [`Phy::validate`] checks the channel's.
    pub fn validate_rate(mbps: f64) -> Result<(), &'static str> {
        if (MIN_RATE_MBPS..=MAX_RATE_MBPS).contains(&mbps) {
            Ok(())
        } else {
            Err("rates must lie in [0.01, 100000] Mbit/s")
        }
    }

    /// DIFS = SIFS + 2 slots (802.11-2016 10.3.2.3.5).
    pub fn difs(&self) -> Duration {
        self.sifs + 2 * self.slot
    }

    /// `AIFS[AC] = SIFS + AIFSN[AC] × slot` (10.3.2.3.6).
    pub fn aifs(&self, aifsn: u8) -> Duration {
        self.sifs + u32::from(aifsn) * self.slot
    }

    /// EIFS = SIFS + DIFS + the ACK at the lowest mandatory rate (10.3.2.3.7): what a
    /// station waits, instead of DIFS, after a frame it received in error. An EDCA function
    /// waits `EIFS - DIFS + AIFS[AC]`.
    pub fn eifs(&self) -> Duration {
        self.sifs + self.difs() + self.legacy_duration(ACK_BYTES, self.lowest_mbps())
    }

    /// The lowest mandatory rate: 1 Mbit/s for DSSS, 6 for the OFDM PHYs. Group-addressed
    /// control frames such as CF-End go at it in ns-3 (`WifiRemoteStationManager::
    /// GetRtsTxVector` returns the non-unicast mode for a group address).
    pub fn lowest_mbps(&self) -> f64 {
        if self.kind == PhyKind::Dsss { 1.0 } else { 6.0 }
    }

    /// ACKTimeout = SIFS + slot + aRxPHYStartDelay (10.3.2.9): how long a sender waits for
    /// the ACK before concluding the frame failed. aRxPHYStartDelay is taken as the preamble
    /// and header of the (non-HT) ACK, as ns-3 does: 192 µs for long-preamble DSSS (Table
    /// 15-5 agrees) and 20 µs for OFDM, where Table 17-21 says 25 µs; 20 keeps the timeout
    /// on the 9 µs slot grid (SIFS 16 + 9 + 20 = 5 slots).
    pub fn ack_timeout(&self) -> Duration {
        let rx_start = match self.kind {
            PhyKind::Ht | PhyKind::Vht => Duration::from_micros(20),
            _ => self.plcp,
        };
        self.sifs + self.slot + rx_start
    }

    /// Air time of a data PPDU carrying `bytes` of MPDU (or A-MPDU) at `mbps`.
    pub fn duration(&self, bytes: usize, mbps: f64) -> Duration {
        self.ppdu(bytes, mbps, self.plcp)
    }

    /// Air time of a non-HT PPDU (control frames, basic-rate broadcasts): the legacy 20 µs
    /// OFDM preamble on HT/VHT channels, the data preamble otherwise.
    pub fn legacy_duration(&self, bytes: usize, mbps: f64) -> Duration {
        let plcp = match self.kind {
            PhyKind::Ht | PhyKind::Vht => Duration::from_micros(20),
            _ => self.plcp,
        };
        self.ppdu(bytes, mbps, plcp)
    }

    fn ppdu(&self, bytes: usize, mbps: f64, plcp: Duration) -> Duration {
        let bits = 8.0 * bytes as f64;
        // Rates are validated to [0.01, 1e5] Mbit/s; `bytes` is at most a few MB in any
        // sane call, and the float-to-int casts below saturate rather than panic anyway.
        match self.kind {
            // The PSDU at the data rate, rounded up to whole microseconds (Clause 16.3.4).
            PhyKind::Dsss => plcp + Duration::from_micros((bits / mbps).ceil() as u64),
            PhyKind::Ofdm | PhyKind::ErpOfdm | PhyKind::Ht | PhyKind::Vht => {
                // SERVICE (16 bits) + tail (6 bits) + data, in 4 µs symbols (Clause 17.3.2.5).
                let per_symbol = mbps * 4.0;
                let symbols = ((16.0 + 6.0 + bits) / per_symbol).ceil() as u64;
                let ext = if self.kind == PhyKind::ErpOfdm { 6 } else { 0 };
                plcp + Duration::from_micros(symbols.saturating_mul(4).saturating_add(ext))
            }
        }
    }

    /// The longest PPDU the PHY may send, aPPDUMaxTime: 5.484 ms for HT-mixed and VHT
    /// (802.11-2016 Tables 19-25 and 21-28; ns-3's `GetPpduMaxTime`); `None` for the
    /// others, whose frames never come near their limits.
    pub fn max_ppdu(&self) -> Option<Duration> {
        matches!(self.kind, PhyKind::Ht | PhyKind::Vht).then_some(Duration::from_micros(5484))
    }

    /// Air time of a group-addressed control frame (such as CF-End) of `bytes`, sent as ns-3
    /// sends them, at the PHY's first (lowest) mode (`WifiRemoteStationManager::
    /// GetNonUnicastMode`): 6 Mbit/s OFDM in 5 GHz, but on 802.11g the 1 Mbit/s DSSS mode
    /// with the long preamble (192 µs), since an ERP PHY also carries the DSSS rates.
    pub fn group_control_duration(&self, bytes: usize) -> Duration {
        match self.kind {
            PhyKind::ErpOfdm => Duration::from_micros(192 + 8 * bytes as u64),
            _ => self.legacy_duration(bytes, self.lowest_mbps()),
        }
    }

    /// Air time of an ACK (14 bytes) at the basic rate.
    pub fn ack_duration(&self) -> Duration {
        self.legacy_duration(ACK_BYTES, self.basic_mbps)
    }
}

/// MAC header (24) and FCS (4) of a data frame.
pub const MAC_OVERHEAD_BYTES: usize = 28;
/// A QoS data frame adds the 2-byte QoS Control field.
pub const QOS_MAC_OVERHEAD_BYTES: usize = 30;
/// The LLC/SNAP header in front of an IP packet in an 802.11 data frame (RFC 1042).
pub const LLC_SNAP_BYTES: usize = 8;
/// ACK frame length.
pub const ACK_BYTES: usize = 14;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_durations() {
        let b = Phy::dsss(1.0);
        assert_eq!(b.difs(), Duration::from_micros(50));
        assert_eq!(b.ack_duration(), Duration::from_micros(192 + 112));
        // ns-3's Bianchi reference (generate_bianchi.m): a 1536-byte MPDU at 1 Mbit/s.
        assert_eq!(b.duration(1536, 1.0), Duration::from_micros(12_480));
        assert_eq!(b.eifs(), Duration::from_micros(10 + 50 + 304));
        assert_eq!(b.ack_timeout(), Duration::from_micros(10 + 20 + 192));
        assert_eq!(Phy::ofdm(54.0).ack_timeout(), Duration::from_micros(45));
        assert_eq!(Phy::dsss(11.0).duration(1536, 11.0), Duration::from_micros(192 + 1118));
        assert_eq!(Phy::dsss_short_preamble(2.0).ack_duration(), Duration::from_micros(96 + 56));
        let a = Phy::ofdm(54.0);
        assert_eq!(a.difs(), Duration::from_micros(34));
        assert_eq!(a.basic_mbps, 24.0);
        // 1528-byte MPDU at 54 Mbit/s: ceil((22 + 12224) / 216) = 57 symbols.
        assert_eq!(a.duration(1528, 54.0), Duration::from_micros(20 + 4 * 57));
        // 14-byte ACK at the 24 Mbit/s control rate: ceil((22 + 112) / 96) = 2 symbols.
        assert_eq!(a.ack_duration(), Duration::from_micros(20 + 4 * 2));
        // EIFS with the ACK at 6 Mbit/s: ceil(134 / 24) = 6 symbols.
        assert_eq!(a.eifs(), Duration::from_micros(16 + 34 + 20 + 24));
        let g = Phy::erp_ofdm(54.0);
        assert_eq!(g.duration(1528, 54.0), Duration::from_micros(20 + 4 * 57 + 6));
        assert_eq!(g.ack_duration(), Duration::from_micros(34), "as ns-3's Bianchi11g.m");
        let n = Phy::ht(65.0);
        assert_eq!(n.duration(100, 65.0), Duration::from_micros(36 + 4 * 4));
        assert_eq!(n.ack_duration(), Duration::from_micros(28), "control responses are non-HT");
    }

    #[test]
    fn implausible_values_are_rejected() {
        assert!(Phy::ofdm(54.0).validate().is_ok());
        for bad in [
            Phy { data_mbps: 0.0, ..Phy::ofdm(54.0) },
            Phy { basic_mbps: f64::NAN, ..Phy::ofdm(54.0) },
            Phy { data_mbps: f64::INFINITY, ..Phy::ofdm(54.0) },
            Phy { slot: Duration::ZERO, ..Phy::ofdm(54.0) },
            Phy { sifs: Duration::from_secs(1), ..Phy::ofdm(54.0) },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
