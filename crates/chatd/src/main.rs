//! The `chatd` binary: boxmaker's Matrix channel.
//!
//! `chatd --config FILE` runs it; `--check-config FILE` checks a config.

use bxconfig::{ConfigArgs, Daemon, Loader, run_daemon};
use chatd::config::{Config, ENV_PREFIX};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// chatd, boxmaker's Matrix channel.
///
/// chatd signs in to a Matrix homeserver as the bot, joins the rooms an owner invites it to,
/// and turns each owner's message into a loopd task in the room's session; the answer comes
/// back to the room when the turn ends. Messages from anyone else are never tasks.
/// `chatd --config FILE` runs until SIGTERM or SIGINT; `chatd --check-config FILE` prints the
/// resolved config as TOML (exit 0) or every problem (exit 1).
///
/// Config layers, lowest first: built-in defaults, the file, environment variables
/// CHATD_SECTION__KEY (e.g. CHATD_MATRIX__HOMESERVER), the flags below. See docs/chat.md.
#[derive(Debug, Parser)]
#[command(name = "chatd", version, verbatim_doc_comment)]
struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
    /// loopd's socket (overrides `loopd_socket`).
    #[arg(long, value_name = "PATH")]
    loopd: Option<PathBuf>,
    /// Where chatd keeps its session and keys (overrides `state_dir`).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

impl Cli {
    /// A loader for `file` with this process's environment and the override flags given.
    fn loader(&self, file: &Path) -> Loader {
        let mut loader = Loader::new(file, ENV_PREFIX).process_env();
        if let Some(socket) = &self.loopd {
            loader = loader.flag("--loopd", "loopd_socket", socket);
        }
        if let Some(dir) = &self.state_dir {
            loader = loader.flag("--state-dir", "state_dir", dir);
        }
        loader
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let daemon = Daemon {
        name: "chatd",
        loader: &|file| cli.loader(file),
        log_level: |cfg: &Config| cfg.log.level,
        init_logging: |level| bxconfig::init_log("chatd", level, bxconfig::every_target),
    };
    run_daemon(&daemon, &cli.config, chatd::daemon::run)
}
