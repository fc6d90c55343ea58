//! The tree merge against the value merge ([`merge_patch`] on the whole state, then a compact
//! encoding) on generated nested states and patches, generation after generation.

use super::*;
use crate::error::Error;
use crate::patch::Patch;
use crate::snapshot::{too_large, Snapshot};
use serde_json::json;

/// A small deterministic pseudo-random generator (xorshift64*): the same cases every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Member names: few, so that patches meet the states' members; escaped and non-ASCII ones,
/// and the codec's tags (an object of one of them alone is a tagged value).
const NAMES: [&str; 14] = [
    "a",
    "b",
    "msgs",
    "é",
    "q\"uote",
    "line\nbreak",
    "",
    "x/~1",
    "\u{1F600}",
    "back\\slash",
    "$date",
    "$bigint",
    "$set",
    "$x",
];

const STRINGS: [&str; 6] = ["", "s", "null", "tab\there", "\u{7f}\u{1}é", "\"q\""];

/// Well-formed tagged values (leaves to a merge).
fn tagged(rng: &mut Rng) -> Value {
    match rng.below(5) {
        0 => json!({"$date": "2026-01-01T00:00:00.000Z"}),
        1 => json!({"$bigint": "-12"}),
        2 => json!({"$set": [1, "a", null]}),
        3 => json!({"$map": [[1, {"k": null}]]}),
        _ => json!({"$regexp": {"source": "a+", "flags": "g"}}),
    }
}

fn scalar(rng: &mut Rng) -> Value {
    match rng.below(6) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => json!(rng.below(1000) as i64 - 500),
        3 => serde_json::from_str("1.50").unwrap(),
        4 => serde_json::from_str("-2e+30").unwrap(),
        _ => Value::String(STRINGS[rng.below(STRINGS.len())].to_string()),
    }
}

/// A value `depth` levels down (objects are likely, so merges descend).
fn value(rng: &mut Rng, depth: usize) -> Value {
    if depth > 6 {
        return scalar(rng);
    }
    match rng.below(12) {
        0..=2 => scalar(rng),
        3 => Value::Array((0..rng.below(4)).map(|_| value(rng, depth + 1)).collect()),
        4 => tagged(rng),
        _ => object(rng, depth),
    }
}

fn object(rng: &mut Rng, depth: usize) -> Value {
    let mut map = Map::new();
    for _ in 0..rng.below(5) {
        let name = NAMES[rng.below(NAMES.len())];
        map.insert(name.to_string(), value(rng, depth + 1));
    }
    Value::Object(map)
}

/// A plain object the codec accepts, of `make`'s (tried until one is).
fn plain(rng: &mut Rng, make: fn(&mut Rng, usize) -> Value) -> Value {
    loop {
        let v = make(rng, 1);
        if codec::is_plain_object(&v) && codec::validate(&v, 1).is_ok() {
            return v;
        }
    }
}

/// The value merge, as `Snapshot::merge` reports it: each top-level member merged by
/// [`merge_patch`], then the state's own checks (not shaped like a tagged value, the size).
fn reference(prev: &Value, patch: &Value, max: usize) -> Result<Value> {
    let mut next = prev.as_object().unwrap().clone();
    for (name, value) in patch.as_object().unwrap() {
        if value.is_null() {
            next.shift_remove(name);
            continue;
        }
        let mut slot = next.get(name).cloned().unwrap_or(Value::Null);
        merge_patch(&mut slot, value, 2)?;
        next.insert(name.clone(), slot);
    }
    if let Some(tag) = codec::tag_of(&next) {
        return Err(Error::Codec(format!(
            "after the merge the state would be the tagged value {{{tag:?}: ...}}, not a plain object"
        )));
    }
    let next = Value::Object(next);
    let size = crate::json::to_vec(&next).len();
    if size > max {
        return Err(too_large(size, max, "state"));
    }
    Ok(next)
}

