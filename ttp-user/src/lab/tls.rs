//! TLS to the lab database as libpq's `sslmode` and `sslrootcert` ask,
//! through rustls (ring provider) and tokio-postgres-rustls (docs/lab.md,
//! "TLS"). The client library parses only disable/prefer/require and no
//! `sslrootcert`, so both are taken out of the connection string here and
//! turned into a rustls client configuration:
//!
//! - `disable`: no TLS;
//! - `prefer` (libpq's default) and `require`: TLS (prefer: if the server
//!   offers it), the certificate not checked, as libpq does — unless
//!   `sslrootcert` is given, then as `verify-ca` (libpq's rule);
//! - `verify-ca`: the chain must lead to a root of `sslrootcert`;
//! - `verify-full`: that, and the certificate must name the host.
use std::{path::PathBuf, sync::Arc};

use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
    client::{
        WebPkiServerVerifier,
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    },
    crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature},
    pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
};
use tokio_postgres::config::SslMode as ClientSslMode;

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// The TLS settings of a connection string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub root_cert: Option<PathBuf>,
}

const KEYS: [&str; 2] = ["sslmode", "sslrootcert"];

/// Takes `sslmode` and `sslrootcert` out of a connection string (libpq
/// key=value pairs or a postgresql:// URL): the rest, for the client
/// library, and the TLS settings. The error is one line.
pub fn split(conninfo: &str) -> Result<(String, TlsSettings), String> {
    split_with_env(conninfo, |k| std::env::var(k).ok())
}

/// [`split`], with libpq's defaults from the environment (`PGSSLMODE`,
/// `PGSSLROOTCERT`) for what the string does not set.
fn split_with_env(
    conninfo: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(String, TlsSettings), String> {
    let (rest, mut found) =
        if conninfo.starts_with("postgres://") || conninfo.starts_with("postgresql://") {
            split_url(conninfo)
        } else {
            split_pairs(conninfo)?
        };
    for (key, var) in KEYS.iter().zip(["PGSSLMODE", "PGSSLROOTCERT"]) {
        if !found.iter().any(|(k, _)| k == key)
            && let Some(v) = env(var)
        {
            found.insert(0, (key.to_string(), v));
        }
    }
    let mut settings = TlsSettings {
        mode: SslMode::Prefer,
        root_cert: None,
    };
    for (k, v) in found {
        if k == "sslmode" {
            settings.mode = match v.as_str() {
                "disable" => SslMode::Disable,
                "prefer" | "allow" => SslMode::Prefer,
                "require" => SslMode::Require,
                "verify-ca" => SslMode::VerifyCa,
                "verify-full" => SslMode::VerifyFull,
                other => {
                    return Err(format!(
                        "sslmode={other:?} is not one of disable, allow, prefer, require, verify-ca, verify-full"
                    ));
                }
            };
        } else if v == "system" {
            return Err(
                "sslrootcert=system is not supported: give the file of the CA that signed the server's certificate".into(),
            );
        } else if !v.is_empty() {
            settings.root_cert = Some(PathBuf::from(v));
        }
    }
    Ok((rest, settings))
}

/// key=value pairs: values may be 'quoted' with \' and \\ escapes.
fn split_pairs(s: &str) -> Result<(String, Vec<(String, String)>), String> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut rest = String::new();
    let mut found = Vec::new();
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() {
            break;
        }
        let start = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = &s[start..i];
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() || b[i] != b'=' {
            return Err(format!("connection string: `{key}` has no `=value`"));
        }
        i += 1;
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = Vec::new();
        if i < b.len() && b[i] == b'\'' {
            i += 1;
            loop {
                match b.get(i) {
                    None => return Err(format!("connection string: `{key}`: unterminated quote")),
                    Some(b'\'') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') if i + 1 < b.len() => {
                        value.push(b[i + 1]);
                        i += 2;
                    }
                    Some(c) => {
                        value.push(*c);
                        i += 1;
                    }
                }
            }
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                value.push(b[i]);
                i += 1;
            }
        }
        if KEYS.contains(&key) {
            found.push((
                key.to_string(),
                String::from_utf8_lossy(&value).into_owned(),
            ));
        } else {
            if !rest.is_empty() {
                rest.push(' ');
            }
            rest.push_str(&s[start..i]);
        }
    }
    Ok((rest, found))
}

