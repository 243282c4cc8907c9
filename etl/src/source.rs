//! Input files as their readers see them: whole, and decompressed by extension (`.gz` gzip,
//! `.zst` zstd), so logs kept compressed need no unpacking step and the repository can keep
//! its data sets small.

use std::io::Read;
use std::path::Path;

use crate::EtlError;

/// The bytes of the file at `path`, decompressed when it is gzip or zstd: by its extension
/// (`.gz`, `.zst`) or, whatever its name, by the format's magic number, so a compressed file
/// under a plain name reads as its contents rather than failing as invalid text.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, EtlError> {
    let io = |e| EtlError::Io(path.display().to_string(), e);
    let raw = std::fs::read(path).map_err(io)?;
    let extension = path.extension().and_then(|e| e.to_str());
    let mut out = Vec::new();
    if extension == Some("gz") || raw.starts_with(&GZIP_MAGIC) {
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| io(invalid(format!("not valid gzip data: {e}"))))?;
    } else if extension == Some("zst") || raw.starts_with(&ZSTD_MAGIC) {
        zstd::Decoder::new(&raw[..])
            .and_then(|mut d| d.read_to_end(&mut out))
            .map_err(|e| io(invalid(format!("not valid zstd data: {e}"))))?;
    } else {
        return Ok(raw);
    }
    Ok(out)
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

/// The lines of `bytes` with their 1-based numbers, each as text or, when it is not valid
/// UTF-8, the reason naming the byte: so a reader can report or skip that one line.
pub fn lines(bytes: &[u8]) -> impl Iterator<Item = (u64, Result<&str, String>)> {
    bytes.split(|&b| b == b'\n').enumerate().map(|(i, line)| {
        let text = std::str::from_utf8(line)
            .map_err(|e| format!("invalid UTF-8 at byte {} of the line", e.valid_up_to() + 1));
        (i as u64 + 1, text)
    })
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
        assert_eq!(read_bytes(&gz).unwrap(), text.repeat(2).as_bytes());
        // The same bytes under a plain name are still gzip.
        let plain = dir.path().join("t.csv");
        std::fs::write(&plain, &twice).unwrap();
        assert_eq!(read_bytes(&plain).unwrap(), text.repeat(2).as_bytes());

        let zst = dir.path().join("t.csv.zst");
        std::fs::write(&zst, zstd::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
        assert_eq!(read_bytes(&zst).unwrap(), text.as_bytes());
    }

    #[test]
    fn lines_report_invalid_utf8_one_line_at_a_time() {
        let got: Vec<_> = lines(b"a\n\xffb\nc").collect();
        assert_eq!(got[0], (1, Ok("a")));
        assert_eq!(got[1].0, 2);
        assert!(got[1].1.as_ref().unwrap_err().contains("byte 1"));
        assert_eq!(got[2], (3, Ok("c")));
    }

    #[test]
    fn corrupt_or_missing_files_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.gz");
        std::fs::write(&bad, b"not gzip at all").unwrap();
        let err = read_bytes(&bad).unwrap_err().to_string();
        assert!(
            err.contains("bad.gz") && err.contains("not valid gzip"),
            "{err}"
        );
        let err = read_bytes(&dir.path().join("absent.csv"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("absent.csv"), "{err}");
    }
}
