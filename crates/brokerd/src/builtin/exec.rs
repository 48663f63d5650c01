//! `exec {argv, cwd?, stdin?, timeout_ms?}`: run one program inside the kernel sandbox
//! (`bxsandbox`), under the grant's `programs` and walls.
//!
//! - **What may run** ([`program`]): `argv[0]` resolved to an absolute path (a bare name on
//!   the sandbox's `PATH`; a path must be absolute, without `.` or `..`) must match one of the
//!   grant's `programs` (a glob without `/` matches a bare name's file name, one with `/` the
//!   path). `["sh", "-c", LINE]` only with `shell = true`; a shell, interpreter or runner only
//!   with `shell = true`. A refusal happens in `check`, before anything runs; the lookup
//!   there reads only the system directories of the sandbox's `PATH`, nothing the model
//!   could have written, so the refusal stays unlabelled like the policy's.
//! - **What else may run**: nothing, under a `programs` grant. The sandbox executes exactly
//!   the resolved program and the kernel refuses every later exec (`bxsandbox::ExecRule::
//!   ProgramOnly`: a seccomp filter, and Landlock's `Execute` right only on the program and its
//!   loader), so `sort --compress-program=sh` or `find -exec` get "Permission denied". A
//!   `shell = true` grant exists to run a shell that runs programs: exec stays open there.
//! - **Where it runs**: only inside the walls a successful probe found ([`Sandbox`]); this tool
//!   exists only with them, so when the sandbox cannot be made `exec` is in no catalogue and
//!   its calls are denied with the probe's reason (see [`crate::Broker`]).
//! - **What is bound** ([`binds`]): each grant's `ro_paths` and `rw_paths`, pinned when brokerd
//!   starts: a call binds the pinned directory by its descriptor, and is refused when the path
//!   no longer resolves to it (a parent renamed, a symlink planted).
//! - **The walls** come from the grant: `ro_paths`, `rw_paths`, `network` (and `networks`:
//!   the sandbox's own network namespace reaches global addresses and those networks only,
//!   through slirp4netns; see `bxsandbox::net`), `env`,
//!   `memory_mb`, `max_processes`, `max_output_bytes`, and `timeout_ms` (the most a call may
//!   ask for; the run also stops [`TIMEOUT_SLACK_MS`] before `limits.call_timeout_ms`, so the
//!   outcome is reported rather than cut off).
//! - **Secrets**: the grant's `env` values are templates, `{secret:NAME}` filled from the
//!   secrets brokerd holds when the call runs (a secret it does not hold fails the call, naming
//!   it). They reach the program through bubblewrap's environment, never a command line.
//! - **The leak guard**: under a grant with `network = true` the program could send what the
//!   model gives it anywhere, so every `argv` entry and `stdin` is scanned for every secret
//!   (and its encodings) in `check`, before anything runs: a match is denied `leak`. Without
//!   `network` they are not scanned: the sandbox reaches nothing outside, and what the program
//!   prints comes back through the broker, which redacts every secret from it.
//! - **The result** ([`report`]): the exit status (or signal, or timed out), the wall time,
//!   stdout and stderr each capped at `max_output_bytes` with their totals; `truncated` when
//!   either was capped. A run that cannot start (a missing `rw_paths` entry) is `Failed`.
//! - **Undo** ([`changes`]): with checkpoints on, what a run changes beneath its `rw_paths` is
//!   recorded like a `write_file`: through an overlay (`crate::checkpoints::layers`) where a
//!   trial run found one works ([`overlay_trial`]) and the tree is the sandbox user's, else by
//!   snapshots (`crate::checkpoints::runs`); a run whose trees are too large to keep does not
//!   start.

pub mod binds;
mod changes;
mod overlay_trial;
mod program;
mod report;

use super::files::args::{self, Kind, Param};
use crate::audit::{AuditFacts, args_sha256};
use crate::config::{EXEC_TOOL, ExecGrant, Grant};
use crate::secrets::{Secrets, Template};
use crate::tool::{CallContext, CallFuture, Tool, ToolError, ToolOutput};
use binds::Binds;
use bxsandbox::{ExecRule, ProbeOptions, Spec, Walls};
use proto::ToolSchema;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// The most bytes of `stdin` one call may feed (1 MiB).
pub const MAX_STDIN_BYTES: usize = 1024 * 1024;
/// How long before `limits.call_timeout_ms` a run is stopped, so its outcome is still
/// reported (milliseconds).
pub const TIMEOUT_SLACK_MS: u64 = 500;

