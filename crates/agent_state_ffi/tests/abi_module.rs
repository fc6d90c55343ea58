//! `tests/support/abi.rs`, the C ABI in Rust that the tests, the benchmarks and the ABI fuzz
//! target call the library through, must declare exactly what `include/agent_state.h` declares:
//! every function with the same name, argument names and types and return type, every type and
//! every status code. Its declarations are checked in, not generated at build time (bindgen
//! would need libclang for every build); this test keeps them from drifting from the header.
//!
//! The header is read as cbindgen writes it (tests/header.rs keeps it so): declarations ending
//! with `;`, one C type per argument, no macros in declarations.

use std::collections::BTreeMap;
use std::path::Path;

#[test]
fn abi_module_declares_what_the_header_declares() {
    let krate = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(krate.join("../../include/agent_state.h"))
        .expect("read include/agent_state.h");
    let module = std::fs::read_to_string(krate.join("tests/support/abi.rs")).expect("read abi.rs");
    let expected = header_declarations(&header);
    let declared = module_declarations(&module);
    assert!(
        expected.keys().any(|name| name == "agent_open") && expected.len() > 40,
        "the header's declarations were not found: {expected:?}"
    );

    let mut problems = Vec::new();
    for (name, want) in &expected {
        match declared.get(name) {
            None => problems.push(format!("missing: {}", want.text)),
            Some(got) if got.canonical != want.canonical => problems.push(format!(
                "differs from the header:\n    abi.rs:  {}\n    header:  {}",
                got.text, want.text
            )),
            Some(_) => {}
        }
    }
    for (name, got) in &declared {
        if !expected.contains_key(name) {
            problems.push(format!("not in the header: {}", got.text));
        }
    }
    assert!(
        problems.is_empty(),
        "tests/support/abi.rs does not match include/agent_state.h; make it declare, as Rust:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn abi_module_structs_are_repr_c() {
    let krate = Path::new(env!("CARGO_MANIFEST_DIR"));
    let module = std::fs::read_to_string(krate.join("tests/support/abi.rs")).expect("read abi.rs");
    let lines: Vec<&str> = module.lines().map(str::trim).collect();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("pub struct ") {
            assert!(
                i > 0 && lines[i - 1] == "#[repr(C)]",
                "abi.rs: `{line}` needs #[repr(C)] on the line before, to have C's layout"
            );
        }
    }
}

/// One declaration: as Rust source (for the message) and in the form compared.
#[derive(Debug)]
struct Decl {
    text: String,
    canonical: String,
}

impl Decl {
    fn new(text: String) -> Decl {
        let canonical = canonical(&text);
        Decl { text, canonical }
    }
}

