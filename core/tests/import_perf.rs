//! Linux `perf script` text: with and without `--header`, one or several events,
//! periods, kernel/user/unknown frames, DSOs as mappings, Java and Go stacks.

mod common;

use std::collections::BTreeMap;

use common::{fixtures, inflated, read, PERF_SCRIPT_FIXTURES};
use proptest::prelude::*;
use stacklens_core::analysis::frames::use_raw_names;
use stacklens_core::analysis::top::{top, Inlining, TopOptions};
use stacklens_core::analysis::{Query, SampleType};
use stacklens_core::import::{detect, perf_script, Format};
use stacklens_core::model::{LabelValue, SourceFormat};
use stacklens_core::{parse, Error, Profile};

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8(inflated(bytes)).unwrap()
}

/// One event's numbers as the file states them.
#[derive(Debug, Default)]
struct Event {
    samples: i64,
    periods: i64,
    has_period: bool,
    /// Self samples and self periods by the leaf frame's display name.
    flat: BTreeMap<String, i64>,
    flat_period: BTreeMap<String, i64>,
}

/// Reads the records without the importer: `comm pid [cpu] time: [period] event:`
/// then frame lines, leaf first. Events in order of appearance.
fn expected(text: &str) -> Vec<(String, Event)> {
    let mut events: Vec<(String, Event)> = Vec::new();
    // (event index, period, leaf seen)
    let mut current: Option<(usize, i64, bool)> = None;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.trim().is_empty() {
            current = None;
            continue;
        }
        if line.starts_with([' ', '\t']) {
            let Some((event, period, leaf_seen)) = current.as_mut() else { panic!("frame outside a record") };
            if *leaf_seen {
                continue;
            }
            *leaf_seen = true;
            let rest = line.trim().split_once(' ').map_or("", |(_, r)| r);
            let (symbol, dso) = match rest.rfind(" (") {
                Some(i) if rest.ends_with(')') => (&rest[..i], &rest[i + 2..rest.len() - 1]),
                _ => (rest, ""),
            };
            let symbol = match symbol.rsplit_once("+0x") {
                Some((s, off)) if off.chars().all(|c| c.is_ascii_hexdigit()) => s,
                _ => symbol,
            };
            let name = match (symbol, dso) {
                ("[unknown]" | "", "[unknown]" | "") => "<unknown>".to_owned(),
                ("[unknown]" | "", dso) => format!("[{}]", dso.rsplit('/').next().unwrap()),
                (symbol, _) => symbol.to_owned(),
            };
            let e = &mut events[*event].1;
            *e.flat.entry(name.clone()).or_default() += 1;
            *e.flat_period.entry(name).or_default() += *period;
            continue;
        }
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let time = tokens.iter().position(|t| t.ends_with(':') && t[..t.len() - 1].parse::<f64>().is_ok()).unwrap();
        let (period, event_token) = match tokens[time + 1].parse::<i64>() {
            Ok(p) => (Some(p), tokens[time + 2]),
            Err(_) => (None, tokens[time + 1]),
        };
        let name = event_token.split(':').next().unwrap();
        let index = match events.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                events.push((name.to_owned(), Event::default()));
                events.len() - 1
            }
        };
        let e = &mut events[index].1;
        e.samples += 1;
        e.periods += period.unwrap_or(0);
        e.has_period |= period.is_some();
        current = Some((index, period.unwrap_or(0), false));
    }
    events
}

fn flat_by_function(p: &Profile, sample_type: &str) -> BTreeMap<String, i64> {
    let prepared = Query { sample: sample_type.into(), ..Query::default() }.prepare(p).unwrap();
    let report = top(&prepared, &TopOptions::default()).unwrap();
    report.functions.into_iter().filter(|f| f.flat != 0).map(|f| (f.name, f.flat)).collect()
}

/// [`flat_by_function`] by raw symbols (`system_name`), as the text has them.
fn flat_by_symbol(p: &Profile, sample_type: &str) -> BTreeMap<String, i64> {
    let mut raw = p.clone();
    use_raw_names(&mut raw);
    flat_by_function(&raw, sample_type)
}

fn hottest(flat: &BTreeMap<String, i64>) -> (&str, i64) {
    let (name, v) = flat.iter().max_by_key(|(n, v)| (**v, std::cmp::Reverse(n.as_str()))).unwrap();
    (name.as_str(), *v)
}

fn types(p: &Profile) -> Vec<String> {
    (0..p.sample_types.len()).map(|i| format!("{}/{}", p.sample_type_name(i), p.sample_type_unit(i))).collect()
}

