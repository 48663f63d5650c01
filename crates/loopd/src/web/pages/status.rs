//! How the box is: loopd, the tool broker, the model servers (state, model, slots, the cache's
//! share of today's prompt tokens), the KV files, and today's usage against the day budget.

use super::layout;
use maud::{Markup, html};
use proto::api::{Status, UsageTotals};

/// The share of today's prompt tokens served from the slots' caches, as "83 %".
fn cache_share(totals: &UsageTotals) -> String {
    let prompt = totals.cached_tokens + totals.evaluated_tokens;
    if prompt == 0 {
        return "no prompt tokens yet".into();
    }
    format!("{} %", totals.cached_tokens * 100 / prompt)
}

fn yes(ok: bool) -> &'static str {
    if ok { "up" } else { "down" }
}

/// `/status`.
pub fn status(csrf: &str, s: &Status) -> Markup {
    let t = &s.usage.totals;
    layout(
        "Status",
        "status",
        Some(csrf),
        html! {
            h2 { "loopd" }
            table #status-loopd {
                tr { th { "Version" } td { (s.loopd.version) } }
                tr { th { "Up for" } td { (humantime::format_duration(std::time::Duration::from_secs(s.loopd.uptime_s))) } }
                tr { th { "Running turns" } td { (s.loopd.running) } }
                tr { th { "Waiting tasks" } td { (s.loopd.queued) } }
            }
            h2 { "Tool broker" }
            table #status-broker {
                tr { th { "State" } td { (yes(s.broker.ok)) " (" (s.broker.kind) ")" } }
                tr { th { "Note" } td { (s.broker.note) } }
                @if let Some(exec) = &s.broker.exec { tr { th { "exec" } td { (exec) } } }
            }
            h2 { "Model" }
            div #status-model {
                table {
                    tr { th { "Model" } td { (s.llama.model) } }
                    tr { th { "State" } td { (yes(s.llama.ok)) @if let Some(e) = &s.llama.error { ": " (e) } } }
                    tr { th { "Context per slot" } td { (s.llama.n_ctx) " tokens" } }
                    tr { th { "Slots" } td {
                        (s.llama.total_slots) " in all: main " (s.llama.slots.main)
                        ", background " (s.llama.slots.background) ", subagent " (s.llama.slots.subagent)
                    } }
                    tr { th { "Cache share today" } td #cache-share { (cache_share(t)) } }
                }
                @if !s.llama.endpoints.is_empty() {
                    h2 { "Endpoints" }
                    table #status-endpoints {
                        thead { tr { th { "Name" } th { "State" } th { "Model" } th { "Slots (main/bg/sub)" } th { "Sessions" } th { "Last error" } } }
                        tbody {
                            @for e in &s.llama.endpoints {
                                tr {
                                    td { (e.name) } td { (e.state) }
                                    td { (e.model.as_deref().unwrap_or("")) }
                                    td { (format!("{:?}/{:?}/{:?}", e.slots.main, e.slots.background, e.slots.subagent)) }
                                    td { (e.sessions) }
                                    td { (e.last_error.as_deref().unwrap_or("")) }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(kv) = &s.kv {
                h2 { "KV files" }
                table #status-kv {
                    tr { th { "Files" } td { (kv.files) " (" (kv.bytes / (1024 * 1024)) " MiB of " (kv.max_bytes / (1024 * 1024)) " MiB)" } }
                    tr { th { "Switches back to a session" } td {
                        (kv.restores) " restored, " (kv.misses) " missed, " (kv.restore_failures) " failed"
                        @if let Some(p) = kv.hit_percent() { " (" (p) " % hit)" }
                    } }
                    tr { th { "Saves" } td { (kv.saves) @if kv.save_failures > 0 { ", " (kv.save_failures) " failed" } } }
                    @if !kv.off.is_empty() {
                        tr { th { "Off (no --slot-save-path)" } td { (kv.off.join(", ")) } }
                    }
                }
            }
            h2 { "Today (" (s.usage.day) ", " (s.usage.timezone) ")" }
            table #status-usage {
                tr { th { "Turns" } td { (t.turns) } }
                tr { th { "Model calls" } td { (t.model_calls) } }
                tr { th { "Tokens evaluated / cached / generated" } td { (t.evaluated_tokens) " / " (t.cached_tokens) " / " (t.generated_tokens) } }
                tr { th { "Model time" } td { (t.model_ms) " ms" } }
                tr { th { "Tool calls" } td { (t.tool_calls) } }
                tr { th { "Day budget" } td #day-budget {
                    @match s.usage.max_generated_tokens_per_day {
                        Some(max) => { (t.generated_tokens) " of " (max) " generated tokens" }
                        None => { "none set" }
                    }
                } }
            }
        },
    )
}
