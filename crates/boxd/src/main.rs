//! The `boxd` binary: boxmaker's supervisor.
//!
//! `boxd --config FILE` runs the supervisor; `--check-config FILE` checks a config.

use boxd::config::{Config, ENV_PREFIX};
use bxconfig::{ConfigArgs, Daemon, Loader, run_daemon};
use clap::Parser;
use std::process::ExitCode;

/// boxd, boxmaker's supervisor.
///
/// boxd starts llama-server, brokerd and loopd, each once the one before is ready (or with it:
/// `with_previous`) and only with a config file matching its pinned sha256; restarts a child that dies, with backoff;
/// tells systemd when all are ready; and on SIGTERM or SIGINT stops them in reverse order.
/// `boxd --config FILE` runs until a signal (exit 0) or a failure (exit 1);
/// `boxd --check-config FILE` prints the resolved config as TOML (exit 0) or every problem
/// (exit 1).
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
    // boxd starts each child through itself (`--exec-child`, hidden: boxd's own use).
    if let Some(code) = boxd::exec_child::run_if_asked(std::env::args_os()) {
        return code;
    }
    let cli = Cli::parse();
    let daemon = Daemon {
        name: "boxd",
        loader: &|file| Loader::new(file, ENV_PREFIX).process_env(),
        log_level: |cfg: &Config| cfg.log.level,
        init_logging,
    };
    run_daemon(&daemon, &cli.config, boxd::daemon::run)
}

/// Logs at `level` (the config's `[log] level`; `RUST_LOG`, when set, wins), as every daemon
/// does (`bxconfig::init_log`): to journald when systemd connected boxd's own stderr to the
/// journal, otherwise to stderr. The children's lines (`boxd::process::CHILD_TARGET`) are logged
/// at every level: each child logs at the level of its own config.
fn init_logging(level: &str) {
    let filter = format!("{level},{}=trace", boxd::process::CHILD_TARGET);
    bxconfig::init_log("boxd", &filter, bxconfig::every_target);
}
