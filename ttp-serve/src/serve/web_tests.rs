use super::*;

fn header(user: &str, password: &str) -> Vec<u8> {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}").into_bytes()
}

fn users() -> Users {
    // Cost 4, the least bcrypt allows: the test checks the logic, not the
    // hash's strength.
    let hash = bcrypt::hash("s3cret:x", 4).unwrap();
    Users::new(BTreeMap::from([("prom".to_string(), hash)])).unwrap()
}

/// Catches a wrong password, an unknown user, a malformed or missing
/// header or another scheme let through, a right one refused (also the
/// second time, from the cache), and a password with a colon cut short.
#[test]
fn basic_auth_allows_only_the_configured_password() {
    let u = users();
    assert!(u.allows(Some(&header("prom", "s3cret:x"))));
    assert!(
        u.allows(Some(&header("prom", "s3cret:x"))),
        "from the cache"
    );
    assert!(!u.allows(Some(&header("prom", "s3cret"))));
    assert!(!u.allows(Some(&header("prom", "s3cret:x "))));
    assert!(!u.allows(Some(&header("other", "s3cret:x"))));
    assert!(!u.allows(Some(&header("", ""))));
    assert!(!u.allows(None));
    assert!(!u.allows(Some(b"Basic !!!")));
    assert!(!u.allows(Some(b"Bearer abc")));
    let token = base64::engine::general_purpose::STANDARD.encode("prom:s3cret:x");
    assert!(u.allows(Some(format!("basic  {token}").as_bytes())));
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Catches a bad web-config that is not one line and exit 2 naming the
/// file: unreadable, not YAML, a key ttp does not implement (refused, not
/// ignored), a hash that is not bcrypt, missing or unusable PEM files.
#[test]
fn bad_web_configs_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let junk = write(d, "junk.pem", "not a pem\n");
    let cases = [
        write(d, "a.yml", "basic_auth_users: [\n"),
        write(
            d,
            "b.yml",
            "tls_server_config:\n  cert_file: x\n  key_file: y\n  client_auth_type: RequireAndVerifyClientCert\n",
        ),
        write(d, "c.yml", "http_server_config:\n  http2: false\n"),
        write(d, "d.yml", "basic_auth_users:\n  prom: plaintext\n"),
        write(
            d,
            "e.yml",
            "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n",
        ),
        write(
            d,
            "f.yml",
            &format!(
                "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
                junk.display(),
                junk.display()
            ),
        ),
        d.join("absent.yml"),
    ];
    for path in cases {
        let e = WebConfig::load(&path).unwrap_err();
        assert_eq!(ttp_sys::error::exit_code(&e), 2, "{e}");
        let msg = e.to_string();
        assert_eq!(msg.lines().count(), 1, "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
    }
    let ok = write(
        d,
        "ok.yml",
        &format!(
            "basic_auth_users:\n  prom: '{}'\n",
            bcrypt::hash("p", 4).unwrap()
        ),
    );
    let w = WebConfig::load(&ok).unwrap();
    assert!(w.tls.is_none() && w.users.is_some());
    let empty = write(d, "empty.yml", "{}\n");
    let w = WebConfig::load(&empty).unwrap();
    assert!(w.tls.is_none() && w.users.is_none());
}

/// Catches a certificate and key written by openssl (the CLI, an
/// independent maker) that do not load, or relative paths not taken from
/// the file's directory. Skipped without openssl.
#[test]
fn openssl_certificate_loads_relative_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-keyout", "k.pem", "-out", "c.pem"])
        .current_dir(d)
        .output();
    match made {
        Ok(o) if o.status.success() => {}
        _ => {
            eprintln!("SKIPPED: no openssl to make a certificate");
            return;
        }
    }
    let cfg = write(
        d,
        "web.yml",
        "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n",
    );
    let w = WebConfig::load(&cfg).unwrap();
    assert!(w.tls.is_some() && w.users.is_none());
}
