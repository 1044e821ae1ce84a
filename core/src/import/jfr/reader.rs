//! The byte level of a JFR chunk: big-endian or compressed integers, JFR strings, event
//! headers, and the limits that keep a hostile file from making the reader build much.

use crate::{Error, Result};

const FORMAT: &str = "JFR";

/// Deepest nesting of values and metadata elements followed (real files need 4).
pub(super) const MAX_DEPTH: usize = 32;

/// Objects and arrays a chunk may produce per byte: they take no bytes themselves, so
/// types that nest objects or have no fields would otherwise let a small file make the
/// reader build huge trees. Real recordings have one per 5 bytes or fewer (a stack frame).
pub(super) const CONTAINERS_PER_BYTE: usize = 1;

pub(super) fn error(offset: usize, reason: impl Into<String>) -> Error {
    Error::Binary { format: FORMAT, offset, reason: reason.into() }
}

/// Reads big-endian or compressed integers and JFR strings from `bytes[pos..end]`.
pub(super) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
    pub(super) end: usize,
    pub(super) compressed: bool,
    /// Objects and arrays still allowed in this chunk (see [`CONTAINERS_PER_BYTE`]).
    pub(super) budget: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.end - self.pos
    }

    pub(super) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.left() {
            return Err(error(self.pos, format!("truncated: {what} needs {n} bytes, {} left", self.left())));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn fixed<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }

    pub(super) fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }

    /// JFR's LEB128: 7 bits per byte, low first, except that a ninth byte gives all 8.
    fn varint(&mut self, what: &str) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..56).step_by(7) {
            let b = self.u8(what)?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Ok(value | u64::from(self.u8(what)?) << 56)
    }

    pub(super) fn long(&mut self, what: &str) -> Result<i64> {
        if self.compressed {
            return Ok(self.varint(what)? as i64);
        }
        Ok(i64::from_be_bytes(self.fixed(what)?))
    }

    pub(super) fn int(&mut self, what: &str) -> Result<i32> {
        if self.compressed {
            // Truncation is what the JDK does with an oversized compressed int.
            return Ok(self.varint(what)? as i32);
        }
        Ok(i32::from_be_bytes(self.fixed(what)?))
    }

    pub(super) fn short(&mut self, what: &str) -> Result<i16> {
        if self.compressed {
            return Ok(self.varint(what)? as i16);
        }
        Ok(i16::from_be_bytes(self.fixed(what)?))
    }

    /// A count of items that each take at least a byte: at most the bytes left.
    pub(super) fn count(&mut self, what: &str) -> Result<usize> {
        let at = self.pos;
        let n = self.int(what)?;
        match usize::try_from(n) {
            Ok(n) if n <= self.left() => Ok(n),
            Ok(n) => Err(error(at, format!("{what} {n} exceeds the {} bytes left", self.left()))),
            Err(_) => Err(error(at, format!("negative {what} {n}"))),
        }
    }

    /// Charges one object or array against the chunk's budget.
    pub(super) fn spend_container(&mut self) -> Result<()> {
        self.budget = self
            .budget
            .checked_sub(1)
            .ok_or_else(|| error(self.pos, "more objects than a recording of this size can hold"))?;
        Ok(())
    }

    /// A string in one of JFR's encodings: [`Value::Str`], or a [`Value::Ref`] into the
    /// pool of `string_class` for encoding 2.
    pub(super) fn string(&mut self, string_class: u64, what: &str) -> Result<Value> {
        let at = self.pos;
        Ok(Value::Str(match self.u8(what)? {
            0 => None,
            1 => Some(String::new()),
            2 => return Ok(Value::Ref(string_class, self.long(what)?)),
            3 => {
                let n = self.count(what)?;
                let bytes = self.take(n, what)?;
                Some(String::from_utf8(bytes.to_vec()).map_err(|e| error(at, format!("{what} is not UTF-8: {e}")))?)
            }
            4 => {
                let n = self.count(what)?;
                let mut units = Vec::with_capacity(n);
                for _ in 0..n {
                    units.push(self.short(what)? as u16);
                }
                Some(String::from_utf16_lossy(&units))
            }
            5 => {
                let n = self.count(what)?;
                Some(self.take(n, what)?.iter().map(|&b| char::from(b)).collect())
            }
            other => return Err(error(at, format!("{what} has unknown string encoding {other}"))),
        }))
    }

    /// An event's header: its size (checked against the chunk) and type; `pos` is then
    /// at the fields and `end` is the event's end.
    pub(super) fn event_header(&mut self, chunk_end: usize) -> Result<u64> {
        let start = self.pos;
        self.end = chunk_end;
        let size = self.int("event size")?;
        let size = usize::try_from(size).ok().filter(|&s| s > self.pos - start && s <= chunk_end - start);
        let size = size.ok_or_else(|| error(start, "event size does not fit in the chunk"))?;
        self.end = start + size;
        self.long("event type").map(|t| t as u64)
    }
}

/// A value read by its metadata type.
#[derive(Clone, Debug)]
pub(super) enum Value {
    /// Numbers and booleans; floating point values are never needed and read as 0.
    Int(i64),
    Str(Option<String>),
    /// A constant pool entry: (type id, entry id).
    Ref(u64, i64),
    /// Fields in metadata order.
    Object(Vec<Value>),
    Array(Vec<Value>),
}
