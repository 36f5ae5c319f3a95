//! Symbol names: versions (`memcpy@@GLIBC_2.14`), aliases (several
//! symbols at one address are one function), sizes missing from the symbol
//! table, and "did you mean" suggestions.
/// One function of the file; `address` is its virtual address in the file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Function {
    /// Preferred name, without version (see [`ElfImage::load`](super::elf::ElfImage::load) for the choice).
    pub name: String,
    /// Version of the preferred name (`GLIBC_2.2.5`), if versioned.
    pub version: Option<String>,
    /// Other names at the same address.
    pub aliases: Vec<String>,
    pub address: u64,
    pub size_bytes: u64,
    /// The symbol had size 0: the size runs to the next function or the end
    /// of its section.
    pub size_inferred: bool,
    /// `STT_GNU_IFUNC`: the symbol is a resolver that picks the real code at
    /// load time, so its own body is not what callers run.
    pub ifunc: bool,
}

impl Function {
    pub(crate) fn contains(&self, address: u64) -> bool {
        address >= self.address && address - self.address < self.size_bytes
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct CodeSection {
    pub address: u64,
    pub size: u64,
    pub file_offset: u64,
}

pub(super) struct RawSymbol {
    pub name: String,
    pub version: Option<String>,
    pub default_version: bool,
    pub address: u64,
    pub size: u64,
    pub global: bool,
    pub ifunc: bool,
}

/// Splits `memcpy@@GLIBC_2.14` into (`memcpy`, `GLIBC_2.14`, default=true).
pub(crate) fn split_version(name: &str) -> (&str, Option<&str>, bool) {
    match name.find('@') {
        Some(i) => {
            let rest = &name[i + 1..];
            match rest.strip_prefix('@') {
                Some(v) => (&name[..i], Some(v), true),
                None => (&name[..i], Some(rest), false),
            }
        }
        None => (name, None, true),
    }
}

/// Merges symbols at one address into one function and infers missing sizes.
pub(super) fn group_functions(mut raw: Vec<RawSymbol>, code: &[CodeSection]) -> Vec<Function> {
    // Preferred name first: global, default version, fewer leading
    // underscores, shorter, then alphabetical (so `malloc` wins over
    // `__libc_malloc`, `fdopen` over `_IO_fdopen`).
    raw.sort_by(|a, b| {
        let key = |s: &RawSymbol| {
            (
                s.address,
                !s.global,
                !s.default_version,
                s.name.len() - s.name.trim_start_matches('_').len(),
                s.name.len(),
            )
        };
        key(a).cmp(&key(b)).then_with(|| a.name.cmp(&b.name))
    });
    let mut out: Vec<Function> = Vec::new();
    for s in raw {
        if let Some(last) = out.last_mut()
            && last.address == s.address
        {
            let full = match &s.version {
                Some(v) => format!(
                    "{}@{}{}",
                    s.name,
                    if s.default_version { "@" } else { "" },
                    v
                ),
                None => s.name.clone(),
            };
            if full != last.name && !last.aliases.contains(&full) {
                last.aliases.push(full);
            }
            last.size_bytes = last.size_bytes.max(s.size);
            last.ifunc |= s.ifunc;
            continue;
        }
        let mut aliases = Vec::new();
        if let Some(v) = &s.version {
            aliases.push(format!(
                "{}@{}{}",
                s.name,
                if s.default_version { "@" } else { "" },
                v
            ));
        }
        out.push(Function {
            name: s.name,
            version: s.version,
            aliases,
            address: s.address,
            size_bytes: s.size,
            size_inferred: false,
            ifunc: s.ifunc,
        });
    }
    for i in 0..out.len() {
        if out[i].size_bytes == 0 {
            let a = out[i].address;
            let section_end = code
                .iter()
                .find(|s| a >= s.address && a - s.address < s.size)
                .map(|s| s.address + s.size)
                .unwrap_or(a);
            let next = out.get(i + 1).map(|f| f.address).unwrap_or(u64::MAX);
            out[i].size_bytes = next.min(section_end).saturating_sub(a);
            out[i].size_inferred = true;
        }
    }
    out
}

/// Edit distance between two strings (for "did you mean").
pub(super) fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a version splitter that confuses `@` (hidden) with `@@`
    /// (default), which decides which of two libc symbols a name binds to.
    #[test]
    fn splits_versions() {
        assert_eq!(
            split_version("memcpy@@GLIBC_2.14"),
            ("memcpy", Some("GLIBC_2.14"), true)
        );
        assert_eq!(
            split_version("memcpy@GLIBC_2.2.5"),
            ("memcpy", Some("GLIBC_2.2.5"), false)
        );
        assert_eq!(split_version("main"), ("main", None, true));
    }

    /// Catches an edit distance off by one (it ranks the suggestions).
    #[test]
    fn edit_distance() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("PortalRun", "PortalRun"), 0);
    }
}
