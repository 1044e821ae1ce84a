//! The gate's statistics and rules: Mann–Whitney p-values against values worked out by
//! hand, the minimum effect, rules, and the checks on runs and thresholds.

use stacklens_core::analysis::gate::mann_whitney::{normal_upper_tail, Tables};
use stacklens_core::analysis::gate::{
    Alternative, Family, Gate, GateConfig, GateReport, GateRow, Metric, Rule, Run, Status, Verdict,
};
use stacklens_core::analysis::{Prepared, Query};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
}

fn test(base: &[f64], compare: &[f64]) -> (f64, f64, f64) {
    let t = Tables::default().test(base, compare);
    (t.u, t.p_greater, t.p_less)
}

#[test]
fn exact_p_values_of_separated_samples_are_one_over_the_arrangements() {
    // Every compare value above every base value: 1 of C(n1 + n2, n2) equally likely
    // arrangements, so p = 1/20 for 3 and 3 runs (two-sided 1/10) and 1/252 for 5 and 5.
    let t = Tables::default().test(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]);
    assert_eq!(t.u, 9.0);
    assert!(close(t.p_greater, 1.0 / 20.0), "{t:?}");
    assert!(close(t.p_two_sided(), 0.1), "{t:?}");
    assert_eq!(t.p_less, 1.0);
    let (u, p, _) = test(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
    assert_eq!(u, 25.0);
    assert!(close(p, 1.0 / 252.0), "{p}");
}

#[test]
fn exact_p_values_with_one_inversion_and_with_ties() {
    // 4 and 4 runs, one pair inverted (5 > 4): U = 15 of 16. Of the 70 arrangements one
    // gives U = 16 and one U = 15 (swap the middle pair), so P(U ≥ 15) = 2/70.
    let (u, p, _) = test(&[1.0, 2.0, 3.0, 5.0], &[4.0, 6.0, 7.0, 8.0]);
    assert_eq!(u, 15.0);
    assert!(close(p, 2.0 / 70.0), "{p}");

    // Ties: base 1 2 2, compare 2 3 4. Midranks 1 | 3 3 3 | 5 6, so compare's rank sum
    // is 3 + 5 + 6 = 14 (U = 14 − 6 = 8). Of the 20 ways to pick three ranks from
    // {1, 3, 3, 3, 5, 6}, a sum of 14 needs 5, 6 and one of the three 3s: p = 3/20.
    let (u, p_greater, p_less) = test(&[1.0, 2.0, 2.0], &[2.0, 3.0, 4.0]);
    assert_eq!(u, 8.0);
    assert!(close(p_greater, 3.0 / 20.0), "{p_greater}");
    assert_eq!(p_less, 1.0);

    // A function absent from every base run (share 0, three ties) and in every compare run.
    let (_, p, _) = test(&[0.0, 0.0, 0.0], &[0.5, 1.0, 1.5]);
    assert!(close(p, 1.0 / 20.0), "{p}");
    // The same values on both sides: no evidence at all.
    assert_eq!(test(&[2.0; 3], &[2.0; 3]), (4.5, 1.0, 1.0));
}

#[test]
fn normal_approximation_above_ten_runs_with_tie_correction() {
    // 11 and 11 runs: base 1..=11, compare 6..=16, six values tied across the sides.
    // U = 5.5 + 6.5 + 7.5 + 8.5 + 9.5 + 10.5 + 5 × 11 = 103; σ² = 121/12 · (23 − 6·(2³ − 2)
    // / (22 · 21)) = 231.1309…; z = (103 − 60.5 − 0.5)/σ = 2.762614…; p = erfc(z/√2)/2
    // = 0.0028670251436675 (Python's math.erfc).
    let base: Vec<f64> = (1..=11).map(f64::from).collect();
    let compare: Vec<f64> = (6..=16).map(f64::from).collect();
    let (u, p, _) = test(&base, &compare);
    assert_eq!(u, 103.0);
    assert!((p - 0.0028670251436675393).abs() < 1e-12, "{p}");
    // 12 and 12, separated: σ² = 144 · 25/12 = 300, z = 71.5/√300 = 4.128054…
    let base: Vec<f64> = (0..12).map(f64::from).collect();
    let compare: Vec<f64> = (12..24).map(f64::from).collect();
    let (_, p, p_less) = test(&base, &compare);
    assert!((p - 1.8292276769485504e-05).abs() < 1e-15, "{p}");
    assert!((p_less - 0.9999857911661648).abs() < 1e-12, "{p_less}");
    assert!((normal_upper_tail(1.959963984540054) - 0.025).abs() < 1e-12);
}

