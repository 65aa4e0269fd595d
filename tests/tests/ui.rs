//! Compile-time behaviour: every rejected use (`ui/fail`, with reviewed `.stderr`) and every
//! supported shape (`ui/pass`, compiled and run).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/fail/*.rs");
    t.pass("ui/pass/*.rs");
}
