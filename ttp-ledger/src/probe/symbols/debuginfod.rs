//! A debuginfod client: `GET URL/buildid/HEX/debuginfo`, the protocol of
//! elfutils' debuginfod (its `debuginfod-find debuginfo HEX`), with the
//! same environment and cache, so a file elfutils' client, gdb or perf
//! fetched is not fetched again:
//! - `DEBUGINFOD_URLS`: servers, separated by spaces;
//! - `DEBUGINFOD_CACHE_PATH`, else `$XDG_CACHE_HOME/debuginfod_client`,
//!   else `$HOME/.cache/debuginfod_client`: the cache, `HEX/debuginfo`;
//! - `DEBUGINFOD_TIMEOUT`: seconds to connect and to get the answer's
//!   headers (90 when unset, as elfutils); `DEBUGINFOD_MAXTIME`: seconds
//!   for the whole download (no limit when unset); `DEBUGINFOD_MAXSIZE`:
//!   bytes at most (no limit when unset).
//!
//! The body is streamed to a temporary file beside its cache entry and
//! renamed into place only when it is an ELF file; an empty cache entry
//! (elfutils' "not found" mark) is a miss, and a cached file the caller
//! finds to be another build's is removed ([`forget`]).
//!
//! The blocking `ureq` client the binary has for OTLP does the request;
//! the `debuginfod` crate would bring reqwest and a second HTTP stack for
//! one GET (docs/vprofile.md, "Symbols").
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

/// The servers of `DEBUGINFOD_URLS`.
pub(crate) fn urls_from_env() -> Vec<String> {
    std::env::var("DEBUGINFOD_URLS")
        .map(|v| split_urls(&v))
        .unwrap_or_default()
}

fn split_urls(v: &str) -> Vec<String> {
    v.split_whitespace()
        .map(|u| u.trim_end_matches('/').to_owned())
        .filter(|u| !u.is_empty())
        .collect()
}

/// The cache directory, as elfutils' client chooses it.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
    var("DEBUGINFOD_CACHE_PATH")
        .map(PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|x| Path::new(&x).join("debuginfod_client")))
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache/debuginfod_client")))
}

/// The limits of one download.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// To connect and to get the answer's headers.
    answer: Duration,
    /// For the whole download.
    total: Option<Duration>,
    max_bytes: u64,
}

impl Limits {
    fn from_env() -> Self {
        let num = |n: &str| {
            std::env::var(n)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .filter(|&v| v > 0)
        };
        Self {
            answer: Duration::from_secs(num("DEBUGINFOD_TIMEOUT").unwrap_or(90)),
            total: num("DEBUGINFOD_MAXTIME").map(Duration::from_secs),
            max_bytes: num("DEBUGINFOD_MAXSIZE").unwrap_or(u64::MAX),
        }
    }
}

/// The debug file of build-id `hex` from the cache, else from `url` (then
/// cached). Err says why not.
pub(crate) fn fetch(url: &str, hex: &str, cache: Option<&Path>) -> Result<PathBuf, String> {
    fetch_into(url, hex, cache, Limits::from_env())
}

/// Removes a cached file that is not what its name says (another build's
/// debug file), so that the next server, and the next run, are asked.
pub(crate) fn forget(path: &Path) {
    let _ = std::fs::remove_file(path);
}

fn fetch_into(
    url: &str,
    hex: &str,
    cache: Option<&Path>,
    limits: Limits,
) -> Result<PathBuf, String> {
    let Some(target) = cache.map(|c| c.join(hex).join("debuginfo")) else {
        return Err("no cache directory (set DEBUGINFOD_CACHE_PATH or HOME)".into());
    };
    if std::fs::metadata(&target).is_ok_and(|m| m.is_file() && m.len() > 0) {
        return Ok(target);
    }
    let request = format!("{url}/buildid/{hex}/debuginfo");
    eprintln!("fetching the debug file of build-id {hex} from {url}");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(limits.answer))
        .timeout_recv_response(Some(limits.answer))
        .timeout_global(limits.total)
        .http_status_as_error(false)
        .user_agent(concat!("ttp-ebpf/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut response = agent.get(&request).call().map_err(|e| e.to_string())?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("{request}: the server answered {status}"));
    }
    let body = response
        .body_mut()
        .with_config()
        .limit(limits.max_bytes)
        .reader();
    store(&target, body).map_err(|e| format!("{request} into {}: {e}", target.display()))?;
    Ok(target)
}

