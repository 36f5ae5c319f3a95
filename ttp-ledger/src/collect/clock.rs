//! The two clock rates behind every tick count: USER_HZ, the unit of the
//! clock_t values in /proc (TTPv2's "tick", Sec. 3.5; 10 ms almost
//! everywhere), and the kernel's HZ, the rate of the timer interrupt that
//! samples utime/stime under tick-based CPU accounting (its period is the
//! real granularity of those counters; 4 ms at HZ=250).
use std::io::{BufReader, Read};
use std::path::Path;
use std::time::Duration;

use procfs::{ConfigSetting, FromBufRead, KernelConfig};
use serde::Serialize;

/// Ticks per second of the clock_t values in /proc (USER_HZ), from
/// `sysconf(_SC_CLK_TCK)`. `None` if the C library cannot say.
pub fn user_hz() -> Option<u64> {
    // SAFETY: sysconf has no preconditions; it returns -1 for unknown names.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(v).ok().filter(|&v| v > 0)
}

/// Where the kernel's HZ was learnt from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HzSource {
    /// `CONFIG_HZ` in /proc/config.gz (CONFIG_IKCONFIG_PROC).
    ProcConfigGz,
    /// `CONFIG_HZ` in /boot/config-<release>.
    BootConfig,
    /// The rate at which `jiffies` in /proc/timer_list advanced between two
    /// readings, snapped to a HZ value the kernel offers.
    TimerList,
}

/// The kernel's timer interrupt rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KernelHz {
    pub hz: u64,
    pub source: HzSource,
}

/// HZ values the kernel's Kconfig offers (kernel/Kconfig.hz).
const KNOWN_HZ: [u64; 4] = [100, 250, 300, 1000];

/// How long [`kernel_hz`] watches jiffies when no kernel config is readable:
/// long enough that one jiffy of reading jitter stays under 4% at HZ=250.
pub(crate) const TIMER_LIST_GAP: Duration = Duration::from_millis(100);

/// The kernel's HZ, which Linux does not export directly. Tried in order:
///
/// 1. `CONFIG_HZ` from `<proc_root>/config.gz` (needs CONFIG_IKCONFIG_PROC);
/// 2. `CONFIG_HZ` from `<boot_dir>/config-<release>`, the release read from
///    `<proc_root>/sys/kernel/osrelease`;
/// 3. two readings of `<proc_root>/timer_list` (root only) [`TIMER_LIST_GAP`]
///    apart: `jiffies` advances HZ times per second of the `now at` clock;
///    the rate is snapped to 100, 250, 300 or 1000 when within 10% of one.
///
/// `None` when none of them works; callers then report HZ as unknown rather
/// than assume a value.
pub fn kernel_hz(proc_root: &Path, boot_dir: &Path) -> Option<KernelHz> {
    if let Some(hz) = config_gz_hz(&proc_root.join("config.gz")) {
        return Some(KernelHz {
            hz,
            source: HzSource::ProcConfigGz,
        });
    }
    let release = std::fs::read_to_string(proc_root.join("sys/kernel/osrelease")).ok();
    if let Some(release) = release
        && let Ok(f) = std::fs::File::open(boot_dir.join(format!("config-{}", release.trim())))
        && let Some(hz) = config_hz(BufReader::new(f))
    {
        return Some(KernelHz {
            hz,
            source: HzSource::BootConfig,
        });
    }
    let path = proc_root.join("timer_list");
    let first = timer_list_sample(&std::fs::read_to_string(&path).ok()?)?;
    std::thread::sleep(TIMER_LIST_GAP);
    let second = timer_list_sample(&std::fs::read_to_string(&path).ok()?)?;
    let hz = hz_from_samples(first, second)?;
    Some(KernelHz {
        hz,
        source: HzSource::TimerList,
    })
}

fn config_gz_hz(path: &Path) -> Option<u64> {
    let f = std::fs::File::open(path).ok()?;
    config_hz(BufReader::new(flate2::read::GzDecoder::new(f)))
}

/// `CONFIG_HZ` from the text of a kernel config.
fn config_hz(r: impl Read) -> Option<u64> {
    let config = KernelConfig::from_buf_read(BufReader::new(r)).ok()?;
    match config.0.get("CONFIG_HZ")? {
        ConfigSetting::Value(v) => v.parse().ok().filter(|&hz| hz > 0),
        _ => None,
    }
}

/// One reading of /proc/timer_list: (`jiffies`, `now at` in ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JiffiesSample {
    pub jiffies: u64,
    pub now_ns: u64,
}

