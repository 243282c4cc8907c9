//! Training pulls as servers record them ([`ClockedPull`]): how far ahead of the slowest
//! worker still training any worker pulled, which is what a consistency model bounds.

use std::collections::HashMap;

use crate::ClockedPull;

/// What [`lead`] found in one server's record of one matrix's pulls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lead {
    /// The most clocks a pull was ahead of another worker still training: a pull at clock c
    /// while that worker had completed k clocks is c - k ahead.
    pub max: i64,
    /// (pull, other worker) pairs compared.
    pub pairs: usize,
}

/// The lead of `pulls` (one server's record, in its order; one matrix). After a worker's
/// pull at clock c' it has completed at most c' + 1 clocks (once that step pushed), so that is
/// what it counts as (a lead is never overstated); before its first pull, 0. A worker counts
/// as still training while it pulls again later in the record, so workers that finished are
/// not counted as behind. SSP with staleness s keeps `max` <= s; BSP keeps it 0.
pub fn lead<'a>(pulls: impl IntoIterator<Item = &'a ClockedPull>) -> Lead {
    let pulls: Vec<&ClockedPull> = pulls.into_iter().collect();
    let last: HashMap<u64, usize> = pulls
        .iter()
        .enumerate()
        .map(|(i, p)| (p.worker, i))
        .collect();
    let mut completed: HashMap<u64, i64> = HashMap::new();
    let mut lead = Lead {
        max: i64::MIN,
        pairs: 0,
    };
    for (i, p) in pulls.iter().enumerate() {
        for (&other, &their_last) in &last {
            if other == p.worker || their_last <= i {
                continue;
            }
            let theirs = completed.get(&other).copied().unwrap_or(0);
            lead.max = lead.max.max(p.clock - theirs);
            lead.pairs += 1;
        }
        completed.insert(p.worker, p.clock + 1);
    }
    match lead.pairs {
        0 => Lead::default(),
        _ => lead,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pull(worker: u64, clock: i64) -> ClockedPull {
        ClockedPull {
            worker,
            clock,
            ..Default::default()
        }
    }

    #[test]
    fn the_lead_is_measured_against_workers_still_training() {
        // Worker 1 pulls ahead of worker 2; worker 3 pulls once and then never counts.
        let pulls = [
            pull(3, 0),
            pull(1, 0),
            pull(2, 0),
            pull(1, 1),
            pull(1, 2),
            pull(2, 1),
            pull(1, 3),
            pull(2, 2),
        ];
        let lead = lead(&pulls);
        assert_eq!(
            lead.max, 1,
            "worker 1 at clock 2 while worker 2 had completed 1"
        );
        assert_eq!(lead.pairs, 8);
        assert_eq!(super::lead(&[pull(1, 5)]), Lead::default());
    }
}