/// The header's declarations, by name, written as the Rust that declares them.
fn header_declarations(header: &str) -> BTreeMap<String, Decl> {
    let text = strip_c_comments(header);
    // The `extern "C" {` for C++ is not a declaration.
    let text = remove_between(&text, "#ifdef __cplusplus", "#endif");
    let mut decls = BTreeMap::new();
    let mut typedefs = Vec::new();
    let mut code = String::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(define) = line.strip_prefix("#define ") {
            // Status codes, the change kinds and a call's ops (plain int32_t), a call's flags
            // (uint32_t), a watch event's kinds (AgentWatchKind); the version macros and the
            // include guard are not the ABI's.
            let mut words = define.split_whitespace();
            if let (Some(name), Some(value), None) = (words.next(), words.next(), words.next()) {
                if name.starts_with("AGENT_") && !name.starts_with("AGENT_STATE_") {
                    let ty = if name.starts_with("AGENT_CHANGE_") || name.starts_with("AGENT_OP_") {
                        "i32"
                    } else if name.starts_with("AGENT_CALL_") {
                        "u32"
                    } else if name.starts_with("AGENT_WATCH_") {
                        "AgentWatchKind"
                    } else {
                        "AgentStatus"
                    };
                    decls.insert(
                        name.to_string(),
                        Decl::new(format!("pub const {name}: {ty} = {value};")),
                    );
                }
            }
        } else if !line.starts_with('#') {
            code.push_str(line);
            code.push('\n');
        }
    }
    for item in split_items(&code, false) {
        let item = item.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some(rest) = item.strip_prefix("typedef struct ") {
            let (name, body) = rest.split_once('{').expect("typedef struct Name {");
            let name = name.trim();
            let body = body.rsplit_once('}').expect("struct body").0;
            let fields: Vec<String> = body
                .split(';')
                .filter(|f| !f.trim().is_empty())
                .map(|f| {
                    let (name, ty) = c_named(f, &typedefs);
                    format!("pub {name}: {ty}")
                })
                .collect();
            typedefs.push(name.to_string());
            decls.insert(
                name.to_string(),
                Decl::new(format!("pub struct {name} {{ {} }}", fields.join(", "))),
            );
        } else if let Some(rest) = item.strip_prefix("typedef ") {
            if let Some((ret, rest)) = rest.split_once("(*") {
                // A function pointer type: nullable where the header's functions take one.
                let (name, params) = rest.split_once(')').expect("typedef R (*Name)(...)");
                let name = name.trim();
                let params = params.trim().trim_start_matches('(').trim_end_matches(')');
                let text = format!(
                    "pub type {name} = Option<unsafe extern \"C\" fn({}){}>;",
                    c_params(params, &typedefs),
                    c_return(ret, &typedefs)
                );
                typedefs.push(name.to_string());
                decls.insert(name.to_string(), Decl::new(text));
            } else {
                let (ty, name) = rest.rsplit_once(' ').expect("typedef T Name");
                let text = format!("pub type {name} = {};", c_type(ty, &typedefs));
                typedefs.push(name.to_string());
                decls.insert(name.to_string(), Decl::new(text));
            }
        } else if let Some((head, params)) = item.split_once('(') {
            let (name, ret) = c_name_last(head);
            let params = params
                .trim()
                .strip_suffix(')')
                .expect("a prototype ends with )");
            let text = format!(
                "pub fn {name}({}){};",
                c_params(params, &typedefs),
                c_return(&ret, &typedefs)
            );
            decls.insert(name, Decl::new(text));
        } else {
            panic!("the header declares what this test cannot read: {item}");
        }
    }
    decls
}

/// The module's declarations, by name, as written (attributes and comments left out).
fn module_declarations(module: &str) -> BTreeMap<String, Decl> {
    let code: String = module
        .lines()
        .map(|line| line.split_once("//").map_or(line, |(code, _)| code))
        .filter(|line| !line.trim_start().starts_with('#'))
        .map(|line| format!("{line}\n"))
        .collect();
    let mut decls = BTreeMap::new();
    let mut add = |item: &str| {
        let text = item.split_whitespace().collect::<Vec<_>>().join(" ");
        // As on one line, for the message.
        let text = [
            ("( ", "("),
            ("< ", "<"),
            (", )", ")"),
            (", >", ">"),
            (", }", " }"),
        ]
        .iter()
        .fold(text, |text, (from, to)| text.replace(from, to));
        let words: Vec<&str> = text.split([' ', '(', ':', '=', '{', '<']).collect();
        let name = match words.as_slice() {
            ["pub", "fn" | "type" | "const" | "struct", name, ..] => name.to_string(),
            _ => panic!("abi.rs: only pub fn, type, const and struct belong here: {text}"),
        };
        let ending = if text.ends_with('}') { "" } else { ";" };
        decls.insert(name, Decl::new(format!("{text}{ending}")));
    };
    for item in split_items(&code, true) {
        let item = item.trim();
        if item.is_empty() || item.starts_with("use ") || item.starts_with("impl ") {
            continue;
        }
        if let Some(body) = item.strip_prefix("extern \"C\"") {
            let body = body
                .trim()
                .strip_prefix('{')
                .and_then(|b| b.strip_suffix('}'));
            for f in split_items(body.expect("extern \"C\" { ... }"), true) {
                if !f.trim().is_empty() {
                    add(&f);
                }
            }
        } else {
            add(item);
        }
    }
    decls
}

