//! How an `https://` endpoint's certificate is checked: rustls (the `ring` provider), always
//! verifying the chain and the name, against either the operating system's root certificates
//! or only the CA a configured `ca_file` holds.
//!
//! Decision: the system's roots come from `rustls-native-certs` (on Linux: `SSL_CERT_FILE` /
//! `SSL_CERT_DIR`, else the usual bundle paths such as `/etc/ssl/certs`), read once per
//! process. Where none can be loaded (a minimal container without a CA bundle), an https
//! endpoint is refused with an error that says how to give it roots (`ca_file`,
//! `SSL_CERT_FILE`, the distribution's CA bundle): checking is never turned off, and loopd
//! carries no second, compiled-in set of roots beside the system's.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::error::InferError;

/// The largest CA file read, in bytes (a bundle of a few hundred certificates fits).
const MAX_CA_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// How an https endpoint's certificate is checked: a rustls client configuration (shared,
/// cheap to clone) and where its trusted roots came from.
#[derive(Clone)]
pub struct TlsOptions {
    /// The rustls configuration every connection to the endpoint uses.
    config: Arc<rustls::ClientConfig>,
    /// What it trusts, for `Debug` and equality.
    trust: Trust,
}

/// Where the trusted roots came from.
#[derive(Clone, PartialEq, Eq)]
enum Trust {
    /// The operating system's root certificates.
    System,
    /// Only the CA certificates of a file.
    CaFile {
        /// The file.
        path: PathBuf,
        /// Its certificates (two options trusting the same file's old and new content differ).
        certs: Vec<CertificateDer<'static>>,
    },
}

impl TlsOptions {
    /// Trusting the operating system's root certificates. Where the system has none,
    /// [`InferError::BadConfig`] says so and how to give some (see the module's doc).
    pub fn system_roots() -> Result<TlsOptions, InferError> {
        let roots = system_roots()
            .as_ref()
            .map_err(|message| InferError::BadConfig {
                message: message.clone(),
            })?;
        Ok(TlsOptions {
            config: client_config(roots.clone())?,
            trust: Trust::System,
        })
    }

    /// Trusting only the CA certificates in the PEM file `path`. A missing, unreadable,
    /// too large or certificate-less file, or one holding a certificate rustls cannot use as a
    /// root, is [`InferError::BadConfig`] naming the setting `key` (e.g. `llama.ca_file`) and
    /// the file.
    pub fn ca_file(key: &str, path: &Path) -> Result<TlsOptions, InferError> {
        let bad = |why: String| InferError::BadConfig {
            message: format!("{key} {}: {why}", path.display()),
        };
        let mut pem = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_CA_FILE_BYTES + 1).read_to_end(&mut pem))
            .map_err(|e| bad(format!("cannot read it ({e})")))?;
        if pem.len() as u64 > MAX_CA_FILE_BYTES {
            return Err(bad(format!("is larger than {MAX_CA_FILE_BYTES} bytes")));
        }
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("is not a PEM file of certificates ({e})")))?;
        if certs.is_empty() {
            return Err(bad(
                "holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)".into(),
            ));
        }
        let mut roots = RootCertStore::empty();
        for (i, cert) in certs.iter().enumerate() {
            roots.add(cert.clone()).map_err(|e| {
                bad(format!(
                    "certificate {} cannot be trusted as a CA ({e})",
                    i + 1
                ))
            })?;
        }
        Ok(TlsOptions {
            config: client_config(roots)?,
            trust: Trust::CaFile {
                path: path.to_path_buf(),
                certs,
            },
        })
    }

    /// The rustls configuration.
    pub(crate) fn config(&self) -> Arc<rustls::ClientConfig> {
        Arc::clone(&self.config)
    }
}

impl PartialEq for TlsOptions {
    /// Equal when they trust the same roots (the configurations are built alike).
    fn eq(&self, other: &TlsOptions) -> bool {
        self.trust == other.trust
    }
}

impl Eq for TlsOptions {}

impl fmt::Debug for TlsOptions {
    /// What it trusts, not the rustls configuration.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let trust = match &self.trust {
            Trust::System => "the system's root certificates".to_owned(),
            Trust::CaFile { path, certs } => {
                format!("{} certificate(s) of {}", certs.len(), path.display())
            }
        };
        f.debug_struct("TlsOptions")
            .field("trusts", &trust)
            .finish()
    }
}

