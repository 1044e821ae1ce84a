//! Folded stacks streamed from input that can be read again from its start (a file, the
//! page's `Blob`), never held whole: the one streamer the CLI and the page's worker use.

use std::io::{Read, Seek, SeekFrom};

use super::folded::{parse_twice, starts_folded, HEAD};
use crate::{ParseOptions, Profile};

/// Takes each piece of an input in order; its error stops the reading.
pub type Feed<'a, E> = dyn FnMut(&[u8]) -> Result<(), E> + 'a;

/// Input read a piece at a time from its start, as often as asked.
pub trait Rereadable {
    type Error;
    /// The input's first `len` bytes (all of it when shorter).
    fn head(&mut self, len: usize) -> Result<Vec<u8>, Self::Error>;
    /// Gives `feed` every piece of the input, in order, from its start; `pass` is 0 for
    /// the first reading, 1 for the second.
    fn each_piece(&mut self, pass: usize, feed: &mut Feed<Self::Error>) -> Result<(), Self::Error>;
}

/// Whether the input is uncompressed folded stacks, from its start.
pub fn is_folded<S: Rereadable>(input: &mut S) -> Result<bool, S::Error> {
    Ok(starts_folded(&input.head(HEAD)?))
}

/// The folded stacks the input holds, read twice in pieces ([`parse_twice`]);
/// `parse_error` turns the parser's errors into the input's.
pub fn parse_folded<S: Rereadable>(
    input: &mut S,
    parse_error: impl Fn(crate::Error) -> S::Error,
) -> Result<Profile, S::Error> {
    parse_twice(|pass, feed| input.each_piece(pass, feed), parse_error, &ParseOptions::default())
}

/// How much of a [`Seekable`] input is read at a time.
const PIECE: usize = 16 << 20;

/// A `Read + Seek` input (a file), read in 16 MiB pieces.
pub struct Seekable<R> {
    inner: R,
    buffer: Vec<u8>,
}

impl<R> Seekable<R> {
    pub fn new(inner: R) -> Self {
        Seekable { inner, buffer: Vec::new() }
    }
}

/// A reading error, or the parser's (see [`parse_folded`]).
#[derive(Debug, thiserror::Error)]
pub enum SeekableError {
    #[error(transparent)]
    Read(#[from] std::io::Error),
    #[error(transparent)]
    Parse(#[from] crate::Error),
}

impl<R: Read + Seek> Rereadable for Seekable<R> {
    type Error = SeekableError;

    fn head(&mut self, len: usize) -> Result<Vec<u8>, SeekableError> {
        let mut head = Vec::with_capacity(len);
        self.inner.seek(SeekFrom::Start(0))?;
        (&mut self.inner).take(len as u64).read_to_end(&mut head)?;
        Ok(head)
    }

    fn each_piece(&mut self, _pass: usize, feed: &mut Feed<SeekableError>) -> Result<(), SeekableError> {
        self.inner.seek(SeekFrom::Start(0))?;
        self.buffer.resize(PIECE, 0);
        loop {
            match self.inner.read(&mut self.buffer)? {
                0 => return Ok(()),
                n => feed(&self.buffer[..n])?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seekable_input_is_read_as_the_whole_bytes_are_parsed() {
        let bytes = b"main;a;b 3\nmain;c 2\n";
        let mut input = Seekable::new(std::io::Cursor::new(&bytes[..]));
        assert!(is_folded(&mut input).unwrap());
        let streamed = parse_folded(&mut input, SeekableError::Parse).unwrap();
        assert_eq!(format!("{streamed:?}"), format!("{:?}", crate::parse(bytes).unwrap()));
        assert!(!is_folded(&mut Seekable::new(std::io::Cursor::new(&b"\x1f\x8b"[..]))).unwrap());
    }
}
