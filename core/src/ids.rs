//! The ids of stored records, each parsed once from text: `{kind}-{32 lowercase hex}`.
//! A record's kind is its id's type, so nothing inspects an id's prefix; on the wire and
//! in stored records they are the same strings as before they were typed.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Text that is not an id of the kind asked for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{text}' is not a {kind} id")]
pub struct BadId {
    pub kind: &'static str,
    pub text: String,
}

/// Whether `text` is `{prefix}-{32 lowercase hex}`.
fn has_form(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// An id type: what its ids start with (before the `-`), for those who make new ones.
pub trait RecordIdKind: TryFrom<String, Error = BadId> {
    const PREFIX: &'static str;
}

macro_rules! record_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The id `text` is, or why it is none.
            pub fn parse(text: &str) -> Result<Self, BadId> {
                if has_form(text, $prefix) {
                    Ok($name(text.to_owned()))
                } else {
                    Err(BadId { kind: $kind, text: text.to_owned() })
                }
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl RecordIdKind for $name {
            const PREFIX: &'static str = $prefix;
        }

        impl TryFrom<String> for $name {
            type Error = BadId;

            fn try_from(text: String) -> Result<Self, BadId> {
                if has_form(&text, $prefix) {
                    Ok($name(text))
                } else {
                    Err(BadId { kind: $kind, text })
                }
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }
    };
}

record_id!(
    /// A session: a stored raw profile (its link is a capability).
    SessionId,
    "sess",
    "session"
);
record_id!(
    /// A labelled baseline of a session.
    BaselineId,
    "base",
    "baseline"
);
record_id!(
    /// A capture from a target.
    CaptureId,
    "cap",
    "capture"
);
record_id!(
    /// An encrypted blob, which the server stores unread.
    BlobId,
    "blob",
    "blob"
);

/// An id of any record a link can name, its kind told by its form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordId {
    Session(SessionId),
    Baseline(BaselineId),
    Capture(CaptureId),
    Blob(BlobId),
}

impl RecordId {
    /// The record `text` names, if it is an id at all.
    pub fn parse(text: &str) -> Option<RecordId> {
        None.or_else(|| SessionId::parse(text).ok().map(RecordId::Session))
            .or_else(|| BaselineId::parse(text).ok().map(RecordId::Baseline))
            .or_else(|| CaptureId::parse(text).ok().map(RecordId::Capture))
            .or_else(|| BlobId::parse(text).ok().map(RecordId::Blob))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_and_write_the_same_text() {
        let text = "base-0123456789abcdef0123456789abcdef";
        let id: BaselineId = serde_json::from_str(&format!("\"{text}\"")).unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{text}\""));
        assert_eq!(RecordId::parse(text), Some(RecordId::Baseline(id)));
        assert!(serde_json::from_str::<SessionId>(&format!("\"{text}\"")).is_err());
        assert_eq!(SessionId::parse("sess-XYZ").unwrap_err().to_string(), "'sess-XYZ' is not a session id");
        assert_eq!(RecordId::parse("sess-0123456789abcdef0123456789abcdeF"), None);
    }
}
