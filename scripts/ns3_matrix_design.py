#!/usr/bin/env python3
"""Pairwise covering design for the ns-3 matrix (scripts/ns3_matrix.sh).

Factors and levels:
  phy      a (54 Mbit/s), g (ERP 54), n0/n4/n7 (HT MCS 0/4/7, 20 MHz, 5 GHz), ac (VHT MCS 8, 20 MHz)
  n        2, 5, 10, 20 saturated senders
  mix      be (all AC_BE), vo2 (every 2nd AC_VO), vo4 (every 4th AC_VO), vibk (one AC_VI, rest AC_BK)
  payload  200, 1472 (UDP payload bytes)
  agg      default (the PHY's default aggregation: ns-3's), off

A greedy generator: each new cell is the candidate (of all 384 combinations) that covers the
most pairs of factor levels not yet covered (ties: the one whose pairs were covered least
often, then the first in a fixed order). Once every pair is covered it keeps going, now
counting pairs covered fewer than twice, until CELLS cells exist. Deterministic: no random
numbers. Writes JSON to stdout: a list of cells {id, phy, n, mix, payload, agg}.

usage: scripts/ns3_matrix_design.py [CELLS]   (default 48)
"""
import itertools, json, sys

FACTORS = [
    ("phy", ["a", "g", "n0", "n4", "n7", "ac"]),
    ("n", [2, 5, 10, 20]),
    ("mix", ["be", "vo2", "vo4", "vibk"]),
    ("payload", [200, 1472]),
    ("agg", ["default", "off"]),
]


def pairs(cell):
    return [((i, cell[i]), (j, cell[j])) for i, j in itertools.combinations(range(len(cell)), 2)]


def design(cells):
    cands = list(itertools.product(*[lv for _, lv in FACTORS]))
    count = {}
    for c in cands:
        for p in pairs(c):
            count.setdefault(p, 0)
    chosen = []
    target = 1
    while len(chosen) < cells:
        if all(v >= target for v in count.values()):
            target += 1
        best, best_key = None, None
        for c in cands:
            if c in chosen:
                continue
            ps = pairs(c)
            gain = sum(1 for p in ps if count[p] < target)
            key = (gain, -sum(count[p] for p in ps))
            if best_key is None or key > best_key:
                best, best_key = c, key
        chosen.append(best)
        for p in pairs(best):
            count[p] += 1
    assert all(v >= 1 for v in count.values()), "not a covering design"
    return chosen


def main():
    cells = int(sys.argv[1]) if len(sys.argv) > 1 else 48
    out = []
    for k, c in enumerate(design(cells)):
        d = {name: v for (name, _), v in zip(FACTORS, c)}
        out.append({"id": k, **d})
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
