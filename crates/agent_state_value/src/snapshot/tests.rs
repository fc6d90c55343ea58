//! Snapshots: their encoding, and the merge against the value merge.

use super::*;
use crate::merge::merge_patch;
use crate::patch::Patch;
use serde_json::json;

/// The value merge: the patch given as a value.
fn merge_value(prev: &Snapshot, patch: &Map<String, Value>, max: usize) -> Result<Snapshot> {
    prev.merge(&Patch::from_value(Value::Object(patch.clone())), max)
}

/// The member-wise merge: the patch as the scanner encoded it.
fn merge_scanned(prev: &Snapshot, patch: Snapshot, max: usize) -> Result<Snapshot> {
    prev.merge(&Patch::scanned(patch), max)
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object"),
    }
}

/// The member-wise merge of a scanned patch gives the value merge's bytes, including where
/// its shortcuts must not apply (a repeated member holding a null deletes it; arrays are
/// taken as given; a new member's nested nulls are dropped).
#[test]
fn merge_snapshot_equals_the_value_merge() {
    let prev = Snapshot::new(json!({
        "same": {"a": 1, "b": [1, {"x": 2, "y": 3}]},
        "with_null": {"a": 1, "n": null},
        "arr": [{"p": 1, "q": 2}],
        "s": "text",
        "gone": 1
    }));
    let patches = [
        json!({"same": {"a": 1, "b": [1, {"x": 2, "y": 3}]}, "s": "text"}),
        json!({"with_null": {"a": 1, "n": null}}),
        json!({"arr": [{"q": 2, "p": 1}]}),
        json!({"same": {"b": [1, {"x": 2, "y": 3}], "a": 1}}),
        json!({"new": {"k": null, "m": {"z": null, "w": 1}}, "gone": null, "absent": null}),
        json!({"s": "other", "same": {"a": 2}}),
        json!({"same": null, "with_null": null, "arr": null, "s": null, "gone": null,
               "$date": "2026-01-01T00:00:00Z"}),
    ];
    for patch in patches {
        let text = crate::json::to_vec(&patch);
        let expected = merge_value(&prev, &obj(patch.clone()), 1 << 20);
        let scanned = match crate::scan::scan(&text) {
            Some(scanned) => Snapshot::from_scanned(scanned),
            None => continue, // `$` names go the value way: nothing to compare
        };
        let got = merge_scanned(&prev, scanned, 1 << 20);
        match (expected, got) {
            (Ok(e), Ok(g)) => assert_eq!(g.json(), e.json(), "{patch}"),
            (e, g) => panic!("{patch}: {e:?} / {g:?}"),
        }
    }
    // A patch repeating the whole state keeps every member shared with it.
    let whole = Snapshot::from_scanned(crate::scan::scan(prev.json()).unwrap());
    let whole_value = whole.to_value();
    let next = merge_scanned(&prev, whole, 1 << 20).unwrap();
    assert_eq!(next.json(), {
        let mut v = prev.to_value();
        merge_patch(&mut v, &whole_value, 1).unwrap();
        crate::json::to_vec(&v)
    });
    assert!(Arc::ptr_eq(&prev.members()[0], &next.members()[0]));
}

#[test]
fn encoding_equals_a_full_serialization() {
    let v = json!({"a": 1, "b\"\n": {"x": [1, 2.50, "\u{1F600}"]}, "": null, "z": {}});
    let s = Snapshot::new(v.clone());
    assert_eq!(s.json(), serde_json::to_vec(&v).unwrap().as_slice());
    assert_eq!(Snapshot::new(json!({})).json(), b"{}");
}

#[test]
fn merge_equals_the_reference_merge_and_shares_untouched_members() {
    let prev = Snapshot::new(
        json!({"big": {"k": "v"}, "job": {"id": "j1", "step": 2, "note": "r"}, "s": "p"}),
    );
    let patch = json!({"job": {"step": 3, "note": null}, "s": null, "new": {"a": null, "b": 1}});
    let next = merge_value(&prev, &obj(patch.clone()), 1 << 20).unwrap();
    let mut expected = prev.to_value();
    merge_patch(&mut expected, &patch, 1).unwrap();
    assert_eq!(
        next.json(),
        serde_json::to_vec(&expected).unwrap().as_slice()
    );
    assert_eq!(
        next.json(),
        br#"{"big":{"k":"v"},"job":{"id":"j1","step":3},"new":{"b":1}}"#
    );
    assert!(Arc::ptr_eq(&prev.members()[0], &next.members()[0]));
}

#[test]
fn merge_checks_size_and_tag_shape() {
    let prev = Snapshot::new(json!({"$set": [1], "x": 1}));
    assert!(matches!(
        merge_value(&prev, &obj(json!({"x": null})), 1 << 20),
        Err(Error::Codec(_))
    ));
    assert!(matches!(
        merge_value(&prev, &obj(json!({"y": "long string"})), 20),
        Err(Error::TooLarge(_))
    ));
}

mod scanned_tests {
    use super::*;
    use crate::scan::scan;
    use serde_json::json;

    #[test]
    fn scanned_members_parse_their_values_on_demand() {
        let s = Snapshot::from_scanned(
            scan(br#" { "a" : 1E2 , "b\u0041\n" : { "c" : [ "\u00e9" ] } , "" : null } "#).unwrap(),
        );
        assert_eq!(
            s.json(),
            r#"{"a":1e+2,"bA\n":{"c":["é"]},"":null}"#.as_bytes()
        );
        assert_eq!(s.json_with_nul().last(), Some(&0));
        let names: Vec<&str> = s.members().iter().map(|m| m.name()).collect();
        assert_eq!(names, ["a", "bA\n", ""]);
        assert_eq!(s.members()[1].value(), &json!({"c": ["é"]}));
        assert_eq!(s.members()[2].value(), &Value::Null);
        let expected =
            crate::json::parse(r#"{"a":1e+2,"bA\n":{"c":["é"]},"":null}"#.as_bytes()).unwrap();
        assert_eq!(s.to_value(), expected);
        // A merge re-encodes only what it touches and keeps the others' bytes.
        let patch = json!({"bA\n": {"d": 1}});
        let next = merge_value(&s, patch.as_object().unwrap(), 1 << 20).unwrap();
        assert_eq!(
            next.json(),
            r#"{"a":1e+2,"bA\n":{"c":["é"],"d":1},"":null}"#.as_bytes()
        );
        assert!(Arc::ptr_eq(&s.members()[0], &next.members()[0]));
        assert_eq!(Snapshot::from_scanned(scan(b"{}").unwrap()).json(), b"{}");
    }
}
