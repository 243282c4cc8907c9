//! Small configuration files (tokens, namespace tokens, certificates and keys) read with a
//! cap: a path to `/dev/zero`, a FIFO or a huge file is refused at once, naming it, instead of
//! growing the process or blocking its start.

use std::io::Read;
use std::path::Path;

use crate::{PsError, Result};

/// The largest configuration file read: far above any token list or certificate chain.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The bytes of the regular file at `path`; `what` (a flag, "token file") names it in errors.
pub fn read(path: &Path, what: &str) -> Result<Vec<u8>> {
    let bad = |why: String| PsError::InvalidArgument(format!("{what} {}: {why}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(bad(
            "not a regular file (a FIFO, device or directory?)".into()
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(bad(format!(
            "larger than {} KiB; a configuration file is far smaller",
            MAX_CONFIG_BYTES >> 10
        )));
    }
    Ok(bytes)
}

/// [`read`], as UTF-8 text.
pub fn read_text(path: &Path, what: &str) -> Result<String> {
    String::from_utf8(read(path, what)?).map_err(|e| {
        PsError::InvalidArgument(format!(
            "{what} {}: not UTF-8 text (byte {})",
            path.display(),
            e.utf8_error().valid_up_to() + 1
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_huge_files_are_refused_naming_them() {
        let err = read(Path::new("/dev/zero"), "--token-file")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--token-file /dev/zero: not a regular file"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let err = read(dir.path(), "--tls-ca").unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; MAX_CONFIG_BYTES as usize + 1]).unwrap();
        let err = read(&big, "token file").unwrap_err().to_string();
        assert!(err.contains("larger than 1024 KiB"), "{err}");
        let ok = dir.path().join("ok");
        std::fs::write(&ok, "secret\n").unwrap();
        assert_eq!(read_text(&ok, "token file").unwrap(), "secret\n");
    }
}
