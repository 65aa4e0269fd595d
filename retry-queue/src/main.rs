//! `retry-queue`: see and steer a durable task queue from the shell. See
//! [`retry_queue::cli`].

fn main() -> std::process::ExitCode {
    retry_queue::cli::main()
}
