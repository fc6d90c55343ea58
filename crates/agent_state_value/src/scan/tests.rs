//! The scanner against the slow path, spelling by spelling.

use super::*;
use crate::{codec, json, snapshot::Snapshot};

/// The slow path's encoding, or `None` when it refuses.
fn reference(input: &[u8]) -> Option<Vec<u8>> {
    let v = json::parse(input).ok()?;
    if !codec::is_plain_object(&v) {
        return None;
    }
    codec::validate(&v, 1).ok()?;
    Some(Snapshot::new(v).json().to_vec())
}

/// The scanner agrees with the slow path: `Some` only when it accepts, with its bytes.
fn agree(input: &str) -> Option<Vec<u8>> {
    let got = scan(input.as_bytes()).map(|s| s.out);
    if let Some(out) = &got {
        assert_eq!(
            Some(out),
            reference(input.as_bytes()).as_ref(),
            "{input}: scanner {}",
            String::from_utf8_lossy(out)
        );
    }
    got
}

#[track_caller]
fn canonical(input: &str, expected: &str) {
    let got = agree(input).unwrap_or_else(|| panic!("{input}: refused"));
    assert_eq!(String::from_utf8(got).unwrap(), expected, "{input}");
}

#[track_caller]
fn refused(input: &str) {
    assert!(agree(input).is_none(), "{input} should be refused");
}

#[test]
fn whitespace_goes() {
    canonical(
        " {\n\t\"a\" : [ 1 , { } , [ ] , true,false ,null ] \r} \n",
        r#"{"a":[1,{},[],true,false,null]}"#,
    );
    canonical("{}", "{}");
    canonical(" { } ", "{}");
}

