//! A profile fed to [`IncrementalParse`] in pieces, as the page's worker feeds it what
//! the browser inflates, is the profile parsed whole — every fixture, to the last field,
//! errors included — and a Go profile is decoded while it arrives, not at the end.

mod common;

use stacklens_core::import::{is_gzip, IncrementalParse};
use stacklens_core::{parse, ParseOptions, Profile, Result};

fn shown(parsed: Result<Profile>) -> String {
    match parsed {
        Ok(profile) => format!("{profile:?}"),
        Err(e) => format!("error: {e}"),
    }
}

/// The inflated bytes, as the browser hands them over.
fn inflated(bytes: Vec<u8>) -> Vec<u8> {
    if !is_gzip(&bytes) {
        return bytes;
    }
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&bytes[..]), &mut out).unwrap();
    out
}

#[test]
fn every_fixture_fed_in_pieces_is_the_fixture_parsed_whole() {
    let Some(root) = common::fixtures() else { return };
    let (mut compared, mut decoded_while_arriving) = (0, 0);
    for path in common::fixture_files(&root) {
        let bytes = inflated(common::read(&path));
        let whole = shown(parse(&bytes));
        let mut parse = IncrementalParse::new();
        // Pieces of the browser's usual size, and odd ones that cut every field.
        let piece = if compared % 2 == 0 { 65_536 } else { 777 };
        for end in (piece..bytes.len()).step_by(piece) {
            parse.advance(&bytes[..end]);
        }
        // The last piece too, as `finish` does: what was decoded then is the profile.
        parse.advance(&bytes);
        let decoded = parse.samples_decoded();
        let fed = shown(parse.finish(&bytes, &ParseOptions::default(), &mut |_, _| {}));
        let name = path.display();
        assert!(fed == whole, "{name}: fed in pieces of {piece} differs from the whole parse");
        compared += 1;
        if let Ok(profile) = parse_plain_pprof(&bytes) {
            assert_eq!(decoded, Some(profile.samples.len()), "{name}: not decoded as it arrived");
            decoded_while_arriving += 1;
        }
    }
    assert!(compared > 40, "only {compared} fixtures compared");
    assert!(decoded_while_arriving >= 20, "only {decoded_while_arriving} pprof profiles were decoded as they arrived");
}

/// The profile, when the bytes are a pprof protobuf that parses.
fn parse_plain_pprof(bytes: &[u8]) -> Result<Profile> {
    match stacklens_core::import::detect(bytes) {
        stacklens_core::import::Format::Pprof => parse(bytes),
        other => Err(stacklens_core::Error::Invalid(format!("{other:?}"))),
    }
}
