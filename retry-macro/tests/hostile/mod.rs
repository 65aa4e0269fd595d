//! Hostile input for both macros: random token streams through the same pipeline as the entry
//! points in `lib.rs` (`#[retry]`: `retry::expand::parse_fn` → `common::args::parse` →
//! `retry::valid::check` → `retry::expand::expand` or `with_errors`; `#[derive(Classify)]`:
//! `classify::args` → `classify::valid` → `classify::expand`), outside a compiler:
//! `proc_macro2` runs on its fallback implementation in unit tests.
//!
//! A unit-test module of the crate (it calls the phases, which a proc-macro crate does not
//! export), declared in `src/lib.rs` with `#[path]`; it lives here, next to the tests, being
//! test vocabulary rather than part of the macros.
//!
//! The property, for any input: no panic, and either errors (each with a message, rendered by
//! `to_compile_error()` as `compile_error!` invocations, followed by the untouched fn, or the
//! derive's fallback impl) or an expansion that parses again: a `syn::ItemFn` with the input's
//! attributes, visibility and signature, or a `syn::ItemImpl` of `Classify` for the input type
//! (followed, for a type without generics, by its registration in an anonymous `const`).
//!
//! Spans are not compared: the fallback implementation has no source positions.

use std::ffi::CString;

use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use quote::{ToTokens, quote};
use syn::ItemFn;

use syn::DeriveInput;

use crate::classify::{args as derive_args, expand as derive_expand, valid as derive_valid};
use crate::common::args;
use crate::retry::options::OPTIONS;
use crate::retry::{expand, valid};

// ---------------------------------------------------------------------------------------------
// Token trees, as plain data so that proptest can print and shrink them.

#[derive(Clone, Debug)]
enum Tok {
    Ident(String),
    Raw(String),
    Punct(char, bool),
    Lifetime(String),
    Lit(Lit),
    Group(Delim, Vec<Tok>),
}

#[derive(Clone, Copy, Debug)]
enum Delim {
    Paren,
    Brace,
    Bracket,
    /// What `macro_rules!` wraps around an `$e:expr` it passes on.
    None,
}

#[derive(Clone, Debug)]
enum Lit {
    /// Source text, lexed by `proc_macro2` (text it does not lex is skipped).
    Source(String),
    Str(String),
    ByteStr(Vec<u8>),
    CStr(Vec<u8>),
    Char(char),
    Byte(u8),
    Int(i128),
    Float(f64),
}

