//! Inputs that crashed, hung or exhausted memory under `cargo fuzz` (core/fuzz,
//! FUZZING.md), minimized where they are inline, with the outcome each must now have.

use stacklens_core::analysis::diff::diff_top;
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::tree::{CallTree, TreeNode, TreeOptions};
use stacklens_core::analysis::{Prepared, Query};
use stacklens_core::model::{Line, Profile, Sample, SourceFormat};
use stacklens_core::parse;

/// A profile with one sample of `value` per stack, stacks given root first.
fn profile(stacks: &[(&[&str], i64)]) -> Profile {
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count")];
    for (frames, value) in stacks {
        let locations = frames
            .iter()
            .rev()
            .map(|name| {
                let function = p.add_function(name, name, "", 0);
                p.add_location(0, vec![Line { function, line: 0, column: 0 }])
            })
            .collect();
        p.samples.push(Sample { locations, values: vec![*value], labels: Vec::new() });
    }
    p
}

/// fuzz target `tree_bytes`: a header declaring 0x544c0000 names made `from_bytes`
/// reserve 34 GB before reading any of them.
#[test]
fn tree_from_bytes_with_a_huge_name_count_is_refused_without_allocating_it() {
    let bytes = b"SLT3\0\0\0\0\0\0\0\0\0\0LT";
    assert!(CallTree::from_bytes(bytes).is_none());
}

/// fuzz target `tree_bytes`: a node that was its own parent passed `from_bytes`, and
/// `path` (and layout's walk up from a zoomed node) then looped, growing until OOM.
#[test]
fn tree_from_bytes_refuses_a_parent_that_does_not_come_first() {
    let p = profile(&[(&["main", "work"], 1)]);
    let mut tree = CallTree::build(&Prepared::whole(&p).unwrap(), &TreeOptions::default()).unwrap();
    assert_eq!(tree.nodes.len(), 3);
    assert!(CallTree::from_bytes(&tree.to_bytes()).is_some());
    tree.nodes[2] = TreeNode { parent: 2, ..tree.nodes[2] };
    assert!(CallTree::from_bytes(&tree.to_bytes()).is_none(), "a node that is its own parent");
    tree.nodes[1] = TreeNode { parent: 2, ..tree.nodes[1] };
    tree.nodes[2] = TreeNode { parent: 1, ..tree.nodes[2] };
    assert!(CallTree::from_bytes(&tree.to_bytes()).is_none(), "two nodes that are each other's parent");
    // The fuzzer's input (nodes 1 and 2 are each other's parent).
    assert!(CallTree::from_bytes(include_bytes!("fuzz_regressions/tree_bytes_parent_cycle.bin")).is_none());
}

/// fuzz target `tree_bytes`: `search` summed the totals of matching subtrees with `+`,
/// which overflowed on large values; it saturates like every other sum in the tree.
#[test]
fn tree_search_saturates_the_covered_value() {
    let p = profile(&[(&["main", "a"], i64::MAX), (&["other", "b"], i64::MAX)]);
    let tree = CallTree::build(&Prepared::whole(&p).unwrap(), &TreeOptions::default()).unwrap();
    let (hits, covered) = tree.search(|name| name == "a" || name == "b");
    assert_eq!(hits.iter().filter(|&&h| h).count(), 2);
    assert_eq!(covered, i64::MAX);
    // The fuzzer's input: a tree whose matching subtrees add up past i64::MAX.
    let fuzzed = CallTree::from_bytes(include_bytes!("fuzz_regressions/tree_bytes_search_overflow.bin")).unwrap();
    assert_eq!(fuzzed.search(|_| true).1, i64::MAX);
}