fn load(dir: &std::path::Path, name: &str) -> (Profile, Vec<(String, Event)>) {
    let bytes = read(&dir.join(name));
    let p = parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    (p, expected(&text_of(&bytes)))
}

#[test]
fn every_fixture_matches_its_text() {
    let Some(dir) = fixtures() else { return };
    for name in PERF_SCRIPT_FIXTURES {
        let bytes = read(&dir.join(name));
        assert_eq!(detect(text_of(&bytes).as_bytes()), Format::Of(SourceFormat::PerfScript), "{name}");
        let (p, events) = load(&dir, name);
        assert_eq!(p.source, SourceFormat::PerfScript);
        let single = events.len() == 1;
        for (event, e) in &events {
            let count_type = if single { "samples".to_owned() } else { format!("{event}_samples") };
            let i = SampleType::parse(&count_type).resolve(&p).unwrap_or_else(|_| panic!("{name}: no {count_type}"));
            assert_eq!(p.sample_type_unit(i), "count");
            assert_eq!(p.total(i), e.samples, "{name}: {count_type}");
            assert_eq!(flat_by_symbol(&p, &count_type), e.flat, "{name}: self per function, {count_type}");
            if e.has_period {
                let w = SampleType::parse(event).resolve(&p).unwrap();
                assert_eq!(p.total(w), e.periods, "{name}: {event} periods");
                let flat: BTreeMap<String, i64> = e.flat_period.clone().into_iter().filter(|(_, v)| *v != 0).collect();
                assert_eq!(flat_by_symbol(&p, event), flat, "{name}: self per function, {event}");
            }
        }
        let expected_types = events.iter().map(|(_, e)| if e.has_period { 2 } else { 1 }).sum::<usize>();
        assert_eq!(p.sample_types.len(), expected_types, "{name}: {:?}", types(&p));
        // Every record is labelled with its command and pid.
        assert!(p.samples.iter().all(|s| s.labels.iter().any(|l| p.str(l.key) == "comm")), "{name}");
    }
}

#[test]
fn two_events_are_two_sample_types() {
    let Some(dir) = fixtures() else { return };
    let (p, events) = load(&dir, "thirdparty/flamegraph/perf-cycles-instructions-01.txt");
    assert_eq!(types(&p), ["instructions_samples/count", "cycles_samples/count"]);
    assert_eq!((p.total(0), p.total(1)), (333, 111));
    assert_eq!(
        events.iter().map(|(n, e)| (n.as_str(), e.samples)).collect::<Vec<_>>(),
        [("instructions", 333), ("cycles", 111)]
    );
    // A record counts only in its own event's type.
    assert!(p.samples.iter().all(|s| s.values.iter().filter(|v| **v != 0).count() == 1));
    assert_eq!(hottest(&flat_by_function(&p, "instructions_samples")), ("main", 274));
    assert_eq!(hottest(&flat_by_function(&p, "cycles_samples")), ("main", 68));
    let dsos: Vec<&str> = p.mappings.iter().map(|m| p.str(m.filename)).collect();
    assert!(dsos.contains(&"/usr/bin/cksum") && dsos.contains(&"/root/noploop"), "{dsos:?}");
}

#[test]
fn periods_are_weights_beside_sample_counts() {
    let Some(dir) = fixtures() else { return };
    let (p, _) = load(&dir, "thirdparty/inferno/perf-go-stacks.txt");
    assert_eq!(types(&p), ["samples/count", "cpu-clock/nanoseconds"]);
    assert_eq!((p.total(0), p.total(1)), (5, 1_250_000));
    assert_eq!(hottest(&flat_by_function(&p, "cpu-clock")), ("runtime.growslice", 500_000));
    // Addresses are kept, offsets are not part of names, the binary is the mapping.
    let loc = p
        .locations
        .iter()
        .find(|l| l.lines.first().is_some_and(|line| p.line_function_name(line) == "runtime.mapassign_faststr"))
        .unwrap();
    assert_eq!(loc.address, 0x414297);
    assert_eq!(p.str(p.mapping(loc.mapping.unwrap()).filename), "/usr/lib/go/bin/go");

    let (p, _) = load(&dir, "thirdparty/speedscope/rust-mangled.linux-perf.txt");
    assert_eq!(types(&p), ["samples/count", "task-clock/nanoseconds"]);
    assert_eq!((p.total(0), p.total(1)), (96, 1_627_118_592));
    // v0 symbols are demangled; the raw symbol stays the system name (see import_demangle.rs).
    assert!(p
        .functions
        .iter()
        .any(|f| p.str(f.name) == "<alloc::vec::Vec<f64> as core::ops::index::Index<usize>>::index"
            && p.str(f.system_name).starts_with("_RNvXsb_NtCsfiKabdrepoq_5alloc3vec")));

    let (p, _) = load(&dir, "thirdparty/firefox-profiler/graphviz.perf.gz");
    assert_eq!(types(&p), ["samples/count", "cycles/count"]);
    assert_eq!((p.total(0), p.total(1)), (312, 171_113_749));
    assert_eq!(hottest(&flat_by_function(&p, "samples")), ("native_write_msr", 17));
    // Unsymbolized frames are shown by their library, as pprof does.
    assert_eq!(hottest(&flat_by_function(&p, "cycles")), ("[libcdt.so.5.0.0]", 5_292_389));
}