/// The system's roots, loaded once per process (reading the store takes a while and it does
/// not change under a running loopd), or why there are none.
fn system_roots() -> &'static Result<RootCertStore, String> {
    static ROOTS: OnceLock<Result<RootCertStore, String>> = OnceLock::new();
    ROOTS.get_or_init(|| roots_of(rustls_native_certs::load_native_certs()))
}

/// The roots among what was loaded from the system's store, or why there are none.
fn roots_of(loaded: rustls_native_certs::CertificateResult) -> Result<RootCertStore, String> {
    for error in &loaded.errors {
        tracing::warn!(%error, "cannot read some of the system's root certificates");
    }
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(loaded.certs);
    if added == 0 {
        return Err(NO_SYSTEM_ROOTS.to_owned());
    }
    tracing::debug!(added, ignored, "the system's root certificates are loaded");
    Ok(roots)
}

/// Why an https endpoint without `ca_file` cannot be checked on a system without a CA bundle.
const NO_SYSTEM_ROOTS: &str = "no system root certificates were found to check an https \
     endpoint against: install the distribution's CA bundle (Debian: ca-certificates), point \
     SSL_CERT_FILE at one, or name the endpoint's CA with ca_file";

/// A client configuration trusting `roots`, speaking HTTP/1.1, without client certificates.
fn client_config(roots: RootCertStore) -> Result<Arc<rustls::ClientConfig>, InferError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| InferError::BadConfig {
            message: format!("TLS is not available: {e}"),
        })?;
    let mut config = builder.with_root_certificates(roots).with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Why a TLS handshake failed: [`InferError::Tls`] for what rustls refused (a certificate not
/// accepted says so plainly, with rustls' reason and a hint), [`InferError::Connect`] (retried)
/// for a connection that broke during the handshake.
pub(crate) fn handshake_error(url: String, e: &std::io::Error) -> InferError {
    let message = match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(why)) => format!(
            "TLS handshake failed: the server's certificate was not accepted ({why}); is it \
             for this host name and signed by a CA the endpoint trusts (the system's, or its \
             ca_file)?"
        ),
        Some(other) => format!("TLS handshake failed: {other}"),
        None if e.kind() == std::io::ErrorKind::InvalidData => {
            format!("TLS handshake failed: {e}")
        }
        None => {
            return InferError::Connect {
                url,
                message: format!("the connection broke during the TLS handshake ({e})"),
            };
        }
    };
    InferError::Tls { url, message }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn pem_of_a_ca() -> String {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        crate::llama::tests::tls_proxy::pem_of(cert.der())
    }

    #[test]
    fn llama_tls_reads_a_ca_file_and_compares_by_its_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, pem_of_a_ca()).unwrap();
        let a = TlsOptions::ca_file("llama.ca_file", &path).unwrap();
        let b = TlsOptions::ca_file("llama.ca_file", &path).unwrap();
        assert_eq!(a, b);
        assert!(format!("{a:?}").contains("1 certificate(s) of"), "{a:?}");
        std::fs::write(&path, pem_of_a_ca()).unwrap();
        let c = TlsOptions::ca_file("llama.ca_file", &path).unwrap();
        assert_ne!(a, c, "another CA in the same file");
        if let Ok(system) = TlsOptions::system_roots() {
            assert_ne!(a, system);
        }
    }

    #[test]
    fn llama_tls_without_system_roots_refuses_https_and_says_how_to_give_roots() {
        let err = roots_of(rustls_native_certs::CertificateResult::default()).unwrap_err();
        for needle in [
            "no system root certificates",
            "ca-certificates",
            "SSL_CERT_FILE",
            "ca_file",
        ] {
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }

    #[test]
    fn llama_tls_refuses_a_bad_ca_file_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate\n").unwrap();
        let broken = dir.path().join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let huge = dir.path().join("huge.pem");
        std::fs::write(&huge, vec![b'a'; MAX_CA_FILE_BYTES as usize + 1]).unwrap();
        for (path, why) in [
            (&missing, "cannot read it"),
            (&garbage, "holds no certificate"),
            (&broken, "is not a PEM file"),
            (&huge, "is larger than"),
        ] {
            let e = TlsOptions::ca_file("llama.endpoints[0] (gpu).ca_file", path).unwrap_err();
            assert!(matches!(e, InferError::BadConfig { .. }), "{e:?}");
            let text = e.to_string();
            assert!(text.contains("llama.endpoints[0] (gpu).ca_file"), "{text}");
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains(why), "{text}");
        }
    }
}
