"""Render a ``cohort bench`` JSON report as a PNG chart.

Usage: ``python -m cohort.plot KIND REPORT.json OUT.png`` with KIND one of ``coding`` (kernel
throughput and decoder comparison), ``lrt`` (delay CDFs of LRT, the block scheme and
selective-repeat ARQ), ``lrt-grid`` (LRT's p99 and overhead against both over the link grid),
``fidelity`` (idle and under load), ``crosscheck`` (one Wi-Fi scenario's per-AC throughput in
the simulator and on the testbed), ``transport``, ``group`` (GCBRR against its baselines), ``coorp`` (reaction times
of every seed-000 system and the scalability sweep) or ``coorp-testbed`` (the testbed half's
reaction-time CDFs) or ``coorp-gate`` (how fast the bulk gate
holds and releases a foreign upload) or ``multipath`` (goodput per scenario and system, short
flows, regret) or ``beams`` (greedy against the optimum, time per round, one-to-many
against one-to-one, allocation-aware multipath end to end). The Rust
CLI calls this for ``--out``. Exit status 2 means bad arguments or a report of the wrong shape.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


class ReportError(ValueError):
    """The report lacks a figure the chart needs."""


def _need(report: dict[str, Any], *keys: str) -> None:
    missing = [k for k in keys if k not in report]
    if missing:
        raise ReportError(f"report lacks {', '.join(missing)}")


def _cdf(ax: Any, sorted_values: list[float], **style: Any) -> None:
    """Draws the empirical CDF of already sorted values; nothing for an empty list."""
    n = len(sorted_values)
    if n:
        ax.plot(sorted_values, [(i + 1) / n for i in range(n)], **style)


def plot_coding(report: dict[str, Any], out: Path) -> None:
    """Bars: axpy and fused 64-source combine per kernel; decoders side by side."""
    _need(report, "kernels", "decode_gbps_w64", "rlnc_crate_decode_gbps_k64", "block_decode_gbps_k64")
    kernels = report["kernels"]
    names = sorted(kernels, key=lambda k: kernels[k]["axpy_gbps"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    xs = range(len(names))
    ax1.bar([x - 0.2 for x in xs], [kernels[n]["axpy_gbps"] for n in names], 0.4, label="axpy")
    ax1.bar([x + 0.2 for x in xs], [kernels[n]["combine64_gbps"] for n in names], 0.4, label="combine x64")
    ax1.set_xticks(list(xs), names, rotation=20)
    ax1.set_ylabel("Gbit/s")
    ax1.set_title("GF(2^8) kernels, 1200-byte symbols")
    ax1.legend()
    labels = ["ours, stream w64\n10% loss", "ours, 64 repairs\n(full elimination)", "rlnc crate\nk=64"]
    values = [report["decode_gbps_w64"], report["block_decode_gbps_k64"], report["rlnc_crate_decode_gbps_k64"]]
    ax2.bar(labels, values, color=["tab:green", "tab:olive", "tab:gray"])
    ax2.set_yscale("log")
    ax2.set_ylabel("decode Gbit/s (log)")
    ax2.set_title("Decoders on the same data")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def _loss_label(loss: Any) -> str:
    if isinstance(loss, dict) and "Iid" in loss:
        return f"iid loss {loss['Iid']['p']:.0%}"
    if isinstance(loss, dict) and "GilbertElliott" in loss:
        g = loss["GilbertElliott"]
        return f"Gilbert-Elliott loss (p_gb {g['p_gb']}, p_bg {g['p_bg']}, bad {g['loss_bad']})"
    return f"loss {loss}"


def plot_lrt(report: dict[str, Any], out: Path) -> None:
    """Delay CDFs of LRT, the block scheme and selective-repeat ARQ."""
    _need(report, "cdf", "params")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, color in (("lrt", "tab:green"), ("block", "tab:red"), ("arq", "tab:blue")):
        _cdf(ax, report["cdf"].get(name) or [], label=name, color=color)
    p = report["params"]
    ax.axvline(p["owd_ms"], color="gray", linestyle=":", label="one-way delay")
    ax.set_xlabel("in-order per-message delay (ms)")
    ax.set_ylabel("CDF")
    ax.set_title(f"{p['size']} B every {p['interval_ms']} ms, {_loss_label(p['loss'])}, one-way {p['owd_ms']} ms")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_fidelity(report: dict[str, Any], out: Path) -> None:
    """CDF of the one-way delay error the testbed emulator adds, per emulator: the first idle
    repetition solid, the first one under background load (when measured) dashed."""
    _need(report, "cohort", "params")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    loaded = report.get("first_loaded") or {}
    left, right = 0.0, 0.0
    for name, color in (("cohort", "tab:green"), ("rattan", "tab:blue")):
        for figs, when, style in ((report.get(name) or {}, "idle", "-"), (loaded.get(name) or {}, "loaded", "--")):
            errs = figs.get("owd_err_ms_cdf") or []
            if not errs:
                continue
            # The axis ends past every series' 99.5th percentile: the far tail would squash the rest.
            right = max(right, errs[min(len(errs) - 1, int(len(errs) * 0.995))])
            left = min(left, errs[0])
            label = (
                f"{name} {when}: mean {figs['owd_err_ms_mean']:.3f} ms, p99-p50 {figs['added_jitter_p99_ms']:.3f} ms"
            )
            _cdf(ax, errs, label=label, color=color, linestyle=style)
    if right > 0.0:
        ax.set_xlim(left - 0.05 * right, right * 1.5)
    p = report["params"]
    ax.set_xlabel("measured - configured one-way delay (ms)")
    ax.set_ylabel("CDF")
    ax.set_title(f"one-way {p['owd_ms']} ms, {p['load_mbps']} Mbit/s of probes, loss {p['loss']}")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_crosscheck(report: dict[str, Any], out: Path) -> None:
    """One panel per offered load: per-AC throughput of every engine (simulator, the testbed's
    fabric in virtual time, the testbed) with 95% intervals."""
    _need(report, "loads")
    loads = report["loads"]
    fig, axes = plt.subplots(1, len(loads), figsize=(5.5 * len(loads), 4.2), squeeze=False)
    colors = {"sim": "tab:blue", "model": "tab:olive", "testbed": "tab:green"}
    for ax, load in zip(axes[0], loads, strict=False):
        engines = load["engines"]
        acs = sorted({ac for e in engines.values() for ac in e})
        width = 0.8 / max(len(engines), 1)
        for k, (engine, per_ac) in enumerate(sorted(engines.items())):
            xs = [i + k * width for i in range(len(acs))]
            ys = [per_ac.get(ac, {}).get("throughput_mbps", 0.0) for ac in acs]
            err = [per_ac.get(ac, {}).get("throughput_ci95", 0.0) for ac in acs]
            ax.bar(xs, ys, width, yerr=err, label=engine, color=colors.get(engine), capsize=3)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(acs))], [ac.upper() for ac in acs])
        ax.set_ylabel("UDP goodput (Mbit/s)")
        ax.set_title(f"offered {load['offered_mbps']} Mbit/s (load {load['load']})")
        ax.legend()
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


COORP_COLORS = {
    "no_bh": "black",
    "edca": "tab:red",
    "schedwifi": "tab:blue",
    "schedwifi_fixed": "tab:gray",
    "coorp": "tab:green",
    "coorp_card": "darkgreen",
    "coorp_global": "tab:olive",
    "coorp_local": "tab:cyan",
    "coorp_local_fixed": "tab:brown",
    "cohort_bulk": "tab:purple",
    "cohort_bulk_local": "tab:pink",
}


def plot_coorp(report: dict[str, Any], out: Path) -> None:
    """One panel per NIC profile: every system's reaction-time CDF (control marked) with the
    33 ms boundary; the last panel: the scalability sweep against seed 000's model."""
    _need(report, "profiles", "scalability")
    profiles = report["profiles"]
    fig, axes = plt.subplots(1, len(profiles) + 1, figsize=(6 * (len(profiles) + 1), 4.5), squeeze=False)
    for ax, (name, prof) in zip(axes[0], profiles.items(), strict=False):
        for system, figs in prof["sim"].items():
            label = f"{system}: {figs['violation_share'] * 100:.1f}% over, util {figs['bh_utilization']:.2f}"
            _cdf(ax, figs["reaction_ms"]["cdf"], label=label, color=COORP_COLORS.get(system))
        ax.axvline(33.0, color="gray", linestyle="--", linewidth=1)
        ax.set_xlabel("reaction time (ms)")
        ax.set_ylabel("CDF")
        ax.set_title(f"NIC profile {name}, control marked")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    ax = axes[0][-1]
    sweep = report["scalability"]
    robots = [p["robots"] for p in sweep]
    ax.plot(robots, [p["violation_share"] * 100 for p in sweep], "o-", color="tab:green", label="simulated")
    ax.plot(robots, [p["model_violation_share"] * 100 for p in sweep], "o:", color="gray", label="Eqs. 1-2")
    ax.axhline(5.0, color="tab:red", linestyle="--", linewidth=1)
    bound = report.get("max_robots_by_airtime")
    if bound is not None:
        ax.axvline(bound, color="black", linestyle="-.", linewidth=1, label=f"802.11 airtime bound ({bound} robots)")
    ax.set_xlabel("robots")
    ax.set_ylabel("loops over 33 ms (%)")
    ax.set_title("COORP scalability")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_coorp_testbed(report: dict[str, Any], out: Path) -> None:
    """The testbed half of ``bench coorp``: one panel per NIC profile with every system's
    reaction-time CDF on real kernel stacks (control marked), and the 33 ms boundary."""
    _need(report, "profiles", "testbed_channel")
    profiles = {k: v for k, v in report["profiles"].items() if "testbed" in v}
    if not profiles:
        raise KeyError("profiles.<p>.testbed")
    ch = report["testbed_channel"]
    fig, axes = plt.subplots(1, len(profiles), figsize=(6 * len(profiles), 4.5), squeeze=False)
    for ax, (name, prof) in zip(axes[0], profiles.items(), strict=False):
        for system, figs in prof["testbed"].items():
            util = figs.get("bh_utilization")
            util_s = f", util {util:.2f}" if isinstance(util, (int, float)) else ""
            label = f"{system}: {figs['violation_share'] * 100:.1f}% over{util_s} ({figs['runs']} runs)"
            _cdf(ax, figs["reaction_ms_cdf"], label=label, color=COORP_COLORS.get(system))
        ax.axvline(33.0, color="gray", linestyle="--", linewidth=1)
        ax.set_xlabel("reaction time (ms)")
        ax.set_ylabel("CDF")
        ax.set_title(f"testbed 802.11{ch['phy']} {ch['data_mbps']} Mbit/s, NIC {name}, control marked")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_coorp_gate(report: dict[str, Any], out: Path) -> None:
    """Left: the gate's reaction times (hold and release on the wire, the netlink round trip).
    Right: the EF probes' delay through the gate, held and open."""
    _need(report, "pause_ms", "resume_ms", "netlink_us", "probe_owd_ms_held", "probe_owd_ms_open", "params")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for key, label, scale, color in (
        ("pause_ms", "hold decision -> last bulk frame", 1.0, "tab:red"),
        ("resume_ms", "release decision -> first bulk frame", 1.0, "tab:green"),
        ("netlink_us", "netlink round trip", 1e-3, "tab:blue"),
    ):
        d = report[key]
        _cdf(left, [v * scale for v in d["cdf"]], label=f"{label} (p99 {d['p99'] * scale:.3f} ms)", color=color)
    left.set_xlabel("ms")
    left.set_ylabel("CDF")
    left.set_title(f"{report['pause_ms']['n']} hold/release cycles")
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    for key, label, color in (("probe_owd_ms_held", "held", "tab:red"), ("probe_owd_ms_open", "open", "tab:green")):
        d = report[key]
        _cdf(right, d["cdf"], label=f"EF probes, gate {label} (p99 {d['p99']:.3f} ms)", color=color)
    p = report["params"]
    right.set_xlabel("send to device (ms)")
    right.set_title(f"{p['link_mbps']} Mbit/s, {p['hold_ms']} ms held every {p['period_ms']:.1f} ms")
    right.legend(fontsize=8)
    right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


