//! [`files`]: the files a location names, so an input can be one file, a directory of parts
//! or a glob (`s3://logs/2026-11-*/*.csv.gz`), read as one table; [`stamped`]: the same with
//! what tells a changed file, from the same listing.
//!
//! Names starting with `_` or `.` are skipped, as Hadoop and Spark do (`_SUCCESS`, `.crc`,
//! `_CURRENT`). A glob's `*` and `?` stay within one path segment; `**` crosses segments.

use futures::TryStreamExt;
use glob::{MatchOptions, Pattern};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStoreExt};

use crate::runtime::on_store;
use crate::{Location, Result, StorageError};

/// The files at `location` in name order: the file itself, every visible file below a
/// directory, or every visible file a glob matches. Nothing found is an error naming the
/// location.
pub fn files(location: &Location) -> Result<Vec<Location>> {
    Ok(found(location)?
        .into_iter()
        .map(|meta| location.at_path(meta.location))
        .collect())
}

/// [`files`], each with its stamp: its size and last change, so an edited or replaced file
/// gets a new one.
pub fn stamped(location: &Location) -> Result<Vec<(Location, String)>> {
    Ok(found(location)?
        .into_iter()
        .map(|meta| {
            let stamp = format!("{}@{}", meta.size, meta.last_modified.timestamp_micros());
            (location.at_path(meta.location), stamp)
        })
        .collect())
}

/// The files at `location`, as the store describes them.
fn found(location: &Location) -> Result<Vec<ObjectMeta>> {
    let text = location.path.as_ref().to_string();
    match text.find(['*', '?']) {
        Some(at) => matching(location, &text, at),
        None => file_or_directory(location),
    }
}

/// The files under the literal part of a glob that match it.
fn matching(location: &Location, text: &str, at: usize) -> Result<Vec<ObjectMeta>> {
    let pattern = Pattern::new(text)
        .map_err(|e| StorageError::BadLocation(format!("'{location}' is not a valid glob: {e}")))?;
    // `parse`, not `from`: the text is already a path, whose characters must not be escaped.
    let prefix = Path::parse(text[..at].rsplit_once('/').map_or("", |(dir, _)| dir))
        .map_err(|e| StorageError::BadLocation(format!("'{location}': {e}")))?;
    let options = MatchOptions {
        require_literal_separator: true,
        ..MatchOptions::default()
    };
    let found: Vec<ObjectMeta> = listed(location, prefix)?
        .into_iter()
        .filter(|meta| pattern.matches_with(meta.location.as_ref(), options))
        .collect();
    match found.is_empty() {
        true => Err(StorageError::BadLocation(format!(
            "no file matches {location}"
        ))),
        false => Ok(found),
    }
}

/// The location itself when it is a file, else the visible files below it.
fn file_or_directory(location: &Location) -> Result<Vec<ObjectMeta>> {
    // The local store opens a file to describe it, which waits forever on a FIFO.
    location.refuse_special(true)?;
    let head = on_store(location, location.path.clone(), |store, path| async move {
        store.head(&path).await
    });
    // Not a file (or a store that cannot say): a directory if anything is below it, else
    // the file's error, which says best what is wrong (not found, refused, unreachable).
    match head {
        Ok(meta) => Ok(vec![meta]),
        Err(not_a_file) => match listed(location, location.path.clone()) {
            Ok(below) if !below.is_empty() => Ok(below),
            _ => Err(not_a_file),
        },
    }
}

/// Every visible file below `prefix` in the store of `location`, sorted.
fn listed(location: &Location, prefix: Path) -> Result<Vec<ObjectMeta>> {
    let mut found = on_store(location, prefix, |store, prefix| async move {
        store
            .list(Some(&prefix))
            .try_filter(|meta| {
                let hidden = (meta.location)
                    .parts()
                    .skip(prefix.parts_count())
                    .any(|part| part.as_ref().starts_with(['_', '.']));
                std::future::ready(!hidden)
            })
            .try_collect::<Vec<ObjectMeta>>()
            .await
    })?;
    found.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO without a writer, or a device, is refused at once, naming it: the store would
    /// open it to describe it, and wait.
    #[test]
    fn a_fifo_or_device_is_refused_before_the_store_opens_it() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.csv");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        for path in [fifo.display().to_string(), "/dev/null".to_string()] {
            let err = files(&Location::parse(&path).unwrap())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("not a regular file") && err.contains(&path),
                "{err}"
            );
        }
    }

    #[test]
    fn files_directories_and_globs_list_visible_files_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "a/1.csv",
            "a/2.csv",
            "a/_SUCCESS",
            "a/.x.crc",
            "a/b/3.csv",
            "c.txt",
        ] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, name).unwrap();
        }
        let names = |text: &str| -> Result<Vec<String>> {
            let root = dir.path().display().to_string();
            let found = files(&Location::parse(&format!("{root}/{text}"))?)?;
            Ok(found
                .iter()
                .map(|l| l.to_string().trim_start_matches(&root).to_string())
                .collect())
        };
        assert_eq!(names("c.txt").unwrap(), ["/c.txt"]);
        assert_eq!(names("a").unwrap(), ["/a/1.csv", "/a/2.csv", "/a/b/3.csv"]);
        assert_eq!(names("a/*.csv").unwrap(), ["/a/1.csv", "/a/2.csv"]);
        assert_eq!(names("a/?.csv").unwrap(), ["/a/1.csv", "/a/2.csv"]);
        assert_eq!(names("**/*.csv").unwrap().len(), 3);
        let err = names("a/*.parquet").unwrap_err().to_string();
        assert!(
            err.contains("no file matches") && err.contains("a/*.parquet"),
            "{err}"
        );
        let err = names("absent").unwrap_err().to_string();
        assert!(err.contains("absent"), "{err}");
    }

    #[test]
    fn a_stamp_changes_with_the_file_whether_named_or_listed() {
        let dir = tempfile::tempdir().unwrap();
        let root = Location::parse(&dir.path().display().to_string()).unwrap();
        let stamps = |location: &Location| -> Vec<String> {
            (stamped(location).unwrap().into_iter())
                .map(|(file, stamp)| format!("{file} {stamp}"))
                .collect()
        };
        std::fs::write(dir.path().join("x.csv"), "a\n").unwrap();
        let (file, listed) = (stamps(&root.child("x.csv")), stamps(&root));
        assert_eq!(file, listed, "a file named or found in its directory");
        assert_eq!(stamps(&root.child("x.csv")), file);
        std::fs::write(dir.path().join("x.csv"), "a\nb\n").unwrap();
        assert_ne!(stamps(&root.child("x.csv")), file);
        assert_ne!(stamps(&root), listed);
        assert!(stamped(&root.child("absent")).is_err());
    }
}
