//! A profile fed to [`IncrementalParse`] in pieces, as the page's worker feeds it what
//! the browser inflates, is the profile parsed whole — every fixture, to the last field,
//! errors included — and a Go profile is decoded while it arrives, not at the end.

mod common;

use stacklens_core::import::{detect, Format, IncrementalParse};
use stacklens_core::model::SourceFormat;
use stacklens_core::{parse, ParseOptions, Profile, Result};

fn shown(parsed: &Result<Profile>) -> String {
    match parsed {
        Ok(profile) => format!("{profile:?}"),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn every_fixture_fed_in_pieces_is_the_fixture_parsed_whole() {
    let Some(root) = common::fixtures() else { return };
    let (mut compared, mut decoded_while_arriving) = (0, 0);
    for path in common::fixture_files(&root) {
        // Inflated, as the browser hands them over.
        let bytes = common::inflated(&common::read(&path));
        let parsed = parse(&bytes);
        let mut parse = IncrementalParse::new();
        // Pieces of the browser's usual size, and odd ones that cut every field.
        let piece = if compared % 2 == 0 { 65_536 } else { 777 };
        for end in (piece..bytes.len()).step_by(piece) {
            parse.advance(&bytes[..end]);
        }
        // The last piece too, as `finish` does: what was decoded then is the profile.
        parse.advance(&bytes);
        let decoded = parse.samples_decoded();
        let fed = shown(&parse.finish(&bytes, &ParseOptions::default(), &mut |_, _| {}));
        let name = path.display();
        assert!(fed == shown(&parsed), "{name}: fed in pieces of {piece} differs from the whole parse");
        compared += 1;
        if let (Format::Of(SourceFormat::Pprof), Ok(profile)) = (detect(&bytes), &parsed) {
            assert_eq!(decoded, Some(profile.samples.len()), "{name}: not decoded as it arrived");
            decoded_while_arriving += 1;
        }
    }
    assert!(compared > 40, "only {compared} fixtures compared");
    assert!(decoded_while_arriving >= 20, "only {decoded_while_arriving} pprof profiles were decoded as they arrived");
}
