//! [`Location`]: a file or directory as angel-ps addresses it, a plain path or a URL.

use std::fmt;

use object_store::path::Path;
use url::Url;

use crate::{Result, StorageError};

/// The URL schemes angel-ps reads and writes, for errors that list them.
const SCHEMES: &str = "plain paths, file://, s3:// (or s3a://), hdfs:// and viewfs://";

/// Where a file or directory lives: the store (`scheme://authority`, e.g. `s3://bucket`) and
/// the path inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The store part: `file:///`, `s3://bucket`, `hdfs://namenode:8020`.
    pub store: Url,
    /// The path in that store, without a leading slash.
    pub path: Path,
    /// As the user wrote it, for messages.
    text: String,
}

impl Location {
    /// Parses a plain path (relative to the working directory) or a URL.
    pub fn parse(text: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return bad("an empty path: name a file, a directory or a URL".into());
        }
        if !text.contains("://") {
            return Self::local(text);
        }
        // `?` is a glob character and `#` a character of a key, not a query or a fragment.
        let url = match Url::parse(&text.replace('?', "%3F").replace('#', "%23")) {
            Ok(url) => url,
            Err(e) => return bad(format!("'{text}' is not a valid URL: {e}")),
        };
        let authority = |url: &Url| -> Result<Url> {
            let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
                return bad(format!(
                    "'{text}' names no {} after {}://",
                    if url.scheme().starts_with("s3") {
                        "bucket"
                    } else {
                        "name node or name service"
                    },
                    url.scheme()
                ));
            };
            let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
            let scheme = if url.scheme() == "s3a" {
                "s3"
            } else {
                url.scheme()
            };
            Url::parse(&format!("{scheme}://{host}{port}"))
                .or_else(|e| bad(format!("'{text}': {e}")))
        };
        let store = match url.scheme() {
            "file" => return Self::file_url(text, &url),
            "s3" | "s3a" | "hdfs" | "viewfs" => authority(&url)?,
            other => {
                return bad(format!(
                    "unknown URL scheme '{other}' in '{text}' (angel-ps reads and writes {SCHEMES})"
                ));
            }
        };
        let path =
            Path::from_url_path(url.path()).or_else(|e| bad(format!("'{text}': bad path: {e}")))?;
        Ok(Location {
            store,
            path,
            text: text.to_string(),
        })
    }

    /// A local path, made absolute against the working directory, with `.` and `..` folded
    /// away (object store paths have no such segments).
    fn local(text: &str) -> Result<Self> {
        use std::path::{Component, PathBuf};
        let absolute = std::path::absolute(text)
            .map_err(|e| StorageError::BadLocation(format!("'{text}': {e}")))?;
        let absolute = absolute
            .components()
            .fold(PathBuf::new(), |mut path, part| {
                match part {
                    Component::ParentDir => {
                        path.pop();
                    }
                    Component::CurDir => {}
                    other => path.push(other),
                }
                path
            });
        let path = Path::from_absolute_path(&absolute)
            .map_err(|e| StorageError::BadLocation(format!("'{text}': {e}")))?;
        Ok(Location {
            store: Url::parse("file:///").expect("a valid URL"),
            path,
            text: text.to_string(),
        })
    }

    /// A `file://` URL: a path on this machine (`file:///p` or `file://localhost/p`).
    fn file_url(text: &str, url: &Url) -> Result<Self> {
        match url.host_str() {
            None | Some("") | Some("localhost") => Self::local(
                &url.to_file_path()
                    .map_or_else(|_| url.path().to_string(), |p| p.display().to_string()),
            ),
            Some(host) => bad(format!(
                "'{text}' names the host '{host}': a file:// URL is a path on this machine, \
                 written file:///path (three slashes)"
            )),
        }
    }

    /// True for files on this machine's file system.
    pub fn is_local(&self) -> bool {
        self.store.scheme() == "file"
    }

    /// Refuses a local path that is there but is not a regular file (nor a directory, when
    /// `directory` allows one): a FIFO, a device, a socket. Checked before anything opens it:
    /// opening a FIFO waits for a writer, forever, and a device never ends.
    pub(crate) fn refuse_special(&self, directory: bool) -> Result<()> {
        let meta = match self.is_local() {
            true => std::fs::metadata(format!("/{}", self.path)),
            false => return Ok(()),
        };
        match meta {
            Ok(meta) if !(meta.is_file() || directory && meta.is_dir()) => Err(StorageError::io(
                self,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "not a regular file (a FIFO, device or directory?)",
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The location `name` below this one (a file in a directory; `a/b` is two levels).
    pub fn child(&self, name: &str) -> Location {
        let path = name
            .split('/')
            .filter(|part| !part.is_empty())
            .fold(self.path.clone(), |path, part| path.join(part));
        Location {
            store: self.store.clone(),
            path,
            text: format!("{}/{name}", self.text.trim_end_matches('/')),
        }
    }

    /// The location of `path` in this location's store (a file found by listing).
    pub fn at_path(&self, path: Path) -> Location {
        let text = match self.is_local() {
            true => format!("/{path}"),
            false => format!("{}/{path}", self.store.as_str().trim_end_matches('/')),
        };
        Location {
            store: self.store.clone(),
            path,
            text,
        }
    }

    /// The whole URL, as DataFusion's table paths take it.
    pub fn url(&self) -> String {
        match self.is_local() {
            // `file:///` without its slashes would be `file:`, a relative path.
            true => format!("file:///{}", self.path),
            false => format!(
                "{}/{}",
                self.store.as_str().trim_end_matches('/'),
                self.path
            ),
        }
    }

    /// The file name (last path segment), for choosing a decompressor by extension.
    pub fn file_name(&self) -> Option<&str> {
        self.path.filename()
    }
}

/// The error for a text that is no usable location.
fn bad<T>(why: String) -> Result<T> {
    Err(StorageError::BadLocation(why))
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_urls_split_into_store_and_path() {
        let s3 = Location::parse("s3://logs/day 1/a.csv.gz").unwrap();
        assert_eq!(s3.store.as_str(), "s3://logs");
        assert_eq!(s3.path.as_ref(), "day 1/a.csv.gz");
        assert_eq!(s3.file_name(), Some("a.csv.gz"));
        assert_eq!(s3.child("x").to_string(), "s3://logs/day 1/a.csv.gz/x");
        assert_eq!(s3.child("v1/f").path.as_ref(), "day 1/a.csv.gz/v1/f");
        let hash = Location::parse("s3://b/k#1").unwrap();
        assert_eq!(hash.path.as_ref(), "k#1");
        let hdfs = Location::parse("hdfs://nn:8020/user/a/model").unwrap();
        assert_eq!(hdfs.store.as_str(), "hdfs://nn:8020");
        assert_eq!(hdfs.url(), "hdfs://nn:8020/user/a/model");
        assert_eq!(
            Location::parse("s3a://b/k").unwrap().store.as_str(),
            "s3://b"
        );
        let up = Location::parse("/a/b/../c/./d.csv").unwrap();
        assert_eq!(up.path.as_ref(), "a/c/d.csv");
        let local = Location::parse("some/dir").unwrap();
        assert!(local.is_local() && local.path.as_ref().ends_with("some/dir"));
        let file = Location::parse("file:///tmp/x.csv").unwrap();
        assert_eq!((file.is_local(), file.path.as_ref()), (true, "tmp/x.csv"));
        assert_eq!(file.url(), "file:///tmp/x.csv");
        assert_eq!(
            Location::parse(&up.url()).unwrap().path,
            up.path,
            "a URL parses back"
        );
        let glob = Location::parse("s3://b/day-?/*.csv").unwrap();
        assert_eq!(glob.path.as_ref(), "day-?/*.csv");
        let found = glob.at_path(Path::from("day-1/a.csv"));
        assert_eq!(found.to_string(), "s3://b/day-1/a.csv");
    }

    #[test]
    fn bad_locations_say_what_is_wrong() {
        for (text, words) in [
            ("", "an empty path"),
            ("gs://b/k", "unknown URL scheme 'gs'"),
            ("s3:///key", "names no bucket"),
            ("hdfs:///p", "names no name node"),
            ("file://data/x.csv", "names the host 'data'"),
        ] {
            let err = Location::parse(text).unwrap_err().to_string();
            assert!(err.contains(words), "{text}: {err}");
        }
    }
}
