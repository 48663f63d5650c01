//! The bench's tables and summary lines: per turn, per file, per switch back.

use super::{PROBES, Probes, SESSIONS, Turn, copy_name};

/// The same session's turn before `turn`, if any.
fn previous<'a>(turns: &'a [Turn], turn: &Turn) -> Option<&'a Turn> {
    turns
        .iter()
        .find(|t| t.session == turn.session && t.n + 1 == turn.n)
}

/// Tokens new since the session's last call plus the one the server always evaluates again
/// (the last token of the last answer: generated, never evaluated); the whole prompt on a
/// session's first turn.
fn new_plus_one(turns: &[Turn], turn: &Turn) -> u64 {
    previous(turns, turn).map_or(turn.usage.prompt_tokens, |p| {
        turn.usage.prompt_tokens - p.usage.prompt_tokens - p.usage.completion_tokens + 1
    })
}

pub(super) fn print_turns(label: &str, turns: &[Turn]) {
    println!();
    println!("{label}:");
    println!(
        "| session | turn | prompt | cached | evaluated | new + 1 | prefill ms | generated | \
         generation ms | model call ms | wall ms | outside the model call ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for t in turns {
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.1} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
            SESSIONS[t.session].0,
            t.n,
            t.usage.prompt_tokens,
            t.usage.cached_tokens,
            t.evaluated(),
            new_plus_one(turns, t),
            t.timings.prompt_ms,
            t.usage.completion_tokens,
            t.timings.predicted_ms,
            t.model_us as f64 / 1000.0,
            t.wall.as_secs_f64() * 1000.0,
            t.wall.as_secs_f64() * 1000.0 - t.model_us as f64 / 1000.0,
        );
    }
    let evaluated: u64 = turns.iter().map(Turn::evaluated).sum();
    let prefill: f64 = turns.iter().map(|t| t.timings.prompt_ms).sum();
    let wall: f64 = turns.iter().map(|t| t.wall.as_secs_f64()).sum();
    println!(
        "{label}: {evaluated} prompt tokens evaluated in all, {prefill:.0} ms of prefill, \
         {wall:.1} s of wall time over {} turns",
        turns.len()
    );
}

pub(super) fn print_probes(probes: &Probes) {
    println!();
    println!(
        "one restore and one save of each KV file a turn restored (server timings, median of {PROBES}):"
    );
    println!(
        "| file | tokens | bytes | bytes per 1000 tokens | restore ms | save ms | restore round trip ms | save round trip ms |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut keys: Vec<_> = probes.keys().copied().collect();
    keys.sort_by_key(|&(session, after)| (after, session));
    for key in &keys {
        let p = probes[key];
        println!(
            "| {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} |",
            copy_name(key.0, key.1),
            p.tokens,
            p.bytes,
            p.bytes as f64 * 1000.0 / p.tokens.max(1) as f64,
            p.restore_ms,
            p.save_ms,
            p.restore_wall_ms,
            p.save_wall_ms,
        );
    }
    let Some(largest) = probes.values().max_by_key(|p| p.tokens) else {
        return;
    };
    let (tokens, bytes) = probes
        .values()
        .fold((0, 0), |(t, b), p| (t + p.tokens, b + p.bytes));
    println!(
        "KV file size: {:.2} MB per 1000 tokens ({} bytes over {} tokens in {} files); the largest, \
         {} tokens ({:.1} MB): restore {:.1} ms, save {:.1} ms (round trips {:.1} / {:.1} ms)",
        bytes as f64 * 1000.0 / tokens.max(1) as f64 / 1e6,
        bytes,
        tokens,
        probes.len(),
        largest.tokens,
        largest.bytes as f64 / 1e6,
        largest.restore_ms,
        largest.save_ms,
        largest.restore_wall_ms,
        largest.save_wall_ms,
    );
}

/// Per switch back to a session (every turn after its first: the other session ran on the
/// slot in between), the cost with files against the prefill without, read two ways:
///
/// - A: what the switch back costs with files (restoring the file, then prefilling what is
///   evaluated: the new tokens + 1) against the prefill of the same turn without files;
/// - B: what the switch itself adds (saving the other session, restoring this one) against
///   the prefill it spares (the turn's prefill without files minus its prefill with them).
pub(super) fn print_switches(with: &[Turn], without: &[Turn], probes: &Probes) {
    println!();
    println!("switches back to a session (turn 2 on): with KV files against without");
    println!(
        "| session | turn | prompt with / without | evaluated with / without | restore ms | \
         save of the other ms | prefill ms with | prefill ms without | A: (restore + prefill \
         with) / prefill without | B: (save + restore) / (prefill without - with) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut a_all = Vec::new();
    let mut b_all = Vec::new();
    let mut exact = 0;
    for t in with.iter().filter(|t| t.n > 1) {
        let Some(o) = without
            .iter()
            .find(|o| o.session == t.session && o.n == t.n)
        else {
            continue;
        };
        if t.evaluated() == new_plus_one(with, t) {
            exact += 1;
        }
        let restore = probes
            .get(&(t.session, t.n - 1))
            .copied()
            .unwrap_or_default();
        // Before this turn loopd saved the other session: the first after its turn n - 1,
        // the second after its turn n.
        let other = 1 - t.session;
        let saved = probes
            .get(&(other, if t.session == 0 { t.n - 1 } else { t.n }))
            .copied()
            .unwrap_or_default();
        let without_ms = o.timings.prompt_ms.max(f64::MIN_POSITIVE);
        let a = (restore.restore_ms + t.timings.prompt_ms) / without_ms;
        let spared = (o.timings.prompt_ms - t.timings.prompt_ms).max(f64::MIN_POSITIVE);
        let b = (saved.save_ms + restore.restore_ms) / spared;
        a_all.push(a);
        b_all.push(b);
        println!(
            "| {} | {} | {} / {} | {} / {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} % | {:.1} % |",
            SESSIONS[t.session].0,
            t.n,
            t.usage.prompt_tokens,
            o.usage.prompt_tokens,
            t.evaluated(),
            o.evaluated(),
            restore.restore_ms,
            saved.save_ms,
            t.timings.prompt_ms,
            o.timings.prompt_ms,
            a * 100.0,
            b * 100.0,
        );
    }
    let worst = |all: &[f64]| all.iter().copied().fold(0.0, f64::max) * 100.0;
    let under = |all: &[f64]| all.iter().filter(|r| **r < 0.1).count();
    println!(
        "goal 1, read as A: worst {:.1} %, under 10 % on {} of {} switches: {}",
        worst(&a_all),
        under(&a_all),
        a_all.len(),
        if under(&a_all) == a_all.len() {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "goal 1, read as B: worst {:.1} %, under 10 % on {} of {} switches: {}",
        worst(&b_all),
        under(&b_all),
        b_all.len(),
        if under(&b_all) == b_all.len() {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "goal 2 (evaluated = new + 1 on every warm turn): {exact} of {} warm turns: {}",
        a_all.len(),
        if exact == a_all.len() {
            "met"
        } else {
            "NOT met"
        }
    );
}
