//! Whether KV files pay for themselves on an endpoint (`docs/kv.md`, "Files or prefill"): a
//! file spares a switch the prefill of the session's cached tokens, and costs their save and
//! restore. On two CPU cores prefill is slow and files win by far; on a GPU prefill is so fast
//! that saving and restoring the same tokens takes longer. So loopd measures both, per
//! endpoint, in microseconds per token: prefill from the server's own `timings` of every model
//! call (`prompt_ms` over `prompt_n`), the files from the wall time of each save and restore
//! over the tokens moved. Until each is measured ([`MIN_SAMPLES`] times) files are used; then
//! files only while a save and a restore cost less than prefilling the same tokens.
//!
//! Once files are off on an endpoint no file is saved or restored there, so their cost is not
//! measured again: the choice comes back to files only when prefill gets slower than the last
//! measured save and restore.

use proto::api::KvChoice;

/// The fewest prompt tokens evaluated for a call to count as a prefill sample: a call that
/// evaluates a handful of tokens measures the server's fixed overhead, not its speed.
pub const MIN_PREFILL_SAMPLE_TOKENS: u64 = 32;
/// Samples of each kind before the choice leaves files on by default.
pub const MIN_SAMPLES: u32 = 3;
/// The weight of a new sample in the running mean (exponential).
const NEW_SAMPLE_WEIGHT: f64 = 0.25;

/// A running cost, microseconds per token.
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    us_per_token: f64,
    samples: u32,
}

impl Rate {
    fn add(&mut self, us: f64, tokens: u64) {
        if tokens == 0 || !us.is_finite() || us < 0.0 {
            return;
        }
        let sample = us / tokens as f64;
        self.us_per_token = if self.samples == 0 {
            sample
        } else {
            self.us_per_token + NEW_SAMPLE_WEIGHT * (sample - self.us_per_token)
        };
        self.samples = self.samples.saturating_add(1);
    }

    fn known(self) -> Option<f64> {
        (self.samples >= MIN_SAMPLES).then_some(self.us_per_token)
    }
}

/// What loopd does at a switch on an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Not yet measured enough: files, as on a CPU.
    Measuring,
    /// A save and a restore cost less than prefilling the same tokens.
    Files,
    /// Prefilling costs less: no file is saved or restored.
    Prefill,
}

impl Choice {
    /// Its name in the status.
    pub fn name(self) -> &'static str {
        match self {
            Choice::Measuring => "measuring",
            Choice::Files => "files",
            Choice::Prefill => "prefill",
        }
    }
}

/// The measured costs of one endpoint.
#[derive(Debug, Clone, Copy, Default)]
pub struct Costs {
    prefill: Rate,
    save: Rate,
    restore: Rate,
}

impl Costs {
    /// A model call evaluated `prompt_n` tokens in `prompt_ms` (the server's timings).
    pub fn prefilled(&mut self, prompt_n: u64, prompt_ms: f64) {
        if prompt_n >= MIN_PREFILL_SAMPLE_TOKENS {
            self.prefill.add(prompt_ms * 1000.0, prompt_n);
        }
    }

    /// A save wrote `tokens` in `us`.
    pub fn saved(&mut self, tokens: u64, us: u64) {
        self.save.add(us as f64, tokens);
    }

    /// A restore read `tokens` in `us`.
    pub fn restored(&mut self, tokens: u64, us: u64) {
        self.restore.add(us as f64, tokens);
    }

    /// Files or prefill, from what is measured.
    pub fn choice(&self) -> Choice {
        let files = match (self.save.known(), self.restore.known()) {
            (Some(save), Some(restore)) => save + restore,
            _ => return Choice::Measuring,
        };
        match self.prefill.known() {
            Some(prefill) if files >= prefill => Choice::Prefill,
            Some(_) => Choice::Files,
            None => Choice::Measuring,
        }
    }

    /// The status of endpoint `endpoint`.
    pub fn status(&self, endpoint: &str) -> KvChoice {
        let per_k = |rate: Option<f64>| rate.map(|us| (us * 1000.0).round() as u64);
        let files = match (self.save.known(), self.restore.known()) {
            (Some(save), Some(restore)) => Some(save + restore),
            _ => None,
        };
        KvChoice {
            endpoint: endpoint.to_owned(),
            choice: self.choice().name().to_owned(),
            prefill_us_per_1k_tokens: per_k(self.prefill.known()),
            file_us_per_1k_tokens: per_k(files),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU: 1,000 tokens prefill in 2 ms; a file of them saves in 6 ms and restores in 3.
    #[test]
    fn where_prefill_is_cheaper_than_save_and_restore_files_are_off() {
        let mut gpu = Costs::default();
        assert_eq!(gpu.choice(), Choice::Measuring);
        for _ in 0..MIN_SAMPLES {
            gpu.prefilled(1000, 2.0);
            gpu.saved(1000, 6_000);
            gpu.restored(1000, 3_000);
        }
        assert_eq!(gpu.choice(), Choice::Prefill);
        let status = gpu.status("main");
        assert_eq!(status.choice, "prefill");
        assert_eq!(status.prefill_us_per_1k_tokens, Some(2_000));
        assert_eq!(status.file_us_per_1k_tokens, Some(9_000));
    }

    /// Two CPU cores: 1,000 tokens prefill in 4 s; the same file moves in 20 ms.
    #[test]
    fn where_prefill_is_slow_files_stay_on_and_small_prompts_do_not_count() {
        let mut cpu = Costs::default();
        for _ in 0..MIN_SAMPLES {
            cpu.prefilled(1000, 4000.0);
            cpu.saved(1000, 12_000);
            cpu.restored(1000, 8_000);
            // Four tokens in 0.1 ms: the server's fixed cost, not its speed.
            cpu.prefilled(4, 0.1);
        }
        assert_eq!(cpu.choice(), Choice::Files);
        assert_eq!(cpu.status("main").prefill_us_per_1k_tokens, Some(4_000_000));
    }
}
