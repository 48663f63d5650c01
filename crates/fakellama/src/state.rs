//! What all connections of one server share.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::options::Options;
use crate::record::Recorder;
use crate::script::{Rule, ScriptState};
use crate::slots::Slots;

/// Length of generated ids (completion ids, tool call ids), in characters.
pub const ID_CHARS: usize = 32;

const ID_ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// The shared server state.
#[derive(Debug)]
pub struct State {
    /// Tokens of context per slot.
    pub n_ctx: u32,
    /// The required API key, if any.
    pub api_key: Option<String>,
    /// Delay per streamed chunk / before a non-streamed answer.
    pub delay: Duration,
    /// [`Options::hold_until_busy`].
    pub hold_until_busy: Option<usize>,
    /// Until when every endpoint answers "Loading model".
    pub ready_at: Instant,
    /// Whether the template supports tools ([`Options::tool_template`]).
    pub tool_template: bool,
    /// The model path reported and recorded in slot files ([`Options::model_path`]).
    pub model_path: String,
    /// The slot files' directory ([`Options::slot_save_path`]).
    pub slot_save_path: Option<PathBuf>,
    /// The speeds it reports and keeps to ([`Options::profile`]).
    pub profile: crate::options::Profile,
    /// The slots.
    pub slots: Arc<Slots>,
    /// The recorded chat requests.
    pub records: Recorder,
    /// Connections accepted so far (a client that keeps its connections open makes few).
    pub connections: AtomicU64,
    script: Mutex<ScriptState>,
    ids: AtomicU64,
}

impl State {
    /// The state for these options, the loading period starting now.
    pub fn new(options: Options) -> Self {
        Self {
            n_ctx: options.n_ctx,
            api_key: options.api_key,
            delay: Duration::from_millis(options.delay_ms),
            hold_until_busy: options.hold_until_busy,
            ready_at: Instant::now() + Duration::from_millis(options.loading_ms),
            tool_template: options.tool_template,
            model_path: options.model_path,
            slot_save_path: options.slot_save_path,
            profile: options.profile,
            slots: Slots::new(usize::try_from(options.slots).unwrap_or(1)),
            records: Recorder::default(),
            connections: AtomicU64::new(0),
            script: Mutex::new(ScriptState::new(options.script)),
            ids: AtomicU64::new(0),
        }
    }

    /// Whether the "model" is still loading.
    pub fn loading(&self) -> bool {
        Instant::now() < self.ready_at
    }

    /// Picks the rule answering a last message with this role and content, counting the use;
    /// returns its recorded label too. Also returns the default reply.
    pub fn pick_rule(&self, role: &str, content: &str) -> (Option<(String, Rule)>, String) {
        let mut script = self.script.lock().unwrap_or_else(|p| p.into_inner());
        let picked = script
            .pick(role, content)
            .map(|(i, rule)| (script.script().rule_label(i), rule));
        (picked, script.script().default_reply().to_owned())
    }

    /// A fresh id of [`ID_CHARS`] alphanumerics, random-looking but from a counter.
    pub fn next_id(&self) -> String {
        let mut x = self.ids.fetch_add(1, Ordering::Relaxed);
        let mut out = String::with_capacity(ID_CHARS);
        while out.len() < ID_CHARS {
            // splitmix64
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            for _ in 0..8 {
                if out.len() < ID_CHARS {
                    let i = usize::try_from(z % 62).unwrap_or(0);
                    out.push(char::from(ID_ALPHABET[i]));
                    z /= 62;
                }
            }
        }
        out
    }
}
