//! Demangling of native symbol names (Rust legacy and v0, C++ Itanium): the demangled
//! name is shown and the raw symbol kept as the function's `system_name`.
//!
//! References, independent of the crates used: `c++filt` (GNU Binutils 2.40), which
//! demangles C++, Rust legacy (printing the `::h…` hash, which stacklens drops) and Rust
//! v0 (printing crate disambiguators `[…]`, which stacklens drops); and the examples in
//! rustc-demangle's own documentation and tests.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{fixtures, read};
use stacklens_core::analysis::frames::use_raw_names;
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::Query;
use stacklens_core::import::demangle::demangle;
use stacklens_core::{parse, Profile};

/// `c++filt` output, verbatim.
const CXX: &[(&str, &str)] = &[
    ("_ZN5space3fooEibc", "space::foo(int, bool, char)"),
    ("_ZNSt6vectorIiSaIiEE9push_backERKi", "std::vector<int, std::allocator<int> >::push_back(int const&)"),
    ("_ZNK3Foo3getEv", "Foo::get() const"),
    ("_Z3fooi.cold", "foo(int) [clone .cold]"),
    (
        "_ZN9__gnu_cxx13new_allocatorIcE8allocateEmPKv",
        "__gnu_cxx::new_allocator<char>::allocate(unsigned long, void const*)",
    ),
    ("_ZNSt8ios_base4InitC1Ev", "std::ios_base::Init::Init()"),
    // macOS symbols have one more underscore (`c++filt -_`).
    ("__ZN5space3fooEibc", "space::foo(int, bool, char)"),
];

/// `c++filt` output, verbatim (with the hash).
const RUST_LEGACY: &[(&str, &str)] = &[
    ("_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write::h0123456789abcdef"),
    (
        "_ZN55_$LT$std..path..PathBuf$u20$as$u20$core..fmt..Debug$GT$3fmt17h0d9d0e2a8d5ce7e5E",
        "<std::path::PathBuf as core::fmt::Debug>::fmt::h0d9d0e2a8d5ce7e5",
    ),
    (
        "_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17h6f1e2a3b4c5d6e7fE",
        "std::rt::lang_start::{{closure}}::h6f1e2a3b4c5d6e7f",
    ),
];