#[test]
fn header_block_and_kernel_user_unknown_frames() {
    let Some(dir) = fixtures() else { return };
    let (p, _) = load(&dir, "thirdparty/speedscope/simple-with-header.linux-perf.txt");
    assert_eq!((p.total(0), p.total(1)), (136, 136_136_136));
    // `_Z4betav` in the file; `c++filt _Z4betav` prints `beta()`.
    assert_eq!(hottest(&flat_by_function(&p, "samples")), ("beta()", 47));
    assert_eq!(hottest(&flat_by_symbol(&p, "samples")), ("_Z4betav", 47));
    assert!(p.comments.iter().any(|c| p.str(*c).starts_with("perf version:")));
    let libc = p.functions.iter().position(|f| p.str(f.name) == "__libc_start_main").unwrap();
    let loc = p.locations.iter().find(|l| l.lines.iter().any(|line| line.function.0 as usize == libc)).unwrap();
    assert_eq!(p.str(p.mapping(loc.mapping.unwrap()).filename), "/lib/x86_64-linux-gnu/libc-2.27.so");
    assert_eq!(p.duration_nanos, 198_789_613_576_000 - 198_789_478_194_000);

    let (p, _) = load(&dir, "thirdparty/flamegraph/perf-java-stacks-01.txt");
    assert_eq!(types(&p), ["samples/count"]);
    assert_eq!(p.total(0), 46);
    assert_eq!(hottest(&flat_by_function(&p, "samples")), ("native_write_msr_safe", 16));
    let mapping_of = |name: &str| {
        let f = p.functions.iter().position(|f| p.str(f.name) == name).unwrap();
        let l = p.locations.iter().find(|l| l.lines.iter().any(|line| line.function.0 as usize == f)).unwrap();
        p.str(p.mapping(l.mapping.unwrap()).filename).to_owned()
    };
    assert_eq!(mapping_of("native_write_msr_safe"), "[kernel.kallsyms]");
    assert!(mapping_of("Lorg/mozilla/javascript/ScriptableObject;.getSlot").starts_with("/tmp/perf-"));
    // `[unknown] ([unknown])`: a location with its address and no function or mapping.
    assert!(p.locations.iter().any(|l| l.lines.is_empty() && l.mapping.is_none() && l.address != 0));
    let comm = p.samples.sample(0).labels.iter().find(|l| p.str(l.key) == "comm").unwrap();
    assert!(matches!(comm.value, LabelValue::Str(s) if p.str(s) == "ab"));

    let (p, _) = load(&dir, "thirdparty/flamegraph/example-perf-stacks.txt.gz");
    assert_eq!(p.total(0), 1315);
    assert_eq!(hottest(&flat_by_function(&p, "samples")), ("Lorg/mozilla/javascript/ScriptableObject;.createSlot", 91));
    let tid = p.samples.sample(0).labels.iter().find(|l| p.str(l.key) == "tid").unwrap();
    assert!(matches!(tid.value, LabelValue::Num { value: 977, .. }));
}

