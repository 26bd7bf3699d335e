#!/usr/bin/env python3
"""One ns-3 3.44 run of one cell of the saturation matrix (scripts/ns3_matrix.sh drives it).

The scenario is ../shared/reference/ns3/edca_sat.py generalised over the matrix's factors:
N saturated UDP senders (nodes 1..N) to node 0, ad-hoc QoS MAC, ns-3's defaults except the
PHY's data/control modes, the ARP caches filled before the start (as scripts/ns3_edca_sat.sh
does: a collided ARP request would silence a sender for a second), and station i at
(i mod 2, 0.1 i) m. Each access category has its own UdpServer port, so the receiver counts
per category. Counting window: [1 + WARM, 1 + WARM + SECONDS) s (the senders start at
1 + 0.001 i s).

  phy: a (OfdmRate54Mbps, control OfdmRate24Mbps), g (ErpOfdmRate54Mbps, ErpOfdmRate24Mbps),
       n0/n4/n7 (802.11n 5 GHz 20 MHz, HtMcsK, control HtMcs0, as edca_sat.py),
       ac (802.11ac 5 GHz 20 MHz, VhtMcs8, control VhtMcs0)
  mix: be | vo2 (every 2nd sender AC_VO, rest AC_BE) | vo4 (every 4th) | vibk (sender 1 AC_VI, rest AC_BK)
  agg: default (ns-3's defaults) | off (BE/VI/VO/BK_MaxAmpduSize = 0; A-MSDU is off by default)

Offered load: each sender's OnOff rate is 1.25 x an upper bound of what one station alone
could carry (payload bits over the shortest possible time per frame: an A-MPDU subframe if
its category aggregates under the cell's settings, else AIFS(2) + the PPDU + SIFS + ACK with no backoff). The same rule in
every cell; it only keeps ns-3 from spending its time on packets the queue would drop.

usage: ns3_matrix_run.py PHY N MIX PAYLOAD AGG SECONDS WARM RNGRUN
       ns3_matrix_run.py DESIGN.json OUTDIR SECONDS WARM RUNS [CELL_IDS...]
prints: one line `cell phy=.. n=.. ... rx_bk=.. rx_be=.. rx_vi=.. rx_vo=.. bk=.. be=.. vi=.. vo=.. thr=..` (Mbit/s)
"""
import math, sys, time
from ns import ns

