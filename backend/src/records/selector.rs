//! Which stored profiles a query wants by their labels: Prometheus' label matchers
//! (`=`, `!=`, `=~`, `!~`), as Pyroscope's query API and Grafana write them
//! (`{service_name="api", region=~"eu-.*"}`), and the `k=v,k2=v2` lists of stacklens'
//! own range API, which are equalities only.
//!
//! As in Prometheus, a label a profile lacks has the value "" (so `region!="eu"`
//! matches a profile with no region) and a regular expression matches the whole value.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// How a matcher compares.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Op {
    #[serde(rename = "=")]
    Equal,
    #[serde(rename = "!=")]
    NotEqual,
    #[serde(rename = "=~")]
    Matches,
    #[serde(rename = "!~")]
    NotMatches,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Equal => "=",
            Op::NotEqual => "!=",
            Op::Matches => "=~",
            Op::NotMatches => "!~",
        }
    }
}

/// One label matcher.
#[derive(Clone, Debug, Serialize)]
pub struct Matcher {
    pub name: String,
    pub op: Op,
    pub value: String,
    /// The anchored expression, for `=~` and `!~`.
    #[serde(skip)]
    regex: Option<regex::Regex>,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, self.op, &self.value) == (&other.name, other.op, &other.value)
    }
}

impl Matcher {
    pub fn new(name: &str, op: Op, value: &str) -> Result<Self, SelectorError> {
        let regex = match op {
            Op::Matches | Op::NotMatches => Some(
                regex::RegexBuilder::new(&format!("^(?:{value})$"))
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| SelectorError::Regex { name: name.to_owned(), error: e.to_string() })?,
            ),
            Op::Equal | Op::NotEqual => None,
        };
        Ok(Matcher { name: name.to_owned(), op, value: value.to_owned(), regex })
    }

    /// Whether `value` (a missing label's is "") satisfies the matcher.
    pub fn accepts(&self, value: &str) -> bool {
        let regex_matches = || self.regex.as_ref().is_some_and(|re| re.is_match(value));
        match self.op {
            Op::Equal => value == self.value,
            Op::NotEqual => value != self.value,
            Op::Matches => regex_matches(),
            Op::NotMatches => !regex_matches(),
        }
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{:?}", self.name, self.op.as_str(), self.value)
    }
}

/// Matchers that must all hold, in a canonical order (so one selector has one cache key).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Selector(Vec<Matcher>);

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum SelectorError {
    #[error("label selector: {0}")]
    Syntax(String),
    #[error("label selector: the expression of '{name}' is not valid: {error}")]
    Regex { name: String, error: String },
}

/// Most matchers one selector may hold.
pub const MAX_MATCHERS: usize = 64;

impl Selector {
    pub fn new(mut matchers: Vec<Matcher>) -> Self {
        matchers.sort_by(|a, b| (&a.name, a.op, &a.value).cmp(&(&b.name, b.op, &b.value)));
        matchers.dedup();
        Selector(matchers)
    }

    /// Labels that must equal these values.
    pub fn equal(labels: &BTreeMap<String, String>) -> Self {
        Selector::new(
            labels
                .iter()
                .map(|(k, v)| Matcher { name: k.clone(), op: Op::Equal, value: v.clone(), regex: None })
                .collect(),
        )
    }

    pub fn matchers(&self) -> &[Matcher] {
        &self.0
    }

