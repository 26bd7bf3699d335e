//! The shared 802.11 channel: DCF and EDCA contention among stations, sans-IO.
//!
//! Every station has one queue per access category (the "WNIC buffer" of seed 000 §II-C,
//! where local congestion happens: a full queue drops and counts). Each non-empty queue
//! contends with its own backoff counter after its AIFS; the model jumps from one transmission
//! to the next (the earliest `AIFS + backoff` wins; counters of the others advance by the idle
//! slots that passed) instead of ticking every slot. Two or more stations starting in the same
//! slot collide: all their frames are lost and each doubles its contention window. Within a
//! station, the highest access category wins an internal collision and the others back off as
//! if they had collided. A unicast frame is acknowledged after SIFS, retried up to the retry
//! limit, and may fail by the receiver's frame error rate (retried like a collision). The
//! window follows the category's station retry count (802.11-2020 10.23.2.2, QSRC): it doubles
//! with each failed exchange, whatever it carried, goes back to CWmin at the failure after the
//! retry limit and at every success (a block ack, even one that reports lost MPDUs, an
//! acknowledged ADDBA Request), and not when a frame is dropped at its own limit. Broadcast
//! frames go at the basic rate, unacknowledged, never retried. A won TXOP lets the winner send
//! further frames of the same category after SIFS while they fit in the TXOP limit.
//!
//! Options per station: RTS/CTS above a size threshold (a collision then costs only the RTS;
//! such frames use the long retry limit), A-MPDU and A-MSDU aggregation with per-category
//! limits ([`Aggregation`]: ns-3 3.44's defaults on HT/VHT, AC_BE and AC_VI only), under a
//! block-ack agreement set up as ns-3 does it (an ADDBA Request in the originator's access,
//! the Response in the recipient's own, 5 ms to wait for it, single MPDUs meanwhile; either
//! frame is dropped at the retry limit, and an originator without a response sends single
//! MPDUs for 200 ms before it asks again); an
//! A-MPDU fits the block-ack window, its byte limit, the PHY's longest PPDU and what is left
//! of the TXOP (a later A-MPDU of a TXOP shrinks to fit), carries per-MPDU errors and gets a
//! block ack; lost MPDUs are retried (delivered ones may arrive before them), and a lost
//! A-MPDU costs a BlockAckReq exchange in the next access first (retried for as long as an
//! MPDU it covers is alive, and counted against no frame; MPDUs in flight outlive their MSDU
//! lifetime until its block ack comes, and those that died meanwhile cost another BlockAckReq,
//! as in ns-3's `BlockAckManager`). TXOPs truncated by CF-End
//! (a TXOP that ends early without one leaves everyone but its holder waiting for the NAV its
//! frames set, to the end of the TXOP limit), and on the channel a
//! propagation delay, EIFS after collisions and ACK timeouts for failed senders (both off by
//! default: Bianchi's "DIFS" model, which ns-3's reference tables use; see [`Timing`]). EIFS
//! may be limited to the bystanders that detect a colliding preamble, given the received
//! powers ([`Medium::with_preamble_detection`], ns-3's rule).
//!
//! Against ns-3 3.44 (`../shared/reference/ns3/edca_sat.py`, the [`scenario::EdcaSatScenario`])
//! three facts of ns-3 decide how AC_VO and AC_BE share the channel, and the `ns3` preset and
//! the scenario's defaults follow them: ns-3 configures 802.11-2020's EDCA defaults
//! ([`EdcaTable::Ieee2020`], AC_VO TXOP limit 2.080 ms: six frames per access, not four);
//! its CF-End goes at 6 Mbit/s; and bystanders of a collision between stations within a
//! metre of each other detect no preamble, so they wait AIFS, not EIFS. The preset also
//! keeps ns-3's post-backoff and immediate access ([`Medium::with_immediate_access`]), which
//! sends a recipient's ADDBA Response AIFS after the request's ACK.
//!
//! # NIC profiles: what a frame waits for inside the card
//!
//! [`StationConfig::nic`] says how a station's card serves the frames handed to it (details
//! and sources in [`nic`]):
//!
//! * `per_ac` (the default, and all of the above): one hardware queue and one EDCA function
//!   per access category, as 802.11's EDCA transmitter (802.11-2016 Fig. 10-24) and PCIe
//!   drivers such as ath9k (a DCU per AC, `ATH_AGGR_MIN_QDEPTH` = 2 A-MPDUs queued) and
//!   iwlwifi (a TFD ring per AC/TID) have it. A VO frame behind a BE backlog of its own
//!   station waits for the PPDU on the air and at most one more BE access.
//! * `shared_tx`: seed 000's "local congestion" (§II-C, Figs. 3, 4, 11) on its MT7612U USB
//!   dongles under mt76 with fq_codel. The first `buffer_frames` frames of each category are
//!   in the card, the rest in the host (per-AC, as mac80211's TXQs and fq_codel keep them);
//!   a frame takes `handoff` to cross into the card (USB bulk-out/DMA) and the card serves
//!   everything handed over in that order: the category whose oldest frame is the oldest in
//!   the card contends, with its own EDCA parameters and a fresh backoff, and builds its
//!   A-MPDU only from frames handed over before any other category's. Defaults
//!   ([`NicProfile::mt76_usb`]): 64 frames per AC (mt76 in Linux 5.4: 4 outstanding bursts
//!   of 16 aggregated frames per hardware queue, `mt76_txq_schedule`, `mt76_txq_send_burst`)
//!   and 125 µs (one USB 2.0 microframe). A VO frame then waits for every frame handed over
//!   before it. [`Medium::nic_backlog`] counts the frames in a card (Fig. 11's y-axis).
//!
//! The model is sans-IO: [`Medium::enqueue`] takes frames with the time, [`Medium::poll_timeout`]
//! says when something next happens, [`Medium::handle_timeout`] runs the channel up to a time,
//! [`Medium::poll_event`] hands out deliveries, transmit completions and drops in time order.
//! It never reads a clock and draws every random number from one seeded stream.
//!
//! Speed: the model never ticks slot by slot. Each contender's backoff expiry is
//! `count_from + backoff × slot`; the earliest expiry is the next transmission, and when it
//! happens every other contender's counter is reduced by the idle slots that passed. One
//! transmission costs O(stations) work, whatever the window sizes.
//!
//! Not modelled: hidden stations (every station hears every other), capture of a whole frame
//! (ns-3 captures: on HT MCS 0 with twenty stations a few dB apart it carries ~19 % more,
//! `docs/bench/ns3_matrix_capture_check.txt`), rate adaptation,
//! immediate access on an idle medium (a frame reaching an empty queue always draws a
//! backoff), fragmentation, beacons and management frames.

