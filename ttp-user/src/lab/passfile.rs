//! The password file of libpq (PostgreSQL documentation, "The Password
//! File"): `PGPASSFILE` or `~/.pgpass`, lines `host:port:db:user:password`
//! where `*` matches anything and `\` escapes `:` and `\`; the first line
//! that matches wins, and on Unix a file that group or others may read is
//! ignored, as libpq does.
use std::path::{Path, PathBuf};

/// Where libpq looks: `PGPASSFILE`, else `$HOME/.pgpass`.
pub(crate) fn default_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PGPASSFILE") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| Path::new(&h).join(".pgpass"))
}

/// The password for (host, port, database, user) from the file at `path`;
/// `None` when the file is missing, open to group or others, or has no
/// matching line. A Unix-socket connection to the default socket
/// directory matches `localhost`, as in libpq.
pub(crate) fn lookup(path: &Path, host: &str, port: u16, db: &str, user: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).ok()?;
    if meta.permissions().mode() & 0o077 != 0 {
        log::warn!(
            "password file {} has group or world access; it is ignored (chmod 0600 it)",
            path.display()
        );
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    find(&text, host, port, db, user)
}

fn find(text: &str, host: &str, port: u16, db: &str, user: &str) -> Option<String> {
    let host =
        if host.is_empty() || matches!(host, "/var/run/postgresql" | "/run/postgresql" | "/tmp") {
            "localhost"
        } else {
            host
        };
    let port = port.to_string();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f = fields(line);
        if f.len() < 5 {
            continue;
        }
        let hit = |pat: &str, v: &str| pat == "*" || pat == v;
        if hit(&f[0], host) && hit(&f[1], &port) && hit(&f[2], db) && hit(&f[3], user) {
            return Some(f[4..].join(":"));
        }
    }
    None
}

/// The `:`-separated fields of a line, with `\:` and `\\` unescaped.
fn fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    out.last_mut().unwrap().push(n);
                }
            }
            ':' => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# comment\n\
        db1.example:5432:lab:ttp_worker:first\n\
        *:5432:lab:ttp_worker:second\n\
        localhost:*:*:me:se\\:cr\\\\et\n";

    #[test]
    fn first_matching_line_wins_with_wildcards() {
        assert_eq!(
            find(FILE, "db1.example", 5432, "lab", "ttp_worker").as_deref(),
            Some("first")
        );
        assert_eq!(
            find(FILE, "db2.example", 5432, "lab", "ttp_worker").as_deref(),
            Some("second")
        );
        assert_eq!(find(FILE, "db2.example", 5433, "lab", "ttp_worker"), None);
        assert_eq!(find(FILE, "db1.example", 5432, "other", "ttp_worker"), None);
    }

    #[test]
    fn escapes_and_the_default_socket_directory() {
        assert_eq!(
            find(FILE, "/var/run/postgresql", 6000, "x", "me").as_deref(),
            Some("se:cr\\et")
        );
        assert_eq!(find(FILE, "/srv/sock", 6000, "x", "me"), None);
    }

    #[test]
    fn a_file_others_can_read_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pgpass");
        std::fs::write(&p, "*:*:*:*:pw\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(lookup(&p, "h", 1, "d", "u").as_deref(), Some("pw"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(lookup(&p, "h", 1, "d", "u"), None);
    }
}
