//! Shared by the compaction and tool-summary tests: fakellama in-process, a session store, the
//! prompt files beside a system prompt, and a port whose `clock` answers like a web fetch.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use crate::config::Config;
use crate::llama::tests::support::Fake;
use crate::session::{Session, Store};
use crate::tools::{Registry, ToolPort};
use crate::turn::{Runtime, Stop, TurnError, run_turn, start_turn};
use bxcore::{DataClass, LogRecord, SessionId, TurnEnd};
use proto::{ToolRequest, ToolResponse};
use serde_json::Value;

/// The system prompt of the tests.
pub const SYSTEM: &str = "You are a test.";
/// What the fetch-like tool answers.
pub const FETCHED: &str = "FETCHED PAGE about otters";
/// A phrase of `config/summarise.md`, for scripts to match summary requests on.
pub const SUMMARY_PHRASE: &str = "Summarise the tool output below";
/// A phrase of `config/compact.md`, for scripts to match compaction requests on.
pub const COMPACT_PHRASE: &str = "is about to be replaced by a summary";
/// Passed as `n_ctx`: compaction is due after the turn. The slot is as roomy as fakellama's,
/// but the threshold is one any turn reaches (a slot smaller than the prompt would also make
/// the turn compact before its calls).
pub const DUE_AFTER_TURN: u32 = 0;
/// A context no test fills (tokens).
pub const ROOMY_N_CTX: u32 = fakellama::DEFAULT_N_CTX;

/// A port that answers every tool (the tests call `echo` through `call_tool`) with untrusted,
/// private text, as a fetch would.
pub struct FetchPort;

impl ToolPort for FetchPort {
    fn call(&self, _request: &ToolRequest) -> ToolResponse {
        ToolResponse::Result {
            content: FETCHED.into(),
            class: DataClass::Private,
            untrusted: true,
            truncated: false,
        }
    }
}

/// fakellama, a store and a config whose prompt files are the shipped ones.
pub struct Bed {
    pub fake: Fake,
    pub store: Store,
    pub cfg: Config,
    _state: tempfile::TempDir,
}

impl Bed {
    /// A bed on `script`, summarising `echo` results.
    pub fn new(script: &str) -> Bed {
        Bed::with_n_ctx(script, ROOMY_N_CTX)
    }

    /// A bed on `script` whose fakellama has slots of `n_ctx` tokens.
    pub fn with_n_ctx(script: &str, n_ctx: u32) -> Bed {
        let state = tempfile::tempdir().unwrap();
        let prompts = state.path().join("prompts");
        std::fs::create_dir(&prompts).unwrap();
        std::fs::write(prompts.join("system.md"), SYSTEM).unwrap();
        std::fs::write(
            prompts.join("compact.md"),
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../config/compact.md"
            )),
        )
        .unwrap();
        std::fs::write(
            prompts.join("summarise.md"),
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../config/summarise.md"
            )),
        )
        .unwrap();
        let mut cfg = Config::default();
        cfg.baseline.system = prompts.join("system.md");
        cfg.compact.summarise = vec!["echo".into()];
        cfg.state_dir = state.path().to_path_buf();
        Bed {
            fake: Fake::start(fakellama::Options {
                script: fakellama::Script::parse(script).unwrap(),
                n_ctx,
                ..Default::default()
            }),
            store: Store::new(state.path()).unwrap(),
            cfg,
            _state: state,
        }
    }

    /// Opens (or creates) session `id`.
    pub fn session(&self, id: &str) -> Session {
        self.store
            .open_or_create(&SessionId::new(id).unwrap())
            .unwrap()
    }

    /// Session `id` made with no turn: a new session is made by its first record (a note).
    pub fn made(&self, id: &str) -> Session {
        let mut session = self.session(id);
        session
            .append(LogRecord::Note {
                time: bxcore::Timestamp::now(),
                text: "made".into(),
            })
            .unwrap();
        session
    }

    /// Runs `f` with a runtime over this bed's fakellama and `n_ctx` (or [`DUE_AFTER_TURN`]).
    pub fn with_rt<T>(&self, n_ctx: u32, f: impl FnOnce(&Runtime<'_>) -> T) -> T {
        let blocking = self.fake.blocking();
        let client = self.fake.client();
        let registry = Registry::m2b();
        let mut cfg = self.cfg.clone();
        let n_ctx = if n_ctx == DUE_AFTER_TURN {
            cfg.compact.threshold = f64::MIN_POSITIVE;
            ROOMY_N_CTX
        } else {
            n_ctx
        };
        let rt = Runtime {
            cfg: &cfg,
            models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
            blocking: &blocking,
            port: &FetchPort,
            registry: &registry,
            system: SYSTEM,
            n_ctx,
            children: &crate::subagent::Subagents,
            owner: &crate::turn::NoOwner,
            meter: &crate::turn::NoMeter,
        };
        f(&rt)
    }

    /// Runs one task on `session` (`finish_turn` included).
    pub fn task(
        &self,
        session: &mut Session,
        text: &str,
        n_ctx: u32,
    ) -> Result<TurnEnd, TurnError> {
        self.with_rt(n_ctx, |rt| {
            start_turn(session, text).unwrap();
            run_turn(rt, session, &Stop::default(), &mut |_| {})
        })
    }

    /// The recorded request bodies whose last message contains `phrase`.
    pub fn bodies_with(&self, phrase: &str) -> Vec<(Value, Option<usize>)> {
        self.fake
            .server
            .requests()
            .into_iter()
            .filter(|r| last_content(&r.body).contains(phrase))
            .map(|r| (r.body, r.slot_used))
            .collect()
    }
}

