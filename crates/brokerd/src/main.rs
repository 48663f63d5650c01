//! The `brokerd` binary: boxmaker's tool broker daemon.
//!
//! Today it checks configs (`--check-config FILE`); the daemon itself arrives with issue #5.

use brokerd::config::{Config, ENV_PREFIX};
use bxconfig::{ConfigArgs, Loader, run_check_config};
use clap::Parser;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// brokerd, boxmaker's tool broker.
///
/// brokerd will run every tool call that loopd does not answer itself (built-in tools and MCP
/// servers) under explicit grants, label every result with its class and trust, and record
/// every decision in an audit log. The daemon mode arrives with issue #5; today brokerd checks
/// configs: `brokerd --check-config FILE` prints the resolved config as TOML (exit 0) or every
/// problem (exit 1).
///
/// Config layers, lowest first: built-in defaults, the file, environment variables
/// BROKERD_SECTION__KEY (e.g. BROKERD_LIMITS__CALL_TIMEOUT_MS), the flags below.
/// See docs/config.md.
#[derive(Debug, Parser)]
#[command(name = "brokerd", version, verbatim_doc_comment)]
struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
    /// brokerd's socket (overrides `socket`).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Where the audit log and state live (overrides `state_dir`).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

impl Cli {
    /// A loader for `file` with this process's environment and the override flags given.
    fn loader(&self, file: &Path) -> Loader {
        let mut loader = Loader::new(file, ENV_PREFIX).process_env();
        if let Some(socket) = &self.socket {
            loader = loader.flag("--socket", "socket", socket);
        }
        if let Some(dir) = &self.state_dir {
            loader = loader.flag("--state-dir", "state_dir", dir);
        }
        loader
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(file) = &cli.config.check_config {
        return run_check_config::<Config>(&cli.loader(file));
    }
    init_logging();
    tracing::error!(
        "the daemon mode is not implemented yet (it arrives with issue #5); \
         only `brokerd --check-config FILE` works in this version"
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
