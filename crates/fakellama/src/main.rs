//! The `fakellama` binary: a scripted stand-in for llama-server.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use fakellama::{DEFAULT_N_CTX, DEFAULT_SLOTS, Listen, MODEL_PATH, Options, Script};

/// A scripted stand-in for llama.cpp's llama-server, speaking the same HTTP API.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// `HOST:PORT` for TCP (port 0 picks one), or a Unix socket path.
    #[arg(long)]
    listen: Listen,
    /// A TOML script of rules; without it every chat request gets one short fixed reply.
    #[arg(long)]
    script: Option<PathBuf>,
    /// Tokens of context per slot.
    #[arg(long, default_value_t = DEFAULT_N_CTX)]
    n_ctx: u32,
    /// Number of slots.
    #[arg(long, default_value_t = DEFAULT_SLOTS, value_parser = clap::value_parser!(u32).range(1..))]
    slots: u32,
    /// Require this key (`Authorization: Bearer KEY` or `X-Api-Key: KEY`) on all but /health.
    #[arg(long)]
    api_key: Option<String>,
    /// Delay per streamed chunk, or before a non-streamed answer, in milliseconds.
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// Hold each chat request, once it has its slot, until this many slots have been busy at
    /// once (at most 30 s), then answer: shows a client's calls in flight.
    #[arg(long)]
    hold_until_busy: Option<usize>,
    /// Answer 503 "Loading model" everywhere for this long after start, in milliseconds.
    #[arg(long, default_value_t = 0)]
    loading_ms: u64,
    /// Act as a model whose chat template has no tool support (like SmolLM2): `tools` are
    /// ignored, tool calls come back as JSON text in `content`.
    #[arg(long)]
    no_tool_template: bool,
    /// The model path to report (`/props`, `/v1/models`, answers) and to record in slot files.
    #[arg(long, short = 'm', default_value = MODEL_PATH)]
    model: String,
    /// Directory for `POST /slots/{id}?action=save|restore` slot files (must exist); without
    /// it slot actions answer 501.
    #[arg(long)]
    slot_save_path: Option<PathBuf>,
    /// Report and keep to a GPU's speeds: prefill faster than a slot file's save and restore
    /// (`Profile::gpu`).
    #[arg(long)]
    gpu: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let script = match &args.script {
        Some(path) => Script::load(path)?,
        None => Script::default(),
    };
    let handle = fakellama::start(Options {
        listen: args.listen,
        n_ctx: args.n_ctx,
        slots: args.slots,
        api_key: args.api_key,
        delay_ms: args.delay_ms,
        hold_until_busy: args.hold_until_busy,
        loading_ms: args.loading_ms,
        tool_template: !args.no_tool_template,
        model_path: args.model,
        slot_save_path: args.slot_save_path,
        profile: if args.gpu {
            fakellama::Profile::gpu()
        } else {
            fakellama::Profile::default()
        },
        script,
    })
    .await?;
    announce(handle.addr())?;
    wait_for_signal().await?;
    handle.shutdown().await;
    Ok(())
}

/// Prints the one line tests look for: `fakellama listening on ADDR`.
#[allow(clippy::print_stdout)]
fn announce(addr: &Listen) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "fakellama listening on {addr}").context("writing to stdout")?;
    stdout.flush().context("flushing stdout")?;
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result.context("waiting for ctrl-c")?,
        _ = term.recv() => {}
    }
    tracing::info!("signal received, stopping");
    Ok(())
}
