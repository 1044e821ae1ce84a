//! Property tests: arbitrary bytes never panic or hang any importer; random valid
//! profiles survive encode → parse unchanged, and top's totals agree with the samples.

use proptest::prelude::*;
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::Query;
use stacklens_core::export::pprof::encode;
use stacklens_core::model::{Label, LabelValue, Line, Profile, Sample, SampleRef, SourceFormat};
use stacklens_core::parse;

/// Headers that steer random bytes into each text importer.
const HEADERS: &[&str] = &[
    "",
    "heap profile: 1: 2 [3: 4] @ heap/1024\n",
    "--- contention:\ncycles/second=1000\n",
    "--- mutex:\nsampling period=1\n",
    "goroutine profile: total 5\n",
    "goroutine 1 [running]:\n",
    "--- threadz 1 ---\n--- Thread 1 (name: a/1) stack: ---\n",
    "--- heapz 1 ---\nformat = java\nresolution = bytes\n",
    "\u{1f}\u{8b}",
    PMCSTAT_HEADER,
    "Weight\tSelf Weight\tSymbol Names\n",
    "v8-version,6,0,287,53,0\ncode-creation,Stub,3,1,0x100,16,\"X\"\ntick,0x104,2,0,0x0,0\n",
    "CPU     ID                    FUNCTION:NAME\n  0  1  :tick-1s\n\n",
    "Function Stack,CPU Time:Self,Module\n",
    "SIMPLEPERF\u{1}\u{0}",
    "*version\n3\nclock=dual\n*methods\n0x10\tA\tf\n*end\nSLOW\u{3}\u{0} \u{0}",
    "Analysis of sampling a (pid 1) every 1 millisecond\nCall graph:\n    5 Thread_1\n",
    "Level,Function Name,Number of Calls,Elapsed Exclusive Time %,Module Name,\n",
];

const PMCSTAT_HEADER: &str = "@ inst_retired.any [35705 samples]\n\n";

fn no_panic(bytes: &[u8]) {
    // Either outcome is fine; a panic or a hang fails the property.
    if let Err(e) = parse(bytes) {
        assert!(!e.to_string().is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        no_panic(&bytes);
    }

    #[test]
    fn arbitrary_text_after_a_known_header_never_panics(
        header in proptest::sample::select(HEADERS),
        body in "[ -~\t\n]{0,600}",
    ) {
        no_panic(format!("{header}{body}").as_bytes());
    }

    #[test]
    fn arbitrary_record_lines_never_panic(
        header in proptest::sample::select(&HEADERS[1..7]),
        lines in proptest::collection::vec("(-?[0-9]{1,20}|[0-9a-fx@: \\[\\]#]{0,30}){1,4}", 0..20),
    ) {
        no_panic(format!("{header}{}", lines.join("\n")).as_bytes());
    }

    #[test]
    fn arbitrary_pmcstat_trees_never_panic(
        lines in proptest::collection::vec("( {0,4})[0-9.]{1,5}%  \\[[0-9]{1,20}\\]  [a-z]{1,3}( @ /[a-z]{1,3})?", 0..20),
    ) {
        no_panic(format!("{}{}", PMCSTAT_HEADER, lines.join("\n")).as_bytes());
    }

    #[test]
    fn flipped_bytes_in_a_real_profile_never_panic(
        seed in random_profile(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = encode(&seed);
        for (at, value) in flips {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
        }
        no_panic(&bytes);
    }

    #[test]
    fn valid_profiles_round_trip(p in random_profile()) {
        let back = parse(&encode(&p)).expect("a valid profile parses");
        prop_assert_eq!(back.samples.len(), p.samples.len());
        for (a, b) in p.samples.iter().zip(&back.samples) {
            prop_assert_eq!(&a.values, &b.values);
            let names = |prof: &Profile, s: SampleRef<'_>| -> Vec<String> {
                s.locations.iter().map(|l| prof.line_function_name(&prof.location(*l).lines[0]).to_owned()).collect()
            };
            prop_assert_eq!(names(&p, a), names(&back, b));
            prop_assert_eq!(a.labels.len(), b.labels.len());
        }
        for i in 0..p.sample_types.len() {
            let prepared = Query { sample: i.into(), ..Query::default() }.prepare(&back).unwrap();
            let r = top(&prepared, &TopOptions::default()).unwrap();
            prop_assert_eq!(r.total, p.total(i));
            // Flat values partition the samples that have a frame.
            let with_frames: i64 = p.samples.iter().filter(|s| !s.locations.is_empty()).map(|s| s.values[i]).sum();
            prop_assert_eq!(r.functions.iter().map(|f| f.flat).sum::<i64>(), with_frames);
        }
    }
}

prop_compose! {
    fn random_profile()(
        n_types in 1usize..4,
        n_functions in 1usize..20,
        stacks in proptest::collection::vec(
            (proptest::collection::vec(0usize..20, 0..12), proptest::collection::vec(-1000i64..100_000, 3), any::<bool>()),
            0..40,
        ),
    ) -> Profile {
        let mut p = Profile::new(SourceFormat::Built);
        p.sample_types = (0..n_types).map(|i| p.value_type(&format!("type{i}"), "count")).collect();
        let locations: Vec<_> = (0..n_functions)
            .map(|i| {
                let f = p.add_function(&format!("pkg.f{i}"), "", "f.go", 0);
                p.add_location(0x1000 + i as u64, vec![Line { function: f, line: i as i64, column: 0 }])
            })
            .collect();
        let key = p.strings.intern("endpoint");
        let value = p.strings.intern("/api");
        for (frames, values, labelled) in stacks {
            p.samples.push(Sample {
                locations: frames.iter().map(|&f| locations[f % n_functions]).collect(),
                values: values[..n_types].to_vec(),
                labels: if labelled { vec![Label { key, value: LabelValue::Str(value) }] } else { vec![] },
            });
        }
        p
    }
}
