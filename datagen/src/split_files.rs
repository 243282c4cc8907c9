//! [`SplitFiles`]: the two files a data generator writes, the training rows and the holdout,
//! with the rows each got. Which file a row goes to is drawn from the generator's own random
//! numbers, so the same seed splits the same way.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use rand::Rng;

/// See the module documentation.
pub struct SplitFiles {
    train: BufWriter<File>,
    holdout: BufWriter<File>,
    /// Rows given to the training file and to the holdout file so far.
    counts: (u64, u64),
}

impl SplitFiles {
    /// Creates (or truncates) `train` and `holdout`, each starting with `header` (a line).
    pub fn create(train: &Path, holdout: &Path, header: Option<&str>) -> std::io::Result<Self> {
        let open = |path: &Path| -> std::io::Result<BufWriter<File>> {
            let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
            if let Some(header) = header {
                writeln!(out, "{header}")?;
            }
            Ok(out)
        };
        Ok(SplitFiles {
            train: open(train)?,
            holdout: open(holdout)?,
            counts: (0, 0),
        })
    }

    /// The file the next row goes to: the holdout with probability `share`, drawn from `rng`.
    pub fn pick(&mut self, rng: &mut impl Rng, share: f64) -> &mut BufWriter<File> {
        match rng.random::<f64>() < share {
            true => {
                self.counts.1 += 1;
                &mut self.holdout
            }
            false => {
                self.counts.0 += 1;
                &mut self.train
            }
        }
    }

    /// Writes out both files; returns the rows each got (training, holdout).
    pub fn finish(mut self) -> std::io::Result<(u64, u64)> {
        self.train.flush()?;
        self.holdout.flush()?;
        Ok(self.counts)
    }
}
