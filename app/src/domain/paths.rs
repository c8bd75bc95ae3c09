//! Dotted field paths into a tool's arguments, as tools name them in `key_fields`,
//! `ignore_fields` and `redact_fields`.
//!
//! `"card.number"` means `args["card"]["number"]`: the path is split at every `.` and each part
//! names a member of an object. A member whose own name contains a `.` cannot be addressed.
//! Where a path meets an array on the way, removing and replacing apply the rest of the path to
//! every element (`"items.price"` reaches the price of every item), while reading a single value
//! for a business key does not go through arrays, since a key field must be one value.

use serde_json::{Map, Value};

/// Whether `path` is a usable dotted path: not empty, and no empty part (`"a..b"`, `".a"`).
pub fn is_valid_path(path: &str) -> bool {
    !path.is_empty() && path.split('.').all(|part| !part.is_empty())
}

/// The value at `path`, through objects only.
pub(super) fn get<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(value, |value, part| value.as_object()?.get(part))
}

/// Removes the member at `path` wherever it is found; absent paths are no error.
pub(super) fn remove(value: &mut Value, path: &str) {
    for_each_parent(value, path, &mut |object, name| {
        object.remove(name);
    });
}

/// Replaces the value at `path` wherever it is found; absent paths are no error.
pub(super) fn replace(value: &mut Value, path: &str, with: &Value) {
    for_each_parent(value, path, &mut |object, name| {
        if let Some(slot) = object.get_mut(name) {
            *slot = with.clone();
        }
    });
}

/// Calls `act` with every object that holds the path's last part, and that part's name.
fn for_each_parent(
    value: &mut Value,
    path: &str,
    act: &mut dyn FnMut(&mut Map<String, Value>, &str),
) {
    match path.split_once('.') {
        None => walk_arrays(value, &mut |object| act(object, path)),
        Some((first, rest)) => walk_arrays(value, &mut |object| {
            if let Some(child) = object.get_mut(first) {
                for_each_parent(child, rest, act);
            }
        }),
    }
}

/// Calls `act` with `value` if it is an object, or with every object found by descending
/// through arrays (arrays of arrays too).
fn walk_arrays(value: &mut Value, act: &mut dyn FnMut(&mut Map<String, Value>)) {
    match value {
        Value::Object(object) => act(object),
        Value::Array(items) => items.iter_mut().for_each(|item| walk_arrays(item, act)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_need_a_name_between_every_dot() {
        let table = [
            ("order_id", true),
            ("card.number", true),
            ("a.b.c", true),
            ("", false),
            (".a", false),
            ("a.", false),
            ("a..b", false),
        ];
        for (path, ok) in table {
            assert_eq!(is_valid_path(path), ok, "{path:?}");
        }
    }

    #[test]
    fn reading_goes_through_objects_but_not_arrays() {
        let args = json!({"order_id": "1234", "card": {"number": "4111"}, "items": [{"sku": 1}],
                          "null": null});
        let table = [
            ("order_id", Some(json!("1234"))),
            ("card.number", Some(json!("4111"))),
            ("card", Some(json!({"number": "4111"}))),
            ("null", Some(Value::Null)),
            ("card.cvv", None),
            ("order_id.x", None),
            ("items.sku", None),
            ("missing", None),
        ];
        for (path, expected) in table {
            assert_eq!(get(&args, path).cloned(), expected, "{path}");
        }
    }

    #[test]
    fn removing_and_replacing_reach_into_every_array_element() {
        let args = json!({"reason": "x", "card": {"number": "4111", "exp": "12/30"},
                          "items": [{"price": 1, "sku": "a"}, [{"price": 2}], 7]});
        let table = [
            (
                "reason",
                json!({"card": {"number": "4111", "exp": "12/30"},
                              "items": [{"price": 1, "sku": "a"}, [{"price": 2}], 7]}),
            ),
            (
                "card.number",
                json!({"reason": "x", "card": {"exp": "12/30"},
                                   "items": [{"price": 1, "sku": "a"}, [{"price": 2}], 7]}),
            ),
            (
                "items.price",
                json!({"reason": "x", "card": {"number": "4111", "exp": "12/30"},
                                   "items": [{"sku": "a"}, [{}], 7]}),
            ),
            ("absent.path", args.clone()),
            ("reason.deeper", args.clone()),
        ];
        for (path, expected) in table {
            let mut removed = args.clone();
            remove(&mut removed, path);
            assert_eq!(removed, expected, "{path}");
        }

        let mut replaced = args.clone();
        replace(&mut replaced, "items.price", &json!("[redacted]"));
        assert_eq!(
            replaced["items"],
            json!([{"price": "[redacted]", "sku": "a"}, [{"price": "[redacted]"}], 7])
        );
    }
}
