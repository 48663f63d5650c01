//! `boxctl`: how a person drives boxmaker.
//!
//! Not built yet: the commands below arrive with issue #3 (turns end to end). Until then every
//! command says so and exits 2, so nothing pretends to work.

use clap::Parser;

/// boxctl drives a boxmaker appliance through loopd's Unix socket.
///
/// Commands (arriving with issue #3): task, sessions, show [--follow], summaries, cancel,
/// status, notifications. Not implemented yet: every command exits 2.
#[derive(Parser, Debug)]
#[command(version, about, long_about)]
struct Cli {
    /// loopd's socket (default: $BOXCTL_SOCKET, then the installed path).
    #[arg(long, env = "BOXCTL_SOCKET")]
    socket: Option<std::path::PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true)]
    command: Vec<String>,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let _ = (&cli.socket, cli.json);
    eprintln!(
        "boxctl: {:?} is not implemented yet: boxctl's commands arrive with issue #3",
        cli.command.join(" ")
    );
    std::process::ExitCode::from(2)
}
