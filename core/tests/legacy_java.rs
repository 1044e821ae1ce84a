//! Java legacy profiles (heapz, contentionz text; binary CPU), in the layout pprof's
//! legacy Java parser reads. No real files are in the fixture corpus, so these inputs
//! are written here from that layout.

use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::Query;
use stacklens_core::model::SourceFormat;

fn names(p: &stacklens_core::Profile, sample: usize) -> Vec<String> {
    p.samples
        .sample(sample)
        .locations
        .iter()
        .map(|l| p.line_function_name(&p.location(*l).lines[0]).to_owned())
        .collect()
}

#[test]
fn java_heapz_is_unsampled_and_named() {
    let text = "--- heapz 1 ---\nformat = java\nresolution = bytes\n  524288 2 @ 0x00000003 0x00000004\n  1000 10 @ 0x00000004\n0x00000003 com.example.Cache.put (Cache.java:42)\n0x00000004 java.lang.Thread.run (Thread.java:745)\n0x00000009 never.Used (X.java:1)\n";
    let p = stacklens_core::parse(text.as_bytes()).unwrap();
    assert_eq!(p.source, SourceFormat::JavaText);
    assert_eq!(
        (p.sample_type_name(0), p.sample_type_name(1), p.sample_type_unit(1)),
        ("inuse_objects", "inuse_space", "bytes")
    );
    // Average 262144 B at a 512 KiB sampling rate: scale = 1 / (1 - e^-0.5).
    let scale = 1.0 / (1.0 - (-0.5f64).exp());
    assert_eq!(p.samples.sample(0).values, vec![(2.0 * scale) as i64, (524288.0 * scale) as i64]);
    assert_eq!(names(&p, 0), ["com.example.Cache.put", "java.lang.Thread.run"]);
    let line = p.location(p.samples.sample(0).locations[0]).lines[0];
    assert_eq!((p.str(p.function(line.function).filename), line.line), ("Cache.java", 42));
    assert_eq!(p.locations.len(), 2, "unreferenced frame ids are not locations");
}

#[test]
fn java_contentionz_scales_by_period() {
    let text = "--- contentionz 1 ---\nformat = java\nresolution = microseconds\nsampling period = 100\nms since reset = 6019923\n  2000 3 @ 0x00000001\n0x00000001 java.lang.Object.wait (Native Method)\n";
    let p = stacklens_core::parse(text.as_bytes()).unwrap();
    assert_eq!(p.source, SourceFormat::JavaText);
    assert_eq!(p.samples.sample(0).values, vec![300, 200_000]);
    assert_eq!(p.duration_nanos, 6_019_923_000_000);
    // "(Native Method)" is a path without a line: the base name is kept as the file.
    assert_eq!(names(&p, 0), ["java.lang.Object.wait"]);
    let prepared = Query { sample: "delay".into(), ..Query::default() }.prepare(&p).unwrap();
    let r = top(&prepared, &TopOptions::default()).unwrap();
    assert_eq!(r.functions[0].flat, 200_000);
}

#[test]
fn java_binary_cpu_profile() {
    // Header 0, 3, 1 (Java), 10000 µs, 0; records (count, depth, frame ids); end marker.
    let words: [u64; 14] = [0, 3, 1, 10_000, 0, 5, 2, 0x11, 0x12, 7, 1, 0x12, 0, 1];
    let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(b"0x0000000000000011 com.example.Work.hot (Work.java:7)\n0x0000000000000012 GC\n");
    let p = stacklens_core::parse(&bytes).unwrap();
    assert_eq!(p.source, SourceFormat::LegacyCpu);
    assert_eq!(p.period, 10_000_000);
    assert_eq!(p.samples.len(), 2);
    assert_eq!(p.samples.sample(0).values, vec![5, 50_000_000]);
    assert_eq!(names(&p, 0), ["com.example.Work.hot", "GC"]);
    assert_eq!(names(&p, 1), ["GC"]);
}