fn stream(toks: &[Tok]) -> TokenStream {
    let mut out = TokenStream::new();
    for tok in toks {
        match tok {
            Tok::Ident(name) => out.extend([TokenTree::Ident(Ident::new(name, Span::call_site()))]),
            Tok::Raw(name) => {
                out.extend([TokenTree::Ident(Ident::new_raw(name, Span::call_site()))]);
            }
            Tok::Punct(c, joint) => {
                let spacing = if *joint {
                    Spacing::Joint
                } else {
                    Spacing::Alone
                };
                out.extend([TokenTree::Punct(Punct::new(*c, spacing))]);
            }
            Tok::Lifetime(name) => out.extend([
                TokenTree::Punct(Punct::new('\'', Spacing::Joint)),
                TokenTree::Ident(Ident::new(name, Span::call_site())),
            ]),
            Tok::Lit(lit) => {
                let lit = match lit {
                    Lit::Source(text) => match text.parse::<Literal>() {
                        Ok(lit) => lit,
                        Err(_) => continue,
                    },
                    Lit::Str(s) => Literal::string(s),
                    Lit::ByteStr(b) => Literal::byte_string(b),
                    Lit::CStr(b) => Literal::c_string(&CString::new(b.clone()).expect("no NUL")),
                    Lit::Char(c) => Literal::character(*c),
                    Lit::Byte(b) => Literal::byte_character(*b),
                    Lit::Int(i) => Literal::i128_unsuffixed(*i),
                    Lit::Float(f) => Literal::f64_unsuffixed(*f),
                };
                out.extend([TokenTree::Literal(lit)]);
            }
            Tok::Group(delim, inner) => {
                let delim = match delim {
                    Delim::Paren => Delimiter::Parenthesis,
                    Delim::Brace => Delimiter::Brace,
                    Delim::Bracket => Delimiter::Bracket,
                    Delim::None => Delimiter::None,
                };
                out.extend([TokenTree::Group(Group::new(delim, stream(inner)))]);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Strategies.

/// Every word either macro knows (`#[retry]`'s options from its own list), and words that are
/// close, reserved or odd.
fn words() -> Vec<&'static str> {
    let mut words = vec!["read", "write"];
    words.extend(OPTIONS);
    words.extend([
        "transient",
        "permanent",
        "delegate",
        "retry_after",
        "classify",
        "Read",
        "atempts",
        "max_attempts",
        "key",
        "self",
        "Self",
        "super",
        "fn",
        "async",
        "move",
        "true",
        "false",
        "as",
        "_",
        "order",
        "Uuid",
        "new_v4",
        "now",
        "format",
        "async_trait",
        "café",
    ]);
    words
}

/// Words that may be raw identifiers.
const RAW_WORDS: &[&str] = &[
    "read",
    "write",
    "attempts",
    "delay",
    "fn",
    "type",
    "async",
    "match",
    "transient",
];

/// Strings that mean something to some option, nearly do, or break naive parsers.
const STRINGS: &[&str] = &[
    "",
    " ",
    "0",
    "0ms",
    "1ms",
    "5ms",
    "200ms",
    "1s",
    "5s",
    "5000ms",
    "5001ms",
    "6s",
    "1.5s",
    "2 s",
    " 2s",
    "-1s",
    "+1s",
    "1us",
    "1m",
    "1MS",
    "18446744073709551615ms",
    "18446744073709551616ms",
    "18446744073709552s",
    "99999999999999999999999999s",
    "\u{663}s",
    "\u{ff11}s",
    "equal",
    "full",
    "none",
    "EQUAL",
    "fixed",
    "linear",
    "exponential",
    "gateway",
    "\u{0}",
    "\n",
    "\u{1f4a5}",
    "a::b",
    "::retry_runtime",
    "retry_runtime",
    "crate",
    "self",
    "super::rt",
    "crate::rt",
    "a<b>",
    "a::<b>",
    "Vec<u8>",
    "a(b) -> c",
    "r#a",
    "r#crate",
    "a b",
    "(",
    ")",
    "/*",
    "//",
    "\"",
    "'a",
    "a::b::",
    "::",
    "<T as Trait>::x",
    "$crate",
    "dyn Fn()",
    "&'static str",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(words()).prop_map(str::to_owned),
        1 => "[a-zA-Z_][a-zA-Z0-9_]{0,12}".prop_filter("not a keyword", |s| {
            syn::parse_str::<Ident>(s).is_ok() || s == "_"
        }),
    ]
}

fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(STRINGS).prop_map(str::to_owned),
        1 => "[0-9]{1,30}(ms|s|us|m|)",
        1 => any::<String>(),
    ]
}

/// Literals at the edges of the lexer.
const ODD_LITERALS: &[&str] = &[
    "'\\u{10FFFF}'",
    "b'\\xff'",
    "\"\\u{0}\"",
    "'\\''",
    "1e999",
    "0.0",
];

/// Every punctuation character a token stream may hold but `'` (lifetimes are made whole),
/// `=` and `,` twice as often.
const PUNCTS: &[char] = &[
    '=', ',', ',', '=', ':', ';', '.', '#', '!', '&', '*', '+', '-', '/', '<', '>', '|', '^', '%',
    '@', '?', '~', '$',
];

fn lit() -> impl Strategy<Value = Lit> {
    let suffix = proptest::sample::select(
        &[
            "", "", "", "u8", "u32", "u64", "u128", "usize", "i8", "i64", "i128", "f32", "f64",
            "ms", "s", "_u32",
        ][..],
    );
    prop_oneof![
        2 => ("[0-9]{1,80}", suffix).prop_map(|(d, s)| Lit::Source(format!("{d}{s}"))),
        1 => "0x[0-9a-fA-F_]{1,40}|0b[01_]{1,70}|0o[0-7_]{1,30}|[0-9]{1,3}(_[0-9]{1,3}){0,5}"
            .prop_map(Lit::Source),
        1 => "[0-9]{1,20}\\.[0-9]{1,20}(e[+-]?[0-9]{1,4})?(f32|f64)?".prop_map(Lit::Source),
        1 => concat!(
            "r\"[^\"]{0,12}\"|r#\"[^\"]{0,12}\"#|",
            "br\"[a-z]{0,5}\"|c\"[a-z]{0,5}\"|cr\"[a-z ]{0,5}\"",
        )
        .prop_map(Lit::Source),
        1 => proptest::sample::select(ODD_LITERALS).prop_map(|s| Lit::Source(s.to_owned())),
        4 => string().prop_map(Lit::Str),
        1 => proptest::collection::vec(any::<u8>(), 0..8).prop_map(Lit::ByteStr),
        1 => proptest::collection::vec(1u8.., 0..8).prop_map(Lit::CStr),
        1 => any::<char>().prop_map(Lit::Char),
        1 => any::<u8>().prop_map(Lit::Byte),
        2 => prop_oneof![any::<i128>(), -10i128..10].prop_map(Lit::Int),
        1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Lit::Float),
    ]
}