TRANSPORT_COLORS = {
    "lrt": "tab:green",
    "tcp_cubic": "tab:red",
    "tcp_bbr": "tab:orange",
    "kcp": "tab:purple",
    "quic": "tab:blue",
    "quic_bbr": "tab:cyan",
}


def plot_transport(report: dict[str, Any], out: Path) -> None:
    """One panel per (loss, workload) case: the in-order delay CDF of every transport."""
    _need(report, "cases", "params")
    cases = report["cases"]
    cols = 2
    rows = max(1, (len(cases) + cols - 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(11, 3.2 * rows), squeeze=False)
    owd = report["params"]["owd_ms"]
    for ax, case in zip(axes.flat, cases, strict=False):
        for name, color in TRANSPORT_COLORS.items():
            figs = case.get(name)
            if not isinstance(figs, dict) or not figs.get("cdf_ms"):
                continue
            mark = "" if figs.get("sustained") else " (not sustained)"
            _cdf(ax, figs["cdf_ms"], label=f"{name}{mark}", color=color)
        ax.axvline(owd, color="gray", linestyle=":")
        ax.set_xscale("log")
        fades = f" in {case['burst_ms']:g} ms fades" if case.get("burst_ms") else ""
        ax.set_title(f"{case['workload']}, loss {case['loss']:.0%}{fades}")
        ax.set_xlabel("in-order delay (ms)")
        ax.set_ylabel("CDF")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(cases) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


GROUP_COLORS = {
    "gcbrr": "tab:red",
    "tcp_seq": "tab:blue",
    "tcp_par": "tab:cyan",
    "rup_seq": "tab:green",
    "rup_par": "tab:olive",
    "uup_par": "tab:gray",
    "zenoh": "tab:purple",
}


def _bars(ax: Any, sizes: list[dict[str, Any]], part: str, key: str) -> None:
    """Grouped bars: one group per size, one bar per system, with the 95% interval of the
    runs' mean (``KEY_ci95``) where the runs differed."""
    systems = [s for s in GROUP_COLORS if any(s in size[part] for size in sizes)]
    width = 0.8 / max(1, len(systems))
    for i, name in enumerate(systems):
        xs, ys, errs = [], [], []
        for j, size in enumerate(sizes):
            figures = size[part].get(name, {})
            v = figures.get(key)
            if isinstance(v, (int, float)):
                xs.append(j + (i - (len(systems) - 1) / 2) * width)
                ys.append(v)
                errs.append(figures.get(f"{key}_ci95", 0.0))
        ax.bar(xs, ys, width=width, yerr=errs, capsize=2, label=name, color=GROUP_COLORS[name])
    ax.set_xticks(range(len(sizes)), [f"{size['nodes']} nodes" for size in sizes])
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)