/// A run from folded stacks (`frame;frame value` lines).
fn run(folded: &str) -> Run {
    Run::of(&Prepared::whole(&stacklens_core::parse(folded.as_bytes()).unwrap()).unwrap()).unwrap()
}

/// Runs of `total` samples in which `main.handle` calls `main.slow` (`slow` of them)
/// and `main.fast`.
fn runs_of(slow: &[i64], total: i64) -> Vec<Run> {
    slow.iter()
        .map(|s| run(&format!("main.main;main.handle;main.slow {s}\nmain.main;main.handle;main.fast {}\n", total - s)))
        .collect()
}

/// Runs of 1000 samples, `main.slow` taking `slow` of them.
fn runs(slow: &[i64]) -> Vec<Run> {
    runs_of(slow, 1000)
}

fn gate(config: GateConfig, base: &[i64], compare: &[i64]) -> GateReport {
    Gate::new(config).unwrap().compare(&runs(base), &runs(compare)).unwrap()
}

/// The defaults but alpha 0.05 (the default before it became 0.01): the tests of the
/// statistics with five runs a side, whose hand-worked p-values (4/252 = 0.016 over four
/// shares) survive the correction at 0.05, not at 0.01.
fn alpha_05() -> GateConfig {
    GateConfig { alpha: 0.05, ..GateConfig::default() }
}

/// main.slow's samples in five base runs (10 % to 12 % of 1000) and in five compare
/// runs (19 % to 21 %): every compare run above every base run, p = 1/C(10, 5) = 1/252.
/// Five, as three runs a side cannot survive the correction of even two shares (1/20 × 2
/// is above 0.05); four shares (main.slow's and main.fast's flat and cum) make 4/252, which
/// is within alpha 0.05 ([`alpha_05`]), not the default 0.01.
const SLOWER: ([i64; 5], [i64; 5]) = ([100, 105, 110, 115, 120], [190, 195, 200, 205, 210]);

fn slower(config: GateConfig) -> GateReport {
    gate(config, &SLOWER.0, &SLOWER.1)
}

fn row<'a>(report: &'a GateReport, name: &str) -> &'a GateRow {
    report.functions.iter().chain(&report.packages).find(|r| r.name == name).unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn a_grown_flat_share_regresses_and_comes_before_its_callers() {
    let report = slower(alpha_05());
    assert_eq!((report.status, report.passed), (Status::Failed, false));
    let slow = row(&report, "main.slow");
    assert_eq!((slow.verdict, slow.metric), (Verdict::Regression, Some(Metric::Flat)));
    assert_eq!((slow.flat.base_median, slow.flat.compare_median, slow.flat.difference), (11.0, 20.0, 9.0));
    assert!(close(slow.flat.relative.unwrap(), 9.0 / 11.0 * 100.0));
    assert!(close(slow.flat.p_value, 1.0 / 252.0));
    // Holm over main.slow's and main.fast's flat and cum: the smallest p times 4.
    assert_eq!(report.family, Family { tests: 4, names: 2, untested: 3, sampling_tests: 7 });
    assert!(close(slow.flat.adjusted_p_value.unwrap(), 4.0 / 252.0), "{slow:?}");
    assert_eq!(slow.flat.base, [10.0, 10.5, 11.0, 11.5, 12.0]);
    let fast = row(&report, "main.fast");
    assert_eq!((fast.verdict, fast.metric), (Verdict::Improvement, Some(Metric::Flat)));
    // main.handle's cum is 100% in every run: unchanged and untested (no split of its
    // values could move it); the package's flat is too.
    assert_eq!(row(&report, "main.handle").verdict, Verdict::Unchanged);
    assert_eq!(row(&report, "main.handle").cum.as_ref().unwrap().adjusted_p_value, None);
    assert_eq!(row(&report, "main").verdict, Verdict::Unchanged);
    assert_eq!(report.functions[0].name, "main.slow");
    assert_eq!((report.regression_count, report.improvement_count), (1, 1));
    assert_eq!(report.total_per_second, None, "folded stacks have no duration");
}

