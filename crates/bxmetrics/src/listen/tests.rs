use super::*;
use crate::exposition::{CLASSIC_CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE};
use std::fmt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Fixed;

impl Source for Fixed {
    fn open_metrics(&self) -> Result<String, fmt::Error> {
        Ok("# HELP t Turns.\n# TYPE t counter\nt_total 2\n# EOF\n".to_string())
    }
}

async fn get(addr: SocketAddr, head: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn the_listener_serves_metrics_in_the_asked_format_and_nothing_else() {
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_tcp("test", listener, Arc::new(Fixed), async {
        let _ = stopped.await;
    }));

    let plain = get(addr, "GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(plain.starts_with("HTTP/1.1 200"), "{plain}");
    assert!(plain.contains(CLASSIC_CONTENT_TYPE), "{plain}");
    assert!(plain.contains("# TYPE t_total counter"), "{plain}");

    let open = get(
        addr,
        "GET /metrics HTTP/1.1\r\nhost: x\r\naccept: application/openmetrics-text\r\n\r\n",
    )
    .await;
    assert!(open.contains(OPENMETRICS_CONTENT_TYPE), "{open}");
    assert!(open.contains("# EOF"), "{open}");

    let other = get(addr, "GET /v1/status HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    let post = get(
        addr,
        "POST /metrics HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n",
    )
    .await;
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");

    stop.send(()).unwrap();
    server.await.unwrap();
}
