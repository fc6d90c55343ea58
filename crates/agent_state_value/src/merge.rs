//! RFC 7396 JSON Merge Patch, with the codec's tagged values treated as leaves.
//!
//! A patch object merges into a target object member by member: `null` deletes, a nested plain
//! object merges recursively, anything else (arrays, scalars, tagged values) replaces the member
//! whole. Existing members keep their place; new ones are appended in patch order.

use serde_json::{Map, Value};

use crate::codec;
use crate::error::Result;

/// Merges `patch` into `target` in place; `depth` is the nesting level of `target` (1 for a
/// state). Both inputs must already be codec-valid. The only way the result can be invalid is an
/// object that, after deletions and additions, is left shaped like a tagged value
/// (`{"$set": 5}`); such objects are validated here and a malformed one is a codec error, in which
/// case `target` is left partly merged and must be discarded by the caller.
pub fn merge_patch(target: &mut Value, patch: &Value, depth: usize) -> Result<()> {
    let Value::Object(members) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    if codec::tag_of(members).is_some() {
        *target = patch.clone();
        return Ok(());
    }
    if !codec::is_plain_object(target) {
        *target = Value::Object(Map::new());
    }
    let Value::Object(into) = target else {
        unreachable!("target was just made an object")
    };
    for (name, value) in members {
        if value.is_null() {
            // shift_remove keeps the order of the remaining members.
            into.shift_remove(name);
        } else if let Some(slot) = into.get_mut(name) {
            merge_patch(slot, value, depth + 1)?;
        } else {
            let mut slot = Value::Null;
            merge_patch(&mut slot, value, depth + 1)?;
            into.insert(name.clone(), slot);
        }
    }
    codec::validate_if_tagged(into, depth)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 7396 merge where both documents may be any JSON value; the state API wraps it by
    /// requiring objects, but Appendix A tests the full function.
    fn rfc(target: Value, patch: Value) -> Value {
        let mut t = target;
        merge_patch(&mut t, &patch, 1).unwrap();
        t
    }

    #[test]
    fn rfc7396_appendix_a() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, expected) in cases {
            let got = rfc(target.clone(), patch.clone());
            assert_eq!(got, expected, "merge({target}, {patch})");
        }
    }

    #[test]
    fn reference_page_example() {
        let stored = json!({"status":"processing","job":{"id":"j1","step":2,"note":"retrying"}});
        let got = rfc(stored, json!({"job":{"step":3,"note":null}}));
        assert_eq!(
            crate::json::to_vec(&got),
            br#"{"status":"processing","job":{"id":"j1","step":3}}"#
        );
    }

    #[test]
    fn order_is_kept_and_new_members_are_appended() {
        let got = rfc(
            json!({"z":1,"a":2,"m":3}),
            json!({"a":null,"q":4,"z":5,"b":6}),
        );
        assert_eq!(crate::json::to_vec(&got), br#"{"z":5,"m":3,"q":4,"b":6}"#);
    }

    #[test]
    fn tagged_values_are_leaves() {
        let got = rfc(
            json!({"d":{"$date":"2026-01-01T00:00:00.000Z"}}),
            json!({"d":{"x":1}}),
        );
        assert_eq!(got, json!({"d":{"x":1}}));
        let got = rfc(json!({"s":{"a":1,"b":2}}), json!({"s":{"$set":[1]}}));
        assert_eq!(got, json!({"s":{"$set":[1]}}));
    }

    #[test]
    fn merge_that_leaves_a_malformed_tag_shape_fails() {
        let mut t = json!({"x":{"$set":5,"y":1}});
        assert!(merge_patch(&mut t, &json!({"x":{"y":null}}), 1).is_err());
        let mut t = json!({"x":{"$bigint":"12","y":1}});
        merge_patch(&mut t, &json!({"x":{"y":null}}), 1).unwrap();
        assert_eq!(t, json!({"x":{"$bigint":"12"}}));
    }
}
