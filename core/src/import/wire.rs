//! The one reader of the protobuf wire format (varints, tags, length-delimited and
//! packed fields, and their bounds), shared by the pprof decoder, its streaming form,
//! the error locator and the server's memory budget (which reads inflating bytes a
//! piece at a time, with [`StreamVarint`]).

/// How a field's value is encoded: the low three bits of its tag. The group types (3,
/// 4) and 6, 7 are not read.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WireType {
    Varint,
    Fixed64,
    LengthDelimited,
    Fixed32,
}

impl WireType {
    /// The wire type of `tag`, `None` for one this reader does not read.
    #[inline]
    pub fn of(tag: u64) -> Option<WireType> {
        match tag & 7 {
            0 => Some(WireType::Varint),
            1 => Some(WireType::Fixed64),
            2 => Some(WireType::LengthDelimited),
            5 => Some(WireType::Fixed32),
            _ => None,
        }
    }

    /// Bytes of a fixed-width value; `None` for the others.
    #[inline]
    pub fn fixed_width(self) -> Option<usize> {
        match self {
            WireType::Fixed64 => Some(8),
            WireType::Fixed32 => Some(4),
            WireType::Varint | WireType::LengthDelimited => None,
        }
    }

    /// Its number on the wire.
    pub fn number(self) -> u8 {
        match self {
            WireType::Varint => 0,
            WireType::Fixed64 => 1,
            WireType::LengthDelimited => 2,
            WireType::Fixed32 => 5,
        }
    }
}

/// The field number of `tag` (0 is invalid).
#[inline]
pub fn field_number(tag: u64) -> u64 {
    tag >> 3
}

/// Why a varint could not be read.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VarintError {
    #[error("varint runs past the end of the data (truncated)")]
    Truncated,
    #[error("varint is longer than 64 bits")]
    Overlong,
}

/// A varint at the start of `buf` and its length; `None` when it is truncated or
/// longer than 64 bits ([`varint_error`] says which). With 8 bytes at hand, a varint of
/// up to 8 bytes (every id and count in practice) is read from one little-endian word,
/// with no branch per byte.
#[inline]
pub fn read_varint(buf: &[u8]) -> Option<(u64, usize)> {
    if let Some(word) = buf.first_chunk::<8>() {
        let word = u64::from_le_bytes(*word);
        let ends = !word & 0x8080_8080_8080_8080;
        if ends != 0 {
            let len = ends.trailing_zeros() as usize / 8 + 1;
            let bytes = if len == 8 { word } else { word & ((1 << (8 * len)) - 1) };
            // Squeeze out the continuation bits: 7-bit groups to 14, 28, then 56 bits.
            let x = bytes & 0x7f7f_7f7f_7f7f_7f7f;
            let x = ((x & 0x7f00_7f00_7f00_7f00) >> 1) | (x & 0x007f_007f_007f_007f);
            let x = ((x & 0x3fff_0000_3fff_0000) >> 2) | (x & 0x0000_3fff_0000_3fff);
            let x = ((x & 0x0fff_ffff_0000_0000) >> 4) | (x & 0x0000_0000_0fff_ffff);
            return Some((x, len));
        }
    }
    read_varint_bytewise(buf)
}