/// `text` cut into items at the `;` outside braces and, for Rust, after each top-level `}`.
fn split_items(text: &str, rust: bool) -> Vec<String> {
    let mut items = Vec::new();
    let mut item = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            ';' if depth == 0 => {
                items.push(std::mem::take(&mut item));
                continue;
            }
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        item.push(c);
        if c == '}' && depth == 0 && rust {
            items.push(std::mem::take(&mut item));
        }
    }
    items.push(item);
    items.retain(|i| !i.trim().is_empty());
    items
}

fn strip_c_comments(text: &str) -> String {
    let text = remove_between(text, "/*", "*/");
    text.lines()
        .map(|line| line.split_once("//").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` without every span from `open` to the next `close` (both included).
fn remove_between(text: &str, open: &str, close: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        out.push_str(&rest[..start]);
        let after = &rest[start + open.len()..];
        let end = after.find(close).expect("an unclosed span");
        rest = &after[end + close.len()..];
    }
    out.push_str(rest);
    out
}

/// A C argument list as Rust's.
fn c_params(params: &str, typedefs: &[String]) -> String {
    if params.trim() == "void" || params.trim().is_empty() {
        return String::new();
    }
    params
        .split(',')
        .map(|p| {
            let (name, ty) = c_named(p, typedefs);
            // `fn` is a keyword in Rust.
            let name = if name == "fn" {
                "r#fn".to_string()
            } else {
                name
            };
            format!("{name}: {ty}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn c_return(ty: &str, typedefs: &[String]) -> String {
    match ty.trim() {
        "void" => String::new(),
        ty => format!(" -> {}", c_type(ty, typedefs)),
    }
}

/// `const char *path` as ("path", "*const c_char").
fn c_named(decl: &str, typedefs: &[String]) -> (String, String) {
    let (name, ty) = c_name_last(decl);
    (name, c_type(&ty, typedefs))
}

/// The identifier that ends `decl`, and the C type before it.
fn c_name_last(decl: &str) -> (String, String) {
    let decl = decl.trim();
    let start = decl
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    (decl[start..].to_string(), decl[..start].trim().to_string())
}

/// A C type as Rust's: fixed-width integers and `size_t` as Rust's, `char` and `int` as
/// `std::ffi`'s, pointers as raw pointers, the header's own type names as they are.
fn c_type(ty: &str, typedefs: &[String]) -> String {
    let ty = ty.replace("struct ", "");
    let ty = ty.trim();
    if let Some(pointee) = ty.strip_suffix('*') {
        let pointee = pointee.trim();
        return match pointee.strip_prefix("const ") {
            Some(inner) => format!("*const {}", c_type(inner, typedefs)),
            None => format!("*mut {}", c_type(pointee, typedefs)),
        };
    }
    match ty {
        "void" => "c_void".to_string(),
        "char" => "c_char".to_string(),
        "int" => "c_int".to_string(),
        "int32_t" => "i32".to_string(),
        "int64_t" => "i64".to_string(),
        "uint8_t" => "u8".to_string(),
        "uint32_t" => "u32".to_string(),
        "uint64_t" => "u64".to_string(),
        "size_t" => "usize".to_string(),
        name if typedefs.iter().any(|t| t == name) => name.to_string(),
        other => panic!("the header uses a C type this test does not map to Rust: {other}"),
    }
}

/// Rust source in a form where layout does not count: `pub` and `r#` gone, spaces only
/// between words, no trailing commas.
fn canonical(text: &str) -> String {
    let text = text.replace("r#", "");
    let words: Vec<&str> = text.split_whitespace().filter(|w| *w != "pub").collect();
    let text = words.join(" ");
    let chars: Vec<char> = text.chars().collect();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '"';
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c == ' ' && !(i > 0 && word(chars[i - 1]) && word(chars[i + 1])) {
            continue;
        }
        out.push(c);
    }
    out.replace(",)", ")").replace(",>", ">").replace(",}", "}")
}
