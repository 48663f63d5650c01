//! boxctl's command line and its exit codes.

use crate::client::DEFAULT_SOCKET;
use crate::limits::{CONNECT_TIMEOUT_MS, RESPONSE_TIMEOUT_MS, STREAM_IDLE_TIMEOUT_MS, Timeouts};
use bxcore::{ApprovalId, SessionId, TaskId};
use clap::{Parser, Subcommand};
use clap_complete::Shell;
use std::path::PathBuf;

/// Success: the command did what it says; for `task`, the turn ended `done`.
pub const EXIT_OK: u8 = 0;
/// The turn did not finish (failed, cancelled, max_steps, interrupted), or loopd refused the
/// request for any reason not listed below.
pub const EXIT_FAILED: u8 = 1;
/// loopd is not running at the socket, cannot be connected to, or went away.
pub const EXIT_UNREACHABLE: u8 = 2;
/// The session is busy: its queue of waiting tasks is full; or, for `schedule run`, the
/// schedule's previous run still goes (HTTP 409).
pub const EXIT_BUSY: u8 = 3;
/// No such session (HTTP 404).
pub const EXIT_UNKNOWN_SESSION: u8 = 4;
/// No call waits under that approval id (HTTP 404 from `approve`/`deny`): it was answered
/// already, timed out, was void, or never asked.
pub const EXIT_NO_APPROVAL: u8 = 5;
/// No schedule has that name (HTTP 404 from `schedule run|pause|resume`).
pub const EXIT_NO_SCHEDULE: u8 = 6;
/// A budget of the owner's (`[budgets]` in loopd.toml): the turn stopped at one (it ended
/// `budget`), or loopd refused the task because the day's budget is spent (HTTP 429, kind
/// `budget`) until the day turns.
pub const EXIT_BUDGET: u8 = 7;
/// loopd did not answer in time: no connection within `--connect-timeout-ms`, no answer
/// within `--response-timeout-ms` (nor to a status request while a task waited for its turn),
/// or an event stream silent, not even pinged, for `--stream-idle-timeout-ms`. loopd may be
/// stuck; a turn may go on in it.
pub const EXIT_TIMEOUT: u8 = 8;
/// The command line was wrong; or `task -` read no text, too much, or text not UTF-8.
pub const EXIT_USAGE: u8 = 64;

/// The longest a command's one-line summary (its `about`, in `boxctl --help`'s list) may be,
/// in characters.
pub const MAX_ABOUT_CHARS: usize = 60;

/// The exit codes, as every command's `--help` ends (one list for all of them).
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0   done (for task: the turn ended done)
  1   the turn failed, was cancelled, hit max_steps or was interrupted; or another error
  2   loopd is not running at the socket, cannot be reached, or went away
  3   the session is busy: its queue is full; or the schedule's previous run still goes
  4   no such session
  5   no such approval: answered, timed out, or never asked
  6   no such schedule
  7   a budget: the turn stopped at one, or the day's budget is spent (refused until the day turns)
  8   loopd did not answer in time (see the --*-timeout-ms limits): it may be stuck; a turn may go on
  64  the command line was wrong (or `task -` read no text, too much, or not UTF-8)

