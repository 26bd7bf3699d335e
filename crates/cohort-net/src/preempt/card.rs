//! What a robot's Wi-Fi card holds, published by whoever models or drives the card and read
//! by the robot's agent: the completion feedback seed 000's virtual-preemption layer
//! (Algorithm 2) rests on, for a runtime that sits above the kernel rather than in the driver.
//!
//! Seed 000 §IV-C reads transmit completions inside the driver. A user-space agent cannot, but
//! Linux keeps the same figures per station: mac80211's airtime queue limits (AQL) count the
//! airtime of frames handed to the card and not yet completed, and its TXQs count what waits
//! above the card (both in debugfs, `stations/<mac>/aql` and `aqm`). The testbed's emulator
//! models the card, so it publishes the same two figures for every station through a small
//! shared file: [`CardBoard`] writes it, [`CardProbe`] reads one station's record.
//!
//! The file is a memory map of 64-bit words: a header (`MAGIC`, `VERSION`, station count) and
//! one record per station guarded by a sequence number (a seqlock: odd while the writer is
//! changing the record; a reader retries until it sees the same even number before and after).
//! Writing is a few plain stores, so the emulator can publish on every frame that enters or
//! leaves a card without a system call.

use memmap2::{MmapOptions, MmapRaw};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering, fence};

/// The first word of a card file ("COHCARD1" in ASCII).
const MAGIC: u64 = u64::from_le_bytes(*b"COHCARD1");
const VERSION: u64 = 1;
/// Words of the header and of each station's record.
const HEADER_WORDS: usize = 8;
const RECORD_WORDS: usize = 8;
/// A reader gives up on a record that stays torn this long (a writer that died mid-record);
/// a writer merely preempted mid-record is waited for, yielding the CPU to it.
const READ_PATIENCE: std::time::Duration = std::time::Duration::from_millis(20);
/// How often a reader checks that its path still names the file it mapped: an emulator (or
/// driver shim) restarted under a running agent publishes into a new file, and the old one's
/// counters stand still.
const REOPEN_CHECK: std::time::Duration = std::time::Duration::from_millis(100);
/// Stations a file may hold (a bad header must not make a reader map gigabytes).
pub const MAX_STATIONS: usize = 4096;

/// What one station's card holds now, and what it has completed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CardLoad {
    /// Bytes handed to the card (and the queues in front of it that refill it) and neither
    /// sent nor dropped yet.
    pub pending_bytes: u64,
    pub pending_frames: u64,
    /// Bytes and frames the card completed since it started (acknowledged, or sent when not
    /// acknowledged).
    pub sent_bytes: u64,
    pub sent_frames: u64,
}

impl From<CardLoad> for cohort_proto::preempt::agent::CardReading {
    fn from(l: CardLoad) -> Self {
        cohort_proto::preempt::agent::CardReading { pending_bytes: l.pending_bytes, sent_bytes: l.sent_bytes }
    }
}

/// Why a card file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CardError {
    #[error("card file {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a card file ({why})")]
    NotACardFile { path: PathBuf, why: &'static str },
    #[error("card file {path} has {stations} stations; station {station} does not exist")]
    NoStation { path: PathBuf, station: usize, stations: usize },
    #[error(
        "card file {path}: station {station}'s record stayed torn for {READ_PATIENCE:?} (its writer stopped mid-update)"
    )]
    Torn { path: PathBuf, station: usize },
}

fn words(map: &MmapRaw) -> &[AtomicU64] {
    // SAFETY: the mapping is page-aligned, at least `len` bytes long and lives as long as the
    // returned slice's borrow of `map`; AtomicU64 has u64's size and alignment, and every
    // access to the shared words (here and in other processes) is atomic.
    unsafe { std::slice::from_raw_parts(map.as_ptr() as *const AtomicU64, map.len() / 8) }
}

/// The writer of a card file: one per emulator (or driver shim).
#[derive(Debug)]
pub struct CardBoard {
    map: MmapRaw,
    stations: usize,
    path: PathBuf,
}

