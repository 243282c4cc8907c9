//! Text input as its parsers see it, streamed so a file is never held whole. Files come
//! through `angel-storage` (local paths and URLs, decompressed).
//!
//! - [`Lines`]: numbered lines one at a time, each valid UTF-8 or the reason it is not, so
//!   one bad line is reported (or skipped) alone.
//! - [`Blocks`]: blocks of whole CSV rows, cut where no quoted field is open, so blocks parse
//!   in parallel.

use std::io::{BufRead, Read};

/// The lines of a stream, numbered from 1.
pub struct Lines<R> {
    reader: R,
    number: u64,
    buf: Vec<u8>,
}

impl<R: BufRead> Lines<R> {
    /// Lines of `reader`.
    pub fn new(reader: R) -> Self {
        Lines {
            reader,
            number: 0,
            buf: Vec::new(),
        }
    }

    /// The next line (without its newline) and its number, as text or, when it is not valid
    /// UTF-8, the reason naming the byte; `None` at the end. A line longer than
    /// [`MAX_ROW_BYTES`] (a file without line breaks) is an error naming it, read no further.
    pub fn next_line(&mut self) -> std::io::Result<Option<(u64, Result<&str, String>)>> {
        self.buf.clear();
        let limit = MAX_ROW_BYTES as u64 + 1;
        if (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.buf)?
            == 0
        {
            return Ok(None);
        }
        self.number += 1;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        }
        if self.buf.len() > MAX_ROW_BYTES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "line {} is longer than {} MiB (a file without line breaks?)",
                    self.number,
                    MAX_ROW_BYTES >> 20
                ),
            ));
        }
        let text = std::str::from_utf8(&self.buf)
            .map_err(|e| format!("invalid UTF-8 at byte {} of the line", e.valid_up_to() + 1));
        Ok(Some((self.number, text)))
    }
}

/// The longest row [`Blocks`] accepts: a stray quote would otherwise make the rest of the
/// file one row, held whole.
const MAX_ROW_BYTES: usize = 64 << 20;

/// Blocks of whole rows of a CSV stream, each with the file line it starts on.
pub struct Blocks<R> {
    reader: R,
    /// Bytes read past the last cut: the start of the next block.
    carry: Vec<u8>,
    /// Target block size; doubled while one row does not fit.
    size: usize,
    line: u64,
    delimiter: u8,
    done: bool,
}

impl<R: Read> Blocks<R> {
    /// Blocks of about `size` bytes from the start of `reader`, fields separated by
    /// `delimiter`.
    pub fn new(reader: R, size: usize, delimiter: u8) -> Self {
        Blocks {
            reader,
            carry: Vec::new(),
            size: size.max(1),
            line: 1,
            delimiter,
            done: false,
        }
    }

    /// The next block of whole rows and its first line; `None` at the end.
    pub fn next_block(&mut self) -> std::io::Result<Option<(Vec<u8>, u64)>> {
        let mut block = std::mem::take(&mut self.carry);
        let cut = loop {
            if !self.done {
                let want = self.size.saturating_sub(block.len());
                let read = (&mut self.reader)
                    .take(want as u64)
                    .read_to_end(&mut block)?;
                self.done = read < want;
            }
            if self.done {
                break block.len();
            }
            match last_row_end(&block, self.delimiter) {
                Some(cut) => break cut,
                // One row longer than the block: read on, within reason.
                None if block.len() < MAX_ROW_BYTES => self.size *= 2,
                None => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "no row ends within {} MB from line {}: a quote opened there and \
                             never closed?",
                            MAX_ROW_BYTES >> 20,
                            self.line
                        ),
                    ));
                }
            }
        };
        if block.is_empty() {
            return Ok(None);
        }
        self.carry = block.split_off(cut);
        let first = self.line;
        self.line += block.iter().filter(|&&b| b == b'\n').count() as u64;
        Ok(Some((block, first)))
    }
}

/// The offset just after the last newline of `block` that ends a row: one outside a quoted
/// field. Quotes open a field only at its start and `""` inside one is a quote, as the CSV
/// parser reads them (blocks start at a row).
fn last_row_end(block: &[u8], delimiter: u8) -> Option<usize> {
    if !block.contains(&b'"') {
        return block.iter().rposition(|&b| b == b'\n').map(|i| i + 1);
    }
    #[derive(Clone, Copy)]
    enum At {
        FieldStart,
        Unquoted,
        Quoted,
        QuoteInQuoted,
    }
    let (mut at, mut end) = (At::FieldStart, None);
    for (i, &b) in block.iter().enumerate() {
        at = match (at, b) {
            (At::Quoted, b'"') => At::QuoteInQuoted,
            (At::Quoted, _) => At::Quoted,
            (At::FieldStart, b'"') | (At::QuoteInQuoted, b'"') => At::Quoted,
            (_, b'\n') => {
                end = Some(i + 1);
                At::FieldStart
            }
            (_, b) if b == delimiter => At::FieldStart,
            _ => At::Unquoted,
        };
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_past_the_limit_is_an_error_naming_it() {
        let endless = std::io::BufReader::new(std::io::repeat(b'0'));
        let mut lines = Lines::new(endless);
        let err = lines.next_line().expect_err("an error");
        assert!(
            err.to_string().contains("line 1 is longer than 64 MiB"),
            "{err}"
        );
        let mut exact = vec![b'1'; MAX_ROW_BYTES];
        exact.extend_from_slice(b"\n2");
        let mut lines = Lines::new(&exact[..]);
        assert_eq!(
            lines.next_line().unwrap().unwrap().1.unwrap().len(),
            MAX_ROW_BYTES
        );
        assert_eq!(lines.next_line().unwrap().unwrap().1.unwrap(), "2");
    }

    #[test]
    fn lines_report_invalid_utf8_one_line_at_a_time() {
        let mut lines = Lines::new(&b"a\n\xffb\nc"[..]);
        assert_eq!(lines.next_line().unwrap(), Some((1, Ok("a"))));
        let (n, text) = lines.next_line().unwrap().unwrap();
        assert!(n == 2 && text.unwrap_err().contains("byte 1"));
        assert_eq!(lines.next_line().unwrap(), Some((3, Ok("c"))));
        assert_eq!(lines.next_line().unwrap(), None);
    }

    #[test]
    fn blocks_end_at_rows_outside_quotes_and_keep_every_row() {
        let text = "a,b\n1,\"x\ny\"\n2,\"\"\"q\"\n3,5\"10\n4,\"a,\n\"\"b\"\n5,w";
        let records = |bytes: &[u8]| -> Vec<Vec<String>> {
            csv::ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .from_reader(bytes)
                .records()
                .map(|r| r.unwrap().iter().map(String::from).collect())
                .collect()
        };
        let whole = records(text.as_bytes());
        for size in 1..text.len() + 2 {
            let mut blocks = Blocks::new(text.as_bytes(), size, b',');
            let (mut rows, mut line) = (Vec::new(), 1);
            while let Some((block, first)) = blocks.next_block().unwrap() {
                assert_eq!(first, line, "size {size}");
                line += block.iter().filter(|&&b| b == b'\n').count() as u64;
                rows.extend(records(&block));
            }
            assert_eq!(rows, whole, "size {size}");
        }
        let stray = format!("a\n\"{}", "x".repeat(MAX_ROW_BYTES));
        let mut blocks = Blocks::new(stray.as_bytes(), 1 << 20, b',');
        let err = std::iter::from_fn(|| blocks.next_block().transpose())
            .find_map(Result::err)
            .expect("a row that never ends is an error");
        assert!(err.to_string().contains("from line 2"), "{err}");
    }
}