With --json, an error is also one JSON object on stdout:
  {\"error\":{\"code\":N,\"kind\":\"...\",\"message\":\"...\"}}
loopd's error answer as it came, or boxctl's own (code 0; kind unreachable, lost, timed_out,
protocol, usage or local). NO_COLOR (not empty) turns styling off (CLICOLOR_FORCE=1 forces it).";

/// boxctl drives a boxmaker appliance through loopd's Unix socket.
///
/// Styling (the dimmed reasoning; clap's help and errors) is on only on a terminal, and off
/// whenever NO_COLOR is set to anything but the empty string (no-color.org).
#[derive(Debug, Parser)]
#[command(name = "boxctl", version, after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// loopd's socket [env: BOXCTL_SOCKET; default: /run/boxmaker/loopd.sock].
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        env = "BOXCTL_SOCKET",
        default_value = DEFAULT_SOCKET,
        hide_default_value = true,
        hide_env = true
    )]
    pub socket: PathBuf,
    /// Print loopd's answers as JSON (one JSON document a line) for scripts; an error too,
    /// as one JSON object on stdout (see below).
    #[arg(long, global = true)]
    pub json: bool,
    /// Give up (exit 8) when connecting to loopd takes longer, in milliseconds [env:
    /// BOXCTL_CONNECT_TIMEOUT_MS; default: 5000].
    #[arg(
        long,
        global = true,
        value_name = "MS",
        env = "BOXCTL_CONNECT_TIMEOUT_MS",
        default_value_t = CONNECT_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..),
        hide_default_value = true,
        hide_env = true
    )]
    pub connect_timeout_ms: u64,
    /// Give up (exit 8) when loopd's answer takes longer, in milliseconds: the whole answer,
    /// or an event stream's start. A task waiting for a busy session's turn waits on as long
    /// as loopd answers a status request within this [env: BOXCTL_RESPONSE_TIMEOUT_MS;
    /// default: 30000].
    #[arg(
        long,
        global = true,
        value_name = "MS",
        env = "BOXCTL_RESPONSE_TIMEOUT_MS",
        default_value_t = RESPONSE_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..),
        hide_default_value = true,
        hide_env = true
    )]
    pub response_timeout_ms: u64,
    /// Give up (exit 8) when an event stream (`task`, `show --follow`) brings nothing for
    /// longer, in milliseconds; loopd pings an idle stream every 15 s [env:
    /// BOXCTL_STREAM_IDLE_TIMEOUT_MS; default: 45000, three pings].
    #[arg(
        long,
        global = true,
        value_name = "MS",
        env = "BOXCTL_STREAM_IDLE_TIMEOUT_MS",
        default_value_t = STREAM_IDLE_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..),
        hide_default_value = true,
        hide_env = true
    )]
    pub stream_idle_timeout_ms: u64,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The limits the command line (or the environment) set.
    pub fn timeouts(&self) -> Timeouts {
        Timeouts {
            connect_ms: self.connect_timeout_ms,
            response_ms: self.response_timeout_ms,
            stream_idle_ms: self.stream_idle_timeout_ms,
        }
    }
}

