//! [`Marks`]: which changes `(writer, seq)` a partition has applied, so a resent, replayed or
//! retried change is applied at most once. Kept with the partition, and in its snapshot.
//!
//! Per writer: every seq below `floor`, and the set of seqs at or above it. A writer's changes
//! reach a partition in about the order it made them, so the set stays small; past
//! [`WINDOW`] seqs the oldest fold into `floor`. Past [`MAX_WRITERS`] writers the least
//! recently seen ones are forgotten (a change of theirs resent after that would apply again;
//! by then it is hours old).

use std::collections::{BTreeSet, HashMap};

use angel_proto::{PsError, Result, WriterMarks, wire};

/// Seqs kept per writer above its floor.
pub const WINDOW: usize = 4096;
/// Writers remembered per partition.
pub const MAX_WRITERS: usize = 16384;

#[derive(Debug, Clone, Default)]
struct Window {
    floor: u64,
    seen: BTreeSet<u64>,
    last_used: u64,
}

/// Whether a partition applied a change before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Not before: apply it.
    First,
    /// It was applied: a resend, replay or retried task's repeat.
    Again,
    /// Its seq is below the writer's window: either applied long ago, or so late that
    /// [`WINDOW`] newer changes of its writer came first. Refused, and counted apart, since it
    /// may be a change lost.
    BelowWindow,
}

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Marks {
    writers: HashMap<u64, Window>,
    tick: u64,
}

impl Marks {
    /// Records `(writer, seq)` and says whether it was seen before. Writer 0 is anonymous
    /// and never deduplicated.
    pub fn see(&mut self, writer: u64, seq: u64) -> Seen {
        if writer == 0 {
            return Seen::First;
        }
        self.tick += 1;
        if !self.writers.contains_key(&writer) && self.writers.len() >= MAX_WRITERS {
            self.forget_oldest();
        }
        let window = self.writers.entry(writer).or_default();
        window.last_used = self.tick;
        if seq < window.floor {
            return Seen::BelowWindow;
        }
        if !window.seen.insert(seq) {
            return Seen::Again;
        }
        while window.seen.len() > WINDOW {
            let oldest = window.seen.pop_first().expect("over the window");
            window.floor = oldest + 1;
        }
        Seen::First
    }

    /// Drops the eighth of the writers seen longest ago.
    fn forget_oldest(&mut self) {
        let mut ages: Vec<u64> = self.writers.values().map(|w| w.last_used).collect();
        let cut = ages.len() / 8;
        let (_, &mut limit, _) = ages.select_nth_unstable(cut);
        self.writers.retain(|_, w| w.last_used > limit);
    }

    /// The marks as a snapshot stores them.
    pub fn to_proto(&self) -> Vec<WriterMarks> {
        self.writers
            .iter()
            .map(|(&writer, w)| WriterMarks {
                writer,
                floor: w.floor,
                seqs: wire::encode_keys(&w.seen.iter().copied().collect::<Vec<_>>()),
            })
            .collect()
    }

    /// Marks read back from a snapshot.
    pub fn from_proto(marks: &[WriterMarks]) -> Result<Self> {
        let mut writers = HashMap::with_capacity(marks.len());
        for m in marks {
            let seen: BTreeSet<u64> = wire::decode_keys(&m.seqs, "marks")?.into_iter().collect();
            if seen.len() > WINDOW {
                return Err(PsError::DataLoss(format!(
                    "writer {} has {} marks, over the window of {WINDOW}",
                    m.writer,
                    seen.len()
                )));
            }
            let window = Window {
                floor: m.floor,
                seen,
                last_used: 0,
            };
            writers.insert(m.writer, window);
        }
        Ok(Marks { writers, tick: 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_applies_once_in_any_order() {
        let mut marks = Marks::default();
        for seq in [5, 1, 3, 2, 4] {
            assert_eq!(marks.see(9, seq), Seen::First);
        }
        for seq in 1..=5 {
            assert_eq!(marks.see(9, seq), Seen::Again, "seq {seq} twice");
        }
        assert_eq!(marks.see(8, 1), Seen::First, "another writer's seq 1");
        assert_eq!(
            (marks.see(0, 1), marks.see(0, 1)),
            (Seen::First, Seen::First)
        );
    }

    #[test]
    fn old_seqs_fold_into_the_floor_and_survive_a_snapshot() {
        let mut marks = Marks::default();
        for seq in 1..(WINDOW as u64 + 10) {
            assert_eq!(marks.see(1, seq), Seen::First);
        }
        let mut back = Marks::from_proto(&marks.to_proto()).unwrap();
        assert_eq!(back.see(1, 1), Seen::BelowWindow, "folded into the floor");
        assert_eq!(
            back.see(1, 0),
            Seen::BelowWindow,
            "never seen, but too late"
        );
        assert_eq!(back.see(1, WINDOW as u64 + 9), Seen::Again, "in the window");
        assert_eq!(back.see(1, WINDOW as u64 + 10), Seen::First, "new");
    }

    #[test]
    fn writers_past_the_limit_forget_the_oldest() {
        let mut marks = Marks::default();
        for writer in 1..=(MAX_WRITERS as u64 + 1) {
            marks.see(writer, 0);
        }
        assert!(marks.writers.len() <= MAX_WRITERS);
        assert_eq!(
            marks.see(MAX_WRITERS as u64 + 1, 0),
            Seen::Again,
            "the newest is kept"
        );
    }
}