#[test]
fn a_cum_share_regresses_when_no_flat_one_did() {
    // Time moves from main.fast into main.parse's two callees, half each: neither
    // callee's flat grows by the 6 points asked, main.parse's cum does. (Runs of 1,000
    // samples: with 100, 2,200 against 2,700 of 5,000 would not survive the sampling
    // test's correction over 9 shares.) At alpha 0.05: five runs a side do not survive
    // this family's correction at the default 0.01.
    let runs = |parse: &[i64]| -> Vec<Run> {
        parse
            .iter()
            .map(|p| {
                run(&format!(
                    "main.main;main.parse;main.a {}\nmain.main;main.parse;main.b {}\nmain.main;main.fast {}\n",
                    p * 5,
                    p * 5,
                    1000 - p * 10
                ))
            })
            .collect()
    };
    let config = GateConfig { min_effect: 6.0, ..alpha_05() };
    let report =
        Gate::new(config).unwrap().compare(&runs(&[40, 42, 44, 46, 48]), &runs(&[50, 52, 54, 56, 58])).unwrap();
    let parse = row(&report, "main.parse");
    assert_eq!((parse.verdict, parse.metric), (Verdict::Regression, Some(Metric::Cum)));
    assert_eq!(parse.deciding().difference, 10.0);
    assert_eq!(row(&report, "main.a").verdict, Verdict::Unchanged, "+5 points, below 6");
}

#[test]
fn the_minimum_effect_keeps_small_consistent_changes_from_failing() {
    // Consistent (p = 0.05) but +0.5 points (10.1% → 10.6%): below the default 1 point.
    let report = gate(GateConfig::default(), &[100, 101, 102], &[105, 106, 107]);
    assert!(report.passed, "{:?}", row(&report, "main.slow"));
    assert!(close(row(&report, "main.slow").flat.p_value, 0.05));
    // +2 points but +2.9% of a 70% share: below the default 10%.
    let report = gate(GateConfig::default(), &[690, 700, 710], &[715, 720, 730]);
    assert!(report.passed);
    assert_eq!(row(&report, "main.slow").flat.difference, 2.0);
    // +9 points with the runs overlapping (U = 6 of 9): P(U ≥ 6) = 7/20. (Three runs a
    // side cannot show a regression of the two shares that could reach the minimum
    // effect: inconclusive.)
    let report = gate(GateConfig::default(), &[100, 110, 300], &[120, 200, 250]);
    assert_eq!((report.regression_count, report.status), (0, Status::Inconclusive));
    assert!(close(row(&report, "main.slow").flat.p_value, 0.35));
    // The same change with lower thresholds is still within sampling noise: 3,500 of
    // 5,000 samples against 3,608 of 5,000. With ten times the samples it is not (at
    // alpha 0.05: all four shares are in the family, 4/252 = 0.016).
    let config = GateConfig { min_effect: 0.0, min_relative: 0.0, ..alpha_05() };
    let (base, compare) = ([690, 695, 700, 705, 710], [715, 718, 720, 725, 730]);
    let report = gate(config.clone(), &base, &compare);
    assert_eq!(report.status, Status::Passed);
    let slow = &row(&report, "main.slow").flat;
    assert!(close(slow.p_value, 1.0 / 252.0) && slow.sampling_p_value.unwrap() > 0.05, "{slow:?}");
    assert_eq!(slow.samples, Some([3500, 3608]));
    let ten_times = |v: &[i64]| runs_of(&v.iter().map(|s| s * 10).collect::<Vec<_>>(), 10_000);
    let report = Gate::new(config).unwrap().compare(&ten_times(&base), &ten_times(&compare)).unwrap();
    assert_eq!(row(&report, "main.slow").verdict, Verdict::Regression);
}

