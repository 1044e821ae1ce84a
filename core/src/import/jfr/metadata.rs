//! The types of a JFR chunk as its metadata event describes them, and the reading of
//! values (and constant pools) by those descriptions.

use rustc_hash::FxHashMap as HashMap;

use super::reader::{error, Reader, Value, MAX_DEPTH};
use crate::Result;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Primitive {
    Boolean,
    Byte,
    Char,
    Short,
    Int,
    Long,
    Float,
    Double,
    String,
}

impl Primitive {
    fn of(class: &str) -> Option<Self> {
        Some(match class {
            "boolean" => Self::Boolean,
            "byte" => Self::Byte,
            "char" => Self::Char,
            "short" => Self::Short,
            "int" => Self::Int,
            "long" => Self::Long,
            "float" => Self::Float,
            "double" => Self::Double,
            "java.lang.String" => Self::String,
            _ => return None,
        })
    }
}

#[derive(Debug)]
pub(super) struct Field {
    pub(super) name: String,
    pub(super) class: u64,
    pub(super) constant_pool: bool,
    pub(super) array: bool,
}

#[derive(Debug)]
pub(super) struct Class {
    pub(super) name: String,
    primitive: Option<Primitive>,
    pub(super) fields: Vec<Field>,
}

/// Types of one chunk by id.
#[derive(Default)]
pub(super) struct Metadata {
    pub(super) classes: HashMap<u64, Class>,
    pub(super) string_class: u64,
}

impl Metadata {
    fn class(&self, id: u64, at: usize) -> Result<&Class> {
        self.classes.get(&id).ok_or_else(|| error(at, format!("type id {id} is not in the metadata")))
    }

    fn id_of(&self, name: &str) -> Option<u64> {
        self.classes.iter().find(|(_, c)| c.name == name).map(|(&id, _)| id)
    }
}

/// An element of the metadata event's tree: a name, attributes and children.
struct Element {
    name: String,
    attributes: Vec<(String, String)>,
    children: Vec<Element>,
}

