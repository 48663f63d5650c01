//! Helpers for the end-to-end tests: find the workspace's built binaries, run them as child
//! processes that are killed when dropped, and wait (bounded) for what they print.

pub mod browser;
pub mod prometheus;
pub mod real;
pub mod rpc;
pub mod synapse;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The daemons' log level in tests: problems only, so test output stays readable.
pub const DAEMON_LOG_LEVEL: &str = "warn";

/// How long a test waits for a child to say it is ready.
pub const READY_TIMEOUT_MS: u64 = 20_000;

/// The directory of the workspace's debug binaries (`target/debug`), found from the test's own
/// executable (`target/debug/deps/<test>`), so `CARGO_TARGET_DIR` is honoured.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target/debug"))
}

/// The path of binary `name`; panics with the command to run when it was not built.
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --workspace --bins` first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The workspace root (for `config/` files).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A child process that is killed and reaped when dropped.
pub struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Running {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts `command` with its stdout captured line by line.
    pub fn start(command: Command) -> std::io::Result<Running> {
        Running::start_with_stderr(command, Stdio::inherit())
    }

    /// [`Running::start`] with the child's stderr appended to the file `log` (created if
    /// missing): for a chatty child whose log a test reads, and keeps out of the test's output.
    pub fn start_logged(command: Command, log: &Path) -> std::io::Result<Running> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        Running::start_with_stderr(command, Stdio::from(file))
    }

    fn start_with_stderr(mut command: Command, stderr: Stdio) -> std::io::Result<Running> {
        let mut child = command.stdout(Stdio::piped()).stderr(stderr).spawn()?;
        let stdout: ChildStdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Running { child, lines })
    }

    /// Waits (at most [`READY_TIMEOUT_MS`]) for a line starting with `prefix`; returns the rest.
    pub fn wait_for_line(&self, prefix: &str) -> Option<String> {
        let deadline = std::time::Instant::now() + Duration::from_millis(READY_TIMEOUT_MS);
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            let line = self.lines.recv_timeout(left).ok()?;
            if let Some(rest) = line.strip_prefix(prefix) {
                return Some(rest.trim().to_string());
            }
        }
    }
}

impl Running {
    /// The exit status, if the child has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running appliance for a test: fakellama with a script, loopd on a temporary socket and
/// state dir, driven with the real `boxctl`.
pub struct Stack {
    /// The temporary directory holding sockets, state and configs.
    pub dir: tempfile::TempDir,
    /// loopd's socket.
    pub socket: PathBuf,
    /// The model server's base URL.
    pub llama_url: String,
    /// The model server's process, fakellama or llama-server (None once stopped).
    pub model: Option<Running>,
    /// The loopd process (None once stopped).
    pub loopd: Option<Running>,
    /// loopd's limit on open files (`ulimit -n`), if the test set one.
    pub loopd_max_open_files: Option<u64>,
}

/// How a test wants its stack.
#[derive(Debug, Clone, Default)]
pub struct StackOptions {
    /// fakellama's script (TOML).
    pub script: String,
    /// Extra lines for loopd's config file (TOML, appended).
    pub loopd_toml: String,
    /// Extra fakellama flags.
    pub fakellama_args: Vec<String>,
    /// A limit on loopd's open files (`ulimit -n`), to test what happens near it. None: the
    /// test's own limit.
    pub loopd_max_open_files: Option<u64>,
}

/// A command that runs `program` with at most `max_open_files` open files (`ulimit -n`, set by
/// `sh` before it `exec`s the program, so the process id is the program's).
pub fn with_open_files_limit(program: &Path, max_open_files: u64) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -n {max_open_files} && exec \"$0\" \"$@\""))
        .arg(program);
    command
}

/// `base` with `extra` laid over it, both TOML: a key of `extra` replaces the same key of
/// `base`, and tables are merged key by key, so a test may add to a section the stack writes
/// (`[llama] max_answer_tokens`) without redefining it.
pub fn merged_toml(base: &str, extra: &str) -> std::io::Result<String> {
    let parse = |text: &str| {
        text.parse::<toml::Table>()
            .map_err(|e| std::io::Error::other(format!("not valid TOML: {e}\n{text}")))
    };
    let mut merged = parse(base)?;
    merge_into(&mut merged, parse(extra)?);
    toml::to_string(&merged).map_err(|e| std::io::Error::other(e.to_string()))
}

fn merge_into(base: &mut toml::Table, extra: toml::Table) {
    for (key, value) in extra {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(into)), toml::Value::Table(from)) => merge_into(into, from),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Starts brokerd through `command` (the brokerd binary, or a wrapper that execs it) with the
/// socket `dir/brokerd.sock`, the state dir `dir/brokerd-state` and `rest` (TOML: grants,
/// limits, MCP servers) as the rest of its config in `dir/brokerd.toml`; waits (at most
/// [`READY_TIMEOUT_MS`]) until its socket answers.
pub fn start_brokerd_with(mut command: Command, dir: &Path, rest: &str) -> Running {
    let socket = dir.join("brokerd.sock");
    let config = dir.join("brokerd.toml");
    std::fs::write(
        &config,
        format!(
            "socket = {socket:?}\nstate_dir = {:?}\n{rest}",
            dir.join("brokerd-state")
        ),
    )
    .unwrap_or_else(|e| panic!("cannot write {}: {e}", config.display()));
    command
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", DAEMON_LOG_LEVEL);
    let mut running =
        Running::start(command).unwrap_or_else(|e| panic!("cannot start brokerd: {e}"));
    let deadline = std::time::Instant::now() + Duration::from_millis(READY_TIMEOUT_MS);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        if let Some(status) = running.exited() {
            panic!("brokerd exited ({status}) before serving");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "brokerd did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    running
}

/// [`start_brokerd_with`] the brokerd binary itself.
pub fn start_brokerd(dir: &Path, rest: &str) -> Running {
    start_brokerd_with(Command::new(binary("brokerd")), dir, rest)
}

impl Stack {
    /// Starts fakellama, then loopd, and waits until loopd's socket answers.
    pub fn start(options: StackOptions) -> std::io::Result<Stack> {
        let dir = tempfile::tempdir()?;
        let script = dir.path().join("script.toml");
        std::fs::write(&script, &options.script)?;
        let mut command = Command::new(binary("fakellama"));
        command
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--script")
            .arg(&script)
            .args(&options.fakellama_args)
            .env("RUST_LOG", DAEMON_LOG_LEVEL);
        let fakellama = Running::start(command)?;
        let addr = fakellama
            .wait_for_line("fakellama listening on ")
            .ok_or_else(|| std::io::Error::other("fakellama did not print its address"))?;
        let mut stack = Stack {
            socket: dir.path().join("loopd.sock"),
            llama_url: format!("http://{addr}"),
            model: Some(fakellama),
            loopd: None,
            loopd_max_open_files: options.loopd_max_open_files,
            dir,
        };
        stack.start_loopd(&options.loopd_toml)?;
        Ok(stack)
    }

    /// Starts loopd against a model server that is already running at `llama_url`, with
    /// `extra_toml` in its config; the stack owns `model` and `dir` from now on.
    pub fn with_model(
        dir: tempfile::TempDir,
        model: Running,
        llama_url: String,
        extra_toml: &str,
    ) -> std::io::Result<Stack> {
        let mut stack = Stack {
            socket: dir.path().join("loopd.sock"),
            llama_url,
            model: Some(model),
            loopd: None,
            loopd_max_open_files: None,
            dir,
        };
        stack.start_loopd(extra_toml)?;
        Ok(stack)
    }

    /// Starts loopd against this stack's model server and waits for its socket.
    pub fn start_loopd(&mut self, extra_toml: &str) -> std::io::Result<()> {
        self.start_loopd_with(extra_toml, "")
    }

    /// [`Stack::start_loopd`] with `llama_toml` inside the config's `[llama]` section too
    /// (`extra_toml` comes before it, so it cannot hold `[llama]` keys).
    pub fn start_loopd_with(&mut self, extra_toml: &str, llama_toml: &str) -> std::io::Result<()> {
        let config = self.dir.path().join("loopd.toml");
        let system = workspace_root().join("config/system.md");
        let base = format!(
            "socket = {:?}\nstate_dir = {:?}\n[llama]\nurl = {:?}\n\
             retry_initial_backoff_ms = 20\nretry_max_backoff_ms = 100\nhealth_wait_ms = 10000\n\
             {llama_toml}\n[baseline]\nsystem = {:?}\n",
            self.socket,
            self.dir.path().join("state"),
            self.llama_url,
            system,
        );
        std::fs::write(&config, merged_toml(&base, extra_toml)?)?;
        let mut command = match self.loopd_max_open_files {
            Some(max) => with_open_files_limit(&binary("loopd"), max),
            None => Command::new(binary("loopd")),
        };
        command
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", DAEMON_LOG_LEVEL);
        let mut loopd = Running::start(command)?;
        let deadline = std::time::Instant::now() + Duration::from_millis(READY_TIMEOUT_MS);
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            if let Some(status) = loopd.exited() {
                return Err(std::io::Error::other(format!(
                    "loopd exited ({status}) before serving"
                )));
            }
            if std::time::Instant::now() > deadline {
                drop(loopd);
                return Err(std::io::Error::other(
                    "loopd's socket did not answer in time",
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.loopd = Some(loopd);
        Ok(())
    }

    /// Runs `boxctl --socket <loopd's> ARGS...` to completion.
    pub fn boxctl(&self, args: &[&str]) -> std::process::Output {
        Command::new(binary("boxctl"))
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run boxctl: {e}"))
    }

    /// Starts boxctl against this stack with `args`, its output piped, without waiting.
    pub fn spawn_boxctl(&self, args: &[&str]) -> std::process::Child {
        Command::new(binary("boxctl"))
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run boxctl: {e}"))
    }

    /// The session log of `id`, as text.
    pub fn log_text(&self, id: &str) -> String {
        std::fs::read_to_string(
            self.dir
                .path()
                .join("state/sessions")
                .join(id)
                .join("log.jsonl"),
        )
        .unwrap_or_default()
    }
}

/// A command's output as text, for an assertion's message.
pub fn show(out: &std::process::Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn extra_toml_adds_to_the_stacks_sections_and_replaces_its_keys() {
        let merged = super::merged_toml(
            "socket = \"a\"\n[llama]\nurl = \"u\"\nhealth_wait_ms = 1\n",
            "[llama]\nmax_answer_tokens = 9\nhealth_wait_ms = 2\n[broker]\nsocket = \"b\"\n",
        )
        .unwrap();
        let table: toml::Table = merged.parse().unwrap();
        assert_eq!(table["socket"].as_str(), Some("a"));
        assert_eq!(table["llama"]["url"].as_str(), Some("u"));
        assert_eq!(table["llama"]["max_answer_tokens"].as_integer(), Some(9));
        assert_eq!(table["llama"]["health_wait_ms"].as_integer(), Some(2));
        assert_eq!(table["broker"]["socket"].as_str(), Some("b"));
    }
}
