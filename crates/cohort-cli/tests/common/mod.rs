//! What the CLI tests share.

use serde_json::Value;

/// Checks the super-arms a multipath sender reports (`first_rounds`): each round plays at most
/// `m` distinct paths of `paths`, at least one, sorted; fewer than `m` only while the others are
/// suspect (a path silent past its timeout is not usable, and on a loaded machine one may be for
/// a round), so at least one round plays all `m`.
pub fn check_super_arms(rounds: &Value, m: usize, paths: usize) {
    let arms: Vec<Vec<u64>> = rounds
        .as_array()
        .expect("first_rounds is a list")
        .iter()
        .map(|s| {
            s.as_array().expect("a super-arm is a list").iter().map(|a| a.as_u64().expect("a path index")).collect()
        })
        .collect();
    assert!(!arms.is_empty(), "no round reported");
    let valid = |s: &Vec<u64>| {
        !s.is_empty() && s.len() <= m && s.windows(2).all(|w| w[0] < w[1]) && s.iter().all(|&a| a < paths as u64)
    };
    assert!(arms.iter().all(valid), "super-arms of at most {m} distinct paths of {paths}: {arms:?}");
    assert!(arms.iter().any(|s| s.len() == m), "super-arms of {m} when every path is usable: {arms:?}");
}
