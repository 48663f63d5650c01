//! The `loopd` binary: boxmaker's agent loop daemon.
//!
//! `loopd --config FILE` runs the daemon; `--check-config FILE` checks a config.

use bxconfig::{ConfigArgs, Daemon, Loader, run_daemon};
use clap::Parser;
use loopd::config::{Config, ENV_PREFIX};
use std::path::PathBuf;
use std::process::ExitCode;

/// loopd, boxmaker's agent loop.
///
/// loopd holds persistent sessions (append-only, hash-chained logs) and runs turns of model
/// calls (llama-server) and tool calls (brokerd) over them, serving boxctl over HTTP on a Unix
/// socket. `loopd --config FILE` runs it; `loopd --check-config FILE` prints the resolved
/// config as TOML (exit 0) or every problem (exit 1).
///
/// Config layers, lowest first: built-in defaults, the file, environment variables
/// LOOPD_SECTION__KEY (e.g. LOOPD_LLAMA__URL), the flags below. See docs/config.md.
#[derive(Debug, Parser)]
#[command(name = "loopd", version, verbatim_doc_comment)]
struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
    /// The socket loopd serves its API on (overrides `socket`).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The directory loopd keeps sessions in (overrides `state_dir`).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// The base URL loopd reaches llama-server at (overrides `llama.url`).
    #[arg(long, value_name = "URL")]
    llama: Option<String>,
    /// The socket loopd reaches brokerd at (overrides `broker.socket`).
    #[arg(long, value_name = "PATH")]
    broker: Option<PathBuf>,
}

impl Cli {
    /// A loader for `file` with this process's environment and the override flags given.
    fn loader(&self, file: &std::path::Path) -> Loader {
        let mut loader = Loader::new(file, ENV_PREFIX).process_env();
        if let Some(socket) = &self.socket {
            loader = loader.flag("--socket", "socket", socket);
        }
        if let Some(dir) = &self.state_dir {
            loader = loader.flag("--state-dir", "state_dir", dir);
        }
        if let Some(url) = &self.llama {
            loader = loader.flag("--llama", "llama.url", url);
        }
        if let Some(socket) = &self.broker {
            loader = loader.flag("--broker", "broker.socket", socket);
        }
        loader
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let daemon = Daemon {
        name: "loopd",
        loader: &|file| cli.loader(file),
        log_level: |cfg: &Config| cfg.log.level,
        init_logging: |level| bxconfig::init_log("loopd", level, bxconfig::every_target),
    };
    run_daemon(&daemon, &cli.config, loopd::daemon::run)
}
