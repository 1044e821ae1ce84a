//! Reports as `go tool pprof` prints them, byte for byte.

pub mod list;
pub mod tags;