#[test]
fn records_without_call_graphs_and_tracepoints() {
    let text = "app 10 [000] 1.000000: 5 cycles:u:  4005d0 main+0x10 (/bin/app)\n\
                app 10 [000] 1.000100: 7 cycles:u:  4005e0 work (/bin/app)\n\
                app 10 [000] 1.000200: sched:sched_switch: prev_comm=app prev_pid=10\n\
                \t4005e0 work (/bin/app)\n\
                \t/src/app.c:42\n\
                \t4005d0 main (/bin/app)\n";
    let p = parse(text.as_bytes()).unwrap();
    assert_eq!(types(&p), ["cycles_samples/count", "cycles/count", "sched:sched_switch_samples/count"]);
    assert_eq!((p.total(0), p.total(1), p.total(2)), (2, 12, 1));
    assert_eq!(flat_by_function(&p, "cycles"), BTreeMap::from([("main".to_owned(), 5), ("work".to_owned(), 7)]));
    let last = p.samples.last().unwrap();
    assert_eq!(last.locations.len(), 2);
    assert_eq!(p.location(last.locations[0]).lines[0].line, 42, "srcline after a frame");
}

#[test]
fn malformed_lines_are_typed_errors_with_line_numbers() {
    let good = "app 10 1.000000: 5 cycles:\n\t4005d0 main (/bin/app)\n\n";
    let err = perf_script::parse(
        format!("{good}app 10 1.000100: 7 cycles:\n\tnot an address\n").as_bytes(),
        &Default::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "MalformedText");
    assert!(matches!(err, Error::Text { format: "perf script", line: 5, .. }), "{err}");
    let err = perf_script::parse(format!("{good}\tffff81 stray (/x)\n").as_bytes(), &Default::default()).unwrap_err();
    assert!(matches!(err, Error::Text { line: 4, ref reason, .. } if reason.contains("outside")), "{err}");
    let err = perf_script::parse(format!("{good}just words here\n").as_bytes(), &Default::default()).unwrap_err();
    assert!(matches!(err, Error::Text { line: 4, .. }), "{err}");
    let err = perf_script::parse(b"# only a header\n", &Default::default()).unwrap_err();
    assert!(matches!(err, Error::Text { line: 1, ref reason, .. } if reason.contains("no samples")), "{err}");
    // Through detection too.
    let err = parse(format!("{good}app 10 1.000100: 7 cycles:\n\tzz main\n").as_bytes()).unwrap_err();
    assert!(matches!(err, Error::Text { line: 5, .. }), "{err}");
}

/// Records in the shape `perf script --inline` (perf 6.1) printed for a C program built
/// with `gcc -O2 -g` whose `inner` is inlined into `outer.constprop.0` (perf marks
/// `outer` inlined too, its name differing from the symbol's), and one from ld.so with
/// inlined frames at two addresses.
const INLINED: &str = "\
inl  5626 17840.700046:     250000 cpu-clock:ppp: 
	            11a4 inner+0x34 (inlined)
	            11a4 outer+0x34 (inlined)
	            105f main+0xf (/tmp/perfinl/inl)
	           27249 __libc_start_call_main+0x79 (/usr/lib/x86_64-linux-gnu/libc.so.6)

inl  5626 17840.700295:     250000 cpu-clock:ppp: 
	            11a4 inner+0x34 (inlined)
	            11a4 outer+0x34 (inlined)
	            105f main+0xf (/tmp/perfinl/inl)
	           27249 __libc_start_call_main+0x79 (/usr/lib/x86_64-linux-gnu/libc.so.6)

inl  5626 17840.700544:     250000 cpu-clock:ppp: 
	            11b0 inner+0x40 (inlined)
	            11b0 outer.constprop.0+0x40 (/tmp/perfinl/inl)
	            105f main+0xf (/tmp/perfinl/inl)
	           27249 __libc_start_call_main+0x79 (/usr/lib/x86_64-linux-gnu/libc.so.6)

inl  5626 17840.699293:     250000 cpu-clock:ppp: 
	           15c78 get_extended_indices+0x5e8 (inlined)
	           15c78 init_cpu_features+0x5e8 (inlined)
	           1a303 dl_platform_init+0x33 (inlined)
	           1a303 _dl_sysdep_start+0x33 (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)
";

/// The same first record with `-F +srcline`: the `(inlined)` mark ends the source line.
const INLINED_SRCLINE: &str = "\
inl  5626 17840.700046:     250000 cpu-clock:ppp: 
	            11a4 inner+0x34
  inl.c:3 (inlined)
	            11a4 outer+0x34
  inl.c:8 (inlined)
	            105f main+0xf (/tmp/perfinl/inl)
  inl.c:11
";

/// (function names, line numbers) of a location, innermost first.
fn lines_of(p: &Profile, l: &stacklens_core::model::Location) -> (Vec<String>, Vec<i64>) {
    (l.lines.iter().map(|x| p.line_function_name(x).to_owned()).collect(), l.lines.iter().map(|x| x.line).collect())
}