#[test]
fn a_rarely_sampled_function_a_few_samples_up_is_sampling_noise() {
    // As a 2-second CPU capture of ~186 samples: 2 samples a run, then 4. Every compare
    // run above every base run (p = 1/252, adjusted over main.slow's 2 shares 2/252:
    // main.fast's −1 % cannot reach 10 %) and +1.08 points, +100%: the runs alone would
    // fail the gate. Pooled, 10 samples against 20
    // of 930 each: P(X ≥ 20 | 30 fair coins) = 53,009,102/2^30 = 0.049, and 7 times
    // that over the 7 shares with samples enough: not a regression.
    let gate = Gate::new(GateConfig::default()).unwrap();
    let report = gate.compare(&runs_of(&[2; 5], 186), &runs_of(&[4; 5], 186)).unwrap();
    let slow = row(&report, "main.slow");
    assert_eq!(slow.verdict, Verdict::Unchanged, "{slow:?}");
    assert!(close(slow.flat.adjusted_p_value.unwrap(), 2.0 / 252.0) && slow.flat.difference >= 1.0, "{slow:?}");
    let sampling = 53_009_102.0 / 1_073_741_824.0;
    assert!(close(slow.flat.sampling_p_value.unwrap(), sampling), "{slow:?}");
    assert!(close(slow.flat.sampling_adjusted_p_value.unwrap(), 7.0 * sampling), "{slow:?}");
    assert_eq!(report.status, Status::Passed);
    // The same shares from runs a hundred times longer are a regression.
    let report = Gate::new(GateConfig::default())
        .unwrap()
        .compare(&runs_of(&[200; 5], 18_600), &runs_of(&[400; 5], 18_600))
        .unwrap();
    assert_eq!(row(&report, "main.slow").verdict, Verdict::Regression);
    // Profiles without a count of samples are tested across runs only.
    let heap = |slow: i64| {
        let mut p =
            stacklens_core::parse(format!("main.a;main.slow {slow}\nmain.a;main.fast {}\n", 186 - slow).as_bytes())
                .unwrap();
        let bytes = p.strings.intern("bytes");
        p.sample_types[0].unit = bytes;
        Run::of(&Prepared::whole(&p).unwrap()).unwrap()
    };
    let report = Gate::new(GateConfig::default()).unwrap().compare(&[2; 5].map(heap), &[4; 5].map(heap)).unwrap();
    let slow = row(&report, "main.slow");
    assert_eq!((slow.verdict, slow.flat.sampling_p_value), (Verdict::Regression, None), "{slow:?}");
}

fn rule(pattern: &str) -> Rule {
    Rule { pattern: pattern.into(), ignore: false, alpha: None, min_effect: None, min_relative: None }
}

#[test]
fn rules_set_thresholds_or_ignore_by_regex_the_first_match_deciding() {
    let config = GateConfig {
        rules: vec![
            Rule { min_effect: Some(20.0), ..rule(r"\.slow$") },
            Rule { ignore: true, ..rule("slow") },
            Rule { ignore: true, ..rule("^main$") },
        ],
        ..GateConfig::default()
    };
    let report = slower(config);
    assert!(report.passed);
    let slow = row(&report, "main.slow");
    assert_eq!(slow.thresholds.min_effect, 20.0);
    assert_eq!(slow.rule.as_deref(), Some(r"\.slow$"));
    // The package "main" is ignored; no function is.
    assert_eq!(report.ignored, 1);
    assert!(report.packages.is_empty());

    let config = GateConfig { rules: vec![Rule { ignore: true, ..rule("slow") }], ..GateConfig::default() };
    let report = slower(config);
    assert!(report.passed);
    assert!(report.functions.iter().all(|r| r.name != "main.slow"));
}

#[test]
fn packages_sum_their_functions_flat_shares() {
    let runs = |json: &[i64]| -> Vec<Run> {
        json.iter()
            .map(|j| {
                run(&format!(
                    "main.main;encoding/json.Marshal;encoding/json.encode {}\n\
                     main.main;encoding/json.Marshal {}\nmain.main;main.work {}\n",
                    j / 2,
                    j / 2,
                    100 - j
                ))
            })
            .collect()
    };
    let report =
        Gate::new(alpha_05()).unwrap().compare(&runs(&[20, 22, 24, 26, 28]), &runs(&[40, 42, 44, 46, 48])).unwrap();
    let json = row(&report, "encoding/json");
    assert_eq!((json.verdict, json.flat.base_median, json.flat.compare_median), (Verdict::Regression, 24.0, 44.0));
    assert_eq!(json.cum, None);
    assert_eq!(report.packages.first().map(|r| r.name.as_str()), Some("encoding/json"));
}

