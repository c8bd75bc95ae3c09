//! Reconciliation latency: percentiles by the nearest-rank method over whole milliseconds.

use serde::Serialize;

/// `{"p50", "p95", "max"}` in milliseconds; all `null` when nothing was reconciled (no
/// reconciliation is not the same as an instant one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Latency {
    pub p50: Option<u64>,
    pub p95: Option<u64>,
    pub max: Option<u64>,
}

impl Latency {
    /// The percentiles of the samples, in any order.
    pub fn of(mut samples: Vec<u64>) -> Self {
        samples.sort_unstable();
        Self {
            p50: percentile(&samples, 50),
            p95: percentile(&samples, 95),
            max: samples.last().copied(),
        }
    }
}

/// The `p`-th percentile (0–100) of ascending `sorted` values by nearest rank: the smallest
/// value with at least `p`% of the values at or below it, always one of the values.
pub fn percentile(sorted: &[u64], p: u32) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let p = usize::try_from(p.min(100)).unwrap_or(100);
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let ten: Vec<u64> = (1..=10).map(|n| n * 100).collect();
        let twenty: Vec<u64> = (1..=20).collect();
        let cases: &[(&[u64], u32, Option<u64>)] = &[
            (&[], 50, None),
            (&[7], 50, Some(7)),
            (&[7], 95, Some(7)),
            (&[7], 0, Some(7)),
            (&[1, 2], 50, Some(1)),
            (&[1, 2], 51, Some(2)),
            (&[1, 2, 3, 4], 50, Some(2)),
            (&[1, 2, 3, 4], 95, Some(4)),
            (&ten, 50, Some(500)),
            (&ten, 95, Some(1000)),
            (&ten, 90, Some(900)),
            (&twenty, 95, Some(19)),
            (&twenty, 100, Some(20)),
            (&twenty, 250, Some(20)),
        ];
        for (values, p, expected) in cases {
            assert_eq!(percentile(values, *p), *expected, "p{p} of {values:?}");
        }
    }

    #[test]
    fn latency_sorts_its_samples_and_is_null_without_any() {
        assert_eq!(
            Latency::of(vec![900, 100, 300]),
            Latency {
                p50: Some(300),
                p95: Some(900),
                max: Some(900)
            }
        );
        assert_eq!(
            Latency::of(Vec::new()),
            Latency {
                p50: None,
                p95: None,
                max: None
            }
        );
    }
}
