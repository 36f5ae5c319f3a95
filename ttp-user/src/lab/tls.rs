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
//!
//! A client certificate (`sslcert`, `sslkey`, or libpq's defaults
//! `~/.postgresql/postgresql.crt` and `.key`) is sent when the server asks
//! for one (`hostssl … cert`, `clientcert=verify-ca|verify-full`).
use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
    client::{
        WebPkiServerVerifier,
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    },
    crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature},
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime, pem::PemObject},
};
use tokio_postgres::config::SslMode as ClientSslMode;

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// The TLS settings of a connection string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    pub mode: SslMode,
    pub root_cert: Option<PathBuf>,
    /// `sslcert`: the client certificate (PEM, the chain after it).
    pub client_cert: Option<PathBuf>,
    /// `sslkey`: its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub client_key: Option<PathBuf>,
}

const KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];
/// libpq's environment variables for [`KEYS`], in the same order.
const VARS: [&str; 4] = ["PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY"];

/// Takes `sslmode`, `sslrootcert`, `sslcert` and `sslkey` out of a
/// connection string (libpq key=value pairs or a postgresql:// URL): the
/// rest, for the client library, and the TLS settings. The error is one
/// line.
pub(crate) fn split(conninfo: &str) -> Result<(String, TlsSettings), String> {
    split_with_env(conninfo, |k| std::env::var(k).ok())
}

/// [`split`], with libpq's defaults from the environment (`PGSSLMODE`,
/// `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`) for what the string does not
/// set.
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
    for (key, var) in KEYS.iter().zip(VARS) {
        if !found.iter().any(|(k, _)| k == key)
            && let Some(v) = env(var)
        {
            found.insert(0, (key.to_string(), v));
        }
    }
    let mut settings = TlsSettings {
        mode: SslMode::Prefer,
        root_cert: None,
        client_cert: None,
        client_key: None,
    };
    for (k, v) in found {
        if k == "sslcert" || k == "sslkey" {
            let slot = if k == "sslcert" {
                &mut settings.client_cert
            } else {
                &mut settings.client_key
            };
            *slot = (!v.is_empty()).then(|| PathBuf::from(v));
        } else if k == "sslmode" {
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

/// postgresql://…?k=v&…: the query's sslmode, sslrootcert, sslcert and
/// sslkey (percent-decoded) taken out.
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
    pub(crate) fn client_mode(&self) -> ClientSslMode {
        match self.mode {
            SslMode::Disable => ClientSslMode::Disable,
            SslMode::Prefer => ClientSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => ClientSslMode::Require,
        }
    }

    /// The rustls configuration for these settings; `None` for disable.
    /// An unreadable or empty root certificate file, or a client
    /// certificate or key that cannot be used, is a one-line error.
    pub(crate) fn client_config(&self) -> Result<Option<ClientConfig>, String> {
        self.client_config_in(home().as_deref())
    }

    /// [`TlsSettings::client_config`], with libpq's default client
    /// certificate looked for in `home`/.postgresql.
    fn client_config_in(&self, home: Option<&Path>) -> Result<Option<ClientConfig>, String> {
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
        let algs = provider.signature_verification_algorithms;
        let verifier: Arc<dyn ServerCertVerifier> = match verify {
            None => Arc::new(Unchecked(algs)),
            Some(roots) => {
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| format!("sslrootcert: {e}"))?;
                if self.mode == SslMode::VerifyFull {
                    webpki
                } else {
                    Arc::new(AnyName(webpki, algs))
                }
            }
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        Ok(Some(match self.client_identity(home)? {
            None => builder.with_no_client_auth(),
            Some(id) => {
                let (cert, key) = (id.cert.display(), id.key.display());
                builder
                    .with_client_auth_cert(id.chain, id.der)
                    .map_err(|e| format!("sslcert {cert} with sslkey {key}: {e}"))?
            }
        }))
    }

    /// The client certificate chain and key to offer, read as libpq reads
    /// them: `sslcert`/`PGSSLCERT`, else `~/.postgresql/postgresql.crt`
    /// when that file exists (none otherwise: the server decides whether
    /// it needs one); `sslkey`/`PGSSLKEY`, else
    /// `~/.postgresql/postgresql.key`. Unlike libpq, a certificate named
    /// explicitly but missing is an error rather than silently not sent,
    /// so that a typo is not met with the server's less telling refusal.
    fn client_identity(&self, home: Option<&Path>) -> Result<Option<ClientIdentity>, String> {
        let default = |f: &str| home.map(|h| h.join(".postgresql").join(f));
        let cert = match &self.client_cert {
            Some(c) => c.clone(),
            None => match default("postgresql.crt") {
                Some(c) if c.is_file() => c,
                _ => return Ok(None),
            },
        };
        let Some(key) = self
            .client_key
            .clone()
            .or_else(|| default("postgresql.key"))
        else {
            return Err(format!(
                "sslcert {} needs sslkey=FILE (its private key)",
                cert.display()
            ));
        };
        let what = |f: &Path, e: &dyn std::fmt::Display| {
            format!("{} {}: {e}", name_of(f, &cert), f.display())
        };
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
            .map_err(|e| what(&cert, &e))?
            .collect::<Result<_, _>>()
            .map_err(|e| what(&cert, &e))?;
        if chain.is_empty() {
            return Err(what(&cert, &"no PEM certificate in it"));
        }
        let meta = std::fs::metadata(&key).map_err(|e| what(&key, &e))?;
        key_permissions(meta.uid(), meta.mode(), geteuid()).map_err(|e| what(&key, &e))?;
        let der = PrivateKeyDer::from_pem_file(&key).map_err(|e| {
            what(
                &key,
                &format!("{e} (an unencrypted PEM private key is needed: PKCS#8, PKCS#1 or SEC1)"),
            )
        })?;
        Ok(Some(ClientIdentity {
            cert,
            key,
            chain,
            der,
        }))
    }
}

/// A client certificate chain and its key, with the files they came from.
#[derive(Debug)]
struct ClientIdentity {
    cert: PathBuf,
    key: PathBuf,
    chain: Vec<CertificateDer<'static>>,
    der: PrivateKeyDer<'static>,
}

fn name_of(f: &Path, cert: &Path) -> &'static str {
    if f == cert { "sslcert" } else { "sslkey" }
}

