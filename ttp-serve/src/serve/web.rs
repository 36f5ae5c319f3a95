//! `serve --web-config FILE`: TLS and basic authentication configured in
//! the Prometheus web-config format (the file every Prometheus exporter
//! takes, prometheus/exporter-toolkit's `docs/web-configuration.md`):
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: serve.crt
//!   key_file: serve.key
//! basic_auth_users:
//!   prometheus: $2y$10$...   # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':')
//! ```
//!
//! Everything is read at start, before the programs are loaded and the
//! privileges dropped: the key is not readable by `nobody`, and no file is
//! read again. Keys of the format ttp does not implement (client
//! certificates, cipher lists, HTTP headers) are refused, one line and
//! exit 2, rather than ignored. docs/serve.md, "TLS and basic auth".
use std::{
    collections::{BTreeMap, HashSet},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use base64::Engine;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use ttp_sys::error::usage;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFiles>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFiles {
    cert_file: PathBuf,
    key_file: PathBuf,
}

/// What a web-config file asks for, loaded.
#[derive(Clone, Default)]
pub(crate) struct WebConfig {
    /// TLS for every connection (plain HTTP is refused).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Basic authentication for every request.
    pub users: Option<Arc<Users>>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("users", &self.users.as_ref().map(|u| u.hashes.len()))
            .finish()
    }
}

impl WebConfig {
    /// Reads `path` and the files it names; every fault is one line
    /// naming the file, exit 2.
    pub(crate) fn load(path: &Path) -> anyhow::Result<Self> {
        let bad = |why: String| usage(format!("bad --web-config {}: {why}", path.display()));
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => return bad(e.to_string()),
        };
        let file: File = match serde_yaml_ng::from_str(&text) {
            Ok(f) => f,
            // The parser's message names the key, line and column; keys
            // of the format ttp does not implement fail here too.
            Err(e) => return bad(one_line(&e.to_string())),
        };
        // Relative paths are relative to the file, as in Prometheus.
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = match file.tls_server_config {
            None => None,
            Some(t) => match tls_config(&dir.join(&t.cert_file), &dir.join(&t.key_file)) {
                Ok(c) => Some(Arc::new(c)),
                Err(why) => return bad(why),
            },
        };
        let users = match file.basic_auth_users {
            None => None,
            Some(u) if u.is_empty() => None,
            Some(u) => match Users::new(u) {
                Ok(u) => Some(Arc::new(u)),
                Err(why) => return bad(why),
            },
        };
        Ok(Self { tls, users })
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A rustls server configuration (ring provider, TLS 1.2 and 1.3, no
/// client certificates) with the certificate chain and key of two PEM
/// files.
fn tls_config(cert: &Path, key: &Path) -> Result<rustls::ServerConfig, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| format!("cert_file {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "cert_file {}: no certificate in it",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("key_file {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("cert_file and key_file do not make a server identity: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The users of `basic_auth_users` and their bcrypt hashes.
pub(crate) struct Users {
    hashes: BTreeMap<String, String>,
    /// Checked against when the user is unknown, so that an unknown user
    /// costs the same bcrypt run as a wrong password (which users exist
    /// does not show in the answer's timing).
    decoy: String,
    /// Digests of (user, password, hash) that verified: bcrypt is slow by
    /// design (tens of ms at cost 10), and a scraper sends the same
    /// credentials every interval (what prometheus/exporter-toolkit
    /// does too).
    verified: Mutex<HashSet<[u8; 32]>>,
}

/// At most this many verified credentials are remembered.
const VERIFIED_CAP: usize = 64;

impl Users {
    fn new(hashes: BTreeMap<String, String>) -> Result<Self, String> {
        let mut cost = bcrypt::DEFAULT_COST;
        for (user, hash) in &hashes {
            let parts: bcrypt::HashParts = hash
                .parse()
                .map_err(|e| format!("basic_auth_users: {user}: not a bcrypt hash ({e})"))?;
            cost = parts.get_cost();
        }
        let decoy = bcrypt::hash("ttp-ebpf decoy", cost).map_err(|e| e.to_string())?;
        Ok(Self {
            hashes,
            decoy,
            verified: Mutex::new(HashSet::new()),
        })
    }

    /// True when an `Authorization` header carries Basic credentials of a
    /// configured user with the right password. The password is compared
    /// by bcrypt's own verification (a constant-time comparison of the
    /// hashes).
    pub(crate) fn allows(&self, authorization: Option<&[u8]>) -> bool {
        let Some((user, password)) = authorization.and_then(basic_credentials) else {
            return false;
        };
        let hash = self.hashes.get(&user);
        let mut digest = Sha256::new();
        for part in [
            user.as_bytes(),
            &password,
            hash.map_or(&[][..], |h| h.as_bytes()),
        ] {
            digest.update((part.len() as u64).to_le_bytes());
            digest.update(part);
        }
        let key: [u8; 32] = digest.finalize().into();
        let lock = || self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if hash.is_some() && lock().contains(&key) {
            return true;
        }
        let ok = bcrypt::verify(&password, hash.unwrap_or(&self.decoy)).unwrap_or(false);
        if ok && hash.is_some() {
            let mut v = lock();
            if v.len() >= VERIFIED_CAP {
                v.clear();
            }
            v.insert(key);
        }
        ok && hash.is_some()
    }
}

/// (user, password) of `Basic base64(user:password)` (RFC 7617).
fn basic_credentials(header: &[u8]) -> Option<(String, Vec<u8>)> {
    let header = std::str::from_utf8(header).ok()?.trim();
    let (scheme, token) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let colon = raw.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(raw[..colon].to_vec()).ok()?;
    Some((user, raw[colon + 1..].to_vec()))
}

#[cfg(test)]
#[path = "web_tests.rs"]
mod tests;