pub mod aggregation;
pub mod bianchi;
mod medium;
pub mod nic;
pub mod nic_scenario;
pub mod ns3_matrix;
pub mod per;
pub mod phy;
pub mod scenario;
mod types;

pub use aggregation::{Aggregation, PerAc};
pub use medium::Medium;
pub use nic::NicProfile;
pub use phy::{Phy, PhyKind};
pub use scenario::{BianchiCase, BianchiResult, EdcaSatReport, EdcaSatScenario, bianchi_cases};
pub use types::{
    AcStats, AmpduLimit, Dest, DropReason, MediumError, MediumEvent, NS3_CCA_DELAY, NS3_MSDU_LIFETIME, NS3_NOISE_DBM,
    NS3_PREAMBLE_DETECTION, NS3_PREAMBLE_THRESHOLD_DB, StationConfig, Timing,
};

use std::time::Duration;

/// An access category. Ordered by priority: `Bk < Be < Vi < Vo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub enum Ac {
    #[serde(alias = "bk", alias = "BK")]
    Bk = 0,
    #[serde(alias = "be", alias = "BE")]
    Be = 1,
    #[serde(alias = "vi", alias = "VI")]
    Vi = 2,
    #[serde(alias = "vo", alias = "VO")]
    Vo = 3,
}

impl Ac {
    pub const ALL: [Ac; 4] = [Ac::Bk, Ac::Be, Ac::Vi, Ac::Vo];

    /// 802.11 Table 10-1: 802.1D user priority to access category.
    pub fn from_user_priority(up: u8) -> Ac {
        match up & 7 {
            1 | 2 => Ac::Bk,
            0 | 3 => Ac::Be,
            4 | 5 => Ac::Vi,
            _ => Ac::Vo,
        }
    }

    /// The 802.1D user priority Linux gives a packet with this DSCP (`cfg80211_classify8021d`):
    /// the DSCP's top three bits (RFC 8325 §2.3), except for the service classes RFC 8325 §4
    /// remaps: AF11-13 and CS2 to 0, AF21-23 to 3, CS3 and AF31-33 to 4, VOICE-ADMIT and EF to
    /// 6, CS6 to 7.
    pub fn user_priority_of_dscp(dscp: u8) -> u8 {
        match dscp & 0x3f {
            10 | 12 | 14 | 16 => 0,
            18 | 20 | 22 => 3,
            24 | 26 | 28 | 30 => 4,
            44 | 46 => 6,
            48 => 7,
            d => d >> 3,
        }
    }

    /// The access category of a packet with this DSCP, as Linux and 802.11 map it.
    pub fn from_dscp(dscp: u8) -> Ac {
        Ac::from_user_priority(Ac::user_priority_of_dscp(dscp))
    }

    /// The access category of a packet with this IPv4 TOS / IPv6 traffic-class byte, as Linux
    /// maps it (the DSCP is its top six bits).
    pub fn from_tos(tos: u8) -> Ac {
        Ac::from_dscp(tos >> 2)
    }

