//! What the model asks `http_fetch` to send ([`Asked`]): the URL, a method the grant allows,
//! headers of its own and a body. All of it is checked from the arguments and the grant alone,
//! before anything is resolved or connected to, and the leak guard looks at all of it first:
//! a secret anywhere in what the model wrote is a [`ToolError::Leak`] naming where (never
//! quoting it), so an attempt to carry one out is refused and audited as one even when the
//! arguments are wrong in other ways too.

use super::target::Target;
use crate::builtin::files::args::{self, Kind, Param};
use crate::config::{DEFAULT_METHODS, HttpGrant, RESERVED_HEADERS};
use crate::secrets::guard::Guard;
use crate::tool::ToolError;
use http::{HeaderName, HeaderValue, Method};
use serde_json::Value;

/// The most headers one call may set itself.
pub const MAX_HEADERS: usize = 16;

/// The longest body one call may send, in bytes (256 KiB).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// The tool's parameters (the descriptions name [`MAX_HEADERS`] and [`MAX_BODY_BYTES`]; a test
/// holds them to it).
pub(crate) const PARAMS: [Param; 4] = [
    Param {
        name: "url",
        kind: Kind::String,
        required: true,
        description: "The http:// or https:// URL; its host must be one this session was \
                      granted.",
    },
    Param {
        name: "method",
        kind: Kind::String,
        required: false,
        description: "The HTTP method: GET (the default), HEAD, POST, PUT, PATCH or DELETE, \
                      as far as this session's grant allows it.",
    },
    Param {
        name: "headers",
        kind: Kind::StringMap,
        required: false,
        description: "Extra request headers, name to value (at most 16); usually none \
                      are needed. Host, Content-Length, User-Agent and the connection headers \
                      are set by the tool (a value given for them is ignored); a header the \
                      grant attaches (such as Authorization) cannot be given.",
    },
    Param {
        name: "body",
        kind: Kind::String,
        required: false,
        description: "The request body as text (at most 256 KiB), only with a method other \
                      than GET or HEAD; give its Content-Type in headers.",
    },
];

/// One call's request as the model asked for it, checked.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    /// The model's URL.
    pub target: Target,
    /// The method, one of the grant's.
    pub method: Method,
    /// The headers the model set, none reserved or attached by the grant.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The body (never with GET or HEAD).
    pub body: Option<String>,
}

impl Asked {
    /// Checks `arguments` against the parameters and `grant`, after the leak `guard` found
    /// no secret in them.
    pub(crate) fn parse(
        arguments: &Value,
        grant: &HttpGrant,
        guard: &Guard,
    ) -> Result<Asked, ToolError> {
        scan(arguments, guard)?;
        let args = args::check(arguments, &PARAMS)?;
        let target = Target::parse(args.str("url").unwrap_or_default())
            .map_err(ToolError::InvalidArguments)?;
        let method = method(args.str("method"), grant)?;
        let body = match args.str("body") {
            None => None,
            Some(_) if !carries_body(&method) => {
                return Err(ToolError::InvalidArguments(format!(
                    "a body cannot be sent with {method}: give a method such as POST or PUT \
                     (one the grant allows)"
                )));
            }
            Some(body) if body.len() > MAX_BODY_BYTES => {
                return Err(ToolError::InvalidArguments(format!(
                    "the body is {} bytes long; the most is {MAX_BODY_BYTES}",
                    body.len()
                )));
            }
            Some(body) => Some(body.to_string()),
        };
        let headers = headers(&args.string_map("headers").unwrap_or_default(), grant)?;
        Ok(Asked {
            target,
            method,
            headers,
            body,
        })
    }

    /// Whether redirects are followed: for GET and HEAD only, which send nothing but the
    /// URL again (a redirected POST would send its body to a place its caller did not name).
    pub(crate) fn follows_redirects(&self) -> bool {
        !carries_body(&self.method)
    }
}

/// Whether `method` may carry a body (every one but GET and HEAD).
fn carries_body(method: &Method) -> bool {
    *method != Method::GET && *method != Method::HEAD
}

