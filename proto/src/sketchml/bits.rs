//! Byte and bit streams of SketchML payloads. Every read is bounds-checked and names what it
//! was reading, so a truncated or corrupted payload gives an error, never a panic.

use crate::{PsError, Result};

/// Appends `v` as a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A cursor over a payload.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads `bytes` from the start.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The error for a payload that ends or breaks while reading `what`.
    pub fn corrupt(&self, what: &str) -> PsError {
        PsError::InvalidArgument(format!(
            "sketchml payload of {} bytes is truncated or corrupted at byte {} ({what})",
            self.bytes.len(),
            self.pos
        ))
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.corrupt(what));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// One byte.
    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }

    /// A little-endian u16.
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// A little-endian f32.
    pub fn f32(&mut self, what: &str) -> Result<f32> {
        let b = self.take(4, what)?;
        Ok(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A LEB128 varint of at most 10 bytes.
    pub fn varint(&mut self, what: &str) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8(what)?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.corrupt(what))
    }

    /// A varint that counts items of at least `min_bits` bits each still to come; anything
    /// larger than the rest of the payload could hold is corrupt (and would over-allocate).
    pub fn count(&mut self, min_bits: usize, what: &str) -> Result<usize> {
        let n = self.varint(what)?;
        let room = (self.remaining() as u64 * 8) / min_bits.max(1) as u64;
        match n <= room {
            true => Ok(n as usize),
            false => Err(self.corrupt(what)),
        }
    }
}

/// Writes bits, least significant first.
#[derive(Default)]
pub struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    filled: u32,
}

impl BitWriter {
    /// Appends the low `n` (<= 57) bits of `v`.
    pub fn put(&mut self, v: u64, n: u32) {
        debug_assert!(n <= 57);
        self.acc |= (v & ((1u64 << n) - 1)) << self.filled;
        self.filled += n;
        while self.filled >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.filled -= 8;
        }
    }

    /// Appends a 64-bit value.
    pub fn put_u64(&mut self, v: u64) {
        self.put(v & 0xffff_ffff, 32);
        self.put(v >> 32, 32);
    }

    /// The bytes, the last one padded with zeros.
    pub fn finish(mut self) -> Vec<u8> {
        if self.filled > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// Reads bits written by [`BitWriter`].
pub struct BitReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    acc: u64,
    filled: u32,
}

impl<'a> BitReader<'a> {
    /// Reads `bytes` from the first bit.
    pub fn new(bytes: &'a [u8]) -> Self {
        BitReader {
            bytes,
            pos: 0,
            acc: 0,
            filled: 0,
        }
    }

    fn refill(&mut self) {
        while self.filled <= 56 && self.pos < self.bytes.len() {
            self.acc |= u64::from(self.bytes[self.pos]) << self.filled;
            self.pos += 1;
            self.filled += 8;
        }
    }

    /// The next `n` (<= 57) bits, or `None` past the end.
    pub fn get(&mut self, n: u32) -> Option<u64> {
        if self.filled < n {
            self.refill();
            if self.filled < n {
                return None;
            }
        }
        let v = self.acc & ((1u64 << n) - 1);
        self.acc >>= n;
        self.filled -= n;
        Some(v)
    }

    /// A 64-bit value.
    pub fn get_u64(&mut self) -> Option<u64> {
        let low = self.get(32)?;
        Some(low | self.get(32)? << 32)
    }

    /// Counts one-bits up to the next zero-bit (consumed), stopping at `limit` ones.
    pub fn unary(&mut self, limit: u32) -> Option<u32> {
        let mut ones = 0;
        loop {
            if self.filled == 0 {
                self.refill();
                if self.filled == 0 {
                    return None;
                }
            }
            // Bits above `filled` are zero, so the run stops at `filled` at the latest.
            let run = self.acc.trailing_ones().min(limit - ones);
            self.acc = self.acc.checked_shr(run).unwrap_or(0);
            self.filled -= run;
            ones += run;
            if ones == limit {
                return Some(ones);
            }
            if self.filled > 0 {
                self.acc >>= 1;
                self.filled -= 1;
                return Some(ones);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_and_varints_round_trip() {
        let mut w = BitWriter::default();
        for (v, n) in [(5u64, 3u32), (0, 1), (1 << 40, 57), (12345, 14)] {
            w.put(v, n);
        }
        w.put_u64(u64::MAX - 7);
        let bytes = w.finish();
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.get(3), Some(5));
        assert_eq!(r.get(1), Some(0));
        assert_eq!(r.get(57), Some(1 << 40));
        assert_eq!(r.get(14), Some(12345));
        assert_eq!(r.get_u64(), Some(u64::MAX - 7));
        assert_eq!(r.get(9), None);

        let mut out = Vec::new();
        for v in [0, 127, 128, u64::MAX] {
            put_varint(&mut out, v);
        }
        let mut r = Reader::new(&out);
        for v in [0, 127, 128, u64::MAX] {
            assert_eq!(r.varint("v").unwrap(), v);
        }
        assert!(r.u8("end").is_err());
    }
}