/// Streams `body` to a temporary file beside `path` and renames it into
/// place if it is an ELF file: a reader never sees half a debug file, and
/// an error page is never cached. The temporary file is removed on error.
fn store(path: &Path, mut body: impl std::io::Read) -> std::io::Result<()> {
    let dir = path.parent().expect("cache file has a directory");
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".debuginfo.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::copy(&mut body, &mut f)?;
        f.sync_all()?;
        let mut magic = [0u8; 4];
        let mut r = std::fs::File::open(&tmp)?;
        if std::io::Read::read_exact(&mut r, &mut magic).is_err() || &magic != b"\x7fELF" {
            return Err(std::io::Error::other("the answer is not an ELF file"));
        }
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
pub(super) mod test_server {
    use std::{
        io::{BufRead, BufReader, Write as _},
        net::TcpListener,
    };

    /// Answers `path` with `body`, anything else with 404; returns its URL
    /// and the count of requests it served.
    pub(crate) fn serve(
        path: String,
        body: Vec<u8>,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut reader = BufReader::new(&stream);
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let asked = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                let mut w = &stream;
                if asked == path {
                    let _ = write!(
                        w,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = w.write_all(&body);
                } else {
                    let _ = write!(
                        w,
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                }
            }
        });
        (url, hits)
    }
}

#[cfg(test)]
mod tests {
    use super::{test_server::serve, *};

    const LIMITS: Limits = Limits {
        answer: Duration::from_secs(10),
        total: None,
        max_bytes: u64::MAX,
    };

    /// Catches a wrong request path, a file not cached (fetched again), a
    /// cache written under another name than elfutils' `HEX/debuginfo`,
    /// a 404 taken for a file, an answer that is no ELF file (an error
    /// page) cached, and a temporary file left behind.
    #[test]
    fn fetches_once_then_reads_the_cache() {
        let hex = "a6ade789dddc8ae8e6d07de24f7f2c32d0f38b1d";
        let body = b"\x7fELF not really, but bytes".to_vec();
        let (url, hits) = serve(format!("/buildid/{hex}/debuginfo"), body.clone());
        let cache = tempfile::tempdir().unwrap();
        let t = LIMITS;
        let got = fetch_into(&url, hex, Some(cache.path()), t).unwrap();
        assert_eq!(got, cache.path().join(hex).join("debuginfo"));
        assert_eq!(std::fs::read(&got).unwrap(), body);
        let again = fetch_into(&url, hex, Some(cache.path()), t).unwrap();
        assert_eq!(again, got);
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
        let missing = fetch_into(&url, "00ff", Some(cache.path()), t).unwrap_err();
        assert!(missing.contains("404"), "{missing}");
        assert!(!cache.path().join("00ff/debuginfo").exists());

        let (page, _) = serve(
            "/buildid/0a0b/debuginfo".into(),
            b"<html>proxy</html>".to_vec(),
        );
        let refused = fetch_into(&page, "0a0b", Some(cache.path()), t).unwrap_err();
        assert!(refused.contains("not an ELF"), "{refused}");
        let left: Vec<_> = std::fs::read_dir(cache.path().join("0a0b"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{left:?}");

        // elfutils' "not found" mark (an empty file) is a miss.
        std::fs::write(cache.path().join(hex).join("debuginfo"), b"").unwrap();
        fetch_into(&url, hex, Some(cache.path()), t).unwrap();
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    /// Catches a trailing slash doubled into the request and empty entries.
    #[test]
    fn urls_split_on_spaces() {
        assert_eq!(
            split_urls(" https://a.example/  http://b.example:8002 "),
            ["https://a.example", "http://b.example:8002"]
        );
        assert!(split_urls("  ").is_empty());
    }
}
