//! The gRPC codec of every angel-ps service: prost messages, encoded into a buffer sized for
//! the whole message first.
//!
//! tonic's stock prost encoder lets the buffer grow as fields are written. A dense pull reply
//! or push request holds one large `bytes` field, and the first small field written after it
//! made the buffer reallocate: a copy of the whole payload and fresh pages for it, on every
//! call (about a tenth of a dense pull's time). Reserving `encoded_len` up front writes each
//! byte once. Decoding is tonic-prost's, which already reserves the announced length and
//! hands `bytes` fields out of the received buffer without copying. tonic's buffers cannot be
//! built outside it, so every RPC of the integration tests is this codec's test.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{Codec, EncodeBuf, Encoder};
use tonic_prost::ProstDecoder;

/// The codec the generated clients and services use (`codec_path` in `build.rs`).
#[derive(Debug, Clone)]
pub struct SizedCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for SizedCodec<T, U> {
    fn default() -> Self {
        SizedCodec(PhantomData)
    }
}

impl<T, U> Codec for SizedCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = SizedEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        SizedEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::default()
    }
}

/// Encodes a message after reserving room for all of it.
#[derive(Debug, Clone)]
pub struct SizedEncoder<T>(PhantomData<T>);

impl<T: Message> Encoder for SizedEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.reserve(item.encoded_len());
        item.encode(buf)
            .map_err(|e| Status::internal(format!("encoding a message: {e}")))
    }
}