/// fuzz targets `analysis_top` and `diff`: a node fraction such as -1e300 (any finite
/// JSON number is accepted) made the cutoff `i64::MIN`, whose `abs` overflowed. The
/// cutoff saturates instead, so such a fraction drops every node.
#[test]
fn top_with_a_huge_negative_node_fraction_drops_every_node() {
    let p = profile(&[(&["main", "work"], 5)]);
    let options = TopOptions { node_fraction: -1e300, ..TopOptions::default() };
    let r = top(&Prepared::whole(&p).unwrap(), &options).unwrap();
    assert_eq!((r.total, r.node_total, r.dropped_nodes, r.node_cutoff), (5, 2, 2, i64::MAX));
    assert!(r.functions.is_empty());
    // A net change of i64::MIN (compare MIN, base MAX) times a fraction of 1 is the same.
    let base = profile(&[(&["main"], i64::MAX)]);
    let compare = profile(&[(&["main"], i64::MIN)]);
    let (base, compare) = Query::default().prepare_pair(&base, &compare).unwrap();
    let d = diff_top(&base, &compare, &TopOptions { node_fraction: 1.0, ..TopOptions::default() }).unwrap();
    assert_eq!(d.node_cutoff, i64::MAX);
    assert_eq!(d.functions.len(), 1, "|cum| of i64::MIN reaches the cutoff");
    assert_eq!((d.functions[0].flat, d.functions[0].cum), (i64::MIN, i64::MIN));
}

/// fuzz target `parse` (OOM at 2.5 GB): memory map variables (`name=value`, used as
/// `$name`) whose values name earlier variables doubled a line per definition. Lines
/// that would outgrow any real entry are skipped; ordinary variables still work.
#[test]
fn memory_map_variables_cannot_grow_lines_exponentially() {
    let mut text = String::from(
        "--- threadz 1 ---\n--- Thread 1 (name: main/1) stack: ---\n  0x401000\n--- Memory map: ---\nv00=xxxxxxxx\n",
    );
    for i in 1..60 {
        text.push_str(&format!("v{i:02}=$v{:02}$v{:02}\n", i - 1, i - 1));
    }
    text.push_str("lib=/usr/lib\n400000-500000: $lib/app\n");
    let p = parse(text.as_bytes()).unwrap();
    assert_eq!(p.source, SourceFormat::Threadz);
    assert_eq!((p.samples.len(), p.mappings.len()), (1, 1));
    assert_eq!(p.str(p.mappings[0].filename), "/usr/lib/app");
    let location = p.location(p.samples.sample(0).locations[0]);
    assert_eq!((location.address, location.mapping.map(|m| m.0)), (0x400fff, Some(0)));
    // The fuzzer's inputs: a threadz text whose memory map defines `$` over and over
    // (target `parse`), and the same in the bodies of `count_text` and `threadz_text`,
    // which the targets put after these headers.
    let p = parse(include_bytes!("fuzz_regressions/parse_memory_map_expansion.bin")).unwrap();
    assert_eq!((p.source, p.samples.len(), p.mappings.len()), (SourceFormat::Threadz, 0, 21));
    let with_header = |header: &str, body: &[u8]| [header.as_bytes(), body].concat();
    let count = with_header(
        "goroutine profile: total 1\n",
        include_bytes!("fuzz_regressions/count_text_memory_map_expansion.bin"),
    );
    let p = stacklens_core::import::go_text::parse_count(&count, &Default::default()).unwrap();
    assert_eq!((p.source, p.samples.len(), p.mappings.len()), (SourceFormat::GoCountText, 1, 0));
    let threadz =
        with_header("--- threadz 1 ---\n", include_bytes!("fuzz_regressions/threadz_text_memory_map_expansion.bin"));
    let p = stacklens_core::import::legacy_text::parse_threadz(&threadz, &Default::default()).unwrap();
    assert_eq!((p.source, p.samples.len(), p.mappings.len()), (SourceFormat::Threadz, 0, 0));
}

/// Profiling `count_text` showed its executions spent 38 % in substring searches: every
/// map line was searched once per variable, then searched again after each replacement.
/// Substitution is now one pass, as pprof's `strings.Replacer`: where two names match,
/// the earlier definition wins, and a value is not expanded again. `go tool pprof -raw`
/// on this text prints the mappings `/xb/app` and `$d/lib`.
#[test]
fn memory_map_variables_are_substituted_in_one_pass_as_pprof_does() {
    let text = "--- threadz 1 ---\n--- Thread 1 (name: main/1) stack: ---\n  0x401000\n  0x601000\n\
                --- Memory map: ---\na=/x\nab=/y\nc=$d\nd=/z\n400000-500000: $ab/app\n600000-700000: $c/lib\n";
    let p = parse(text.as_bytes()).unwrap();
    let files: Vec<&str> = p.mappings.iter().map(|m| p.str(m.filename)).collect();
    assert_eq!(files, ["/xb/app", "$d/lib"]);
}

