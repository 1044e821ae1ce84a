//! V8 tick logs (`node --prof`): every tick is one sample, and each function's self
//! count is the number of ticks whose pc (or external callback) falls in its code, with
//! the log's code ranges replayed here by a plain linear scan; malformed logs get typed
//! errors with line numbers.

mod common;

use std::collections::BTreeMap;

use common::{assert_text_errors, fixtures, flat_by_name, read};
use stacklens_core::import::{detect, Format};
use stacklens_core::model::SourceFormat;
use stacklens_core::parse;

const FIXTURE: &str = "thirdparty/speedscope/node8.5-isolate-v8.log";

/// (start, end, name) of a code object or library.
type Range = (u64, u64, String);

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

/// The function a code object is reported as: JS code by its name before the file
/// (`(anonymous)` when empty), other code as `Type: name`.
fn code_name(kind: &str, name: &str) -> String {
    if ["LazyCompile", "Function", "Script"].contains(&kind) {
        let function = name.rsplit_once(' ').map_or("", |(f, _)| f);
        if function.is_empty() { "(anonymous)" } else { function }.to_owned()
    } else {
        format!("{kind}: {name}")
    }
}

#[test]
fn fixture_ticks_match_their_code() {
    let Some(dir) = fixtures() else { return };
    let bytes = read(&dir.join(FIXTURE));
    assert_eq!(detect(&bytes), Format::Of(SourceFormat::V8Log));
    let text = String::from_utf8(bytes.clone()).unwrap();
    // The fixture's names have no commas, so a plain split works.
    let mut code: Vec<Range> = vec![];
    let mut libraries: Vec<Range> = vec![];
    let mut ticks = 0;
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(',').collect();
        match f[0] {
            "code-creation" => {
                let (start, size) = (hex(f[4]), f[5].parse::<u64>().unwrap());
                code.retain(|c| !(start..start + size).contains(&c.0) && c.0 != start);
                code.push((start, start + size, code_name(f[1], f[6].trim_matches('"'))));
            }
            "shared-library" => libraries.push((hex(f[2]), hex(f[3]), f[1].trim_matches('"').to_owned())),
            "tick" => {
                ticks += 1;
                let leaf = if f[3] == "1" { hex(f[4]) } else { hex(f[1]) };
                let found = code.iter().filter(|c| c.0 <= leaf).max_by_key(|c| c.0).filter(|c| leaf < c.1);
                let library = libraries.iter().find(|l| l.0 <= leaf && leaf < l.1);
                let name = found.or(library).map_or("(unknown)", |c| c.2.as_str());
                *expected.entry(name.to_owned()).or_default() += 1;
            }
            _ => {}
        }
    }
    // 93 tick lines in the log.
    assert_eq!(ticks, 93);

    let p = parse(&bytes).unwrap();
    assert_eq!(p.source, SourceFormat::V8Log);
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("samples", "count"));
    assert_eq!(p.total(0), ticks);
    assert_eq!(flat_by_name(&p, 0), expected);
}

#[test]
fn moved_and_deleted_code_is_followed() {
    // The second tick's return address 0x104 is no longer code after the move.
    let log = "v8-version,6,0,287,53,0\n\
               code-creation,LazyCompile,0,1,0x100,16,\"fib /app/fib.js:3:13\",0x9,*\n\
               tick,0x104,2,0,0x0,0\n\
               code-move,0x100,0x200\n\
               tick,0x208,3,0,0x0,0,0x104\n\
               tick,0x5000,3,0,0x204,0\n\
               code-delete,0x200\n\
               tick,0x208,4,0,0x0,0\n";
    let p = parse(log.as_bytes()).unwrap();
    assert_eq!(flat_by_name(&p, 0), BTreeMap::from([("fib".into(), 2), ("(unknown)".into(), 2)]));
    // An unknown pc with the top of stack in fib: fib is its caller.
    let frameless = p.samples.sample(2).locations;
    assert_eq!(frameless.len(), 2);
    assert_eq!(p.line_function_name(&p.location(frameless[1]).lines[0]), "fib");
    let fib = p.functions.iter().find(|f| p.str(f.name) == "fib").unwrap();
    assert_eq!((p.str(fib.filename), fib.start_line), ("/app/fib.js", 3));
}

#[test]
fn malformed_logs_get_typed_errors() {
    let header = "v8-version,6,0,287,53,0\n";
    let cases = [
        (format!("{header}code-creation,Stub,3,1,0x100,big,\"X\"\n"), 2, "not a number"),
        (format!("{header}code-creation,Stub,3,1,0xffffffffffffffff,2,\"X\"\n"), 2, "past the address space"),
        (format!("{header}tick,0x100,1,0,0x0,0,nowhere\n"), 2, "'nowhere' is not a hex address"),
        // Truncated mid-event.
        (format!("{header}tick,0x100,1\n"), 2, "too few fields"),
        (format!("{header}shared-library,\"/bin/node\",0x1\n"), 2, "too few fields"),
        (header.to_owned(), 1, "no tick events"),
    ];
    assert_text_errors("V8 tick log", &cases);
}
