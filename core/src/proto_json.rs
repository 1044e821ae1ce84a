//! Integers in proto3's JSON mapping, for the prost messages that are also read and
//! written as JSON (OTLP/JSON, Pyroscope's Connect API): a 64-bit integer is written as
//! a decimal string and read from a string or a number; other integers are numbers.
//! Use with `#[serde(with = "…")]` or `deserialize_with`.

use serde::{Deserialize, Deserializer, Serializer};

/// An integer as proto3's JSON writes it: a number, or (64-bit types) a decimal string.
#[derive(Deserialize)]
#[serde(untagged)]
enum JsonInteger {
    Number(serde_json::Number),
    Text(String),
}

impl JsonInteger {
    fn parse<T: TryFrom<i128>, E: serde::de::Error>(self) -> Result<T, E> {
        let wide: Option<i128> = match &self {
            JsonInteger::Number(n) => n.as_i64().map(i128::from).or(n.as_u64().map(i128::from)),
            JsonInteger::Text(s) => s.parse().ok(),
        };
        let shown = || match &self {
            JsonInteger::Number(n) => n.to_string(),
            JsonInteger::Text(s) => format!("\"{s}\""),
        };
        let wide = wide.ok_or_else(|| E::custom(format!("{} is not an integer", shown())))?;
        T::try_from(wide).map_err(|_| E::custom(format!("{} is out of range", shown())))
    }
}

/// Reads an integer field (a missing one is left to `#[serde(default)]`).
pub fn integer<'de, D: Deserializer<'de>, T: TryFrom<i128>>(deserializer: D) -> Result<T, D::Error> {
    JsonInteger::deserialize(deserializer)?.parse()
}

/// Reads an `optional` integer field (`null` is none).
pub fn optional_integer<'de, D: Deserializer<'de>, T: TryFrom<i128>>(deserializer: D) -> Result<Option<T>, D::Error> {
    Option::<JsonInteger>::deserialize(deserializer)?.map(JsonInteger::parse).transpose()
}

/// Reads a repeated integer field.
pub fn integers<'de, D: Deserializer<'de>, T: TryFrom<i128>>(deserializer: D) -> Result<Vec<T>, D::Error> {
    Vec::<JsonInteger>::deserialize(deserializer)?.into_iter().map(JsonInteger::parse).collect()
}

/// A 64-bit integer field, written as a string.
pub mod int64 {
    use super::*;

    pub fn serialize<S: Serializer, T: ToString>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&value.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: TryFrom<i128>>(deserializer: D) -> Result<T, D::Error> {
        super::integer(deserializer)
    }
}

/// An `optional` 64-bit integer field, written as a string when present.
pub mod optional_int64 {
    use super::*;

    pub fn serialize<S: Serializer, T: ToString>(value: &Option<T>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => serializer.serialize_str(&v.to_string()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: TryFrom<i128>>(deserializer: D) -> Result<Option<T>, D::Error> {
        super::optional_integer(deserializer)
    }
}

/// A repeated 64-bit integer field, written as strings.
pub mod int64s {
    use super::*;

    pub fn serialize<S: Serializer, T: ToString>(values: &[T], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(values.iter().map(ToString::to_string))
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: TryFrom<i128>>(deserializer: D) -> Result<Vec<T>, D::Error> {
        super::integers(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug, PartialEq, Default)]
    #[serde(default)]
    struct Message {
        #[serde(with = "super::int64")]
        a: i64,
        #[serde(with = "super::optional_int64")]
        b: Option<i64>,
        #[serde(with = "super::int64s")]
        c: Vec<u64>,
        #[serde(deserialize_with = "super::integer")]
        d: u32,
    }

    #[test]
    fn reads_strings_and_numbers_and_writes_strings() {
        let m: Message = serde_json::from_str(r#"{"a":"-5","b":7,"c":["1",2],"d":3}"#).unwrap();
        assert_eq!(m, Message { a: -5, b: Some(7), c: vec![1, 2], d: 3 });
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"a":"-5","b":"7","c":["1","2"],"d":3}"#);
        assert!(serde_json::from_str::<Message>(r#"{"d":-1}"#).unwrap_err().to_string().contains("out of range"));
        assert!(serde_json::from_str::<Message>(r#"{"a":"x"}"#).unwrap_err().to_string().contains("not an integer"));
        assert_eq!(serde_json::from_str::<Message>(r#"{"b":null}"#).unwrap(), Message::default());
    }
}
