//! TLS to the lab database (root; see common::root_or_skip and
//! common::pg): a throw-away PostgreSQL server with ssl=on, listening on
//! 127.0.0.1, whose pg_hba.conf admits TCP connections only over TLS
//! (`hostssl`), with a certificate for the name `lab.example` signed by a
//! CA the test makes with the openssl command. The truth is the server's
//! own rule: a connection it accepts over TCP was encrypted, and one
//! without TLS is refused.
mod common;

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

#[test]
fn sslmode_is_honoured_through_rustls() {
    if !root_or_skip("sslmode_is_honoured_through_rustls") {
        return;
    }
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!(
            "SKIP sslmode_is_honoured_through_rustls: no openssl command to make certificates"
        );
        return;
    }
    let _serial = serial();
    let dir = temp_path("lab-tls");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Two CAs; the server's certificate is signed by the first.
    for ca in ["ca", "other"] {
        openssl(
            &dir,
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
        &dir,
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
        &dir,
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