impl CardBoard {
    /// Creates (or replaces) `path` for `stations` stations, all empty. The file is built under
    /// a temporary name and renamed into place, so a reader never maps a half-made file.
    pub fn create(path: &Path, stations: usize) -> Result<Self, CardError> {
        let io = |source| CardError::Io { path: path.to_path_buf(), source };
        if stations == 0 || stations > MAX_STATIONS {
            return Err(CardError::NotACardFile { path: path.to_path_buf(), why: "a station count of 1-4096" });
        }
        let tmp = path.with_extension("tmp");
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&tmp).map_err(io)?;
        file.set_len(((HEADER_WORDS + stations * RECORD_WORDS) * 8) as u64).map_err(io)?;
        let map = MmapOptions::new().map_raw(&file).map_err(io)?;
        let w = words(&map);
        w[1].store(VERSION, Ordering::Relaxed);
        w[2].store(stations as u64, Ordering::Relaxed);
        // The magic last: a file with it is complete.
        w[0].store(MAGIC, Ordering::Release);
        std::fs::rename(&tmp, path).map_err(io)?;
        Ok(CardBoard { map, stations, path: path.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn stations(&self) -> usize {
        self.stations
    }

    /// Publishes station `station`'s load (ignored beyond the station count).
    pub fn publish(&self, station: usize, load: CardLoad) {
        if station >= self.stations {
            return;
        }
        let r = &words(&self.map)[HEADER_WORDS + station * RECORD_WORDS..][..RECORD_WORDS];
        let seq = r[0].load(Ordering::Relaxed);
        r[0].store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (w, v) in r[1..5].iter().zip([load.pending_bytes, load.pending_frames, load.sent_bytes, load.sent_frames]) {
            w.store(v, Ordering::Relaxed);
        }
        r[0].store(seq.wrapping_add(2), Ordering::Release);
    }
}

/// The reader of one station's record. It follows its path: when the file there is replaced
/// (its writer restarted), the next check maps the new one.
#[derive(Debug)]
pub struct CardProbe {
    map: MmapRaw,
    station: usize,
    path: PathBuf,
    /// Device and inode of the mapped file.
    id: (u64, u64),
    checked: std::time::Instant,
    reopened: u64,
}

fn file_id(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

impl CardProbe {
    /// Maps `path` (read-only) and checks that it is a card file with station `station`.
    pub fn open(path: &Path, station: usize) -> Result<Self, CardError> {
        let io = |source| CardError::Io { path: path.to_path_buf(), source };
        let not = |why| CardError::NotACardFile { path: path.to_path_buf(), why };
        let file = std::fs::File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let len = meta.len() as usize;
        if len < HEADER_WORDS * 8 {
            return Err(not("shorter than its header"));
        }
        let map = MmapOptions::new().map_raw_read_only(&file).map_err(io)?;
        let w = words(&map);
        if w[0].load(Ordering::Acquire) != MAGIC {
            return Err(not("no magic number"));
        }
        if w[1].load(Ordering::Relaxed) != VERSION {
            return Err(not("an unknown version"));
        }
        let stations = w[2].load(Ordering::Relaxed) as usize;
        if stations == 0 || stations > MAX_STATIONS || len < (HEADER_WORDS + stations * RECORD_WORDS) * 8 {
            return Err(not("a station count its length does not hold"));
        }
        if station >= stations {
            return Err(CardError::NoStation { path: path.to_path_buf(), station, stations });
        }
        let (id, checked) = (file_id(&meta), std::time::Instant::now());
        Ok(CardProbe { map, station, path: path.to_path_buf(), id, checked, reopened: 0 })
    }

    pub fn station(&self) -> usize {
        self.station
    }

    /// Times the probe found its path naming a new file and mapped it.
    pub fn reopened(&self) -> u64 {
        self.reopened
    }

    /// The station's load now. At most every `REOPEN_CHECK` it also checks that its path
    /// still names the mapped file, and maps the new one if not; a path that names no card
    /// file any more (its writer gone) is an error, the old file's frozen counters never a
    /// reading.
    pub fn read(&mut self) -> Result<CardLoad, CardError> {
        if self.checked.elapsed() >= REOPEN_CHECK {
            self.follow_path()?;
        }
        self.read_record()
    }

    fn follow_path(&mut self) -> Result<(), CardError> {
        let meta = std::fs::metadata(&self.path).map_err(|source| CardError::Io { path: self.path.clone(), source })?;
        if file_id(&meta) != self.id {
            let fresh = CardProbe::open(&self.path, self.station)?;
            *self = CardProbe { reopened: self.reopened + 1, ..fresh };
        }
        self.checked = std::time::Instant::now();
        Ok(())
    }

    fn read_record(&self) -> Result<CardLoad, CardError> {
        let r = &words(&self.map)[HEADER_WORDS + self.station * RECORD_WORDS..][..RECORD_WORDS];
        let mut started = None;
        for tries in 1u64.. {
            let before = r[0].load(Ordering::Acquire);
            if before.is_multiple_of(2) {
                let v: [u64; 4] = std::array::from_fn(|i| r[1 + i].load(Ordering::Relaxed));
                fence(Ordering::Acquire);
                if r[0].load(Ordering::Relaxed) == before {
                    return Ok(CardLoad {
                        pending_bytes: v[0],
                        pending_frames: v[1],
                        sent_bytes: v[2],
                        sent_frames: v[3],
                    });
                }
            }
            if tries.is_multiple_of(64) {
                let since = *started.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() >= READ_PATIENCE {
                    break;
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        Err(CardError::Torn { path: self.path.clone(), station: self.station })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("cohort-card-{}-{:?}", std::process::id(), std::thread::current().id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_probe_reads_what_the_board_published_for_its_station_only() {
        let path = dir().join("card");
        let board = CardBoard::create(&path, 3).unwrap();
        let mut probe = CardProbe::open(&path, 1).unwrap();
        assert_eq!(probe.read().unwrap(), CardLoad::default());
        let load = CardLoad { pending_bytes: 9000, pending_frames: 6, sent_bytes: 150_000, sent_frames: 100 };
        board.publish(1, load);
        board.publish(2, CardLoad { pending_bytes: 1, ..load });
        board.publish(7, load); // beyond the stations: ignored
        assert_eq!(probe.read().unwrap(), load);
        assert_eq!(CardProbe::open(&path, 0).unwrap().read().unwrap(), CardLoad::default());
    }

    #[test]
    fn bad_files_and_stations_are_refused_with_the_reason() {
        let d = dir();
        let path = d.join("card");
        let _board = CardBoard::create(&path, 2).unwrap();
        assert!(matches!(CardProbe::open(&path, 2), Err(CardError::NoStation { station: 2, stations: 2, .. })));
        let junk = d.join("junk");
        std::fs::write(&junk, [7u8; 200]).unwrap();
        assert!(matches!(CardProbe::open(&junk, 0), Err(CardError::NotACardFile { why: "no magic number", .. })));
        std::fs::write(&junk, [7u8; 10]).unwrap();
        assert!(matches!(CardProbe::open(&junk, 0), Err(CardError::NotACardFile { .. })));
        // A header promising more stations than the file holds.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[16..24].copy_from_slice(&1000u64.to_le_bytes());
        std::fs::write(&junk, &bytes).unwrap();
        assert!(matches!(CardProbe::open(&junk, 0), Err(CardError::NotACardFile { .. })));
        assert!(matches!(CardProbe::open(&d.join("absent"), 0), Err(CardError::Io { .. })));
        assert!(matches!(CardBoard::create(&d.join("none"), 0), Err(CardError::NotACardFile { .. })));
    }

    #[test]
    fn a_reader_never_sees_a_half_written_record() {
        // Every record the writer publishes has all four words equal; a torn read would not.
        let path = dir().join("card-race");
        let board = CardBoard::create(&path, 1).unwrap();
        let probe = CardProbe::open(&path, 0).unwrap();
        let probe = std::sync::Mutex::new(probe);
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for v in 0..200_000u64 {
                    board.publish(0, CardLoad { pending_bytes: v, pending_frames: v, sent_bytes: v, sent_frames: v });
                    // An emulator publishes per frame, not back to back: leave readers a gap.
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                }
                done.store(true, Ordering::Relaxed);
            });
            let (mut last, mut reads) = (0, 0u64);
            while !done.load(Ordering::Relaxed) {
                // A writer preempted mid-record for longer than the reader's patience (a loaded
                // machine) makes a read fail; what matters is that no read returns a torn record.
                let Ok(l) = probe.lock().unwrap().read() else { continue };
                assert!(
                    l.pending_bytes == l.pending_frames
                        && l.sent_bytes == l.sent_frames
                        && l.pending_bytes == l.sent_bytes
                );
                assert!(l.pending_bytes >= last, "records go back in time");
                last = l.pending_bytes;
                reads += 1;
            }
            assert!(reads > 0);
        });
        assert_eq!(probe.lock().unwrap().read().unwrap().sent_frames, 199_999);
    }

    #[test]
    fn a_probe_follows_its_path_to_a_restarted_writer_and_says_when_it_is_gone() {
        let path = dir().join("card-restart");
        let old = CardBoard::create(&path, 2).unwrap();
        let mut probe = CardProbe::open(&path, 1).unwrap();
        let first = CardLoad { pending_bytes: 10, pending_frames: 1, sent_bytes: 0, sent_frames: 0 };
        old.publish(1, first);
        assert_eq!(probe.read().unwrap(), first);
        // The writer restarts: a new file under the same name; the old one's counters stand still.
        let new = CardBoard::create(&path, 2).unwrap();
        let second = CardLoad { pending_bytes: 3000, pending_frames: 2, sent_bytes: 1500, sent_frames: 1 };
        new.publish(1, second);
        std::thread::sleep(REOPEN_CHECK + REOPEN_CHECK / 2);
        assert_eq!(probe.read().unwrap(), second);
        assert_eq!(probe.reopened(), 1);
        // The writer is gone and its file with it: an error, not the frozen counters.
        std::fs::remove_file(&path).unwrap();
        std::thread::sleep(REOPEN_CHECK + REOPEN_CHECK / 2);
        assert!(matches!(probe.read(), Err(CardError::Io { .. })));
        // A file that is no card file any more is refused with the reason.
        std::fs::write(&path, [0u8; 200]).unwrap();
        assert!(matches!(probe.read(), Err(CardError::NotACardFile { .. })));
        drop((old, new));
    }
}

/// Where an agent reads what its robot's card holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardSource {
    /// A card file ([`CardBoard`]): the testbed's emulator, or a driver shim; station index.
    Shared { path: PathBuf, station: usize },
    /// A real host's mac80211 debugfs directory of the station the robot sends to
    /// ([`super::mac80211`]); airtime converted to bytes at `rate_bps`.
    Mac80211 { station_dir: PathBuf, rate_bps: u64 },
}

/// The reader of a [`CardSource`].
#[derive(Debug)]
pub enum CardReader {
    Shared(CardProbe),
    Mac80211(super::mac80211::DebugfsCard),
}

impl CardReader {
    pub fn open(source: &CardSource) -> Result<Self, CardError> {
        Ok(match source {
            CardSource::Shared { path, station } => CardReader::Shared(CardProbe::open(path, *station)?),
            CardSource::Mac80211 { station_dir, rate_bps } => {
                CardReader::Mac80211(super::mac80211::DebugfsCard::open(station_dir, *rate_bps)?)
            }
        })
    }

    /// What the card holds now and has completed so far.
    pub fn read(&mut self) -> Result<CardLoad, CardError> {
        match self {
            CardReader::Shared(p) => p.read(),
            CardReader::Mac80211(d) => d.read(),
        }
    }
}