fn leaf() -> impl Strategy<Value = Tok> {
    prop_oneof![
        6 => word().prop_map(Tok::Ident),
        1 => proptest::sample::select(RAW_WORDS).prop_map(|w| Tok::Raw(w.to_owned())),
        4 => (
            proptest::sample::select(PUNCTS),
            any::<bool>(),
        )
            .prop_map(|(c, joint)| Tok::Punct(c, joint)),
        1 => proptest::sample::select(&["a", "static", "_", "async_trait"][..])
            .prop_map(|l| Tok::Lifetime(l.to_owned())),
        4 => lit().prop_map(Tok::Lit),
    ]
}

fn delim() -> impl Strategy<Value = Delim> {
    prop_oneof![
        Just(Delim::Paren),
        Just(Delim::Brace),
        Just(Delim::Bracket),
        Just(Delim::None),
    ]
}

/// Any sequence of tokens, groups nested a few deep.
fn toks() -> impl Strategy<Value = Vec<Tok>> {
    let tree = leaf().prop_recursive(3, 24, 6, |inner| {
        (delim(), proptest::collection::vec(inner, 0..6)).prop_map(|(d, v)| Tok::Group(d, v))
    });
    proptest::collection::vec(tree, 0..12)
}

/// Expressions for option values: keys, minted keys, `retry_if` paths and others.
const SNIPPETS: &[&str] = &[
    "order.idempotency_key",
    "&self.key",
    "key.as_str()",
    "Uuid::new_v4().to_string()",
    "format!(\"{}\", Uuid::new_v4())",
    "rand::random::<u64>()",
    "is_retryable",
    "crate::is_retryable",
    "<E as Trait>::check",
    "|e: &E| true",
    "{ 1 }",
    "-1",
    "3 + 2",
    "Ulid::new()",
    "async { k }",
];

/// A value for `name = value`: often one that option accepts, often not.
fn value() -> impl Strategy<Value = Vec<Tok>> {
    prop_oneof![
        3 => lit().prop_map(|l| vec![Tok::Lit(l)]),
        2 => (1i128..=6).prop_map(|n| vec![Tok::Lit(Lit::Int(n))]),
        2 => proptest::sample::select(&["1ms", "5ms", "100ms", "200ms", "1s", "2s", "5s"][..])
            .prop_map(|s| vec![Tok::Lit(Lit::Str(s.to_owned()))]),
        // As written, or as `macro_rules!` passes an `$e:expr` on: in an invisible group.
        2 => (proptest::sample::select(SNIPPETS), any::<bool>()).prop_map(|(s, grouped)| {
            let toks = source_toks(s);
            if grouped {
                vec![Tok::Group(Delim::None, toks)]
            } else {
                toks
            }
        }),
        1 => (delim(), toks()).prop_map(|(d, t)| vec![Tok::Group(d, t)]),
        1 => toks(),
    ]
}

/// `text` lexed into tokens (only for well-formed snippets of this file).
fn source_toks(text: &str) -> Vec<Tok> {
    fn convert(stream: TokenStream) -> Vec<Tok> {
        let mut out = Vec::new();
        let mut trees = stream.into_iter().peekable();
        while let Some(tree) = trees.next() {
            out.push(match tree {
                TokenTree::Ident(ident) => {
                    let text = ident.to_string();
                    match text.strip_prefix("r#") {
                        Some(raw) => Tok::Raw(raw.to_owned()),
                        None => Tok::Ident(text),
                    }
                }
                TokenTree::Punct(p) if p.as_char() == '\'' => match trees.next() {
                    Some(TokenTree::Ident(name)) => Tok::Lifetime(name.to_string()),
                    _ => unreachable!("a lifetime"),
                },
                TokenTree::Punct(p) => Tok::Punct(p.as_char(), p.spacing() == Spacing::Joint),
                TokenTree::Literal(lit) => Tok::Lit(Lit::Source(lit.to_string())),
                TokenTree::Group(g) => Tok::Group(
                    match g.delimiter() {
                        Delimiter::Parenthesis => Delim::Paren,
                        Delimiter::Brace => Delim::Brace,
                        Delimiter::Bracket => Delim::Bracket,
                        Delimiter::None => Delim::None,
                    },
                    convert(g.stream()),
                ),
            });
        }
        out
    }
    convert(text.parse().expect("a well-formed snippet"))
}

