//! `go tool pprof -list` conformance: our text of real Go profiles (with the fixtures'
//! own sources) and of a built one is compared with pprof's, run at test time.

mod common;

use std::path::{Path, PathBuf};

use stacklens_core::analysis::source::{source, LineValues, SourceOptions, SourceReport};
use stacklens_core::analysis::Query;
use stacklens_core::export::pprof::write;
use stacklens_core::model::{Line, Profile, Sample, SourceFormat};
use stacklens_core::report::list::list;
use stacklens_core::{Error, Result};

/// Reads a source the way pprof's `openSourceFile` does in these tests: an absolute name
/// as is, a relative one in `search`; failing, pprof's message.
fn read_from(search: &Path) -> impl Fn(&str) -> Result<String, String> + '_ {
    move |path| {
        let absolute = Path::new(path).is_absolute();
        let full = if absolute { PathBuf::from(path) } else { search.join(path) };
        std::fs::read_to_string(full).map_err(|_| match absolute {
            true => format!("open {path}: no such file or directory"),
            false => format!("could not find file {path} on path {}", search.display()),
        })
    }
}

/// The source report of `profile` in the sample type `sample` names ("" for the default).
fn source_of(profile: &Profile, sample: &str, options: &SourceOptions) -> Result<SourceReport> {
    Query { sample: sample.into(), ..Query::default() }.prepare(profile).and_then(|prepared| source(&prepared, options))
}

/// Our `-list` of `file` in the sample type `sample` names, with sources read from `search`.
fn ours(file: &Path, sample: &str, options: &SourceOptions, search: &Path) -> String {
    let profile = stacklens_core::parse(&common::read(file)).unwrap();
    list(&source_of(&profile, sample, options).unwrap(), read_from(search))
}

/// `go tool pprof -symbolize=none -list REGEX FLAGS FILE`, run in `dir`.
fn theirs(go: &Path, dir: &Path, regex: &str, flags: &[&str], file: &Path) -> String {
    common::pprof(go, dir, &[file], &[&["-list", regex], flags].concat())
}

#[test]
fn go_profiles_list_like_pprof_with_their_sources() {
    let (Some(fixtures), Some(go)) = (common::fixtures(), common::go()) else { return };
    let gen = fixtures.join("gen");
    let gen_str = gen.to_str().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("go/base/cpu.pb.gz", r"main\.", ""),
        ("go/compare/cpu.pb.gz", r"main\.", "samples"),
        ("go/base/heap.pb.gz", r"main\.", ""),
        ("go/base/heap.pb.gz", r"main\.", "alloc_space"),
        ("go/compare/allocs.pb.gz", r"main\.", "alloc_objects"),
        ("go/base/mutex.pb.gz", r"main\.", ""),
        ("go/compare/block.pb.gz", r"main\.", "contentions"),
        ("go/base/goroutine.pb.gz", r"main\.", ""),
        // Go's own sources, named by absolute paths that exist where Go is installed.
        ("go/base/cpu.pb.gz", r"^sync\.|flate\.\(\*compressor\)\.deflate$", ""),
    ];
    for &(file, regex, sample_index) in cases {
        let path = fixtures.join(file);
        let index_flag = format!("-sample_index={sample_index}");
        let mut flags = vec!["-source_path", gen_str];
        if !sample_index.is_empty() {
            flags.push(&index_flag);
        }
        let expected = theirs(go, &fixtures, regex, &flags, &path);
        let options =
            SourceOptions { functions: regex.to_owned(), source_path: gen_str.to_owned(), ..SourceOptions::default() };
        let actual = ours(&path, sample_index, &options, &gen);
        assert!(expected.matches("ROUTINE").count() >= 5, "{file} {regex}: too few functions:\n{expected}");
        assert_eq!(actual, expected, "{file} -list {regex} {sample_index}");
    }
}

