//! `#[derive(Classify)]`, phase 3: code generation.
//!
//! One `impl Classify` with the type's own generics and where-clause, plus a `Field: Classify`
//! bound for each delegated field whose type mentions a type parameter (thiserror and serde
//! do the same). On an enum both methods are one `match` on `self`, and variants with the same
//! answer share an arm; a struct binds its field with `let Self { .. } = self`. `retry_after` is
//! written only when something has a hint: otherwise the trait's default (`None`) stays. Calls
//! on a field are spanned at its type, so that a field which is not `Classify`, or a hint which
//! is not a `Duration`, is blamed there.

use std::collections::BTreeSet;

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::visit::Visit;
use syn::{DeriveInput, Ident, Path, Type, WherePredicate};

use super::bindings::{delegate, fields, read_hint};
use super::methods;
use super::valid::{self, Derive, Shape, Target, Verdict};

/// The errors, and an impl that calls every value permanent, so that the type's users (a
/// `#[retry]` fn returning it) compile and only the derive's own errors are shown. No such impl
/// when `crate = "..."` is unusable: it would only add an error.
pub(crate) fn with_errors(input: &DeriveInput, error: &syn::Error) -> TokenStream {
    let error = error.to_compile_error();
    let Some(krate) = valid::fallback_crate(input) else {
        return error;
    };
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #error
        #[automatically_derived]
        impl #impl_generics #krate::Classify for #ident #ty_generics #where_clause {
            fn is_transient(&self) -> bool {
                false
            }
        }
    }
}

/// The impl.
pub(crate) fn expand(derive: &Derive) -> TokenStream {
    let krate = &derive.krate;
    let ident = &derive.input.ident;
    let mut generics = derive.input.generics.clone();
    generics
        .make_where_clause()
        .predicates
        .extend(bounds(derive));
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();

    let (is_transient, retry_after) = match &derive.shape {
        Shape::Struct(verdict) => structure(krate, verdict),
        Shape::Enum(variants) => enumeration(krate, variants),
    };
    let retry_after = retry_after.map(|body| {
        quote! {
            fn retry_after(&self) -> ::core::option::Option<::core::time::Duration> {
                #body
            }
        }
    });
    let is_rejection = methods::forwarded(krate, &derive.shape, "is_rejection");
    let is_client_error = methods::is_client_error(krate, &derive.shape);
    let register = super::register::register(derive);
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::Classify for #ident #ty_generics #where_clause {
            fn is_transient(&self) -> bool {
                #is_transient
            }
            #retry_after
            #is_rejection
            #is_client_error
        }
        #register
    }
}

/// The bodies of `is_transient` and, if there is a hint, `retry_after` for a struct.
fn structure(krate: &Path, verdict: &Verdict) -> (TokenStream, Option<TokenStream>) {
    let read = |target: &Target, call: TokenStream| {
        let fields = fields(target);
        quote! {
            let Self #fields = self;
            #call
        }
    };
    match verdict {
        Verdict::Permanent | Verdict::ClientError => (quote!(false), None),
        Verdict::Transient(None) => (quote!(true), None),
        Verdict::Transient(Some(hint)) => (quote!(true), Some(read(hint, read_hint(krate, hint)))),
        Verdict::Delegate(inner) => (
            read(inner, delegate(krate, inner, "is_transient")),
            Some(read(inner, delegate(krate, inner, "retry_after"))),
        ),
    }
}

