//! OpenTelemetry profiles (OTLP): real Go pprof profiles converted with OpenTelemetry's
//! own Python classes at test time (`tests/programs/otlp.py`), as protobuf, OTLP/JSON and
//! a gzipped `ExportProfilesServiceRequest`, each with `go tool pprof -top`'s numbers of
//! the source; the OpenTelemetry eBPF profiler's own output read as those classes read
//! it; and the format's rules (zero entries, indices, shapes, links) on messages built
//! here.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::top_check::{check_against, pprof_options, Case};
use common::{fixtures, missing_prerequisite, read, read_pprof_top};
use prost::Message;
use stacklens_core::analysis::{query::SampleType, Prepared, Query};
use stacklens_core::export::{export, ExportFormat};
use stacklens_core::import::otlp::proto::{self, any_value::Value as Any, AnyValue};
use stacklens_core::import::{detect, Format, ParseOptions};
use stacklens_core::model::{LabelValue, SourceFormat};
use stacklens_core::{Error, Profile};

/// The Python of `.tools/otlp` (opentelemetry-proto from PyPI, by scripts/ensure-tools.sh).
fn python() -> Option<PathBuf> {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/otlp/bin/python");
    if python.is_file() {
        return Some(python);
    }
    missing_prerequisite(&format!("{} (opentelemetry-proto; scripts/ensure-tools.sh)", python.display()));
    None
}

