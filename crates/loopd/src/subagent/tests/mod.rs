#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Subagents against fakellama in-process: the parent's `subagent` call runs a child session
//! whose answer and labels come back as the tool result; depth, per-turn and id limits; a
//! stopped parent stops its child; a failed child is a failed result, not a hung turn.

mod dispatch;

use crate::baseline::{context_labels, tool_names};
use crate::config::Config;
use crate::llama::tests::support::Fake;
use crate::session::{Session, Store};
use crate::subagent::{SUBAGENT, SUBAGENT_PROMPT, registry_for};
use crate::tools::{Registry, ToolPort};
use crate::turn::{Runtime, Stop, TurnError, run_turn, start_turn};
use bxcore::{DataClass, LogRecord, SessionId, ToolOutcome, TurnEnd, TurnEvent};
use proto::{ToolRequest, ToolResponse};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SYSTEM: &str = "You are the parent.";
const CHILD_SYSTEM: &str = "You are a helper.";
/// Well past any test's run: a reply this slow is only ever cut short.
const SLOW_REPLY_MS: u64 = 20_000;
/// How long a cancelled child may take to stop, in all.
const STOP_BOUND: Duration = Duration::from_secs(10);

/// A port that answers every call with untrusted text and, when told, stops the parent the
/// moment a child calls it.
#[derive(Default)]
struct Port {
    seen: Mutex<Vec<ToolRequest>>,
    stop_on_child: Option<std::sync::Arc<Stop>>,
}

impl ToolPort for Port {
    fn call(&self, request: &ToolRequest) -> ToolResponse {
        self.seen.lock().unwrap().push(request.clone());
        if let Some(stop) = &self.stop_on_child
            && request.session.as_str().starts_with("sub-")
        {
            stop.cancel();
        }
        ToolResponse::Result {
            content: "fetched page text".into(),
            class: DataClass::Public,
            untrusted: true,
            truncated: false,
        }
    }
}

struct Bed {
    fake: Fake,
    state: tempfile::TempDir,
    store: Store,
    cfg: Config,
    events: std::cell::RefCell<Vec<TurnEvent>>,
}

impl Bed {
    fn new(script: &str) -> Bed {
        let state = tempfile::tempdir().unwrap();
        std::fs::write(state.path().join("system.md"), SYSTEM).unwrap();
        std::fs::write(state.path().join(SUBAGENT_PROMPT), CHILD_SYSTEM).unwrap();
        let mut cfg = Config::default();
        cfg.baseline.system = state.path().join("system.md");
        cfg.subagent.enabled = true;
        Bed {
            fake: Fake::script(script),
            store: Store::new(state.path()).unwrap(),
            state,
            cfg,
            events: Default::default(),
        }
    }

    fn task(
        &self,
        id: &str,
        text: &str,
        port: &dyn ToolPort,
        stop: &Stop,
    ) -> (Result<TurnEnd, TurnError>, Session) {
        let blocking = self.fake.blocking();
        let client = self.fake.client();
        let sid = SessionId::new(id).unwrap();
        let registry = registry_for(&Registry::m2b(), &sid, &self.cfg);
        let rt = Runtime {
            cfg: &self.cfg,
            models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
            blocking: &blocking,
            port,
            registry: &registry,
            system: SYSTEM,
            n_ctx: fakellama::DEFAULT_N_CTX,
            children: &crate::subagent::Subagents,
            owner: &crate::turn::NoOwner,
            meter: &crate::turn::NoMeter,
        };
        let mut session = self.store.open_or_create(&sid).unwrap();
        start_turn(&mut session, text).unwrap();
        let end = run_turn(&rt, &mut session, stop, &mut |e| {
            self.events.borrow_mut().push(e.clone());
        });
        (end, session)
    }

    fn child(&self, id: &str) -> Session {
        self.store.open(&SessionId::new(id).unwrap()).unwrap()
    }
}

fn results(session: &Session) -> Vec<(String, DataClass, bool, ToolOutcome)> {
    session
        .records()
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult {
                content,
                class,
                untrusted,
                outcome,
                ..
            } => Some((content.clone(), *class, *untrusted, *outcome)),
            _ => None,
        })
        .collect()
}

const PARENT_CALLS: &str = r#"
[[rule]]
when_contains = "PARENT TASK"
times = 1
tool_calls = [{ name = "subagent", arguments = "{\"task\": \"CHILD TASK: fetch it\"}" }]
"#;