/// An argument list that is mostly well-formed: words and `name = value` pairs, commas
/// sometimes missing or doubled, and now and then anything at all.
/// `name = value` pairs that `#[retry]` accepts on their own.
const VALID_PAIRS: &[&str] = &[
    "attempts = 1",
    "attempts = 2",
    "attempts = 3",
    "attempts = 5",
    "delay = \"1ms\"",
    "delay = \"100ms\"",
    "max_delay = \"1s\"",
    "max_delay = \"5s\"",
    "jitter = \"equal\"",
    "jitter = \"full\"",
    "jitter = \"none\"",
    "backoff = \"exponential\"",
    "system = \"gateway\"",
    "system = \"\\u{1f4a5}\"",
    "retry_if = is_retryable",
    "retry_if = crate::errors::is_retryable",
    "crate = \"my_rt\"",
    "crate = \"::retry_runtime\"",
    "crate = \"crate::rt\"",
    "timeout = \"2s\"",
];

fn arg_list() -> impl Strategy<Value = Vec<Tok>> {
    let arg = prop_oneof![
        6 => proptest::sample::select(VALID_PAIRS).prop_map(source_toks),
        3 => word().prop_map(|w| vec![Tok::Ident(w)]),
        6 => (word(), value()).prop_map(|(name, value)| {
            let mut v = vec![Tok::Ident(name), Tok::Punct('=', false)];
            v.extend(value);
            v
        }),
        1 => toks(),
    ];
    let separator = prop_oneof![
        40 => Just(vec![Tok::Punct(',', false)]),
        1 => Just(vec![]),
        1 => Just(vec![Tok::Punct(',', false), Tok::Punct(',', false)]),
        1 => Just(vec![Tok::Punct(';', false)]),
    ];
    let kind = prop_oneof![
        6 => Just(vec![Tok::Ident("read".to_owned())]),
        6 => Just(vec![
            Tok::Ident("write".to_owned()),
            Tok::Punct(',', false),
            Tok::Ident("idempotency_key".to_owned()),
            Tok::Punct('=', false),
            Tok::Ident("order".to_owned()),
            Tok::Punct('.', false),
            Tok::Ident("key".to_owned()),
        ]),
        1 => Just(vec![]),
    ];
    prop_oneof![
        6 => (kind, proptest::collection::vec((separator, arg), 0..6), any::<bool>())
            .prop_map(|(kind, rest, trailing)| {
                let mut v = kind;
                for (sep, arg) in rest {
                    v.extend(sep);
                    v.extend(arg);
                }
                if trailing {
                    v.push(Tok::Punct(',', false));
                }
                v
            }),
        1 => toks(),
    ]
}

/// The source of a fn: any of the shapes `#[retry]` accepts or refuses.
fn func() -> impl Strategy<Value = String> {
    let pick = |options: &'static [&'static str]| proptest::sample::select(options);
    (
        (
            pick(&[
                "",
                "/// Docs.\n",
                "#[inline]\n",
                "#[allow(dead_code)] /// a\n",
                "#[tracing::instrument(skip(self))]\n",
            ]),
            pick(&["", "pub ", "pub(crate) ", "pub(super) "]),
            pick(&["", "", "", "", "", "", "", "const "]),
            pick(&["async ", "async ", ""]),
            pick(&["f", "r#type", "status", "register", "r#read"]),
            pick(&[
                "",
                "<T>",
                "<'a, T: Clone + 'a>",
                "<const N: usize>",
                "<'async_trait>",
            ]),
        ),
        (
            pick(&[
                "",
                "",
                "&self, ",
                "&self, ",
                "&mut self, ",
                "self, ",
                "mut self, ",
                "self: Box<Self>, ",
                "self: Pin<&mut Self>, ",
                "&'a self, ",
            ]),
            pick(&[
                "",
                "id: u64",
                "order: &Order",
                "key: impl AsRef<str>",
                "(a, b): (u8, u8)",
                "_: u8, order: &'a Order<T>",
            ]),
            pick(&[
                "",
                " -> Result<u64, E>",
                " -> Result<u64, E>",
                " -> Result<(), E>",
                " -> io::Result<()>",
                " -> Result<impl Display, E>",
                " -> impl Future<Output = Result<u8, E>>",
                " -> Pin<Box<dyn Future<Output = Result<u8, E>> + Send + 'async_trait>>",
                " -> std::result::Result<Vec<u8>, Box<dyn Error + Send + Sync>>",
                " -> u8",
            ]),
            pick(&["", " where T: Send"]),
            pick(&[
                "{ Ok(1) }",
                "{}",
                "{ todo!() }",
                "{ let x = 1; Err(E::from(x)) }",
                "{ return Ok(()); }",
                "{ self.call(order).await }",
                "{ call()?; Ok(Default::default()) }",
                "{ loop {} }",
            ]),
        ),
    )
        .prop_map(|(head, tail)| {
            let (attrs, vis, konst, asyncness, name, generics) = head;
            let (receiver, args, ret, where_clause, body) = tail;
            [
                attrs,
                vis,
                konst,
                asyncness,
                "fn ",
                name,
                generics,
                "(",
                receiver,
                args,
                ")",
                ret,
                where_clause,
                " ",
                body,
            ]
            .concat()
        })
}

