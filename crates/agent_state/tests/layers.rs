//! The core's layering, read from its sources: which module uses which (`crate::`, `super::`
//! and `self::` paths, in `use` lines or inline), so that a change that makes the layers lean
//! on each other fails here rather than in a reviewer's reading.
//!
//! Checked: no cycle among the modules of one parent (the top-level `value`, `store`, `agent`,
//! `backends`, `hooks`, `options`, `error`; the modules of `store`; those of each backend);
//! neither backend uses the other (what both need lives in a module both use); the generic
//! store and the agent use no backend; the backends' client libraries are named only inside
//! their backend; no file of `store` or a backend over 500 lines.
//!
//! Unit tests (`#[cfg(test)] mod ... { }`) are left out: they may use any module to build
//! their inputs. A module using its own parent or child is not an edge between siblings: a parent declares
//! its children and re-exports their items, and a child implements its parent's types. Paths
//! through a module's re-exports (`crate::store::Txn`, which `store` re-exports from
//! `store::txn`) resolve to the module that defines the item, read from the `pub use` lines, so
//! an arrow hidden behind a re-export is still seen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path below the crate root (`["store", "postgres", "pool"]`; the root is empty).
#[path = "layers/source.rs"]
mod source;
use source::{code_only, test_file_modules, without_unit_tests};

type Module = Vec<String>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every source file of the core, with its module.
fn modules() -> Vec<(Module, PathBuf)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&src(), &mut files);
    let mut out: Vec<(Module, PathBuf)> = files
        .into_iter()
        .map(|file| {
            let rel = file.strip_prefix(src()).unwrap().with_extension("");
            let mut module: Module = rel
                .components()
                .map(|c| c.as_os_str().to_str().unwrap().to_string())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            (module, file)
        })
        .collect();
    // Unit tests in files of their own (`#[cfg(test)] mod tests;`) are left out like inline
    // ones (see `without_unit_tests`), with everything below them.
    let tests: Vec<Module> = out
        .iter()
        .flat_map(|(module, file)| {
            let code = code_only(&std::fs::read_to_string(file).unwrap());
            test_file_modules(&code)
                .into_iter()
                .map(|name| {
                    let mut m = module.clone();
                    m.push(name);
                    m
                })
                .collect::<Vec<_>>()
        })
        .collect();
    out.retain(|(module, _)| !tests.iter().any(|t| module.starts_with(t)));
    out.sort();
    out
}

/// The paths a use tree starting at `code[i..]` names (`a::b::{c, d::e}`), each as segments.
fn use_tree(code: &[u8], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    loop {
        while i < code.len() && code[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < code.len() && code[i] == b'{' {
            i += 1;
            loop {
                i = use_tree(code, i, path.clone(), out);
                while i < code.len() && (code[i].is_ascii_whitespace() || code[i] == b',') {
                    i += 1;
                }
                if i >= code.len() || code[i] == b'}' {
                    return i + 1;
                }
            }
        }
        let start = i;
        while i < code.len() && (code[i].is_ascii_alphanumeric() || code[i] == b'_') {
            i += 1;
        }
        if i == start {
            out.push(path);
            return i;
        }
        path.push(String::from_utf8_lossy(&code[start..i]).into_owned());
        if code[i..].starts_with(b"::") {
            i += 2;
        } else {
            out.push(path);
            return i;
        }
    }
}

/// What each module re-exports: (module, item name) to the module the `pub use` names.
type Reexports = BTreeMap<(Module, String), Module>;

/// The re-exports of module `me` in its `code` (`pub use a::b::{C, d::E};`), each resolved as
/// [`uses`] resolves a path (a path without `crate`/`self`/`super` is relative to `me`).
fn reexports_of(me: &Module, code: &str, known: &BTreeSet<Module>, out: &mut Reexports) {
    for (at, _) in code.match_indices("pub use ") {
        let mut paths = Vec::new();
        use_tree(
            code.as_bytes(),
            at + "pub use ".len(),
            Vec::new(),
            &mut paths,
        );
        for path in paths {
            let Some((item, module_path)) = path.split_last() else {
                continue;
            };
            let relative = !matches!(
                module_path.first().map(String::as_str),
                Some("crate" | "self" | "super")
            );
            let mut full = Vec::new();
            if relative {
                full.push("self".to_string());
            }
            full.extend(module_path.iter().cloned());
            if let Some(target) = resolve(me, &full, known, &Reexports::new()) {
                out.insert((me.clone(), item.clone()), target);
            }
        }
    }
}

/// The module a path (`crate::a::b::Item`, `super::c`) names from module `me`: the longest
/// known module prefix, followed through re-exports; `None` for a path that starts elsewhere.
fn resolve(
    me: &Module,
    path: &[String],
    known: &BTreeSet<Module>,
    reexports: &Reexports,
) -> Option<Module> {
    let mut base: Module = Vec::new();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => rest = &rest[1..],
        Some("self") | Some("super") => {
            base = me.clone();
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "self" => {}
                    "super" => {
                        base.pop();
                    }
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    let mut target = base;
    for seg in rest {
        let mut child = target.clone();
        child.push(seg.clone());
        if known.contains(&child) {
            target = child;
        } else {
            if let Some(defined) = reexports.get(&(target.clone(), seg.clone())) {
                target = defined.clone();
            }
            break;
        }
    }
    Some(target)
}

/// The modules the code of module `me` names, resolved to the longest known module prefix
/// and through re-exports.
fn uses(me: &Module, code: &str, known: &BTreeSet<Module>, reexports: &Reexports) -> Vec<Module> {
    let b = code.as_bytes();
    let mut found = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(start) {
            if at > 0
                && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b':')
            {
                continue;
            }
            let mut paths = Vec::new();
            use_tree(b, at, Vec::new(), &mut paths);
            for path in paths {
                // `self::` is the file's module (a `mod.rs` is its directory's), `super::`
                // its parent. (Inside an inline `mod tests`, this resolves one level too high:
                // to an ancestor, never a sibling.)
                if let Some(target) = resolve(me, &path, known, reexports) {
                    found.push(target);
                }
            }
        }
    }
    found
}

