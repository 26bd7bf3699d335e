"""cgroup v1 / v2 detection and the per-app cgroup layout.

v1 (this kernel): each controller (``cpu``, ``memory``, ``cpuset``) is its own hierarchy,
e.g. ``/sys/fs/cgroup/cpu``. An app's cgroup is ``<mount>/<base>/<root>/<app>`` where
``<base>`` is the tuner's own cgroup in that hierarchy (so the apps stay inside whatever limits
the tuner itself runs under) and ``<root>`` is the spec's ``cgroup_root`` (``cohort-tune``).

v2: one hierarchy; apps go to ``<mount>/<root>/<app>`` (a cgroup holding processes cannot
delegate controllers, so the tuner's own cgroup cannot be the base), and ``+cpu +memory
+cpuset`` are enabled in ``cgroup.subtree_control`` along the way (journaled like any write;
restore writes back the difference as ``+name``/``-name``, see :mod:`cohort.tune.system`).

Knob files by version:

=====================  ==========================  =====================
knob                   v1                          v2
=====================  ==========================  =====================
CPU share              ``cpu.shares`` (2..262144)  ``cpu.weight`` (1..10000, converted)
memory soft limit      ``memory.soft_limit_in_bytes``  ``memory.high`` (see below)
RT budget (RT_GROUP)   ``cpu.rt_runtime_us``        (none: v2 has no RT groups)
cpuset                 ``cpuset.cpus`` + ``.mems``  ``cpuset.cpus``
=====================  ==========================  =====================

**CPU weight.** ``cpu.weight = round(shares * 100 / 1024)``, clamped to [1, 10000]: the
kernel's own relation between the two (``sched_weight_from_cgroup()`` in kernel/sched: a
weight ``w`` is the load weight ``w * 1024 / 100``, the v1 unit; cgroup-v2.rst: weight range
[1, 10000], default 100) and systemd's ``cgroup_cpu_shares_to_weight()``. It maps 1024 (the v1
default) to 100 (the v2 default) and keeps the ratios between groups, which is all CFS uses.
runc's ``1 + ((shares - 2) * 9999) / 262142`` maps 1024 to 39 (integer division), so every
"default" group would weigh 39 against the 100 of everything else; runc and crun have replaced
it by a curve through (2, 1), (1024, 100), (262144, 10000) (kubernetes issue 131216), which maps
1024 to 100 but not ratios (2048 gives 173). Shares from 102400 up reach the v2 maximum, 10000.

**Memory soft limit on v2 is ``memory.high``.** v1's ``memory.soft_limit_in_bytes`` on an app
makes *that app* give memory back first: when memory runs short, reclaim goes to groups above
their soft limit before the others (cgroup-v1/memory.rst, "Soft limits"), and nothing happens
while memory is plentiful ("when the system detects memory contention or low memory, control
groups are pushed back to their soft limits"). v2 has no such knob: cgroup-v2.rst ("Controller
Issues and Remedies", "Memory") replaces that "original lower boundary" by ``memory.low``.
``memory.low`` is protection: set on the detector it would shield the detector's memory from
reclaim, the opposite of what seed 002 does with the detector's soft limit (its NAV loop got
faster when the detector was pushed out first).
``memory.high`` acts in the seed's direction on the group it is set on: above it the group's
allocations go through direct reclaim and are throttled, never OOM-killed (cgroup-v2.rst,
"memory.high"). It differs in acting without global memory pressure too, so on v2 the knob is
stricter than v1's; the search measures what it does, and 0 means ``max`` (no limit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cohort.tune.errors import KnobError
from cohort.tune.system import System

CONTROLLERS = ("cpu", "memory", "cpuset")


def shares_to_weight(shares: int) -> int:
    """cgroup v1 cpu.shares to v2 cpu.weight: ``shares * 100 / 1024`` rounded, in [1, 10000]
    (the kernel's and systemd's relation; 1024 -> 100, ratios kept; see the module doc)."""
    return max(1, min(10000, (int(shares) * 100 + 512) // 1024))


@dataclass
class Layout:
    """Where each controller's hierarchy is and where the tuner's cgroups go in it."""

    version: int
    mounts: dict[str, Path]  # controller -> mount point (v2: the same path for all)
    bases: dict[str, Path] = field(default_factory=dict)  # controller -> base dir for cgroup_root

    def app_dir(self, controller: str, root: str, app: str) -> Path:
        return self.bases[controller] / root / app

    def root_dir(self, controller: str, root: str) -> Path:
        return self.bases[controller] / root


def _mounts(mounts_text: str) -> tuple[dict[str, Path], Path | None]:
    v1: dict[str, Path] = {}
    v2: Path | None = None
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        _, mnt, fstype, opts = parts[:4]
        if fstype == "cgroup":
            for c in CONTROLLERS:
                if c in opts.split(","):
                    v1.setdefault(c, Path(mnt))
        elif fstype == "cgroup2" and v2 is None:
            v2 = Path(mnt)
    return v1, v2


def _own_cgroups(text: str) -> dict[str, str]:
    """Parse /proc/self/cgroup: controller (or '' for v2) -> path."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for c in parts[1].split(",") if parts[1] else [""]:
            out[c] = parts[2]
    return out