fn script(python: &Path, args: &[&std::ffi::OsStr]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/programs/otlp.py");
    let out = Command::new(python).arg(script).args(args).output().unwrap();
    assert!(out.status.success(), "otlp.py: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stacklens-otlp-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn go_profiles_converted_by_the_official_classes_have_pprofs_numbers() {
    let (Some(root), Some(python)) = (fixtures(), python()) else { return };
    let dir = temp_dir("go");
    // Each source and the stored pprof tops of it (one per sample type for the heap).
    let cases = [
        ("go/base/cpu.pb.gz", vec!["go/base/cpu.pprof-top.txt"]),
        (
            "go/base/heap.pb.gz",
            vec![
                "go/base/heap.inuse_space.pprof-top.txt",
                "go/base/heap.alloc_objects.pprof-top.txt",
                "go/base/heap.alloc_space.pprof-top.txt",
                "go/base/heap.inuse_objects.pprof-top.txt",
            ],
        ),
        ("go/base/goroutine.pb.gz", vec!["go/base/goroutine.pprof-top.txt"]),
        ("go/base/mutex.pb.gz", vec!["go/base/mutex.pprof-top.txt"]),
        ("go/base/block.pb.gz", vec!["go/base/block.pprof-top.txt"]),
    ];
    let mut problems = Vec::new();
    for (source, tops) in cases {
        let base = dir.join(Path::new(source).file_stem().unwrap());
        script(&python, &["from-pprof".as_ref(), root.join(source).as_os_str(), base.as_os_str(), "svc".as_ref()]);
        let outputs = ["pb", "json", "request.pb.gz"].map(|ext| PathBuf::from(format!("{}.{ext}", base.display())));
        let direct = read(&outputs[0]);
        assert_eq!(detect(&direct), Format::Of(SourceFormat::Otlp), "{source}");
        for output in &outputs {
            let p = stacklens_core::parse(&read(output)).unwrap_or_else(|e| panic!("{}: {e}", output.display()));
            assert_eq!(p.source, SourceFormat::Otlp, "{}", output.display());
            // The pprof sample types are one OTLP profile each, joined again.
            let pprof = stacklens_core::parse(&read(&root.join(source))).unwrap();
            assert_eq!(p.samples.len(), pprof.samples.len(), "{}", output.display());
            for top in &tops {
                let expected = std::fs::read_to_string(root.join(top)).unwrap();
                let sample_type = read_pprof_top(&expected).sample_type;
                let case = Case {
                    expected: root.join(top),
                    profile: output.clone(),
                    base: None,
                    query: Query { sample: SampleType::Named(sample_type), ..Query::default() },
                    options: pprof_options(20),
                };
                if let Err(e) = check_against(&case, &expected) {
                    problems.push(format!("{} against {top}: {e}", output.display()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_ebpf_profilers_export_reads_as_the_official_classes_read_it() {
    let (Some(root), Some(python)) = (fixtures(), python()) else { return };
    let file = root.join("thirdparty/pyroscope/otel-ebpf-profile.pb.bin");
    let theirs: serde_json::Value =
        serde_json::from_str(&script(&python, &["summary".as_ref(), file.as_os_str()])).unwrap();
    let p = stacklens_core::parse(&read(&file)).unwrap();
    let mut observations = 0;
    for (name, total) in theirs["totals"].as_object().unwrap() {
        let (kind, unit) = name.split_once('/').unwrap();
        let i = (0..p.sample_types.len())
            .find(|&i| p.sample_type_name(i) == kind && p.sample_type_unit(i) == unit)
            .unwrap_or_else(|| panic!("no {name}"));
        assert_eq!(p.total(i), total["sum"].as_i64().unwrap(), "{name}");
        observations += total["observations"].as_i64().unwrap();
    }
    // One sample per observation, each at its timestamp, in time order.
    assert_eq!(p.samples.len() as i64, observations);
    assert_eq!(p.sample_times.len(), p.samples.len());
    assert!(p.sample_times.windows(2).all(|w| w[0].start <= w[1].start));
    let keys: BTreeSet<&str> = p.samples.iter().flat_map(|s| s.labels.iter().map(|l| p.str(l.key))).collect();
    let expected: BTreeSet<&str> = ["resourceKeys", "sampleKeys"]
        .iter()
        .flat_map(|k| theirs[k].as_array().unwrap().iter().map(|v| v.as_str().unwrap()))
        .collect();
    assert_eq!(keys, expected);
    // Mapping build ids are kept for symbolization (the kernel's among them).
    let vmlinux = p.mappings.iter().find(|m| p.str(m.filename) == "vmlinux").unwrap();
    assert_eq!(p.str(vmlinux.build_id), "7b547e58a70dd26d821993906be478993a56599b");
}

/// A message with one mapping, two functions, two locations and the stack [2, 1].
fn message() -> proto::ProfilesData {
    let strings = ["", "cpu", "nanoseconds", "main", "work", "/bin/app", "thread", "samples", "count"];
    let dictionary = proto::ProfilesDictionary {
        string_table: strings.iter().map(|s| (*s).to_owned()).collect(),
        mapping_table: vec![
            Default::default(),
            proto::Mapping { memory_limit: 0x1000, filename_strindex: 5, ..Default::default() },
        ],
        function_table: vec![
            Default::default(),
            proto::Function { name_strindex: 3, ..Default::default() },
            proto::Function { name_strindex: 4, ..Default::default() },
        ],
        location_table: vec![
            Default::default(),
            proto::Location {
                mapping_index: 1,
                address: 0x10,
                lines: vec![proto::Line { function_index: 1, line: 3, column: 0 }],
                ..Default::default()
            },
            proto::Location {
                mapping_index: 1,
                address: 0x20,
                lines: vec![proto::Line { function_index: 2, line: 9, column: 0 }],
                ..Default::default()
            },
        ],
        link_table: vec![
            proto::Link { trace_id: vec![0; 16], span_id: vec![0; 8] },
            proto::Link { trace_id: (1..=16).collect(), span_id: (1..=8).collect() },
        ],
        attribute_table: vec![
            Default::default(),
            proto::KeyValueAndUnit {
                key_strindex: 6,
                value: Some(AnyValue { value: Some(Any::StringValueStrindex(4)) }),
                unit_strindex: 0,
            },
        ],
        stack_table: vec![Default::default(), proto::Stack { location_indices: vec![2, 1] }],
    };
    let profile = proto::Profile {
        sample_type: Some(proto::ValueType { type_strindex: 1, unit_strindex: 2 }),
        time_unix_nano: 1_000_000_000,
        duration_nano: 10_000_000,
        samples: vec![proto::Sample { stack_index: 1, values: vec![7], ..Default::default() }],
        ..Default::default()
    };
    proto::ProfilesData {
        resource_profiles: vec![proto::ResourceProfiles {
            scope_profiles: vec![proto::ScopeProfiles { profiles: vec![profile], ..Default::default() }],
            ..Default::default()
        }],
        dictionary: Some(dictionary),
    }
}

fn parse(data: &proto::ProfilesData) -> Result<Profile, Error> {
    stacklens_core::parse(&data.encode_to_vec())
}

fn first_profile(data: &mut proto::ProfilesData) -> &mut proto::Profile {
    &mut data.resource_profiles[0].scope_profiles[0].profiles[0]
}

#[test]
fn stacks_are_leaf_first_with_their_functions_and_lines() {
    let p = parse(&message()).unwrap();
    let sample = p.samples.sample(0);
    let names: Vec<&str> = sample.locations.iter().map(|&l| p.line_function_name(&p.location(l).lines[0])).collect();
    assert_eq!(names, ["work", "main"]);
    assert_eq!(sample.values, [7]);
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("cpu", "nanoseconds"));
    assert_eq!(p.str(p.mappings[0].filename), "/bin/app");
    assert_eq!((p.time_nanos, p.duration_nanos), (1_000_000_000, 10_000_000));
}

#[test]
fn links_and_attributes_become_labels() {
    let mut data = message();
    let sample = &mut first_profile(&mut data).samples[0];
    sample.link_index = 1;
    sample.attribute_indices = vec![1];
    let p = parse(&data).unwrap();
    let labels: Vec<(String, String)> = p
        .samples
        .sample(0)
        .labels
        .iter()
        .map(|l| match &l.value {
            LabelValue::Str(v) => (p.str(l.key).to_owned(), p.str(*v).to_owned()),
            LabelValue::Num { value, .. } => (p.str(l.key).to_owned(), value.to_string()),
        })
        .collect();
    assert!(labels.contains(&("thread".into(), "work".into())), "{labels:?}");
    assert!(labels.contains(&("trace_id".into(), "0102030405060708090a0b0c0d0e0f10".into())), "{labels:?}");
    assert!(labels.contains(&("span_id".into(), "0102030405060708".into())), "{labels:?}");
}

#[test]
fn each_shape_of_observations_counts_as_the_format_says() {
    // Timestamps only: each counts 1, at its time; per-timestamp values; one total.
    let shapes: [(Vec<i64>, Vec<u64>, i64, usize); 3] = [
        (vec![], vec![1_000_000_100, 1_000_000_300, 1_000_000_200], 3, 3),
        (vec![2, 3], vec![1_000_000_100, 1_000_000_200], 5, 2),
        (vec![10], vec![], 10, 1),
    ];
    for (values, times, total, samples) in shapes {
        let mut data = message();
        let sample = &mut first_profile(&mut data).samples[0];
        (sample.values, sample.timestamps_unix_nano) = (values, times.clone());
        let p = parse(&data).unwrap();
        assert_eq!((p.total(0), p.samples.len()), (total, samples), "{times:?}");
        let starts: Vec<i64> = p.sample_times.iter().map(|t| t.start).collect();
        let mut expected: Vec<i64> = times.iter().map(|t| (t - 1_000_000_000) as i64).collect();
        expected.sort();
        assert_eq!(starts, expected);
    }
}

#[test]
fn profiles_of_one_layout_join_and_others_keep_their_own_samples() {
    let mut data = message();
    let mut count = first_profile(&mut data).clone();
    count.sample_type = Some(proto::ValueType { type_strindex: 7, unit_strindex: 8 });
    count.samples[0].values = vec![1];
    let mut other = count.clone();
    other.time_unix_nano += 1;
    data.resource_profiles[0].scope_profiles[0].profiles.push(count);
    let p = parse(&data).unwrap();
    assert_eq!(p.samples.len(), 1);
    assert_eq!(p.samples.sample(0).values, [7, 1]);
    // Another time: its own samples, zero in the other column.
    data.resource_profiles[0].scope_profiles[0].profiles[1] = other;
    let p = parse(&data).unwrap();
    let values: Vec<Vec<i64>> = p.samples.iter().map(|s| s.values.to_vec()).collect();
    assert_eq!(values, [vec![7, 0], vec![0, 1]]);
}

#[test]
fn otlp_json_reads_as_the_protobuf_reads() {
    let json = serde_json::json!({
        "resourceProfiles": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "api"}}]},
            "scopeProfiles": [{"profiles": [{
                "sampleType": {"typeStrindex": 1, "unitStrindex": 2},
                "timeUnixNano": "1000000000",
                "samples": [{"stackIndex": 1, "values": ["7"], "linkIndex": 1}]
            }]}]
        }],
        "dictionary": {
            "stringTable": ["", "cpu", "nanoseconds", "main", "work", "/bin/app"],
            "mappingTable": [{}, {"memoryLimit": "4096", "filenameStrindex": 5}],
            "functionTable": [{}, {"nameStrindex": 3}, {"nameStrindex": 4}],
            "locationTable": [{}, {"mappingIndex": 1, "address": "16", "lines": [{"functionIndex": 1, "line": "3"}]},
                              {"mappingIndex": 1, "address": "32", "lines": [{"functionIndex": 2, "line": "9"}]}],
            "linkTable": [{}, {"traceId": "0102030405060708090a0b0c0d0e0f10", "spanId": "0102030405060708"}],
            "attributeTable": [{}],
            "stackTable": [{}, {"locationIndices": [2, 1]}]
        }
    });
    let p = stacklens_core::parse(json.to_string().as_bytes()).unwrap();
    assert_eq!(p.total(0), 7);
    let labels: Vec<&str> = p.samples.sample(0).labels.iter().map(|l| p.str(l.key)).collect();
    assert_eq!(labels, ["service.name", "trace_id", "span_id"]);
    let bad = json.to_string().replace("0102030405060708\"", "01020304050607zz\"");
    let error = stacklens_core::parse(bad.as_bytes()).unwrap_err();
    assert!(error.to_string().contains("not hex"), "{error}");
}

/// A change that breaks a message, by name, and what the error must say.
type Breakage = (&'static str, Box<dyn Fn(&mut proto::ProfilesData)>, &'static str);

#[test]
fn broken_messages_are_typed_errors() {
    let cases: Vec<Breakage> = vec![
        ("dangling stack", Box::new(|d| first_profile(d).samples[0].stack_index = 9), "stack id 9"),
        (
            "dangling location",
            Box::new(|d| d.dictionary.as_mut().unwrap().stack_table[1].location_indices.push(40)),
            "location id 40",
        ),
        ("negative index", Box::new(|d| first_profile(d).samples[0].attribute_indices = vec![-1]), "attribute id"),
        (
            "entry 0 not zero",
            Box::new(|d| d.dictionary.as_mut().unwrap().string_table[0] = "x".into()),
            "string_table[0] is not the zero value",
        ),
        (
            "a stack deeper than the limit",
            Box::new(|d| d.dictionary.as_mut().unwrap().stack_table[1].location_indices = vec![1; (1 << 16) + 1]),
            "more than the 65536",
        ),
        (
            "no values and no times",
            Box::new(|d| first_profile(d).samples[0].values.clear()),
            "neither values nor timestamps",
        ),
        (
            "values and times apart",
            Box::new(|d| first_profile(d).samples[0].timestamps_unix_nano = vec![1, 2]),
            "1 values and 2 timestamps",
        ),
    ];
    for (name, change, says) in cases {
        let mut data = message();
        change(&mut data);
        let error = parse(&data).unwrap_err().to_string();
        assert!(error.contains(says), "{name}: {error}");
    }
    // Bad UTF-8 in the string table: a decode error, not a panic.
    let mut bytes = message().encode_to_vec();
    let at = bytes.windows(4).position(|w| w == b"work").unwrap();
    bytes[at] = 0xff;
    let error = stacklens_core::parse(&bytes).unwrap_err();
    assert_eq!(error.code(), "InvalidProfile", "{error}");
    // A model past the budget stops the parse.
    let mut data = message();
    first_profile(&mut data).samples[0].timestamps_unix_nano = vec![1_000_000_000; 1000];
    first_profile(&mut data).samples[0].values.clear();
    let options = ParseOptions { max_model_bytes: 10_000, ..Default::default() };
    let error = stacklens_core::parse_with(&data.encode_to_vec(), &options).unwrap_err();
    assert!(matches!(error, Error::ModelTooLarge { .. }), "{error}");
}

#[test]
fn truncated_messages_never_panic() {
    let bytes = message().encode_to_vec();
    for cut in 0..bytes.len() {
        let _ = stacklens_core::parse(&bytes[..cut]);
    }
}

#[test]
fn exports_read_with_the_official_classes_with_the_same_sums_and_back() {
    let (Some(root), Some(python)) = (fixtures(), python()) else { return };
    let dir = temp_dir("export");
    for source in ["go/base/cpu.pb.gz", "go/base/heap.pb.gz", "thirdparty/pyroscope/otel-ebpf-profile.pb.bin"] {
        let p = stacklens_core::parse(&read(&root.join(source))).unwrap();
        let out = dir.join(format!("{}.otlp.pb", Path::new(source).file_name().unwrap().to_str().unwrap()));
        std::fs::write(&out, export(&Prepared::whole(&p).unwrap(), ExportFormat::Otlp).unwrap()).unwrap();
        let theirs: serde_json::Value =
            serde_json::from_str(&script(&python, &["summary".as_ref(), out.as_os_str()])).unwrap();
        let back = stacklens_core::parse(&read(&out)).unwrap();
        for i in 0..p.sample_types.len() {
            let name = format!("{}/{}", p.sample_type_name(i), p.sample_type_unit(i));
            assert_eq!(theirs["totals"][&name]["sum"].as_i64(), Some(p.total(i)), "{source} {name}");
            // The chosen sample type leads the export: columns are found by name.
            let j = (0..back.sample_types.len()).find(|&j| back.sample_type_name(j) == p.sample_type_name(i)).unwrap();
            assert_eq!(back.total(j), p.total(i), "{source} {name}");
        }
        assert_eq!(back.samples.len(), p.samples.len(), "{source}");
        assert_eq!(back.sample_times.len(), p.sample_times.len(), "{source}");
    }
    // A link survives: trace and span ids are a link again, not plain attributes.
    let mut data = message();
    first_profile(&mut data).samples[0].link_index = 1;
    let p = parse(&data).unwrap();
    let written = stacklens_core::export::otlp::data(&p, 0);
    assert_eq!(written.dictionary.as_ref().unwrap().link_table.len(), 2);
    assert_eq!(parse(&written).unwrap().samples.sample(0).labels, p.samples.sample(0).labels);
}

#[test]
fn a_part_of_a_shared_dictionary_takes_only_the_entries_its_samples_use() {
    let mut data = message();
    let dictionary = data.dictionary.as_mut().unwrap();
    dictionary.stack_table.push(proto::Stack { location_indices: vec![1] });
    let mut other = data.resource_profiles[0].clone();
    other.scope_profiles[0].profiles[0].samples[0].stack_index = 2;
    data.resource_profiles.push(other);
    let parts = stacklens_core::import::otlp::parts(&data);
    assert_eq!(parts.len(), 2);
    let second = stacklens_core::import::otlp::build_parts(&data, &parts[1..], &ParseOptions::default()).unwrap();
    let names: Vec<&str> = second.functions.iter().map(|f| second.str(f.name)).collect();
    assert_eq!((second.locations.len(), names), (1, vec!["main"]));
    assert_eq!(parse(&data).unwrap().locations.len(), 2);
}
