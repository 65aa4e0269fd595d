//! The expansion's shape: what each option puts where.

use super::*;

fn expanded(args: TokenStream, item: TokenStream) -> String {
    let func: ItemFn = syn::parse2(item).unwrap();
    let args = crate::common::args::parse(args).unwrap();
    let config = crate::retry::valid::check(args, &func).unwrap_or_else(|e| panic!("{e}"));
    expand(&config, func).to_string()
}

#[test]
fn crate_option_replaces_every_runtime_path() {
    let out = expanded(
        quote!(read, crate = "my_rt"),
        quote!(
            async fn f() -> Result<(), E> {
                Ok(())
            }
        ),
    );
    assert!(
        out.contains("my_rt :: __private :: Retrier :: read"),
        "{out}"
    );
    assert!(out.contains("my_rt :: Classify :: is_transient"), "{out}");
    assert!(!out.contains("retry_runtime"), "{out}");
}

#[test]
fn defaults_are_the_reference_configuration_named_after_the_fn() {
    let out = expanded(
        quote!(read),
        quote!(
            fn r#status() -> Result<(), E> {
                Ok(())
            }
        ),
    );
    assert!(
        out.contains(
            ":: retry_runtime :: __private :: site (\"status\" , \"status\" , 3u32 , 200u64 , 5000u64 , :: retry_runtime :: Jitter :: Equal , false ,)"
        ),
        "{out}"
    );
    assert!(out.contains("sleep_blocking"), "{out}");
    assert!(
        out.contains("inventory :: submit !"),
        "every site is listed: {out}"
    );
    assert!(
        !out.contains("Reject"),
        "no protection without `protect`: {out}"
    );
}

#[test]
fn protect_takes_a_permit_and_asks_the_breaker_before_each_attempt() {
    let out = expanded(
        quote!(read, system = "payments", protect),
        quote!(
            async fn status() -> Result<(), E> {
                Ok(())
            }
        ),
    );
    assert!(
        out.contains(":: retry_runtime :: Jitter :: Equal , true ,)"),
        "{out}"
    );
    let permit = out.find("__private :: enter (").expect("a permit");
    let retrier = out.find("Retrier :: read").expect("a retrier");
    let admit = out.find(". admit ()").expect("an admission");
    assert!(permit < retrier && retrier < admit, "{out}");
    assert!(
        out.contains(". wait () . await"),
        "an async fn may wait: {out}"
    );
}

#[test]
fn a_protected_hand_over_write_hands_its_refusals_over() {
    let out = expanded(
        quote!(
            write,
            idempotency_key = key,
            system = "partner",
            protect,
            hand_over = q.hand_over("charge", &1, key)
        ),
        quote!(
            async fn charge(q: &Q, key: &str) -> Result<(), E> {
                Ok(())
            }
        ),
    );
    // The retrier (with the key) before the permit: a refused call is handed over under it.
    let retrier = out.find("Retrier :: write").expect("a retrier");
    let permit = out.find("__private :: enter (").expect("a permit");
    assert!(retrier < permit, "{out}");
    assert!(out.contains(". for_hand_over ()"), "{out}");
    assert!(out.contains(". admit_or_hand_over ()"), "{out}");
    assert!(!out.contains(". admit ()"), "{out}");
    // One tail, at the give-up and at each refusal: three hand-overs, each with its cause.
    assert_eq!(out.matches("in_hand_over (").count(), 3, "{out}");
    assert_eq!(out.matches(". refused (").count(), 2, "{out}");
}

#[test]
fn signature_and_attributes_are_kept() {
    let out = expanded(
        quote!(write, idempotency_key = order.key, system = "gateway"),
        quote!(
            /// Registers.
            #[inline]
            pub(crate) async fn register<'a, T: Send>(
                &'a mut self,
                order: &'a Order<T>,
            ) -> Result<u64, E>
            where
                T: Sync,
            {
                Ok(1)
            }
        ),
    );
    let head = "# [doc = r\" Registers.\"] # [inline] pub (crate) async fn register < 'a , T : Send > (& 'a mut self , order : & 'a Order < T > ,) -> Result < u64 , E > where T : Sync , {";
    assert!(out.starts_with(head), "{out}");
    assert!(out.contains("site (\"gateway\""), "{out}");
    assert!(out.contains("Retrier :: write"), "{out}");
}
