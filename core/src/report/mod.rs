//! Reports as `go tool pprof` prints them: byte for byte (`list`, `tags`), or in the
//! shape of its output (`dot`).

pub mod dot;
pub mod list;
pub mod tags;
