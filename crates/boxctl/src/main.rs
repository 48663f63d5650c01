//! The `boxctl` binary: parses the command line, runs the command on a small tokio runtime,
//! and exits with its code (see `boxctl --help`).

use boxctl::cli::{Cli, EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // --help and --version are not errors; everything else clap refuses is a usage
            // error, kept apart from exit 2 (loopd unreachable).
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    match runtime {
        Ok(runtime) => ExitCode::from(runtime.block_on(boxctl::run(cli))),
        Err(e) => {
            eprintln!("boxctl: cannot start the async runtime: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}
