//! A debuginfod client: `GET URL/buildid/HEX/debuginfo`, the protocol of
//! elfutils' debuginfod (its `debuginfod-find debuginfo HEX`), with the
//! same environment and cache, so a file elfutils' client, gdb or perf
//! fetched is not fetched again:
//! - `DEBUGINFOD_URLS`: servers, separated by spaces;
//! - `DEBUGINFOD_CACHE_PATH`, else `$XDG_CACHE_HOME/debuginfod_client`,
//!   else `$HOME/.cache/debuginfod_client`: the cache, `HEX/debuginfo`;
//! - `DEBUGINFOD_TIMEOUT`: seconds (90 when unset, as elfutils).
//!
//! The blocking `ureq` client the binary has for OTLP does the request;
//! the `debuginfod` crate would bring reqwest and a second HTTP stack for
//! one GET (docs/vprofile.md, "Symbols").
use std::{
    io::Write as _,
    path::{Path, PathBuf},
    time::Duration,
};

/// The servers of `DEBUGINFOD_URLS`.
pub fn urls_from_env() -> Vec<String> {
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
pub fn cache_dir() -> Option<PathBuf> {
    let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
    var("DEBUGINFOD_CACHE_PATH")
        .map(PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|x| Path::new(&x).join("debuginfod_client")))
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache/debuginfod_client")))
}

fn timeout() -> Duration {
    std::env::var("DEBUGINFOD_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(90), Duration::from_secs)
}

/// The debug file of build-id `hex` from the cache, else from `url` (then
/// cached). Err says why not.
pub fn fetch(url: &str, hex: &str, cache: Option<&Path>) -> Result<PathBuf, String> {
    fetch_into(url, hex, cache, timeout())
}

fn fetch_into(
    url: &str,
    hex: &str,
    cache: Option<&Path>,
    timeout: Duration,
) -> Result<PathBuf, String> {
    let cached = cache.map(|c| c.join(hex).join("debuginfo"));
    if let Some(p) = cached.as_ref().filter(|p| p.is_file()) {
        return Ok(p.clone());
    }
    let Some(target) = cached else {
        return Err("no cache directory (set DEBUGINFOD_CACHE_PATH or HOME)".into());
    };
    let request = format!("{url}/buildid/{hex}/debuginfo");
    eprintln!("fetching the debug file of build-id {hex} from {url}");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
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
        .limit(4 << 30)
        .read_to_vec()
        .map_err(|e| format!("{request}: {e}"))?;
    write_atomically(&target, &body).map_err(|e| format!("caching {}: {e}", target.display()))?;
    Ok(target)
}

/// Writes `bytes` to a temporary file beside `path`, then renames it: a
/// reader never sees half a debug file.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("cache file has a directory");
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".debuginfo.{}.tmp", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// A one-file HTTP server on loopback, for tests.
#[cfg(test)]
pub(super) mod test_server {
    use std::{
        io::{BufRead, BufReader, Write as _},
        net::TcpListener,
    };

    /// Answers `path` with `body`, anything else with 404; returns its URL
    /// and the count of requests it served.
    pub fn serve(
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

    /// Catches a wrong request path, a file not cached (fetched again), a
    /// cache written under another name than elfutils' `HEX/debuginfo`,
    /// and a 404 taken for a file.
    #[test]
    fn fetches_once_then_reads_the_cache() {
        let hex = "a6ade789dddc8ae8e6d07de24f7f2c32d0f38b1d";
        let body = b"\x7fELF not really, but bytes".to_vec();
        let (url, hits) = serve(format!("/buildid/{hex}/debuginfo"), body.clone());
        let cache = tempfile::tempdir().unwrap();
        let t = Duration::from_secs(10);
        let got = fetch_into(&url, hex, Some(cache.path()), t).unwrap();
        assert_eq!(got, cache.path().join(hex).join("debuginfo"));
        assert_eq!(std::fs::read(&got).unwrap(), body);
        let again = fetch_into(&url, hex, Some(cache.path()), t).unwrap();
        assert_eq!(again, got);
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
        let missing = fetch_into(&url, "00ff", Some(cache.path()), t).unwrap_err();
        assert!(missing.contains("404"), "{missing}");
        assert!(!cache.path().join("00ff/debuginfo").exists());
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