#[test]
fn trim_path_names_files_as_pprof_does() {
    let (Some(fixtures), Some(go)) = (common::fixtures(), common::go()) else { return };
    let path = fixtures.join("go/base/cpu.pb.gz");
    let fixtures_str = fixtures.to_str().unwrap();
    let trim = "/src/stacklens/shared/fixtures";
    let flags = ["-trim_path", trim, "-source_path", fixtures_str];
    let expected = theirs(go, &fixtures, r"main\.(compress|sha256)", &flags, &path);
    let options = SourceOptions {
        functions: r"main\.(compress|sha256)".to_owned(),
        trim_path: trim.to_owned(),
        source_path: fixtures_str.to_owned(),
    };
    assert!(expected.contains(" in gen/workload.go\n"), "{expected}");
    assert_eq!(ours(&path, "", &options, &fixtures), expected);
}

#[test]
fn missing_sources_are_reported_as_pprof_does() {
    let (Some(fixtures), Some(go)) = (common::fixtures(), common::go()) else { return };
    // Run where no source can be found: the profile names /src/stacklens/…, absent here.
    let empty = std::env::temp_dir().join(format!("stacklens-list-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let path = fixtures.join("go/base/mutex.pb.gz");
    let expected = theirs(go, &empty, r"main\.", &[], &path);
    let options = SourceOptions { functions: r"main\.".to_owned(), ..SourceOptions::default() };
    assert!(expected.contains(" Error: open /src/stacklens/shared/fixtures/gen/workload.go: no such file"));
    assert_eq!(ours(&path, "", &options, &empty), expected);
}

/// A profile of one program, `prog.go` (30 lines), with what `-list` must handle: a
/// recorded start line, a range cut by the end of the file, recursion, an inlined call,
/// two names of one file, a function without a file, one whose file is missing, and one
/// with only zero values.
fn built() -> Profile {
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count"), p.value_type("cpu", "nanoseconds")];
    p.period_type = Some(p.value_type("cpu", "nanoseconds"));
    p.period = 10_000_000;
    let mapping = p.add_module_mapping("/bin/prog");
    let main = p.add_function("main.main", "main.main", "prog.go", 2);
    let work = p.add_function("main.work", "main.work", "prog.go", 8);
    // The same function again under a name that cleans to the same file.
    let work_again = p.add_function("main.work", "main.work", "./prog.go", 8);
    let recurse = p.add_function("main.recurse", "main.recurse", "./x/../prog.go", 0);
    let inlined = p.add_function("main.inlined", "main.inlined", "prog.go", 0);
    let tail = p.add_function("main.tail", "main.tail", "prog.go", 0);
    let nofile = p.add_function("main.nofile", "main.nofile", "", 0);
    let missing = p.add_function("main.missing", "main.missing", "missing.go", 40);
    let idle = p.add_function("main.idle", "main.idle", "prog.go", 0);
    let mut at = |function, line: i64| {
        let location = p.add_location(0x1000 + line as u64, vec![Line { function, line, column: 0 }]);
        p.locations[location.0 as usize].mapping = Some(mapping);
        location
    };
    let (main4, main5, work10, work12, work12_again) =
        (at(main, 4), at(main, 5), at(work, 10), at(work, 12), at(work_again, 12));
    let (rec15, rec17, tail28, nofile3, missing44, idle20) =
        (at(recurse, 15), at(recurse, 17), at(tail, 28), at(nofile, 3), at(missing, 44), at(idle, 20));
    // main.inlined at line 21, inlined into main.work at line 11.
    let inline = p.add_location(
        0x2000,
        vec![Line { function: inlined, line: 21, column: 0 }, Line { function: work, line: 11, column: 0 }],
    );
    p.locations[inline.0 as usize].mapping = Some(mapping);
    let mut sample = |leaf_first: &[_], count: i64| {
        p.samples.push(Sample {
            locations: leaf_first.to_vec(),
            values: vec![count, count * 10_000_000],
            labels: vec![],
        })
    };
    sample(&[work10, main4], 3);
    sample(&[work12, main4], 2);
    sample(&[work12_again, work12, main4], 1);
    sample(&[inline, main5], 4);
    sample(&[rec15, rec17, rec15, main5], 5);
    sample(&[tail28, main5], 1);
    sample(&[nofile3, main4], 6);
    sample(&[missing44, main4], 7);
    sample(&[idle20, main4], 0);
    p
}

#[test]
fn a_built_profile_lists_like_pprof() {
    let Some(go) = common::go() else { return };
    let dir = std::env::temp_dir().join(format!("stacklens-list-built-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let program: String = (1..=30).map(|i| format!("\tline {i} // {}\n", "x".repeat(i % 4))).collect();
    std::fs::write(dir.join("prog.go"), program).unwrap();
    let file = dir.join("built.pb.gz");
    std::fs::write(&file, write(&built())).unwrap();

    let profile = built();
    for (regex, sample_index) in [(r"main\.", ""), (r"main\.", "samples"), (r"work|recurse", "cpu")] {
        let flags = ["-source_path", dir.to_str().unwrap(), "-sample_index", sample_index];
        let expected = theirs(go, &dir, regex, if sample_index.is_empty() { &flags[..2] } else { &flags }, &file);
        let options = SourceOptions { functions: regex.to_owned(), ..Default::default() };
        let actual = list(&source_of(&profile, sample_index, &options).unwrap(), read_from(&dir));
        assert_eq!(actual, expected, "-list {regex} -sample_index {sample_index}");
    }
}

#[test]
fn source_rows_carry_the_listing() {
    let report = source_of(&built(), "", &SourceOptions::function("main.work")).unwrap();
    assert_eq!((report.sample_type.as_str(), report.total), ("cpu", 290_000_000));
    let [work] = &report.functions[..] else { panic!("{report:?}") };
    let [file] = &work.files[..] else { panic!("{work:?}") };
    assert_eq!((file.file.as_str(), file.start_line, file.first_line, file.last_line), ("prog.go", 8, 8, 17));
    assert_eq!((file.flat, file.cum), (60_000_000, 100_000_000));
    let row = |line, flat: i64, cum: i64| LineValues { line, flat: flat * 10_000_000, cum: cum * 10_000_000 };
    assert_eq!(file.lines, [row(10, 3, 3), row(11, 0, 4), row(12, 3, 3)]);

    // Recursion counts a sample once per line, so the function's cum is twice the sample.
    let report = source_of(&built(), "", &SourceOptions::function("main.recurse")).unwrap();
    let file = &report.functions[0].files[0];
    assert_eq!((file.file.as_str(), file.cum, file.first_line, file.last_line), ("prog.go", 100_000_000, 10, 22));

    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["functions"][0]["files"][0]["firstLine"], 10);
    assert_eq!(
        json["functions"][0]["files"][0]["lines"][0],
        serde_json::json!({"line": 15, "flat": 50_000_000, "cum": 50_000_000})
    );
}

#[test]
fn no_match_and_bad_regex_are_errors() {
    let profile = built();
    let no_match = source_of(&profile, "", &SourceOptions::function("main.idle")).unwrap_err();
    assert_eq!(no_match, Error::NoMatchingFunction { regex: "^main\\.idle$".to_owned() });
    assert_eq!(no_match.to_string(), "no matches found for regexp: ^main\\.idle$");
    let bad = SourceOptions { functions: "main.(".to_owned(), ..SourceOptions::default() };
    assert!(matches!(source_of(&profile, "", &bad), Err(Error::InvalidRegex { option: "list", .. })));
    let unknown = SourceOptions { functions: "main".to_owned(), ..Default::default() };
    assert!(matches!(source_of(&profile, "wall", &unknown), Err(Error::UnknownSampleType { .. })));
}
