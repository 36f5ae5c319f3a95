//! TLS to the lab database (root; see common::root_or_skip and
//! common::pg): a throw-away PostgreSQL server with ssl=on, listening on
//! 127.0.0.1, whose pg_hba.conf admits TCP connections only over TLS
//! (`hostssl`), with a certificate for the name `lab.example` signed by a
//! CA the test makes with the openssl command. The truth is the server's
//! own rule: a connection it accepts over TCP was encrypted, and one
//! without TLS is refused; with `hostssl … cert`, one it accepts came with
//! a client certificate its CA signed for the user it logs in as.
use crate::common;

use std::{
    path::Path,
    process::{Command, Output},
};

use common::{
    pg::{Cluster, server_user, stderr, stdout, ttp},
    *,
};

fn assert_refused(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    let e = stderr(o);
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    assert!(e.contains(needle), "{needle:?} in {e}");
}

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Two CAs (`ca`, `other`) and a certificate for `lab.example` signed by
/// `ca`, in a fresh `dir`; the server's key made readable by the server's
/// user only (it refuses any other).
fn make_certificates(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    for ca in ["ca", "other"] {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                &format!("/CN=ttp test {ca}"),
                "-keyout",
                &format!("{ca}.key"),
                "-out",
                &format!("{ca}.crt"),
            ],
        );
    }
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=lab.example",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:lab.example\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ],
    );
    // The server reads its key only if it owns it and no one else may.
    let (uid, gid) = server_user();
    let key = dir.join("server.key");
    std::os::unix::fs::chown(&key, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
}

/// Whether this machine can run the TLS tests (root, the openssl command).
fn can_run(test: &str) -> bool {
    if !root_or_skip(test) {
        return false;
    }
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("SKIP {test}: no openssl command to make certificates");
        return false;
    }
    true
}