    /// Whether `labels` satisfy every matcher.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|m| m.accepts(labels.get(&m.name).map_or("", String::as_str)))
    }

    /// The selector without the matchers on `names`, and those matchers.
    pub fn split_off(&self, names: &[&str]) -> (Selector, Vec<Matcher>) {
        let (taken, kept) = self.0.iter().cloned().partition(|m| names.contains(&m.name.as_str()));
        (Selector(kept), taken)
    }

    /// The equalities of the selector (what stacklens' range API echoes back).
    pub fn equalities(&self) -> BTreeMap<String, String> {
        self.0.iter().filter(|m| m.op == Op::Equal).map(|m| (m.name.clone(), m.value.clone())).collect()
    }

    /// A stable text for the selector, naming caches of what it selects. A selector of
    /// equalities only keeps the key of the label maps that came before matchers.
    pub fn cache_key(&self) -> Vec<u8> {
        if self.0.iter().all(|m| m.op == Op::Equal) {
            serde_json::to_vec(&self.equalities()).unwrap_or_default()
        } else {
            serde_json::to_vec(&self.0).unwrap_or_default()
        }
    }

    /// Parses `{name="value", name2=~"re", …}`, optionally after a metric name
    /// (`process_cpu:cpu:nanoseconds:cpu:nanoseconds{…}`), which is returned apart.
    /// Values are quoted with `"`, `'` or `` ` `` (raw), with Go's escapes in the first two.
    pub fn parse(text: &str) -> Result<(Option<String>, Selector), SelectorError> {
        let syntax = |why: &str| SelectorError::Syntax(format!("{why} in '{text}'"));
        let text_trimmed = text.trim();
        let (metric, rest) = match text_trimmed.find('{') {
            Some(at) => (text_trimmed[..at].trim(), &text_trimmed[at..]),
            None => (text_trimmed, ""),
        };
        if !metric.is_empty()
            && !metric.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '.' | '-'))
        {
            return Err(syntax("a metric name holds only letters, digits, '_', ':', '.' and '-'"));
        }
        let metric = (!metric.is_empty()).then(|| metric.to_owned());
        if rest.is_empty() {
            return if metric.is_some() { Ok((metric, Selector::default())) } else { Err(syntax("an empty selector")) };
        }
        let mut chars = rest[1..].char_indices().peekable();
        let body = &rest[1..];
        let mut matchers = Vec::new();
        let skip_space = |chars: &mut std::iter::Peekable<std::str::CharIndices>| {
            while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        };
        loop {
            skip_space(&mut chars);
            match chars.peek() {
                Some((_, '}')) => {
                    chars.next();
                    break;
                }
                None => return Err(syntax("no closing '}'")),
                _ => {}
            }
            let start = chars.peek().map_or(body.len(), |(i, _)| *i);
            while chars.next_if(|(_, c)| c.is_ascii_alphanumeric() || *c == '_' || *c == '.').is_some() {}
            let end = chars.peek().map_or(body.len(), |(i, _)| *i);
            let name = &body[start..end];
            if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                return Err(syntax("a label name is expected"));
            }
            skip_space(&mut chars);
            let op = match (chars.next().map(|(_, c)| c), chars.peek().map(|(_, c)| *c)) {
                (Some('='), Some('~')) => {
                    chars.next();
                    Op::Matches
                }
                (Some('='), _) => Op::Equal,
                (Some('!'), Some('=')) => {
                    chars.next();
                    Op::NotEqual
                }
                (Some('!'), Some('~')) => {
                    chars.next();
                    Op::NotMatches
                }
                _ => return Err(syntax(&format!("'{name}' is followed by no operator (=, !=, =~, !~)"))),
            };
            skip_space(&mut chars);
            let value =
                quoted(&mut chars).ok_or_else(|| syntax(&format!("the value of '{name}' is not a quoted string")))?;
            matchers.push(Matcher::new(name, op, &value)?);
            if matchers.len() > MAX_MATCHERS {
                return Err(SelectorError::Syntax(format!("at most {MAX_MATCHERS} matchers")));
            }
            skip_space(&mut chars);
            match chars.next().map(|(_, c)| c) {
                Some(',') => {}
                Some('}') => break,
                _ => return Err(syntax("matchers are separated by ','")),
            }
        }
        if chars.next().is_some() {
            return Err(syntax("text after '}'"));
        }
        Ok((metric, Selector::new(matchers)))
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, m) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{m}")?;
        }
        f.write_str("}")
    }
}

