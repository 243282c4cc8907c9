//! [`Pace`]: how long a rotation step may train (Harp's time control), where each block's
//! rows resume ([`Cursors`]), and the `ANGEL_SLOW_WORKER` hook's slowdown.
//!
//! Under time control a step trains its block's rows from where the last step on that block
//! stopped, around, until the lease's budget runs out; the rest trains in a later round, so a
//! slow worker hands its slices on at the others' pace instead of holding them up.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Rows trained between two looks at the clock.
pub const CHUNK: usize = 256;
/// Blocks whose resume points a process keeps; past it the oldest statement's are forgotten
/// (a forgotten block restarts at its first row).
const MAX_CURSORS: usize = 1 << 20;

/// One step's time: its deadline, and the slowdown the test hook asks for.
#[derive(Debug)]
pub struct Pace {
    deadline: Option<Instant>,
    /// `ANGEL_SLOW_WORKER`'s factor for this worker (1: none).
    slowdown: f64,
    since: Instant,
}

impl Pace {
    /// A step starting now with `budget_us` microseconds (0: no limit), `slowdown` times
    /// slower than it computes.
    pub fn start(budget_us: u64, slowdown: f64) -> Self {
        let now = Instant::now();
        Pace {
            deadline: (budget_us > 0).then(|| now + Duration::from_micros(budget_us)),
            slowdown,
            since: now,
        }
    }

    /// Called after each [`CHUNK`] of rows: sleeps for the slowdown, then says whether the
    /// step may go on.
    pub fn go_on(&mut self) -> bool {
        if self.slowdown > 1.0 {
            std::thread::sleep(self.since.elapsed().mul_f64(self.slowdown - 1.0));
        }
        self.since = Instant::now();
        self.deadline.is_none_or(|d| self.since < d)
    }
}

/// Where each block's rows resume, by (model, block fingerprint): a process's rotation tasks
/// are made afresh each round, and a block's rows and order repeat from round to round.
#[derive(Debug, Default)]
pub struct Cursors(Mutex<HashMap<(String, u64), usize>>);

impl Cursors {
    /// Where block `block` of `model` resumes (0 the first time).
    pub fn get(&self, model: &str, block: u64) -> usize {
        let cursors = self.0.lock().expect("cursors");
        cursors
            .get(&(model.to_string(), block))
            .copied()
            .unwrap_or(0)
    }

    /// Block `block` of `model` resumes at row `at` next time.
    pub fn set(&self, model: &str, block: u64, at: usize) {
        let mut cursors = self.0.lock().expect("cursors");
        if cursors.len() >= MAX_CURSORS {
            cursors.clear();
        }
        match at {
            0 => cursors.remove(&(model.to_string(), block)),
            at => cursors.insert((model.to_string(), block), at),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_stops_after_its_budget_and_resumes_where_it_stopped() {
        let mut unlimited = Pace::start(0, 1.0);
        assert!(unlimited.go_on());
        let mut pace = Pace::start(2_000, 1.0);
        std::thread::sleep(Duration::from_millis(3));
        assert!(!pace.go_on(), "past its 2 ms");
        let cursors = Cursors::default();
        assert_eq!(cursors.get("m", 7), 0);
        cursors.set("m", 7, 40);
        assert_eq!((cursors.get("m", 7), cursors.get("n", 7)), (40, 0));
        cursors.set("m", 7, 0);
        assert_eq!(cursors.get("m", 7), 0);
    }

    #[test]
    fn the_slow_hook_stretches_a_chunk_by_its_factor() {
        let mut pace = Pace::start(0, 3.0);
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(10));
        pace.go_on();
        assert!(started.elapsed() >= Duration::from_millis(30));
    }
}
