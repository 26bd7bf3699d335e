//! Point-to-point baselines of seed 003 §VI (placeholder; being written).