def detect(want: str | int = "auto", mounts_text: str | None = None, self_cgroup_text: str | None = None) -> Layout:
    """Find the cgroup version in use for the cpu controller (or the one asked for)."""
    mounts_text = mounts_text if mounts_text is not None else Path("/proc/self/mounts").read_text()
    self_cgroup_text = self_cgroup_text if self_cgroup_text is not None else Path("/proc/self/cgroup").read_text()
    v1, v2 = _mounts(mounts_text)
    own = _own_cgroups(self_cgroup_text)
    v2_ok = v2 is not None and "cpu" in (v2 / "cgroup.controllers").read_text().split() if v2 else False
    auto = 1 if "cpu" in v1 else 2 if v2_ok else 0
    version = auto if want == "auto" else int(want)
    if version == 1:
        if "cpu" not in v1:
            raise KnobError("cgroup v1", "the cpu controller is not mounted as cgroup v1")
        bases = {c: m / own.get(c, "/").lstrip("/") for c, m in v1.items()}
        return Layout(1, dict(v1), bases)
    if version == 2:
        if v2 is None or not v2_ok:
            raise KnobError("cgroup v2", "no cgroup2 mount with the cpu controller available")
        return Layout(2, dict.fromkeys(CONTROLLERS, v2), dict.fromkeys(CONTROLLERS, v2))
    raise KnobError("cgroups", "neither cgroup v1 nor v2 provides the cpu controller")