/// boxctl's commands. Each `about` (the first paragraph, shown in `boxctl --help`'s list) is
/// one line of at most [`MAX_ABOUT_CHARS`]; the rest is `long_about`, shown by `--help`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a task and stream the answer
    ///
    /// Tool calls and their results print one line each. `boxctl task -` reads the text from
    /// stdin instead (at most 512 KiB of UTF-8; then nothing is asked at the prompt, since
    /// stdin is spent). Ctrl-C stops watching; the turn goes on in loopd (`boxctl cancel ID`
    /// stops it).
    #[command(after_help = EXIT_CODES_HELP)]
    Task {
        /// The session to run it in (a new session when absent).
        #[arg(long, value_name = "ID")]
        session: Option<SessionId>,
        /// Show the model's reasoning too (dimmed on a terminal, unless NO_COLOR is set).
        #[arg(long)]
        reasoning: bool,
        /// Name the task (1 to 48 of A-Z a-z 0-9 . _ -). Submitting it again with the same id
        /// (when loopd gave no answer) answers the first one's turn instead of running it
        /// twice; without --session it runs in session task-ID. Default: a new id each time.
        #[arg(long, value_name = "ID")]
        task_id: Option<TaskId>,
        /// What to ask; the words are joined with spaces. `-` alone: read it from stdin.
        #[arg(value_name = "TEXT", required = true, num_args = 1..)]
        text: Vec<String>,
    },
    /// Talk with the model in one session, a line at a time
    ///
    /// Each line read from stdin is a task in the same session (a new one unless --session
    /// names one); its answer streams as `boxctl task` streams it. A call that waits for the
    /// owner's approval is asked inline (`approve ID? [y/N]` on stderr) and the next line
    /// answers it. `/quit`, or the end of stdin (Ctrl-D), ends the chat. At a terminal each
    /// message is typed with line editing (arrows, Ctrl-A/E, ...) and up-arrow recalls this
    /// chat's earlier messages; Ctrl-C at the `> ` prompt ends the chat too. The history is
    /// kept in memory only, never in a file: the messages are the owner's private data.
    /// Works with stdin not a terminal too: lines are taken in order, as messages and
    /// answers (plain lines, no editing). Exits 0 when
    /// it ends so, also after a turn that failed (said as it happens); a loopd that is gone,
    /// stuck or has no such session ends it with that exit code.
    #[command(after_help = EXIT_CODES_HELP)]
    Chat {
        /// The session to talk in (a new session when absent).
        #[arg(long, value_name = "ID")]
        session: Option<SessionId>,
        /// Show the model's reasoning too (dimmed on a terminal, unless NO_COLOR is set).
        #[arg(long)]
        reasoning: bool,
    },
    /// List the sessions: turns, records, busy or queued
    #[command(after_help = EXIT_CODES_HELP)]
    Sessions,
    /// Show a session's records, one line each
    ///
    /// With --follow, then follow its events as they happen, until Ctrl-C.
    #[command(after_help = EXIT_CODES_HELP)]
    Show {
        /// The session.
        #[arg(value_name = "ID")]
        id: SessionId,
        /// Then follow its events as they happen, until Ctrl-C.
        #[arg(long)]
        follow: bool,
        /// Show the model's reasoning too.
        #[arg(long)]
        reasoning: bool,
    },
    /// Cancel a session's running turn and drop its queued tasks
    #[command(after_help = EXIT_CODES_HELP)]
    Cancel {
        /// The session.
        #[arg(value_name = "ID")]
        id: SessionId,
    },
    /// Undo a session's last turns and the files they wrote
    ///
    /// The turns leave the conversation, and every file the turns changed through write_file comes back as it was before them,
    /// newest write first; a file the turns made is removed. When a file was changed since
    /// by something else, nothing is undone and the file is named. The turns stay in the
    /// log (`boxctl show`), marked undone; the model no longer sees them.
    #[command(after_help = EXIT_CODES_HELP)]
    Undo {
        /// The session.
        #[arg(value_name = "ID")]
        id: SessionId,
        /// How many of the last turns not undone yet (a second undo takes the turn before).
        #[arg(long, default_value_t = 1, value_name = "N")]
        turns: u64,
        /// List what would be put back, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Start a new session as a copy of one, up to a turn
    ///
    /// The new session's conversation is the old one's up to the end of that turn (the last
    /// ended one by default), with its labels; the old session goes on unchanged. Files are
    /// not forked: both sessions work on the same files.
    #[command(after_help = EXIT_CODES_HELP)]
    Fork {
        /// The session to copy.
        #[arg(value_name = "ID")]
        id: SessionId,
        /// The last turn copied.
        #[arg(long, value_name = "TURN")]
        at: Option<u64>,
        /// The new session's id (loopd names it when absent).
        #[arg(long = "as", value_name = "NEW")]
        new_session: Option<SessionId>,
    },
    /// Show what a session's turns wrote, as unified diffs
    #[command(after_help = EXIT_CODES_HELP)]
    Diff {
        /// The session.
        #[arg(value_name = "ID")]
        id: SessionId,
        /// Only this turn.
        #[arg(long, value_name = "N")]
        turn: Option<u64>,
    },
    /// Compact a session's conversation into a summary now
    ///
    /// Its conversation so far becomes a summary that a new epoch starts from (after the
    /// tasks already queued for it). The model writes the summary; when it cannot, loopd
    /// keeps the first request and the last messages that fit instead, and says so.
    #[command(after_help = EXIT_CODES_HELP)]
    Compact {
        /// The session.
        #[arg(value_name = "ID")]
        id: SessionId,
    },
    /// Show how loopd, the tool broker and the model server are
    #[command(after_help = EXIT_CODES_HELP)]
    Status,
    /// List loopd's memory notes, one line each with its labels
    #[command(after_help = EXIT_CODES_HELP)]
    Memory,
    /// List the heartbeat's notifications, one line each
    ///
    /// The heartbeat's answers that were not HEARTBEAT_OK.
    #[command(after_help = EXIT_CODES_HELP)]
    Notifications,
    /// List a session's tool summaries and epoch carries
    ///
    /// One line each, with its labels.
    #[command(after_help = EXIT_CODES_HELP)]
    Summaries {
        /// The session.
        #[arg(value_name = "ID")]
        id: SessionId,
    },
    /// List the tool calls waiting for the owner's approval
    ///
    /// Across sessions: id, session, tool, how long it has waited, why, and the arguments
    /// whole.
    #[command(after_help = EXIT_CODES_HELP)]
    Approvals,
    /// Approve a call that waits for the owner
    ///
    /// It runs once (with --for-turn, later calls of the same tool in the same turn run
    /// without asking too).
    #[command(after_help = EXIT_CODES_HELP)]
    Approve {
        /// The approval (`boxctl approvals` lists them).
        #[arg(value_name = "ID")]
        id: ApprovalId,
        /// Also let later calls of the same tool in the same turn run without asking.
        #[arg(long)]
        for_turn: bool,
    },
    /// Deny a call that waits for the owner
    ///
    /// It does not run, and the model is told so (with the reason).
    #[command(after_help = EXIT_CODES_HELP)]
    Deny {
        /// The approval (`boxctl approvals` lists them).
        #[arg(value_name = "ID")]
        id: ApprovalId,
        /// Why, for the model to read (at most 1000 bytes).
        #[arg(long, value_name = "TEXT", value_parser = deny_reason)]
        reason: Option<String>,
    },
    /// List the schedules and how their last runs went
    ///
    /// The heartbeat among them: timing, next run, last run and how it went, paused or
    /// disabled.
    #[command(after_help = EXIT_CODES_HELP)]
    Schedules,
    /// Run, pause or resume one schedule
    #[command(after_help = EXIT_CODES_HELP)]
    Schedule {
        /// What to do with it.
        #[command(subcommand)]
        action: ScheduleAction,
    },
    /// Show what the model and the tools cost, per session
    ///
    /// Tokens evaluated, cached and generated, model time, tool calls and turns. Today,
    /// every session, by default; a session alone over its whole life, or one day (in
    /// loopd's `[budgets] timezone`) with --day.
    #[command(after_help = EXIT_CODES_HELP)]
    Usage {
        /// Only this session.
        #[arg(value_name = "SESSION")]
        session: Option<SessionId>,
        /// That day, written YYYY-MM-DD.
        #[arg(long, value_name = "DATE", value_parser = day)]
        day: Option<String>,
    },
    /// Print a one-time sign-in link for the web console
    ///
    /// The console is loopd's `[web] listen`: open the link within the time it says, once.
    /// The link goes to stdout alone.
    #[command(after_help = EXIT_CODES_HELP)]
    Web {
        /// Sign every browser out instead, and void the links not used yet.
        #[arg(long)]
        revoke: bool,
    },
    /// Print a shell completion script to stdout
    #[command(after_help = EXIT_CODES_HELP)]
    Completions {
        /// The shell.
        #[arg(value_name = "SHELL")]
        shell: Shell,
    },
    /// Write boxctl's man pages into a directory
    ///
    /// boxctl.1 and one page per command (boxctl-task.1, boxctl-schedule-run.1, ...), for a
    /// package to install. The directory must exist.
    #[command(hide = true, after_help = EXIT_CODES_HELP)]
    Manpages {
        /// Where to write them.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

/// What `boxctl schedule` does with one schedule.
#[derive(Debug, Subcommand)]
pub enum ScheduleAction {
    /// Run it now, outside its timing
    ///
    /// Also when it is paused; prints the session and turn.
    #[command(after_help = EXIT_CODES_HELP)]
    Run {
        /// The schedule (`boxctl schedules` lists them).
        #[arg(value_name = "NAME", value_parser = schedule_name)]
        name: String,
    },
    /// Stop it running by itself
    ///
    /// Kept across restarts; `schedule run` still runs it.
    #[command(after_help = EXIT_CODES_HELP)]
    Pause {
        /// The schedule.
        #[arg(value_name = "NAME", value_parser = schedule_name)]
        name: String,
    },
    /// Let a paused schedule run by itself again
    ///
    /// From its next due time.
    #[command(after_help = EXIT_CODES_HELP)]
    Resume {
        /// The schedule.
        #[arg(value_name = "NAME", value_parser = schedule_name)]
        name: String,
    },
}

impl ScheduleAction {
    /// The schedule it is about.
    pub fn name(&self) -> &str {
        match self {
            ScheduleAction::Run { name }
            | ScheduleAction::Pause { name }
            | ScheduleAction::Resume { name } => name,
        }
    }
}

/// The longest schedule name loopd accepts, in bytes (docs/schedules.md).
pub const MAX_SCHEDULE_NAME_BYTES: usize = 32;

/// Checks a schedule's name against what loopd's config allows before it goes into a request's
/// path: a name loopd cannot have would only come back as a confusing "no such path".
fn schedule_name(text: &str) -> Result<String, String> {
    let max = MAX_SCHEDULE_NAME_BYTES;
    if text.is_empty() || text.len() > max {
        return Err(format!(
            "it is {} bytes long; a schedule's name is 1 to {max} bytes",
            text.len()
        ));
    }
    if let Some(bad) = text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "{text:?} contains {bad:?}; only A-Z a-z 0-9 . _ - are allowed"
        ));
    }
    if text == "." || text == ".." {
        return Err(format!("{text:?} is not a schedule's name"));
    }
    Ok(text.to_string())
}

/// Checks a day before it goes into the query: `YYYY-MM-DD`, a date that exists.
fn day(text: &str) -> Result<String, String> {
    let refused = || format!("{text:?} is not a date written YYYY-MM-DD");
    let date: chrono::NaiveDate = text.parse().map_err(|_| refused())?;
    if date.to_string() != text {
        return Err(refused());
    }
    Ok(text.to_string())
}

/// Checks a denial's reason against loopd's limit before anything is sent.
fn deny_reason(text: &str) -> Result<String, String> {
    let max = proto::api::MAX_DENY_REASON_BYTES;
    if text.len() > max {
        return Err(format!(
            "the reason is {} bytes long; the limit is {max}",
            text.len()
        ));
    }
    Ok(text.to_string())
}