/// Every use between modules, from each file's code.
fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let files = modules();
    let known: BTreeSet<Module> = files.iter().map(|(m, _)| m.clone()).collect();
    let codes: Vec<(Module, String)> = files
        .iter()
        .map(|(module, file)| {
            let code = without_unit_tests(&code_only(&std::fs::read_to_string(file).unwrap()));
            (module.clone(), code)
        })
        .collect();
    let mut reexports = Reexports::new();
    for (module, code) in &codes {
        reexports_of(module, code, &known, &mut reexports);
    }
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, code) in &codes {
        for target in uses(module, code, &known, &reexports) {
            if &target != module {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    edges
}

/// An edge `from → to` as one between two children of their nearest common ancestor, or
/// `None` when one is the other's ancestor.
fn between_siblings(from: &Module, to: &Module) -> Option<(Module, String, String)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        return None;
    }
    Some((
        from[..common].to_vec(),
        from[common].clone(),
        to[common].clone(),
    ))
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".to_string()
    } else {
        m.join("::")
    }
}

#[test]
fn the_modules_of_one_parent_use_each_other_without_a_cycle() {
    let mut levels: BTreeMap<Module, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, tos) in graph() {
        for to in tos {
            if let Some((parent, a, b)) = between_siblings(&from, &to) {
                levels
                    .entry(parent)
                    .or_default()
                    .entry(a)
                    .or_default()
                    .insert(b);
            }
        }
    }
    assert!(
        levels
            .get(&Vec::new())
            .is_some_and(|top| top.contains_key("agent")),
        "the graph is empty: the sources were not read as expected"
    );
    for (parent, edges) in &levels {
        if let Some(cycle) = cycle(edges) {
            panic!(
                "the modules of {} use each other in a circle: {}",
                name(parent),
                cycle.join(" -> ")
            );
        }
    }
}

/// A circle in `edges`, if there is one (depth-first search for an edge back into the path).
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|s| s == n) {
            let mut circle = path[at..].to_vec();
            circle.push(n.to_string());
            return Some(circle);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut done, &mut Vec::new()))
}

