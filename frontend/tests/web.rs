//! The page's WASM bindings, run in headless Chromium by wasm-bindgen-test-runner.

use stacklens_core::analysis::transforms::Transform;
use stacklens_core::analysis::Filters;
use stacklens_frontend::worker::protocol::Shape;
use stacklens_frontend::worker::session::{
    diff_profiles, diff_tree, flame_window, tiny_cpu_profile, Loaded, TreeCache,
};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
fn parses_and_ranks_in_the_browser() {
    let none = Shape::default();
    let loaded = Loaded::parse("small.pb", &tiny_cpu_profile()).expect("parses");
    let (types, default) = loaded.sample_types();
    assert_eq!(types, ["samples", "cpu"]);
    assert_eq!(default, 1);
    let top = loaded.top(&none, default, &Filters::default()).expect("top");
    assert_eq!(top.total, 40);
    let rows: Vec<(&str, i64, i64)> = top.functions.iter().map(|f| (f.name.as_str(), f.flat, f.cum)).collect();
    assert_eq!(rows, [("hot", 30, 30), ("idle", 10, 10), ("main", 0, 40), ("work", 0, 30)]);
}

#[wasm_bindgen_test]
fn goroutine_dumps_parse_in_the_browser() {
    let dump = "goroutine 1 [chan send, 2 minutes]:\nmain.f()\n\t/src/a.go:3 +0x1\n\ngoroutine 2 [chan send]:\nmain.f()\n\t/src/a.go:3 +0x1\n";
    let none = Shape::default();
    let loaded = Loaded::parse("dump.txt", dump.as_bytes()).expect("parses");
    let top = loaded.top(&none, 0, &Filters::default()).expect("top");
    assert_eq!(top.total, 2);
    assert_eq!(top.functions[0].name, "main.f");
}

#[wasm_bindgen_test]
fn a_bad_file_names_itself_and_the_problem() {
    let err = Loaded::parse("broken.pb.gz", &[0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 1]).err().expect("fails");
    assert!(err.starts_with("broken.pb.gz: "), "{err}");
    assert!(err.contains("gzip"), "{err}");
}

#[wasm_bindgen_test]
fn flame_tree_search_and_diff_in_the_browser() {
    let none = Shape::default();
    let loaded = Loaded::parse("small.pb", &tiny_cpu_profile()).expect("parses");
    let tree = loaded.tree(&none, 1, &Filters::default()).expect("tree");
    assert_eq!(tree.0.total(), 40);
    let (_, covered) = tree.0.search(|n| n == "work" || n == "hot");
    assert_eq!(covered, 30, "hot is inside work: counted once");
    let focused = loaded.tree(&none, 1, &Filters { focus: Some("^idle$".into()), ..Filters::default() }).expect("tree");
    assert_eq!(focused.0.total(), 10);
    let bad = loaded.top(&none, 1, &Filters { ignore: Some("(".into()), ..Filters::default() }).expect_err("bad regex");
    assert!(bad.contains("ignore"), "{bad}");

    let again = Loaded::parse("again.pb", &tiny_cpu_profile()).expect("parses");
    let d = diff_profiles(&loaded, &again, &none, 1, &Filters::default(), false).expect("diff");
    assert_eq!((d.overall_delta_pct, d.regressions.len(), d.improvements.len()), (0.0, 0, 0));
    let t = diff_tree(&loaded, &again, &none, 1, &Filters::default()).expect("diff tree");
    assert_eq!(t.0.base_values(0).total, 40);
}

#[wasm_bindgen_test]
fn windows_are_cut_from_cached_whole_trees() {
    let none = Shape::default();
    let loaded = Loaded::parse("small.pb", &tiny_cpu_profile()).expect("parses");
    let mut cache = TreeCache::new();
    let built = std::cell::Cell::new(0);
    let build = || {
        built.set(built.get() + 1);
        loaded.tree(&none, 1, &Filters::default())
    };
    let whole = cache.get_or_build("a", build).expect("tree");
    let again = cache.get_or_build("a", build).expect("tree");
    assert!(std::sync::Arc::ptr_eq(&whole, &again), "the second window reuses the tree");
    assert_eq!(built.get(), 1);

    let path = ["main".to_owned(), "work".to_owned()];
    let (window, zoom, matched) = flame_window(&whole, &path, "HOT");
    assert_eq!(window.name(zoom), "work");
    assert_eq!(window.nodes[zoom as usize].total, 30);
    assert_eq!(matched, Some(("HOT".to_owned(), 30)), "the search matches case-insensitively in the whole tree");
    let names: Vec<&str> = (0..window.nodes.len() as u32).map(|n| window.name(n)).collect();
    assert_eq!(names, ["root", "main", "work", "hot"], "ancestors, then the zoomed subtree; idle is outside");
    let (stale, zoom, matched) = flame_window(&whole, &["main".to_owned(), "gone".to_owned()], "");
    assert_eq!((stale.name(zoom), matched), ("main", None), "a stale path stops at its last frame");

    for key in ["b", "c", "d"] {
        cache.get_or_build(key, build).expect("tree");
    }
    assert_eq!(cache.len(), 3, "the oldest tree was dropped");
    cache.retain(|k| *k != "d");
    assert_eq!(cache.len(), 2);
    assert!(cache.get_or_build("e", || Err("no".into())).is_err());
}

#[wasm_bindgen_test]
fn shapes_transform_the_profile_every_view_reads() {
    let loaded = Loaded::parse("small.pb", &tiny_cpu_profile()).expect("parses");
    let dropped = Shape { transforms: vec![Transform::DropFunction { name: "idle".into() }], range: None };
    assert_eq!(loaded.top(&dropped, 1, &Filters::default()).expect("top").total, 30);
    let merged =
        Shape { transforms: vec![Transform::MergeFunction { name: "work".into() }, Transform::Invert], range: None };
    let tree = loaded.tree(&merged, 1, &Filters::default()).expect("tree");
    let roots: Vec<&str> = tree.0.children(0).map(|n| tree.0.name(n)).collect();
    assert_eq!(roots, ["hot", "idle"], "inverted: the leaves are the roots, and work is gone");
    assert!(
        std::rc::Rc::ptr_eq(&loaded.shaped(&merged).expect("shaped"), &loaded.shaped(&merged).expect("shaped")),
        "one shape is applied once"
    );
    assert!(std::rc::Rc::ptr_eq(&loaded.shaped(&Shape::default()).expect("plain"), &loaded.profile));
    let ranged = Shape { transforms: vec![], range: Some((0, 10)) };
    let err = loaded.top(&ranged, 1, &Filters::default()).expect_err("no sample times");
    assert!(err.contains("does not say when samples were taken"), "{err}");
}
