//! The Rust side of the cross-language test (tests/cross-language/README.md): the values of
//! `values.js`'s `canonical()` in Rust types (structs whose fields are in byte order of their
//! names, as every language writes them, and the codec's types of `agent_state::types`).
//!
//! Run by `cargo test` on its own: the canonical state round-trips through a store in its
//! Rust types. Run by tests/cross-language/run.sh with `AGENT_STATE_CROSS` set:
//!
//! - `write STORE OUT`: writes the agent `rust` (the canonical state) and OUT/rust.json
//!   (serde_json's text of it, which must be the bytes stored);
//! - `read STORE`: reads the agents the other languages wrote (`node`, `python`, `go` and each
//!   one's own extras) into Rust types and checks each value.

use std::collections::BTreeSet;

use agent_state::types::{BigInt, Bytes, Date, Map, RegExp, Set, TypedArray};
use agent_state::Agent;
use num_bigint::BigInt as Big;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use time::macros::datetime;
use time::OffsetDateTime;

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Canonical {
    arrays: Vec<Value>,
    bigints: Bigints,
    bytes: BytesMembers,
    dates: Dates,
    maps: Maps,
    nested: Nested,
    numbers: Numbers,
    regexps: Regexps,
    sets: Sets,
    strings: Strings,
    #[serde(rename = "tagLike")]
    tag_like: TagLike,
    typed: Typed,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Bigints {
    beyond_safe: BigInt<i64>,
    huge: BigInt<Big>,
    neg_huge: BigInt<Big>,
    small: BigInt<u8>,
    zero: BigInt<i128>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct BytesMembers {
    buffer: Bytes,
    #[serde(with = "agent_state::types::bytes")]
    empty: Vec<u8>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Dates {
    epoch: Date,
    far: Date,
    #[serde(with = "agent_state::types::date")]
    millis: OffsetDateTime,
    old: Date,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Maps {
    empty: Map<Vec<(String, Value)>>,
    number_keys: Map<Vec<(Value, String)>>,
    object_keys: Map<Vec<(Value, String)>>,
    string_keys: Map<Vec<(String, Value)>>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Nested {
    deep: Deep,
    list: (KeyedSets, ReWhen),
}

/// `new Map([["k", new Set([1n])]])`.
type KeyedSets = Map<Vec<(String, Set<Vec<BigInt<u8>>>)>>;

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Deep {
    deeper: Deeper,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Deeper {
    set: Set<(Date, TypedArray)>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct ReWhen {
    re: RegExp,
    when: Date,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Numbers {
    float: f64,
    int: i32,
    max_safe: u64,
    negative: i8,
    small: f64,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Regexps {
    dot_all: RegExp,
    global: RegExp,
    multiline: RegExp,
    plain: RegExp,
    sticky: RegExp,
    unicode: RegExp,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Sets {
    empty: Set<BTreeSet<u8>>,
    mixed: Set<Vec<Value>>,
    numbers: Set<Vec<u8>>,
    strings: Set<Vec<String>>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Strings {
    ascii: String,
    escapes: String,
    unicode: String,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct TagLike {
    #[serde(rename = "$date")]
    date: String,
    note: String,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[allow(non_snake_case)] // the members are JavaScript's type names
struct Typed {
    BigInt64Array: TypedArray,
    BigUint64Array: TypedArray,
    DataView: TypedArray,
    Float32Array: TypedArray,
    Float64Array: TypedArray,
    Int16Array: TypedArray,
    Int32Array: TypedArray,
    Int8Array: TypedArray,
    Uint16Array: TypedArray,
    Uint32Array: TypedArray,
    Uint8Array: TypedArray,
    Uint8ClampedArray: TypedArray,
    empty: TypedArray,
}

fn date(t: OffsetDateTime) -> Date {
    Date(t)
}

fn re(source: &str, flags: &str) -> RegExp {
    RegExp::new(source, flags)
}

/// values.js's canonical(), in Rust's types.
fn canonical() -> Canonical {
    let pow = |base: u32, exp: u32| Big::from(base).pow(exp);
    Canonical {
        arrays: vec![
            json!(1),
            json!("two"),
            Value::Null,
            json!(true),
            json!([3, [4]]),
            json!({"five": 5}),
        ],
        bigints: Bigints {
            beyond_safe: BigInt((1 << 53) + 1),
            huge: BigInt(pow(2, 200)),
            neg_huge: BigInt(-pow(3, 100)),
            small: BigInt(7),
            zero: BigInt(0),
        },
        bytes: BytesMembers {
            buffer: Bytes(vec![0, 1, 2, 127, 128, 255]),
            empty: Vec::new(),
        },
        dates: Dates {
            epoch: date(datetime!(1970-01-01 0:00 UTC)),
            far: date(datetime!(9999-12-31 23:59:59.999 UTC)),
            millis: datetime!(2026-11-30 3:06:44.123 UTC),
            old: date(datetime!(1969-07-20 20:17:40 UTC)),
        },
        maps: Maps {
            empty: Map(Vec::new()),
            number_keys: Map(vec![
                (json!(1), "one".into()),
                (json!(2.5), "two and a half".into()),
                (json!(-3), "minus three".into()),
            ]),
            object_keys: Map(vec![
                (json!({"id": 1}), "first".into()),
                (json!([1, 2]), "pair".into()),
                (Value::Null, "nothing".into()),
                (json!(true), "yes".into()),
            ]),
            string_keys: Map(vec![
                ("a".into(), json!(1)),
                ("b".into(), json!({"c": [1, 2]})),
            ]),
        },
        nested: Nested {
            deep: Deep {
                deeper: Deeper {
                    set: Set((
                        date(datetime!(2026-01-02 3:04:05.006 UTC)),
                        TypedArray::of(&[1u8, 2]),
                    )),
                },
            },
            list: (
                Map(vec![("k".into(), Set(vec![BigInt(1)]))]),
                ReWhen {
                    re: re("x", "g"),
                    when: date(datetime!(1970-01-01 0:00 UTC)),
                },
            ),
        },
        numbers: Numbers {
            float: 1.5,
            int: 42,
            max_safe: (1 << 53) - 1,
            negative: -7,
            small: 0.001,
        },
        regexps: Regexps {
            dot_all: re("a.b", "s"),
            global: re("a+b", "gi"),
            multiline: re("^line$", "m"),
            plain: re("^x$", ""),
            sticky: re(r"\d+", "y"),
            unicode: re(r"\p{L}+", "u"),
        },
        sets: Sets {
            empty: Set(BTreeSet::new()),
            mixed: Set(vec![
                json!(1),
                json!("1"),
                json!([1]),
                json!({"a": 1}),
                Value::Null,
                json!({"$bigint": "2"}),
            ]),
            numbers: Set(vec![3, 1, 2]),
            strings: Set(vec!["b".into(), "a".into()]),
        },
        strings: Strings {
            ascii: "hello".into(),
            escapes: "quote \" backslash \\ newline \n tab \t".into(),
            unicode: "h\u{e9}llo w\u{f6}rld \u{2713} \u{1F600}".into(),
        },
        tag_like: TagLike {
            date: "not a date".into(),
            note: "two members: plain data, not a tagged value".into(),
        },
        typed: Typed {
            BigInt64Array: TypedArray::of(&[i64::MIN, i64::MAX]),
            BigUint64Array: TypedArray::of(&[0, u64::MAX]),
            DataView: TypedArray::new("DataView", vec![1, 2, 3, 4]),
            Float32Array: TypedArray::of(&[1.5f32, -0.25, f32::INFINITY]),
            Float64Array: TypedArray::of(&[0.1, -1e300, -0.0, f64::NEG_INFINITY]),
            Int16Array: TypedArray::of(&[i16::MIN, 0, i16::MAX]),
            Int32Array: TypedArray::of(&[i32::MIN, i32::MAX]),
            Int8Array: TypedArray::of(&[-128i8, -1, 0, 127]),
            Uint16Array: TypedArray::of(&[0, u16::MAX]),
            Uint32Array: TypedArray::of(&[0, u32::MAX]),
            Uint8Array: TypedArray::of(&[0u8, 1, 255]),
            Uint8ClampedArray: TypedArray::new("Uint8ClampedArray", vec![0, 128, 255]),
            empty: TypedArray::of::<f64>(&[]),
        },
    }
}

/// JavaScript's own rules, as Node wrote them (the agent "node-rules").
#[derive(Deserialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NodeRules {
    beyond_safe: u64,
    buffer: TypedArray,
    neg_zero: i64,
    view: TypedArray,
    window: TypedArray,
}

/// The agents "python-extra" and "go-extra".
#[derive(Deserialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Extra {
    float16: TypedArray,
    micros: Option<Date>,
    nanos: Option<Date>,
    tuple_list: Option<Vec<u8>>,
    #[serde(rename = "struct")]
    go_struct: Option<GoStruct>,
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
struct GoStruct {
    at: Date,
    name: String,
    tags: Vec<String>,
}

fn open(store: &str, id: &str, read_only: bool) -> Agent {
    Agent::builder()
        .agent_id(id)
        .read_only(read_only)
        .open(store)
        .unwrap_or_else(|e| panic!("agent {id} of {store}: {e}"))
}

/// One check of the read step: ok, or what differs.
fn check(id: &str, problems: &mut Vec<String>, ok: bool, what: impl FnOnce() -> String) {
    if ok {
        println!("ok   rust read {id}");
    } else {
        problems.push(format!("rust read {id}: {}", what()));
    }
}

fn read_step(store: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for id in ["node", "python", "go"] {
        let got = open(store, id, true).get::<Canonical>();
        check(
            id,
            &mut problems,
            matches!(&got, Ok(c) if *c == canonical()),
            || format!("{got:#?}"),
        );
    }
    let rules = open(store, "node-rules", true).get::<NodeRules>();
    let want = NodeRules {
        beyond_safe: 1_152_921_504_606_847_000,
        buffer: TypedArray::of(&[1u8, 2, 3]),
        neg_zero: 0,
        view: TypedArray::of(&[1u16, 2]),
        window: TypedArray::new("DataView", vec![1, 0, 2, 0]),
    };
    check(
        "node-rules",
        &mut problems,
        rules.as_ref().ok() == Some(&want),
        || format!("{rules:?}"),
    );
    let half = TypedArray::new("Float16Array", vec![0x00, 0x3C, 0x00, 0xC0]);
    let python = open(store, "python-extra", true).get::<Extra>();
    let want = Extra {
        float16: half.clone(),
        micros: Some(date(datetime!(2026-11-30 3:06:44.123456 UTC))),
        nanos: None,
        tuple_list: Some(vec![1, 2, 3]),
        go_struct: None,
    };
    check(
        "python-extra",
        &mut problems,
        python.as_ref().ok() == Some(&want),
        || format!("{python:?}"),
    );
    let go = open(store, "go-extra", true).get::<Extra>();
    let want = Extra {
        float16: half,
        micros: None,
        nanos: Some(date(datetime!(2026-11-30 3:06:44.123456789 UTC))),
        tuple_list: None,
        go_struct: Some(GoStruct {
            at: date(datetime!(2026-11-30 0:00 UTC)),
            name: "ada".into(),
            tags: vec!["x".into(), "y".into()],
        }),
    };
    check(
        "go-extra",
        &mut problems,
        go.as_ref().ok() == Some(&want),
        || format!("{go:?}"),
    );
    problems
}

#[test]
fn the_canonical_state_round_trips_in_rust_types() {
    let agent = Agent::builder().open(":memory:").unwrap();
    agent.replace(&canonical()).unwrap();
    assert_eq!(agent.get::<Canonical>().unwrap(), canonical());
    // serde's text is what the store holds, byte for byte.
    let text = serde_json::to_vec(&canonical()).unwrap();
    assert_eq!(
        std::str::from_utf8(agent.get_state().unwrap().json()).unwrap(),
        std::str::from_utf8(&text).unwrap()
    );
}

/// The step tests/cross-language/run.sh asks for in `AGENT_STATE_CROSS` (nothing without it).
#[test]
fn cross_language_step() {
    let Ok(step) = std::env::var("AGENT_STATE_CROSS") else {
        return;
    };
    let args: Vec<&str> = step.split('\n').collect();
    match args.as_slice() {
        ["write", store, out] => {
            open(store, "rust", false).replace(&canonical()).unwrap();
            let text = serde_json::to_vec(&canonical()).unwrap();
            std::fs::write(std::path::Path::new(out).join("rust.json"), text).unwrap();
            println!("rust: wrote the agent rust");
        }
        ["read", store] => {
            let problems = read_step(store);
            assert!(problems.is_empty(), "FAIL {}", problems.join("\nFAIL "));
        }
        _ => panic!(
            "AGENT_STATE_CROSS must be \"write\\nSTORE\\nOUT\" or \"read\\nSTORE\", got {step:?}"
        ),
    }
}