impl Element {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

impl Reader<'_> {
    fn metadata_string<'s>(&mut self, strings: &'s [String]) -> Result<&'s str> {
        let at = self.pos;
        let i = self.int("metadata string index")?;
        usize::try_from(i)
            .ok()
            .and_then(|i| strings.get(i))
            .map(String::as_str)
            .ok_or_else(|| error(at, format!("metadata string index {i} is out of range")))
    }

    fn element(&mut self, strings: &[String], depth: usize) -> Result<Element> {
        if depth > MAX_DEPTH {
            return Err(error(self.pos, format!("metadata nested deeper than {MAX_DEPTH}")));
        }
        let name = self.metadata_string(strings)?.to_owned();
        let n = self.count("metadata attribute count")?;
        let mut attributes = Vec::with_capacity(n);
        for _ in 0..n {
            let key = self.metadata_string(strings)?.to_owned();
            let value = self.metadata_string(strings)?.to_owned();
            attributes.push((key, value));
        }
        let n = self.count("metadata child count")?;
        let mut children = Vec::with_capacity(n);
        for _ in 0..n {
            children.push(self.element(strings, depth + 1)?);
        }
        Ok(Element { name, attributes, children })
    }

    /// The metadata event's body (after its size and type): the type descriptions.
    pub(super) fn metadata(&mut self) -> Result<Metadata> {
        for what in ["metadata start time", "metadata duration", "metadata id"] {
            self.long(what)?;
        }
        let n = self.count("metadata string count")?;
        let mut strings = Vec::with_capacity(n);
        for _ in 0..n {
            let at = self.pos;
            match self.string(u64::MAX, "metadata string")? {
                Value::Str(s) => strings.push(s.unwrap_or_default()),
                _ => return Err(error(at, "a metadata string refers to the constant pool")),
            }
        }
        let at = self.pos;
        let root = self.element(&strings, 0)?;
        let mut metadata = Metadata::default();
        let mut pending = vec![&root];
        while let Some(e) = pending.pop() {
            if e.name != "class" {
                pending.extend(&e.children);
                continue;
            }
            let id = id_attribute(e, "id", at)?;
            let name = e.attribute("name").unwrap_or_default().to_owned();
            let mut fields = Vec::new();
            for f in e.children.iter().filter(|f| f.name == "field") {
                fields.push(Field {
                    name: f.attribute("name").unwrap_or_default().to_owned(),
                    class: id_attribute(f, "class", at)?,
                    constant_pool: f.attribute("constantPool") == Some("true"),
                    array: f.attribute("dimension").is_some_and(|d| d != "0"),
                });
            }
            let primitive = Primitive::of(&name);
            metadata.classes.insert(id, Class { name, primitive, fields });
        }
        metadata.string_class = metadata.id_of("java.lang.String").unwrap_or(u64::MAX);
        Ok(metadata)
    }

    /// One value of type `class` (a constant pool reference when `constant_pool`).
    fn value(&mut self, metadata: &Metadata, class: u64, constant_pool: bool, depth: usize) -> Result<Value> {
        if constant_pool {
            return Ok(Value::Ref(class, self.long("constant pool reference")?));
        }
        let at = self.pos;
        let class = metadata.class(class, at)?;
        Ok(match class.primitive {
            Some(Primitive::Boolean | Primitive::Byte) => Value::Int(i64::from(self.u8(&class.name)?)),
            Some(Primitive::Char | Primitive::Short) => Value::Int(i64::from(self.short(&class.name)?)),
            Some(Primitive::Int) => Value::Int(i64::from(self.int(&class.name)?)),
            Some(Primitive::Long) => Value::Int(self.long(&class.name)?),
            Some(Primitive::Float) => {
                self.take(4, &class.name)?;
                Value::Int(0)
            }
            Some(Primitive::Double) => {
                self.take(8, &class.name)?;
                Value::Int(0)
            }
            Some(Primitive::String) => self.string(metadata.string_class, &class.name)?,
            None => {
                if depth > MAX_DEPTH {
                    return Err(error(at, format!("values nested deeper than {MAX_DEPTH}")));
                }
                self.spend_container()?;
                let mut fields = Vec::with_capacity(class.fields.len());
                for f in &class.fields {
                    fields.push(self.field(metadata, f, depth + 1)?);
                }
                Value::Object(fields)
            }
        })
    }

    pub(super) fn field(&mut self, metadata: &Metadata, field: &Field, depth: usize) -> Result<Value> {
        if !field.array {
            return self.value(metadata, field.class, field.constant_pool, depth);
        }
        let n = self.count(&field.name)?;
        self.spend_container()?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(metadata, field.class, field.constant_pool, depth)?);
        }
        Ok(Value::Array(items))
    }
}

fn id_attribute(e: &Element, key: &str, at: usize) -> Result<u64> {
    e.attribute(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| error(at, format!("metadata {} has no numeric {key}", e.name)))
}

/// The constant pools of one chunk: (type id, entry id) → value.
pub(super) type Pools = HashMap<(u64, i64), Value>;

impl Reader<'_> {
    /// A constant pool event's body: pools of entries, each an id and a value.
    pub(super) fn constant_pools(&mut self, metadata: &Metadata, pools: &mut Pools) -> Result<()> {
        for what in ["checkpoint start time", "checkpoint duration", "checkpoint delta"] {
            self.long(what)?;
        }
        self.u8("checkpoint kind")?;
        let n = self.count("constant pool count")?;
        for _ in 0..n {
            let class = self.long("constant pool type")? as u64;
            let entries = self.count("constant pool size")?;
            for _ in 0..entries {
                let id = self.long("constant pool entry id")?;
                let value = self.value(metadata, class, false, 0)?;
                pools.insert((class, id), value);
            }
        }
        Ok(())
    }
}
