//! The surface description, `include/agent_state_surface.json`: the open options (name, kind,
//! range, default, backends, what each does) and the statuses (number, name, meaning), written
//! from their one definition in the core (`agent_state::options::OPTIONS`, `ErrorKind`). Every
//! binding's options and statuses and the documentation's tables are generated from it or
//! checked against it by their own tests; this test fails when the file is stale. Regenerate
//! with `make header` (or `AGENT_STATE_BLESS=1 cargo test -p agent_state_ffi --test surface`).

use std::path::Path;

use agent_state::options::{Applies, OptionKind, OPTIONS};
use agent_state::ErrorKind;
use serde_json::{json, Value};

fn kind(k: OptionKind) -> Value {
    match k {
        OptionKind::Object => json!({"type": "object"}),
        OptionKind::Integer { min, max } => json!({"type": "integer", "min": min, "max": max}),
        OptionKind::Choice(choices) => json!({"type": "choice", "choices": choices}),
        OptionKind::Bool => json!({"type": "bool"}),
        OptionKind::Text { max_bytes } => json!({"type": "string", "max_bytes": max_bytes}),
        OptionKind::Retention => json!({
            "type": "retention",
            "keys": ["keep_last", "keep_seconds"],
            "max": agent_state::options::MAX_RETENTION,
            "off": false
        }),
        OptionKind::SchemaSteps => json!({
            "type": "schema_steps",
            "ops": ["merge", "default", "set", "remove", "rename", "move"],
        }),
        other => panic!("the surface does not describe {other:?} yet"),
    }
}

fn surface() -> Value {
    let options: Vec<Value> = OPTIONS
        .iter()
        .map(|o| {
            let default: Value = match o.default {
                Some(text) => serde_json::from_str(text).expect("a default is JSON text"),
                None => Value::Null,
            };
            json!({
                "name": o.name,
                "kind": kind(o.kind),
                "default": default,
                "when_absent": o.when_absent,
                "backends": match o.applies {
                    Applies::All => json!(["sqlite", "postgres"]),
                    Applies::Postgres => json!(["postgres"]),
                    _ => panic!("the surface does not describe {:?} yet", o.applies),
                },
                "doc": o.doc,
            })
        })
        .collect();
    let mut statuses = vec![json!({"code": 0, "name": "AGENT_OK", "meaning": "Success."})];
    statuses.extend(ErrorKind::ALL.iter().map(|k| {
        json!({
            "code": k.code(),
            "name": format!("AGENT_ERR_{}", k.name()),
            "meaning": k.meaning(),
        })
    }));
    // The C boundary's own status (no error of the core is a panic).
    statuses.push(json!({
        "code": 99,
        "name": "AGENT_ERR_PANIC",
        "meaning": "A bug in the library was caught at the ABI boundary; the handle may still \
                    be used.",
    }));
    json!({
        "about": "Generated from crates/agent_state (options.rs OPTIONS, error.rs ErrorKind) by \
                  crates/agent_state_ffi/tests/surface.rs; do not edit: run `make header`.",
        "version": env!("CARGO_PKG_VERSION"),
        "options": options,
        "statuses": statuses,
    })
}

#[test]
fn surface_description_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include/agent_state_surface.json");
    let mut generated = serde_json::to_string_pretty(&surface()).expect("serializable");
    generated.push('\n');
    if std::env::var_os("AGENT_STATE_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write the surface description");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/agent_state_surface.json is stale: run `make header` and commit the result"
    );
}

/// The C statuses (the header's constants) are the surface's, number for number.
#[test]
fn the_c_statuses_are_the_surfaces() {
    let header = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include/agent_state.h"),
    )
    .expect("the header");
    let statuses = surface()["statuses"].as_array().unwrap().clone();
    for s in &statuses {
        let line = format!("#define {} {}", s["name"].as_str().unwrap(), s["code"]);
        assert!(header.contains(&line), "the header has no `{line}`");
    }
    let defined =
        header.matches("#define AGENT_ERR_").count() + header.matches("#define AGENT_OK ").count();
    assert_eq!(
        defined,
        statuses.len(),
        "the header defines statuses the surface lacks"
    );
}