def run_cell(phy_name, n, mix, payload, agg, secs, warm, run):
    """Runs one cell once; returns the result line."""

    ns.RngSeedManager.SetSeed(1)
    ns.RngSeedManager.SetRun(run)
    # Set every time: Config defaults outlive Simulator::Destroy.
    default_ampdu = {"BE": 65535, "VI": 65535, "VO": 0, "BK": 0}  # WifiMac's defaults in 3.44
    for ac, size in default_ampdu.items():
        ns.Config.SetDefault(f"ns3::WifiMac::{ac}_MaxAmpduSize", ns.UintegerValue(size if agg == "default" else 0))
    nodes = ns.NodeContainer(); nodes.Create(n + 1)
    ch = ns.YansWifiChannelHelper.Default()
    phy = ns.YansWifiPhyHelper(); phy.SetChannel(ch.Create())
    wifi = ns.WifiHelper()
    # (data Mbit/s, slot us, sifs us, preamble us, ack us at the control-response rate, aggregates)
    if phy_name == "a":
        wifi.SetStandard(ns.WIFI_STANDARD_80211a)
        data, ctl = "OfdmRate54Mbps", "OfdmRate24Mbps"
        rate, slot, sifs, pre, ack_us, ext = 54.0, 9, 16, 20, 28, 0
    elif phy_name == "g":
        wifi.SetStandard(ns.WIFI_STANDARD_80211g)
        data, ctl = "ErpOfdmRate54Mbps", "ErpOfdmRate24Mbps"
        rate, slot, sifs, pre, ack_us, ext = 54.0, 20, 10, 20, 34, 6
    elif phy_name in ("n0", "n4", "n7"):
        wifi.SetStandard(ns.WIFI_STANDARD_80211n)
        phy.Set("ChannelSettings", ns.StringValue("{36, 20, BAND_5GHZ, 0}"))
        mcs = int(phy_name[1])
        data, ctl = f"HtMcs{mcs}", "HtMcs0"
        rate = {0: 6.5, 4: 39.0, 7: 65.0}[mcs]
        slot, sifs, pre, ext = 9, 16, 36, 0
        ack_us = 44 if mcs == 0 else 28
    elif phy_name == "ac":
        wifi.SetStandard(ns.WIFI_STANDARD_80211ac)
        phy.Set("ChannelSettings", ns.StringValue("{36, 20, BAND_5GHZ, 0}"))
        data, ctl = "VhtMcs8", "VhtMcs0"
        rate, slot, sifs, pre, ack_us, ext = 78.0, 9, 16, 40, 28, 0
    else:
        sys.exit(f"unknown phy {phy_name}")
    wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager", "DataMode", ns.StringValue(data),
                                 "ControlMode", ns.StringValue(ctl))
    mac = ns.WifiMacHelper()
    mac.SetType("ns3::AdhocWifiMac", "QosSupported", ns.BooleanValue(True))
    devs = wifi.Install(phy, mac, nodes)
    mob = ns.MobilityHelper(); pos = ns.ListPositionAllocator()
    for i in range(n + 1):
        pos.Add(ns.Vector(1.0 * (i % 2), 0.1 * i, 0.0))
    mob.SetPositionAllocator(pos); mob.SetMobilityModel("ns3::ConstantPositionMobilityModel"); mob.Install(nodes)
    st = ns.InternetStackHelper(); st.Install(nodes)
    addr = ns.Ipv4AddressHelper(); addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.0"))
    ifs = addr.Assign(devs)
    ns.NeighborCacheHelper().PopulateNeighborCache()
    # Fixed stream numbers, so that a run does not depend on what ran before in this process.
    wifi.AssignStreams(devs, 0)

    # Access category of each sender, its TOS byte (ns-3: user priority = TOS >> 5) and port.
    TOS = {"bk": 0x20, "be": 0x70, "vi": 0xa0, "vo": 0xc0}
    PORT = {"bk": 9, "be": 10, "vi": 11, "vo": 12}
    def ac_of(i):
        if mix == "be":
            return "be"
        if mix == "vo2":
            return "vo" if i % 2 == 0 else "be"
        if mix == "vo4":
            return "vo" if i % 4 == 0 else "be"
        if mix == "vibk":
            return "vi" if i == 1 else "bk"
        sys.exit(f"unknown mix {mix}")

    def offered_mbps(ac):
        aggregates = phy_name in ("n0", "n4", "n7", "ac") and agg == "default" and ac in ("be", "vi")
        msdu = payload + 36  # UDP + IPv4 + LLC/SNAP
        if aggregates:
            t_min = (msdu + 30 + 4 + 3) * 8 / rate
        else:
            sym = 4
            ppdu = pre + sym * math.ceil((22 + 8 * (msdu + 30)) / (rate * sym)) + ext
            t_min = sifs + 2 * slot + ppdu + sifs + ack_us
        return 1.25 * payload * 8 / t_min

    servers = {}
    for ac, port in PORT.items():
        s = ns.UdpServerHelper(port).Install(nodes.Get(0))
        s.Start(ns.Seconds(0)); s.Stop(ns.Seconds(1 + warm + secs + 1))
        servers[ac] = ns.DynamicCast[ns.UdpServer](s.Get(0))
    for i in range(1, n + 1):
        ac = ac_of(i)
        dst = ns.InetSocketAddress(ifs.GetAddress(0), PORT[ac])
        cl = ns.OnOffHelper("ns3::UdpSocketFactory", dst.ConvertTo())
        cl.SetAttribute("OnTime", ns.StringValue("ns3::ConstantRandomVariable[Constant=1]"))
        cl.SetAttribute("OffTime", ns.StringValue("ns3::ConstantRandomVariable[Constant=0]"))
        cl.SetAttribute("Tos", ns.UintegerValue(TOS[ac]))
        cl.SetAttribute("DataRate", ns.StringValue(f"{offered_mbps(ac):.6f}Mb/s"))
        cl.SetAttribute("PacketSize", ns.UintegerValue(payload))
        a = cl.Install(nodes.Get(i)); a.Start(ns.Seconds(1.0 + 0.001 * i)); a.Stop(ns.Seconds(1 + warm + secs + 1))

    t0 = time.time()
    ns.Simulator.Stop(ns.Seconds(1 + warm)); ns.Simulator.Run()
    before = {ac: s.GetReceived() for ac, s in servers.items()}
    ns.Simulator.Stop(ns.Seconds(secs)); ns.Simulator.Run()
    after = {ac: s.GetReceived() for ac, s in servers.items()}
    wall = time.time() - t0
    rx = {ac: after[ac] - before[ac] for ac in PORT}
    mbps = {ac: rx[ac] * payload * 8 / secs / 1e6 for ac in PORT}
    line = (f"cell phy={phy_name} n={n} mix={mix} payload={payload} agg={agg} secs={secs} warm={warm} run={run} "
          f"offered_be={offered_mbps('be'):.3f} offered_vo={offered_mbps('vo'):.3f} wall={wall:.1f} "
          + " ".join(f"rx_{ac}={rx[ac]}" for ac in PORT) + " "
          + " ".join(f"{ac}={mbps[ac]:.4f}" for ac in PORT) + f" thr={sum(mbps.values()):.4f}")
    ns.Simulator.Destroy()
    return line


def main():
    # A single cell names its PHY first; a batch, its design file.
    if len(sys.argv) == 9 and not sys.argv[1].endswith(".json"):
        a = sys.argv[1:9]
        print(run_cell(a[0], int(a[1]), a[2], int(a[3]), a[4], float(a[5]), float(a[6]), int(a[7])), flush=True)
        return
    # Batch: DESIGN.json OUTDIR SECONDS WARM RUNS [CELL_IDS...]: one file per (cell, run),
    # skipped if it exists, so an interrupted batch resumes.
    import json, os
    design, outdir, secs, warm, runs = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    only = set(int(x) for x in sys.argv[6:])
    os.makedirs(outdir, exist_ok=True)
    for run in range(1, runs + 1):
        for c in json.load(open(design)):
            if only and c["id"] not in only:
                continue
            path = os.path.join(outdir, f"cell{c['id']:02d}_run{run}.txt")
            if os.path.exists(path):
                continue
            line = run_cell(c["phy"], c["n"], c["mix"], c["payload"], c["agg"], secs, warm, run)
            with open(path + ".tmp", "w") as f:
                f.write(line + "\n")
            os.replace(path + ".tmp", path)
            print(f"cell {c['id']:02d} run {run}: {line}", flush=True)


if __name__ == "__main__":
    main()
