//! Spotting idempotency keys that are minted afresh on every call (R-RES-RE-1).
//!
//! A key is only worth something if a repeat of the same request carries the same key. A key
//! expression that calls a random or time-based generator makes a new key for every call, so a
//! repeat by the user, an outer retry or a task queue is not recognised as a duplicate.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::visit::Visit;
use syn::{Expr, ExprCall, ExprMacro, ExprMethodCall, Ident};

/// Functions and methods that make a new value on every call: UUID v1/v4/v6/v7, random
/// numbers, clocks, ULIDs and nano ids.
const MINTERS: &[&str] = &[
    "new_v1",
    "now_v1",
    "new_v4",
    "new_v6",
    "now_v6",
    "new_v7",
    "now_v7",
    "random",
    "random_range",
    "thread_rng",
    "rng",
    "gen",
    "gen_range",
    "now",
    "now_utc",
    "now_local",
    "nanoid",
    "generate",
];

/// Types whose plain `new()` mints a fresh identifier.
const MINTING_TYPES: &[&str] = &["Ulid", "Ksuid", "Xid"];

/// The first call in `expr` that mints a fresh value, if any.
pub(crate) fn find(expr: &Expr) -> Option<TokenStream> {
    let mut finder = Finder { found: None };
    finder.visit_expr(expr);
    finder.found
}

struct Finder {
    found: Option<TokenStream>,
}

impl Finder {
    fn flag(&mut self, tokens: TokenStream) {
        if self.found.is_none() {
            self.found = Some(tokens);
        }
    }
}

fn mints(ident: &Ident) -> bool {
    MINTERS.iter().any(|m| ident == m)
}