const PARAMS: [Param; 4] = [
    Param {
        name: "argv",
        kind: Kind::Strings,
        required: true,
        description: "The program and its arguments, e.g. [\"wc\", \"-l\", \"notes.txt\"]. \
                      Not a shell line: no pipes or globs.",
    },
    Param {
        name: "cwd",
        kind: Kind::String,
        required: false,
        description: "Absolute working directory under a granted one. Default (or empty): \
                      the first read-write one.",
    },
    Param {
        name: "stdin",
        kind: Kind::String,
        required: false,
        description: "Text for its standard input.",
    },
    Param {
        name: "timeout_ms",
        kind: Kind::Count,
        required: false,
        description: "Milliseconds before it is stopped, at most the grant's limit. \
                      Default (or 0): that limit.",
    },
];

/// A stream capped at `max_output_bytes` may end in the start of a secret the program printed
/// (`printenv` of a grant's env, padded by the model to put the cut there); that start is
/// redacted here, where the cut is known. Whole values are redacted by the broker.
fn redact_cut_end(output: &mut bxsandbox::Output, secrets: &crate::secrets::Secrets) {
    if output.truncated {
        let kept = String::from_utf8_lossy(&output.bytes).into_owned();
        let redacted = secrets.guard().redact_cut(&kept);
        if !redacted.names.is_empty() {
            output.bytes = redacted.text.into_owned().into_bytes();
        }
    }
}

/// Starts bubblewrap registered with brokerd's `reaper`: brokerd reaps the zombie children it
/// did not spawn, and would otherwise take bubblewrap's exit status, failing the run (or the
/// probe) with ECHILD.
pub fn registered_spawner() -> bxsandbox::Spawner {
    bxsandbox::Spawner::new(|command| {
        crate::reaper::spawn_registered(|| command.spawn(), tokio::process::Child::id)
    })
}

/// Whether the sandbox can be made here: the walls a probe found, or why not.
#[derive(Debug, Clone)]
pub enum Sandbox {
    /// The probe made a trial sandbox: `exec` runs inside these walls.
    Ready(Walls),
    /// The sandbox cannot be made; `exec` is offered to no one and its calls are denied.
    Unavailable(String),
    /// The probe runs (started once brokerd's socket is bound): `exec` is offered to no one
    /// yet, and nothing runs without walls.
    Probing,
}

impl Default for Sandbox {
    /// Fail closed: a tool set made without a probe has no sandbox.
    fn default() -> Sandbox {
        Sandbox::Unavailable("the sandbox was not probed".to_owned())
    }
}

/// Why a brokerd that no grant lets run `exec` has no sandbox: it does not probe for one.
pub const NOT_PROBED: &str = "not probed, since no grant names exec";
/// What health says of `exec` while the probe runs.
pub const PROBING: &str = "probing";

impl Sandbox {
    /// Whether a brokerd with `grants` probes for a sandbox: only when one of them names
    /// `exec` (the probe's two trial sandboxes cost a cold start ~11 ms that nothing else
    /// could use); else its sandbox is [`NOT_PROBED`].
    pub fn needed_by(grants: &[Grant]) -> bool {
        grants.iter().any(|g| g.tool == EXEC_TOOL)
    }

    /// Probes once (`bxsandbox::probe`) with `options`.
    pub async fn probe(options: &ProbeOptions) -> Sandbox {
        match bxsandbox::probe_with(options, registered_spawner()).await {
            Ok(walls) => Sandbox::Ready(walls),
            Err(unavailable) => Sandbox::Unavailable(unavailable.reason),
        }
    }

    /// The walls for a status line: `bubblewrap + Landlock v4`, `unavailable: REASON`, or
    /// [`PROBING`].
    pub fn describe(&self) -> String {
        match self {
            Sandbox::Ready(walls) => walls.describe(),
            Sandbox::Unavailable(reason) => format!("unavailable: {reason}"),
            Sandbox::Probing => PROBING.to_owned(),
        }
    }