/// fuzz target `goroutines` (through `parse`'s format detection): folded-stack
/// detection split a line after its last whitespace by adding one byte, which panicked
/// inside a multi-byte space (U+2007). Such a space separates the count like any other.
#[test]
fn folded_stacks_with_a_unicode_space_before_the_count_parse() {
    let p = parse("main;work\u{2007}7\n".as_bytes()).unwrap();
    assert_eq!(p.source, SourceFormat::Folded);
    assert_eq!((p.samples.len(), p.total(0)), (1, 7));
    let names: Vec<&str> =
        p.samples.sample(0).locations.iter().map(|&l| p.line_function_name(&p.location(l).lines[0])).collect();
    assert_eq!(names, ["work", "main"]);
}

/// fuzz target `firefox`: `symbolicate` marks `meta.symbolicated`, and indexing a `meta`
/// that is an array (the second of two `meta` keys wins) panicked in serde_json. Such a
/// profile is refused with a typed error before anything is renamed.
#[test]
fn symbolicating_a_profile_whose_meta_is_not_an_object_is_an_error() {
    let fuzzed = r#"{"meta": {"interval": 1}, "meta": [{"name": "busy", "debugName": "bzusy"}], "threads": [{"name": "t9223372036854775807", "stringAiray": ["0x120", "0x900", "busy"], "funcTable": {"name": [0, 1], "resource": [0, 0], "fileName": [null, null]}, "frameTable": {"func": [0, 1], "address": [288, 2304]}, "resourceTable": {"lib": [0], "name": [2]}, "skabTclate": {"frame": [1, 0], "prefix": [null, 0]}, "samples": {"stack": [1, 1, 0]}}], "syms": {"string_table": ["main.hot", "/src/busy.go"], "Data": [{"debug_name": "busy", "symbol_table": [{"rva": 256, "size": 64, "symbol": 0, "frames": [{"file": 1, "line": 7}]}]}]}}"#;
    let mut profile: serde_json::Value = serde_json::from_str(fuzzed).unwrap();
    let syms = profile["syms"].clone();
    let before = profile.clone();
    let err = stacklens_core::import::firefox::symbolicate(&mut profile, &syms).unwrap_err();
    assert_eq!(err, stacklens_core::Error::Invalid("Firefox profile: its meta is not an object".into()));
    assert_eq!(profile, before, "nothing was renamed");
    // A missing meta is still fine: it is created with the mark.
    let mut no_meta = serde_json::json!({"threads": []});
    assert_eq!(stacklens_core::import::firefox::symbolicate(&mut no_meta, &syms).unwrap(), 0);
    assert_eq!(no_meta["meta"]["symbolicated"], true);
}

#[test]
fn a_symbol_whose_section_ends_past_the_address_space_is_read_without_overflow() {
    use stacklens_core::symbols::{AddressLookup, ObjectFile};
    // An ELF whose sizeless symbol's section is placed so its end overflows a u64.
    let data = include_bytes!("fuzz_regressions/symbols_elf_section_end_overflow.bin");
    let (address, file) = data.split_first_chunk::<8>().unwrap();
    let object = ObjectFile::parse(file).expect("a readable ELF");
    let _ = object.lookup(u64::from_le_bytes(*address));
}

#[test]
fn the_last_address_is_looked_up_without_overflow() {
    use stacklens_core::symbols::{AddressLookup, ObjectFile};
    // addr2line searches [address, address + 1): the last address would overflow it.
    let data = include_bytes!("fuzz_regressions/symbols_elf_last_address.bin");
    let (address, file) = data.split_first_chunk::<8>().unwrap();
    let object = ObjectFile::parse(file).expect("a readable ELF");
    assert_eq!(object.lookup(u64::from_le_bytes(*address)), Ok(Vec::new()));
}
