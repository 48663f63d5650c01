#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every log record and turn event round-trips through JSON; unknown fields are refused.

use bxcore::{
    CallId, DataClass, DenyReason, LOG_FORMAT_VERSION, LogRecord, SessionId, Timestamp, ToolCall,
    ToolOutcome, TurnEnd, TurnEvent, Usage, denial_message,
};

fn t() -> Timestamp {
    Timestamp::parse("2026-11-29T22:51:03.5Z").unwrap()
}

fn every_record() -> Vec<LogRecord> {
    let call = ToolCall {
        id: "Xy1".into(),
        name: "clock".into(),
        arguments: "{}".into(),
    };
    let mut records = vec![
        LogRecord::Header {
            version: LOG_FORMAT_VERSION,
            session: SessionId::new("main").unwrap(),
            time: t(),
        },
        LogRecord::EpochStart {
            time: t(),
            epoch: 1,
            carry: "so far".into(),
            class: DataClass::Private,
            untrusted: true,
        },
        LogRecord::User {
            time: t(),
            turn: 1,
            content: "hi".into(),
            task_id: None,
        },
        LogRecord::Assistant {
            time: t(),
            content: String::new(),
            reasoning: Some("think".into()),
            tool_calls: vec![call],
            usage: Some(Usage {
                prompt_tokens: 237,
                completion_tokens: 35,
                cached_tokens: 236,
            }),
        },
        LogRecord::Assistant {
            time: t(),
            content: "plain".into(),
            reasoning: None,
            tool_calls: vec![],
            usage: None,
        },
        LogRecord::PartialAnswer {
            time: t(),
            content: "It is".into(),
            reasoning: Some("the clock said".into()),
        },
        LogRecord::PartialAnswer {
            time: t(),
            content: String::new(),
            reasoning: None,
        },
        LogRecord::ToolSummary {
            time: t(),
            call: CallId(3),
            tool_call_id: "Xy1".into(),
            content: "short".into(),
            class: DataClass::Internal,
            untrusted: true,
        },
        LogRecord::Note {
            time: t(),
            text: "recovered".into(),
        },
    ];
    for outcome in [
        ToolOutcome::Ok,
        ToolOutcome::Failed,
        ToolOutcome::Denied {
            reason: DenyReason::Egress,
        },
        ToolOutcome::Redirected,
    ] {
        records.push(LogRecord::ToolResult {
            time: t(),
            call: CallId(3),
            tool_call_id: "Xy1".into(),
            content: "2026".into(),
            class: DataClass::Public,
            untrusted: false,
            truncated: true,
            outcome,
            by_loopd: false,
        });
    }
    for end in [
        TurnEnd::Done,
        TurnEnd::Cancelled,
        TurnEnd::Failed {
            reason: "boom".into(),
        },
        TurnEnd::MaxSteps,
        TurnEnd::Interrupted,
    ] {
        records.push(LogRecord::TurnEnd {
            time: t(),
            turn: 1,
            end,
        });
    }
    records
}

#[test]
fn every_record_round_trips() {
    for record in every_record() {
        let text = serde_json::to_string(&record).unwrap();
        assert!(
            text.starts_with(&format!("{{\"type\":\"{}\"", record.kind())),
            "{text}"
        );
        let back: LogRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, record, "{text}");
    }
}

#[test]
fn unknown_fields_are_refused_at_every_level() {
    for record in every_record() {
        let mut value = serde_json::to_value(&record).unwrap();
        value["surprise"] = serde_json::json!(1);
        let err = serde_json::from_value::<LogRecord>(value).unwrap_err();
        assert!(err.to_string().contains("surprise"), "{err}");
    }
    let nested = r#"{"type":"turn_end","time":"2026-11-29T22:51:03Z","turn":1,
        "end":{"failed":{"reason":"x","extra":true}}}"#;
    assert!(serde_json::from_str::<LogRecord>(nested).is_err());
    let in_call = r#"{"type":"assistant","time":"2026-11-29T22:51:03Z","content":"",
        "tool_calls":[{"id":"a","name":"b","arguments":"{}","x":1}]}"#;
    assert!(serde_json::from_str::<LogRecord>(in_call).is_err());
    let unknown_type = r#"{"type":"mystery","time":"2026-11-29T22:51:03Z"}"#;
    assert!(serde_json::from_str::<LogRecord>(unknown_type).is_err());
}

#[test]
fn every_event_round_trips() {
    let events = vec![
        TurnEvent::Started {
            session: SessionId::new("s").unwrap(),
            turn: 2,
        },
        TurnEvent::Content { text: "a".into() },
        TurnEvent::Reasoning { text: "b".into() },
        TurnEvent::Retry {
            attempt: 1,
            delay_ms: 100,
            error: "503".into(),
        },
        TurnEvent::ModelDone {
            usage: Usage::default(),
            model_us: 1_500,
            timings: Some(bxcore::ModelTimings {
                cache_n: 236,
                prompt_n: 1,
                prompt_ms: 30.5,
                predicted_n: 35,
                predicted_ms: 661.0,
            }),
        },
        TurnEvent::ToolCall {
            call: CallId(1),
            tool_call: ToolCall {
                id: "i".into(),
                name: "echo".into(),
                arguments: "{\"text\":\"x\"}".into(),
            },
        },
        TurnEvent::ToolResult {
            call: CallId(1),
            outcome: ToolOutcome::Ok,
            class: DataClass::Secret,
            untrusted: false,
            truncated: false,
            bytes: 1,
        },
        TurnEvent::Ended {
            turn: 2,
            end: TurnEnd::MaxSteps,
            context: Default::default(),
        },
        TurnEvent::Subagent {
            session: SessionId::new("sub-s-1").unwrap(),
            event: Box::new(TurnEvent::Content { text: "c".into() }),
        },
    ];
    for event in events {
        let text = serde_json::to_string(&event).unwrap();
        assert_eq!(serde_json::from_str::<TurnEvent>(&text).unwrap(), event);
        let mut value = serde_json::to_value(&event).unwrap();
        value["surprise"] = serde_json::json!(1);
        assert!(
            serde_json::from_value::<TurnEvent>(value).is_err(),
            "{text}"
        );
    }
}

