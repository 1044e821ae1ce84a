//! Random structural mutations of JSON documents, for never-panic properties of the
//! JSON importers: each mutation replaces one value (chosen by its pre-order position)
//! with another kind of value, or removes it from its object or list.

use proptest::prelude::*;
use serde_json::{json, Value};

/// A replacement: a value of some other kind, or `None` to remove the node.
pub fn replacement() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        (-3i64..40).prop_map(|n| Some(json!(n))),
        any::<i64>().prop_map(|n| Some(json!(n))),
        any::<f64>().prop_map(|f| Some(json!(f))), // NaN and infinities become null
        prop_oneof![Just(1e300), Just(-1e300), Just(0.5), Just(-0.0), Just(9.2e18)].prop_map(|f| Some(json!(f))),
        "[a-zA-Z()]{0,6}".prop_map(|s| Some(json!(s))),
        Just(Some(json!([]))),
        Just(Some(json!({}))),
        Just(Some(json!([1, 2, 3]))),
        Just(Some(json!([[0, 1], [2]]))),
        Just(Some(json!({"id": 1, "callFrame": {}}))),
        Just(Some(json!({"type": "O", "at": 1, "frame": 0}))),
    ]
}

fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(map) => map.values().map(count).sum(),
        _ => 0,
    }
}

/// Replaces (or removes) the value at pre-order position `at` (the root is never removed).
fn apply(v: &mut Value, at: &mut usize, with: &Option<Value>) -> bool {
    let children: Vec<&mut Value> = match v {
        Value::Array(items) => items.iter_mut().collect(),
        Value::Object(map) => map.values_mut().collect(),
        _ => return false,
    };
    let mut remove = None;
    for (i, child) in children.into_iter().enumerate() {
        if *at == 0 {
            match with {
                Some(new) => {
                    *child = new.clone();
                    return true;
                }
                None => remove = Some(i),
            }
            break;
        }
        *at -= 1;
        if apply(child, at, with) {
            return true;
        }
    }
    let Some(i) = remove else { return false };
    match v {
        Value::Array(items) => {
            items.remove(i);
        }
        Value::Object(map) => {
            let key = map.keys().nth(i).cloned().expect("key at index");
            map.remove(&key);
        }
        _ => unreachable!("only containers have children"),
    }
    true
}

/// `doc` with each mutation applied in turn.
pub fn mutate(doc: &Value, mutations: &[(prop::sample::Index, Option<Value>)]) -> Vec<u8> {
    let mut doc = doc.clone();
    for (index, with) in mutations {
        let nodes = count(&doc);
        if nodes > 1 {
            let mut at = index.index(nodes - 1);
            apply(&mut doc, &mut at, with);
        }
    }
    serde_json::to_vec(&doc).expect("a Value serializes")
}
