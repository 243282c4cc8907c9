//! The bytes of a snapshot file: a magic line naming the format and its version, one
//! protobuf message, and an xxh3 checksum of everything before it. A file that is truncated,
//! corrupted, of another format version or of another kind is refused whole, with an error
//! naming the file: nothing is half-loaded.

use angel_proto::{PsError, Result};
use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use xxhash_rust::xxh3::xxh3_64;

/// Format version written after the magic; bumped when the layout changes.
const VERSION: u8 = 1;

/// Which message a file holds; part of its magic, so a master file is never read as a
/// partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A [`angel_proto::PartitionSnapshot`].
    Partition,
    /// A [`angel_proto::MasterSnapshot`].
    Master,
}

impl Kind {
    fn magic(self) -> &'static [u8; 8] {
        match self {
            Kind::Partition => b"ANGELPT\n",
            Kind::Master => b"ANGELMS\n",
        }
    }
}

/// `message` as the bytes of a snapshot file.
pub fn encode(kind: Kind, message: &impl Message) -> Bytes {
    let mut out = BytesMut::with_capacity(message.encoded_len() + 17);
    out.put_slice(kind.magic());
    out.put_u8(VERSION);
    message
        .encode(&mut out)
        .expect("a BytesMut grows as needed");
    let sum = xxh3_64(&out);
    out.put_u64_le(sum);
    out.freeze()
}

/// The message in snapshot file `bytes`, read from `name` (named in every error).
pub fn decode<M: Message + Default>(kind: Kind, bytes: &[u8], name: &str) -> Result<M> {
    let refuse = |why: String| Err(PsError::DataLoss(format!("snapshot {name}: {why}")));
    let magic = kind.magic();
    if bytes.len() < magic.len() + 1 + 8 {
        return refuse(format!(
            "{} bytes is too short for a snapshot file (truncated?)",
            bytes.len()
        ));
    }
    if &bytes[..magic.len()] != magic {
        return refuse(format!(
            "not an angel-ps {kind:?} snapshot file (it starts {:?})",
            String::from_utf8_lossy(&bytes[..magic.len()])
        ));
    }
    if bytes[magic.len()] != VERSION {
        return refuse(format!(
            "format version {} is not the version {VERSION} this angel-ps reads",
            bytes[magic.len()]
        ));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    let expected = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
    if xxh3_64(body) != expected {
        return refuse("the checksum does not match its contents (corrupt or truncated)".into());
    }
    M::decode(&body[magic.len() + 1..]).or_else(|e| refuse(format!("cannot decode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use angel_proto::{MasterSnapshot, PartitionSnapshot};

    fn sample() -> PartitionSnapshot {
        PartitionSnapshot {
            partition_id: 3,
            version: 42,
            ..Default::default()
        }
    }

    #[test]
    fn a_file_reads_back_as_written() {
        let bytes = encode(Kind::Partition, &sample());
        let back: PartitionSnapshot = decode(Kind::Partition, &bytes, "f").unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn every_flipped_or_missing_byte_is_refused_naming_the_file() {
        let bytes = encode(Kind::Partition, &sample());
        for i in 0..bytes.len() {
            let mut bad = bytes.to_vec();
            bad[i] ^= 0x40;
            let err = decode::<PartitionSnapshot>(Kind::Partition, &bad, "s3://b/p").unwrap_err();
            assert!(err.to_string().contains("s3://b/p"), "{err}");
        }
        for len in 0..bytes.len() {
            let err = decode::<PartitionSnapshot>(Kind::Partition, &bytes[..len], "f");
            assert!(matches!(err, Err(PsError::DataLoss(_))), "length {len}");
        }
    }

    #[test]
    fn a_master_file_is_not_a_partition() {
        let bytes = encode(Kind::Master, &MasterSnapshot::default());
        let err = decode::<PartitionSnapshot>(Kind::Partition, &bytes, "f").unwrap_err();
        assert!(
            err.to_string()
                .contains("not an angel-ps Partition snapshot"),
            "{err}"
        );
    }
}
