//! The scenario parsers (`cohort sim`'s TOML, the testbed's TOML and JSON, link trace files,
//! `cohort bench beams`' team files) on arbitrary text:
//! any input gives a scenario or a typed error, never a panic. Each input is tried as it is,
//! and spliced into one of the repository's own scenario files (the first byte picks the file,
//! the next two where the bytes go), so that mutations reach the validation behind the TOML
//! syntax.
#![no_main]

use libfuzzer_sys::fuzz_target;

const SEEDS: [&str; 8] = [
    include_str!("../../scenarios/beams_team.toml"),
    include_str!("../../scenarios/edca_sat.toml"),
    include_str!("../../scenarios/lrt_crash.toml"),
    include_str!("../../scenarios/lrt_p2p_lossy.toml"),
    include_str!("../../scenarios/lrt_wifi_team.toml"),
    include_str!("../../scenarios/testbed_mptcp.toml"),
    include_str!("../../scenarios/testbed_p2p.toml"),
    include_str!("../../scenarios/testbed_wifi.toml"),
];

fn parse_all(text: &str) {
    let _ = cohort_sim::Scenario::from_toml(text);
    let _ = cohort_emu::TestbedScenario::parse(text);
    let _ = cohort_emu::TestbedScenario::from_json(text);
    let _ = cohort_sim::mobility::parse_trace(text);
    let _ = cohort_sim::beams::TeamFile::from_toml(text);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        parse_all(text);
    }
    let [pick, hi, lo, rest @ ..] = data else { return };
    let Ok(insert) = std::str::from_utf8(rest) else { return };
    let seed = SEEDS[usize::from(*pick) % SEEDS.len()];
    let mut at = usize::from(u16::from_be_bytes([*hi, *lo])) % (seed.len() + 1);
    while !seed.is_char_boundary(at) {
        at -= 1;
    }
    // Replace as many bytes as are inserted: a mutation of the file.
    let mut end = (at + insert.len()).min(seed.len());
    while !seed.is_char_boundary(end) {
        end -= 1;
    }
    parse_all(&format!("{}{}{}", &seed[..at], insert, &seed[end..]));
});
