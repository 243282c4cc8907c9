//! Writing: a whole file at once ([`put`], atomic per file on every store: S3 and HDFS
//! publish an object only when complete, the local store writes a temporary file and renames
//! it), and removing a directory's files ([`remove_all`]).

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;

use crate::runtime::on_store;
use crate::{Location, Result};

/// Writes `bytes` as the file at `location`, replacing any file there; readers see the old
/// file or the new one, never a part.
pub fn put(location: &Location, bytes: Bytes) -> Result<()> {
    on_store(location, location.path.clone(), |store, path| async move {
        store.put(&path, bytes.into()).await.map(|_| ())
    })
}

/// Removes every file below `location` (a directory; nothing there is no error).
pub fn remove_all(location: &Location) -> Result<()> {
    on_store(
        location,
        location.path.clone(),
        |store, prefix| async move {
            let paths = store
                .list(Some(&prefix))
                .map_ok(|meta| meta.location)
                .boxed();
            store
                .delete_stream(paths)
                .try_collect::<Vec<_>>()
                .await
                .map(|_| ())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::read_all;

    #[test]
    fn put_replaces_whole_files_and_remove_all_empties_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = Location::parse(&dir.path().display().to_string()).unwrap();
        let file = root.child("d/x.txt");
        put(&file, Bytes::from_static(b"one")).unwrap();
        put(&file, Bytes::from_static(b"two")).unwrap();
        assert_eq!(read_all(&file, 3).unwrap(), b"two");
        assert!(read_all(&file, 2).is_err(), "past its cap");
        put(&root.child("d/e/y.txt"), Bytes::from_static(b"y")).unwrap();
        remove_all(&root.child("d")).unwrap();
        assert!(!dir.path().join("d/x.txt").exists() && !dir.path().join("d/e/y.txt").exists());
        remove_all(&root.child("nothing-here")).unwrap();
    }
}