// ---------------------------------------------------------------------------------------------
// The pipelines and their property.

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}

/// The messages of an error, each one checked to be there.
fn messages(error: &syn::Error) -> Result<Vec<String>, TestCaseError> {
    let messages: Vec<String> = error.clone().into_iter().map(|e| e.to_string()).collect();
    prop_assert!(!messages.is_empty());
    prop_assert!(
        messages.iter().all(|m| !m.trim().is_empty()),
        "{messages:?}"
    );
    Ok(messages)
}

/// Counts `compile_error` invocations in `tokens`.
fn compile_errors(tokens: &TokenStream) -> usize {
    tokens
        .to_string()
        .matches(":: core :: compile_error !")
        .count()
}

/// `#[retry(args)] item`, as `lib.rs` runs it, and the property.
fn retry(args: TokenStream, item: TokenStream) -> Result<(), TestCaseError> {
    let func = match expand::parse_fn(item) {
        Ok(func) => func,
        Err(tokens) => {
            prop_assert!(compile_errors(&tokens) > 0, "{tokens}");
            return Ok(());
        }
    };
    match args::parse(args.clone()).and_then(|args| valid::check(args, &func)) {
        Ok(config) => {
            prop_assert!(
                !has_generic_arguments(&config.krate),
                "#[retry({args})]: a crate path with generic arguments was accepted"
            );
            let out = expand::expand(&config, func.clone());
            let expanded: ItemFn = syn::parse2(out.clone())
                .map_err(|e| fail(format!("#[retry({args})]: {e}: {out}")))?;
            prop_assert!(
                expanded.attrs == func.attrs,
                "#[retry({args})]: attributes changed"
            );
            prop_assert!(
                expanded.vis == func.vis,
                "#[retry({args})]: visibility changed"
            );
            prop_assert!(
                expanded.sig == func.sig,
                "#[retry({args})]: signature changed: {} -> {}",
                func.sig.to_token_stream(),
                expanded.sig.to_token_stream()
            );
            // The plain loop drives a `Retrier`; a hedged fn (`hedge = …`) the `Hedged` engine.
            let out_text = out.to_string();
            prop_assert!(
                out_text.contains("__private :: Retrier ::")
                    || out_text.contains("__private :: Hedged :: new"),
                "{out}"
            );
        }
        Err(error) => {
            let messages = messages(&error)?;
            let out = expand::with_errors(&func, &error, &[]);
            prop_assert_eq!(compile_errors(&out), messages.len(), "{}", out);
            let file: syn::File = syn::parse2(out.clone())
                .map_err(|e| fail(format!("#[retry({args})]: {e}: {out}")))?;
            let kept = file.items.last();
            prop_assert!(
                matches!(kept, Some(syn::Item::Fn(kept)) if *kept == func),
                "#[retry({args})]: the fn is not kept: {out}"
            );
        }
    }
    Ok(())
}

/// true when a segment of `path` has generic arguments (`a<b>`, `a::<b>`).
fn has_generic_arguments(path: &syn::Path) -> bool {
    path.segments.iter().any(|s| !s.arguments.is_none())
}