class AppCgroups:
    """Creates (journaled) and configures the cgroups of the apps of one spec."""

    def __init__(
        self,
        system: System,
        layout: Layout,
        root: str,
        apps: list[str],
        controllers: list[str],
        root_cpu_shares: int | None = None,
    ) -> None:
        self.root_cpu_shares = root_cpu_shares
        self.sys = system
        self.layout = layout
        self.root = root
        self.apps = apps
        self.controllers = [c for c in controllers if c in layout.mounts]
        missing = set(controllers) - set(self.controllers)
        if missing:
            raise KnobError("cgroups", f"controller(s) {', '.join(sorted(missing))} not available")

    def dir(self, controller: str, app: str) -> Path:
        return self.layout.app_dir(controller, self.root, app)

    def create(self) -> None:
        """Create cohort-tune/<app> in every used hierarchy (v1 cpusets get cpus/mems copied)."""
        done: set[Path] = set()
        for c in self.controllers:
            rootdir = self.layout.root_dir(c, self.root)
            if rootdir in done:
                continue
            done.add(rootdir)
            if self.layout.version == 2:
                self._v2_enable(rootdir)
            self.sys.mkdir(rootdir)
            if self.layout.version == 1 and c == "cpuset":
                self._cpuset_init(rootdir)
            if self.layout.version == 2:
                ctl = " ".join(f"+{x}" for x in self.controllers)
                self.sys.write(rootdir / "cgroup.subtree_control", ctl)
            if c == "cpu" and self.root_cpu_shares is not None:
                if self.layout.version == 1:
                    self.sys.write(rootdir / "cpu.shares", self.root_cpu_shares)
                else:
                    self.sys.write(rootdir / "cpu.weight", shares_to_weight(self.root_cpu_shares))
            for app in self.apps:
                d = rootdir / app
                self.sys.mkdir(d)
                if self.layout.version == 1 and c == "cpuset":
                    self._cpuset_init(d)

    def _v2_enable(self, rootdir: Path) -> None:
        parent = rootdir.parent
        have = (
            self.sys.read(parent / "cgroup.subtree_control").split()
            if (parent / "cgroup.subtree_control").exists()
            else []
        )
        need = [x for x in self.controllers if x not in have]
        if need:
            self.sys.write(parent / "cgroup.subtree_control", " ".join(f"+{x}" for x in need))

    def _cpuset_init(self, d: Path) -> None:
        for f in ("cpuset.cpus", "cpuset.mems"):
            cur = self.sys.read(d / f) if (d / f).exists() else ""
            if not cur:
                self.sys.write(d / f, self.sys.read(d.parent / f) if (d.parent / f).exists() else "0")

    def procs_files(self, app: str) -> list[Path]:
        seen: list[Path] = []
        for c in self.controllers:
            p = self.dir(c, app) / "cgroup.procs"
            if p not in seen:
                seen.append(p)
        return seen

    # ---- knobs -------------------------------------------------------------------------
    def set_cpu_shares(self, app: str, shares: int) -> None:
        d = self.dir("cpu", app)
        if self.layout.version == 1:
            self.sys.write(d / "cpu.shares", shares)
        else:
            self.sys.write(d / "cpu.weight", shares_to_weight(shares))

    def set_mem_soft_limit(self, app: str, mib: int) -> None:
        """0 means no limit."""
        if "memory" not in self.controllers:
            raise KnobError(app, "memory knob used but the memory controller is not in use")
        d = self.dir("memory", app)
        if self.layout.version == 1:
            self.sys.write(d / "memory.soft_limit_in_bytes", -1 if mib <= 0 else mib * 1024 * 1024)
        else:
            self.sys.write(d / "memory.high", "max" if mib <= 0 else mib * 1024 * 1024)

    def set_cpuset(self, app: str, cpus: str) -> None:
        if "cpuset" not in self.controllers:
            raise KnobError(app, "cpuset knob used but the cpuset controller is not in use")
        d = self.dir("cpuset", app)
        if cpus == "all":
            cpus = self.sys.read(d.parent / "cpuset.cpus") if self.layout.version == 1 else ""
        self.sys.write(d / "cpuset.cpus", cpus, hint="cpus must be online and inside the parent's cpuset")

    def set_rt_runtime(self, budgets_us: dict[str, int]) -> None:
        """RT_GROUP_SCHED: give each app cgroup its rt budget, the parent the sum (v1 only).

        Lowers children first and raises the parent before raising children, as the kernel
        requires sum(children) <= parent at every step."""
        if self.layout.version != 1:
            if any(budgets_us.values()):
                raise KnobError(
                    "cpu.rt_runtime_us",
                    "cgroup v2 has no RT group budgets; RT tasks must run in the root cgroup or the kernel "
                    "must be built without RT_GROUP_SCHED",
                )
            return
        rootdir = self.layout.root_dir("cpu", self.root)
        if not (rootdir / "cpu.rt_runtime_us").exists() and not self.sys.dry_run:
            if any(budgets_us.values()):
                raise KnobError(str(rootdir), "no cpu.rt_runtime_us: kernel without RT_GROUP_SCHED?")
            return
        total = sum(budgets_us.values())
        for app in self.apps:
            if budgets_us.get(app, 0) == 0:
                self._rt(self.dir("cpu", app), 0)
        if total:
            self._rt(rootdir, total)
        for app in self.apps:
            if budgets_us.get(app, 0):
                self._rt(self.dir("cpu", app), budgets_us[app])
        if not total:
            self._rt(rootdir, 0)

    def _rt(self, d: Path, us: int) -> None:
        f = d / "cpu.rt_runtime_us"
        if not self.sys.dry_run and f.exists() and self.sys.read(f) == str(us):
            return
        self.sys.write(f, us, hint="the parent cgroup's cpu.rt_runtime_us must cover the sum of its children's")
