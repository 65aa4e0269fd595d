use super::*;
use retry_runtime::system;

#[test]
fn every_contender_completes_the_happy_path_on_its_first_poll() {
    unbudgeted();
    let server = Flaky::new(0);
    each_contender!(|contender, call| {
        let name = contender.name;
        server.reset();
        assert_eq!(poll_once(|| call(&server)), Ok(1), "{name}");
        assert_eq!(server.calls(), 1, "{name}");
    });
}

#[test]
fn every_retrying_contender_pauses_exactly_70ms_over_4_calls() {
    unbudgeted();
    system(SYSTEM).set_budget(retry_runtime::Budget::unlimited());
    let rt = runtime(true);
    each_contender!(|contender, call| {
        let (name, retries) = (contender.name, contender.retries);
        let server = Flaky::new(ATTEMPTS - 1);
        let start = rt.block_on(async { tokio::time::Instant::now() });
        let result = rt.block_on(call(&server));
        let elapsed = rt.block_on(async { start.elapsed() });
        if retries {
            assert_eq!(result, Ok(ATTEMPTS), "{name}");
            assert_eq!(elapsed, FAILING_PATH_PAUSES, "{name}");
        } else {
            assert_eq!(result, Err(Unavailable { call: 1 }), "{name}");
            assert_eq!(elapsed, Duration::ZERO, "{name}");
        }
        // One more failure than the schedule allows: every contender gives up.
        let server = Flaky::new(ATTEMPTS);
        let result = rt.block_on(call(&server));
        let expected = if retries { ATTEMPTS } else { 1 };
        assert_eq!(result, Err(Unavailable { call: expected }), "{name}");
    });
}