/// The bodies of `is_transient` and, if some variant has a hint, `retry_after` for an enum.
fn enumeration(krate: &Path, variants: &[(&Ident, Verdict)]) -> (TokenStream, Option<TokenStream>) {
    if variants.is_empty() {
        return (quote!(match *self {}), None);
    }
    let any = |variant: &Ident| quote!(Self::#variant { .. });
    let (mut permanent, mut transient, mut calls) = (Vec::new(), Vec::new(), Vec::new());
    let (mut no_hint, mut hints) = (Vec::new(), Vec::new());
    for (variant, verdict) in variants {
        match verdict {
            Verdict::Permanent | Verdict::ClientError => {
                permanent.push(any(variant));
                no_hint.push(any(variant));
            }
            Verdict::Transient(None) => {
                transient.push(any(variant));
                no_hint.push(any(variant));
            }
            Verdict::Transient(Some(hint)) => {
                transient.push(any(variant));
                let (fields, read) = (fields(hint), read_hint(krate, hint));
                hints.push(quote!(Self::#variant #fields => #read,));
            }
            Verdict::Delegate(inner) => {
                let fields = fields(inner);
                let verdict = delegate(krate, inner, "is_transient");
                let hint = delegate(krate, inner, "retry_after");
                calls.push(quote!(Self::#variant #fields => #verdict,));
                hints.push(quote!(Self::#variant #fields => #hint,));
            }
        }
    }
    let arm = |patterns: &[TokenStream], value: TokenStream| {
        (!patterns.is_empty()).then(|| quote!(#(#patterns)|* => #value,))
    };
    let (permanent, transient) = (
        arm(&permanent, quote!(false)),
        arm(&transient, quote!(true)),
    );
    let is_transient = quote! {
        match self {
            #permanent
            #transient
            #(#calls)*
        }
    };
    let retry_after = (!hints.is_empty()).then(|| {
        let none = arm(&no_hint, quote!(::core::option::Option::None));
        quote! {
            match self {
                #(#hints)*
                #none
            }
        }
    });
    (is_transient, retry_after)
}

/// `Field: Classify` for each delegated field, and `Field: Hint` for each hint field, whose type
/// mentions one of the type's parameters: the impl then holds whenever the fields allow it.
fn bounds(derive: &Derive) -> Vec<WherePredicate> {
    let params: BTreeSet<Ident> = derive
        .input
        .generics
        .type_params()
        .map(|p| p.ident.clone())
        .collect();
    if params.is_empty() {
        return Vec::new();
    }
    let verdicts: Vec<&Verdict> = match &derive.shape {
        Shape::Struct(verdict) => vec![verdict],
        Shape::Enum(variants) => variants.iter().map(|(_, v)| v).collect(),
    };
    let krate = &derive.krate;
    let mut seen = BTreeSet::new();
    let mut bounds = Vec::new();
    for verdict in verdicts {
        let (ty, bound) = match verdict {
            Verdict::Delegate(inner) => (inner.ty, quote!(#krate::Classify)),
            Verdict::Transient(Some(hint)) => (hint.ty, quote!(#krate::__private::Hint)),
            Verdict::Transient(None) | Verdict::Permanent | Verdict::ClientError => continue,
        };
        if mentions(ty, &params)
            && seen.insert((ty.to_token_stream().to_string(), bound.to_string()))
        {
            bounds.push(syn::parse_quote!(#ty: #bound));
        }
    }
    bounds
}

/// true when `ty` names one of `params`, as itself (`T`), inside another type (`Box<T>`) or
/// through an associated type (`T::Error`).
fn mentions(ty: &Type, params: &BTreeSet<Ident>) -> bool {
    struct Find<'p> {
        params: &'p BTreeSet<Ident>,
        found: bool,
    }
    impl<'ast> Visit<'ast> for Find<'_> {
        fn visit_path(&mut self, path: &'ast Path) {
            if path.leading_colon.is_none()
                && path
                    .segments
                    .first()
                    .is_some_and(|s| self.params.contains(&s.ident))
            {
                self.found = true;
            }
            syn::visit::visit_path(self, path);
        }
    }
    let mut find = Find {
        params,
        found: false,
    };
    find.visit_type(ty);
    find.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(item: TokenStream) -> String {
        let input: DeriveInput = syn::parse2(item).unwrap();
        let parsed = crate::classify::args::parse(&input).unwrap();
        let derive = valid::check(&input, parsed).unwrap_or_else(|e| panic!("{e}"));
        expand(&derive).to_string()
    }

    #[test]
    fn variants_with_the_same_answer_share_an_arm() {
        let out = expanded(quote! {
            enum E {
                A,
                #[classify(transient)]
                B,
                #[classify(permanent)]
                C(u8),
                #[classify(transient)]
                D { x: u8 },
            }
        });
        assert!(
            out.contains(
                "match self { Self :: A { .. } | Self :: C { .. } => false , Self :: B { .. } | Self :: D { .. } => true , }"
            ),
            "{out}"
        );
        // No hint anywhere: the trait's default `retry_after` is kept.
        assert!(!out.contains("fn retry_after"), "{out}");
    }

    #[test]
    fn crate_option_replaces_every_runtime_path() {
        let out = expanded(quote! {
            #[classify(crate = "my_rt")]
            enum E {
                #[classify(delegate)]
                Io(std::io::Error),
                #[classify(transient, retry_after = 0)]
                Busy(Option<Duration>),
            }
        });
        assert!(out.contains("impl my_rt :: Classify for E"), "{out}");
        assert!(out.contains("my_rt :: Classify :: is_transient"), "{out}");
        assert!(out.contains("my_rt :: __private :: Hint :: hint"), "{out}");
        assert!(!out.contains("retry_runtime"), "{out}");
    }

    #[test]
    fn bounds_are_added_only_for_fields_read_through_a_type_parameter() {
        let out = expanded(quote! {
            enum E<'a, T, U, H, K: Copy> where K: Send {
                #[classify(delegate)]
                Inner(T),
                #[classify(delegate)]
                Nested { source: Box<U::Error> },
                #[classify(transient, retry_after = hint)]
                Busy { hint: H },
                #[classify(delegate)]
                Io(std::io::Error),
                #[classify(transient)]
                Carried(K, &'a str),
            }
        });
        let head = "impl < 'a , T , U , H , K : Copy > :: retry_runtime :: Classify for E < 'a , T , U , H , K > where K : Send , T : :: retry_runtime :: Classify , Box < U :: Error > : :: retry_runtime :: Classify , H : :: retry_runtime :: __private :: Hint {";
        assert!(out.contains(head), "{out}");
    }

    #[test]
    fn a_struct_reads_its_field_through_a_pattern() {
        let out = expanded(quote! {
            #[classify(delegate)]
            struct S(std::io::Error);
        });
        assert!(
            out.contains("let Self { 0 : __classify_field , .. } = self ;"),
            "{out}"
        );
    }

    #[test]
    fn errors_come_with_an_impl_that_calls_every_value_permanent() {
        let input: DeriveInput = syn::parse2(quote!(
            enum E<T> {
                A(T),
            }
        ))
        .unwrap();
        let error = syn::Error::new(proc_macro2::Span::call_site(), "boom");
        let out = with_errors(&input, &error).to_string();
        assert!(out.contains("compile_error !"), "{out}");
        assert!(
            out.contains(
                "impl < T > :: retry_runtime :: Classify for E < T > { fn is_transient (& self) -> bool { false } }"
            ),
            "{out}"
        );
    }
}
