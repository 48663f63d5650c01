//! `boxeval`: runs the evaluation suite and prints a table, a summary and, with `--json`, a
//! report. `scripts/eval.sh` finds the parts and calls it.

use clap::Parser;
use evals::layout::ModelServer;
use evals::report::{self, Report};
use evals::runner::{self, Bench};
use evals::site::Site;
use std::io::Write;
use std::path::PathBuf;

/// The context of each of llama-server's three slots, in tokens: room for the baseline, a
/// few tool results and a conversation, on a 2-core machine's memory.
const SLOT_CTX_TOKENS: u32 = 4096;

/// Runs boxmaker's evaluation tasks on the real stack and scores them.
#[derive(Debug, Parser)]
#[command(name = "boxeval")]
struct Args {
    /// The directory of task files.
    #[arg(long, default_value = "evals/tasks")]
    tasks_dir: PathBuf,
    /// Only the tasks whose names match this glob.
    #[arg(long, default_value = "*")]
    tasks: String,
    /// Only the tasks marked `quick = true`.
    #[arg(long)]
    quick: bool,
    /// The fixture site's files.
    #[arg(long, default_value = "evals/site")]
    site: PathBuf,
    /// The fixture site's loopback port; 0 takes a free one. The port is in the fetch tasks'
    /// prompts, so a fixed one makes a run repeatable.
    #[arg(long, default_value_t = 0)]
    site_port: u16,
    /// The directory holding boxd, brokerd, loopd and boxctl.
    #[arg(long)]
    bin_dir: PathBuf,
    /// llama-server (with --gguf), or fakellama (with --fake-script).
    #[arg(long)]
    server: PathBuf,
    /// The model file.
    #[arg(long, conflicts_with = "fake_script")]
    gguf: Option<PathBuf>,
    /// The chat template file the model needs (`--chat-template-file`).
    #[arg(long)]
    template: Option<PathBuf>,
    /// fakellama's script: `--server` is fakellama.
    #[arg(long)]
    fake_script: Option<PathBuf>,
    /// What the report calls the model.
    #[arg(long, default_value = "default")]
    model_name: String,
    /// The system prompt (its directory holds the other prompts).
    #[arg(long, default_value = "config/system.md")]
    system: PathBuf,
    /// Where each task's layout, logs and transcript go.
    #[arg(long)]
    work_dir: PathBuf,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let absolute = |p: &PathBuf| std::path::absolute(p);
    let model = match (&args.gguf, &args.fake_script) {
        (Some(gguf), None) => ModelServer::Llama {
            server: absolute(&args.server)?,
            gguf: absolute(gguf)?,
            template: args.template.as_ref().map(absolute).transpose()?,
            slot_ctx: SLOT_CTX_TOKENS,
        },
        (None, Some(script)) => ModelServer::Fake {
            fakellama: absolute(&args.server)?,
            script: absolute(script)?,
        },
        _ => anyhow::bail!("give --gguf (llama-server) or --fake-script (fakellama)"),
    };
    let mut tasks = evals::load_tasks(&args.tasks_dir, &args.tasks)?;
    if args.quick {
        tasks.retain(|t| t.quick);
    }
    std::fs::create_dir_all(&args.work_dir)?;
    let bench = Bench {
        bin: absolute(&args.bin_dir)?,
        model,
        system: absolute(&args.system)?,
        work: absolute(&args.work_dir)?,
        site: Site::start(&args.site, args.site_port)?,
    };
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    writeln!(out, "{}", report::header())?;
    let mut rows = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        write!(err, "[{}/{}] {} ... ", i + 1, tasks.len(), task.name)?;
        err.flush()?;
        let row = runner::run(&bench, task);
        writeln!(
            err,
            "{} in {:.1} s",
            if row.pass { "pass" } else { "FAIL" },
            row.wall_ms as f64 / 1000.0
        )?;
        for failure in &row.failures {
            writeln!(err, "    {failure}")?;
        }
        writeln!(out, "{}", report::row(&row))?;
        out.flush()?;
        rows.push(row);
    }
    let summary = report::summarise(&rows);
    writeln!(out, "\n{}", report::summary_text(&summary))?;
    if let Some(path) = &args.json {
        let report = Report {
            model: args.model_name.clone(),
            tasks: rows,
            summary,
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        writeln!(err, "report written to {}", path.display())?;
    }
    Ok(())
}
