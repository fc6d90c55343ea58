//! The codec's types through serde: each stores the tagged value the other languages write
//! (the bytes below are theirs, from the cross-language test's canonical state), and reads
//! back equal.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use agent_state::types::{BigInt, Bytes, Date, Map, RegExp, Set, TypedArray};
use agent_state::{Error, OpenOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use test_support::{each_backend, open, TempDir};
use time::OffsetDateTime;

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Everything {
    big: BigInt<i128>,
    #[serde(with = "agent_state::types::bytes")]
    blob: Vec<u8>,
    buffer: Bytes,
    #[serde(with = "agent_state::types::date")]
    millis: OffsetDateTime,
    micros: Date,
    nanos: Date,
    map: Map<Vec<(Value, String)>>,
    ordered: Map<BTreeMap<u32, String>>,
    set: Set<BTreeSet<String>>,
    hashed: Set<HashSet<u8>>,
    re: RegExp,
    floats: TypedArray,
    view: TypedArray,
}

fn everything() -> Everything {
    let at = |nanos: i128| OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap();
    Everything {
        big: BigInt(-(1i128 << 100)),
        blob: vec![0, 1, 2, 127, 128, 255],
        buffer: Bytes(Vec::new()),
        millis: at(1_796_008_004_123_000_000),
        micros: Date(at(1_796_008_004_123_456_000)),
        nanos: Date(at(1_796_008_004_123_456_789)),
        map: Map(vec![
            (json!({"id": 1}), "first".into()),
            (json!([1, 2]), "pair".into()),
            (Value::Null, "nothing".into()),
        ]),
        ordered: Map(BTreeMap::from([(2, "b".into()), (1, "a".into())])),
        set: Set(BTreeSet::from(["b".into(), "a".into()])),
        hashed: Set(HashSet::from([7])),
        re: RegExp::new(r"\p{L}+", "u"),
        floats: TypedArray::of(&[1.5f32, -0.25, f32::INFINITY]),
        view: TypedArray::new("DataView", vec![1, 2, 3, 4]),
    }
}

#[each_backend]
fn each_type_stores_the_tagged_value_every_language_writes() {
    let dir = TempDir::new("types_bytes");
    let agent = open(&dir.store("a"), &OpenOptions::default()).unwrap();
    agent.replace(&everything()).unwrap();
    let stored = agent.get_state().unwrap();
    let want = concat!(
        r#"{"big":{"$bigint":"-1267650600228229401496703205376"},"#,
        r#""blob":{"$arraybuffer":"AAECf4D/"},"buffer":{"$arraybuffer":""},"#,
        r#""millis":{"$date":"2026-11-30T03:06:44.123Z"},"#,
        r#""micros":{"$date":"2026-11-30T03:06:44.123456Z"},"#,
        r#""nanos":{"$date":"2026-11-30T03:06:44.123456789Z"},"#,
        r#""map":{"$map":[[{"id":1},"first"],[[1,2],"pair"],[null,"nothing"]]},"#,
        r#""ordered":{"$map":[[1,"a"],[2,"b"]]},"set":{"$set":["a","b"]},"hashed":{"$set":[7]},"#,
        r#""re":{"$regexp":{"source":"\\p{L}+","flags":"u"}},"#,
        r#""floats":{"$typedarray":{"type":"Float32Array","base64":"AADAPwAAgL4AAIB/"}},"#,
        r#""view":{"$typedarray":{"type":"DataView","base64":"AQIDBA=="}}}"#
    );
    assert_eq!(std::str::from_utf8(stored.json()).unwrap(), want);
    assert_eq!(agent.get::<Everything>().unwrap(), everything());
    let floats = agent.get::<Everything>().unwrap().floats;
    assert_eq!(
        floats.elements::<f32>(),
        Some(vec![1.5, -0.25, f32::INFINITY])
    );
    assert_eq!(floats.elements::<f64>(), None, "not a Float64Array");
}

#[each_backend]
fn what_the_codec_refuses_is_refused_with_nothing_written() {
    let dir = TempDir::new("types_refused");
    let agent = open(&dir.store("a"), &OpenOptions::default()).unwrap();
    // A set holding one value twice (a Vec can), a year the codec does not store, bad flags.
    let twice = json!({"s": Set(vec![1, 1])});
    assert!(matches!(agent.set(&twice), Err(Error::Codec(_))));
    let year = OffsetDateTime::from_unix_timestamp(-70_000_000_000).unwrap();
    #[derive(Serialize)]
    struct When {
        d: Date,
    }
    let e = agent.set(&When { d: Date(year) }).unwrap_err();
    assert!(
        matches!(&e, Error::Serde(m) if m.contains("0000 to 9999")),
        "{e:?}"
    );
    // A float JSON cannot hold (serde_json alone would write null).
    #[derive(Serialize)]
    struct Ratio {
        r: Option<f64>,
        list: Vec<f32>,
    }
    for bad in [
        Ratio {
            r: Some(f64::NAN),
            list: vec![],
        },
        Ratio {
            r: None,
            list: vec![1.0, f32::INFINITY],
        },
    ] {
        for e in [
            agent.set(&bad).unwrap_err(),
            agent.replace(&bad).unwrap_err(),
        ] {
            assert!(
                matches!(&e, Error::Codec(m) if m.contains("JSON cannot hold")),
                "{e:?}"
            );
        }
    }
    let e = agent_state::Agent::builder()
        .initial_state(&Ratio {
            r: Some(f64::NEG_INFINITY),
            list: vec![],
        })
        .open(":memory:")
        .unwrap_err();
    assert!(matches!(e, Error::Codec(_)), "{e:?}");
    let flags = json!({"r": RegExp::new("x", "gg")});
    assert!(matches!(agent.set(&flags), Err(Error::Codec(_))));
    assert_eq!(agent.get_state_versioned().unwrap().version, 0);
}

#[test]
fn big_integers_read_tagged_or_plain_and_refuse_what_does_not_fit() {
    #[derive(Deserialize)]
    struct N {
        n: BigInt<u8>,
    }
    let n: N = serde_json::from_str(r#"{"n":{"$bigint":"255"}}"#).unwrap();
    assert_eq!(n.n.0, 255);
    let n: N = serde_json::from_str(r#"{"n":7}"#).unwrap();
    assert_eq!(n.n.0, 7);
    for bad in [r#"{"n":{"$bigint":"256"}}"#, r#"{"n":1.5}"#, r#"{"n":"7"}"#] {
        assert!(serde_json::from_str::<N>(bad).is_err(), "{bad}");
    }
}

#[test]
fn bytes_are_held_by_vec_or_by_the_bytes_crate() {
    let shared = Bytes(bytes::Bytes::from_static(b"\x00\xff"));
    let text = serde_json::to_string(&shared).unwrap();
    assert_eq!(text, r#"{"$arraybuffer":"AP8="}"#);
    let back: Bytes<bytes::Bytes> = serde_json::from_str(&text).unwrap();
    assert_eq!(back, shared);
    let owned: Bytes = serde_json::from_str(&text).unwrap();
    assert_eq!(owned.0, vec![0, 255]);
    assert!(serde_json::from_str::<Bytes>(r#"{"$arraybuffer":"not base64!"}"#).is_err());
}

#[test]
fn dates_read_every_fraction_and_convert() {
    let d: Date = serde_json::from_str(r#"{"$date":"1969-07-20T20:17:40.000Z"}"#).unwrap();
    assert_eq!(d.unix_millis(), -14_182_940_000);
    let system: std::time::SystemTime = d.into();
    assert_eq!(Date::from(system), d);
    assert!(serde_json::from_str::<Date>(r#"{"$date":"yesterday"}"#).is_err());
    assert!(serde_json::from_str::<Date>(r#""1970-01-01T00:00:00.000Z""#).is_err());
}

#[cfg(feature = "chrono")]
#[test]
fn chrono_instants_convert_to_the_nanosecond() {
    let c = chrono::DateTime::from_timestamp(1_796_008_004, 123_456_789).unwrap();
    let d = Date::from(c);
    assert_eq!(d.to_codec_text().unwrap(), "2026-11-30T03:06:44.123456789Z");
    assert_eq!(chrono::DateTime::<chrono::Utc>::from(d), c);
}

#[cfg(feature = "regex")]
#[test]
fn regular_expressions_compile_with_their_flags() {
    let r = RegExp::new("^hi", "gi").to_regex().unwrap();
    assert!(r.is_match("Hi there"));
    assert!(matches!(
        RegExp::new("(?<=a)b", "").to_regex(),
        Err(Error::InvalidArgument(_))
    ));
}
