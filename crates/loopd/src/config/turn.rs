//! `[loop]`, `[baseline]` and `[compact]`: how a turn runs and how a session's context is kept.

use bxconfig::{Problem, Problems};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Bytes of tool output per token, estimated low: logs, CSV and JSON tokenise at about 2 bytes a
/// token (one 16 384-byte `read_file` of a log made a 10 173-token prompt with Qwen2.5). Turns
/// a slot's tokens into a result cap in bytes.
pub const RESULT_BYTES_PER_TOKEN: usize = 2;
/// With `loop.tool_result_cap_bytes` unset, one result may fill 1/N of the slot.
pub const DERIVED_RESULT_CAP_SLOT_DIVISOR: usize = 4;
/// The largest derived cap, in bytes (the old fixed default): a larger output is read on with
/// `read_output` instead.
pub const DERIVED_RESULT_CAP_MAX_BYTES: usize = 16_384;
/// A configured `loop.tool_result_cap_bytes` may fill at most 1/N of the slot: loopd refuses
/// to start with a larger one.
pub const CONFIGURED_RESULT_CAP_SLOT_DIVISOR: usize = 2;

/// `[loop]`: the limits of one turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Loop {
    /// The most model calls in one turn; the turn then ends as "max steps".
    pub max_steps: u32,
    /// The most bytes of one tool result put in the context; the rest is cut (on a character
    /// boundary, with `\n[truncated]`). Unset: derived from the slot's `n_ctx`
    /// ([`Loop::result_cap_bytes`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_result_cap_bytes: Option<usize>,
    /// Whether the model may reason before answering (`chat_template_kwargs.enable_thinking`).
    /// Reasoning is streamed and logged but never replayed to the model.
    pub thinking: bool,
    /// The most times one tool may be called with the same arguments in one turn (through
    /// `call_tool` too); a further one is not run, and the model is told so instead
    /// (`turn::Repeats`).
    pub max_repeated_calls: u32,
    /// Whether a call asked for again at the model's very next step, after it ran (`ok`) or
    /// the broker refused it, is refused at once, before `max_repeated_calls` is reached
    /// (`turn::Repeats`): the same call at once gets the same result, and the default model
    /// that asks again has not read it.
    pub refuse_repeat_at_once: bool,
    /// The acting tools whose path arguments must be ones the owner gave (issue 34,
    /// `turn::provenance`): a call naming a path the owner's own words do not hold is not
    /// run. Empty: no such check.
    pub owner_paths_tools: Vec<String>,
}

/// The default of `[loop] owner_paths_tools`: the built-in tools that write or run.
pub const DEFAULT_OWNER_PATHS_TOOLS: [&str; 2] = ["write_file", "exec"];

impl Default for Loop {
    fn default() -> Loop {
        Loop {
            max_steps: 32,
            tool_result_cap_bytes: None,
            thinking: false,
            max_repeated_calls: 2,
            refuse_repeat_at_once: true,
            owner_paths_tools: DEFAULT_OWNER_PATHS_TOOLS.map(String::from).to_vec(),
        }
    }
}

impl Loop {
    pub(super) fn check(&self, expect_n_ctx: Option<u32>, p: &mut Problems) {
        p.at_least("loop.max_steps", self.max_steps, 1);
        if let Some(cap) = self.tool_result_cap_bytes {
            p.at_least("loop.tool_result_cap_bytes", cap, 1);
        }
        p.at_least("loop.max_repeated_calls", self.max_repeated_calls, 1);
        for (i, tool) in self.owner_paths_tools.iter().enumerate() {
            p.non_empty(&format!("loop.owner_paths_tools[{i}]"), tool);
        }
        // With the slot size known, a cap loopd would refuse at start is refused now.
        if let Some(n_ctx) = expect_n_ctx
            && let Err(why) = self.check_result_cap(n_ctx)
        {
            p.push("loop.tool_result_cap_bytes", why);
        }
    }

    /// What `--check-config` can only warn about: a cap set without `[expect] n_ctx` is
    /// checked against the slot only when loopd starts.
    pub(super) fn warnings(&self, expect_n_ctx: Option<u32>) -> Vec<Problem> {
        match (self.tool_result_cap_bytes, expect_n_ctx) {
            (Some(cap), None) => vec![Problem::new(
                "loop.tool_result_cap_bytes",
                format!(
                    "{cap} bytes is checked against the slot's n_ctx only when loopd starts \
                     (set expect.n_ctx to check it now): loopd refuses to start when it is \
                     above {} bytes per 1000 tokens of n_ctx, e.g. above {} bytes in a \
                     4096-token slot",
                    max_result_cap_bytes(1000),
                    max_result_cap_bytes(4096)
                ),
            )],
            _ => Vec::new(),
        }
    }

    /// The cap of one tool result in a slot of `n_ctx` tokens, in bytes: the configured one, or
    /// unset [`derived_result_cap_bytes`].
    pub fn result_cap_bytes(&self, n_ctx: u32) -> usize {
        self.tool_result_cap_bytes
            .unwrap_or_else(|| derived_result_cap_bytes(n_ctx))
    }

