//! Cohort's testbed: real network stacks in network namespaces, joined by the channel models
//! of `cohort-medium` running in real time.
//!
//! Each node of a [`TestbedScenario`] gets a namespace with a real kernel stack; its interfaces
//! are veth pairs whose other ends sit in the emulator's namespace, where an
//! [`Emulator`](emulator::Emulator) reads every frame with `AF_PACKET`, puts it through the
//! [`Fabric`](fabric::Fabric) (point-to-point [`Link`](cohort_medium::link::Link) models or one
//! shared 802.11 [`Medium`](cohort_medium::wifi::Medium), the very code the simulator runs) and
//! writes it out of the receiving node's interface when the model delivers it. Kernel TCP and
//! MPTCP, QUIC, KCP and Cohort's own binaries then cross the same emulated channel. The kernel
//! here has no netem; this is how delay, loss and contention reach real sockets.
//!
//! Everything needs root. [`Testbed::up`](testbed::Testbed::up) makes a run,
//! [`Testbed::down`](testbed::Testbed::down) (or dropping it) removes it, and
//! [`down_all`](testbed::down_all) removes whatever crashed runs left behind.

pub mod cpustat;
pub mod emulator;
pub mod fabric;
pub mod netns;
pub mod packet;
pub mod scenario;
pub mod testbed;

pub use emulator::{Control, EmuOptions, EmuStatus, Emulator};
pub use scenario::{Mode, ScenarioError, TestbedScenario};
pub use testbed::{EmuMode, Testbed, TestbedError};