/// A quoted string at the iterator (its quote first), unescaped.
fn quoted(chars: &mut std::iter::Peekable<std::str::CharIndices>) -> Option<String> {
    let (_, quote) = chars.next().filter(|(_, c)| matches!(c, '"' | '\'' | '`'))?;
    let mut value = String::new();
    loop {
        let (_, c) = chars.next()?;
        match c {
            c if c == quote => return Some(value),
            '\\' if quote != '`' => {
                let (_, escaped) = chars.next()?;
                value.push(match escaped {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '\\' | '"' | '\'' => escaped,
                    _ => return None,
                });
            }
            c => value.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_a_pyroscope_query() {
        let (metric, selector) = Selector::parse(
            r#"process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="api", region=~"eu-.*",pod!='x' }"#,
        )
        .unwrap();
        assert_eq!(metric.as_deref(), Some("process_cpu:cpu:nanoseconds:cpu:nanoseconds"));
        assert_eq!(selector.to_string(), r#"{pod!="x",region=~"eu-.*",service_name="api"}"#);
        assert!(selector.matches(&labels(&[("service_name", "api"), ("region", "eu-west"), ("pod", "y")])));
        assert!(!selector.matches(&labels(&[("service_name", "api"), ("region", "us-east")])));
        // Anchored: "eu-" must start the value.
        assert!(!selector.matches(&labels(&[("service_name", "api"), ("region", "xeu-west")])));
        assert!(!selector.matches(&labels(&[("service_name", "api"), ("region", "eu-1"), ("pod", "x")])));
    }

    #[test]
    fn missing_labels_are_empty() {
        let (_, selector) = Selector::parse(r#"{region!="eu", zone=""}"#).unwrap();
        assert!(selector.matches(&labels(&[])));
        assert!(!selector.matches(&labels(&[("zone", "a")])));
        let (_, selector) = Selector::parse(r#"{region!~"eu.*"}"#).unwrap();
        assert!(selector.matches(&labels(&[("region", "us")])));
        assert!(!selector.matches(&labels(&[("region", "eu1")])));
    }

    #[test]
    fn metric_alone_and_empty_braces() {
        let (metric, selector) = Selector::parse("memory:inuse_space:bytes:space:bytes").unwrap();
        assert_eq!(metric.as_deref(), Some("memory:inuse_space:bytes:space:bytes"));
        assert!(selector.matchers().is_empty());
        let (metric, selector) = Selector::parse(" {} ").unwrap();
        assert_eq!((metric, selector.matchers().len()), (None, 0));
    }

    #[test]
    fn escapes_and_raw_strings() {
        let (_, selector) = Selector::parse(r#"{a="x\"y\\z", b=`c\d`}"#).unwrap();
        assert_eq!(selector.equalities(), labels(&[("a", r#"x"y\z"#), ("b", r"c\d")]));
    }

    #[test]
    fn rejects_bad_selectors() {
        for bad in [
            "",
            "{",
            "{a}",
            "{a=b}",
            r#"{a="b" c="d"}"#,
            r#"{a="b"} x"#,
            r#"{1a="b"}"#,
            r#"{a=~"("}"#,
            r#"{a="\q"}"#,
            r#"m{a="b""#,
            "bad name{}",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad:?} parsed");
        }
        let many = format!("{{{}}}", (0..=MAX_MATCHERS).map(|i| format!("l{i}=\"v\"")).collect::<Vec<_>>().join(","));
        assert!(Selector::parse(&many).is_err());
    }

    #[test]
    fn equalities_keep_their_cache_key() {
        let map = labels(&[("a", "1"), ("b", "2")]);
        assert_eq!(Selector::equal(&map).cache_key(), serde_json::to_vec(&map).unwrap());
        let (_, parsed) = Selector::parse(r#"{b="2",a="1"}"#).unwrap();
        assert_eq!(parsed, Selector::equal(&map));
        let (_, regex) = Selector::parse(r#"{a=~"1"}"#).unwrap();
        assert_ne!(regex.cache_key(), Selector::equal(&labels(&[("a", "1")])).cache_key());
    }
}
