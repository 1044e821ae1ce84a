//! Reports as `go tool pprof` prints them: byte for byte (`list`, `tags`), or in the
//! shape of its output (`dot`); and the CI gate's report in its formats (`gate`).

pub mod dot;
pub mod gate;
pub mod list;
pub mod tags;