/// `#[derive(Classify)] item`, as `lib.rs` runs it, and the property.
fn derive(item: TokenStream) -> Result<(), TestCaseError> {
    // `parse_macro_input!` reports what is not an item; rustc never derives on anything else.
    let Ok(input) = syn::parse2::<DeriveInput>(item.clone()) else {
        return Ok(());
    };
    match derive_args::parse(&input).and_then(|parsed| derive_valid::check(&input, parsed)) {
        Ok(derive) => {
            let out = derive_expand::expand(&derive);
            let file: syn::File =
                syn::parse2(out.clone()).map_err(|e| fail(format!("{e}: {item} => {out}")))?;
            // The impl, then the type's registration (an anonymous `const`) unless it is generic.
            let registered = input.generics.params.is_empty();
            prop_assert_eq!(file.items.len(), 1 + usize::from(registered), "{}", out);
            let syn::Item::Impl(imp) = &file.items[0] else {
                return Err(fail(format!("not an impl first: {out}")));
            };
            if registered {
                prop_assert!(
                    matches!(&file.items[1], syn::Item::Const(c) if c.ident == "_"),
                    "{}",
                    out
                );
            }
            let (_, path, _) = imp.trait_.as_ref().ok_or_else(|| fail(format!("{out}")))?;
            prop_assert!(
                path.segments.last().is_some_and(|s| s.ident == "Classify"),
                "{}",
                out
            );
            let ident = &input.ident;
            let (_, ty_generics, _) = input.generics.split_for_impl();
            prop_assert_eq!(
                imp.self_ty.to_token_stream().to_string(),
                quote!(#ident #ty_generics).to_string()
            );
        }
        Err(error) => {
            let messages = messages(&error)?;
            let out = derive_expand::with_errors(&input, &error);
            prop_assert_eq!(compile_errors(&out), messages.len(), "{}", out);
            syn::parse2::<syn::File>(out.clone())
                .map_err(|e| fail(format!("{e}: {item} => {out}")))?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// `#[derive(Classify)]` inputs.

/// The words of `#[classify(...)]`, with one it does not know.
const CLASSIFY_WORDS: &[&str] = &[
    "transient",
    "permanent",
    "delegate",
    "retry_after",
    "crate",
    "nope",
];

/// The tokens of one `#[classify...]` attribute.
fn classify_attr() -> impl Strategy<Value = TokenStream> {
    let field = prop_oneof![
        Just("retry_after".to_owned()),
        Just("hint".to_owned()),
        Just("code".to_owned()),
        Just("0".to_owned()),
        Just("1".to_owned()),
        Just("2".to_owned()),
        Just("4294967296".to_owned()),
        Just("0u8".to_owned()),
        Just("self.hint".to_owned()),
        Just("-1".to_owned()),
        Just("\"hint\"".to_owned()),
        Just("r#type".to_owned()),
    ];
    let arg = prop_oneof![
        4 => proptest::sample::select(CLASSIFY_WORDS).prop_map(str::to_owned),
        3 => field.prop_map(|f| format!("retry_after = {f}")),
        2 => string().prop_map(|s| format!("crate = {}", Literal::string(&s))),
        1 => Just("crate = my_rt".to_owned()),
        1 => Just("transient = true".to_owned()),
    ];
    let list = proptest::collection::vec(arg, 0..4).prop_map(|args| args.join(", "));
    prop_oneof![
        8 => list.prop_map(|list| format!("#[classify({list})]").parse().expect("an attribute")),
        2 => toks().prop_map(|t| {
            let t = stream(&t);
            quote!(#[classify(#t)])
        }),
        1 => Just(quote!(#[classify])),
        1 => Just(quote!(#[classify = "transient"])),
        1 => Just(quote!(#[classify[transient]])),
        1 => Just(quote!(#[error("boom")])),
    ]
}

fn attrs() -> impl Strategy<Value = TokenStream> {
    proptest::collection::vec(classify_attr(), 0..3).prop_map(|a| a.into_iter().collect())
}

/// The fields of a variant (or a struct, with `;` where it needs one).
fn fields(variant: bool) -> impl Strategy<Value = (TokenStream, TokenStream)> {
    let shapes: &'static [&'static str] = &[
        "",
        "(Duration)",
        "(u16, Option<Duration>)",
        "{ retry_after: Duration, code: u16 }",
        "{ hint: Option<Duration> }",
        "(std::io::Error)",
        "(T)",
        "{ source: E }",
        "(#[classify(transient)] Duration)",
        "{ #[source] inner: Box<dyn std::error::Error + Send + Sync> }",
    ];
    (proptest::sample::select(shapes), any::<bool>()).prop_map(move |(shape, discriminant)| {
        let tokens: TokenStream = shape.parse().expect("fields");
        let tail = if variant && discriminant && shape.is_empty() {
            quote!(= 3)
        } else if !variant && !shape.starts_with('{') {
            quote!(;)
        } else {
            TokenStream::new()
        };
        (tokens, tail)
    })
}

fn generics() -> impl Strategy<Value = TokenStream> {
    proptest::sample::select(&["", "<T>", "<T: Clone, E>", "<'a, T>", "<E> where E: Send"][..])
        .prop_map(|g| g.parse().expect("generics"))
}

/// An enum, a struct or a union with random `#[classify]` attributes everywhere.
fn derive_input() -> impl Strategy<Value = TokenStream> {
    let variant = (
        attrs(),
        proptest::sample::select(&["A", "B", "Timeout", "Io", "r#type"][..]),
        fields(true),
    )
        .prop_map(|(attrs, name, (fields, tail))| {
            let name: TokenStream = name.parse().expect("a name");
            quote!(#attrs #name #fields #tail)
        });
    let enumeration = (
        attrs(),
        generics(),
        proptest::collection::vec(variant, 0..5),
    )
        .prop_map(|(attrs, generics, variants)| {
            // Variant names may repeat: rustc would refuse that, not the derive.
            let (params, where_clause) = split_where(generics);
            quote!(#attrs enum E #params #where_clause { #(#variants),* })
        });
    let structure =
        (attrs(), generics(), fields(false)).prop_map(|(attrs, generics, (fields, tail))| {
            let (params, where_clause) = split_where(generics);
            if fields.is_empty() {
                quote!(#attrs struct S #params #where_clause;)
            } else if tail.is_empty() {
                quote!(#attrs struct S #params #where_clause #fields)
            } else {
                quote!(#attrs struct S #params #fields #where_clause;)
            }
        });
    let union = attrs().prop_map(|attrs| quote!(#attrs union U { a: u8, b: u16 }));
    prop_oneof![
        6 => enumeration,
        3 => structure,
        1 => union,
        1 => Just(quote!(fn f() {})),
    ]
}

/// `<E> where E: Send` into the parameters and the where-clause.
fn split_where(generics: TokenStream) -> (TokenStream, TokenStream) {
    let text = generics.to_string();
    match text.find("where") {
        Some(at) => (
            text[..at].parse().expect("params"),
            text[at..].parse().expect("where"),
        ),
        None => (generics, TokenStream::new()),
    }
}

// ---------------------------------------------------------------------------------------------
// The tests.

/// 512 cases each, or `PROPTEST_CASES` (e.g. `PROPTEST_CASES=20000` for a longer hunt).
fn config() -> ProptestConfig {
    let default = ProptestConfig::default();
    ProptestConfig {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            default.cases
        } else {
            512
        },
        // Failures are reported with their shrunk input; nothing is written into the crate.
        failure_persistence: None,
        ..default
    }
}

proptest! {
    #![proptest_config(config())]

    /// Mostly well-formed argument lists on any fn shape.
    #[test]
    fn retry_arguments_never_panic(args in arg_list(), item in func()) {
        let item: TokenStream = item.parse().expect("the generator writes valid fns");
        retry(stream(&args), item)?;
    }

    /// Any tokens at all as the arguments.
    #[test]
    fn retry_random_tokens_never_panic(args in toks(), item in func()) {
        let item: TokenStream = item.parse().expect("the generator writes valid fns");
        retry(stream(&args), item)?;
    }

    /// Any tokens at all as the item.
    #[test]
    fn retry_on_random_items_never_panics(args in arg_list(), item in toks()) {
        retry(stream(&args), stream(&item))?;
    }

    #[test]
    fn derive_never_panics(item in derive_input()) {
        derive(item)?;
    }
}

/// The generators reach every branch worth reaching: expansions and errors of both macros.
#[test]
fn the_generators_reach_expansions_and_errors() {
    use proptest::strategy::ValueTree as _;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let (mut expanded, mut refused) = (0, 0);
    for _ in 0..300 {
        let args = stream(&arg_list().new_tree(&mut runner).unwrap().current());
        let item: TokenStream = func()
            .new_tree(&mut runner)
            .unwrap()
            .current()
            .parse()
            .unwrap();
        let Ok(func) = expand::parse_fn(item) else {
            continue;
        };
        match args::parse(args).and_then(|args| valid::check(args, &func)) {
            Ok(_) => expanded += 1,
            Err(_) => refused += 1,
        }
    }
    println!("{expanded} expanded, {refused} refused");
    assert!(
        expanded > 10 && refused > 10,
        "{expanded} expanded, {refused} refused"
    );

    let (mut derived, mut refused) = (0, 0);
    for _ in 0..300 {
        let item = derive_input().new_tree(&mut runner).unwrap().current();
        let Ok(input) = syn::parse2::<DeriveInput>(item) else {
            continue;
        };
        match derive_args::parse(&input).and_then(|parsed| derive_valid::check(&input, parsed)) {
            Ok(_) => derived += 1,
            Err(_) => refused += 1,
        }
    }
    println!("{derived} derived, {refused} refused");
    assert!(
        derived > 10 && refused > 10,
        "{derived} derived, {refused} refused"
    );
}

/// Inputs picked by hand, at the edges of each option's grammar: the same property.
#[test]
fn edge_cases_hold_the_property() {
    let item: TokenStream = "async fn f(order: &Order) -> Result<u64, E> { Ok(1) }"
        .parse()
        .unwrap();
    for args in [
        "read, crate = \"a(b) -> c\"",
        "read, crate = \"self\"",
        "read, crate = \"r#crate\"",
        "read, crate = \"$crate\"",
        "read, attempts = 3ms",
        "read, attempts = 99999999999999999999999",
        "read, attempts = 0x3",
        "read, attempts = 3_u8",
        "read, attempts = -1",
        "read, delay = \"18446744073709551615ms\", max_delay = \"18446744073709551615ms\"",
        "read, attempts = 5, delay = \"18446744073709551615ms\"",
        "read, system = \"\\u{0}\"",
        "read, retry_if = a::<b>::c",
        "read, retry_if = Self::check",
        "read, retry_if = <E as Trait>::check",
        "write, idempotency_key = async { k }",
        "write, idempotency_key = || k",
        "write, idempotency_key = return",
        "write, idempotency_key = k?",
        "write, idempotency_key = let x = 1",
        "write, idempotency_key = x = y",
        "write, idempotency_key = a..b",
        "write, idempotency_key = #[attr] k",
        "write, idempotency_key = match k { _ => k }",
        "write, idempotency_key = format!(\"{}\", rand::rng().random::<u64>())",
        "",
        ",",
        "read,,",
        "read = read",
        "crate",
        "r#read",
    ] {
        retry(args.parse().unwrap(), item.clone()).unwrap_or_else(|e| panic!("{args}: {e}"));
    }
    // A `macro_rules!` passing `$n:literal` or `$e:expr` on: invisible groups.
    let grouped = |tokens: TokenStream| TokenTree::Group(Group::new(Delimiter::None, tokens));
    let three = grouped(quote!(3));
    let key = grouped(quote!(order.key));
    for args in [
        quote!(read, attempts = #three),
        quote!(write, idempotency_key = #key),
    ] {
        retry(args.clone(), item.clone()).unwrap_or_else(|e| panic!("{args}: {e}"));
    }

    for item in [
        quote!(
            #[classify(crate = "a<b>")]
            enum E {
                #[classify(transient)]
                A,
            }
        ),
        quote!(
            #[classify(crate = "a::<b>")]
            enum E {
                A,
            }
        ),
        quote!(
            enum E {
                #[classify(transient, retry_after = 4294967296)]
                A(Duration),
            }
        ),
        quote!(
            enum E {
                #[classify(transient, retry_after = 0u8)]
                A(Duration),
            }
        ),
        quote!(
            enum E {
                #[classify(transient, retry_after = r#type)]
                A { r#type: Duration },
            }
        ),
        quote!(
            enum E {
                #[classify(transient, retry_after = -1)]
                A(Duration),
            }
        ),
        quote!(
            enum E {}
        ),
        quote!(
            #[classify(delegate)]
            struct S(std::io::Error);
        ),
        quote!(
            #[classify(delegate)]
            struct S<T>
            where
                T: Send,
            {
                inner: T,
            }
        ),
        quote!(#[classify(transient)] union U { a: u8 }),
        quote!(
            enum E {
                #[classify(transient)]
                #[classify(transient)]
                A,
            }
        ),
        quote!(
            enum E {
                #[classify()]
                A = 1,
                #[classify(,)]
                B,
            }
        ),
    ] {
        derive(item.clone()).unwrap_or_else(|e| panic!("{item}: {e}"));
    }
}

/// Found by the property above: `crate = "a<b>"` (a path with generic arguments) was accepted,
/// and the expansion wrote `a<b>::__private::Retrier::read(...)` in expression position, which is
/// not Rust. `valid.rs` now parses the string mod-style.
#[test]
fn a_crate_path_with_generic_arguments_is_refused() {
    let func: ItemFn = syn::parse_quote!(
        async fn f() -> Result<(), E> {
            Ok(())
        }
    );
    for path in ["a<b>", "a::<b>", "Vec<u8>", "a::b<'c>::d"] {
        let args = quote!(read, crate = #path);
        let checked = args::parse(args).and_then(|args| valid::check(args, &func));
        assert!(checked.is_err(), "crate = {path:?} is accepted");
    }
}
