//! GHC `-pj` JSON profiles: the fixture's totals equal its own header (`total_ticks`,
//! `total_alloc`) and each cost centre's self ticks and bytes equal the "individual"
//! figures of GHC's report (the sum of the centre's nodes in the `profile` tree, walked
//! here independently); malformed profiles get typed errors.

mod common;

use std::collections::BTreeMap;

use common::{flat_by_name as flat, json_fixture};
use serde_json::Value;
use stacklens_core::model::SourceFormat;
use stacklens_core::{parse, Error};

const FIXTURE: &str = "thirdparty/speedscope/ghc-simple.prof";

/// GHC's individual (ticks, alloc) per `Module.label`, from the tree.
fn individual(json: &Value) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
    let names: BTreeMap<u64, String> = json["cost_centres"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (c["id"].as_u64().unwrap(), format!("{}.{}", c["module"].as_str().unwrap(), c["label"].as_str().unwrap()))
        })
        .collect();
    let (mut ticks, mut alloc) = (BTreeMap::new(), BTreeMap::new());
    let mut pending = vec![&json["profile"]];
    while let Some(node) = pending.pop() {
        let name = &names[&node["id"].as_u64().unwrap()];
        *ticks.entry(name.clone()).or_default() += node["ticks"].as_i64().unwrap();
        *alloc.entry(name.clone()).or_default() += node["alloc"].as_i64().unwrap();
        pending.extend(node["children"].as_array().unwrap());
    }
    ticks.retain(|_, v: &mut i64| *v != 0);
    alloc.retain(|_, v: &mut i64| *v != 0);
    (ticks, alloc)
}

#[test]
fn fixture_matches_ghcs_own_figures() {
    let Some((bytes, json)) = json_fixture(FIXTURE) else { return };
    let p = parse(&bytes).unwrap();
    assert_eq!(p.source, SourceFormat::Ghc);
    let types: Vec<(&str, &str)> = (0..3).map(|i| (p.sample_type_name(i), p.sample_type_unit(i))).collect();
    assert_eq!(types, [("ticks", "count"), ("time", "microseconds"), ("alloc", "bytes")]);
    assert_eq!(p.default_sample_index(), 1);
    // The header: "total time = 0.80 secs (798 ticks @ 1000 us)", 1921672664 bytes.
    assert_eq!((json["total_ticks"].as_i64(), json["tick_interval"].as_i64()), (Some(798), Some(1000)));
    assert_eq!(json["total_alloc"].as_i64(), Some(1_921_672_664));
    assert_eq!(p.total(0), 798);
    assert_eq!(p.total(1), 798 * 1000);
    assert_eq!(p.total(2), 1_921_672_664);
    let (ticks, alloc) = individual(&json);
    assert_eq!(flat(&p, 0), ticks);
    assert_eq!(flat(&p, 2), alloc);
    // The hottest centres as GHC's report lists them (individual %time 50.9, 40.1).
    assert_eq!((ticks["Main.make"], ticks["Main.check"]), (406, 320));
    // Stacks run from the leaf up to MAIN.
    for s in &p.samples {
        let root = p.location(*s.locations.last().unwrap());
        assert_eq!(p.line_function_name(&root.lines[0]), "MAIN.MAIN");
    }
}

#[test]
fn malformed_profiles_get_typed_errors() {
    let cc = r#""cost_centres":[{"id":1,"label":"MAIN","module":"MAIN","src_loc":"<built-in>"}]"#;
    let cases = [
        (format!(r#"{{{cc},"profile":{{"id":2,"ticks":1,"alloc":0,"children":[]}}}}"#), "cost centre id 2"),
        (format!(r#"{{{cc},"profile":{{"id":1,"ticks":"1","alloc":0,"children":[]}}}}"#), "ticks"),
        (format!(r#"{{{cc},"profile":{{"id":1,"ticks":1,"alloc":-5,"children":[]}}}}"#), "alloc"),
        (format!(r#"{{{cc},"profile":{{"id":1,"ticks":1,"alloc":0,"children":7}}}}"#), "not a list"),
        // Truncated: a child without its fields.
        (format!(r#"{{{cc},"profile":{{"id":1,"ticks":1,"alloc":0,"children":[{{}}]}}}}"#), "has id null"),
        (format!(r#"{{{cc},"tick_interval":"1ms","profile":{{"id":1}}}}"#), "tick_interval"),
        (r#"{"cost_centres":[{"label":"x"}],"profile":{"id":1}}"#.into(), "no numeric id"),
    ];
    for (json, expected) in cases {
        let message = match parse(json.as_bytes()) {
            Err(e @ (Error::Invalid(_) | Error::DanglingReference { .. })) => e.to_string(),
            other => panic!("{json}: expected a typed error, got {other:?}"),
        };
        assert!(message.contains(expected), "{json}: {message}");
    }
}