fn geteuid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::geteuid() }
}

/// The home directory libpq looks in for `.postgresql/` (`HOME`).
fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// libpq's rule for a private key file: no access for group or others
/// when it belongs to the user running the client; when it belongs to
/// root, group may read it (`u=rw,g=r`, 0640, for keys a group shares).
fn key_permissions(owner: u32, mode: u32, euid: u32) -> Result<(), String> {
    let refused = if owner == euid {
        mode & 0o077 != 0
    } else if owner == 0 {
        mode & 0o037 != 0
    } else {
        false
    };
    if refused {
        return Err(format!(
            "the private key may be read by others (mode {:03o}); chmod 600 it (or 640 if root owns it), as libpq requires",
            mode & 0o777
        ));
    }
    Ok(())
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

/// The handshake's signature check every verifier here makes, with the
/// crypto provider's algorithms (TLS 1.2's or TLS 1.3's rules): what
/// proves the server holds the key of the certificate it sent, whether or
/// not that certificate is itself checked.
fn verify_signature(
    algs: &WebPkiSupportedAlgorithms,
    tls13: bool,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    if tls13 {
        verify_tls13_signature(message, cert, dss, algs)
    } else {
        verify_tls12_signature(message, cert, dss, algs)
    }
}

/// prefer/require without a root certificate: encrypted, the server's
/// certificate not checked (libpq's meaning of these modes), but the
/// handshake's signatures still verified.
#[derive(Debug)]
struct Unchecked(WebPkiSupportedAlgorithms);

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
        verify_signature(&self.0, false, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_signature(&self.0, true, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// verify-ca: the chain checked against the roots, the host name not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>, WebPkiSupportedAlgorithms);

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
        verify_signature(&self.1, false, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_signature(&self.1, true, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.1.supported_schemes()
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
            client_cert: None,
            client_key: None,
        }
        .client_config()
        .unwrap_err();
        assert!(e.contains("sslrootcert"), "{e}");
    }

    /// Catches sslcert/sslkey lost from either form, or PGSSLCERT and
    /// PGSSLKEY not filling in what the string leaves out.
    #[test]
    fn client_certificate_options_are_taken_out() {
        let (rest, t) = split_with_env(
            "host=db sslcert=/c/me.crt user=u sslkey='/k y/me.key'",
            |_| None,
        )
        .unwrap();
        assert_eq!(rest, "host=db user=u");
        assert_eq!(t.client_cert.as_deref(), Some(Path::new("/c/me.crt")));
        assert_eq!(t.client_key.as_deref(), Some(Path::new("/k y/me.key")));
        let (rest, t) = split_with_env(
            "postgresql://db/lab?sslkey=%2Fme.key&sslmode=require",
            |_| None,
        )
        .unwrap();
        assert_eq!(rest, "postgresql://db/lab");
        assert_eq!(t.client_key.as_deref(), Some(Path::new("/me.key")));
        assert_eq!(t.client_cert, None);
        let env = |k: &str| match k {
            "PGSSLCERT" => Some("/env/me.crt".to_string()),
            "PGSSLKEY" => Some("/env/me.key".to_string()),
            _ => None,
        };
        let (_, t) = split_with_env("host=db sslkey=/mine.key", env).unwrap();
        assert_eq!(t.client_cert.as_deref(), Some(Path::new("/env/me.crt")));
        assert_eq!(t.client_key.as_deref(), Some(Path::new("/mine.key")));
    }

    /// libpq's rule for key files, case by case: catches a key others may
    /// read being used, or a root-owned group-readable key refused.
    #[test]
    fn key_file_permissions_follow_libpq() {
        let me = 1000;
        assert!(key_permissions(me, 0o100600, me).is_ok());
        assert!(key_permissions(me, 0o100400, me).is_ok());
        assert!(key_permissions(me, 0o100640, me).is_err());
        assert!(key_permissions(me, 0o100604, me).is_err());
        assert!(key_permissions(0, 0o100640, me).is_ok());
        assert!(key_permissions(0, 0o100660, me).is_err());
        assert!(key_permissions(0, 0o100644, me).is_err());
        // Root running the client is the owner: 0600 or less.
        assert!(key_permissions(0, 0o100640, 0).is_err());
        // Someone else's key: the server decides, as with libpq.
        assert!(key_permissions(1001, 0o100644, me).is_ok());
        let e = key_permissions(me, 0o100644, me).unwrap_err();
        assert!(e.contains("644") && e.contains("chmod 600"), "{e}");
    }

    /// Without sslcert, libpq's default file is used only if it exists;
    /// a named certificate that is missing is one line naming it.
    #[test]
    fn the_default_client_certificate_is_optional() {
        let none = Path::new("/nonexistent-home-for-ttp");
        let t = TlsSettings {
            mode: SslMode::Require,
            root_cert: None,
            client_cert: None,
            client_key: None,
        };
        assert!(t.client_identity(Some(none)).unwrap().is_none());
        assert!(t.client_config_in(Some(none)).unwrap().is_some());
        let t = TlsSettings {
            client_cert: Some(none.join("me.crt")),
            ..t
        };
        let e = t.client_identity(None).unwrap_err();
        assert!(e.contains("sslkey"), "{e}");
        let t = TlsSettings {
            client_key: Some(none.join("me.key")),
            ..t
        };
        let e = t.client_identity(None).unwrap_err();
        assert!(
            e.starts_with("sslcert ") && e.contains("me.crt") && !e.contains('\n'),
            "{e}"
        );
    }
}
