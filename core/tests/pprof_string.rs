//! Legacy profiles against pprof's own expected parses (`*.string`, from google/pprof's
//! testdata): same period, same samples in the same order with the same values, the
//! same stack addresses, and each address in the same binary.

mod common;

use std::collections::HashMap;

struct Expected {
    period: i64,
    samples: Vec<(Vec<i64>, Vec<u64>)>,
    /// location id -> (address, mapping file)
    locations: HashMap<u64, (u64, String)>,
}

fn parse_string(text: &str) -> Expected {
    let mut e = Expected { period: 0, samples: vec![], locations: HashMap::new() };
    let mut mapping_of_location: HashMap<u64, u64> = HashMap::new();
    let mut mappings: HashMap<u64, String> = HashMap::new();
    let mut section = "";
    for line in text.lines() {
        let t = line.trim();
        match t {
            "Samples:" | "Locations" | "Mappings" => {
                section = t;
                continue;
            }
            _ => {}
        }
        if let Some(p) = t.strip_prefix("Period: ") {
            e.period = p.parse().unwrap();
            continue;
        }
        match section {
            "Samples:" => {
                let Some((values, ids)) = t.split_once(':') else { continue };
                let Ok(values) = values.split_whitespace().map(str::parse).collect::<Result<Vec<i64>, _>>() else {
                    continue; // the header line, or a label line
                };
                let ids = ids.split_whitespace().map(|i| i.parse().unwrap()).collect();
                e.samples.push((values, ids));
            }
            "Locations" => {
                let mut f = t.split_whitespace();
                let (Some(id), Some(addr)) = (f.next(), f.next()) else { continue };
                let Ok(id) = id.trim_end_matches(':').parse::<u64>() else { continue };
                let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap();
                let m = f.find_map(|x| x.strip_prefix("M=")).map_or(0, |m| m.parse().unwrap());
                e.locations.insert(id, (addr, String::new()));
                mapping_of_location.insert(id, m);
            }
            "Mappings" => {
                let mut f = t.split_whitespace();
                let (Some(id), _, file) = (f.next(), f.next(), f.next()) else { continue };
                mappings.insert(id.trim_end_matches(':').parse().unwrap(), file.unwrap_or("").to_owned());
            }
            _ => {}
        }
    }
    for (id, (_, file)) in e.locations.iter_mut() {
        *file = mappings.get(&mapping_of_location[id]).cloned().unwrap_or_default();
    }
    e
}

#[test]
fn legacy_parses_equal_pprofs_expected_parses() {
    let Some(root) = common::fixtures() else { return };
    let dir = root.join("thirdparty/pprof");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(input) = path.to_str().and_then(|p| p.strip_suffix(".string")) else { continue };
        let expected = parse_string(&std::fs::read_to_string(&path).unwrap());
        let p = stacklens_core::parse(&common::read(input.as_ref())).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(p.period, expected.period, "{input}: period");
        assert_eq!(p.samples.len(), expected.samples.len(), "{input}: sample count");
        for (i, (s, (values, ids))) in p.samples.iter().zip(&expected.samples).enumerate() {
            assert_eq!(&s.values, values, "{input}: sample {i} values");
            let ours: Vec<(u64, String)> = s
                .locations
                .iter()
                .map(|l| {
                    let loc = p.location(*l);
                    let file = loc.mapping.map(|m| p.str(p.mapping(m).filename).to_owned()).unwrap_or_default();
                    (loc.address, file)
                })
                .collect();
            let theirs: Vec<(u64, String)> = ids.iter().map(|id| expected.locations[id].clone()).collect();
            assert_eq!(ours, theirs, "{input}: sample {i} stack");
        }
        checked += 1;
    }
    assert_eq!(checked, 4, "cppbench.contention, cppbench.cpu, cppbench.heap and gobench.cpu have .string files");
}