#[test]
fn two_sided_tests_double_the_p_value() {
    let config = GateConfig { alternative: Alternative::TwoSided, alpha: 0.1, ..GateConfig::default() };
    let report = slower(config);
    assert!(close(row(&report, "main.slow").flat.p_value, 2.0 / 252.0));
    assert!(close(row(&report, "main.slow").flat.adjusted_p_value.unwrap(), 8.0 / 252.0));
    assert_eq!(report.status, Status::Failed);
}

#[test]
fn only_fewer_than_two_runs_are_refused_unreachable_alphas_are_inconclusive() {
    use stacklens_core::report::gate as render;
    let defaults = Gate::new(GateConfig::default()).unwrap();
    let message = |r: Result<(), stacklens_core::Error>| r.unwrap_err().to_string();
    assert_eq!(
        message(defaults.check_runs(1, 5)),
        "the base side has 1 run(s): the gate needs at least 2 a side (10 advised)"
    );
    assert!(message(defaults.check_runs(5, 0)).contains("the compare side has 0 run(s)"));
    assert!(defaults.compare(&runs(&[1]), &runs(&[3, 4])).is_err());
    // 2 and 2 runs give at best 1/6, 3 and 3 1/20: above the default alpha 0.01 and a
    // rule's 0.001 even uncorrected, and still not refused.
    assert!(defaults.check_runs(2, 2).is_ok() && defaults.check_runs(3, 3).is_ok());
    let strict = GateConfig { rules: vec![Rule { alpha: Some(0.001), ..rule("slow") }], ..GateConfig::default() };
    assert!(Gate::new(strict.clone()).unwrap().check_runs(3, 3).is_ok());

    // main.slow up 9 points in 2 and 2 runs at the defaults: 4 shares could reach the
    // minimum effect, none could show a regression. Inconclusive, and the runs needed:
    // 4/C(2n, n) ≤ 0.01 needs C(2n, n) ≥ 400, so 6 a side (1/924; 5 give 4/252 = 0.016).
    let report = gate(GateConfig::default(), &[100, 110], &[190, 200]);
    assert_eq!((report.status, report.passed, report.regression_count), (Status::Inconclusive, false, 0));
    assert_eq!((report.family.tests, report.runs_needed), (4, Some(6)));
    assert!(close(report.smallest_p_value, 1.0 / 6.0));
    assert_eq!(
        render::inconclusive(&report),
        "2 base and 2 compare runs give at best p = 0.1667, above alpha 0.01 even before the correction over \
         4 shares: no regression could show; 6 runs a side needed"
    );
    // A rule's alpha on a name in the family, out of reach of 5 and 5 runs (1/252 =
    // 0.004 > 0.001): 4/C(2n, n) ≤ 0.001 needs C(2n, n) ≥ 4000, so 8 a side (1/12870;
    // 7 give 1/3432).
    let report = gate(strict, &SLOWER.0, &SLOWER.1);
    assert_eq!((report.status, report.family.tests, report.runs_needed), (Status::Inconclusive, 4, Some(8)));
    assert_eq!(
        render::inconclusive(&report),
        "5 base and 5 compare runs give at best p = 0.0040, above alpha 0.001 even before the correction over \
         4 shares: no regression could show; 8 runs a side needed"
    );
}

/// main.slow's share in ten runs a side: 10.0 % to 11.8 % of the base runs' samples, 19.0 %
/// to 20.8 % of the compare runs': +9 points, every compare run above every base run.
const TEN_SLOWER: ([i64; 10], [i64; 10]) =
    ([100, 110, 102, 112, 104, 114, 106, 116, 108, 118], [190, 200, 192, 202, 194, 204, 196, 206, 198, 208]);

