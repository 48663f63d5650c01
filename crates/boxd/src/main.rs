//! The `boxd` binary: boxmaker's supervisor.
//!
//! Today it checks configs (`--check-config FILE`); the supervisor itself arrives with issue #8.

use boxd::config::{Config, ENV_PREFIX};
use bxconfig::{ConfigArgs, Loader, run_check_config};
use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;

/// boxd, boxmaker's supervisor.
///
/// boxd will start llama-server, brokerd and loopd, each once the one before is ready and only
/// with a config file matching its pinned sha256; restart a child that dies, with backoff;
/// tell systemd when all are ready; and on SIGTERM stop them in reverse order. The supervisor
/// arrives with issue #8; today boxd checks configs: `boxd --check-config FILE` prints the
/// resolved config as TOML (exit 0) or every problem (exit 1).
///
/// Config layers, lowest first: built-in defaults, the file, environment variables
/// BOXD_SECTION__KEY (e.g. BOXD_RESTART__MAX_RESTARTS). See docs/config.md.
#[derive(Debug, Parser)]
#[command(name = "boxd", version, verbatim_doc_comment)]
struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(file) = &cli.config.check_config {
        let loader = Loader::new(file, ENV_PREFIX).process_env();
        return run_check_config::<Config>(&loader);
    }
    init_logging();
    tracing::error!(
        "the supervisor (daemon mode) is not implemented yet (it arrives with issue #8); \
         only `boxd --check-config FILE` works in this version"
    );
    ExitCode::from(2)
}

/// Logs to stderr; `RUST_LOG` sets the filter (default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
