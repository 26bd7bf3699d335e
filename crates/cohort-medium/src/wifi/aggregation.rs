//! Frame aggregation settings: A-MPDU and A-MSDU limits per access category, with the
//! defaults ns-3 3.44 uses, and the `[aggregation]` table scenario files carry.
//!
//! ns-3 3.44's defaults (`src/wifi/model/wifi-mac.cc`, `WifiMac::GetTypeId`):
//! `BE_MaxAmpduSize` and `VI_MaxAmpduSize` 65 535 bytes, `VO_MaxAmpduSize` and
//! `BK_MaxAmpduSize` 0 (no A-MPDU), every `*_MaxAmsduSize` 0 (no A-MSDU), the same on HT and
//! VHT (a VHT PPDU could carry 1 048 575 bytes, but the attribute's default is still 65 535).
//! A block-ack agreement is set up before the first A-MPDU
//! (`HtFrameExchangeManager::NeedSetupBlockAck`: when the category aggregates and more than
//! one packet waits, or always on a VHT station); its window is 64 MPDUs on HT and VHT
//! (`WifiMac::MpduBufferSize`, capped by the standard). An A-MPDU must also fit in the PHY's
//! longest PPDU (`GetPpduMaxTime`: 5.484 ms for HT-mixed and VHT) and, where the category
//! has a TXOP limit, in what is left of the TXOP together with SIFS and the block ack
//! (`QosFrameExchangeManager::IsWithinSizeAndTimeLimits`). Non-HT PHYs (a/b/g) never
//! aggregate.

use super::types::AmpduLimit;
use super::{Ac, Phy, PhyKind};

/// Per-category values, `[bk, be, vi, vo]` by [`Ac`] in code and a table
/// `{ bk = .., be = .., vi = .., vo = .. }` in TOML (missing keys: `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PerAc<T> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bk: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub be: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vi: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vo: Option<T>,
}

impl<T: Copy> PerAc<T> {
    pub fn get(&self, ac: Ac) -> Option<T> {
        match ac {
            Ac::Bk => self.bk,
            Ac::Be => self.be,
            Ac::Vi => self.vi,
            Ac::Vo => self.vo,
        }
    }
}

/// A scenario's aggregation settings. Every field is optional: an empty (or missing) table
/// is the PHY's default, ns-3 3.44's on HT/VHT and none on a/b/g.
///
/// ```toml
/// [aggregation]
/// enabled = true                                   # false: no A-MPDU or A-MSDU anywhere
/// max_ampdu_bytes = { be = 65535, vi = 65535 }     # per category; 0 = no A-MPDU
/// max_amsdu_bytes = { be = 7935 }                  # per category; 0 = no A-MSDU
/// ba_window = 64                                   # MPDUs per A-MPDU (block-ack window)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Aggregation {
    /// `Some(false)` turns every category off; `None`/`Some(true)`: the defaults and overrides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    pub max_ampdu_bytes: PerAc<u32>,
    pub max_amsdu_bytes: PerAc<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ba_window: Option<u16>,
}

/// The block-ack window of HT and VHT agreements (802.11-2016 10.24.7; ns-3's
/// `MpduBufferSize` capped to 64 below HE).
pub const BA_WINDOW: u16 = 64;

/// The largest A-MPDU (bytes) a PHY can carry: HT 65 535 (802.11-2016 9.4.2.56.3), VHT
/// 1 048 575 (9.4.2.158.2); 0 for PHYs without A-MPDU.
pub fn max_ampdu_cap(phy: &Phy) -> u32 {
    match phy.kind {
        PhyKind::Ht => 65_535,
        PhyKind::Vht => 1_048_575,
        _ => 0,
    }
}

/// The largest A-MSDU (bytes): 7935 in an HT PPDU, 11 398 in a VHT one (ns-3's caps).
pub fn max_amsdu_cap(phy: &Phy) -> u32 {
    match phy.kind {
        PhyKind::Ht => 7935,
        PhyKind::Vht => 11_398,
        _ => 0,
    }
}

impl Aggregation {
    /// No aggregation in any category.
    pub const OFF: Aggregation = Aggregation {
        enabled: Some(false),
        max_ampdu_bytes: PerAc { bk: None, be: None, vi: None, vo: None },
        max_amsdu_bytes: PerAc { bk: None, be: None, vi: None, vo: None },
        ba_window: None,
    };

    /// ns-3 3.44's defaults for `phy`, indexed by [`Ac`]: on HT and VHT, 65 535-byte
    /// A-MPDUs of up to 64 MPDUs for AC_BE and AC_VI, none for AC_VO and AC_BK, no A-MSDU;
    /// nothing on other PHYs.
    pub fn ns3_defaults(phy: &Phy) -> [AmpduLimit; 4] {
        Aggregation::default().limits(phy)
    }

    /// The per-category limits these settings give on `phy` (indexed by [`Ac`]). Sizes are
    /// capped to what the PHY carries; a PHY without aggregation gets none whatever is set.
    pub fn limits(&self, phy: &Phy) -> [AmpduLimit; 4] {
        let (ampdu_cap, amsdu_cap) = (max_ampdu_cap(phy), max_amsdu_cap(phy));
        if self.enabled == Some(false) || ampdu_cap == 0 {
            return [AmpduLimit::OFF; 4];
        }
        let window = self.ba_window.unwrap_or(BA_WINDOW).clamp(1, BA_WINDOW);
        Ac::ALL.map(|ac| {
            let default_ampdu = if matches!(ac, Ac::Be | Ac::Vi) { 65_535 } else { 0 };
            let ampdu = self.max_ampdu_bytes.get(ac).unwrap_or(default_ampdu).min(ampdu_cap);
            let amsdu = self.max_amsdu_bytes.get(ac).unwrap_or(0).min(amsdu_cap);
            AmpduLimit {
                max_frames: if ampdu == 0 { 1 } else { window },
                max_bytes: if ampdu == 0 { AmpduLimit::OFF.max_bytes } else { ampdu },
                max_amsdu_bytes: amsdu,
            }
        })
    }
}
