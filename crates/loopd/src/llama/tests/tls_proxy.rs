//! A TLS-terminating proxy for the tests: it accepts TLS on loopback with a certificate a
//! test CA signed (rcgen), and pipes the plain bytes to fakellama, keeping a copy of what
//! clients sent so a test can see the headers that arrived.
#![cfg(test)]
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::task::AbortOnDropHandle;

/// The most bytes of what clients sent that the proxy keeps (headers are near the start).
const MAX_SEEN_BYTES: usize = 1024 * 1024;
/// The size of one read while piping.
const PIPE_CHUNK_BYTES: usize = 16 * 1024;

/// A test CA (its certificate as PEM) and an acceptor presenting a certificate it signed.
pub struct TestTls {
    /// The CA's certificate, PEM: what a `ca_file` holds.
    pub ca_pem: String,
    /// Presents the server certificate.
    pub acceptor: TlsAcceptor,
}

/// Why a test's TLS could not be made.
pub type TlsSetupError = Box<dyn std::error::Error + Send + Sync>;

/// A CA, and a server certificate it signed for `names` (DNS names or IP addresses).
pub fn test_tls_for(names: &[&str]) -> Result<TestTls, TlsSetupError> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let leaf_key = KeyPair::generate()?;
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let leaf = CertificateParams::new(names)?.signed_by(&leaf_key, &ca)?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)?;
    Ok(TestTls {
        ca_pem: pem_of(ca.der()),
        acceptor: TlsAcceptor::from(Arc::new(config)),
    })
}

/// A certificate as PEM.
pub fn pem_of(der: &[u8]) -> String {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    // Base64 is ASCII: every 64-byte chunk is whole characters.
    let lines: Vec<String> = text
        .as_bytes()
        .chunks(64)
        .map(|line| String::from_utf8_lossy(line).into_owned())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

/// The proxy: listening on `127.0.0.1:port`, stopped when dropped.
pub struct TlsProxy {
    /// The port it listens on.
    pub port: u16,
    /// What clients sent, decrypted (at most [`MAX_SEEN_BYTES`]).
    seen: Arc<Mutex<Vec<u8>>>,
    _accepting: AbortOnDropHandle<()>,
}

impl TlsProxy {
    /// Starts it on `rt`, forwarding to `upstream`.
    pub fn start(
        rt: &tokio::runtime::Runtime,
        acceptor: TlsAcceptor,
        upstream: SocketAddr,
    ) -> std::io::Result<Self> {
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0"))?;
        let port = listener.local_addr()?.port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&seen);
        let accepting = rt.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, kept) = (acceptor.clone(), Arc::clone(&kept));
                tokio::spawn(async move {
                    // A client that refuses the certificate ends the handshake: nothing to do.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(plain) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    pipe(tls, plain, kept).await;
                });
            }
        });
        Ok(TlsProxy {
            port,
            seen,
            _accepting: AbortOnDropHandle::new(accepting),
        })
    }

    /// What clients sent so far, as text.
    pub fn seen(&self) -> String {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&seen).into_owned()
    }
}

/// Pipes both ways until either side closes, copying what the client sent into `kept`.
async fn pipe(
    tls: tokio_rustls::server::TlsStream<TcpStream>,
    plain: TcpStream,
    kept: Arc<Mutex<Vec<u8>>>,
) {
    let (mut from_client, mut to_client) = tokio::io::split(tls);
    let (mut from_server, mut to_server) = plain.into_split();
    let upstream = async move {
        let mut chunk = vec![0u8; PIPE_CHUNK_BYTES];
        loop {
            let n = match from_client.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            {
                let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                let room = MAX_SEEN_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
            if to_server.write_all(&chunk[..n]).await.is_err() {
                break;
            }
        }
        let _ = to_server.shutdown().await;
    };
    let downstream = async move {
        let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
        let _ = to_client.shutdown().await;
    };
    tokio::select! {
        () = upstream => {}
        () = downstream => {}
    }
}

/// The TCP address of a fakellama URL (`http://127.0.0.1:PORT`).
pub fn upstream_of(url: &str) -> Result<SocketAddr, TlsSetupError> {
    let address = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url} is not an http:// URL"))?;
    Ok(address.parse()?)
}