#[test]
fn sslmode_is_honoured_through_rustls() {
    if !can_run("sslmode_is_honoured_through_rustls") {
        return;
    }
    let _serial = serial();
    let dir = temp_path("lab-tls");
    make_certificates(&dir);
    let key = dir.join("server.key");
    let c = Cluster::start_with(
        "labtls",
        &format!(
            "-c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
            dir.join("server.crt").display(),
            key.display()
        ),
    );
    // TCP only with TLS (the socket, for psql, as before).
    std::fs::write(
        c.data.join("pg_hba.conf"),
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
    )
    .unwrap();
    c.psql("SELECT pg_reload_conf()");
    let tcp = format!("host=127.0.0.1 port={} user=ttp dbname=postgres", c.port);
    let named = format!(
        "host=lab.example hostaddr=127.0.0.1 port={} user=ttp dbname=postgres",
        c.port
    );
    let ca = dir.join("ca.crt");
    let other = dir.join("other.crt");
    let lab = |url: &str| ttp(&["lab", "init", "--lab", url]);

    // Without TLS the server refuses: the rule holds.
    assert_refused(&lab(&format!("{tcp} sslmode=disable")), "no encryption");
    // require: encrypted, the certificate not checked (libpq's meaning).
    let o = lab(&format!("{tcp} sslmode=require"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("schema at version"), "{}", stdout(&o));
    // prefer (the default) takes TLS when the server offers it.
    let o = ttp(&["lab", "status", "--lab", &tcp]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The URL form too.
    let url = format!(
        "postgresql://ttp@127.0.0.1:{}/postgres?sslmode=require",
        c.port
    );
    let o = ttp(&["lab", "status", "--lab", &url]);
    assert!(o.status.success(), "{}", stderr(&o));
    // verify-full with the right root certificate and the certificate's
    // name connects.
    let o = ttp(&[
        "lab",
        "status",
        "--lab",
        &format!("{named} sslmode=verify-full sslrootcert={}", ca.display()),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // verify-full by address: the certificate does not name 127.0.0.1.
    assert_refused(
        &ttp(&[
            "lab",
            "status",
            "--lab",
            &format!("{tcp} sslmode=verify-full sslrootcert={}", ca.display()),
        ]),
        "certificate",
    );
    // verify-ca checks the chain, not the name.
    let o = ttp(&[
        "lab",
        "status",
        "--lab",
        &format!("{tcp} sslmode=verify-ca sslrootcert={}", ca.display()),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // A wrong root certificate: one line, exit 2, for each checking mode
    // (require with sslrootcert checks as verify-ca does, as libpq).
    for mode in ["verify-full", "verify-ca", "require"] {
        let u = if mode == "verify-full" { &named } else { &tcp };
        let o = ttp(&[
            "lab",
            "status",
            "--lab",
            &format!("{u} sslmode={mode} sslrootcert={}", other.display()),
        ]);
        assert_refused(&o, "UnknownIssuer");
    }
    // libpq's variables fill in what the URL leaves out.
    let with_env = |root: &Path| {
        Command::new(ttp_bin())
            .args(["lab", "status", "--lab", &named])
            .env("PGSSLMODE", "verify-full")
            .env("PGSSLROOTCERT", root)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let o = with_env(&ca);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_refused(&with_env(&other), "UnknownIssuer");
    // verify-full without a root certificate, a missing file, a bad mode.
    assert_refused(&lab(&format!("{named} sslmode=verify-full")), "sslrootcert");
    assert_refused(
        &lab(&format!(
            "{named} sslmode=verify-full sslrootcert={}",
            dir.join("none.crt").display()
        )),
        "none.crt",
    );
    assert_refused(&lab(&format!("{tcp} sslmode=sometimes")), "sslmode");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client certificate for the user `cn`, signed by CA `ca`: `NAME.crt`
/// and `NAME.key` (mode 0600, as libpq requires of a key its user owns).
fn client_certificate(dir: &Path, name: &str, cn: &str, ca: &str) {
    // An X.509 v3 certificate (extensions make it one): rustls refuses v1.
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={cn}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "client.ext",
            "-out",
            &format!("{name}.crt"),
        ],
    );
    std::fs::set_permissions(
        dir.join(format!("{name}.key")),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
}

/// `ttp-ebpf ARGS` with HOME set to `home` (where libpq's default client
/// certificate is looked for) and extra environment variables.
fn ttp_home(home: &Path, env: &[(&str, &Path)], args: &[&str]) -> Output {
    let mut cmd = Command::new(ttp_bin());
    cmd.args(args)
        .env("HOME", home)
        .env_remove("PGSSLCERT")
        .env_remove("PGSSLKEY")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Client certificates: a server whose pg_hba.conf admits TCP only with
/// `hostssl … cert` (the certificate must be signed by the server's
/// `ssl_ca_file` and name the user: clientcert=verify-full, implied by
/// `cert`) accepts `lab init`, `lab status` and a worker measuring a task
/// with `sslcert`/`sslkey`, with PGSSLCERT/PGSSLKEY and with libpq's
/// default ~/.postgresql/postgresql.crt; and refuses, each with one line
/// and exit 2, no certificate, a certificate for another user, one from
/// another CA, and (before any connection) a key others may read. The
/// truth is the server's own rule: it admits no one over TCP without a
/// certificate it verified.
#[test]
fn client_certificates_are_sent_when_the_server_asks() {
    if !can_run("client_certificates_are_sent_when_the_server_asks") {
        return;
    }
    let _serial = serial();
    let dir = temp_path("lab-tls-client");
    make_certificates(&dir);
    client_certificate(&dir, "me", "ttp", "ca");
    client_certificate(&dir, "stranger", "someone", "ca");
    client_certificate(&dir, "forged", "ttp", "other");
    let c = Cluster::start_with(
        "labtlscert",
        &format!(
            "-c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file={} -c ssl_key_file={} -c ssl_ca_file={}",
            dir.join("server.crt").display(),
            dir.join("server.key").display(),
            dir.join("ca.crt").display()
        ),
    );
    std::fs::write(
        c.data.join("pg_hba.conf"),
        "local all all trust\nhostssl all all 127.0.0.1/32 cert\n",
    )
    .unwrap();
    c.psql("SELECT pg_reload_conf()");
    let tcp = format!(
        "host=127.0.0.1 port={} user=ttp dbname=postgres sslmode=require",
        c.port
    );
    let with = |name: &str| {
        format!(
            "{tcp} sslcert={} sslkey={}",
            dir.join(format!("{name}.crt")).display(),
            dir.join(format!("{name}.key")).display()
        )
    };
    // An empty home: no default certificate there.
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();

    // No certificate: the server refuses.
    assert_refused(
        &ttp_home(&home, &[], &["lab", "init", "--lab", &tcp]),
        "certificate",
    );
    // The right one, in the connection string.
    let o = ttp_home(&home, &[], &["lab", "init", "--lab", &with("me")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("schema at version"), "{}", stdout(&o));
    let o = ttp_home(&home, &[], &["lab", "status", "--lab", &with("me")]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The same through libpq's variables.
    let env = [
        ("PGSSLCERT", dir.join("me.crt")),
        ("PGSSLKEY", dir.join("me.key")),
    ];
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    let o = ttp_home(&home, &env, &["lab", "status", "--lab", &tcp]);
    assert!(o.status.success(), "{}", stderr(&o));
    // A certificate for another user, and one from another CA.
    assert_refused(
        &ttp_home(&home, &[], &["lab", "status", "--lab", &with("stranger")]),
        "certificate authentication failed",
    );
    let o = ttp_home(&home, &[], &["lab", "status", "--lab", &with("forged")]);
    assert_refused(&o, "lab database");
    // A key others may read is refused before connecting, as libpq does.
    let loose = dir.join("loose.key");
    std::fs::copy(dir.join("me.key"), &loose).unwrap();
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    assert_refused(
        &ttp_home(
            &home,
            &[],
            &[
                "lab",
                "status",
                "--lab",
                &format!(
                    "{tcp} sslcert={} sslkey={}",
                    dir.join("me.crt").display(),
                    loose.display()
                ),
            ],
        ),
        "chmod 600",
    );

    // libpq's default files in ~/.postgresql, and a worker measuring a
    // task over them: its claim, QE and result connections all pass.
    let pghome = dir.join("pghome");
    std::fs::create_dir_all(pghome.join(".postgresql")).unwrap();
    for (from, to) in [("me.crt", "postgresql.crt"), ("me.key", "postgresql.key")] {
        std::fs::copy(dir.join(from), pghome.join(".postgresql").join(to)).unwrap();
    }
    let spec = dir.join("spec.toml");
    std::fs::write(
        &spec,
        "name = \"tls\"\nhosts = [\"alpha\"]\n[[command]]\nname = \"t\"\nargv = [\"/bin/true\"]\nn = 2\n",
    )
    .unwrap();
    let o = ttp_home(
        &pghome,
        &[],
        &["lab", "submit", spec.to_str().unwrap(), "--lab", &tcp],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ttp_home(
        &pghome,
        &[],
        &[
            "lab",
            "worker",
            "--lab",
            &tcp,
            "--host-label",
            "alpha",
            "--once",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(doc["done"], 1, "{doc}");
    assert_eq!(
        c.psql(
            "SELECT t.state, (SELECT count(*) FROM ttp_lab_qes q WHERE q.task_id = t.id AND q.attempt = 1) FROM ttp_lab_tasks t"
        ),
        "done|2"
    );
    // The server saw only certificate logins over TCP: its rule admits no
    // other, so every connection above that succeeded carried one.
    let _ = std::fs::remove_dir_all(&dir);
}
