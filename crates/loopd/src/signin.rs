//! Who is signed in to the web console (`docs/web.md`): one-time sign-in links that `boxctl
//! web` asks for on loopd's socket, and the browser sessions they turn into, each with its
//! CSRF token.
//!
//! Everything is in memory: a loopd restart signs every browser out, and no file holds a
//! credential. Only the SHA-256 of each link and session token is kept, so the table itself
//! holds nothing a browser could present. Every count has a cap: at most
//! [`MAX_PENDING_LINKS`] links wait (the oldest is dropped past it), at most
//! [`SignInLimits::max_sessions`] browsers are signed in (the oldest is ended past it).

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most sign-in links that wait to be used at once.
pub const MAX_PENDING_LINKS: usize = 8;
/// The bytes of randomness in a link token, a session token and a CSRF token.
pub const TOKEN_BYTES: usize = 32;

/// The lifetimes and the cap (from `[web]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignInLimits {
    /// How long a link can be used, in milliseconds.
    pub link_ttl_ms: u64,
    /// How long a browser stays signed in, in milliseconds.
    pub session_ttl_ms: u64,
    /// The most browsers signed in at once.
    pub max_sessions: usize,
}

/// Why a sign-in link was not taken. The browser is told only that the link is no good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignInError {
    /// No link with that token waits (never made, already used, or revoked).
    #[error("this sign-in link is not known: it was used already, revoked, or never made")]
    Unknown,
    /// The link was made too long ago.
    #[error("this sign-in link has expired")]
    Expired,
    /// The system gave no randomness for a token.
    #[error("no randomness for a token")]
    NoRandomness,
}

/// A link just made: its token, for the URL, and how long it stays good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLink {
    /// 64 hex digits.
    pub token: String,
    /// How long it can be used, in milliseconds.
    pub expires_in_ms: u64,
}

/// A browser session just begun from a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    /// The cookie's value: 64 hex digits.
    pub token: String,
    /// The cookie's `Max-Age`, in seconds.
    pub max_age_s: u64,
}

/// A signed-in browser, as a request sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The CSRF token every state-changing request of this session must carry.
    pub csrf: String,
}

type Digest32 = [u8; 32];

struct Session {
    began: Instant,
    expires: Instant,
    csrf: String,
}

#[derive(Default)]
struct State {
    links: HashMap<Digest32, Instant>,
    sessions: HashMap<Digest32, Session>,
}

/// The console's sign-ins, shared by the web listener and loopd's API.
pub struct SignIns {
    limits: SignInLimits,
    origin: String,
    state: Mutex<State>,
}

impl std::fmt::Debug for SignIns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Counts only: never a token, not even its digest.
        let state = self.lock();
        f.debug_struct("SignIns")
            .field("limits", &self.limits)
            .field("origin", &self.origin)
            .field("links", &state.links.len())
            .field("sessions", &state.sessions.len())
            .finish()
    }
}

fn digest(token: &str) -> Digest32 {
    Sha256::digest(token.as_bytes()).into()
}

fn random_token() -> Result<String, SignInError> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|_| SignInError::NoRandomness)?;
    Ok(hex::encode(bytes))
}

impl SignIns {
    /// No link and nobody signed in, for the console at `origin` (`https://host[:port]`).
    pub fn new(limits: SignInLimits, origin: String) -> SignIns {
        SignIns {
            limits,
            origin,
            state: Mutex::new(State::default()),
        }
    }

    /// The sign-in URL of link `token`: `<origin>/signin?token=<token>`.
    pub fn link_url(&self, token: &str) -> String {
        format!("{}/signin?token={token}", self.origin)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new one-time link, good for `link_ttl_ms`.
    pub fn mint_link(&self) -> Result<NewLink, SignInError> {
        self.mint_link_at(Instant::now())
    }

    pub(crate) fn mint_link_at(&self, now: Instant) -> Result<NewLink, SignInError> {
        let token = random_token()?;
        let mut state = self.lock();
        state.links.retain(|_, expires| *expires > now);
        while state.links.len() >= MAX_PENDING_LINKS {
            let oldest = state.links.iter().min_by_key(|(_, e)| **e).map(|(k, _)| *k);
            match oldest {
                Some(key) => state.links.remove(&key),
                None => break,
            };
        }
        let ttl = Duration::from_millis(self.limits.link_ttl_ms);
        state.links.insert(digest(&token), now + ttl);
        Ok(NewLink {
            token,
            expires_in_ms: self.limits.link_ttl_ms,
        })
    }

    /// Takes link `token` (it cannot be used again, whatever the outcome) and begins a
    /// browser session, ending the oldest one when `max_sessions` are signed in.
    pub fn redeem(&self, token: &str) -> Result<NewSession, SignInError> {
        self.redeem_at(token, Instant::now())
    }

    pub(crate) fn redeem_at(&self, token: &str, now: Instant) -> Result<NewSession, SignInError> {
        let session_token = random_token()?;
        let csrf = random_token()?;
        let mut state = self.lock();
        let expires = state
            .links
            .remove(&digest(token))
            .ok_or(SignInError::Unknown)?;
        if expires <= now {
            return Err(SignInError::Expired);
        }
        state.sessions.retain(|_, s| s.expires > now);
        while state.sessions.len() >= self.limits.max_sessions.max(1) {
            let oldest = state
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.began)
                .map(|(k, _)| *k);
            match oldest {
                Some(key) => state.sessions.remove(&key),
                None => break,
            };
        }
        let ttl = Duration::from_millis(self.limits.session_ttl_ms);
        state.sessions.insert(
            digest(&session_token),
            Session {
                began: now,
                expires: now + ttl,
                csrf,
            },
        );
        Ok(NewSession {
            token: session_token,
            max_age_s: self.limits.session_ttl_ms / 1000,
        })
    }

