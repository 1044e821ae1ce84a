//! How the graph's nodes read: pprof's multi-line labels (the shortened name, the file,
//! flat and cum with their shares) and font sizes.

use std::sync::LazyLock;

use regex::Regex;

use crate::analysis::frames::{FrameTable, Granularity};
use crate::units::percentage;

/// pprof's node font size: 8 for no flat value, up to 24 for the largest.
pub(super) fn font_size(flat: i64, max_flat: u64) -> u32 {
    if max_flat == 0 || flat == 0 {
        return 8;
    }
    8 + (16.0 * (flat.unsigned_abs() as f64 / max_flat as f64).sqrt()).ceil() as u32
}

/// The value part of a node's label: `5.46s (0.21%)` and `of 2489.35s (96.22%)`, or
/// `0 of 6.64MB (91.34%)` when the node has no flat value.
pub(super) fn value_lines(flat: i64, cum: i64, total: i64, format_value: impl Fn(i64) -> String) -> Vec<String> {
    let with_share = |v: i64| format!("{} ({})", format_value(v), percentage(v, total).trim());
    match (flat, cum == flat) {
        (_, true) if flat != 0 => vec![with_share(flat)],
        (0, true) => vec!["0".to_owned()],
        (0, false) => vec![format!("0 of {}", with_share(cum))],
        _ => vec![with_share(flat), format!("of {}", with_share(cum))],
    }
}

/// The name part of a node's label, as pprof's `multilinePrintableName`: the address
/// (by address only), the shortened function name split at `::` and `.`, and the file's
/// base name (with the line, by line or address).
pub(super) fn name_lines(table: &FrameTable, granularity: Granularity, node: u32) -> Vec<String> {
    // The table's profile: tagroot/tagleaf label frames are locations of its own.
    let profile = table.profile();
    let (location, line) = table.origin(node);
    let location = profile.location(location);
    let mut lines = Vec::new();
    if granularity == Granularity::Addresses && location.address != 0 {
        lines.push(format!("{:016x}", location.address));
    }
    let Some(line) = line.and_then(|i| location.lines.get(i)) else {
        lines.push(profile.unsymbolized_name(location));
        return lines;
    };
    let function = profile.function(line.function);
    let name = profile.str(function.name);
    if !name.is_empty() {
        let name = shorten_function_name(name).replace("::", "\n").replace("[...]", "[…]").replace('.', "\n");
        lines.extend(name.split('\n').map(str::to_owned));
    }
    let file = profile.str(function.filename);
    let base = file.rsplit('/').next().unwrap_or(file);
    match granularity {
        Granularity::Functions => {}
        Granularity::Lines | Granularity::Addresses if line.line != 0 => lines.push(format!("{base}:{}", line.line)),
        _ if !file.is_empty() => lines.push(base.to_owned()),
        _ => {}
    }
    if lines.is_empty() {
        lines.push("<unknown>".to_owned());
    }
    lines
}

/// pprof's `ShortenFunctionName`: a Go, Java or C++ name without its package path,
/// Java package and arguments, or C++ namespaces.
pub fn shorten_function_name(name: &str) -> String {
    // Go's `\w` and `\d` are ASCII only.
    static ANONYMOUS_NAMESPACE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\(anonymous namespace\)::").expect("valid regex"));
    static GO_MODULE_VERSION: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(.*?)/v(?:[2-9]|[1-9][0-9]+)([./].*)$").expect("valid regex"));
    static SHORTENERS: LazyLock<[Regex; 3]> = LazyLock::new(|| {
        [
            r"^(?:[0-9A-Za-z_\-.]+/)+([^.]+\..+)",
            r"^(?:[a-z][0-9A-Za-z_]*\.)*([A-Z][0-9A-Za-z_$]*\.(?:<init>|[a-z][0-9A-Za-z_$]*(?:\$[0-9]+)?))(?:\(|$)",
            r"^(?:[_a-zA-Z][0-9A-Za-z_]*::)+(_*[A-Z][0-9A-Za-z_]*::~?[_a-zA-Z][0-9A-Za-z_]*(?:<.*>)?)",
        ]
        .map(|re| Regex::new(re).expect("valid regex"))
    });
    let name = ANONYMOUS_NAMESPACE.replace(name, "");
    let name = GO_MODULE_VERSION.replace(&name, "${1}${2}");
    SHORTENERS
        .iter()
        .find_map(|re| re.captures(&name).and_then(|c| c.get(1)).map(|m| m.as_str().to_owned()))
        .unwrap_or_else(|| name.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_shorten_like_pprof() {
        for (full, short) in [
            ("github.com/google/pprof/internal/graph.(*Graph).TrimTree", "graph.(*Graph).TrimTree"),
            ("example.com/mod/v2/pkg.Func", "pkg.Func"),
            ("main.main", "main.main"),
            ("java.util.HashMap.put(Ljava/lang/Object;)", "HashMap.put"),
            ("(anonymous namespace)::Foo::Bar::baz", "Bar::baz"),
            ("std::vector<int>::push_back", "std::vector<int>::push_back"),
        ] {
            assert_eq!(shorten_function_name(full), short, "{full}");
        }
    }
}