/// The checks above would see what they look for: a circle, and the uses a file's code names.
#[test]
fn the_checks_see_a_circle_and_every_kind_of_path() {
    let edges = |pairs: &[(&str, &str)]| {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            m.entry(a.to_string()).or_default().insert(b.to_string());
        }
        m
    };
    assert_eq!(cycle(&edges(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
    assert_eq!(
        cycle(&edges(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let m = |s: &str| -> Module { s.split("::").map(str::to_string).collect() };
    let known: BTreeSet<Module> = [
        "store",
        "backends",
        "backends::sqlite",
        "backends::sqlite::fork",
        "backends::postgres",
        "backends::postgres::pool",
        "backends::postgres::conn",
        "error",
    ]
    .into_iter()
    .map(m)
    .collect();
    let code = code_only(
        r#"
        // use crate::error::Error;
        use super::{conn::Conn, Postgres};
        use self::inner::*;
        let uri = "postgres://crate::error";
        fn f() { crate::backends::sqlite::fork::generation() }
        "#,
    );
    let found: BTreeSet<Module> = uses(
        &m("backends::postgres::pool"),
        &code,
        &known,
        &Reexports::new(),
    )
    .into_iter()
    .collect();
    let expected: BTreeSet<Module> = [
        "backends::postgres::conn",
        "backends::postgres",
        "backends::postgres::pool",
        "backends::sqlite::fork",
    ]
    .into_iter()
    .map(m)
    .collect();
    assert_eq!(found, expected);
    let code =
        without_unit_tests("use a;\n#[cfg(test)]\nmod tests { fn f() { { crate::x } } }\nuse b;");
    assert_eq!(code, "use a;\n\nuse b;");
}

/// The arrows from the generic store or the agent into a backend: the generic layers name no
/// backend (the agent may ask `backends` itself to open a store: that module picks one).
fn into_backends(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (from, tos) in graph {
        let generic = from.first().is_some_and(|s| s == "store" || s == "agent");
        for to in tos {
            if generic && to.len() > 1 && to[0] == "backends" {
                wrong.push(format!("{} uses {}", name(from), name(to)));
            }
        }
    }
    wrong
}

#[test]
fn the_generic_store_and_the_agent_use_no_backend() {
    let wrong = into_backends(&graph());
    assert!(
        wrong.is_empty(),
        "the generic layers name a backend: {wrong:?}"
    );
}

/// The check above sees an arrow into a backend, also one hidden behind a re-export of the
/// generic store (as `pub use sqlite::MarkWatch` in `store` once was).
#[test]
fn an_arrow_from_the_generic_store_into_a_backend_is_seen() {
    let m = |s: &str| -> Module { s.split("::").map(str::to_string).collect() };
    let known: BTreeSet<Module> = [
        "store",
        "store::txn",
        "agent",
        "agent::hot",
        "backends",
        "backends::sqlite",
        "backends::sqlite::mark_watch",
    ]
    .into_iter()
    .map(m)
    .collect();
    let mut reexports = Reexports::new();
    reexports_of(
        &m("store"),
        "pub use crate::backends::sqlite::mark_watch::MarkWatch;\npub use txn::Txn;",
        &known,
        &mut reexports,
    );
    assert_eq!(
        reexports.get(&(m("store"), "Txn".to_string())),
        Some(&m("store::txn"))
    );
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, code) in [
        ("agent::hot", "use crate::store::{MarkWatch, Txn};"),
        ("store::txn", "use crate::backends::sqlite::open;"),
    ] {
        graph
            .entry(m(module))
            .or_default()
            .extend(uses(&m(module), code, &known, &reexports));
    }
    let wrong = into_backends(&graph);
    assert_eq!(
        wrong,
        vec![
            "agent::hot uses backends::sqlite::mark_watch".to_string(),
            "store::txn uses backends::sqlite".to_string(),
        ]
    );
}

#[test]
fn neither_backend_uses_the_other() {
    let backends = [
        vec!["backends".to_string(), "sqlite".to_string()],
        vec!["backends".to_string(), "postgres".to_string()],
    ];
    let mut wrong = Vec::new();
    for (from, tos) in graph() {
        for to in tos {
            for (i, a) in backends.iter().enumerate() {
                let b = &backends[1 - i];
                if from.starts_with(a) && to.starts_with(b) {
                    wrong.push(format!("{} uses {}", name(&from), name(&to)));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "one backend stands on the other: {wrong:?}"
    );
}

#[test]
fn each_backend_s_client_library_is_named_only_inside_it() {
    let owners = [
        ("rusqlite", "backends/sqlite"),
        ("tokio_postgres", "backends/postgres"),
        ("tokio", "backends/postgres"),
    ];
    let mut wrong = Vec::new();
    for (module, file) in modules() {
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
        let rel = file
            .strip_prefix(src())
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        for (library, home) in owners {
            let named = code.match_indices(&format!("{library}::")).any(|(at, _)| {
                at == 0 || {
                    let c = code.as_bytes()[at - 1];
                    !(c.is_ascii_alphanumeric() || c == b'_' || c == b':')
                }
            });
            if named && !rel.starts_with(home) {
                wrong.push(format!("{} ({rel}) names {library}", name(&module)));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a backend's library outside it: {wrong:?}"
    );
}

#[test]
fn no_file_of_the_store_or_a_backend_is_over_500_lines() {
    let long: Vec<String> = modules()
        .into_iter()
        .filter(|(m, _)| m.first().is_some_and(|s| s == "store" || s == "backends"))
        .filter_map(|(_, file)| {
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            (lines > 500).then(|| format!("{} ({lines} lines)", file.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these by concept: {long:?}");
}