/// Everything a snapshot says of itself agrees with `expected`.
#[track_caller]
fn check(got: &Snapshot, expected: &Value, what: &str) {
    let bytes = crate::json::to_vec(expected);
    assert_eq!(
        String::from_utf8_lossy(got.json()),
        String::from_utf8_lossy(&bytes),
        "{what}"
    );
    assert_eq!(got.len(), bytes.len(), "{what}");
    assert_eq!(got.json_with_nul().last(), Some(&0), "{what}");
    assert_eq!(&got.to_value(), expected, "{what}");
    let map = expected.as_object().unwrap();
    assert_eq!(got.members().len(), map.len(), "{what}");
    for (m, (name, value)) in got.members().iter().zip(map) {
        assert_eq!(m.name(), name, "{what}");
        assert_eq!(m.value(), value, "{what}");
    }
}

/// The patch both ways `Snapshot::merge` takes one: as a value, and as the scanner encodes it
/// (when it does: not with `$` names).
fn patches(patch: &Value) -> Vec<Patch> {
    let mut out = vec![Patch::from_value(patch.clone())];
    if let Some(scanned) = crate::scan::scan(&crate::json::to_vec(patch)) {
        out.push(Patch::scanned(Snapshot::from_scanned(scanned)));
    }
    out
}

#[test]
fn the_tree_merge_is_the_value_merge_generation_after_generation() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut merged, mut refused) = (0, 0);
    for case in 0..400 {
        let start = plain(&mut rng, object);
        // A state built from a value, or read back as text (scanned where it can be).
        let mut state = if case % 2 == 0 {
            Snapshot::new(start.clone())
        } else {
            crate::accept::stored(&crate::json::to_vec(&start)).unwrap()
        };
        let mut expected = start;
        for generation in 0..10 {
            let patch = plain(&mut rng, object);
            let max = if rng.below(10) == 0 {
                expected.to_string().len()
            } else {
                usize::MAX
            };
            let want = reference(&expected, &patch, max);
            let mut next_state = None;
            for p in patches(&patch) {
                let what = format!("case {case}, generation {generation}: {expected} + {patch}");
                let got = state.merge(&p, max);
                match (&want, got) {
                    (Ok(want), Ok(got)) => {
                        check(&got, want, &what);
                        assert_eq!(
                            got.same_encoding(&state),
                            got.json() == state.json(),
                            "{what}"
                        );
                        assert!(got.same_encoding(&got), "{what}");
                        next_state = Some(got);
                    }
                    (Err(want), Err(got)) => assert_eq!(&got, want, "{what}"),
                    (want, got) => panic!("{what}: expected {want:?}, got {got:?}"),
                }
                // Unchanged by the merge, whatever its outcome.
                check(&state, &expected, "the previous state");
            }
            match want {
                Ok(want) => {
                    merged += 1;
                    expected = want;
                    state = next_state.unwrap();
                }
                Err(_) => refused += 1,
            }
        }
    }
    // The cases reach both outcomes, often.
    assert!(
        merged > 2000 && refused > 50,
        "{merged} merged, {refused} refused"
    );
}

