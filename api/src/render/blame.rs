//! Which field of a spec makes a difference: the changes from one spec to
//! another, field by field, each applied alone to the old spec to see
//! whether it alone changes what is rendered. What a warning names.

use serde_json::Value;

use crate::defaults::{Defaulted, apply_defaults};
use crate::field::Path;
use crate::types::MemcachedSpec;

/// The first field (by path, under `spec`) whose change from `old` to `new`
/// alone makes `render` give what `same` refuses, with that rendering; the
/// first changed field when none does alone.
pub fn first_field<T>(
    old: &Defaulted,
    new: &Defaulted,
    render: impl Fn(&Defaulted) -> T,
    same: impl Fn(&T) -> bool,
) -> (Path, Option<T>) {
    let json = |spec: &MemcachedSpec| serde_json::to_value(spec).unwrap_or(Value::Null);
    let (before, after) = (json(old), json(new));
    let mut changed = Vec::new();
    leaf_changes(&before, &after, &mut Vec::new(), &mut changed);
    let alone = |field: &Vec<String>| {
        let mut candidate = before.clone();
        set(&mut candidate, field, lookup(&after, field).cloned());
        let spec = serde_json::from_value::<MemcachedSpec>(candidate).ok()?;
        let rendered = render(&apply_defaults(spec));
        (!same(&rendered)).then(|| (field.clone(), rendered))
    };
    let (field, rendered) = match changed.iter().find_map(alone) {
        Some((field, rendered)) => (field, Some(rendered)),
        None => (changed.first().cloned().unwrap_or_default(), None),
    };
    let path = (field.iter()).fold(Path::new("spec"), |path, key| path.child(key));
    (path, rendered)
}

/// The fields of the spec that hold the operator's own structs, which a
/// warning names by their fields; any other value (a list, a map, a
/// Kubernetes type) is named as one field.
const STRUCTS: [&str; 14] = [
    "",
    "autoscaling",
    "highAvailability",
    "highAvailability.gracefulShutdown",
    "highAvailability.podDisruptionBudget",
    "memcached",
    "monitoring",
    "monitoring.serviceMonitor",
    "networkPolicy",
    "security",
    "security.networkPolicy",
    "security.sasl",
    "security.tls",
    "warmRestart",
];

/// The fields where `a` and `b` differ ([`STRUCTS`] walked down to their
/// fields), sorted; an absent struct counts as an empty one.
fn leaf_changes(a: &Value, b: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let walked = STRUCTS.contains(&at.join(".").as_str());
    let empty = serde_json::Map::new();
    let fields = |v| fields_of(v, walked, &empty);
    match (fields(a), fields(b)) {
        (Some(a), Some(b)) if a != b => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            let null = Value::Null;
            for key in keys {
                at.push(key.clone());
                leaf_changes(
                    a.get(key).unwrap_or(&null),
                    b.get(key).unwrap_or(&null),
                    at,
                    out,
                );
                at.pop();
            }
        }
        _ if a != b => out.push(at.clone()),
        _ => {}
    }
}

/// A walked struct's fields (an absent one has none).
fn fields_of<'a>(
    value: &'a Value,
    walked: bool,
    empty: &'a serde_json::Map<String, Value>,
) -> Option<&'a serde_json::Map<String, Value>> {
    match value {
        Value::Object(map) if walked => Some(map),
        Value::Null if walked => Some(empty),
        _ => None,
    }
}

fn lookup<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

/// Set (or with `None` remove) the value at `path`, creating objects on the way.
fn set(value: &mut Value, path: &[String], to: Option<Value>) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = value;
    for key in parents {
        if !at.get(key).is_some_and(Value::is_object) {
            at[key.as_str()] = Value::Object(Default::default());
        }
        at = &mut at[key.as_str()];
    }
    if let Value::Object(map) = at {
        match to {
            Some(to) => map.insert(last.clone(), to),
            None => map.remove(last),
        };
    }
}
