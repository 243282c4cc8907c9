//! A file written as a stream: [`Upload`] is a blocking `std::io::Write` whose bytes go to the
//! store in parts while the writer goes on (a multipart upload on S3 and HDFS, a staging file
//! renamed at the end on a local disk), so a file larger than memory is written in bounded
//! memory. Readers see the file only once [`Upload::finish`] publishes it whole; an upload
//! dropped unfinished (its writer failed) is aborted and leaves nothing.

use std::io::Write;
use std::sync::mpsc::{Receiver, sync_channel};

use bytes::Bytes;
use object_store::{ObjectStoreExt, WriteMultipart};
use tokio::sync::mpsc;

use crate::runtime::io_runtime;
use crate::{Location, Result, StorageError, stores};

/// Bytes gathered before they go to the store as one part (S3 takes parts of 5 MiB and more).
const PART_BYTES: usize = 8 << 20;
/// Parts in flight between the writer and the store, and parts uploading at once: what an
/// upload holds at most is about `PART_BYTES` times their sum.
const PARTS_AHEAD: usize = 2;

/// What the writer sends the upload task.
enum Part {
    Bytes(Bytes),
    /// The writer finished: publish the file.
    End,
}

/// A file being written at a location; see the module documentation.
pub struct Upload {
    location: Location,
    buffer: Vec<u8>,
    parts: Option<mpsc::Sender<Part>>,
    done: Receiver<Result<()>>,
}

impl Upload {
    /// Starts writing the file at `location`, replacing any file there once finished.
    /// Callable from any thread except the storage I/O runtime's own; writes block while the
    /// store is behind.
    pub fn start(location: &Location) -> Result<Upload> {
        let store = stores().get(location)?;
        let (path, at) = (location.path.clone(), location.clone());
        let (parts, mut received) = mpsc::channel::<Part>(PARTS_AHEAD);
        let (report, done) = sync_channel(1);
        io_runtime().spawn(async move {
            let upload = async {
                let mut file = WriteMultipart::new_with_chunk_size(
                    store.put_multipart(&path).await?,
                    PART_BYTES,
                );
                loop {
                    match received.recv().await {
                        Some(Part::Bytes(bytes)) => {
                            file.wait_for_capacity(PARTS_AHEAD).await?;
                            file.put(bytes);
                        }
                        Some(Part::End) => return file.finish().await.map(drop),
                        // The writer dropped its upload unfinished.
                        None => return file.abort().await,
                    }
                }
            };
            let _ = report.send(upload.await.map_err(|e| StorageError::store(&at, e)));
        });
        Ok(Upload {
            location: location.clone(),
            buffer: Vec::with_capacity(PART_BYTES),
            parts: Some(parts),
            done,
        })
    }

    /// Sends what is buffered as a part, waiting while the store is behind.
    fn send(&self, part: Part) -> std::io::Result<()> {
        let stopped = || std::io::Error::other("the upload stopped");
        let parts = self.parts.as_ref().ok_or_else(stopped)?;
        parts.blocking_send(part).map_err(|_| stopped())
    }

    /// Publishes the file whole, once every byte written reached the store.
    pub fn finish(mut self) -> Result<()> {
        let location = self.location.clone();
        let io = |e| StorageError::io(&location, e);
        let rest = std::mem::take(&mut self.buffer);
        if !rest.is_empty() {
            self.send(Part::Bytes(rest.into())).map_err(io)?;
        }
        // A failed store answers its error below, not a closed channel here.
        let _ = self.send(Part::End);
        self.parts = None;
        self.done.recv().unwrap_or_else(|_| {
            Err(io(std::io::Error::other(
                "the storage task stopped before answering",
            )))
        })
    }
}

impl Write for Upload {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= PART_BYTES {
            let full = std::mem::replace(&mut self.buffer, Vec::with_capacity(PART_BYTES));
            self.send(Part::Bytes(full.into()))?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::read_all;

    #[test]
    fn a_finished_upload_holds_every_byte_and_a_dropped_one_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = Location::parse(&dir.path().display().to_string()).unwrap();
        let file = root.child("d/big.bin");
        let bytes: Vec<u8> = (0..3 * PART_BYTES + 123).map(|i| (i % 251) as u8).collect();
        let mut upload = Upload::start(&file).unwrap();
        for chunk in bytes.chunks(1 << 16) {
            upload.write_all(chunk).unwrap();
        }
        assert!(
            !dir.path().join("d/big.bin").exists(),
            "published only at the end"
        );
        upload.finish().unwrap();
        assert_eq!(read_all(&file, bytes.len() as u64).unwrap(), bytes);

        let other = root.child("d/dropped.bin");
        let mut upload = Upload::start(&other).unwrap();
        upload.write_all(&bytes).unwrap();
        drop(upload);
        let entries = || std::fs::read_dir(dir.path().join("d")).unwrap().count();
        // The abort runs on the I/O runtime: wait for it, boundedly.
        for _ in 0..200 {
            if entries() == 1 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(entries(), 1, "only the finished file is left");
    }
}
