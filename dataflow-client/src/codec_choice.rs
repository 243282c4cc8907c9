//! Whether the next push to a compressed matrix is compressed, decided from measured times.
//!
//! SketchML trades encoding time on the client (and decoding on the server) for transfer time.
//! Over a slow link that pays; on loopback or a fast network the encoder is slower than the link
//! and compressing makes every push slower. So under `compression_mode = 'auto'` the client
//! times its own pushes (encode, send, decode on the server, acknowledge) per raw byte, in both
//! forms, and sends each push the way whose recent pushes were cheaper (the median of the last
//! [`RECENT`], so a push held up behind other traffic does not turn the choice). One push in
//! [`PROBE_EVERY`] goes the other way, so the choice follows a change of link or load.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

/// The first pushes alternate between the two forms, to measure both.
const WARM_UP: u64 = 8;
/// After the warm-up, one push in this many goes the way that measured slower.
pub const PROBE_EVERY: u64 = 16;
/// Samples per form the choice compares medians of.
pub const RECENT: usize = 9;

/// One matrix's measured push costs, shared by every task of the process pushing to it.
#[derive(Debug, Default)]
pub struct CodecChoice {
    tally: Mutex<Tally>,
}

#[derive(Debug, Default)]
struct Tally {
    /// Pushes decided so far.
    decided: u64,
    /// The last [`RECENT`] seconds per raw byte: raw pushes at 0, compressed ones at 1.
    recent: [VecDeque<f64>; 2],
}

impl CodecChoice {
    /// Whether the next push should be compressed; the caller reports how it went with
    /// [`CodecChoice::record`].
    pub fn compress(&self) -> bool {
        let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        let n = tally.decided;
        tally.decided += 1;
        if n < WARM_UP {
            return n.is_multiple_of(2);
        }
        let better = tally.compressed_is_cheaper();
        if n % PROBE_EVERY == PROBE_EVERY - 1 {
            !better
        } else {
            better
        }
    }

    /// Whether compressed pushes have measured cheaper so far (or are not measured yet); pulls
    /// follow it to decide whether to Rice-code their keys.
    pub fn prefers_compressed(&self) -> bool {
        let tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        tally.compressed_is_cheaper()
    }

    /// Records a push of `raw_bytes` (its size uncompressed) that took `took`, end to end.
    pub fn record(&self, compressed: bool, raw_bytes: usize, took: Duration) {
        if raw_bytes == 0 {
            return;
        }
        let sample = took.as_secs_f64() / raw_bytes as f64;
        let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        let recent = &mut tally.recent[usize::from(compressed)];
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back(sample);
    }
}

impl Tally {
    /// Compressed unless raw pushes measured cheaper; a form not measured yet loses to the
    /// compression the model asked for.
    fn compressed_is_cheaper(&self) -> bool {
        match self.recent.each_ref().map(median) {
            [Some(raw), Some(compressed)] => compressed <= raw,
            _ => true,
        }
    }
}

/// The median of `samples`, if any.
fn median(samples: &VecDeque<f64>) -> Option<f64> {
    let mut sorted: Vec<f64> = samples.iter().copied().collect();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `pushes` pushes of 1 MB where a raw one takes `raw` and a compressed one
    /// `compressed`; returns how many were compressed.
    fn run(choice: &CodecChoice, pushes: u32, raw: Duration, compressed: Duration) -> u32 {
        (0..pushes)
            .map(|_| {
                let c = choice.compress();
                choice.record(c, 1 << 20, if c { compressed } else { raw });
                u32::from(c)
            })
            .sum()
    }

    #[test]
    fn it_settles_on_the_faster_form_and_keeps_probing_the_other() {
        let ms = Duration::from_millis;
        let slow_link = CodecChoice::default();
        let compressed = run(&slow_link, 1000, ms(4), ms(2));
        assert!(
            compressed >= 1000 - 1000 / PROBE_EVERY as u32 - 8,
            "{compressed}"
        );
        assert!(compressed < 1000, "the raw form is still probed");

        let fast_link = CodecChoice::default();
        let compressed = run(&fast_link, 1000, ms(2), ms(3));
        assert!(compressed <= 1000 / PROBE_EVERY as u32 + 8, "{compressed}");
        assert!(compressed > 0, "the compressed form is still probed");
    }

    #[test]
    fn a_change_of_link_turns_the_choice() {
        let ms = Duration::from_millis;
        let choice = CodecChoice::default();
        run(&choice, 200, ms(2), ms(3));
        // The link slows down: within a few probes compression takes over.
        run(&choice, 200, ms(6), ms(3));
        let compressed = run(&choice, 100, ms(6), ms(3));
        assert!(compressed >= 90, "{compressed} of 100 compressed");
    }

    #[test]
    fn a_few_held_up_pushes_do_not_turn_the_choice() {
        let ms = Duration::from_millis;
        let choice = CodecChoice::default();
        run(&choice, 100, ms(2), ms(3));
        for _ in 0..RECENT / 2 {
            choice.record(false, 1 << 20, ms(50));
        }
        assert!(!choice.prefers_compressed(), "four slow raw pushes of nine");
    }

    #[test]
    fn without_measurements_it_compresses_as_asked() {
        let choice = CodecChoice::default();
        for _ in 0..WARM_UP {
            choice.compress();
        }
        assert!(choice.compress(), "nothing recorded: compress");
        assert!(choice.prefers_compressed());
        choice.record(false, 1000, Duration::from_millis(1));
        choice.record(true, 1000, Duration::from_millis(2));
        assert!(!choice.prefers_compressed(), "raw measured cheaper");
    }
}
