//! The guest's CPU accounting from `/proc/stat`: how much time the hypervisor took from us.
//!
//! On a virtual machine the host can deschedule a virtual CPU at any moment; the guest sees
//! it only as *steal* time (the 8th figure of a `cpu` line, in clock ticks). Nothing inside
//! the guest can hide such a pause from an emulator that must hold half a millisecond, so the
//! emulator and the fidelity bench report the share of time stolen over every run beside the
//! figures it may have spoiled.

use std::io;

/// Cumulative times of one `cpu` line of `/proc/stat` (clock ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Every field of the line (user, nice, system, idle, iowait, irq, softirq, steal; guest
    /// time is already inside user and nice).
    pub total: u64,
    pub idle: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Parses the line for `cpu` (`None`: the aggregate `cpu` line) out of `/proc/stat`'s text.
    pub fn parse(stat: &str, cpu: Option<usize>) -> Option<CpuTimes> {
        let want = cpu.map_or_else(|| "cpu".to_string(), |c| format!("cpu{c}"));
        let line = stat.lines().find(|l| l.split_whitespace().next() == Some(want.as_str()))?;
        let v: Vec<u64> = line.split_whitespace().skip(1).map(|f| f.parse().ok()).collect::<Option<_>>()?;
        if v.len() < 4 {
            return None;
        }
        // guest and guest_nice (fields 9 and 10) are counted in user and nice already.
        let total = v.iter().take(8).sum();
        Some(CpuTimes { total, idle: v[3] + v.get(4).copied().unwrap_or(0), steal: v.get(7).copied().unwrap_or(0) })
    }

    /// Reads `/proc/stat` now.
    pub fn read(cpu: Option<usize>) -> io::Result<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat")?;
        CpuTimes::parse(&text, cpu)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("/proc/stat has no line for {cpu:?}")))
    }

    /// Share of the time between `self` (earlier) and `later` that the hypervisor stole; 0 when
    /// no tick passed.
    pub fn steal_share(&self, later: &CpuTimes) -> f64 {
        let dt = later.total.saturating_sub(self.total);
        if dt == 0 { 0.0 } else { later.steal.saturating_sub(self.steal) as f64 / dt as f64 }
    }

    /// Share of the time between `self` and `later` the CPU(s) had nothing to run.
    pub fn idle_share(&self, later: &CpuTimes) -> f64 {
        let dt = later.total.saturating_sub(self.total);
        if dt == 0 { 0.0 } else { later.idle.saturating_sub(self.idle) as f64 / dt as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  1513092 123121 264250 403049 5948 0 4155 9258 0 0\n\
                        cpu0 756000 60000 132000 200000 3000 0 2000 4000 0 0\n\
                        cpu1 757092 63121 132250 203049 2948 0 2155 5258 0 0\n\
                        intr 1 2 3\n";

    #[test]
    fn parses_the_aggregate_and_one_cpu() {
        let all = CpuTimes::parse(STAT, None).unwrap();
        assert_eq!(all.steal, 9258);
        assert_eq!(all.idle, 403_049 + 5948);
        assert_eq!(all.total, 1_513_092 + 123_121 + 264_250 + 403_049 + 5948 + 4155 + 9258);
        let c1 = CpuTimes::parse(STAT, Some(1)).unwrap();
        assert_eq!(c1.steal, 5258);
        assert!(CpuTimes::parse(STAT, Some(2)).is_none());
        // "cpu1" must not match "cpu10", nor the aggregate "cpu" a per-CPU line.
        assert!(CpuTimes::parse("cpu10 1 2 3 4 5 6 7 8\n", Some(1)).is_none());
        assert!(CpuTimes::parse("cpu0 1 2 3 4\n", None).is_none());
        assert!(CpuTimes::parse("cpu x y z w\n", None).is_none());
        assert!(CpuTimes::parse("cpu 1 2\n", None).is_none());
    }

    #[test]
    fn shares_of_an_interval() {
        let a = CpuTimes { total: 1000, idle: 500, steal: 10 };
        let b = CpuTimes { total: 1200, idle: 550, steal: 30 };
        assert!((a.steal_share(&b) - 0.1).abs() < 1e-12);
        assert!((a.idle_share(&b) - 0.25).abs() < 1e-12);
        assert_eq!(a.steal_share(&a), 0.0);
    }

    #[test]
    fn reads_this_machine() {
        let t = CpuTimes::read(None).unwrap();
        assert!(t.total > 0);
        assert!(CpuTimes::read(Some(0)).unwrap().total > 0);
    }
}