/// Picks `now at <ns> nsecs` and the first `jiffies: <n>` out of the text
/// of /proc/timer_list. The procfs crate has no parser for this file; only
/// these two numbers are read.
pub(crate) fn timer_list_sample(text: &str) -> Option<JiffiesSample> {
    let now_ns = text.lines().find_map(|l| {
        l.strip_prefix("now at ")?
            .strip_suffix(" nsecs")?
            .trim()
            .parse()
            .ok()
    })?;
    let jiffies = text
        .lines()
        .find_map(|l| l.strip_prefix("jiffies:")?.trim().parse().ok())?;
    Some(JiffiesSample { jiffies, now_ns })
}

/// HZ from two readings: jiffies advanced per second of elapsed time,
/// snapped to the nearest value in [`KNOWN_HZ`] if within 10% of it.
pub(crate) fn hz_from_samples(a: JiffiesSample, b: JiffiesSample) -> Option<u64> {
    let jiffies = b.jiffies.checked_sub(a.jiffies)?;
    let ns = b.now_ns.checked_sub(a.now_ns).filter(|&ns| ns > 0)?;
    let rate = jiffies as f64 * 1e9 / ns as f64;
    KNOWN_HZ
        .into_iter()
        .min_by(|x, y| {
            (*x as f64 - rate)
                .abs()
                .total_cmp(&(*y as f64 - rate).abs())
        })
        .filter(|&hz| (hz as f64 - rate).abs() <= 0.10 * hz as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/proc")
    }

    #[test]
    fn user_hz_is_positive() {
        // Linux has reported 100 on every mainstream architecture since 2.6;
        // catches a wrong sysconf name (which returns -1).
        assert_eq!(user_hz(), Some(100));
    }

    #[test]
    fn hz_from_proc_config_gz() {
        // The fixture is lines of the test machine's real /proc/config.gz
        // (CONFIG_HZ=250).
        let hz = kernel_hz(&fixture(), Path::new("/nonexistent")).unwrap();
        assert_eq!(
            hz,
            KernelHz {
                hz: 250,
                source: HzSource::ProcConfigGz
            }
        );
    }

    #[test]
    fn hz_from_boot_config() {
        // No config.gz in this root: catches skipping the /boot fallback.
        let dir = tempfile::tempdir().unwrap();
        let proc_root = dir.path().join("proc");
        std::fs::create_dir_all(proc_root.join("sys/kernel")).unwrap();
        std::fs::write(proc_root.join("sys/kernel/osrelease"), "6.1.0-test\n").unwrap();
        let boot = dir.path().join("boot");
        std::fs::create_dir_all(&boot).unwrap();
        std::fs::write(
            boot.join("config-6.1.0-test"),
            "CONFIG_HZ_1000=y\nCONFIG_HZ=1000\n",
        )
        .unwrap();
        let hz = kernel_hz(&proc_root, &boot).unwrap();
        assert_eq!(
            hz,
            KernelHz {
                hz: 1000,
                source: HzSource::BootConfig
            }
        );
        // Nothing at all: unknown, not a guess.
        assert_eq!(kernel_hz(&dir.path().join("empty"), &boot), None);
    }

    #[test]
    fn timer_list_parsing() {
        // Numbers read by hand off the fixture copy of /proc/timer_list.
        let text = std::fs::read_to_string(fixture().join("timer_list")).unwrap();
        let s = timer_list_sample(&text).unwrap();
        assert_eq!(
            s,
            JiffiesSample {
                jiffies: 4_295_062_596,
                now_ns: 681_346_034_564
            }
        );
    }

    #[test]
    fn hz_from_jiffies_rate() {
        let a = JiffiesSample {
            jiffies: 4_295_062_596,
            now_ns: 681_346_034_564,
        };
        // 26 jiffies in 100.3 ms: 259/s, nearest offered value 250.
        let b = JiffiesSample {
            jiffies: a.jiffies + 26,
            now_ns: a.now_ns + 100_300_000,
        };
        assert_eq!(hz_from_samples(a, b), Some(250));
        // 100 jiffies in 100 ms: 1000.
        let b = JiffiesSample {
            jiffies: a.jiffies + 100,
            now_ns: a.now_ns + 100_000_000,
        };
        assert_eq!(hz_from_samples(a, b), Some(1000));
        // 60/s is near no offered value: catches snapping anything to 100.
        let b = JiffiesSample {
            jiffies: a.jiffies + 6,
            now_ns: a.now_ns + 100_000_000,
        };
        assert_eq!(hz_from_samples(a, b), None);
        // Time going backwards or standing still: no rate.
        assert_eq!(hz_from_samples(b, a), None);
        assert_eq!(hz_from_samples(a, a), None);
    }
}