#[test]
fn at_the_defaults_ten_runs_a_side_fail_a_slowdown_three_are_inconclusive() {
    let report = gate(GateConfig::default(), &TEN_SLOWER.0, &TEN_SLOWER.1);
    assert_eq!(report.defaults.alpha, 0.01);
    assert_eq!((report.status, report.regression_count, report.runs_needed), (Status::Failed, 1, None));
    let slow = row(&report, "main.slow");
    assert_eq!((slow.verdict, slow.metric), (Verdict::Regression, Some(Metric::Flat)));
    // 1/C(20, 10) = 1/184756, times the 4 shares of main.slow and main.fast.
    assert_eq!(report.family.tests, 4);
    assert!(close(slow.flat.adjusted_p_value.unwrap(), 4.0 / 184_756.0), "{slow:?}");
    // The first three of each side: at best 1/20 = 0.05, above 0.01. Not refused, but
    // inconclusive: 6 runs a side needed (4/924 ≤ 0.01).
    let report = gate(GateConfig::default(), &TEN_SLOWER.0[..3], &TEN_SLOWER.1[..3]);
    assert_eq!((report.status, report.regression_count, report.runs_needed), (Status::Inconclusive, 0, Some(6)));
    assert_eq!(row(&report, "main.slow").verdict, Verdict::Unchanged);
    // Two base runs against ten: at best 1/C(12, 2) = 1/66, above 0.01; the base side is
    // short, and 6 a side would do, as above (not 11).
    let report = gate(GateConfig::default(), &TEN_SLOWER.0[..2], &TEN_SLOWER.1);
    assert_eq!(report.family.tests, 4);
    assert_eq!((report.status, report.runs_needed), (Status::Inconclusive, Some(6)));
}

#[test]
fn bad_configurations_are_refused_with_the_rule_named() {
    let error = |config: GateConfig| Gate::new(config).err().expect("refused").to_string();
    assert_eq!(error(GateConfig { alpha: 0.0, ..GateConfig::default() }), "alpha must be in (0, 1], not 0");
    assert!(error(GateConfig { min_effect: -1.0, ..GateConfig::default() }).starts_with("min_effect"));
    let bad_regex = error(GateConfig { rules: vec![rule("("), rule("x")], ..GateConfig::default() });
    assert!(bad_regex.starts_with("rule 1 (match = \"(\"): invalid regex"), "{bad_regex}");
    let both = error(GateConfig {
        rules: vec![Rule { ignore: true, alpha: Some(0.1), ..rule("x") }],
        ..GateConfig::default()
    });
    assert!(both.ends_with("ignore = true takes no thresholds"), "{both}");
    let relative =
        error(GateConfig { rules: vec![Rule { min_relative: Some(f64::NAN), ..rule("x") }], ..GateConfig::default() });
    assert!(relative.starts_with("rule 1 (match = \"x\"): min_relative"), "{relative}");
}