/// postgresql://…?k=v&…: the query's sslmode and sslrootcert
/// (percent-decoded) taken out.
fn split_url(s: &str) -> (String, Vec<(String, String)>) {
    let Some((base, query)) = s.split_once('?') else {
        return (s.to_string(), Vec::new());
    };
    let mut kept = Vec::new();
    let mut found = Vec::new();
    for part in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').unwrap_or((part, ""));
        let k = percent_decode(k);
        if KEYS.contains(&k.as_str()) {
            found.push((k, percent_decode(v)));
        } else {
            kept.push(part);
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (rest, found)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl TlsSettings {
    /// The client library's mode: verify-* are `require` there, the
    /// checking is the verifier's.
    pub fn client_mode(&self) -> ClientSslMode {
        match self.mode {
            SslMode::Disable => ClientSslMode::Disable,
            SslMode::Prefer => ClientSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => ClientSslMode::Require,
        }
    }

    /// The rustls configuration for these settings; `None` for disable.
    /// An unreadable or empty root certificate file is a one-line error.
    pub fn client_config(&self) -> Result<Option<ClientConfig>, String> {
        if self.mode == SslMode::Disable {
            return Ok(None);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS set-up: {e}"))?;
        let verify = match (self.mode, &self.root_cert) {
            (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
                return Err(format!(
                    "sslmode={} needs sslrootcert=FILE: the certificate of the CA that signed the lab server's certificate",
                    if self.mode == SslMode::VerifyCa {
                        "verify-ca"
                    } else {
                        "verify-full"
                    }
                ));
            }
            (_, None) => None,
            (_, Some(path)) => Some(roots(path)?),
        };
        let verifier: Arc<dyn ServerCertVerifier> = match verify {
            None => Arc::new(Unchecked(provider)),
            Some(roots) => {
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| format!("sslrootcert: {e}"))?;
                if self.mode == SslMode::VerifyFull {
                    webpki
                } else {
                    Arc::new(AnyName(webpki))
                }
            }
        };
        Ok(Some(
            builder
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth(),
        ))
    }
}

fn roots(path: &std::path::Path) -> Result<RootCertStore, String> {
    let what = |e: &dyn std::fmt::Display| format!("sslrootcert {}: {e}", path.display());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| what(&e))?
        .collect::<Result<_, _>>()
        .map_err(|e| what(&e))?;
    if certs.is_empty() {
        return Err(what(&"no PEM certificate in it"));
    }
    let mut store = RootCertStore::empty();
    for c in certs {
        store.add(c).map_err(|e| what(&e))?;
    }
    Ok(store)
}

/// prefer/require without a root certificate: encrypted, the server's
/// certificate not checked (libpq's meaning of these modes), but the
/// handshake's signatures still verified.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// verify-ca: the chain checked against the roots, the host name not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a mode lost or misread in either form of connection string,
    /// and other options dropped or mangled on the way.
    #[test]
    fn ssl_options_are_taken_out_of_both_forms() {
        let split = |s: &str| split_with_env(s, |_| None);
        let (rest, t) = split(
            "host=db port=5433 sslmode=verify-full  user='a b\\'c' sslrootcert='/x y/ca.pem'",
        )
        .unwrap();
        assert_eq!(rest, "host=db port=5433 user='a b\\'c'");
        assert_eq!(t.mode, SslMode::VerifyFull);
        assert_eq!(
            t.root_cert.as_deref(),
            Some(std::path::Path::new("/x y/ca.pem"))
        );
        let (rest, t) = split(
            "postgresql://u@db:5433/lab?sslmode=require&connect_timeout=3&sslrootcert=%2Fca.pem",
        )
        .unwrap();
        assert_eq!(rest, "postgresql://u@db:5433/lab?connect_timeout=3");
        assert_eq!(t.mode, SslMode::Require);
        assert_eq!(
            t.root_cert.as_deref(),
            Some(std::path::Path::new("/ca.pem"))
        );
        let (rest, t) = split("postgresql://db/lab?sslmode=disable").unwrap();
        assert_eq!(
            (rest.as_str(), t.mode),
            ("postgresql://db/lab", SslMode::Disable)
        );
        let (rest, t) = split("host=db user = me").unwrap();
        assert_eq!(
            (rest.as_str(), t.mode),
            ("host=db user = me", SslMode::Prefer)
        );
        // The environment fills in what the string leaves out.
        let env = |k: &str| match k {
            "PGSSLMODE" => Some("verify-ca".to_string()),
            "PGSSLROOTCERT" => Some("/env/ca.pem".to_string()),
            _ => None,
        };
        let (_, t) = split_with_env("host=db sslmode=require", env).unwrap();
        assert_eq!(t.mode, SslMode::Require);
        assert_eq!(
            t.root_cert.as_deref(),
            Some(std::path::Path::new("/env/ca.pem"))
        );
        for bad in [
            "host=db sslmode=maybe",
            "host=db sslrootcert=system",
            "host=db user='x",
        ] {
            let e = split(bad).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
        let e = TlsSettings {
            mode: SslMode::VerifyFull,
            root_cert: None,
        }
        .client_config()
        .unwrap_err();
        assert!(e.contains("sslrootcert"), "{e}");
    }
}
