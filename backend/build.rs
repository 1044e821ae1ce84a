//! The page (`dist/`, Trunk's output) is built into the binary by rust-embed (see
//! src/page.rs), in debug builds too (its `debug-embed` feature), so tests run the code
//! a release runs. A build made before `trunk build` has no page built in: `serve` then
//! reads `./dist` or `--dist`, and `--version` says so.

use std::path::Path;

fn main() {
    let dist = Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("../dist");
    // rust-embed's include_bytes! notices changed files but not added or removed ones;
    // cargo notices both in a watched folder. A missing folder would count as changed on
    // every build (rebuilding this crate each time), so an empty one is made (dist/ is
    // git-ignored; Trunk fills it). A read-only checkout just rebuilds more often.
    let _ = std::fs::create_dir_all(&dist);
    println!("cargo::rerun-if-changed={}", dist.display());
    let page = if dist.join("index.html").is_file() {
        "with the page built in"
    } else {
        "without the page: built before trunk build"
    };
    println!(
        "cargo::rustc-env=STACKLENS_VERSION={} ({page})",
        std::env::var("CARGO_PKG_VERSION").expect("cargo sets it")
    );
}