#[test]
fn strings_are_escaped_as_serde_json_writes_them() {
    canonical(r#"{"a":"\/\"\\\b\f\n\r\t"}"#, r#"{"a":"/\"\\\b\f\n\r\t"}"#);
    canonical(
        r#"{"a":"\u0041\u00e9\u00E9\u20ac"}"#,
        "{\"a\":\"A\u{e9}\u{e9}\u{20ac}\"}",
    );
    canonical(
        r#"{"a":"\u0000\u001F\u001f\u007f\u0008\u0009\u000A\u000c\u000D"}"#,
        "{\"a\":\"\\u0000\\u001f\\u001f\u{7f}\\b\\t\\n\\f\\r\"}",
    );
    canonical(r#"{"a":"\u0022\u005C\u005c"}"#, r#"{"a":"\"\\\\"}"#);
    canonical(
        r#"{"a":"\uD83D\uDE00\ud83d\ude00"}"#,
        "{\"a\":\"\u{1F600}\u{1F600}\"}",
    );
    canonical(
        "{\"a\":\"\u{1F600}é/\u{7f}\"}",
        "{\"a\":\"\u{1F600}é/\u{7f}\"}",
    );
    canonical(r#"{"\u0061":1,"\"":2,"":3}"#, r#"{"a":1,"\"":2,"":3}"#);
    // Long strings cross the 8-byte chunks with stops at every offset.
    for k in 0..17 {
        let s = format!(
            "{{\"{}\\n{}\":\"{}\\\"{}\"}}",
            "x".repeat(k),
            "é".repeat(k),
            "y".repeat(k),
            "z".repeat(k)
        );
        agree(&s).unwrap();
    }
}

#[test]
fn numbers_keep_their_text_but_the_exponent() {
    canonical(
        r#"{"a":[0,-0,1.0,-1.50,1E2,1e2,1e+2,1E-2,0.5e0,123456789012345678901234567890,-9223372036854775808,18446744073709551616]}"#,
        r#"{"a":[0,-0,1.0,-1.50,1e+2,1e+2,1e+2,1e-2,0.5e+0,123456789012345678901234567890,-9223372036854775808,18446744073709551616]}"#,
    );
    canonical(
        r#"{"a":1e-400,"b":1.7976931348623157e308}"#,
        r#"{"a":1e-400,"b":1.7976931348623157e+308}"#,
    );
    let big = format!("{{\"a\":{}}}", "9".repeat(300));
    canonical(&big, &big);
    refused(&format!("{{\"a\":{}}}", "9".repeat(309)));
    canonical(
        &format!("{{\"a\":{}}}", "1".repeat(305)),
        &format!("{{\"a\":{}}}", "1".repeat(305)),
    );
    for bad in [
        "1e400", "-1e400", "1.8e308", "01", "1.", ".5", "+1", "-", "1e", "1e+", "0x1", "1.e2",
        "-01", "Infinity", "NaN",
    ] {
        refused(&format!("{{\"a\":{bad}}}"));
    }
}

#[test]
fn refuses_what_the_slow_path_must_decide() {
    for bad in [
        "",
        " ",
        "[]",
        "1",
        "\"a\"",
        "null",
        "{",
        "}",
        r#"{"a":1"#,
        r#"{"a":1,}"#,
        r#"{"a" 1}"#,
        r#"{"a":1} x"#,
        r#"{"a":1}{}"#,
        r#"{a:1}"#,
        r#"{"a":[1,]}"#,
        r#"{"a":[,1]}"#,
        r#"{"a":tru}"#,
        r#"{"a":True}"#,
        "{\"a\":\"\u{1}\"}",
        "{\"a\":\"\t\"}",
        r#"{"a":"\x"}"#,
        r#"{"a":"\u12"}"#,
        r#"{"a":"\u12G4"}"#,
        r#"{"a":"\ud800"}"#,
        r#"{"a":"\ud800x"}"#,
        r#"{"a":"\ud800\n"}"#,
        r#"{"a":"\udc00\ud800"}"#,
        r#"{"a":"\ud800\ud800"}"#,
        r#"{"a":"\ud800\u0041"}"#,
        r#"{"a":"\"}"#,
        // duplicates, also after unescaping and in big objects
        r#"{"a":1,"a":2}"#,
        r#"{"a":1,"\u0061":2}"#,
        r#"{"x":{"é":1,"\u00e9":2}}"#,
        // the codec's business
        r#"{"$date":"2026-11-30T03:06:44.123Z"}"#,
        r#"{"a":{"$set":[1]}}"#,
        r#"{"a":{"$serde_json::private::Number":"5"}}"#,
        r#"{"\u0024x":1}"#,
    ] {
        refused(bad);
    }
    let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
    canonical(
        &format!("{{{}}}", many.join(",")),
        &format!("{{{}}}", many.join(",")),
    );
    refused(&format!("{{{},\"k7\":0}}", many.join(",")));
    assert!(scan(b"{\"a\":\"\xff\"}").is_none());
    assert!(scan(b"{\"a\":\"\xed\xa0\x80\"}").is_none());
}

#[test]
fn nesting_up_to_the_codec_cap() {
    // The top-level object is level 1: 63 arrays inside it pass, 64 do not.
    let ok = format!("{{\"a\":{}1{}}}", "[".repeat(63), "]".repeat(63));
    canonical(&ok, &ok);
    refused(&format!("{{\"a\":{}1{}}}", "[".repeat(64), "]".repeat(64)));
    let ok = format!("{}{{}}{}", "{\"a\":".repeat(63), "}".repeat(63));
    canonical(&ok, &ok);
    refused(&format!("{}{{}}{}", "{\"a\":".repeat(64), "}".repeat(64)));
    refused(&"[".repeat(100_000));
    refused(&"{\"a\":".repeat(100_000));
}

#[test]
fn member_spans() {
    let s = scan(br#" { "a" : 1 , "b\u0041" : { "c" : [ ] } } "#).unwrap();
    let spans: Vec<(&[u8], &[u8])> = s
        .members
        .iter()
        .map(|m| (&s.out[m.start..m.colon], &s.out[m.colon + 1..m.end]))
        .collect();
    assert_eq!(
        spans,
        [(&b"\"a\""[..], &b"1"[..]), (b"\"bA\"", b"{\"c\":[]}")]
    );
}