    /// The browser session of cookie value `token`, while it lasts.
    pub fn session(&self, token: &str) -> Option<Signed> {
        self.session_at(token, Instant::now())
    }

    pub(crate) fn session_at(&self, token: &str, now: Instant) -> Option<Signed> {
        let key = digest(token);
        let mut state = self.lock();
        let live = state.sessions.get(&key).map(|s| s.expires > now)?;
        if !live {
            state.sessions.remove(&key);
            return None;
        }
        state.sessions.get(&key).map(|s| Signed {
            csrf: s.csrf.clone(),
        })
    }

    /// Ends the browser session of cookie value `token` (signing out).
    pub fn end(&self, token: &str) {
        self.lock().sessions.remove(&digest(token));
    }

    /// Ends every browser session and voids every unused link; says how many of each.
    pub fn revoke_all(&self) -> (u64, u64) {
        let mut state = self.lock();
        let counts = (state.sessions.len() as u64, state.links.len() as u64);
        state.sessions.clear();
        state.links.clear();
        counts
    }
}

/// Whether `given` is `expected`, in time that does not depend on where they differ (their
/// digests are compared, so a guess learns nothing from the time a refusal takes).
pub fn tokens_match(given: &str, expected: &str) -> bool {
    digest(given) == digest(expected)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sign_ins(max_sessions: usize) -> SignIns {
        SignIns::new(
            SignInLimits {
                link_ttl_ms: 60_000,
                session_ttl_ms: 3_600_000,
                max_sessions,
            },
            "http://127.0.0.1:8740".into(),
        )
    }

    #[test]
    fn a_link_signs_in_once_and_the_session_carries_a_csrf_token() {
        let s = sign_ins(4);
        let link = s.mint_link().unwrap();
        assert_eq!(link.token.len(), 2 * TOKEN_BYTES);
        assert_eq!(
            s.link_url(&link.token),
            format!("http://127.0.0.1:8740/signin?token={}", link.token)
        );
        let session = s.redeem(&link.token).unwrap();
        assert_eq!(session.max_age_s, 3_600);
        let signed = s.session(&session.token).unwrap();
        assert_eq!(signed.csrf.len(), 2 * TOKEN_BYTES);
        assert_ne!(signed.csrf, session.token);
        assert_eq!(s.redeem(&link.token), Err(SignInError::Unknown));
        assert_eq!(s.session("not-a-token"), None);
    }

    #[test]
    fn links_and_sessions_expire() {
        let s = sign_ins(4);
        let t0 = Instant::now();
        let link = s.mint_link_at(t0).unwrap();
        let late = t0 + Duration::from_millis(60_001);
        assert_eq!(s.redeem_at(&link.token, late), Err(SignInError::Expired));
        // An expired link is gone too: a second try is unknown.
        assert_eq!(s.redeem_at(&link.token, t0), Err(SignInError::Unknown));
        let link = s.mint_link_at(t0).unwrap();
        let session = s.redeem_at(&link.token, t0).unwrap();
        assert!(s.session_at(&session.token, t0).is_some());
        let after = t0 + Duration::from_millis(3_600_001);
        assert_eq!(s.session_at(&session.token, after), None);
        assert_eq!(
            s.session_at(&session.token, t0),
            None,
            "removed once expired"
        );
    }

    #[test]
    fn revoke_ends_every_session_and_link() {
        let s = sign_ins(4);
        let a = s.redeem(&s.mint_link().unwrap().token).unwrap();
        let b = s.redeem(&s.mint_link().unwrap().token).unwrap();
        let waiting = s.mint_link().unwrap();
        assert_eq!(s.revoke_all(), (2, 1));
        assert_eq!(s.session(&a.token), None);
        assert_eq!(s.session(&b.token), None);
        assert_eq!(s.redeem(&waiting.token), Err(SignInError::Unknown));
        s.end("nothing");
    }

    #[test]
    fn caps_drop_the_oldest_session_and_link() {
        let s = sign_ins(2);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let first = s
            .redeem_at(&s.mint_link_at(t0).unwrap().token, at(1))
            .unwrap();
        let second = s
            .redeem_at(&s.mint_link_at(t0).unwrap().token, at(2))
            .unwrap();
        let third = s
            .redeem_at(&s.mint_link_at(t0).unwrap().token, at(3))
            .unwrap();
        assert_eq!(s.session_at(&first.token, at(4)), None);
        assert!(s.session_at(&second.token, at(4)).is_some());
        assert!(s.session_at(&third.token, at(4)).is_some());
        let links: Vec<NewLink> = (0..=MAX_PENDING_LINKS as u64)
            .map(|i| s.mint_link_at(at(10 + i)).unwrap())
            .collect();
        assert_eq!(
            s.redeem_at(&links[0].token, at(100)),
            Err(SignInError::Unknown)
        );
        assert!(
            s.redeem_at(&links[MAX_PENDING_LINKS].token, at(100))
                .is_ok()
        );
    }

    #[test]
    fn ending_a_session_signs_it_out_and_debug_shows_no_token() {
        let s = sign_ins(4);
        let session = s.redeem(&s.mint_link().unwrap().token).unwrap();
        let shown = format!("{s:?}");
        assert!(!shown.contains(&session.token), "{shown}");
        s.end(&session.token);
        assert_eq!(s.session(&session.token), None);
        assert!(tokens_match("abc", "abc"));
        assert!(!tokens_match("abc", "abd"));
    }
}
