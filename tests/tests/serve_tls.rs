//! `ttp-ebpf serve --web-config` end to end (root): TLS with a certificate
//! the openssl CLI makes, basic auth with a bcrypt hash libxcrypt made,
//! checked with curl and with a real Prometheus scraping over TLS.
use crate::common;

use std::{path::Path, process::Command};

use common::{serve::*, *};

/// "scrape-me" hashed by libxcrypt (glibc's crypt(3), `$2b$`, cost 5):
/// an implementation independent of the bcrypt crate serve uses. A low
/// cost keeps the wrong-password cases quick in a debug build.
const HASH: &str = "$2b$05$olRBmjYkZTwSuKIs5AifCOTcQrJPCLb.XTcFFpn1xqojyyVjwObxe";
const PASSWORD: &str = "scrape-me";

/// A self-signed certificate for 127.0.0.1 and its key (readable by root
/// only), by the openssl CLI; None without openssl.
fn certificate(dir: &Path) -> Option<()> {
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=ttp-test"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .args(["-keyout", "serve.key", "-out", "serve.crt"])
        .current_dir(dir)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::set_permissions(
        dir.join("serve.key"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    Some(())
}

/// curl's (HTTP status, exit code, response headers and body).
fn curl(args: &[&str]) -> (u16, i32, String) {
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (
        code.trim().parse().unwrap_or(0),
        out.status.code().unwrap_or(-1),
        body.to_string(),
    )
}

/// Catches a TLS port that answers without TLS or with another
/// certificate, basic auth that lets a missing or wrong password through
/// or refuses the right one, a 401 without `WWW-Authenticate: Basic`, a
/// web-config whose key is read after the privileges are dropped (the
/// key is root's, mode 0600, and serve runs as nobody), and a format
/// Prometheus itself does not speak: a real Prometheus configured with
/// the CA, user and password scrapes it (`up` = 1, the ledger's series
/// stored).
#[test]
fn tls_and_basic_auth_from_a_web_config() {
    if !root_or_skip("tls_and_basic_auth_from_a_web_config") {
        return;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let dir = temp_path("serve-tls");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if certificate(&dir).is_none() || Command::new("curl").arg("--version").output().is_err() {
        assert!(
            !ci,
            "openssl and curl are needed: `cargo xtask setup` installs them"
        );
        eprintln!("SKIPPED: no openssl or curl");
        return;
    }
    let config = dir.join("web.yml");
    std::fs::write(
        &config,
        format!(
            "tls_server_config:\n  cert_file: serve.crt\n  key_file: serve.key\nbasic_auth_users:\n  prom: '{HASH}'\n"
        ),
    )
    .unwrap();
    let _serial = serial();
    let serve = Serve::start(&["--web-config", config.to_str().unwrap(), "--interval", "1s"]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", serve.child.id())).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.contains("65534")),
        "{status}"
    );
    let url = format!("https://127.0.0.1:{}/metrics", serve.port);
    let ca = dir.join("serve.crt");
    let ca = ca.to_str().unwrap();
    let right = format!("prom:{PASSWORD}");

    let (code, exit, text) = curl(&["--cacert", ca, "-u", &right, &url]);
    assert_eq!((code, exit), (200, 0), "{text}");
    assert!(text.contains("ttp_on_cpu_seconds_total{"), "{text}");
    for (what, args) in [
        ("no password", vec!["--cacert", ca, url.as_str()]),
        (
            "wrong password",
            vec!["--cacert", ca, "-u", "prom:scrape-you", url.as_str()],
        ),
        (
            "unknown user",
            vec!["--cacert", ca, "-u", "root:scrape-me", url.as_str()],
        ),
    ] {
        let (code, _, text) = curl(&args);
        assert_eq!(code, 401, "{what}: {text}");
        assert!(
            text.lines().any(|l| l
                .to_ascii_lowercase()
                .starts_with("www-authenticate: basic")),
            "{what}: {text}"
        );
        assert!(!text.contains("ttp_on_cpu"), "{what}: {text}");
    }
    // Without the CA, the certificate is not trusted: it is TLS, with the
    // test's certificate.
    let (_, exit, text) = curl(&["-u", &right, &url]);
    assert_eq!(
        exit, 60,
        "curl without the CA must fail verification: {text}"
    );
    // Plain HTTP on the TLS port: refused, with a plain answer saying so.
    let plain = format!("http://127.0.0.1:{}/metrics", serve.port);
    let (code, _, text) = curl(&["-u", &right, &plain]);
    assert_eq!(code, 400, "{text}");
    assert!(text.contains("HTTP request to an HTTPS server"), "{text}");
    assert!(!text.contains("ttp_on_cpu"), "{text}");

    // A real Prometheus, configured as the documentation says.
    if prometheus_or_skip("tls_and_basic_auth_from_a_web_config, its Prometheus part") {
        let prom = Prometheus::start_with(
            serve.port,
            &format!(
                "    scheme: https\n    tls_config:\n      ca_file: {ca}\n    basic_auth:\n      username: prom\n      password: {PASSWORD}\n"
            ),
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let up = query(prom.port, "up{job=\"ttp\"}");
            let refreshes = query(prom.port, "ttp_ledger_refreshes_total");
            if up == Some(1.0) && refreshes.is_some_and(|r| r >= 1.0) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "Prometheus did not scrape serve over TLS with basic auth: up {up:?}, refreshes {refreshes:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }
    assert_eq!(serve.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