/// Every distinct symbol of the speedscope `rust-mangled.linux-perf.txt` fixture (all v0)
/// and `c++filt`'s output for it, verbatim (with disambiguators).
const FIXTURE_V0: &[(&str, &str)] = &[
    ("_RINvNtCse0yjq9ZQveU_3std2rt10lang_startuECs8K9WJNlS7Dz_5trace", "std[a32bae77f370052a]::rt::lang_start::<()>"),
    ("_RINvNtCslw2YnFSxGUT_10ppv_lite867generic5dmap2NtB2_13u32x4_genericNCNvXsy_B2_BI_NtNtNtCsTACXlTRjQ_4core3ops5arith3Add3add0ECs2zQ9tAH61OF_11rand_chacha", "ppv_lite86[fa9ee47b6dc3f669]::generic::dmap2::<ppv_lite86[fa9ee47b6dc3f669]::generic::u32x4_generic, <ppv_lite86[fa9ee47b6dc3f669]::generic::u32x4_generic as core[2b1f2bbd3b605c]::ops::arith::Add>::add::{closure#0}>"),
    ("_RNCNkNvNtNtCsiznFMVuT3yX_4rand4rngs6thread14THREAD_RNG_KEY00B9_", "rand[d84ddbd723c8780d]::rngs::thread::THREAD_RNG_KEY::{closure#0}"),
    ("_RNCNvXs1o_NtCslw2YnFSxGUT_10ppv_lite867genericNtB8_13u32x4_genericNtNtNtCsTACXlTRjQ_4core3ops3bit6BitXor6bitxor0Cs2zQ9tAH61OF_11rand_chacha", "<ppv_lite86[fa9ee47b6dc3f669]::generic::u32x4_generic as core[2b1f2bbd3b605c]::ops::bit::BitXor>::bitxor::{closure#0}"),
    ("_RNCNvXsj_NtCslw2YnFSxGUT_10ppv_lite867genericNtB7_13u32x4_genericNtNtB9_5types16RotateEachWord3224rotate_each_word_right160Cs2zQ9tAH61OF_11rand_chacha", "<ppv_lite86[fa9ee47b6dc3f669]::generic::u32x4_generic as ppv_lite86[fa9ee47b6dc3f669]::types::RotateEachWord32>::rotate_each_word_right16::{closure#0}"),
    ("_RNvCs8K9WJNlS7Dz_5trace17multiply_matrices", "trace[65da55bf8a08a573]::multiply_matrices"),
    ("_RNvNvMs9_NtCsTACXlTRjQ_4core3numj13unchecked_add18precondition_checkCs8K9WJNlS7Dz_5trace", "<usize>::unchecked_add::precondition_check"),
    ("_RNvNvNtNtCsTACXlTRjQ_4core5slice3raw14from_raw_parts18precondition_checkCs8K9WJNlS7Dz_5trace", "core[2b1f2bbd3b605c]::slice::raw::from_raw_parts::precondition_check"),
    ("_RNvNvNtNtCsTACXlTRjQ_4core5slice3raw18from_raw_parts_mut18precondition_checkCs8K9WJNlS7Dz_5trace", "core[2b1f2bbd3b605c]::slice::raw::from_raw_parts_mut::precondition_check"),
    ("_RNvXs0_NtNtCsTACXlTRjQ_4core5slice5indexjINtB5_10SliceIndexSINtNtCsfiKabdrepoq_5alloc3vec3VecdEE5indexCs8K9WJNlS7Dz_5trace", "<usize as core[2b1f2bbd3b605c]::slice::index::SliceIndex<[alloc[b23c587ff69f26b0]::vec::Vec<f64>]>>::index"),
    ("_RNvXs0_NtNtCsTACXlTRjQ_4core5slice5indexjINtB5_10SliceIndexSINtNtCsfiKabdrepoq_5alloc3vec3VecdEE9index_mutCs8K9WJNlS7Dz_5trace", "<usize as core[2b1f2bbd3b605c]::slice::index::SliceIndex<[alloc[b23c587ff69f26b0]::vec::Vec<f64>]>>::index_mut"),
    ("_RNvXs0_NtNtCsTACXlTRjQ_4core5slice5indexjINtB5_10SliceIndexSdE5indexCs8K9WJNlS7Dz_5trace", "<usize as core[2b1f2bbd3b605c]::slice::index::SliceIndex<[f64]>>::index"),
    ("_RNvXs0_NtNtCsTACXlTRjQ_4core5slice5indexjINtB5_10SliceIndexSdE9index_mutCs8K9WJNlS7Dz_5trace", "<usize as core[2b1f2bbd3b605c]::slice::index::SliceIndex<[f64]>>::index_mut"),
    ("_RNvXs1_NtCsTACXlTRjQ_4core7convertNtNtCslw2YnFSxGUT_10ppv_lite867generic13u32x4_genericINtB5_4IntoNtBy_14vec128_storageE4intoCs2zQ9tAH61OF_11rand_chacha", "<ppv_lite86[fa9ee47b6dc3f669]::generic::u32x4_generic as core[2b1f2bbd3b605c]::convert::Into<ppv_lite86[fa9ee47b6dc3f669]::generic::vec128_storage>>::into"),
    ("_RNvXs3_NtNtCsTACXlTRjQ_4core4iter5rangeINtNtNtB9_3ops5range5RangejENtB5_17RangeIteratorImpl9spec_nextCs8K9WJNlS7Dz_5trace", "<core[2b1f2bbd3b605c]::ops::range::Range<usize> as core[2b1f2bbd3b605c]::iter::range::RangeIteratorImpl>::spec_next"),
    ("_RNvXs4_NtNtCsTACXlTRjQ_4core4iter5rangeINtNtNtB9_3ops5range5RangejENtNtNtB7_6traits8iterator8Iterator4nextCs8K9WJNlS7Dz_5trace", "<core[2b1f2bbd3b605c]::ops::range::Range<usize> as core[2b1f2bbd3b605c]::iter::traits::iterator::Iterator>::next"),
    ("_RNvXsB_NtNtCsTACXlTRjQ_4core4iter5rangemNtB5_4Step17forward_uncheckedCs2zQ9tAH61OF_11rand_chacha", "<u32 as core[2b1f2bbd3b605c]::iter::range::Step>::forward_unchecked"),
    ("_RNvXsF_NtNtCsTACXlTRjQ_4core4iter5rangejNtB5_4Step17forward_uncheckedCs8K9WJNlS7Dz_5trace", "<usize as core[2b1f2bbd3b605c]::iter::range::Step>::forward_unchecked"),
    ("_RNvXsb_NtCsfiKabdrepoq_5alloc3vecINtB5_3VecIBw_dEEINtNtNtCsTACXlTRjQ_4core3ops5index5IndexjE5indexCs8K9WJNlS7Dz_5trace", "<alloc[b23c587ff69f26b0]::vec::Vec<alloc[b23c587ff69f26b0]::vec::Vec<f64>> as core[2b1f2bbd3b605c]::ops::index::Index<usize>>::index"),
    ("_RNvXsb_NtCsfiKabdrepoq_5alloc3vecINtB5_3VecdEINtNtNtCsTACXlTRjQ_4core3ops5index5IndexjE5indexCs8K9WJNlS7Dz_5trace", "<alloc[b23c587ff69f26b0]::vec::Vec<f64> as core[2b1f2bbd3b605c]::ops::index::Index<usize>>::index"),
    ("_RNvXsc_NtCsfiKabdrepoq_5alloc3vecINtB5_3VecIBw_dEEINtNtNtCsTACXlTRjQ_4core3ops5index8IndexMutjE9index_mutCs8K9WJNlS7Dz_5trace", "<alloc[b23c587ff69f26b0]::vec::Vec<alloc[b23c587ff69f26b0]::vec::Vec<f64>> as core[2b1f2bbd3b605c]::ops::index::IndexMut<usize>>::index_mut"),
    ("_RNvXsc_NtCsfiKabdrepoq_5alloc3vecINtB5_3VecdEINtNtNtCsTACXlTRjQ_4core3ops5index8IndexMutjE9index_mutCs8K9WJNlS7Dz_5trace", "<alloc[b23c587ff69f26b0]::vec::Vec<f64> as core[2b1f2bbd3b605c]::ops::index::IndexMut<usize>>::index_mut"),
    ("_RNvXsl_NtCs2zQ9tAH61OF_11rand_chacha6chachaNtB5_12ChaCha12CoreNtNtCseBIf0Yfsj9G_9rand_core5block12BlockRngCore8generateCsiznFMVuT3yX_4rand", "<rand_chacha[1e074debef4c1c0b]::chacha::ChaCha12Core as rand_core[aa26d6c2f7a786b6]::block::BlockRngCore>::generate"),
];

