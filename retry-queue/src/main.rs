//! `retry-queue`: see and steer a durable task queue from the shell. See the crate docs of
//! `retry_queue`.

fn main() -> std::process::ExitCode {
    retry_queue::main()
}
