//! PHY timing: slot, SIFS, preambles and frame durations per 802.11 PHY.
//!
//! Values are those of IEEE 802.11-2016: Clause 15/16 (DSSS/HR-DSSS, 802.11b), Clause 17 (OFDM,
//! 802.11a and the 5 GHz non-HT rates of n/ac), Clause 18 (ERP-OFDM, 802.11g, with its 6 µs
//! signal extension). HT/VHT rates use the OFDM symbol timing with their own data rate and a
//! longer preamble (HT-mixed 36 µs, VHT 40 µs for one spatial stream).

use std::time::Duration;

/// Which PHY a channel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PhyKind {
    /// 802.11b, DSSS/HR-DSSS, long preamble.
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
    /// Basic rate: broadcast frames and ACKs, Mbit/s.
    pub basic_mbps: f64,
    pub slot: Duration,
    pub sifs: Duration,
}

impl Phy {
    /// 802.11b at `data_mbps` (1, 2, 5.5 or 11), basic rate 1 Mbit/s.
    pub fn dsss(data_mbps: f64) -> Self {
        Phy {
            kind: PhyKind::Dsss,
            data_mbps,
            basic_mbps: 1.0,
            slot: Duration::from_micros(20),
            sifs: Duration::from_micros(10),
        }
    }

    /// 802.11a at `data_mbps` (6..54), control rate chosen per 802.11 §10.6.6.5 (the highest
    /// mandatory rate not above the data rate: 6, 12 or 24).
    pub fn ofdm(data_mbps: f64) -> Self {
        Phy {
            kind: PhyKind::Ofdm,
            data_mbps,
            basic_mbps: Self::mandatory_below(data_mbps),
            slot: Duration::from_micros(9),
            sifs: Duration::from_micros(16),
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
        }
    }

    /// 802.11n (5 GHz) at an HT data rate, e.g. 65 (MCS 7, 20 MHz, 1 stream).
    pub fn ht(data_mbps: f64) -> Self {
        Phy { kind: PhyKind::Ht, ..Self::ofdm(data_mbps) }
    }

    /// 802.11ac at a VHT data rate, e.g. 86.7 (MCS 8, 20 MHz, 1 stream).
    pub fn vht(data_mbps: f64) -> Self {
        Phy { kind: PhyKind::Vht, ..Self::ofdm(data_mbps) }
    }

    fn mandatory_below(rate: f64) -> f64 {
        [24.0, 12.0, 6.0].into_iter().find(|&r| r <= rate).unwrap_or(6.0)
    }

    /// DIFS = SIFS + 2 slots.
    pub fn difs(&self) -> Duration {
        self.sifs + 2 * self.slot
    }

    /// AIFS for an AIFSN.
    pub fn aifs(&self, aifsn: u8) -> Duration {
        self.sifs + u32::from(aifsn) * self.slot
    }

    /// Air time of a PPDU carrying `bytes` of MPDU at `mbps`.
    pub fn duration(&self, bytes: usize, mbps: f64) -> Duration {
        let bits = 8.0 * bytes as f64;
        match self.kind {
            // 192 µs long PLCP preamble and header, then the payload at the data rate.
            PhyKind::Dsss => Duration::from_micros(192) + Duration::from_secs_f64(bits / (mbps * 1e6)),
            PhyKind::Ofdm | PhyKind::ErpOfdm | PhyKind::Ht | PhyKind::Vht => {
                // SERVICE (16 bits) + tail (6 bits) + data, in 4 µs symbols.
                let per_symbol = mbps * 4.0;
                let symbols = ((16.0 + 6.0 + bits) / per_symbol).ceil() as u64;
                let preamble = match self.kind {
                    PhyKind::Ht => 36,
                    PhyKind::Vht => 40,
                    _ => 20,
                };
                let ext = if self.kind == PhyKind::ErpOfdm { 6 } else { 0 };
                Duration::from_micros(preamble + 4 * symbols + ext)
            }
        }
    }

    /// Air time of an ACK (14 bytes) at the basic rate.
    pub fn ack_duration(&self) -> Duration {
        self.duration(ACK_BYTES, self.basic_mbps)
    }
}

/// MAC header (24) and FCS (4) of a data frame.
pub const MAC_OVERHEAD_BYTES: usize = 28;
/// A QoS data frame adds the 2-byte QoS Control field.
pub const QOS_MAC_OVERHEAD_BYTES: usize = 30;
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
        let a = Phy::ofdm(54.0);
        assert_eq!(a.difs(), Duration::from_micros(34));
        assert_eq!(a.basic_mbps, 24.0);
        // 1528-byte MPDU at 54 Mbit/s: ceil((22 + 12224) / 216) = 57 symbols.
        assert_eq!(a.duration(1528, 54.0), Duration::from_micros(20 + 4 * 57));
        // 14-byte ACK at the 24 Mbit/s control rate: ceil((22 + 112) / 96) = 2 symbols.
        assert_eq!(a.ack_duration(), Duration::from_micros(20 + 4 * 2));
        let g = Phy::erp_ofdm(54.0);
        assert_eq!(g.duration(1528, 54.0), Duration::from_micros(20 + 4 * 57 + 6));
        assert_eq!(Phy::ht(65.0).duration(100, 65.0), Duration::from_micros(36 + 4 * 4));
    }
}