def _r3(x: Any) -> Any:
    """A figure rounded to 3 decimals for a title; anything else (missing: None) as it is."""
    return round(x, 3) if isinstance(x, float) else x


def plot_group(report: dict[str, Any], out: Path) -> None:
    """Request-reply and polling throughput per size, latency CDFs at the largest size,
    join delays per initial size."""
    _need(report, "sizes", "join", "summary")
    sizes = report["sizes"]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    _bars(axes[0][0], sizes, "request_reply", "throughput_per_s")
    axes[0][0].set_title("1-to-N request-reply throughput")
    axes[0][0].set_ylabel("interactions / s")
    _bars(axes[0][1], sizes, "polling", "throughput_msgs_per_s")
    axes[0][1].set_title("N-to-1 message throughput")
    axes[0][1].set_ylabel("messages / s")
    ax = axes[1][0]
    if sizes:
        big = sizes[-1]
        for name, color in GROUP_COLORS.items():
            cdf = big["request_reply"].get(name, {}).get("latency", {}).get("cdf_ms") or []
            _cdf(ax, cdf, label=name, color=color)
        ax.set_title(f"request-reply latency, {big['nodes']} nodes")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("CDF")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax = axes[1][1]
    joins = report["join"]
    for name, color in (("gcbrr", "tab:red"), ("tcp", "tab:blue"), ("tcp_same_window", "tab:cyan")):
        xs = [j["initial"] for j in joins if "join_delay" in j.get(name, {})]
        ys = [j[name]["join_delay"].get("mean_ms") for j in joins if "join_delay" in j.get(name, {})]
        ax.plot(xs, ys, marker="o", label=f"{name} join delay", color=color)
        us = [j[name].get("update_delay_ms") for j in joins if "join_delay" in j.get(name, {})]
        ax.plot(xs, us, marker="s", linestyle="--", label=f"{name} group update", color=color)
    ax.set_title("joining up to 12 nodes in one poll")
    ax.set_xlabel("initial group size")
    ax.set_ylabel("ms")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    s = report["summary"]
    zenoh = s.get("throughput_ratio_vs_zenoh")
    zenoh = "no Zenoh figure" if zenoh is None else f"x{_r3(zenoh)} Zenoh"
    fig.suptitle(
        f"GCBRR at {s.get('nodes')} nodes: throughput x{_r3(s.get('throughput_ratio_vs_tcp'))} TCP-SEQ "
        f"(floors allow x{_r3(s.get('floor_ratio_vs_tcp'))}), x{_r3(s.get('throughput_ratio_vs_rup'))} RUP, "
        f"{zenoh}; airtime efficiency {_r3(s.get('airtime_efficiency'))}\n"
        f"with {100 * report.get('params', {}).get('fer', 0):g}% frame errors "
        f"x{_r3(s.get('throughput_ratio_vs_tcp_fer'))} TCP-SEQ "
        f"(floors allow x{_r3(s.get('floor_ratio_vs_tcp_fer'))}), efficiency {_r3(s.get('airtime_efficiency_fer'))}; "
        f"slowest fail-over {_r3(s.get('failover_ms'))} ms",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


MP_SYSTEMS = ("cohort", "minrtt", "roundrobin", "path0", "path1")
MP_COLORS = ("tab:red", "tab:blue", "tab:cyan", "tab:gray", "silver")


MP_TESTBED_SYSTEMS = ("cohort", "mptcp", "path0", "path1")
MP_TESTBED_COLORS = ("tab:red", "tab:green", "tab:gray", "silver")
MP_SCENARIOS = ("static", "loss", "handoff", "mobility")


def _goodput_bars(ax: Any, report: dict[str, Any], systems: tuple[str, ...], colors: tuple[str, ...]) -> None:
    """Goodput with 95% intervals, one group of bars per scenario."""
    width = 0.8 / len(systems)
    for k, (name, color) in enumerate(zip(systems, colors, strict=True)):
        xs = [i + k * width for i in range(len(MP_SCENARIOS))]
        ys = [report[sc][name]["goodput_mbps"] for sc in MP_SCENARIOS]
        err = [report[sc][name]["goodput_ci95"] for sc in MP_SCENARIOS]
        ax.bar(xs, ys, width, yerr=err, label=name, color=color, capsize=2)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(MP_SCENARIOS))], MP_SCENARIOS)
    ax.set_ylabel("goodput (Mbit/s)")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)