/// A state as users keep it: a status, and messages one level down.
fn conversation(messages: usize) -> Snapshot {
    let mut text = String::from(r#"{"status":"idle","msgs":{"#);
    for i in 0..messages {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!(r#""m{i}":{{"id":{i},"text":"hello \"{i}\""}}"#));
    }
    text.push_str("}}");
    crate::accept::stored(text.as_bytes()).unwrap()
}

fn merge(state: &Snapshot, patch: &str) -> Snapshot {
    let patch = crate::accept::patch(patch.as_bytes(), usize::MAX).unwrap();
    state.merge(&patch, usize::MAX).unwrap()
}

/// The members of the object member `name` of `state`, as far as they are at hand.
fn inner(state: &Snapshot, name: &str) -> Vec<Arc<Member>> {
    let member = state.members().iter().find(|m| m.name() == name).unwrap();
    member
        .node
        .members_at_hand()
        .unwrap()
        .iter()
        .cloned()
        .collect()
}

#[test]
fn a_nested_write_shares_what_it_does_not_touch_across_generations() {
    let first = conversation(1000);
    let second = merge(&first, r#"{"status":"busy","msgs":{"new1":{"id":-1}}}"#);
    let third = merge(&second, r#"{"msgs":{"m3":{"text":null},"new2":{"id":-2}}}"#);
    // What a write did not touch is the first state's, by pointer, two writes later.
    let (a, c) = (inner(&first, "msgs"), inner(&third, "msgs"));
    assert_eq!(c.len(), 1002);
    assert!(Arc::ptr_eq(&a[0], &c[0]) && Arc::ptr_eq(&a[999], &c[999]));
    assert!(!Arc::ptr_eq(&a[3], &c[3]));
    assert!(Arc::ptr_eq(&inner(&second, "msgs")[1000], &c[1000]));
    let mut expected = first.to_value();
    for patch in [
        json!({"status":"busy","msgs":{"new1":{"id":-1}}}),
        json!({"msgs":{"m3":{"text":null},"new2":{"id":-2}}}),
    ] {
        merge_patch(&mut expected, &patch, 1).unwrap();
    }
    check(&third, &expected, "third");
    // The built object keeps no encoding: only its length.
    assert!(third.members()[1].node.leaf_bytes().is_none());
}

#[test]
fn a_write_that_changes_nothing_keeps_the_state_shared() {
    let first = conversation(100);
    let second = merge(&first, r#"{"msgs":{"new":{"id":1}}}"#);
    for patch in [
        r#"{"msgs":{"m5":{"id":5}}}"#,
        r#"{"msgs":{"m5":{"gone":null},"absent":null}}"#,
        r#"{"msgs":{}}"#,
        r#"{"msgs":{"new":{"id":1}},"status":"idle"}"#,
    ] {
        // The last one repeats what only the second state holds.
        let states = if patch.contains("new") {
            vec![&second]
        } else {
            vec![&first, &second]
        };
        for state in states {
            let next = merge(state, patch);
            assert!(next.same_encoding(state), "{patch}");
            for (a, b) in next.members().iter().zip(state.members()) {
                assert!(Arc::ptr_eq(a, b), "{patch}");
            }
        }
    }
    // The same bytes by another way: still the same encoding, found without writing it out.
    let again = merge(&second, r#"{"msgs":{"m5":{"id":6}}}"#);
    let back = merge(&again, r#"{"msgs":{"m5":{"id":5}}}"#);
    assert!(back.same_encoding(&second) && second.same_encoding(&back));
    assert_eq!(back.json(), second.json());
    assert!(!again.same_encoding(&second));
}

#[test]
fn objects_left_shaped_like_tagged_values_at_depth() {
    let state = crate::accept::stored(br#"{"a":{"b":{"x":1}}}"#).unwrap();
    let state = merge(&state, r#"{"a":{"b":{"y":2}}}"#);
    // Left as a malformed tagged value, two levels down: refused, the state unchanged.
    let bad = Patch::from_value(json!({"a":{"b":{"x":null,"y":null,"$set":5}}}));
    assert!(matches!(
        state.merge(&bad, usize::MAX),
        Err(Error::Codec(_))
    ));
    assert_eq!(state.json(), br#"{"a":{"b":{"x":1,"y":2}}}"#);
    // A well-formed one is a tagged value from then on: a leaf, replaced by the next merge.
    let good = Patch::from_value(json!({"a":{"b":{"x":null,"y":null,"$bigint":"7"}}}));
    let next = state.merge(&good, usize::MAX).unwrap();
    assert_eq!(next.json(), br#"{"a":{"b":{"$bigint":"7"}}}"#);
    let after = merge(&next, r#"{"a":{"b":{"z":1}}}"#);
    assert_eq!(after.json(), br#"{"a":{"b":{"z":1}}}"#);
}

/// A place in `doc` for an operation: an existing one most often (by a random walk), or one
/// past it (a new member, an array's end, an index out of range).
fn place(rng: &mut Rng, doc: &Value) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut at = doc;
    loop {
        let stop = rng.below(3) == 0 && !tokens.is_empty();
        match at {
            Value::Object(map) if !map.is_empty() && !stop => {
                let (name, next) = map.iter().nth(rng.below(map.len())).unwrap();
                tokens.push(name.clone());
                at = next;
            }
            Value::Array(items) if !items.is_empty() && !stop => {
                let i = rng.below(items.len());
                tokens.push(i.to_string());
                at = &items[i];
            }
            _ => break,
        }
    }
    if tokens.is_empty() || rng.below(4) == 0 {
        tokens.push(match (at, rng.below(3)) {
            (Value::Array(items), 0) => items.len().to_string(),
            (Value::Array(items), 1) => (items.len() + 1).to_string(),
            (Value::Array(_), _) => "-".to_string(),
            _ => NAMES[rng.below(NAMES.len())].to_string(),
        });
    }
    tokens
}

fn pointer(tokens: &[String]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// An operation on `doc`: mostly add, remove, replace and test below the root (what the tree
/// does), now and then one it leaves to the values (move, copy, the root).
fn operation(rng: &mut Rng, doc: &Value) -> Value {
    let tokens = place(rng, doc);
    let path = if rng.below(40) == 0 {
        String::new()
    } else {
        pointer(&tokens)
    };
    let depth = tokens.len() + 1;
    match rng.below(16) {
        0..=3 | 12..=15 => json!({"op": "add", "path": path, "value": value(rng, depth)}),
        4 | 5 => json!({"op": "remove", "path": path}),
        6 | 7 => json!({"op": "replace", "path": path, "value": value(rng, depth)}),
        8 => {
            let actual = doc.pointer(&path).cloned().unwrap_or(Value::Null);
            json!({"op": "test", "path": path, "value": actual})
        }
        9 => json!({"op": "test", "path": path, "value": value(rng, depth)}),
        10 => json!({"op": "copy", "from": pointer(&place(rng, doc)), "path": path}),
        _ => json!({"op": "move", "from": pointer(&place(rng, doc)), "path": path}),
    }
}

/// The value implementation of a JSON Patch on a state, as `Snapshot::apply_operations`
/// reports it.
fn reference_operations(state: &Value, ops: &JsonPatch, max: usize) -> Result<Vec<u8>> {
    let next = ops.apply(state).map_err(Error::Patch)?;
    match &next {
        Value::Object(map) if codec::tag_of(map).is_some() => {
            return Err(Error::Codec("a tagged value".into()))
        }
        Value::Object(_) => {}
        _ => return Err(Error::InvalidArgument("not an object".into())),
    }
    codec::validate(&next, 1)?;
    let bytes = crate::json::to_vec(&next);
    if bytes.len() > max {
        return Err(too_large(bytes.len(), max, "state"));
    }
    Ok(bytes)
}

use crate::json_patch::JsonPatch;
use crate::pointer::Pointer;

#[test]
fn json_patch_on_the_tree_is_the_value_implementation() {
    let mut rng = Rng(0x51_7cc1_b727_220a);
    let (mut on_tree, mut left) = (0, 0);
    for case in 0..300 {
        let start = plain(&mut rng, object);
        let mut state = crate::accept::stored(&crate::json::to_vec(&start)).unwrap();
        let mut expected = start;
        for generation in 0..10 {
            let ops: Vec<Value> = (0..1 + rng.below(3))
                .map(|_| operation(&mut rng, &expected))
                .collect();
            // Codec-checked where each value lands, as a caller's patch is on its way in.
            let text = crate::json::to_vec(&Value::Array(ops.clone()));
            let Ok(patch) = crate::operations::accept(&text, usize::MAX) else {
                continue;
            };
            let ops = patch.operations().unwrap();
            let max = if rng.below(10) == 0 {
                expected.to_string().len()
            } else {
                usize::MAX
            };
            let want = reference_operations(&expected, ops, max);
            let what = format!(
                "case {case}, generation {generation}: {expected} + {}",
                String::from_utf8_lossy(&text)
            );
            match (state.apply_on_tree(ops, max), &want) {
                (None, _) => left += 1,
                (Some(Ok(got)), Ok(want)) => {
                    on_tree += 1;
                    assert_eq!(
                        String::from_utf8_lossy(got.json()),
                        String::from_utf8_lossy(want),
                        "{what}"
                    );
                    assert_eq!(got.len(), want.len(), "{what}");
                    assert_eq!(
                        got.same_encoding(&state),
                        got.json() == state.json(),
                        "{what}"
                    );
                }
                (Some(Err(got)), Err(want)) => assert_eq!(&got, want, "{what}"),
                (got, want) => panic!("{what}: expected {want:?}, got {got:?}"),
            }
            // Whichever way it went, the public door gives the reference's answer.
            let got = state.apply_operations(ops, max);
            match (&got, &want) {
                (Ok(got), Ok(want)) => assert_eq!(got.json(), want.as_slice(), "{what}"),
                (Err(got), Err(want)) => {
                    assert_eq!(
                        std::mem::discriminant(got),
                        std::mem::discriminant(want),
                        "{what}"
                    )
                }
                _ => panic!("{what}: expected {want:?}, got {got:?}"),
            }
            if let Ok(next) = got {
                expected = next.to_value();
                state = next;
            }
            // Reads of one place: the part's encoding, as the value's.
            for _ in 0..3 {
                let tokens = place(&mut rng, &expected);
                let p = Pointer::parse(&pointer(&tokens)).unwrap();
                let want = expected.pointer(&pointer(&tokens)).map(crate::json::to_vec);
                assert_eq!(state.path_json(&p).ok(), want, "{what}: {p}");
                if let Some(Value::Array(items)) = expected.pointer(&pointer(&tokens)) {
                    let n = rng.below(4);
                    let tail = Value::Array(items[items.len().saturating_sub(n)..].to_vec());
                    assert_eq!(state.tail_json(&p, n).unwrap(), crate::json::to_vec(&tail));
                }
            }
        }
    }
    assert!(
        on_tree > 600 && left > 300,
        "{on_tree} on the tree, {left} left to values"
    );
}

#[test]
fn an_append_to_a_long_array_shares_the_other_elements() {
    let mut text = String::from(r#"{"status":"idle","msgs":["#);
    for i in 0..1500 {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!(r#"{{"id":{i},"text":"message {i}"}}"#));
    }
    text.push_str("]}");
    let first = crate::accept::stored(text.as_bytes()).unwrap();
    let ops = |text: &str| crate::operations::accept(text.as_bytes(), usize::MAX).unwrap();
    let add = ops(r#"[{"op":"add","path":"/msgs/-","value":{"id":1500,"text":"new"}}]"#);
    let second = first
        .apply_operations(add.operations().unwrap(), usize::MAX)
        .unwrap();
    let third = second
        .apply_operations(
            ops(
                r#"[{"op":"test","path":"/msgs/3/id","value":3},{"op":"remove","path":"/msgs/3"}]"#,
            )
            .operations()
            .unwrap(),
            usize::MAX,
        )
        .unwrap();
    let items = |s: &Snapshot| -> Vec<Arc<Node>> {
        s.members()[1]
            .node
            .items_at_hand()
            .unwrap()
            .iter()
            .cloned()
            .collect()
    };
    let (a, b, c) = (items(&first), items(&second), items(&third));
    assert_eq!((a.len(), b.len(), c.len()), (1500, 1501, 1500));
    assert!(Arc::ptr_eq(&a[0], &c[0]) && Arc::ptr_eq(&a[1499], &c[1498]));
    assert!(Arc::ptr_eq(&b[1500], &c[1499]));
    assert!(second.members()[1].node.leaf_bytes().is_none());
    let mut expected = first.to_value();
    expected["msgs"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id":1500,"text":"new"}));
    expected["msgs"].as_array_mut().unwrap().remove(3);
    check(&third, &expected, "third");
    let at = |p: &str| third.path_json(&Pointer::parse(p).unwrap()).unwrap();
    assert_eq!(at("/msgs/1499"), br#"{"id":1500,"text":"new"}"#);
    assert_eq!(
        third
            .tail_json(&Pointer::parse("/msgs").unwrap(), 1)
            .unwrap(),
        br#"[{"id":1500,"text":"new"}]"#
    );
}