#[test]
fn inlined_frames_are_lines_of_one_location() {
    let p = perf_script::parse(INLINED.as_bytes(), &Default::default()).unwrap();
    // 11a4 [inner, outer], 105f, 27249, 11b0 [inner, outer.constprop.0], 15c78 [two], 1a303 [two].
    assert_eq!(p.locations.len(), 6);
    let at = |address: u64| p.locations.iter().find(|l| l.address == address).unwrap();
    assert_eq!(lines_of(&p, at(0x11a4)).0, ["inner", "outer"]);
    assert_eq!(lines_of(&p, at(0x11b0)).0, ["inner", "outer.constprop.0"]);
    assert_eq!(lines_of(&p, at(0x105f)).0, ["main"]);
    assert_eq!(lines_of(&p, at(0x15c78)).0, ["get_extended_indices", "init_cpu_features"]);
    assert_eq!(lines_of(&p, at(0x1a303)).0, ["dl_platform_init", "_dl_sysdep_start"]);
    // The mapping is the DSO of the frame that names one; all-inlined runs have none.
    let mapping = |address: u64| at(address).mapping.map(|m| p.str(p.mapping(m).filename).to_owned());
    assert_eq!(mapping(0x11b0).as_deref(), Some("/tmp/perfinl/inl"));
    assert_eq!(mapping(0x1a303).as_deref(), Some("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"));
    assert_eq!(mapping(0x11a4), None);
    let inl = p.mappings.iter().find(|m| p.str(m.filename) == "/tmp/perfinl/inl").unwrap();
    assert!(inl.has_inline_frames && inl.has_functions);
    // Stacks: three locations per inl record, two for the ld.so one; timed records are
    // one sample each.
    let mut depths: Vec<usize> = p.samples.iter().map(|s| s.locations.len()).collect();
    depths.sort();
    assert_eq!(depths, [2, 3, 3, 3]);
    assert_eq!(p.total(0), 4);

    // pprof's marks: `inner` is only ever inlined; `main` and the physical frames are calls.
    let prepared = Query { sample: "samples".into(), ..Query::default() }.prepare(&p).unwrap();
    let report = top(&prepared, &TopOptions::default()).unwrap();
    let row = |name: &str| report.functions.iter().find(|r| r.name == name).unwrap();
    assert_eq!((row("inner").flat, row("inner").cum, row("inner").inline), (3, 3, Some(Inlining::Inline)));
    assert_eq!((row("outer").flat, row("outer").cum, row("outer").inline), (0, 2, None));
    assert_eq!((row("main").flat, row("main").cum, row("main").inline), (0, 3, None));
    assert_eq!((row("get_extended_indices").flat, row("get_extended_indices").inline), (1, Some(Inlining::Inline)));
    assert_eq!(row("_dl_sysdep_start").cum, 1);

    let p = perf_script::parse(INLINED_SRCLINE.as_bytes(), &Default::default()).unwrap();
    assert_eq!(p.locations.len(), 2);
    assert_eq!(lines_of(&p, &p.locations[0]), (vec!["inner".to_owned(), "outer".to_owned()], vec![3, 8]));
    assert_eq!(lines_of(&p, &p.locations[1]), (vec!["main".to_owned()], vec![11]));
    assert_eq!(p.str(p.mapping(p.locations[1].mapping.unwrap()).filename), "/tmp/perfinl/inl");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_after_a_valid_first_line_never_panics(
        first in proptest::sample::select(&[
            "go  6157  1224.147545:     250000 cpu-clock:uhH: \n",
            "perf   977/977   [000] 7628263.042515: cycles: \n",
            "# ========\n# captured on: today\n# ========\n#\na 1 [000] 2.5: instructions:\n",
        ][..]),
        body in "[ -~\t\n\\[\\]():+0-9a-f]{0,600}",
    ) {
        let text = format!("{first}{body}");
        for result in [perf_script::parse(text.as_bytes(), &Default::default()), parse(text.as_bytes())] {
            if let Err(e) = result {
                prop_assert!(!e.to_string().is_empty());
            }
        }
        if let Ok(p) = perf_script::parse(text.as_bytes(), &Default::default()) {
            for i in 0..p.sample_types.len() {
                let query = Query { sample: i.into(), ..Query::default() };
                prop_assert!(query.prepare(&p).and_then(|prepared| top(&prepared, &TopOptions::default())).is_ok());
            }
        }
    }
}