impl Bed {
    /// The recorded compaction requests, in order.
    pub fn compaction_requests(&self) -> Vec<fakellama::RecordedRequest> {
        self.fake
            .server
            .requests()
            .into_iter()
            .filter(|r| last_content(&r.body).contains(COMPACT_PHRASE))
            .collect()
    }
}

/// The content of a request body's last message.
pub fn last_content(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The kinds of a session's records.
pub fn kinds(session: &Session) -> Vec<&'static str> {
    session.records().iter().map(LogRecord::kind).collect()
}

/// A script: the first user message containing `fetch` calls `echo` through `call_tool`; summaries answer `SUMMARY OF OTTERS`;
/// compactions answer `compaction` (or the rule given); everything else answers `done`.
pub fn script(compaction_rule: &str) -> String {
    format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "{SUMMARY_PHRASE}"
reply = "SUMMARY OF OTTERS"
[[rule]]
when_contains = "{COMPACT_PHRASE}"
{compaction_rule}
[[rule]]
when_role = "user"
when_contains = "fetch"
times = 1
tool_calls = [{{ name = "call_tool", arguments = "{{\"name\":\"echo\",\"arguments\":{{\"text\":\"x\"}}}}" }}]
"#
    )
}

impl Bed {
    /// An engine over this bed (its config, fakellama, the fake tools, a roomy slot) whose
    /// spending goes to `meter`.
    pub fn engine(&self, meter: &std::sync::Arc<crate::meter::Meter>) -> crate::engine::Engine {
        self.engine_with_port(meter, std::sync::Arc::new(crate::tools::FakeTools::new()))
    }

    /// [`Bed::engine`] with `port` for the tools loopd does not answer (and undo, diff).
    pub fn engine_with_port(
        &self,
        meter: &std::sync::Arc<crate::meter::Meter>,
        port: std::sync::Arc<dyn crate::tools::ToolPort>,
    ) -> crate::engine::Engine {
        use std::sync::Arc;
        crate::engine::Engine::new(crate::engine::EngineParts {
            cfg: self.cfg.clone(),
            store: Store::new(&self.cfg.state_dir).unwrap(),
            port,
            tools: crate::engine::ToolSource::Fake(Registry::m2b()),
            system: SYSTEM.into(),
            models: Arc::new(crate::route::Router::single(
                self.fake.client(),
                &crate::config::Slots::default(),
                crate::llama::ServerInfo {
                    n_ctx: ROOMY_N_CTX,
                    total_slots: 3,
                    model: "fakellama".into(),
                    model_path: String::new(),
                    build_info: String::new(),
                },
            )),
            blocking: self.fake.blocking(),
            meter: Arc::clone(meter),
        })
    }
}

/// How long [`run_task`] waits for a turn to end.
pub const TASK_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Submits `text` on session `id` of `engine` and waits (at most [`TASK_WAIT`]) for its turn
/// to end.
pub async fn run_task(engine: &crate::engine::Engine, id: &SessionId, text: &str) {
    use crate::api::Backend;
    let mut submitted = engine
        .submit(proto::api::TaskRequest {
            session: Some(id.clone()),
            text: text.into(),
            task_id: None,
            overheard: Vec::new(),
        })
        .await
        .unwrap();
    loop {
        let event = tokio::time::timeout(TASK_WAIT, submitted.events.recv())
            .await
            .expect("the turn ended in time")
            .expect("the turn's events");
        if matches!(event, bxcore::TurnEvent::Ended { .. }) {
            return;
        }
    }
}

/// How often [`until`] looks again.
const UNTIL_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// Waits until `ready` holds, at most [`TASK_WAIT`].
pub async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + TASK_WAIT;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not happen in time"
        );
        tokio::time::sleep(UNTIL_POLL).await;
    }
}
