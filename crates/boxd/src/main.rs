//! The `boxd` binary: boxmaker's supervisor.
//!
//! `boxd --config FILE` runs the supervisor; `--check-config FILE` checks a config.

use boxd::config::{Config, ENV_PREFIX};
use bxconfig::{ConfigArgs, Loader, run_check_config};
use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;

/// boxd, boxmaker's supervisor.
///
/// boxd starts llama-server, brokerd and loopd, each once the one before is ready and only
/// with a config file matching its pinned sha256; restarts a child that dies, with backoff;
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
    let cli = Cli::parse();
    if let Some(file) = &cli.config.check_config {
        let loader = Loader::new(file, ENV_PREFIX).process_env();
        return run_check_config::<Config>(&loader);
    }
    let Some(file) = &cli.config.config else {
        init_logging("info");
        tracing::error!("no config: start boxd with --config FILE (see config/boxd.toml)");
        return ExitCode::from(2);
    };
    let cfg = match Loader::new(file, ENV_PREFIX)
        .process_env()
        .load_valid::<Config>()
    {
        Ok(cfg) => cfg,
        Err(e) => {
            init_logging("info");
            for line in e.lines() {
                tracing::error!("{line}");
            }
            return ExitCode::from(1);
        }
    };
    init_logging(cfg.log.level.as_str());
    match boxd::daemon::run(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::from(1)
        }
    }
}

/// Logs at `level` (the config's `[log] level`; `RUST_LOG`, when set, wins): to journald when
/// systemd connected stderr to the journal (`JOURNAL_STREAM` is set), so each child's lines
/// keep their `CHILD`/`STREAM` fields; otherwise, or when journald cannot be reached, to stderr.
fn init_logging(level: &str) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level))
    };
    if std::env::var_os("JOURNAL_STREAM").is_some()
        && let Ok(journald) = tracing_journald::layer()
    {
        tracing_subscriber::registry()
            .with(filter())
            .with(journald.with_syslog_identifier("boxd".to_string()))
            .init();
        return;
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
