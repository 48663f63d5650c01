//! A request head hyper cannot parse (400), a URI too long (414) or a head too large (431)
//! gets the handler's error answer with its body, not hyper's empty one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{get_on, limits, read_to_close, serve};
use http::StatusCode;
use tokio::io::AsyncWriteExt;

/// What the server answers to `head` on a new connection: the head is written while the
/// answer is read (it may be larger than the socket holds), until the server closes.
async fn answer_to(head: Vec<u8>) -> String {
    let served = serve(limits(), false);
    let (mut reader, mut writer) = served.connect().await.into_split();
    let writing = tokio::spawn(async move {
        // The server may close before all of a too large head is written.
        let _ = writer.write_all(&head).await;
        writer
    });
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    let read = tokio::time::timeout(common::WAIT, async {
        loop {
            match tokio::io::AsyncReadExt::read(&mut reader, &mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the server did not close the connection; read: {}",
        String::from_utf8_lossy(&all)
    );
    drop(writing);
    String::from_utf8_lossy(&all).into_owned()
}

/// The status line, `content-type` and body of an answer.
fn parts(answer: &str) -> (&str, Option<&str>, &str) {
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((answer, ""));
    let status = head.lines().next().unwrap_or("");
    let content_type = head.lines().find_map(|l| l.strip_prefix("content-type: "));
    (status, content_type, body)
}

#[tokio::test]
async fn a_head_that_is_not_http_gets_a_400_with_the_handlers_body() {
    let answer = answer_to(b"GET /fast HTTP/1.1\r\nno colon here\r\n\r\n".to_vec()).await;
    let (status, content_type, body) = parts(&answer);
    assert_eq!(status, "HTTP/1.1 400 Bad Request", "{answer}");
    assert_eq!(content_type, Some("text/plain"), "{answer}");
    assert!(
        body.starts_with("malformed 400: the request is not valid HTTP/1.1: "),
        "{answer}"
    );
    assert!(answer.contains("connection: close"), "{answer}");
}

#[tokio::test]
async fn a_uri_too_long_gets_a_414_with_the_handlers_body() {
    let uri = format!("/{}", "a".repeat(bxhttp::MAX_URI_BYTES + 1));
    let head = format!("GET {uri} HTTP/1.1\r\nhost: t\r\n\r\n");
    let answer = answer_to(head.into_bytes()).await;
    let (status, _, body) = parts(&answer);
    assert_eq!(status, "HTTP/1.1 414 URI Too Long", "{answer}");
    assert!(body.starts_with("malformed 414: "), "{answer}");
    assert!(
        body.contains(&format!("{} bytes", bxhttp::MAX_URI_BYTES)),
        "{answer}"
    );
}

#[tokio::test]
async fn a_head_too_large_gets_a_431_with_the_handlers_body() {
    let head = format!(
        "GET /fast HTTP/1.1\r\nhost: t\r\nx-big: {}\r\n\r\n",
        "b".repeat(bxhttp::MAX_HEAD_BYTES)
    );
    let answer = answer_to(head.into_bytes()).await;
    let (status, _, body) = parts(&answer);
    assert_eq!(
        status, "HTTP/1.1 431 Request Header Fields Too Large",
        "{answer}"
    );
    assert!(body.starts_with("malformed 431: "), "{answer}");
    assert!(
        body.contains(&format!("{} bytes", bxhttp::MAX_HEAD_BYTES)),
        "{answer}"
    );
}

#[tokio::test]
async fn too_many_header_fields_get_a_431_with_the_handlers_body() {
    let fields: String = (0..=bxhttp::MAX_HEADER_FIELDS)
        .map(|i| format!("x-{i}: v\r\n"))
        .collect();
    let head = format!("GET /fast HTTP/1.1\r\nhost: t\r\n{fields}\r\n");
    let answer = answer_to(head.into_bytes()).await;
    let (status, _, body) = parts(&answer);
    assert_eq!(
        status, "HTTP/1.1 431 Request Header Fields Too Large",
        "{answer}"
    );
    assert!(
        body.contains(&format!("{} header fields", bxhttp::MAX_HEADER_FIELDS)),
        "{answer}"
    );
}

#[tokio::test]
async fn a_handlers_own_400_goes_out_as_it_is() {
    let served = serve(limits(), false);
    let mut stream = served.connect().await;
    common::send_raw(
        &mut stream,
        b"GET /bad HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n",
    )
    .await;
    let answer = String::from_utf8_lossy(&read_to_close(&mut stream).await).into_owned();
    let (status, _, body) = parts(&answer);
    assert_eq!(status, "HTTP/1.1 400 Bad Request", "{answer}");
    assert_eq!(body, "", "{answer}");
    // And the server goes on serving.
    let (status, body) = get_on(served.connect().await, "/fast").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
}
