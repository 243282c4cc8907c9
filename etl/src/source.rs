//! Input files as their readers see them: whole, and decompressed by extension (`.gz` gzip,
//! `.zst` zstd), so logs kept compressed need no unpacking step and the repository can keep
//! its data sets small.

use std::io::Read;
use std::path::Path;

use crate::EtlError;

/// The contents of `path`, decompressed when its name ends in `.gz` (gzip, one or more
/// members, as `cat a.gz b.gz` makes) or `.zst` (zstd).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, EtlError> {
    let io = |e| EtlError::Io(path.display().to_string(), e);
    let mut out = Vec::new();
    match path.extension().and_then(|e| e.to_str()) {
        Some("gz") => {
            let file = std::fs::File::open(path).map_err(io)?;
            flate2::read::MultiGzDecoder::new(file).read_to_end(&mut out)
        }
        Some("zst") => {
            let file = std::fs::File::open(path).map_err(io)?;
            zstd::Decoder::new(file).and_then(|mut d| d.read_to_end(&mut out))
        }
        _ => return std::fs::read(path).map_err(io),
    }
    .map_err(io)?;
    Ok(out)
}

/// The file's display name and its (decompressed) contents as UTF-8 text.
pub fn read_text(path: &Path) -> Result<(String, String), EtlError> {
    let name = path.display().to_string();
    let text = String::from_utf8(read_bytes(path)?).map_err(|e| {
        EtlError::Io(
            name.clone(),
            std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
        )
    })?;
    Ok((name, text))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn compressed_files_read_as_their_contents() {
        let dir = tempfile::tempdir().unwrap();
        let text = "1,a\n2,b\n".repeat(1000);
        let gz = dir.path().join("t.csv.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(text.as_bytes()).unwrap();
        let mut twice = enc.finish().unwrap();
        twice.extend_from_slice(&twice.clone());
        std::fs::write(&gz, &twice).unwrap();
        assert_eq!(read_text(&gz).unwrap().1, text.repeat(2));

        let zst = dir.path().join("t.csv.zst");
        std::fs::write(&zst, zstd::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
        assert_eq!(read_bytes(&zst).unwrap(), text.as_bytes());
    }

    #[test]
    fn corrupt_or_missing_files_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.gz");
        std::fs::write(&bad, b"not gzip at all").unwrap();
        let err = read_bytes(&bad).unwrap_err().to_string();
        assert!(err.contains("bad.gz"), "{err}");
        let err = read_bytes(&dir.path().join("absent.csv"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("absent.csv"), "{err}");
    }
}