/// [`read_varint`] one byte at a time: near the end of the input, and for 9- and
/// 10-byte varints (negative numbers).
fn read_varint_bytewise(buf: &[u8]) -> Option<(u64, usize)> {
    let mut varint = StreamVarint::default();
    for (i, &b) in buf.iter().enumerate() {
        match varint.push(b) {
            Ok(Some(value)) => return Some((value, i + 1)),
            Ok(None) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Why [`read_varint`] found no varint at the start of `buf`.
#[cold]
pub fn varint_error(buf: &[u8]) -> VarintError {
    let mut varint = StreamVarint::default();
    for &b in buf {
        if let Err(e) = varint.push(b) {
            return e;
        }
    }
    VarintError::Truncated
}

/// A varint read a byte at a time, for bytes that arrive in pieces.
#[derive(Debug, Default, Clone, Copy)]
pub struct StreamVarint {
    value: u64,
    shift: u32,
}

impl StreamVarint {
    /// Adds byte `b`: the value when it was the last, `None` when more are to come.
    #[inline]
    pub fn push(&mut self, b: u8) -> Result<Option<u64>, VarintError> {
        // The tenth byte holds the 64th bit only.
        if self.shift == 63 && b > 1 {
            return Err(VarintError::Overlong);
        }
        self.value |= u64::from(b & 0x7f) << self.shift;
        if b < 0x80 {
            let value = self.value;
            *self = StreamVarint::default();
            return Ok(Some(value));
        }
        self.shift += 7;
        Ok(None)
    }

    /// Whether a varint was begun and not finished.
    pub fn is_partial(&self) -> bool {
        self.shift != 0
    }
}

/// Elements in a packed list of varints: one byte below 0x80 ends each.
#[inline]
pub fn packed_count(body: &[u8]) -> usize {
    body.iter().filter(|&&b| b < 0x80).count()
}

/// What is wrong on the wire, and where: a varint's, a length's or a field's start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    pub offset: usize,
    pub kind: WireErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireErrorKind {
    #[error("malformed varint")]
    Varint(VarintError),
    #[error("field number 0")]
    FieldZero,
    #[error("unsupported wire type")]
    UnsupportedWireType { field: u32, wire: u8 },
    #[error("fixed-width value past the end")]
    FixedPastEnd,
    #[error("length past the end")]
    LengthPastEnd { len: u64, remain: usize },
    /// A field whose wire type is not the one its reader expects.
    #[error("{0}")]
    Unexpected(&'static str),
}

/// One field's payload as the wire carries it. Fixed-width payloads never belong to a
/// `profile.proto` field, so they are only ever skipped.
pub enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// Reads one message's fields in order. `base` is where the message starts in the
/// whole input, for error offsets.
pub struct Fields<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
    pub base: usize,
}

impl<'a> Fields<'a> {
    pub fn new(buf: &'a [u8], base: usize) -> Self {
        Fields { buf, pos: 0, base }
    }

    /// Where the next byte is in the whole input.
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// An error of `kind` at `pos` of this message.
    #[cold]
    fn error_at<T>(&self, pos: usize, kind: WireErrorKind) -> Result<T, WireError> {
        Err(WireError { offset: self.base + pos, kind })
    }

    /// An error for a field that its reader cannot take, at the next byte.
    #[cold]
    pub fn unexpected(&self, reason: &'static str) -> WireError {
        WireError { offset: self.offset(), kind: WireErrorKind::Unexpected(reason) }
    }

    #[inline]
    pub fn varint(&mut self) -> Result<u64, WireError> {
        match self.buf.get(self.pos) {
            Some(&b) if b < 0x80 => {
                self.pos += 1;
                Ok(u64::from(b))
            }
            _ => match read_varint(&self.buf[self.pos..]) {
                Some((value, len)) => {
                    self.pos += len;
                    Ok(value)
                }
                None => self.error_at(self.pos, WireErrorKind::Varint(varint_error(&self.buf[self.pos..]))),
            },
        }
    }

    fn field(&mut self) -> Result<(u32, Value<'a>), WireError> {
        let (field, wire) = self.tag()?;
        Ok((field, self.value(wire)?))
    }

    /// The next tag: its field number and wire type.
    #[inline]
    pub fn tag(&mut self) -> Result<(u32, WireType), WireError> {
        let at = self.pos;
        let key = self.varint()?;
        let field = u32::try_from(field_number(key)).unwrap_or(u32::MAX);
        if field == 0 {
            return self.error_at(at, WireErrorKind::FieldZero);
        }
        match WireType::of(key) {
            Some(wire) => Ok((field, wire)),
            None => self.error_at(at, WireErrorKind::UnsupportedWireType { field, wire: (key & 7) as u8 }),
        }
    }

    /// The value that follows a tag of type `wire`.
    #[inline]
    pub fn value(&mut self, wire: WireType) -> Result<Value<'a>, WireError> {
        Ok(match wire {
            WireType::Varint => Value::Varint(self.varint()?),
            WireType::LengthDelimited => {
                let at = self.pos;
                let len = self.varint()?;
                let remain = self.buf.len() - self.pos;
                if len > remain as u64 {
                    return self.error_at(at, WireErrorKind::LengthPastEnd { len, remain });
                }
                let body = &self.buf[self.pos..self.pos + len as usize];
                self.pos += len as usize;
                Value::Bytes(body)
            }
            WireType::Fixed64 | WireType::Fixed32 => {
                let width = wire.fixed_width().unwrap_or(0);
                if self.buf.len() - self.pos < width {
                    return self.error_at(self.pos, WireErrorKind::FixedPastEnd);
                }
                self.pos += width;
                Value::Fixed
            }
        })
    }

    /// A `Bytes` payload just read, as a nested message (offsets relative to the input).
    pub fn nested(&self, body: &'a [u8]) -> Fields<'a> {
        Fields::new(body, self.base + self.pos - body.len())
    }

    /// Calls `each` with every varint of a packed list just read (`body`); the error
    /// is `E` from `each` or from a malformed element (`wire`).
    #[inline]
    pub fn packed<E>(
        &self,
        body: &[u8],
        wire: impl FnOnce(WireError) -> E,
        mut each: impl FnMut(u64) -> Result<(), E>,
    ) -> Result<(), E> {
        // Each element is read here, the one-byte case inline: `Fields::varint` per
        // element, which WebAssembly did not inline, was a quarter of the decode.
        let mut pos = 0;
        while let Some(&b) = body.get(pos) {
            let element = if b < 0x80 {
                pos += 1;
                u64::from(b)
            } else {
                let Some((element, len)) = read_varint(&body[pos..]) else {
                    let packed = self.nested(body);
                    let kind = WireErrorKind::Varint(varint_error(&body[pos..]));
                    return Err(wire(WireError { offset: packed.base + pos, kind }));
                };
                pos += len;
                element
            };
            each(element)?;
        }
        Ok(())
    }
}

/// The field numbers and values of a message, in order (read no further after an error).
impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), WireError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        Some(self.field())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(mut value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while value >= 0x80 {
            out.push(value as u8 | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
        out
    }

    proptest! {
        /// Word-at-a-time and byte-at-a-time reading agree on every length, with and
        /// without bytes after the varint, and on truncated and overlong input.
        #[test]
        fn word_and_bytewise_varints_agree(value: u64, bits in 0u32..64, tail: Vec<u8>, cut in 0usize..11) {
            let value = value >> bits;
            let mut buf = encode(value);
            let len = buf.len();
            prop_assert_eq!(read_varint(&buf), Some((value, len)));
            buf.extend_from_slice(&tail);
            prop_assert_eq!(read_varint(&buf), Some((value, len)));
            prop_assert_eq!(read_varint(&buf), read_varint_bytewise(&buf));
            let cut = &buf[..cut.min(buf.len())];
            prop_assert_eq!(read_varint(cut), read_varint_bytewise(cut));
        }
    }

    #[test]
    fn overlong_varints_are_refused() {
        assert_eq!(read_varint(&[0xff; 12]), None);
        assert_eq!(varint_error(&[0xff; 12]), VarintError::Overlong);
        assert_eq!(varint_error(&[0xff; 3]), VarintError::Truncated);
        assert_eq!(read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02]), None);
        assert_eq!(read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), Some((1 << 63, 10)));
    }
}