    /// Why the sandbox cannot be made, when a probe found it cannot.
    pub fn unavailable(&self) -> Option<&str> {
        match self {
            Sandbox::Ready(_) | Sandbox::Probing => None,
            Sandbox::Unavailable(reason) => Some(reason),
        }
    }
}

/// The `exec` tool; made only with the walls of a successful probe.
#[derive(Debug, Clone)]
pub struct Exec {
    walls: Walls,
    binds: Arc<Binds>,
    /// Whether runs may go through an overlay here, tried once.
    overlay: overlay_trial::OverlayTrial,
}

impl Exec {
    /// The tool over `walls`, pinning each grant's paths at its first call.
    pub fn new(walls: Walls) -> Exec {
        Exec {
            walls,
            binds: Arc::default(),
            overlay: Arc::default(),
        }
    }

    /// The tool over `walls`, with the paths of `grants`' exec grants pinned now (brokerd's
    /// start): what each call binds is what they named then.
    pub fn with_grants(walls: Walls, grants: &[Grant]) -> Exec {
        Exec {
            walls,
            binds: Arc::new(Binds::pin_grants(grants)),
            overlay: Arc::default(),
        }
    }
}

/// A call's arguments, checked.
struct Call {
    argv: Vec<String>,
    cwd: Option<PathBuf>,
    stdin: Vec<u8>,
    timeout_ms: u64,
}

impl Tool for Exec {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: EXEC_TOOL.to_owned(),
            description: "Run a program in a sandbox; returns its exit status, stdout and \
                          stderr."
                .to_owned(),
            parameters: args::schema(&PARAMS),
        }
    }

    fn check(&self, arguments: &Value, ctx: CallContext<'_>) -> Result<(), ToolError> {
        checked(arguments, ctx).map(|_| ())
    }

    fn audit_facts(&self, arguments: &Value, content: Option<&str>) -> AuditFacts {
        AuditFacts {
            argv_sha256: arguments
                .get("argv")
                .map(|argv| args_sha256(&argv.to_string())),
            exit: content.and_then(report::status_of).map(str::to_owned),
        }
    }

    fn call<'a>(&'a self, arguments: &'a Value, ctx: CallContext<'a>) -> CallFuture<'a> {
        Box::pin(async move {
            let call = checked(arguments, ctx)?;
            let mut spec = spec(call, &ctx.grant.exec, ctx.secrets, &self.binds)?;
            spec.networks = networks(ctx.grant)?;
            let watch = changes::watch(&ctx, &mut spec, &self.walls, &self.overlay).await?;
            let ran = bxsandbox::run(&spec, &self.walls).await;
            let note = changes::finish(watch).await;
            let mut outcome =
                ran.map_err(|e| ToolError::Failed(format!("exec could not run the program: {e}")))?;
            redact_cut_end(&mut outcome.stdout, ctx.secrets);
            redact_cut_end(&mut outcome.stderr, ctx.secrets);
            let mut content = report::text(&outcome);
            content.push_str(note.as_deref().unwrap_or_default());
            Ok(ToolOutput {
                content,
                truncated: outcome.stdout.truncated || outcome.stderr.truncated,
            })
        })
    }
}

