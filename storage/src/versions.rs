//! [`Versions`]: a directory whose contents change only by whole, committed versions, so a
//! reader finds the last complete one even while a writer is half-way through the next, or
//! after it died.
//!
//! Layout: `dir/v000001/...`, `dir/v000002/...` and `dir/_CURRENT`, a one-line file naming
//! the committed version. A writer fills a new version directory, then replaces `_CURRENT`
//! in one write (atomic on every store), then removes versions older than the one it
//! replaced. A directory without `_CURRENT` is read as it is, so files laid out by hand (or by
//! another tool) still read.

use bytes::Bytes;

use crate::list::files;
use crate::read::read_all;
use crate::write::{put, remove_all};
use crate::{Location, Result, StorageError};

/// The pointer file's name.
const CURRENT: &str = "_CURRENT";
/// Most bytes `_CURRENT` may hold: a version's name and a newline.
const CURRENT_BYTES: u64 = 4096;

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct Versions {
    dir: Location,
}

/// A version being written: [`Pending::commit`] publishes it; dropping it uncommitted
/// removes what was written.
#[derive(Debug)]
pub struct Pending {
    dir: Location,
    name: String,
    location: Location,
    committed: bool,
}

impl Versions {
    /// The versioned directory at `dir`.
    pub fn new(dir: Location) -> Self {
        Versions { dir }
    }

    /// The directory of the committed version; `dir` itself when it has no `_CURRENT`.
    pub fn current(&self) -> Result<Location> {
        Ok(match self.committed()? {
            Some(name) => self.dir.child(&name),
            None => self.dir.clone(),
        })
    }

    /// The committed version's name, if there is one.
    fn committed(&self) -> Result<Option<String>> {
        let pointer = self.dir.child(CURRENT);
        match read_all(&pointer, CURRENT_BYTES) {
            Ok(text) => {
                let name = String::from_utf8_lossy(&text).trim().to_string();
                match version_number(&name).is_some() {
                    true => Ok(Some(name)),
                    false => Err(StorageError::BadLocation(format!(
                        "{pointer} names '{name}', which is not a version directory (v000001, \
                         v000002, ...)"
                    ))),
                }
            }
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A new, empty version directory to write into, numbered after every existing one.
    pub fn begin(&self) -> Result<Pending> {
        let last = self.versions()?.into_iter().max().unwrap_or(0);
        let name = format!("v{:06}", last + 1);
        Ok(Pending {
            dir: self.dir.clone(),
            location: self.dir.child(&name),
            name,
            committed: false,
        })
    }

    /// The numbers of the version directories present, in order. A store that cannot be
    /// listed is an error: guessing "none" would reuse a committed version's name.
    fn versions(&self) -> Result<Vec<u64>> {
        let found = match files(&self.dir) {
            Ok(found) => found,
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let depth = self.dir.path.parts_count();
        let mut numbers: Vec<u64> = found
            .iter()
            .filter_map(|f| f.path.parts().nth(depth))
            .filter_map(|part| version_number(part.as_ref()))
            .collect();
        numbers.dedup();
        Ok(numbers)
    }
}

impl Pending {
    /// Where to write this version's files.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Publishes this version, then removes versions before the one it replaces (readers that
    /// opened that one keep it).
    pub fn commit(mut self) -> Result<()> {
        let versions = Versions::new(self.dir.clone());
        let replaced = versions.committed().ok().flatten();
        put(
            &self.dir.child(CURRENT),
            Bytes::from(format!("{}\n", self.name)),
        )?;
        self.committed = true;
        // Below both the replaced and this version: another writer may have committed one
        // in between, and neither may go.
        let this = version_number(&self.name).unwrap_or(0);
        let keep = replaced
            .as_deref()
            .and_then(version_number)
            .map_or(0, |r| r.min(this));
        for old in versions.versions().unwrap_or_default() {
            if old < keep {
                let old = self.dir.child(&format!("v{old:06}"));
                if let Err(e) = remove_all(&old) {
                    tracing::warn!(%old, "cannot remove an old version: {e}");
                }
            }
        }
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.committed
            && let Err(e) = remove_all(&self.location)
        {
            tracing::warn!(location = %self.location, "cannot remove an unfinished version: {e}");
        }
    }
}

fn version_number(name: &str) -> Option<u64> {
    let digits = name.strip_prefix('v')?;
    match digits.len() >= 6 && digits.bytes().all(|b| b.is_ascii_digit()) {
        true => digits.parse().ok(),
        false => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_see_the_last_committed_version_only() {
        let dir = tempfile::tempdir().unwrap();
        let versions = Versions::new(Location::parse(&dir.path().display().to_string()).unwrap());
        assert_eq!(
            versions.current().unwrap().to_string(),
            dir.path().display().to_string()
        );
        let write = |text: &'static str| {
            let pending = versions.begin().unwrap();
            put(
                &pending.location().child("f"),
                Bytes::from_static(text.as_bytes()),
            )
            .unwrap();
            pending
        };
        let read = || read_all(&versions.current().unwrap().child("f"), 64).unwrap();
        write("one").commit().unwrap();
        assert_eq!(read(), b"one");
        // A writer that dies before committing: the old version reads, its files are gone.
        let unfinished = write("half");
        let half = unfinished.location().clone();
        assert_eq!(read(), b"one");
        drop(unfinished);
        assert!(files(&half).is_err(), "an unfinished version is removed");
        write("two").commit().unwrap();
        write("three").commit().unwrap();
        assert_eq!(read(), b"three");
        // The replaced version stays for readers that opened it; older ones go.
        assert_eq!(versions.versions().unwrap(), [2, 3]);
        // A writer killed mid-save runs no cleanup: its files stay, unread, until a later
        // commit removes them with the other old versions.
        std::mem::forget(write("killed"));
        assert_eq!(read(), b"three");
        write("five").commit().unwrap();
        write("six").commit().unwrap();
        assert_eq!(read(), b"six");
        assert_eq!(versions.versions().unwrap(), [5, 6]);
        std::fs::write(dir.path().join(CURRENT), "../elsewhere").unwrap();
        let err = versions.current().unwrap_err().to_string();
        assert!(err.contains("not a version directory"), "{err}");
    }
}