#[test]
fn configurations_refuse_unknown_keys() {
    let parsed: GateConfig = serde_json::from_str(
        r#"{"alpha": 0.1, "alternative": "two-sided", "rule": [{"match": "^runtime\\.", "ignore": true}]}"#,
    )
    .unwrap();
    assert_eq!((parsed.alpha, parsed.min_effect, parsed.alternative), (0.1, 1.0, Alternative::TwoSided));
    assert_eq!(parsed.rules[0].pattern, "^runtime\\.");
    let unknown = serde_json::from_str::<GateConfig>(r#"{"alpah": 0.1}"#).unwrap_err().to_string();
    assert!(unknown.contains("unknown field `alpah`"), "{unknown}");
    let in_rule = serde_json::from_str::<GateConfig>(r#"{"rule": [{"match": "x", "min_efect": 2}]}"#);
    assert!(in_rule.unwrap_err().to_string().contains("unknown field `min_efect`"));
}

#[test]
fn runs_of_unknown_sample_types_or_without_samples_are_refused() {
    let mut profile = stacklens_core::parse(b"main.main;main.alloc 10\n").unwrap();
    let alloc_space = Query { sample: "alloc_space".into(), ..Query::default() };
    assert_eq!(alloc_space.prepare(&profile).and_then(|p| Run::of(&p)).unwrap_err().code(), "UnknownSampleType");
    profile.samples.clear();
    assert_eq!(
        Prepared::whole(&profile).and_then(|p| Run::of(&p)).unwrap_err().to_string(),
        "the profile's total of samples is 0: nothing to compare"
    );
}

#[test]
fn every_format_names_the_regressions() {
    use stacklens_core::report::gate as render;
    let mut report = slower(alpha_05());
    report.diff_url = Some("http://stacklens:8080/#/diff/a/b".into());

    let text = render::text(&report);
    let family = "\nP-values Holm-corrected over 4 shares of 2 names that could reach the minimum effect (3 names \
                  cannot: untested), sampling p over 7 shares\n";
    assert!(text.contains(family), "{text}");
    let regressions = "\nRegressions (1):\n  function main.slow  flat 11.00% → 20.00% (+9.00 pp, +82%), p = 0.004 \
                       (adjusted 0.016), sampling p < 0.001 (adjusted < 0.001)\n";
    assert!(text.contains(regressions), "{text}");
    let improvements = "\nImprovements (1):\n  function main.fast  flat 89.00% → 80.00% (-9.00 pp, -10%), p = 0.004 \
                        (adjusted 0.016), sampling p < 0.001 (adjusted < 0.001)\n";
    assert!(text.contains(improvements), "{text}");
    let end = "4 functions and 1 package tested, 0 ignored by rules: FAILED, 1 regression\n\
               Diff view: http://stacklens:8080/#/diff/a/b\n";
    assert!(text.ends_with(end), "{text}");

    let markdown = render::markdown(&report);
    assert!(markdown.starts_with("### stacklens gate: 1 regression\n"), "{markdown}");
    let row = "| function `main.slow` | flat | 11.00% → 20.00% | +9.00 pp, +82% | 0.004 (adjusted 0.016) \
               | < 0.001 (adjusted < 0.001) |";
    assert!(markdown.contains(row), "{markdown}");
    assert!(markdown.ends_with("\n[Open the diff view](http://stacklens:8080/#/diff/a/b)\n"));

    assert_eq!(
        render::github(&report),
        "::error title=Profile regression%3A main.slow::function main.slow: flat 11.00%25 → 20.00%25 \
         (+9.00 pp, +82%25), p = 0.004 (adjusted 0.016), sampling p < 0.001 (adjusted < 0.001) \
         (one-sided Mann–Whitney U (exact), 5 base runs vs 5 compare runs)\n"
    );

    let junit = render::junit(&report);
    let head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
                <testsuites name=\"stacklens gate\" tests=\"5\" failures=\"1\" errors=\"0\">";
    assert!(junit.starts_with(head), "{junit}");
    let failure = "<testcase classname=\"stacklens.gate.function\" name=\"main.slow\">\n      \
                   <failure type=\"regression\" message=\"function main.slow regressed: flat 11.00% → 20.00% \
                   (+9.00 pp, +82%), p = 0.004 (adjusted 0.016), sampling p &lt; 0.001 (adjusted &lt; 0.001)\">";
    assert!(junit.contains(failure), "{junit}");
    assert!(junit
        .contains("base runs: 10.00, 10.50, 11.00, 11.50, 12.00\ncompare runs: 19.00, 19.50, 20.00, 20.50, 21.00\n"));
    assert!(junit.contains("\nsamples pooled: 550 base, 1000 compare\n"), "{junit}");
    assert!(junit.contains("<testcase classname=\"stacklens.gate.function\" name=\"main.fast\"/>"));
    assert!(!junit.contains("inconclusive"), "{junit}");

    let passing = gate(GateConfig::default(), &SLOWER.0, &SLOWER.0);
    assert_eq!(passing.status, Status::Passed);
    assert!(render::github(&passing).starts_with("::notice title=stacklens gate::No regression: "));
    assert!(render::markdown(&passing).starts_with("### stacklens gate: passed\n"));
    assert!(render::text(&passing).ends_with("ignored by rules: passed\n"));
}

#[test]
fn too_few_runs_for_the_correction_are_inconclusive_in_every_format() {
    use stacklens_core::report::gate as render;
    // Three runs a side at best give p = 1/20; over main.slow's and main.fast's flat and
    // cum, Holm makes that 4/20 = 0.2. Every compare run above every base run, +9 points:
    // the change the old, uncorrected gate failed; now the runs cannot tell. (At alpha
    // 0.05, which 1/20 reaches uncorrected: the default 0.01 is in the next tests.)
    let report = gate(alpha_05(), &[100, 110, 120], &[190, 200, 210]);
    assert_eq!((report.status, report.passed, report.regression_count), (Status::Inconclusive, false, 0));
    let slow = &row(&report, "main.slow").flat;
    assert!(close(slow.p_value, 0.05) && close(slow.adjusted_p_value.unwrap(), 0.2), "{slow:?}");
    assert_eq!(row(&report, "main.slow").verdict, Verdict::Unchanged);
    // 5 a side: 1/252 × 4 ≤ 0.05 (4 a side: 1/70 × 4 = 0.057 is not).
    assert_eq!(report.runs_needed, Some(5));
    assert!(close(report.smallest_p_value, 0.05));
    let why = "3 base and 3 compare runs give at best p = 0.0500, which the correction over 4 shares makes 0.200, \
               above alpha 0.05: no regression could show; 5 runs a side needed";
    assert_eq!(render::inconclusive(&report), why);

    let text = render::text(&report);
    assert!(text.ends_with(&format!("ignored by rules: INCONCLUSIVE: {why}\n")), "{text}");
    assert!(!text.contains("Regressions"), "{text}");
    let markdown = render::markdown(&report);
    assert!(markdown.starts_with("### stacklens gate: inconclusive (5 runs a side needed)\n"), "{markdown}");
    assert!(markdown.contains(&format!("\n**Inconclusive:** {why}.\n")), "{markdown}");
    assert_eq!(
        render::github(&report),
        format!(
            "::warning title=stacklens gate inconclusive::Inconclusive: {why} (one-sided Mann–Whitney U (exact), \
             3 base runs vs 3 compare runs)\n"
        )
    );
    let junit = render::junit(&report);
    assert!(junit.contains("tests=\"6\" failures=\"0\" errors=\"1\">"), "{junit}");
    let error = format!(
        "<testcase classname=\"stacklens.gate\" name=\"enough runs\">\n      \
         <error type=\"inconclusive\" message=\"{why}\"/>\n    </testcase>"
    );
    assert!(junit.contains(&error), "{junit}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        (&json["status"], &json["passed"], &json["runsNeeded"]),
        (&"inconclusive".into(), &false.into(), &5.into())
    );
    assert_eq!(json["correction"], "holm");
    assert_eq!(json["family"], serde_json::json!({"tests": 4, "names": 2, "untested": 3, "samplingTests": 7}));
    assert!(close(
        json["functions"].as_array().unwrap().iter().find(|f| f["name"] == "main.slow").unwrap()["flat"]
            ["adjustedPValue"]
            .as_f64()
            .unwrap(),
        0.2
    ));

    // A rule's stricter alpha is the one the runs must reach: 5 a side give 4/252 = 0.016,
    // above 0.01; 6 give 4/924.
    let strict = GateConfig { rules: vec![Rule { alpha: Some(0.01), ..rule("slow") }], ..alpha_05() };
    let report = gate(strict, &SLOWER.0, &SLOWER.1);
    assert_eq!((report.status, report.runs_needed), (Status::Inconclusive, Some(6)));
    assert_eq!(row(&report, "main.fast").verdict, Verdict::Improvement, "at 0.05");
}

#[test]
fn nothing_that_could_reach_the_minimum_effect_passes_at_any_run_count() {
    // 10.0 % to 10.2 % against 10.5 % to 10.7 %: no split of these values moves a median
    // by a point, so no share is tested and three runs are enough to pass, though their
    // best p, 1/20, is above the default alpha 0.01 even uncorrected.
    let report = gate(GateConfig::default(), &[100, 101, 102], &[105, 106, 107]);
    assert_eq!(report.family, Family { tests: 0, names: 0, untested: 5, sampling_tests: 7 });
    assert_eq!((report.status, report.runs_needed), (Status::Passed, None));
    assert_eq!(row(&report, "main.slow").flat.adjusted_p_value, None);
}