/// The leak guard over everything the model wrote: the URL, each header's name and value,
/// the body, and then anything else in the arguments.
fn scan(arguments: &Value, guard: &Guard) -> Result<(), ToolError> {
    if let Some(name) = arguments.get("url").and_then(|url| guard.find_in_json(url)) {
        return Err(ToolError::leak(name, "the URL"));
    }
    if let Some(headers) = arguments.get("headers").and_then(Value::as_object) {
        for (header, value) in headers {
            // The name holds the secret: it is not quoted.
            if let Some(name) = guard.find(header.as_bytes()) {
                return Err(ToolError::leak(name, "a header's name"));
            }
            if let Some(name) = guard.find_in_json(value) {
                return Err(ToolError::leak(name, &format!("header {header:?}")));
            }
        }
    }
    if let Some(name) = arguments
        .get("body")
        .and_then(|body| guard.find_in_json(body))
    {
        return Err(ToolError::leak(name, "the body"));
    }
    match guard.find_in_json(arguments) {
        Some(name) => Err(ToolError::leak(name, "the arguments")),
        None => Ok(()),
    }
}

/// The method asked for (GET when none), upper-cased, if the grant allows it.
fn method(asked: Option<&str>, grant: &HttpGrant) -> Result<Method, ToolError> {
    let name = asked.map_or_else(|| "GET".to_string(), str::to_ascii_uppercase);
    // A grant made in code without methods has the config's default.
    let allowed: Vec<&str> = if grant.methods.is_empty() {
        DEFAULT_METHODS.to_vec()
    } else {
        grant.methods.iter().map(String::as_str).collect()
    };
    let refused = || {
        ToolError::InvalidArguments(format!(
            "method {name:?}{} is not allowed by this session's grant; it allows {}",
            if asked.is_none() {
                " (the default)"
            } else {
                ""
            },
            allowed.join(", ")
        ))
    };
    if !allowed.iter().any(|m| m.eq_ignore_ascii_case(&name)) {
        return Err(refused());
    }
    Method::from_bytes(name.as_bytes()).map_err(|_| refused())
}

/// The model's headers, checked: at most [`MAX_HEADERS`], each a valid name that is not one
/// the grant attaches, given once, with a valid value; a reserved one is left out.
fn headers(
    given: &[(&str, &str)],
    grant: &HttpGrant,
) -> Result<Vec<(HeaderName, HeaderValue)>, ToolError> {
    let invalid = |message: String| ToolError::InvalidArguments(message);
    if given.len() > MAX_HEADERS {
        return Err(invalid(format!(
            "{} headers given; the most is {MAX_HEADERS}",
            given.len()
        )));
    }
    let mut out: Vec<(HeaderName, HeaderValue)> = Vec::with_capacity(given.len());
    for (name, value) in given {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| invalid(format!("{name:?} is not a valid header name")))?;
        // HeaderName is lower case, as RESERVED_HEADERS are. The tool sets these itself, so
        // the model's value is dropped rather than refused: small models add `Host` (the
        // URL's own) unasked, and a refusal sent Qwen2.5-Coder-0.5B off course for the rest
        // of its turn. Dropped, it changes nothing: the tool's own value is what goes out.
        if RESERVED_HEADERS.contains(&header.as_str()) {
            continue;
        }
        if grant.headers.keys().any(|g| g.eq_ignore_ascii_case(name)) {
            return Err(invalid(format!(
                "header {name:?} is attached by this session's grant; a call cannot set it"
            )));
        }
        if out.iter().any(|(seen, _)| *seen == header) {
            return Err(invalid(format!(
                "header {name:?} is given twice (header names ignore case)"
            )));
        }
        let value = HeaderValue::from_str(value).map_err(|_| {
            invalid(format!(
                "the value of header {name:?} is not valid in HTTP: only visible ASCII \
                 characters, spaces and tabs (no line breaks)"
            ))
        })?;
        out.push((header, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_descriptions_name_the_limits() {
        assert!(
            PARAMS[2]
                .description
                .contains(&format!("at most {MAX_HEADERS}"))
        );
        assert!(
            PARAMS[3]
                .description
                .contains(&format!("at most {} KiB", MAX_BODY_BYTES / 1024))
        );
    }
}