    /// The access category ns-3 gives this TOS byte: user priority = TOS >> 5 with no RFC 8325
    /// remapping (ns-3's `QosUtilsMapTidToAc` after its socket priority), so that scenarios
    /// written for ns-3 keep their categories.
    pub fn from_tos_ns3(tos: u8) -> Ac {
        Ac::from_user_priority(tos >> 5)
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// Which edition of 802.11's default EDCA parameter set (Table 9-155) a channel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum EdcaTable {
    /// 802.11-2016: AC_VO TXOP limit 1.504 ms and AC_VI 3.008 ms on OFDM PHYs, as Linux
    /// (mac80211) and hostapd configure them.
    #[default]
    #[serde(rename = "802.11-2016")]
    Ieee2016,
    /// 802.11-2020: AC_VO 2.080 ms and AC_VI 4.096 ms on OFDM PHYs, as ns-3 configures them.
    #[serde(rename = "802.11-2020")]
    Ieee2020,
}

impl EdcaTable {
    /// The parameter set of this edition for `phy`, indexed by [`Ac`].
    pub fn params(self, phy: &Phy) -> [EdcaParams; 4] {
        match self {
            EdcaTable::Ieee2016 => EdcaParams::defaults(phy),
            EdcaTable::Ieee2020 => EdcaParams::defaults_2020(phy),
        }
    }
}

/// Contention parameters of one access category.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EdcaParams {
    pub aifsn: u8,
    pub cw_min: u16,
    pub cw_max: u16,
    /// Zero: one frame per access.
    pub txop: Duration,
}

impl EdcaParams {
    /// The EDCA parameter set of 802.11-2016 Table 9-155 for this PHY, indexed by [`Ac`]
    /// (see [`EdcaTable`] for the 802.11-2020 one).
    pub fn defaults(phy: &Phy) -> [EdcaParams; 4] {
        let (cw_min, cw_max) = if phy.kind == PhyKind::Dsss { (31, 1023) } else { (15, 1023) };
        let (txop_vi, txop_vo) = if phy.kind == PhyKind::Dsss { (6016, 3264) } else { (3008, 1504) };
        let p =
            |aifsn, cw_min, cw_max, txop_us| EdcaParams { aifsn, cw_min, cw_max, txop: Duration::from_micros(txop_us) };
        [
            p(7, cw_min, cw_max, 0),
            p(3, cw_min, cw_max, 0),
            // VI: (aCWmin+1)/2 - 1 .. aCWmin; VO: (aCWmin+1)/4 - 1 .. (aCWmin+1)/2 - 1, which for
            // aCWmin = 2^k - 1 is aCWmin / 2 and aCWmin / 4.
            p(2, cw_min / 2, cw_min, txop_vi),
            p(2, cw_min / 4, cw_min / 2, txop_vo),
        ]
    }

    /// The default EDCA parameter set of 802.11-2020 Table 9-155 for this PHY: the same as
    /// [`EdcaParams::defaults`] except for longer TXOP limits on PHYs other than DSSS (AC_VI
    /// 4.096 ms, AC_VO 2.080 ms instead of 3.008 and 1.504). ns-3 (3.44, `WifiMac::ConfigureDcf`
    /// in `wifi-mac.cc`) uses this table; Linux and hostapd keep the 802.11-2016 limits.
    pub fn defaults_2020(phy: &Phy) -> [EdcaParams; 4] {
        let mut e = Self::defaults(phy);
        if phy.kind != PhyKind::Dsss {
            e[Ac::Vi.index()].txop = Duration::from_micros(4096);
            e[Ac::Vo.index()].txop = Duration::from_micros(2080);
        }
        e
    }

    /// Legacy DCF: every category contends alike with DIFS (AIFSN 2), `aCWmin` and CWmax 1023.
    pub fn dcf(phy: &Phy) -> [EdcaParams; 4] {
        let cw_min = if phy.kind == PhyKind::Dsss { 31 } else { 15 };
        [EdcaParams { aifsn: 2, cw_min, cw_max: 1023, txop: Duration::ZERO }; 4]
    }

    /// Checks `1 <= aifsn`, `cw_min <= cw_max`, both windows of the form `2^k - 1` (802.11
    /// doubles `CW + 1`), and a TXOP limit of at most one second (the largest the EDCA
    /// parameter element can encode is 8.16 ms).
    pub fn validate(&self) -> Result<(), MediumError> {
        let ok = |cw: u16| (u32::from(cw) + 1).is_power_of_two();
        if self.aifsn < 1
            || self.cw_min > self.cw_max
            || !ok(self.cw_min)
            || !ok(self.cw_max)
            || self.txop > Duration::from_secs(1)
        {
            return Err(MediumError::Edca(*self));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_agg;

#[cfg(test)]
mod tests_nic;