impl<'ast> Visit<'ast> for Finder {
    // Children first, so that the innermost minter is blamed: `rand::rng()` rather than the
    // `.random()` called on it.
    fn visit_expr_call(&mut self, call: &'ast ExprCall) {
        syn::visit::visit_expr_call(self, call);
        if let Expr::Path(path) = &*call.func {
            let segments = &path.path.segments;
            let last = segments.last().map(|s| &s.ident);
            let owner = segments.iter().rev().nth(1).map(|s| &s.ident);
            let minting_new = last.is_some_and(|l| l == "new")
                && owner.is_some_and(|o| MINTING_TYPES.iter().any(|t| o == t));
            if last.is_some_and(mints) || minting_new {
                self.flag(quote::quote!(#call));
            }
        }
    }

    fn visit_expr_method_call(&mut self, call: &'ast ExprMethodCall) {
        syn::visit::visit_expr_method_call(self, call);
        if mints(&call.method) {
            let (method, turbofish, args) = (&call.method, &call.turbofish, &call.args);
            self.flag(quote::quote!(#method #turbofish (#args)));
        }
    }

    fn visit_expr_macro(&mut self, mac: &'ast ExprMacro) {
        if mac
            .mac
            .path
            .segments
            .last()
            .is_some_and(|s| mints(&s.ident))
        {
            self.flag(quote::quote!(#mac));
        } else if let Some(call) = find_in_tokens(mac.mac.tokens.clone()) {
            // `format!("{}", Uuid::new_v4())`: macro arguments are not parsed, so look for
            // `minter(` in the raw tokens.
            self.flag(call);
        }
    }
}

fn find_in_tokens(tokens: TokenStream) -> Option<TokenStream> {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, tree) in trees.iter().enumerate() {
        match tree {
            TokenTree::Ident(ident) if mints(ident) => {
                if let Some(TokenTree::Group(args)) = trees.get(i + 1) {
                    if args.delimiter() == Delimiter::Parenthesis {
                        return Some(quote::quote!(#ident #args));
                    }
                }
            }
            TokenTree::Group(group) => {
                if let Some(found) = find_in_tokens(group.stream()) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flagged(src: &str) -> Option<String> {
        find(&syn::parse_str(src).unwrap()).map(|t| t.to_string())
    }

    #[test]
    fn deterministic_keys_pass() {
        for src in [
            "order.idempotency_key",
            "&self.key",
            "Uuid::new_v5(&NAMESPACE, order.id.as_bytes()).to_string()",
            "format!(\"{}:register\", order.id)",
            "key.as_str()",
            "order.random_suffix",
            "uuid!(\"67e55044-10b1-426f-9247-bb680e5fe0c8\")",
        ] {
            assert_eq!(flagged(src), None, "{src}");
        }
    }

    #[test]
    fn minted_keys_are_flagged() {
        for (src, call) in [
            ("Uuid::new_v4().to_string()", "Uuid :: new_v4 ()"),
            (
                "uuid::Uuid::now_v7().to_string()",
                "uuid :: Uuid :: now_v7 ()",
            ),
            (
                "rand::random::<u64>().to_string()",
                "rand :: random :: < u64 > ()",
            ),
            ("rand::rng().random::<u64>().to_string()", "rand :: rng ()"),
            (
                "key_source.random::<u64>().to_string()",
                "random :: < u64 > ()",
            ),
            ("thread_rng().gen::<u64>().to_string()", "thread_rng ()"),
            ("format!(\"{}-{}\", order.id, Uuid::new_v4())", "new_v4 ()"),
            ("Ulid::new().to_string()", "Ulid :: new ()"),
            ("nanoid!()", "nanoid ! ()"),
            (
                "SystemTime::now().elapsed().unwrap().as_nanos().to_string()",
                "SystemTime :: now ()",
            ),
        ] {
            assert_eq!(flagged(src).as_deref(), Some(call), "{src}");
        }
    }
}

/// The names the paths in `expr` start with, once each (`Uuid` of `Uuid::new_v4()`, `rand` of
/// `rand::random()`, also inside macro arguments), for the fn re-emitted with an error. Paths
/// from `self`, `Self`, `super` or `crate`, and a method's turbofish, are left out.
pub(crate) fn path_roots(expr: &Expr) -> Vec<Ident> {
    fn walk(tokens: TokenStream, roots: &mut Vec<Ident>) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, token) in tokens.iter().enumerate() {
            match token {
                TokenTree::Group(group) => walk(group.stream(), roots),
                TokenTree::Ident(ident) => {
                    let is_path_sep = |at: usize| {
                        matches!((tokens.get(at), tokens.get(at + 1)),
                            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                                if a.as_char() == ':' && b.as_char() == ':')
                    };
                    let after_dot_or_sep = i
                        .checked_sub(1)
                        .and_then(|j| tokens.get(j))
                        .is_some_and(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == '.' || p.as_char() == ':'));
                    let keyword = ["self", "Self", "super", "crate"]
                        .iter()
                        .any(|k| ident == k);
                    if is_path_sep(i + 1)
                        && !after_dot_or_sep
                        && !keyword
                        && !roots.iter().any(|root| root == ident)
                    {
                        roots.push(ident.clone());
                    }
                }
                _ => {}
            }
        }
    }
    let mut roots = Vec::new();
    walk(quote::ToTokens::to_token_stream(expr), &mut roots);
    roots
}

#[cfg(test)]
mod path_roots_tests {
    use super::path_roots;

    fn roots(expr: &str) -> Vec<String> {
        let expr = syn::parse_str(expr).unwrap();
        path_roots(&expr).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn first_segments_of_paths_once_each() {
        assert_eq!(roots("Uuid::new_v4().to_string()"), ["Uuid"]);
        assert_eq!(
            roots(r#"format!("{}-{}", order.id, uuid::Uuid::now_v7())"#),
            ["uuid"]
        );
        assert_eq!(roots("rand::rng().random::<u64>()"), ["rand"]);
        assert_eq!(roots("Key::new(&a) + Key::other()"), ["Key"]);
        assert!(roots("self.key").is_empty());
        assert!(roots("Self::KEY").is_empty());
        assert!(roots("order.idempotency_key").is_empty());
    }
}
