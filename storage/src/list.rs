//! [`files`]: the files a location names, so an input can be one file, a directory of parts
//! or a glob (`s3://logs/2026-11-*/*.csv.gz`), read as one table; [`stamp`]: whether a file
//! changed.
//!
//! Names starting with `_` or `.` are skipped, as Hadoop and Spark do (`_SUCCESS`, `.crc`,
//! `_CURRENT`). A glob's `*` and `?` stay within one path segment; `**` crosses segments.

use futures::TryStreamExt;
use glob::{MatchOptions, Pattern};
use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::runtime::on_store;
use crate::{Location, Result, StorageError};

/// The files at `location` in name order: the file itself, every visible file below a
/// directory, or every visible file a glob matches. Nothing found is an error naming the
/// location.
pub fn files(location: &Location) -> Result<Vec<Location>> {
    let text = location.path.as_ref().to_string();
    let found = match text.find(['*', '?']) {
        Some(at) => matching(location, &text, at)?,
        None => file_or_directory(location)?,
    };
    Ok(found.into_iter().map(|p| location.at_path(p)).collect())
}

/// The files under the literal part of a glob that match it.
fn matching(location: &Location, text: &str, at: usize) -> Result<Vec<Path>> {
    let pattern = Pattern::new(text)
        .map_err(|e| StorageError::BadLocation(format!("'{location}' is not a valid glob: {e}")))?;
    // `parse`, not `from`: the text is already a path, whose characters must not be escaped.
    let prefix = Path::parse(text[..at].rsplit_once('/').map_or("", |(dir, _)| dir))
        .map_err(|e| StorageError::BadLocation(format!("'{location}': {e}")))?;
    let options = MatchOptions {
        require_literal_separator: true,
        ..MatchOptions::default()
    };
    let found: Vec<Path> = listed(location, prefix)?
        .into_iter()
        .filter(|p| pattern.matches_with(p.as_ref(), options))
        .collect();
    match found.is_empty() {
        true => Err(StorageError::BadLocation(format!(
            "no file matches {location}"
        ))),
        false => Ok(found),
    }
}

/// What identifies the content of file `location` now: its size and last change (an edited
/// or replaced file gets a new stamp).
pub fn stamp(location: &Location) -> Result<String> {
    let meta = on_store(location, location.path.clone(), |store, path| async move {
        store.head(&path).await
    })?;
    Ok(format!(
        "{}@{}",
        meta.size,
        meta.last_modified.timestamp_micros()
    ))
}

/// The location itself when it is a file, else the visible files below it.
fn file_or_directory(location: &Location) -> Result<Vec<Path>> {
    let head = on_store(location, location.path.clone(), |store, path| async move {
        store.head(&path).await
    });
    // Not a file (or a store that cannot say): a directory if anything is below it, else
    // the file's error, which says best what is wrong (not found, refused, unreachable).
    match head {
        Ok(_) => Ok(vec![location.path.clone()]),
        Err(not_a_file) => match listed(location, location.path.clone()) {
            Ok(below) if !below.is_empty() => Ok(below),
            _ => Err(not_a_file),
        },
    }
}

/// Every visible file below `prefix` in the store of `location`, sorted.
fn listed(location: &Location, prefix: Path) -> Result<Vec<Path>> {
    let mut paths = on_store(location, prefix, |store, prefix| async move {
        store
            .list(Some(&prefix))
            .map_ok(|meta| meta.location)
            .try_filter(|path| {
                let hidden = path
                    .parts()
                    .skip(prefix.parts_count())
                    .any(|part| part.as_ref().starts_with(['_', '.']));
                std::future::ready(!hidden)
            })
            .try_collect::<Vec<Path>>()
            .await
    })?;
    paths.sort();
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_stamp_changes_with_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = Location::parse(&dir.path().join("x.csv").display().to_string()).unwrap();
        std::fs::write(dir.path().join("x.csv"), "a\n").unwrap();
        let before = stamp(&file).unwrap();
        assert_eq!(stamp(&file).unwrap(), before);
        std::fs::write(dir.path().join("x.csv"), "a\nb\n").unwrap();
        assert_ne!(stamp(&file).unwrap(), before);
        assert!(stamp(&file.child("absent")).is_err());
    }
}
