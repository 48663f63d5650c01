//! The `boxctl` binary: parses the command line, runs the command on a small tokio runtime,
//! and exits with its code (see `boxctl --help`).

use boxctl::cli::{Cli, EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors; everything else clap refuses is a usage
            // error, kept apart from exit 2 (loopd unreachable), and with --json also one
            // JSON object on stdout, as every other error is.
            if !e.use_stderr() {
                let _ = e.print();
                return ExitCode::from(EXIT_OK);
            }
            if boxctl::run::json_requested(std::env::args_os())
                && let Ok(raw) = serde_json::to_string(&boxctl::run::usage_error_json(&e))
            {
                let _ = writeln!(std::io::stdout(), "{raw}");
            }
            let _ = e.print();
            return ExitCode::from(EXIT_USAGE);
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
