//! How loopd's answers read for people: the session list, the status, what a cancel did.

pub use crate::format::duration_words;
use crate::format::one_line;
use proto::api::{CancelAnswer, SessionList, Status};

/// The sessions as a table with a header; a line saying so when there are none.
pub fn sessions_table(list: &SessionList) -> String {
    if list.sessions.is_empty() {
        return "no sessions\n".into();
    }
    let rows: Vec<[String; 4]> = list
        .sessions
        .iter()
        .map(|s| {
            let mut state = String::from(if s.busy { "busy" } else { "idle" });
            if s.queued > 0 {
                state.push_str(&format!(", {} queued", s.queued));
            }
            [
                s.id.to_string(),
                s.last_turn.to_string(),
                s.records.to_string(),
                state,
            ]
        })
        .collect();
    let header = ["SESSION", "TURNS", "RECORDS", "STATE"].map(String::from);
    let width = |i: usize| {
        std::iter::once(&header)
            .chain(&rows)
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    std::iter::once(&header)
        .chain(&rows)
        .map(|r| format!("{:<w0$}  {:>w1$}  {:>w2$}  {}\n", r[0], r[1], r[2], r[3]))
        .collect()
}

/// The status as four lines: loopd, broker, llama and today's usage; one more under the
/// broker when brokerd reports the walls of its `exec` tool, and one for the KV files when
/// they are on (before the usage, which stays last).
pub fn status_text(status: &Status) -> String {
    let loopd = &status.loopd;
    let broker = &status.broker;
    let llama = &status.llama;
    let mut text = format!(
        "loopd   {}, up {}; {} running, {} queued\n",
        loopd.version,
        duration_words(loopd.uptime_s),
        loopd.running,
        loopd.queued
    );
    let at = broker
        .socket
        .as_deref()
        .map(|s| format!(" at {s}"))
        .unwrap_or_default();
    let ok = if broker.ok { "ok" } else { "NOT ANSWERING" };
    text.push_str(&format!("broker  {}{at}: {ok}", broker.kind));
    if !broker.note.is_empty() {
        text.push_str(&format!("; {}", one_line(&broker.note, None)));
    }
    text.push('\n');
    // Which walls the `exec` tool runs behind, under the broker it belongs to (issue 15).
    if let Some(exec) = &broker.exec {
        text.push_str(&format!("        exec: {}\n", one_line(exec, None)));
    }
    // What brokerd keeps for `boxctl undo` (docs/undo.md).
    if let Some(checkpoints) = &broker.checkpoints {
        text.push_str(&format!("        undo: {}\n", one_line(checkpoints, None)));
    }
    let health = match (&llama.ok, &llama.error) {
        (true, _) => "ok".to_string(),
        (false, Some(e)) => format!("NOT OK: {}", one_line(e, None)),
        (false, None) => "NOT OK".to_string(),
    };
    let slots = &llama.slots;
    if llama.endpoints.len() > 1 {
        text.push_str(&endpoints_text(llama, &health));
    } else {
        text.push_str(&format!(
            "llama   {}: {health}; model {}, n_ctx {}, {} slots (main {}, background {}, subagent {})\n",
            llama.url,
            // What a model server says of itself is shown on one line, escapes and all.
            one_line(&llama.model, None),
            llama.n_ctx,
            llama.total_slots,
            slots.main,
            slots.background,
            slots.subagent
        ));
    }
    if let Some(kv) = &status.kv {
        text.push_str(&kv_line(kv));
    }
    text.push_str(&crate::usage::today_line(&status.usage));
    text
}

/// The KV files (issue 22): how many, how big against the cap, and how switches went.
pub fn kv_line(kv: &proto::api::KvStatus) -> String {
    let mib = |bytes: u64| bytes / (1024 * 1024);
    let hits = match kv.hit_percent() {
        Some(p) => format!("{p}% hit"),
        None => "no switch yet".to_string(),
    };
    let mut line = format!(
        "kv      {} files, {} MiB of {} MiB; switches: {} restored, {} missed, {} failed ({hits}); {} saved ({} after a turn)",
        kv.files,
        mib(kv.bytes),
        mib(kv.max_bytes),
        kv.restores,
        kv.misses,
        kv.restore_failures,
        kv.saves,
        kv.saves_after_turn
    );
    if kv.save_failures > 0 {
        line.push_str(&format!(", {} saves failed", kv.save_failures));
    }
    if !kv.off.is_empty() {
        let off: Vec<String> = kv.off.iter().map(|e| one_line(e, None)).collect();
        line.push_str(&format!(
            "; off on {} (no --slot-save-path)",
            off.join(", ")
        ));
    }
    line.push('\n');
    for choice in &kv.choices {
        line.push_str(&kv_choice_line(choice));
    }
    line
}

/// Files or prefill on one endpoint, with the costs the choice was made from.
fn kv_choice_line(choice: &proto::api::KvChoice) -> String {
    let ms = |us: Option<u64>| match us {
        Some(us) => format!("{:.1} ms", us as f64 / 1000.0),
        None => "not measured".to_string(),
    };
    format!(
        "        {}: {} (per 1k tokens at a switch: save and restore {}, prefill {})\n",
        one_line(&choice.endpoint, None),
        one_line(&choice.choice, None),
        ms(choice.file_us_per_1k_tokens),
        ms(choice.prefill_us_per_1k_tokens)
    )
}

/// Several model servers (issue 20): a line for the set, then one per endpoint with its
/// state, model, slots by role, the sessions that keep to it and its last error.
fn endpoints_text(llama: &proto::api::LlamaStatus, health: &str) -> String {
    let up = llama.endpoints.iter().filter(|e| e.state == "up").count();
    let mut text = format!(
        "llama   {} endpoints, {up} up: {}; model {}, n_ctx {}\n",
        llama.endpoints.len(),
        if up > 0 { "ok" } else { health },
        one_line(&llama.model, None),
        llama.n_ctx
    );
    for e in &llama.endpoints {
        let list = |slots: &[u32]| match slots {
            [] => "-".to_string(),
            _ => slots
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        };
        let model = match (&e.model, e.total_slots) {
            (Some(model), Some(total)) => format!("model {}, {total} slots", one_line(model, None)),
            (Some(model), None) => format!("model {}", one_line(model, None)),
            _ => "not reached yet".to_string(),
        };
        let s = if e.sessions == 1 { "" } else { "s" };
        text.push_str(&format!(
            "        {} {}: {}; {model}; main {}, background {}, subagent {}; {} session{s}\n",
            e.name,
            e.url,
            e.state.to_uppercase(),
            list(&e.slots.main),
            list(&e.slots.background),
            list(&e.slots.subagent),
            e.sessions
        ));
        if let Some(error) = &e.last_error {
            text.push_str(&format!(
                "          last error: {}\n",
                one_line(error, None)
            ));
        }
    }
    text
}

/// What a cancel did, as a line.
pub fn cancel_text(answer: &CancelAnswer) -> String {
    let id = &answer.session;
    let mut text = if answer.cancelled {
        format!("cancelled the running turn of {id}")
    } else {
        format!("no turn was running in {id}")
    };
    if answer.dropped > 0 {
        let s = if answer.dropped == 1 { "" } else { "s" };
        text.push_str(&format!("; dropped {} queued task{s}", answer.dropped));
    }
    text.push('\n');
    text
}