#[test]
fn the_childs_answer_and_untrusted_label_come_back_to_the_parent() {
    let script = format!(
        r#"{PARENT_CALLS}
[[rule]]
when_contains = "CHILD TASK"
times = 1
tool_calls = [{{ name = "call_tool", arguments = "{{\"name\": \"echo\", \"arguments\": {{\"text\": \"u\"}}}}" }}]
[[rule]]
when_contains = "fetched page text"
reply = "CHILD ANSWER 42"
[[rule]]
when_contains = "CHILD ANSWER"
times = 1
tool_calls = [{{ name = "call_tool", arguments = "{{\"name\": \"echo\", \"arguments\": {{\"text\": \"w\"}}}}" }}]
"#
    );
    let bed = Bed::new(&script);
    let port = Port::default();
    let (end, parent) = bed.task("p", "PARENT TASK", &port, &Stop::default());
    assert_eq!(end.unwrap(), TurnEnd::Done);
    let got = results(&parent);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].0.contains("CHILD ANSWER 42"), "{got:?}");
    assert!(got[0].2, "the child read untrusted text: {got:?}");
    assert_eq!(got[0].3, ToolOutcome::Ok);
    assert!(context_labels(&parent).untrusted);
    // The child's call went to the port under the child's id, on the subagent slot.
    let seen = port.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].session.as_str(), "sub-p-1");
    // The parent's next call reaches the port (brokerd) with an untrusted context label, so
    // the broker's rules for untrusted contexts (no writes) now apply to the parent.
    assert_eq!(seen[1].session.as_str(), "p");
    assert!(seen[1].context.untrusted, "{:?}", seen[1].context);
    let slots: Vec<Option<usize>> = bed
        .fake
        .server
        .requests()
        .iter()
        .map(|r| r.slot_used)
        .collect();
    assert!(
        slots.contains(&Some(bed.cfg.slots.subagent as usize)),
        "{slots:?}"
    );
    // The child is a session of its own, with subagent.md as its system prompt and no
    // subagent tool at the depth limit (max_depth 1).
    let child = bed.child("sub-p-1");
    let baseline = child.current_baseline().unwrap();
    assert_eq!(baseline.system, CHILD_SYSTEM);
    assert!(!tool_names(baseline).contains(SUBAGENT));
    assert!(tool_names(parent.current_baseline().unwrap()).contains(SUBAGENT));
    assert!(bed.state.path().join("sessions/sub-p-1").is_dir());
    // The child's events reach the parent's stream, wrapped and in order.
    let nested: Vec<TurnEvent> = bed
        .events
        .borrow()
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Subagent { session, event } if session.as_str() == "sub-p-1" => {
                Some((**event).clone())
            }
            _ => None,
        })
        .collect();
    assert!(
        matches!(nested.first(), Some(TurnEvent::Started { .. })),
        "{nested:?}"
    );
    assert!(
        nested
            .iter()
            .any(|e| matches!(e, TurnEvent::ToolCall { .. }))
    );
    assert!(matches!(
        nested.last(),
        Some(TurnEvent::Ended {
            end: TurnEnd::Done,
            ..
        })
    ));
}

#[test]
fn a_child_id_that_would_be_too_long_is_refused_clearly() {
    let script = format!("{PARENT_CALLS}\n[[rule]]\nwhen_role = \"tool\"\nreply = \"ok\"\n");
    let bed = Bed::new(&script);
    let parent_id = "a".repeat(59);
    let (end, parent) = bed.task(
        &parent_id,
        "PARENT TASK",
        &Port::default(),
        &Stop::default(),
    );
    assert_eq!(end.unwrap(), TurnEnd::Done);
    let got = results(&parent);
    assert_eq!(got[0].3, ToolOutcome::Failed);
    assert!(got[0].0.contains("65 bytes"), "{got:?}");
    assert_eq!(bed.store.list().unwrap().len(), 1);
}

#[test]
fn a_turn_starts_at_most_max_children_per_turn() {
    let script = r#"
[[rule]]
when_contains = "PARENT TASK"
times = 1
tool_calls = [{ name = "subagent", arguments = "{\"task\": \"CHILD TASK one\"}" }, { name = "subagent", arguments = "{\"task\": \"CHILD TASK two\"}" }]
[[rule]]
when_contains = "CHILD TASK"
reply = "child ok"
[[rule]]
when_role = "tool"
reply = "parent ok"
"#;
    let mut bed = Bed::new(script);
    bed.cfg.subagent.max_children_per_turn = 1;
    let (end, parent) = bed.task("p", "PARENT TASK", &Port::default(), &Stop::default());
    assert_eq!(end.unwrap(), TurnEnd::Done);
    let got = results(&parent);
    assert_eq!(got[0].0, "child ok");
    assert_eq!(got[1].3, ToolOutcome::Failed);
    assert!(got[1].0.contains("limit"), "{got:?}");
}