    /// Whether the configured cap fits a slot of `n_ctx` tokens ([`max_result_cap_bytes`]);
    /// why not, naming the numbers. An unset cap always fits.
    pub fn check_result_cap(&self, n_ctx: u32) -> Result<(), String> {
        match self.tool_result_cap_bytes {
            Some(cap) if cap > max_result_cap_bytes(n_ctx) => Err(format!(
                "{cap} bytes is more than 1/{CONFIGURED_RESULT_CAP_SLOT_DIVISOR} of a \
                 {n_ctx}-token slot (at most {} bytes, at {RESULT_BYTES_PER_TOKEN} bytes a \
                 token): one result would crowd out the conversation; lower it or unset it \
                 to derive it from the slot",
                max_result_cap_bytes(n_ctx)
            )),
            _ => Ok(()),
        }
    }
}

/// The cap of one tool result when `loop.tool_result_cap_bytes` is unset, in bytes: 1/
/// [`DERIVED_RESULT_CAP_SLOT_DIVISOR`] of a slot of `n_ctx` tokens at
/// [`RESULT_BYTES_PER_TOKEN`], at most [`DERIVED_RESULT_CAP_MAX_BYTES`], at least 1.
pub fn derived_result_cap_bytes(n_ctx: u32) -> usize {
    let slot_bytes = (n_ctx as usize).saturating_mul(RESULT_BYTES_PER_TOKEN);
    (slot_bytes / DERIVED_RESULT_CAP_SLOT_DIVISOR).clamp(1, DERIVED_RESULT_CAP_MAX_BYTES)
}

/// The largest `loop.tool_result_cap_bytes` loopd starts with in a slot of `n_ctx` tokens, in
/// bytes: 1/[`CONFIGURED_RESULT_CAP_SLOT_DIVISOR`] of the slot at [`RESULT_BYTES_PER_TOKEN`].
pub fn max_result_cap_bytes(n_ctx: u32) -> usize {
    (n_ctx as usize).saturating_mul(RESULT_BYTES_PER_TOKEN) / CONFIGURED_RESULT_CAP_SLOT_DIVISOR
}

/// `[baseline]`: the prompt files an epoch's baseline is made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Baseline {
    /// The system prompt (`system.md`). The other prompt files (`compact.md`, `summarise.md`,
    /// `heartbeat.md`, `subagent.md`) are read from the same directory.
    pub system: PathBuf,
}

impl Default for Baseline {
    fn default() -> Baseline {
        Baseline {
            system: PathBuf::from("/etc/boxmaker/system.md"),
        }
    }
}

impl Baseline {
    pub(super) fn check(&self, p: &mut Problems) {
        p.path_non_empty("baseline.system", &self.system);
    }
}

/// `[compact]`: when a session's context is compacted into a new epoch, and which tool results
/// are summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Compact {
    /// Compaction is due when the last prompt plus completion reach this fraction of the slot's
    /// `n_ctx`. Above 0, at most 1.
    pub threshold: f64,
    /// The tools whose results are summarised on the background slot (seed M5d-2).
    pub summarise: Vec<String>,
    /// The most characters of one summary.
    pub summary_chars: usize,
    /// The most characters of the carry's summary a compaction leaves for the next epoch (the
    /// section of the owner's words comes on top, within `owner_words_chars`).
    pub carry_chars: usize,
    /// The most characters of the section of the owner's own words a compaction adds to the
    /// carry, word for word (issue 34); 0 leaves it out.
    pub owner_words_chars: usize,
    /// The most tokens of a compaction's answer (its `max_tokens`), and the room its request
    /// leaves for it: the epoch is cut, from measured token counts, until the request fits the
    /// slot with this much to spare. At most a quarter of the slot's `n_ctx` is used, whatever
    /// is set here.
    pub answer_tokens: u32,
    /// The tokens a turn's model call must leave free in the slot: a call whose prompt would
    /// leave fewer compacts the session first.
    pub turn_room_tokens: u32,
}

impl Default for Compact {
    fn default() -> Compact {
        Compact {
            threshold: 0.8,
            summarise: vec!["http_fetch".to_string()],
            summary_chars: 2_000,
            carry_chars: 8_000,
            owner_words_chars: 2_000,
            answer_tokens: 1_024,
            turn_room_tokens: 256,
        }
    }
}

impl Compact {
    pub(super) fn check(&self, p: &mut Problems) {
        p.fraction("compact.threshold", self.threshold);
        for (i, tool) in self.summarise.iter().enumerate() {
            p.non_empty(&format!("compact.summarise[{i}]"), tool);
        }
        p.at_least("compact.summary_chars", self.summary_chars, 1);
        p.at_least("compact.carry_chars", self.carry_chars, 1);
        p.at_least("compact.answer_tokens", self.answer_tokens, 1);
    }
}
