//! Token accounting (`usage`) and made-up but consistent `timings`.

use serde_json::{Value, json};

/// Simulated prompt processing time per evaluated token by default, in microseconds (4000
/// tokens/s); `Profile::prompt_us_per_token` sets another.
pub const PROMPT_US_PER_TOKEN: u64 = 250;
/// Simulated generation time per token by default, in microseconds (50 tokens/s).
pub const PREDICTED_US_PER_TOKEN: u64 = 20_000;

/// The token counts of one answered request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Tokens in the whole prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens reused from the slot's cache.
    pub cache_n: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Prompt evaluation time per evaluated token, in microseconds.
    pub prompt_us_per_token: u64,
    /// Generation time per token, in microseconds.
    pub predicted_us_per_token: u64,
}

impl Usage {
    /// The prompt-side counts: `cache_n` is the common prefix with the slot's cache, but at
    /// most `prompt_tokens - 1` (one token is always evaluated), and 0 without `cache_prompt`.
    pub fn for_prompt(prompt_tokens: usize, common_prefix: usize, cache_prompt: bool) -> Self {
        let cache_n = if cache_prompt {
            common_prefix.min(prompt_tokens.saturating_sub(1))
        } else {
            0
        };
        Self {
            prompt_tokens,
            cache_n,
            completion_tokens: 0,
            prompt_us_per_token: PROMPT_US_PER_TOKEN,
            predicted_us_per_token: PREDICTED_US_PER_TOKEN,
        }
    }

    /// Prompt tokens evaluated anew.
    pub fn prompt_n(&self) -> usize {
        self.prompt_tokens - self.cache_n
    }

    /// The OpenAI `usage` object.
    pub fn usage_json(&self) -> Value {
        json!({
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": { "cached_tokens": self.cache_n },
        })
    }

    /// llama-server's `timings` object.
    pub fn timings_json(&self) -> Value {
        let prompt_n = self.prompt_n();
        let per_token_ms = self.prompt_us_per_token as f64 / 1000.0;
        let prompt_ms = prompt_n as f64 * per_token_ms;
        let predicted_per_token_ms = self.predicted_us_per_token as f64 / 1000.0;
        let predicted_ms = self.completion_tokens as f64 * predicted_per_token_ms;
        json!({
            "cache_n": self.cache_n,
            "prompt_n": prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": per_token_ms,
            "prompt_per_second": per_second(prompt_n, prompt_ms),
            "predicted_n": self.completion_tokens,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": predicted_per_token_ms,
            "predicted_per_second": per_second(self.completion_tokens, predicted_ms),
        })
    }
}

fn per_second(n: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        n as f64 * 1000.0 / ms
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_least_one_token_is_evaluated() {
        let u = Usage::for_prompt(10, 10, true);
        assert_eq!((u.cache_n, u.prompt_n()), (9, 1));
        let u = Usage::for_prompt(10, 10, false);
        assert_eq!((u.cache_n, u.prompt_n()), (0, 10));
    }
}