#[test]
fn a_failed_child_is_a_failed_result_and_the_parent_goes_on() {
    let script = format!(
        r#"{PARENT_CALLS}
[[rule]]
when_contains = "CHILD TASK"
error = {{ status = 400, type = "invalid_request_error", message = "child broke" }}
[[rule]]
when_role = "tool"
reply = "parent ok"
"#
    );
    let bed = Bed::new(&script);
    let (end, parent) = bed.task("p", "PARENT TASK", &Port::default(), &Stop::default());
    assert_eq!(end.unwrap(), TurnEnd::Done);
    let got = results(&parent);
    assert_eq!(got[0].3, ToolOutcome::Failed);
    assert!(got[0].0.contains("sub-p-1"), "{got:?}");
}

#[test]
fn stopping_the_parent_stops_its_child_mid_call() {
    let script = format!(
        r#"{PARENT_CALLS}
[[rule]]
when_contains = "CHILD TASK"
times = 1
tool_calls = [{{ name = "call_tool", arguments = "{{\"name\": \"echo\", \"arguments\": {{\"text\": \"u\"}}}}" }}]
[[rule]]
when_contains = "fetched page text"
reply = "too late"
delay_ms = {SLOW_REPLY_MS}
"#
    );
    let bed = Bed::new(&script);
    let stop = std::sync::Arc::new(Stop::default());
    let port = Port {
        stop_on_child: Some(stop.clone()),
        ..Port::default()
    };
    let started = Instant::now();
    let (end, parent) = bed.task("p", "PARENT TASK", &port, &stop);
    assert!(started.elapsed() < STOP_BOUND, "{:?}", started.elapsed());
    assert_eq!(end.unwrap(), TurnEnd::Cancelled);
    let got = results(&parent);
    assert_eq!(got[0].3, ToolOutcome::Failed);
    let child = bed.child("sub-p-1");
    assert!(matches!(
        child.records().last(),
        Some(LogRecord::TurnEnd {
            end: TurnEnd::Cancelled,
            ..
        })
    ));
}

/// A port whose answers are private for the parent (`p`) and public for anyone else.
#[derive(Default)]
struct PrivateToParent {
    seen: Mutex<Vec<ToolRequest>>,
}

impl ToolPort for PrivateToParent {
    fn call(&self, request: &ToolRequest) -> ToolResponse {
        self.seen.lock().unwrap().push(request.clone());
        let parent = request.session.as_str() == "p";
        ToolResponse::Result {
            content: if parent {
                "private words"
            } else {
                "public words"
            }
            .into(),
            class: if parent {
                DataClass::Private
            } else {
                DataClass::Public
            },
            untrusted: false,
            truncated: false,
        }
    }
}

#[test]
fn the_child_starts_at_the_parents_label_durably_and_counts_against_its_turn() {
    let echo = r#"tool_calls = [{ name = "call_tool", arguments = "{\"name\": \"echo\", \"arguments\": {\"text\": \"x\"}}" }]"#;
    let script = format!(
        r#"
[[rule]]
when_contains = "PARENT TASK"
times = 1
{echo}
[[rule]]
when_contains = "private words"
times = 1
tool_calls = [{{ name = "subagent", arguments = "{{\"task\": \"CHILD TASK\"}}" }}]
[[rule]]
when_contains = "CHILD TASK"
times = 1
{echo}
[[rule]]
when_contains = "public words"
reply = "CHILD DONE"
[[rule]]
when_contains = "CHILD DONE"
reply = "ok"
"#
    );
    let bed = Bed::new(&script);
    let port = PrivateToParent::default();
    let (end, parent) = bed.task("p", "PARENT TASK", &port, &Stop::default());
    assert_eq!(end.unwrap(), TurnEnd::Done);
    drop(parent);
    // The child's calls carry the parent's label, and count against the parent's turn.
    let seen = port.seen.lock().unwrap().clone();
    let child_call = seen
        .iter()
        .find(|r| r.session.as_str() == "sub-p-2")
        .unwrap();
    assert_eq!(child_call.context.class, DataClass::Private);
    assert_eq!(
        child_call.counts_for,
        Some(proto::TurnRef {
            session: SessionId::new("p").unwrap(),
            turn: 1
        })
    );
    assert_eq!(seen[0].counts_for, None, "the parent counts for itself");
    // Durably: reopened, the child still starts from what it inherited, whatever it read.
    let child = bed.child("sub-p-2");
    assert!(
        matches!(
            &child.records()[1],
            LogRecord::Inherited { parent, class: DataClass::Private, untrusted: false, root_turn: 1, .. }
                if parent.as_str() == "p"
        ),
        "{:?}",
        child.records()[1]
    );
    assert_eq!(context_labels(&child).class, DataClass::Private);
    assert_eq!(child.inherited().class, DataClass::Private);
}