#[test]
fn timestamps_are_utc_rfc3339() {
    let local = Timestamp::parse("2026-11-30T01:00:00+02:00").unwrap();
    assert_eq!(local.to_rfc3339(), "2026-11-29T23:00:00Z");
    assert_eq!(
        serde_json::to_string(&local).unwrap(),
        "\"2026-11-29T23:00:00Z\""
    );
    let err = Timestamp::parse("yesterday").unwrap_err().to_string();
    assert!(
        err.contains("timestamp") && err.contains("yesterday"),
        "{err}"
    );
    assert!(Timestamp::now().to_rfc3339().ends_with('Z'));
}

#[test]
fn invalid_arguments_reads_exactly_as_the_seed_says() {
    assert_eq!(
        denial_message(DenyReason::InvalidArguments, Some("unknown field: x")),
        "Denied: the arguments are not valid for this tool: unknown field: x."
    );
    assert_eq!(
        denial_message(DenyReason::InvalidArguments, None),
        "Denied: the arguments are not valid for this tool."
    );
}

#[test]
fn every_reason_is_a_clear_sentence() {
    let reasons = [
        DenyReason::NoGrant,
        DenyReason::InvalidArguments,
        DenyReason::Egress,
        DenyReason::UntrustedContext,
        DenyReason::PathNotAllowed,
        DenyReason::HostNotAllowed,
        DenyReason::RateLimit,
        DenyReason::UnknownTool,
    ];
    let mut seen = std::collections::HashSet::new();
    for reason in reasons {
        let text = denial_message(reason, None);
        assert!(
            text.starts_with("Denied: ") && text.ends_with('.'),
            "{text}"
        );
        assert!(
            seen.insert(text.clone()),
            "two reasons read the same: {text}"
        );
        let detailed = denial_message(reason, Some("/etc/shadow"));
        assert!(detailed.ends_with(": /etc/shadow."), "{detailed}");
    }
}

#[test]
fn ends_and_outcomes_have_a_strict_shape() {
    let done = r#"{"type":"turn_end","time":"2026-11-29T22:51:03Z","turn":1,"end":"done"}"#;
    assert!(serde_json::from_str::<LogRecord>(done).is_ok());
    let two_keys = r#"{"type":"turn_end","time":"2026-11-29T22:51:03Z","turn":1,
        "end":{"failed":{"reason":"x"},"done":null}}"#;
    assert!(serde_json::from_str::<LogRecord>(two_keys).is_err());
    let outcome = serde_json::to_string(&ToolOutcome::Denied {
        reason: DenyReason::NoGrant,
    })
    .unwrap();
    assert_eq!(outcome, r#"{"denied":{"reason":"no_grant"}}"#);
    let redirected = serde_json::to_string(&ToolOutcome::Redirected).unwrap();
    assert_eq!(redirected, r#""redirected""#);
    // A partial answer without reasoning leaves the key out, and reads back without it.
    let partial = r#"{"type":"partial_answer","time":"2026-11-29T22:51:03Z","content":"It"}"#;
    assert!(matches!(
        serde_json::from_str::<LogRecord>(partial),
        Ok(LogRecord::PartialAnswer {
            reasoning: None,
            ..
        })
    ));
}

#[test]
fn memory_notes_round_trip_and_refuse_unknown_fields() {
    let note = bxcore::MemoryNote {
        time: t(),
        session: SessionId::new("main").unwrap(),
        text: "the user studies otters".into(),
        class: DataClass::Private,
        untrusted: true,
    };
    let text = serde_json::to_string(&note).unwrap();
    assert_eq!(
        serde_json::from_str::<bxcore::MemoryNote>(&text).unwrap(),
        note
    );
    let mut value = serde_json::to_value(&note).unwrap();
    value["surprise"] = serde_json::json!(1);
    assert!(serde_json::from_value::<bxcore::MemoryNote>(value).is_err());
}

#[test]
fn a_user_record_keeps_its_task_id_and_one_without_reads_and_writes_as_before() {
    let named = LogRecord::User {
        time: t(),
        turn: 3,
        content: "again".into(),
        task_id: Some(bxcore::TaskId::new("retry-7").unwrap()),
    };
    let text = serde_json::to_string(&named).unwrap();
    assert!(text.contains(r#""task_id":"retry-7""#), "{text}");
    assert_eq!(serde_json::from_str::<LogRecord>(&text).unwrap(), named);
    // A line written before task ids: read as none, and written back byte for byte.
    let old = r#"{"type":"user","time":"2026-11-29T22:51:03Z","turn":1,"content":"hi"}"#;
    let record: LogRecord = serde_json::from_str(old).unwrap();
    assert!(matches!(&record, LogRecord::User { task_id: None, .. }));
    assert_eq!(serde_json::to_string(&record).unwrap(), old);
    let bad =
        r#"{"type":"user","time":"2026-11-29T22:51:03Z","turn":1,"content":"hi","task_id":"a b"}"#;
    assert!(serde_json::from_str::<LogRecord>(bad).is_err());
}
