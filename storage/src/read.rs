//! Files as their parsers see them: a blocking reader of the bytes, decompressed when gzip or
//! zstd (by extension, or under any name by magic bytes), so logs kept compressed need no
//! unpacking step. A remote file streams from its store as the parser reads it: it is never
//! copied whole to local disk first.

use std::io::{BufRead, BufReader, Read};

use bytes::Bytes;
use futures::StreamExt;
use object_store::ObjectStoreExt;

use crate::runtime::{io_runtime, on_store};
use crate::{Location, Result, StorageError};

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// Chunks of a remote file in flight between the store and the parser.
const CHUNKS_AHEAD: usize = 8;

/// The bytes of the file at `location`, decompressed, as a blocking reader. Errors (missing
/// file, refused credentials, corrupt compression) name the location. Callable from any
/// thread, in or out of an async runtime: remote reads run on this crate's own I/O runtime.
pub fn open(location: &Location) -> Result<Box<dyn Read + Send>> {
    let io = |e| StorageError::io(location, e);
    let raw: Box<dyn Read + Send> = match location.is_local() {
        true => {
            location.refuse_special(false)?;
            Box::new(std::fs::File::open(format!("/{}", location.path)).map_err(io)?)
        }
        false => Box::new(remote(location)?),
    };
    let mut raw = BufReader::with_capacity(1 << 20, raw);
    let head = raw.fill_buf().map_err(io)?;
    let name = location.file_name().unwrap_or_default();
    let reader: Box<dyn Read + Send> = if name.ends_with(".gz") || head.starts_with(&GZIP_MAGIC) {
        Box::new(flate2::read::MultiGzDecoder::new(raw))
    } else if name.ends_with(".zst") || head.starts_with(&ZSTD_MAGIC) {
        Box::new(zstd::Decoder::with_buffer(raw).map_err(io)?)
    } else {
        Box::new(raw)
    };
    Ok(reader)
}

/// Reads the whole (decompressed) file at `location` into memory, refusing one of more than
/// `max` bytes once decompressed before it holds more: a caller bounds it by what the file
/// can legitimately hold, so a small compressed file cannot expand into all of memory.
pub fn read_all(location: &Location, max: u64) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    (open(location)?.take(max.saturating_add(1)))
        .read_to_end(&mut out)
        .map_err(|e| StorageError::io(location, e))?;
    if out.len() as u64 > max {
        let why = format!("the file holds more than the {max} bytes (decompressed) it may hold");
        return Err(StorageError::io(location, std::io::Error::other(why)));
    }
    Ok(out)
}

/// A remote object as a blocking reader fed by a task streaming it from the store. The
/// request is answered before this returns, so a missing file or refused credentials are
/// reported here, with what to check.
fn remote(location: &Location) -> Result<ChunkReader> {
    let got = on_store(location, location.path.clone(), |store, path| async move {
        store.get(&path).await
    })?;
    // An async channel: a reader that falls behind parks the task, not an I/O thread.
    let (send, receive) = tokio::sync::mpsc::channel(CHUNKS_AHEAD);
    io_runtime().spawn(async move {
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(std::io::Error::other);
            let failed = chunk.is_err();
            // A closed channel means the reader was dropped: stop streaming.
            if send.send(chunk).await.is_err() || failed {
                return;
            }
        }
    });
    Ok(ChunkReader {
        chunks: receive,
        current: Bytes::new(),
    })
}

/// Reads the chunks a streaming task sends, in order; the end of the channel is the end of
/// the file.
struct ChunkReader {
    chunks: tokio::sync::mpsc::Receiver<std::io::Result<Bytes>>,
    current: Bytes,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            // futures' executor parks this thread; callable in or out of a tokio runtime.
            // Unconstrained: inside a runtime, tokio's task budget would otherwise run out
            // and make every poll return at once, spinning this thread.
            let next = tokio::task::unconstrained(self.chunks.recv());
            match futures::executor::block_on(next) {
                Some(chunk) => self.current = chunk?,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn a_long_stream_reads_to_the_end_from_inside_a_runtime() {
        // Thousands of chunks: more than tokio's task budget, which once made this spin.
        let (send, chunks) = tokio::sync::mpsc::channel(CHUNKS_AHEAD);
        io_runtime().spawn(async move {
            for i in 0..5000u32 {
                let _ = send.send(Ok(Bytes::from(i.to_le_bytes().to_vec()))).await;
            }
        });
        let mut reader = ChunkReader {
            chunks,
            current: Bytes::new(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read = runtime.block_on(async move {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).map(|_| all.len())
        });
        assert_eq!(read.unwrap(), 5000 * 4);
    }

    #[test]
    fn a_fifo_or_device_is_refused_at_once_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.csv");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        for path in [fifo.display().to_string(), "/dev/zero".to_string()] {
            let err = open(&Location::parse(&path).unwrap())
                .err()
                .expect("refused");
            let err = err.to_string();
            assert!(
                err.contains("not a regular file") && err.contains(&path),
                "{err}"
            );
        }
    }

    #[test]
    fn local_files_read_plain_or_decompressed_by_name_or_magic() {
        let dir = tempfile::tempdir().unwrap();
        let text = "1,a\n2,b\n".repeat(1000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(text.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        let at = |name: &str| Location::parse(&dir.path().join(name).display().to_string());
        for (name, bytes) in [
            ("plain.csv", text.as_bytes().to_vec()),
            ("t.csv.gz", gz.clone()),
            ("renamed.csv", gz),
            ("t.csv.zst", zstd::encode_all(text.as_bytes(), 3).unwrap()),
        ] {
            std::fs::write(dir.path().join(name), bytes).unwrap();
            let max = text.len() as u64;
            assert_eq!(
                read_all(&at(name).unwrap(), max).unwrap(),
                text.as_bytes(),
                "{name}"
            );
            // A cap bounds what decompression may bring, whatever the file's own size.
            let err = read_all(&at(name).unwrap(), max - 1)
                .unwrap_err()
                .to_string();
            assert!(err.contains(name) && err.contains("more than the"), "{err}");
        }
        std::fs::write(dir.path().join("bad.gz"), b"not gzip").unwrap();
        let err = read_all(&at("bad.gz").unwrap(), 64)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad.gz"), "{err}");
        let err = read_all(&at("absent.csv").unwrap(), 64)
            .unwrap_err()
            .to_string();
        assert!(err.contains("absent.csv"), "{err}");
    }
}
