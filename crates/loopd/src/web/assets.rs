//! The console's two static files, built into loopd (no CDN, nothing fetched from elsewhere):
//! its one script and its style sheet.

use bxhttp::answer::Body;
use bytes::Bytes;
use http::{HeaderValue, Response, header};
use http_body_util::BodyExt;

/// The script: streams a task's answer and follows a session live.
pub const CONSOLE_JS: &str = include_str!("assets/console.js");
/// The style sheet.
pub const CONSOLE_CSS: &str = include_str!("assets/console.css");

/// The asset called `name`, if there is one.
pub fn answer(name: &str) -> Option<Response<Body>> {
    let (text, kind) = match name {
        "console.js" => (CONSOLE_JS, "text/javascript; charset=utf-8"),
        "console.css" => (CONSOLE_CSS, "text/css; charset=utf-8"),
        _ => return None,
    };
    let body = http_body_util::Full::new(Bytes::from_static(text.as_bytes()))
        .map_err(|e| match e {})
        .boxed();
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    Some(response)
}
