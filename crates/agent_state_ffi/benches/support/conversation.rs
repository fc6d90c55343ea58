//! The conversation of the append rows (abi/append.rs, postgres/append.rs include this file):
//! a state `{"status":"idle","messages":[...]}` whose list of messages (objects with a role, a
//! text and a few fields, as users keep a conversation) grows by one message per write, and the
//! two ways of appending one: a JSON Patch (RFC 6902) `add` at `/messages/-`, and the RFC 7396
//! merge patch a user must send without it (the whole list again, with the new message).

// Each bench target uses a part of it.
#![allow(dead_code)]

use std::fmt::Write as _;

use crate::support::{human, Goal, Row};

/// Appends per run (each of one message), and each message's size in the state. Enough that
/// the largest state's cost of writing itself whole again is inside the measurement: delta
/// storage writes a new base after one patch per KiB of the state (`max_patches`), about every
/// 320 appends from 256 KiB, so 400 appends include one new base at each size (several from
/// 1 KiB), and each row is the amortised cost of appending, not the cost between two bases.
pub const APPENDS: usize = 400;
pub const MESSAGE_BYTES: usize = 200;
/// The starting sizes: the list has grown to ~1 KiB, or to 256 KiB (ending near 336 KiB, its
/// mean over the run near 300 KiB).
pub const STARTS: [usize; 2] = [1024, 256 * 1024];

/// Message `i`, exactly [`MESSAGE_BYTES`] of compact JSON.
pub fn message(i: usize) -> String {
    let role = ["user", "assistant", "tool"][i % 3];
    let head = format!(
        r#"{{"id":{i},"role":"{role}","ts":{},"tokens":{},"text":""#,
        1_700_000_000 + 7 * i,
        10 + i % 90
    );
    let words = "the quick brown fox jumps over the lazy dog ";
    let text: String = words
        .chars()
        .cycle()
        .skip(i % words.len())
        .take(MESSAGE_BYTES - head.len() - 2)
        .collect();
    let m = format!("{head}{text}\"}}");
    debug_assert_eq!(m.len(), MESSAGE_BYTES);
    m
}

/// One run's inputs: the initial state, each append as JSON Patch operations and as the merge
/// patch of the whole list, and the state after the last append.
pub struct Conversation {
    pub initial: Vec<u8>,
    pub operations: Vec<Vec<u8>>,
    pub merges: Vec<Vec<u8>>,
    pub last: Vec<u8>,
}

impl Conversation {
    /// A conversation grown to about `size` bytes, then `appends` messages appended.
    pub fn new(size: usize, appends: usize) -> Conversation {
        // The list's text, without its brackets.
        let mut list = String::new();
        let mut n = 0;
        let frame = r#"{"status":"idle","messages":[]}"#.len();
        while frame + list.len() + MESSAGE_BYTES < size || n < 2 {
            if n > 0 {
                list.push(',');
            }
            list.push_str(&message(n));
            n += 1;
        }
        let state = |list: &str| format!(r#"{{"status":"idle","messages":[{list}]}}"#);
        let initial = state(&list).into_bytes();
        let (mut operations, mut merges) = (Vec::new(), Vec::new());
        for i in n..n + appends {
            let m = message(i);
            let mut op = String::new();
            write!(op, r#"[{{"op":"add","path":"/messages/-","value":{m}}}]"#).unwrap();
            operations.push(op.into_bytes());
            list.push(',');
            list.push_str(&m);
            merges.push(format!(r#"{{"messages":[{list}]}}"#).into_bytes());
        }
        Conversation {
            initial,
            operations,
            merges,
            last: state(&list).into_bytes(),
        }
    }
    /// The mean size of the appends' operations.
    pub fn operation_bytes(&self) -> f64 {
        self.operations.iter().map(Vec::len).sum::<usize>() as f64 / self.operations.len() as f64
    }
}

/// The append rows of one backend from the median cost per append of each run, `t[2 * k]`
/// by JSON Patch and `t[2 * k + 1]` by RFC 7396 from `STARTS[k]`: JSON Patch from 256 KiB
/// against the same from 1 KiB (target: at most 1.5×), and against RFC 7396 at each size
/// (from 256 KiB: at least 1×, a sanity target; from 1 KiB: information).
pub fn append_rows(t: &[f64], runs: &[Conversation], dir: &str, rows: &mut Vec<Row>) {
    let appends = runs[0].operations.len();
    let end = |k: usize| human(runs[k].last.len());
    let last = runs.len() - 1;
    let base = |k: usize| Row {
        op: format!(
            "patch_state, append 1 message of {MESSAGE_BYTES} B to a list, to {}",
            end(k)
        ),
        size: STARTS[k],
        dir: dir.into(),
        sync: "normal".into(),
        ours_ns: t[2 * k],
        ..Row::default()
    };
    let factor = Row {
        alternative: format!("the same from 1 KiB, to {}", end(0)),
        alt_ns: t[0],
        target: Some(1.5),
        goal: Goal::CostAtMost,
        write_cost_target: "append_factor".into(),
        ..base(last)
    };
    let note = format!(
        "mean over {appends} appends; an append from 256 KiB costs {:.2}× one from 1 KiB",
        1.0 / factor.ratio()
    );
    rows.push(Row { note, ..factor });
    for k in (0..runs.len()).rev() {
        let big = k == last;
        let row = Row {
            // (No quotes: the JSON the rows are written as does not escape them.)
            alternative: "set_state of {messages: [the whole list + the message]} (RFC 7396)"
                .into(),
            alt_ns: t[2 * k + 1],
            target: big.then_some(1.0),
            write_cost_target: if big {
                "append_merge".into()
            } else {
                String::new()
            },
            ..base(k)
        };
        let note = format!(
            "mean over {appends} appends; RFC 7396 costs {:.2}× JSON Patch{}",
            row.ratio(),
            if big { "" } else { "; information" }
        );
        rows.push(Row { note, ..row });
    }
}