/// The arguments, checked against the schema and the grant; `argv[0]` replaced by the
/// absolute path of the program that may run.
fn checked(arguments: &Value, ctx: CallContext<'_>) -> Result<Call, ToolError> {
    let args = args::check(arguments, &PARAMS)?;
    let given = args.strings("argv").unwrap_or_default();
    let grant = &ctx.grant.exec;
    let stdin = args.str("stdin").unwrap_or_default();
    // Before the program is looked up: an attempt is denied as a leak whether or not the
    // program it names exists here.
    if grant.network {
        no_leak(&given, stdin, ctx.secrets)?;
    }
    let program = program::allowed(&given, grant)?;
    let mut argv: Vec<String> = given.iter().map(|a| (*a).to_owned()).collect();
    argv[0] = program.path;
    // Small local models fill every optional key with its empty value (Qwen2.5-Coder-0.5B
    // sends `"cwd": ""` and `"timeout_ms": 0` with every call): those mean "not given".
    let cwd = match args.str("cwd").filter(|cwd| !cwd.is_empty()) {
        Some(cwd) if !cwd.starts_with('/') => {
            return Err(ToolError::InvalidArguments(format!(
                "key \"cwd\" must be an absolute path, not {cwd:?}"
            )));
        }
        cwd => cwd.map(PathBuf::from),
    };
    if stdin.len() > MAX_STDIN_BYTES {
        return Err(ToolError::InvalidArguments(format!(
            "key \"stdin\" is {} bytes; the most is {MAX_STDIN_BYTES}",
            stdin.len()
        )));
    }
    let limit = grant
        .timeout_ms
        .unwrap_or(bxsandbox::spec::DEFAULT_TIMEOUT_MS);
    let timeout_ms = match args.count("timeout_ms").filter(|asked| *asked != 0) {
        Some(asked) if asked > limit => {
            return Err(ToolError::InvalidArguments(format!(
                "key \"timeout_ms\" is {asked}; this grant allows at most {limit}"
            )));
        }
        Some(asked) => asked,
        None => limit,
    };
    let call_limit = ctx.timeout_ms.saturating_sub(TIMEOUT_SLACK_MS).max(1);
    Ok(Call {
        argv,
        cwd,
        stdin: stdin.as_bytes().to_vec(),
        timeout_ms: timeout_ms.min(call_limit),
    })
}

/// Denies a call whose `argv` or `stdin` carries a secret (under a grant with network).
fn no_leak(argv: &[&str], stdin: &str, secrets: &Secrets) -> Result<(), ToolError> {
    let guard = secrets.guard();
    for (i, arg) in argv.iter().enumerate() {
        if let Some(name) = guard.find(arg.as_bytes()) {
            return Err(ToolError::leak(name, &format!("argv[{i}]")));
        }
    }
    match guard.find(stdin.as_bytes()) {
        Some(name) => Err(ToolError::leak(name, "stdin")),
        None => Ok(()),
    }
}

/// The grant's `networks`: the non-global networks a run with network may reach too (the
/// config check refused any the sandbox cannot honour).
fn networks(grant: &Grant) -> Result<Vec<ipnet::IpNet>, ToolError> {
    grant
        .networks
        .iter()
        .map(|n| {
            crate::config::parse_network(n)
                .map_err(|e| ToolError::Failed(format!("exec's grant lists networks {n:?}: {e}")))
        })
        .collect()
}

/// The grant's `env` with its `{secret:NAME}` placeholders filled from `secrets`.
fn env(grant: &ExecGrant, secrets: &Secrets) -> Result<Vec<(String, String)>, ToolError> {
    grant
        .env
        .iter()
        .map(|(name, value)| {
            let filled = Template::parse(value)
                .map_err(|e| e.to_string())
                .and_then(|t| t.render(secrets).map_err(|e| e.to_string()))
                .map_err(|why| {
                    ToolError::Failed(format!("exec cannot set env {name} of its grant: {why}"))
                })?;
            Ok((name.clone(), filled))
        })
        .collect()
}

/// The sandbox spec of `call` under `grant`, its `env` filled from `secrets`, its paths the
/// ones pinned in `binds`.
fn spec(
    call: Call,
    grant: &ExecGrant,
    secrets: &Secrets,
    binds: &Binds,
) -> Result<Spec, ToolError> {
    let mut spec = Spec::new(call.argv);
    // A shell grant exists to run programs from a shell; any other runs its program only.
    spec.exec_rule = if grant.shell {
        ExecRule::Any
    } else {
        ExecRule::ProgramOnly
    };
    spec.cwd = call.cwd;
    spec.stdin = call.stdin;
    spec.env = env(grant, secrets)?;
    spec.ro_paths = binds.all("ro_paths", &grant.ro_paths)?;
    spec.rw_paths = binds.all("rw_paths", &grant.rw_paths)?;
    spec.network = grant.network;
    spec.timeout_ms = call.timeout_ms;
    if let Some(cap) = grant.max_output_bytes {
        spec.max_output_bytes = cap;
    }
    if let Some(mb) = grant.memory_mb {
        spec.memory_mb = mb;
    }
    if let Some(n) = grant.max_processes {
        spec.max_processes = n;
    }
    Ok(spec)
}