def plot_multipath(report: dict[str, Any], out: Path) -> None:
    """Goodput with 95% intervals per scenario and system (simulator, and the testbed against
    kernel MPTCP when the report has it); short-flow completion; regret."""
    _need(report, "summary")
    sim = "static" in report
    if sim:
        _need(report, *MP_SCENARIOS, "short", "federated")
    testbed = report.get("testbed")
    if not sim and testbed is None:
        raise ReportError("report lacks both the simulator's scenarios and the testbed's")
    tb_mp = testbed is not None and "static" in testbed
    tb_fed = testbed is not None and "federated" in testbed
    if testbed is not None and not (tb_mp or tb_fed):
        raise ReportError("the testbed half lacks both the MPTCP scenarios and the federated start")
    panels = (3 if sim else 0) + int(tb_mp) + int(tb_fed)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4.5), squeeze=False)
    axes = list(axes[0])
    titles = []
    if tb_fed:
        assert testbed is not None
        f = testbed["federated"]
        _need(f, "regret_cold", "regret_federated", "regret_cold_runs", "regret_federated_runs")
        ax = axes.pop()
        for x, (name, color) in enumerate((("cold", "tab:gray"), ("federated", "tab:red"))):
            m = f[f"regret_{name}"]
            ax.bar([x], [m["mean"]], yerr=[m["ci95"]], color=color, capsize=3, alpha=0.7)
            runs = f[f"regret_{name}_runs"]
            ax.plot([x] * len(runs), runs, "k.", markersize=5)
        ax.set_xticks([0, 1], ["cold start", "from the team's view"])
        ax.set_ylabel(f"regret, first {f['rounds']} rounds")
        ax.set_title(f"testbed: {f['paths']} radios, super-arms of {f['super_arm']} ({f['runs']} runs each)")
        ax.grid(axis="y", alpha=0.3)
        titles.append(f"testbed federated start: regret x{f['federated_regret_ratio']} of a cold start's")
    if tb_mp:
        assert testbed is not None
        _need(testbed, *MP_SCENARIOS, "summary")
        ax = axes.pop()
        _goodput_bars(ax, testbed, MP_TESTBED_SYSTEMS, MP_TESTBED_COLORS)
        ax.set_title(f"testbed, real kernels ({testbed['static']['cohort']['runs']} runs each)")
        t = testbed["summary"]
        titles.append(
            f"testbed: x{t['static_goodput_ratio_vs_mptcp']} / x{t['loss_goodput_ratio_vs_mptcp']} / "
            f"x{t['mobility_goodput_ratio_vs_mptcp']} kernel MPTCP (static / loss / mobility)"
        )
    if sim:
        _goodput_bars(axes[0], report, MP_SYSTEMS, MP_COLORS)
        axes[0].set_title(f"simulator, two radios ({report['static']['cohort']['runs']} runs each)")
        ax = axes[1]
        comp = report["short"]["completion_ms"]
        names = list(comp)
        ax.bar(
            names, [comp[n]["mean"] for n in names], yerr=[comp[n]["ci95"] for n in names], capsize=3, color="tab:red"
        )
        ax.set_ylabel("completion (ms)")
        ax.set_title(f"{report['short']['flows']} flows of {report['short']['flow_bytes']} B, 20% loss on path0")
        ax.grid(axis="y", alpha=0.3)
        ax = axes[2]
        f = report["federated"]
        ax.bar(["cold start", "federated"], [f["regret_cold"], f["regret_federated"]], color=["tab:gray", "tab:red"])
        ax.set_ylabel(f"regret, first {f['rounds']} rounds")
        ax.set_title(f"{f['paths']} paths, super-arms of {f['super_arm']} ({f['runs']} runs)")
        ax.grid(axis="y", alpha=0.3)
        s = report["summary"]
        titles.insert(
            0,
            f"simulated: {s['static_share_of_sum']} of the paths' sum, "
            f"x{s['loss_goodput_ratio_vs_minrtt']} min-RTT with 10% loss, stall {s['max_stall_ms']} ms at handoffs",
        )
    fig.suptitle("multipath LRT; " + "; ".join(titles), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_lrt_grid(report: dict[str, Any], out: Path) -> None:
    """Two heat maps over the grid: LRT's p99 over the best other scheme's, and LRT's wire
    overhead minus ARQ's; one row per (one-way delay, loss), one column per (interval, size)."""
    _need(report, "grid", "runs_pooled_per_point")
    grid = report["grid"]
    rows = list(dict.fromkeys((p["owd_ms"], p["loss_label"]) for p in grid))
    cols = list(dict.fromkeys((p["interval_ms"], p["size"]) for p in grid))
    cell = {(p["owd_ms"], p["loss_label"], p["interval_ms"], p["size"]): p for p in grid}
    nan = float("nan")

    def matrix(f: Callable[[dict[str, Any]], float]) -> list[list[float]]:
        return [[f(cell[r + c]) if r + c in cell else nan for c in cols] for r in rows]

    def ratio(p: dict[str, Any]) -> float:
        best = min(p["block"]["p99_ms"], p["arq"]["p99_ms"])
        return float(p["lrt"]["p99_ms"] / best) if best > 0 else nan

    panels = (
        ("LRT p99 / best other p99", matrix(ratio), "RdYlGn_r", (0.0, 2.0)),
        ("LRT overhead - ARQ overhead", matrix(lambda p: p["lrt_overhead_minus_arq"]), "RdYlGn_r", (-0.5, 1.0)),
    )
    fig, axes = plt.subplots(1, 2, figsize=(13, 0.32 * len(rows) + 2.5))
    for ax, (title, m, cmap, (lo, hi)) in zip(axes, panels, strict=True):
        im = ax.imshow(m, cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
        for i, row in enumerate(m):
            for j, v in enumerate(row):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(cols)), [f"{iv:g} ms, {sz} B" for iv, sz in cols], fontsize=8)
        ax.set_yticks(range(len(rows)), [f"{owd:g} ms, {loss}" for owd, loss in rows], fontsize=7)
        ax.set_title(title)
        fig.colorbar(im, ax=ax, shrink=0.6)
    fig.suptitle(
        f"LRT vs block RLNC and SR-ARQ: p99 lowest at {report['lrt_lowest_p99_points']} of "
        f"{report['points']} points ({report['runs_pooled_per_point']} runs pooled per point)"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_beams(report: dict[str, Any], out: Path) -> None:
    """Greedy/optimum CDF; time per round against size; one-to-many gains; end to end."""
    _need(report, "instances", "timing", "end_to_end", "summary")
    inst, timing, e2e, s = report["instances"], report["timing"], report["end_to_end"], report["summary"]
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.5))
    ax = axes[0]
    _cdf(ax, inst["ratios_sorted"], color="tab:red")
    ax.set_xlabel("greedy / optimum (sum throughput)")
    ax.set_ylabel("CDF of instances")
    ax.set_title(f"Algorithm 1 vs the exact optimum ({inst['instances']} instances)")
    ax.grid(alpha=0.3)
    ax = axes[1]
    for name, color in (("devices", "tab:blue"), ("chains", "tab:red"), ("beams", "tab:green")):
        pts = timing[name]
        ax.loglog([p[name] for p in pts], [p["round_us"] for p in pts], "o-", color=color, label=f"vary {name}")
        lit = [p for p in pts if p.get("literal_round_us") is not None]
        if lit:
            ax.loglog([p[name] for p in lit], [p["literal_round_us"] for p in lit], "x--", color=color, alpha=0.6)
    ax.axhline(50.0, color="gray", linestyle=":", label="50 µs goal")
    ax.set_xlabel("size of the varied dimension (others 16 devices, 8 chains, 64 beams)")
    ax.set_ylabel("µs per allocation round (dashed: literal Alg. 1)")
    ax.set_title(f"time per round: {timing['round_us_16x8x64']} µs at 16x8x64")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    ax = axes[2]
    keys = (
        ("sum, greedy", "one_to_many_over_one_to_one_greedy"),
        ("sum, optimum", "one_to_many_over_one_to_one_optimum"),
        ("bits/J, greedy", "bits_per_joule_many_over_one"),
    )
    ax.bar(
        [k for k, _ in keys],
        [inst[v]["mean"] for _, v in keys],
        yerr=[inst[v]["ci95"] for _, v in keys],
        capsize=3,
        color=["tab:red", "tab:orange", "tab:purple"],
    )
    ax.axhline(1.0, color="gray", linestyle=":")
    ax.set_ylabel("one-to-many / one-to-one (HEKATON)")
    ax.set_title(f"below one-to-one in {inst['one_to_many_below_one_to_one']} instances")
    ax.grid(axis="y", alpha=0.3)
    ax = axes[3]
    names = ("aware", "equal", "measured")
    ax.bar(
        [n + "\ngoodput" for n in names],
        [e2e[n]["goodput_mbps"] for n in names],
        yerr=[e2e[n]["goodput_ci95"] for n in names],
        capsize=3,
        color="tab:blue",
    )
    ax.set_ylabel("goodput (Mbit/s)")
    tw = ax.twinx()
    tw.bar(
        [n + "\np99" for n in names],
        [e2e[n]["delay_p99_ms"] for n in names],
        yerr=[e2e[n]["delay_p99_ci95"] for n in names],
        capsize=3,
        color="tab:red",
    )
    tw.set_ylabel("p99 message delay (ms)")
    ax.set_title(f"robot 0 past two multi-chain APs ({len(e2e['aware']['goodput_runs'])} runs)")
    fig.suptitle(
        f"beams (seed 001 Alg. 1): greedy/optimum mean {s['greedy_over_optimum_mean']}, "
        f"worst {s['greedy_over_optimum_min']}; one-to-many x{s['one_to_many_gain_mean']}; "
        f"p99 aware/equal {s['p99_delay_ratio_aware_over_equal']}"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


BRIDGE_COLORS = {"zenoh": "tab:blue", "bridge": "tab:red", "bridge_sample_priority": "tab:orange"}


def plot_bridge(report: dict[str, Any], out: Path) -> None:
    """The ROS 2 topic's delay CDF per system (pooled runs) and the get rate with its interval."""
    _need(report, "systems", "summary", "params")
    systems = report["systems"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    ax = axes[0]
    for name, color in BRIDGE_COLORS.items():
        cdf = systems.get(name, {}).get("topic", {}).get("delay", {}).get("cdf_ms") or []
        _cdf(ax, cdf, label=name, color=color)
    ax.set_xscale("log")
    ax.set_xlabel("one-way delay (ms)")
    ax.set_ylabel("CDF")
    ax.set_title(f"{report['params'].get('rate_hz')} Hz ROS 2 topic beside a TCP upload")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax = axes[1]
    names = [n for n in BRIDGE_COLORS if "get" in systems.get(n, {})]
    ys = [systems[n]["get"].get("rate_per_s", 0.0) for n in names]
    err = [systems[n]["get"].get("rate_per_s_ci95", 0.0) for n in names]
    ax.bar(names, ys, yerr=err, color=[BRIDGE_COLORS[n] for n in names], capsize=3)
    ax.set_ylabel("complete gets / s")
    ax.set_title("get to every follower")
    ax.grid(axis="y", alpha=0.3)
    ratios = "; ".join(
        f"{n}: p99 x{v.get('topic_p99_vs_zenoh', {}).get('mean')}, get x{v.get('get_rate_vs_zenoh', {}).get('mean')}"
        for n, v in report["summary"].items()
    )
    fig.suptitle(f"against Zenoh direct: {ratios}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


PLOTS: dict[str, Callable[[dict[str, Any], Path], None]] = {
    "coding": plot_coding,
    "lrt": plot_lrt,
    "lrt-grid": plot_lrt_grid,
    "fidelity": plot_fidelity,
    "crosscheck": plot_crosscheck,
    "transport": plot_transport,
    "group": plot_group,
    "coorp": plot_coorp,
    "coorp-gate": plot_coorp_gate,
    "coorp-testbed": plot_coorp_testbed,
    "multipath": plot_multipath,
    "beams": plot_beams,
    "bridge": plot_bridge,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] not in PLOTS:
        print(f"usage: python -m cohort.plot {{{','.join(PLOTS)}}} REPORT.json OUT.png", file=sys.stderr)
        return 2
    kind, src, dst = args
    try:
        report = json.loads(Path(src).read_text())
        PLOTS[kind](report, Path(dst))
    except (OSError, json.JSONDecodeError, ReportError, KeyError, TypeError) as e:
        print(f"cohort.plot: {src}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
