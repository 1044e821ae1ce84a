//! Tests of the budget: measuring, keeping inflated bytes, reserving, queueing and refusing.

use super::*;
use std::io::Write;

use super::plan::{keep_limit, KEEP_INFLATED};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[test]
fn inflated_sizes_are_measured_not_trusted() {
    let size = |bytes: &[u8], cap| Shape::measure(bytes, cap, 0).map(|s| s.0.bytes);
    assert_eq!(size(b"plain", 10).unwrap(), 5);
    assert_eq!(size(&gzip(&[7u8; 1000]), 10_000).unwrap(), 1000);
    let bomb = gzip(&vec![0u8; 1 << 20]);
    assert!(matches!(size(&bomb, 1 << 16), Err(BudgetError::InflatesTooLarge { cap: 65536 })));
    // A forged size field changes nothing.
    let mut forged = bomb.clone();
    let n = forged.len();
    forged[n - 4..].copy_from_slice(&16u32.to_le_bytes());
    assert!(matches!(size(&forged, 1 << 16), Err(BudgetError::InflatesTooLarge { .. })));
    let truncated = &bomb[..bomb.len() / 2];
    assert!(size(truncated, 1 << 30).unwrap() < 1 << 20);
}

/// The measuring pass keeps what the gzip trailer announces, up to its limit, and
/// nothing of a stream that inflates past what its trailer said.
#[test]
fn inflated_bytes_are_kept_as_far_as_the_trailer_says() {
    let data: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
    let honest = gzip(&data);
    assert_eq!(keep_limit(&honest), 3 << 20);
    let (shape, kept) = Shape::measure(&honest, 1 << 30, keep_limit(&honest)).unwrap();
    assert_eq!((shape.bytes, kept.as_deref() == Some(&data[..])), (3 << 20, true));
    let mut lying = honest.clone();
    let n = lying.len();
    lying[n - 4..].copy_from_slice(&(1u32 << 20).to_le_bytes());
    assert_eq!(keep_limit(&lying), 1 << 20);
    assert_eq!(Shape::measure(&lying, 1 << 30, keep_limit(&lying)).unwrap().1, None);
    // Small or beyond the limit: the old quarter megabyte.
    assert_eq!(keep_limit(&gzip(b"tiny")), KEEP_INFLATED);
    let mut huge = honest;
    huge[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(keep_limit(&huge), KEEP_INFLATED);
}

/// `samples` samples of `depth` frames each over `depth` locations.
fn pprof(samples: usize, depth: usize) -> Vec<u8> {
    use stacklens_core::model::{Line, Sample, SourceFormat};
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count")];
    let stack: Vec<_> = (0..depth)
        .map(|i| {
            let f = p.add_function(&format!("f{i}"), "", "x.go", 0);
            p.add_location(i as u64 + 1, vec![Line { function: f, line: 1, column: 0 }])
        })
        .collect();
    for i in 0..samples {
        // Location ids past 127 take two bytes: counted once each.
        p.samples.push(Sample { locations: stack.clone(), values: vec![i as i64 + 1], labels: vec![] });
    }
    stacklens_core::export::pprof::encode(&p)
}

#[test]
fn a_pprof_profile_is_counted_as_it_inflates() {
    let plain = pprof(1000, 200);
    let expected = Shape {
        bytes: plain.len() as u64,
        samples: 1000,
        locations: 200,
        location_ids: 200_000,
        protobuf: true,
        json: false,
    };
    assert_eq!(Shape::measure(&plain, 1 << 30, 0).unwrap().0, expected);
    // Gzipped, it arrives in 64 KiB pieces that split fields and varints.
    assert!(plain.len() > 1 << 17);
    assert_eq!(Shape::measure(&gzip(&plain), 1 << 30, 0).unwrap().0, expected);
    assert_eq!(expected.model_bytes(), plain.len() as u64 * 2 + 1000 * 240 + 200 * 160 + 200_000 * 16);
    // Cut short, or not protobuf at all: priced per byte.
    let cut = Shape::measure(&plain[..plain.len() - 3], 1 << 30, 0).unwrap().0;
    assert!(!cut.protobuf);
    assert_eq!(cut.model_bytes(), cut.bytes * cost::TEXT_PER_BYTE);
    let dump = Shape::measure(b"goroutine 1 [running]:\nmain.main()\n", 1 << 30, 0).unwrap().0;
    assert!(!dump.protobuf && !dump.json);
    let json = Shape::measure(b"  {\"meta\": {}}", 1 << 30, 0).unwrap().0;
    assert!(!json.protobuf && json.json);
    assert_eq!(json.model_bytes(), json.bytes * cost::JSON_PER_BYTE);
}

#[tokio::test]
async fn reservations_queue_and_refuse() {
    let budget = Budget::new(100 * UNIT, 1 << 20, 1, Duration::from_millis(50));
    let first = budget.hold(60 * UNIT).await.unwrap();
    assert_eq!(first.bytes(), 60 * UNIT);
    assert!(matches!(budget.hold(101 * UNIT).await, Err(BudgetError::OverBudget { .. })));
    // Does not fit: waits, then gives up as busy.
    assert!(matches!(budget.hold(30 * UNIT).await, Err(BudgetError::Busy { .. })));
    drop(first);
    let _again = budget.hold(60 * UNIT).await.unwrap();
}

#[tokio::test]
async fn held_bytes_take_at_most_half_and_stay_counted_through_the_parse() {
    let plain = Bytes::from_static(b"goroutine 1 [running]:\nmain.main()\n\t/x.go:1\n");
    let len = plain.len() as u64;
    let budget = Budget::new(1000 * UNIT, 1 << 20, 4, Duration::from_millis(50));
    // Bytes waiting for a parse: half the budget at most, though the rest is free.
    let waiting = budget.hold(500 * UNIT).await.unwrap();
    assert!(matches!(budget.hold(UNIT).await, Err(BudgetError::Busy { .. })));
    drop(waiting);
    let held = budget.hold(len).await.unwrap();
    let parsed = budget.parse_held(vec![plain.clone()], held).await.unwrap();
    assert_eq!(parsed.reserved.bytes(), (len + len * cost::TEXT_PER_BYTE).div_ceil(UNIT) * UNIT);
    // Parsing, the bytes no longer wait: the holding half is free again.
    let other = budget.hold(500 * UNIT).await.unwrap();
    drop(other);
    // Kept for storing: only the bytes stay reserved.
    let kept = parsed.keep(len);
    assert_eq!(kept.bytes(), UNIT);
    assert_eq!(budget.permits.available_permits(), 999);
    drop(kept);
    assert_eq!(budget.permits.available_permits(), 1000);
}

#[test]
fn small_inflated_bytes_are_kept_from_the_measuring_pass() {
    let plain = pprof(100, 20);
    let (shape, kept) = Shape::measure(&gzip(&plain), 1 << 30, plain.len() as u64).unwrap();
    assert_eq!((shape.bytes, kept.as_deref()), (plain.len() as u64, Some(plain.as_slice())));
    let (_, kept) = Shape::measure(&gzip(&plain), 1 << 30, plain.len() as u64 - 1).unwrap();
    assert!(kept.is_none(), "past the limit nothing is kept");
    let (_, kept) = Shape::measure(&plain, 1 << 30, 1 << 20).unwrap();
    assert!(kept.is_none(), "plain bytes are parsed as they are");
    let truncated = gzip(&plain);
    let (_, kept) = Shape::measure(&truncated[..truncated.len() / 2], 1 << 30, 1 << 20).unwrap();
    assert!(kept.is_none(), "a broken stream is left to core, which names the error");
}

#[tokio::test]
async fn a_gzipped_profile_reserves_what_it_needs_and_parses_as_core_does() {
    let plain = pprof(100, 20);
    let body = Bytes::from(gzip(&plain));
    let budget = Budget::new(100 << 20, 1 << 30, 4, Duration::from_millis(50));
    let held = budget.hold(body.len() as u64).await.unwrap();
    let parsed = budget.parse_held(vec![body.clone()], held).await.unwrap();
    let (shape, _) = Shape::measure(&body, 1 << 30, 0).unwrap();
    let need = body.len() as u64 + shape.model_bytes();
    // The room taken for the inflated bytes is not kept beyond the need.
    assert_eq!(parsed.reserved.bytes(), need.div_ceil(UNIT) * UNIT);
    assert_eq!(parsed.profiles[0].samples, stacklens_core::parse(&body).unwrap().samples);
    drop(parsed);
    assert_eq!(budget.permits.available_permits() as u64, (100 << 20) / UNIT);
    // Inflated, a second gzip layer is named as before.
    let twice = Bytes::from(gzip(&body));
    assert!(matches!(
        budget.parse(vec![twice]).await,
        Err(ParseFailure::Core(e)) if e.to_string().contains("gzip inside gzip")
    ));
}

#[tokio::test]
async fn a_bomb_is_refused_before_it_is_inflated() {
    let budget = Budget::new(1 << 30, 1 << 20, 4, Duration::from_secs(1));
    let bomb = Bytes::from(gzip(&vec![0u8; 8 << 20]));
    assert!(matches!(budget.parse(vec![bomb]).await, Err(ParseFailure::Budget(BudgetError::InflatesTooLarge { .. }))));
}
