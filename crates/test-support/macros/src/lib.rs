//! The attributes of the workspace's tests, re-exported by test-support (whose documentation
//! says what they are for). Written on `proc_macro` alone: all they need of a test function is
//! its name and its body, and the body is passed on with its own spans (errors and lints in it
//! point at the test's source).

use proc_macro::{Delimiter, Group, TokenStream, TokenTree};

/// `#[each_backend]` on `fn NAME() { .. }`: the function as it is, and beside it
/// `mod NAME { #[test] fn sqlite() { .. } #[test] fn postgres() { .. } }`, each running it
/// through `test_support::run` on its backend (`#[each_backend(whole_store)]`:
/// `test_support::run_on_whole_store`). (A function and a module may share a name: they live in
/// different namespaces.)
#[proc_macro_attribute]
pub fn each_backend(attr: TokenStream, item: TokenStream) -> TokenStream {
    let run = match attr.to_string().as_str() {
        "" => "run",
        "whole_store" => "run_on_whole_store",
        _ => return error("#[each_backend] takes no argument but whole_store"),
    };
    let Some(name) = fn_name(&item) else {
        return error("#[each_backend] goes on a test function");
    };
    if mentions_sqlite_only(item.clone()) {
        return error(
            "a test of SQLite alone (sqlite_only!) is a plain #[test]: #[each_backend] would \
             declare a PostgreSQL variant that does nothing",
        );
    }
    let variants = format!(
        "mod {name} {{
            #[test]
            fn sqlite() {{
                ::test_support::{run}(::test_support::Backend::Sqlite, super::{name})
            }}
            #[test]
            fn postgres() {{
                ::test_support::{run}(::test_support::Backend::Postgres, super::{name})
            }}
        }}"
    );
    let mut out = item;
    out.extend(variants.parse::<TokenStream>().expect("the variants parse"));
    out
}

/// `#[own_process]` on `fn NAME() { BODY }`: the test `NAME`, whose body runs through
/// `test_support::own_process` (this test binary run again with only this test).
#[proc_macro_attribute]
pub fn own_process(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return error("#[own_process] takes no arguments");
    }
    let Some(name) = fn_name(&item) else {
        return error("#[own_process] goes on a test function");
    };
    let mut head: Vec<TokenTree> = item.into_iter().collect();
    let body = match head.pop() {
        Some(TokenTree::Group(body)) if body.delimiter() == Delimiter::Brace => body,
        _ => return error("#[own_process] goes on a test function with a body"),
    };
    let mut args: TokenStream = format!("module_path!(), {name:?}, ||")
        .parse()
        .expect("the arguments parse");
    args.extend([TokenTree::Group(body)]);
    let mut call: TokenStream = "::test_support::own_process"
        .parse()
        .expect("the path parses");
    call.extend([TokenTree::Group(Group::new(Delimiter::Parenthesis, args))]);
    let mut out: TokenStream = "#[test]".parse().expect("the attribute parses");
    out.extend(head);
    out.extend([TokenTree::Group(Group::new(Delimiter::Brace, call))]);
    out
}

/// The name after `fn` among the item's own tokens (not inside its attributes or body).
fn fn_name(item: &TokenStream) -> Option<String> {
    let mut after_fn = false;
    for token in item.clone() {
        match token {
            TokenTree::Ident(ident) if after_fn => return Some(ident.to_string()),
            TokenTree::Ident(ident) if ident.to_string() == "fn" => after_fn = true,
            _ => after_fn = false,
        }
    }
    None
}

/// Whether `sqlite_only!` is invoked anywhere in `tokens`.
fn mentions_sqlite_only(tokens: TokenStream) -> bool {
    let mut after_name = false;
    for token in tokens {
        match token {
            TokenTree::Punct(p) if after_name && p.as_char() == '!' => return true,
            TokenTree::Ident(ident) => {
                after_name = ident.to_string() == "sqlite_only";
                continue;
            }
            TokenTree::Group(g) if mentions_sqlite_only(g.stream()) => return true,
            _ => {}
        }
        after_name = false;
    }
    false
}

/// A `compile_error!` with `message`.
fn error(message: &str) -> TokenStream {
    format!("::core::compile_error!({message:?});")
        .parse()
        .expect("compile_error! parses")
}
