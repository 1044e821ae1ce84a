//! `top` (pprof's -top), the stored summary (`top_functions`, `sample_count`), the
//! profile kind, and pprof-style value formatting, over any parsed profile. The first
//! 64 input bytes choose the options (sample type, granularity, filters, -cum,
//! -nodecount, -nodefraction); the rest is the profile.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use stacklens_core::analysis::summary::{sample_count, top_functions};
use stacklens_core::analysis::top::top;
use stacklens_core::units::{format_value, format_value_in, percentage, percentage_value, report_unit};
use stacklens_core::ProfileKind;
use stacklens_core_fuzz::{split, Options};

fuzz_target!(|data: &[u8]| {
    let (head, rest) = split(data);
    let o = Options::read(&mut Unstructured::new(&head));
    let Ok(p) = stacklens_core::parse(rest) else { return };
    let _ = ProfileKind::of(&p);
    let _ = sample_count(&p);
    let Ok(prepared) = o.query.prepare(&p) else { return };
    let options = &o.top;
    if let Ok(r) = top(&prepared, options) {
        let filters = &o.query.filters;
        if filters.focus.is_none() && filters.ignore.is_none() {
            let index = prepared.sample_index;
            assert_eq!(r.total, p.total(index), "without focus/ignore top's total is the profile's");
        }
        assert!(r.functions.len() + r.dropped_nodes <= r.node_total);
        let unit = report_unit(r.functions.iter().map(|f| (f.flat, f.cum)), r.total, &r.unit);
        for f in &r.functions {
            let _ = (format_value(f.flat, &r.unit), format_value_in(f.cum, &r.unit, &unit));
            let _ = (percentage(f.flat, r.total), percentage_value(f.cum, r.total));
        }
    }
    let _ = top_functions(&prepared, options.node_count.unwrap_or(10));
});
