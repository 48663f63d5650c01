//! `{secret:NAME}` placeholders in the values a grant or an `[[mcp]]` server attaches
//! (`headers`, `env`): parsed once, filled with the values brokerd holds when the call (or the
//! server's start) needs them.

use super::Secrets;

/// What opens a placeholder.
pub const OPEN: &str = "{secret:";

/// One piece of a value: literal text, or the value of a named secret.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Secret(String),
}

/// A value with placeholders, such as `Bearer {secret:github}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

/// Why a value is not a valid template, in words for a config error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `{secret:` without its closing `}`.
    #[error("a placeholder {OPEN}... is not closed with }}")]
    Unclosed,
    /// A name that is not `[a-z0-9_]+`.
    #[error("{0:?} is not a secret name (a-z, 0-9 and _ only)")]
    BadName(String),
}

/// A placeholder names a secret brokerd does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no secret named {0:?} is loaded")]
pub struct MissingSecret(pub String);

impl Template {
    /// Parses `value`. Text outside placeholders is kept as written.
    pub fn parse(value: &str) -> Result<Template, TemplateError> {
        let mut pieces = Vec::new();
        let mut rest = value;
        while let Some(at) = rest.find(OPEN) {
            if at > 0 {
                pieces.push(Piece::Text(rest[..at].to_string()));
            }
            let after = &rest[at + OPEN.len()..];
            let end = after.find('}').ok_or(TemplateError::Unclosed)?;
            let name = &after[..end];
            if !is_name(name) {
                return Err(TemplateError::BadName(name.to_string()));
            }
            pieces.push(Piece::Secret(name.to_string()));
            rest = &after[end + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_string()));
        }
        Ok(Template { pieces })
    }

    /// The secrets it names, in order (repeats included).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|piece| match piece {
            Piece::Secret(name) => Some(name.as_str()),
            Piece::Text(_) => None,
        })
    }

    /// Whether it names any secret.
    pub fn has_secret(&self) -> bool {
        self.names().next().is_some()
    }

    /// The value with every placeholder filled from `secrets`.
    pub fn render(&self, secrets: &Secrets) -> Result<String, MissingSecret> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Secret(name) => out.push_str(
                    secrets
                        .value(name)
                        .ok_or_else(|| MissingSecret(name.clone()))?,
                ),
            }
        }
        Ok(out)
    }
}

/// Whether `value` holds a placeholder (parsed or not).
pub fn mentions_secret(value: &str) -> bool {
    value.contains(OPEN)
}

/// A secret's name: `[a-z0-9_]+`.
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Checks the template `value` at `key` for a config: it parses, and every name it uses is
/// one of `known` (the `[[secrets]]` names).
pub fn check(key: &str, value: &str, known: &[&str], p: &mut bxconfig::Problems) {
    match Template::parse(value) {
        Err(e) => p.push(key, e.to_string()),
        Ok(template) => {
            for name in template.names() {
                if !known.contains(&name) {
                    p.push(key, format!("{OPEN}{name}}} names no [[secrets]] entry"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn text_and_placeholders_are_kept_apart() {
        let t = Template::parse("Bearer {secret:github} and {secret:x_2}!").unwrap();
        assert_eq!(t.names().collect::<Vec<_>>(), ["github", "x_2"]);
        let secrets = Secrets::from_values([("github", "ghp_abcdefgh"), ("x_2", "zzzzzzzz")]);
        assert_eq!(
            t.render(&secrets).unwrap(),
            "Bearer ghp_abcdefgh and zzzzzzzz!"
        );
        assert!(!Template::parse("plain").unwrap().has_secret());
    }

    #[test]
    fn bad_placeholders_are_refused_without_guessing() {
        assert_eq!(
            Template::parse("Bearer {secret:github"),
            Err(TemplateError::Unclosed)
        );
        assert_eq!(
            Template::parse("{secret:Git Hub}"),
            Err(TemplateError::BadName("Git Hub".into()))
        );
        let t = Template::parse("{secret:gone}").unwrap();
        assert_eq!(
            t.render(&Secrets::default()),
            Err(MissingSecret("gone".into()))
        );
    }
}
