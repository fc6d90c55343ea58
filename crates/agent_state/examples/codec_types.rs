//! The storage codec's types in Rust: dates, big integers, maps with any keys, sets, bytes,
//! typed arrays and regular expressions, stored as the tagged values every language reads as
//! its own types.
//!
//! `cargo run -p agent_state --example codec_types`

use std::collections::{BTreeMap, BTreeSet};

use agent_state::types::{BigInt, Bytes, Date, Map, RegExp, Set, TypedArray};
use agent_state::{Agent, Result};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Session {
    started: Date,
    id: BigInt<u128>,
    scores: Map<BTreeMap<u32, String>>,
    tags: Set<BTreeSet<String>>,
    blob: Bytes,
    samples: TypedArray,
    pattern: RegExp,
}

fn main() -> Result<()> {
    let agent = Agent::builder().open(":memory:")?;
    let session = Session {
        started: Date::now(),
        id: BigInt(1 << 70),
        scores: Map(BTreeMap::from([(1, "ada".to_string())])),
        tags: Set(BTreeSet::from(["urgent".to_string()])),
        blob: Bytes(vec![0, 255]),
        samples: TypedArray::of(&[0.5f32, 0.25]),
        pattern: RegExp::new("^hi", "i"),
    };
    agent.replace(&session)?;
    // What Node, Python and Go read as Date, BigInt, Map, Set, ArrayBuffer, Float32Array, RegExp:
    println!("{}", String::from_utf8_lossy(agent.get_state()?.json()));
    let back: Session = agent.get()?;
    assert_eq!(back, session);
    println!("samples: {:?}", back.samples.elements::<f32>());
    Ok(())
}
