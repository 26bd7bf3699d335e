#!/usr/bin/env python3
"""Prints the SINR (dB) at which ns-3 3.44's default error model (TableBasedErrorRateModel)
receives half of the MPDUs of each size, per modulation and coding: the table of
crates/cohort-medium/src/wifi/per.rs. Needs the PyPI package ns3==3.44.post0.

  python3 scripts/ns3_per_thresholds.py
"""
from ns import ns

SIZES = [14, 64, 256, 1024, 4096]
model = ns.TableBasedErrorRateModel()


def success(mode, preamble, sinr_db, nbytes):
    tx = ns.WifiTxVector()
    tx.SetMode(mode)
    tx.SetPreambleType(preamble)
    tx.SetChannelWidth(20)
    tx.SetNss(1)
    return model.GetChunkSuccessRate(mode, tx, 10 ** (sinr_db / 10), nbytes * 8, 1, ns.WIFI_PPDU_FIELD_DATA, 65535)


def half_point(mode, preamble, nbytes):
    lo, hi = -10.0, 40.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if success(mode, preamble, mid, nbytes) < 0.5:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


ROWS = [("BPSK 1/2", ns.HtPhy.GetHtMcs(0), ns.WIFI_PREAMBLE_HT_MF), ("QPSK 1/2", ns.HtPhy.GetHtMcs(1), ns.WIFI_PREAMBLE_HT_MF),
        ("QPSK 3/4", ns.HtPhy.GetHtMcs(2), ns.WIFI_PREAMBLE_HT_MF), ("16-QAM 1/2", ns.HtPhy.GetHtMcs(3), ns.WIFI_PREAMBLE_HT_MF),
        ("16-QAM 3/4", ns.HtPhy.GetHtMcs(4), ns.WIFI_PREAMBLE_HT_MF), ("64-QAM 2/3", ns.HtPhy.GetHtMcs(5), ns.WIFI_PREAMBLE_HT_MF),
        ("64-QAM 3/4", ns.HtPhy.GetHtMcs(6), ns.WIFI_PREAMBLE_HT_MF), ("64-QAM 5/6", ns.HtPhy.GetHtMcs(7), ns.WIFI_PREAMBLE_HT_MF),
        ("256-QAM 3/4", ns.VhtPhy.GetVhtMcs8(), ns.WIFI_PREAMBLE_VHT_SU), ("256-QAM 5/6", ns.VhtPhy.GetVhtMcs9(), ns.WIFI_PREAMBLE_VHT_SU)]
for name, mode, preamble in ROWS:
    print(f"{name:12s}", [round(half_point(mode, preamble, n), 2) for n in SIZES])
