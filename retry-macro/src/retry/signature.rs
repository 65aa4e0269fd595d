//! Phase 2c: what `#[retry]` cannot go on: a const fn, a method taking `self` by value, a fn
//! returning `impl Trait` or a future it was handed (`#[async_trait]` included), a fn returning
//! an `Option`.

use syn::{FnArg, ItemFn, ReturnType, Type};

use crate::common::errors::Errors;

/// Checks the fn's signature.
pub(super) fn check(errors: &mut Errors, func: &ItemFn) {
    let sig = &func.sig;
    if let Some(constness) = &sig.constness {
        errors.at(
            constness,
            "`#[retry]` cannot go on a `const fn`: retrying pauses between attempts, which a const fn cannot do. Remove `const`",
        );
    }
    if let Some(FnArg::Receiver(receiver)) = sig.inputs.first() {
        if !borrows(&receiver.ty) {
            errors.at(
                receiver,
                "`#[retry]` runs the body once per attempt, but this method takes `self` by value, so the first attempt would consume it. Take `&self` or `&mut self`",
            );
        }
    }
    if let Some(impl_trait) = find_impl_trait(&sig.output) {
        errors.at(
            impl_trait,
            "`#[retry]` cannot return `impl Trait`: the loop names the return type to check each attempt's result. Name the type (or box it)",
        );
    }
    if let Some(option) = returns_option(&sig.output) {
        // Said here, once and at the return type: the type error the expansion would give
        // instead is reported twice and points into the runtime.
        errors.at(
            option,
            "`#[retry]` needs a fn that returns `Result<T, E>`, not an `Option`: `None` says nothing about whether trying again may help. Return `Result<Option<T>, E>` (`Ok(None)` for \"not found\", `Err(e)` for a failure the error type classifies)",
        );
    }
    if sig.asyncness.is_none() {
        if sig
            .generics
            .lifetimes()
            .any(|l| l.lifetime.ident == "async_trait")
        {
            errors.at(
                &sig.output,
                "`#[retry]` cannot re-run this method: `#[async_trait]` has already turned it into a boxed future. Use a native `async fn` in the trait (stable since Rust 1.75) and drop `#[async_trait]`, or put `#[retry]` on an inherent async fn that the trait method calls",
            );
        } else if returns_future(&sig.output) {
            errors.at(
                &sig.output,
                "`#[retry]` cannot re-run a future it is handed: write this fn as an `async fn` returning `Result<T, E>`",
            );
        }
    }
}

/// true for `&Self`, `&mut Self` and `Pin<&mut Self>`-like receivers.
fn borrows(ty: &Type) -> bool {
    match ty {
        Type::Reference(_) => true,
        Type::Path(path) => path.path.segments.last().is_some_and(|s| {
            s.ident == "Pin"
                && matches!(&s.arguments, syn::PathArguments::AngleBracketed(a)
                    if matches!(a.args.first(), Some(syn::GenericArgument::Type(Type::Reference(_)))))
        }),
        Type::Paren(inner) => borrows(&inner.elem),
        _ => false,
    }
}

/// The return type, if it is written as an `Option<…>` (by any path: `Option`,
/// `std::option::Option`); an alias of one is left to the type checker.
fn returns_option(output: &ReturnType) -> Option<&Type> {
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let Type::Path(path) = &**ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    (path.qself.is_none()
        && last.ident == "Option"
        && matches!(last.arguments, syn::PathArguments::AngleBracketed(_)))
    .then_some(&**ty)
}

fn returns_future(output: &ReturnType) -> bool {
    struct FindFuture(bool);
    impl<'ast> syn::visit::Visit<'ast> for FindFuture {
        fn visit_trait_bound(&mut self, bound: &'ast syn::TraitBound) {
            self.0 |= bound
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "Future");
            syn::visit::visit_trait_bound(self, bound);
        }
    }
    let ReturnType::Type(_, ty) = output else {
        return false;
    };
    let mut find = FindFuture(false);
    syn::visit::Visit::visit_type(&mut find, ty);
    find.0
}

/// The first `impl Trait` in the return type.
fn find_impl_trait(output: &ReturnType) -> Option<&syn::TypeImplTrait> {
    struct Find<'ast>(Option<&'ast syn::TypeImplTrait>);
    impl<'ast> syn::visit::Visit<'ast> for Find<'ast> {
        fn visit_type_impl_trait(&mut self, found: &'ast syn::TypeImplTrait) {
            self.0.get_or_insert(found);
        }
    }
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let mut find = Find(None);
    syn::visit::Visit::visit_type(&mut find, ty);
    find.0
}