/// `c++filt`'s v0 output without the `[0123abcd]` crate disambiguators (which follow a
/// crate name, unlike a slice type such as `<[f64]>`).
fn without_disambiguators(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find('[') {
        let close = rest[open..].find(']').map(|c| open + c);
        match close {
            Some(c)
                if c > open + 1
                    && rest[..open].ends_with(|ch: char| ch.is_alphanumeric() || ch == '_')
                    && rest[open + 1..c].bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                out.push_str(&rest[..open]);
                rest = &rest[c + 1..];
            }
            _ => {
                out.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `c++filt`'s legacy Rust output without its trailing `::h<16 hex>` hash.
fn without_hash(s: &str) -> &str {
    match s.rsplit_once("::h") {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => name,
        _ => s,
    }
}

#[test]
fn cpp_names_match_cxxfilt() {
    for &(raw, reference) in CXX {
        assert_eq!(demangle(raw).as_deref(), Some(reference), "{raw}");
    }
}

#[test]
fn rust_legacy_names_match_cxxfilt_without_the_hash() {
    for &(raw, reference) in RUST_LEGACY {
        assert_eq!(demangle(raw).as_deref(), Some(without_hash(reference)), "{raw}");
    }
    assert_eq!(demangle("_ZN4core3fmt5write17h0123456789abcdefE").as_deref(), Some("core::fmt::write"));
    // rustc-demangle's documented example: `{:#}` of it is "foo".
    assert_eq!(demangle("_ZN3foo17h05af221e174051e9E").as_deref(), Some("foo"));
}

#[test]
fn rust_v0_names_match_cxxfilt_and_rustc_demangle_docs() {
    for &(raw, reference) in FIXTURE_V0 {
        assert_eq!(demangle(raw), Some(without_disambiguators(reference)), "{raw}");
    }
    assert_eq!(demangle("_RNvCs8K9WJNlS7Dz_5trace17multiply_matrices").as_deref(), Some("trace::multiply_matrices"));
    // From rustc-demangle's v0 tests (`t_nohash!`, the `{:#}` form).
    assert_eq!(demangle("_RNvC6_123foo3bar").as_deref(), Some("123foo::bar"));
    assert_eq!(
        demangle("_RNCNCNgCs6DXkGYLi8lr_2cc5spawn00B5_").as_deref(),
        Some("cc::spawn::{closure#0}::{closure#0}")
    );
    assert_eq!(
        demangle("_RINbNbCskIICzLVDPPb_5alloc5alloc8box_freeDINbNiB4_5boxed5FnBoxuEp6OutputuEL_ECs1iopQbuBiw2_3std")
            .as_deref(),
        Some("alloc::alloc::box_free::<dyn alloc::boxed::FnBox<(), Output = ()>>")
    );
}

#[test]
fn names_that_are_not_mangled_stay() {
    for name in [
        "main",
        "runtime.mallocgc",
        "std::vector<int>::push_back(int const&)",
        "core::fmt::write",
        "_start",
        "_init",
        "__libc_start_main",
        "_Z",
        "_R",
        "_ZN3foo",
        "[unknown]",
        "<module> (x.py:3)",
    ] {
        assert_eq!(demangle(name), None, "{name}");
    }
}

/// (self, total) per function name.
type SelfTotal = BTreeMap<String, (i64, i64)>;

/// (self, total) per demangled name, from the file's text alone: frames leaf first, the
/// symbol without `+0x…`, mangled symbols named through `c++filt`'s table.
fn expected(text: &str) -> (SelfTotal, SelfTotal) {
    let names: BTreeMap<&str, String> =
        FIXTURE_V0.iter().map(|&(raw, reference)| (raw, without_disambiguators(reference))).collect();
    let (mut counts, mut periods) = (SelfTotal::new(), SelfTotal::new());
    let mut records: Vec<(i64, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            let tokens: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(tokens[4], "task-clock:ppp:");
            records.push((tokens[3].parse().unwrap(), Vec::new()));
            continue;
        }
        let symbol = line.split_whitespace().nth(1).unwrap();
        let symbol = symbol.rsplit_once("+0x").map_or(symbol, |(s, _)| s);
        let name = names.get(symbol).cloned().unwrap_or_else(|| symbol.to_owned());
        records.last_mut().unwrap().1.push(name);
    }
    for (period, stack) in records {
        let mut once = BTreeSet::new();
        for (i, name) in stack.iter().enumerate() {
            let (c, p) = (counts.entry(name.clone()).or_default(), periods.entry(name.clone()).or_default());
            if i == 0 {
                c.0 += 1;
                p.0 += period;
            }
            if once.insert(name) {
                c.1 += 1;
                p.1 += period;
            }
        }
    }
    (counts, periods)
}

fn self_total(p: &Profile, sample_index: &str) -> SelfTotal {
    let prepared = Query { sample: sample_index.into(), ..Query::default() }.prepare(p).unwrap();
    let report = top(&prepared, &TopOptions::default()).unwrap();
    report.functions.into_iter().map(|r| (r.name, (r.flat, r.cum))).collect()
}

#[test]
fn rust_perf_fixture_is_demangled_and_keeps_raw_symbols() {
    let Some(dir) = fixtures() else { return };
    let bytes = read(&dir.join("thirdparty/speedscope/rust-mangled.linux-perf.txt"));
    let p = parse(&bytes).unwrap();
    let by_name: BTreeMap<&str, &str> = p.functions.iter().map(|f| (p.str(f.name), p.str(f.system_name))).collect();
    assert_eq!(by_name.get("trace::multiply_matrices").copied(), Some("_RNvCs8K9WJNlS7Dz_5trace17multiply_matrices"));
    assert_eq!(
        by_name.get("std::rt::lang_start::<()>").copied(),
        Some("_RINvNtCse0yjq9ZQveU_3std2rt10lang_startuECs8K9WJNlS7Dz_5trace")
    );
    assert_eq!(
        by_name.get("<alloc::vec::Vec<f64> as core::ops::index::Index<usize>>::index").copied(),
        Some("_RNvXsb_NtCsfiKabdrepoq_5alloc3vecINtB5_3VecdEINtNtNtCsTACXlTRjQ_4core3ops5index5IndexjE5indexCs8K9WJNlS7Dz_5trace")
    );
    // Unmangled symbols keep their name as both.
    assert_eq!(by_name.get("__libc_start_main").copied(), Some("__libc_start_main"));
    assert_eq!(by_name.get("_start").copied(), Some("_start"));
    // Every function: a raw v0 symbol is shown as c++filt's name without disambiguators.
    assert_eq!(p.functions.len(), FIXTURE_V0.len() + 2);
    for f in &p.functions {
        let raw = p.str(f.system_name);
        let want = FIXTURE_V0
            .iter()
            .find(|(r, _)| *r == raw)
            .map_or(raw.to_owned(), |(_, reference)| without_disambiguators(reference));
        assert_eq!(p.str(f.name), want);
    }

    let text = String::from_utf8(bytes).unwrap();
    let (counts, periods) = expected(&text);
    assert_eq!(self_total(&p, "samples"), counts);
    assert_eq!(self_total(&p, "task-clock"), periods);
    assert_eq!(counts["std::rt::lang_start::<()>"], (0, 96));
    assert_eq!(periods["std::rt::lang_start::<()>"], (0, 96 * 16_949_152));
    assert_eq!(counts["trace::multiply_matrices"].0, 6);

    // With raw names, the same figures under the mangled symbols.
    let mut raw = p.clone();
    use_raw_names(&mut raw);
    let raw_counts = self_total(&raw, "samples");
    assert_eq!(raw_counts["_RNvCs8K9WJNlS7Dz_5trace17multiply_matrices"], counts["trace::multiply_matrices"]);
    assert_eq!(raw_counts.len(), counts.len());
    assert!(!raw_counts.contains_key("trace::multiply_matrices"));
}

#[test]
fn folded_and_callgrind_names_are_demangled() {
    let folded =
        parse(b"_ZN4core3fmt5write17h0123456789abcdefE;_ZN5space3fooEibc 3\nmain;_ZN5space3fooEibc 2\n").unwrap();
    let top = self_total(&folded, "");
    assert_eq!(top["space::foo(int, bool, char)"], (5, 5));
    assert_eq!(top["core::fmt::write"], (0, 3));
    assert_eq!(top["main"], (0, 2));
    let f = folded.functions.iter().find(|f| folded.str(f.name) == "core::fmt::write").unwrap();
    assert_eq!(folded.str(f.system_name), "_ZN4core3fmt5write17h0123456789abcdefE");

    let callgrind = parse(
        b"# callgrind format\nevents: Ir\nfl=(1) a.cc\nfn=(1) _ZN5space3fooEibc\n1 10\nfn=(2) main\n2 1\ncfl=(1)\ncfn=(1)\ncalls=1 1\n1 10\n",
    )
    .unwrap();
    let top = self_total(&callgrind, "");
    assert_eq!(top["space::foo(int, bool, char)"], (10, 10));
    assert_eq!(top["main"], (1, 11));
    let f = callgrind.functions.iter().find(|f| callgrind.str(f.system_name) == "_ZN5space3fooEibc").unwrap();
    assert_eq!(callgrind.str(f.name), "space::foo(int, bool, char)");
}
