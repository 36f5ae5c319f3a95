//! Kernel struct field offsets from the running kernel's BTF
//! (/sys/kernel/btf/vmlinux). aya cannot emit CO-RE relocations from Rust, so
//! the offsets are resolved here and handed to the programs as globals.
use std::path::Path;

use btf_rs::{Btf, BtfType, Type};

use super::ProbeError;

pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// A member's position: byte offset, and for a bitfield the bit within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldPos {
    pub byte: u32,
    pub bit: u32,
    pub bitfield_bits: Option<u32>,
}

/// Every offset the programs need, by the global names they read.
#[derive(Debug, Clone)]
pub struct Offsets {
    pub globals: Vec<(&'static str, u32)>,
}

pub struct KernelBtf {
    btf: Btf,
}

impl KernelBtf {
    /// The running kernel's BTF; `TTP_VMLINUX_BTF` names another file
    /// (e.g. to check a kernel's layout, or to test the missing-BTF error).
    pub fn load() -> Result<Self, ProbeError> {
        match std::env::var_os("TTP_VMLINUX_BTF") {
            Some(p) => Self::from_path(Path::new(&p)),
            None => Self::from_path(Path::new(VMLINUX_BTF)),
        }
    }

    pub fn from_path(path: &Path) -> Result<Self, ProbeError> {
        if !path.exists() {
            return Err(ProbeError::NoBtf {
                path: path.display().to_string(),
            });
        }
        let btf = Btf::from_file_with_backend(path, btf_rs::Backend::Mmap).map_err(|e| {
            ProbeError::BadBtf {
                path: path.display().to_string(),
                reason: e.to_string(),
            }
        })?;
        Ok(Self { btf })
    }

    /// Position of `path` (e.g. `["bi_iter", "bi_size"]`) inside struct
    /// `name`, looking through anonymous struct/union members.
    pub fn field(&self, name: &str, path: &[&str]) -> Result<FieldPos, ProbeError> {
        let missing = || ProbeError::MissingField {
            field: format!("{name}.{}", path.join(".")),
        };
        let mut ty = self.find_struct(name).ok_or_else(missing)?;
        let mut bits = 0u32;
        let mut bitfield_bits = None;
        for (i, want) in path.iter().enumerate() {
            let (off, bf, member_ty) = self.find_member(&ty, want).ok_or_else(missing)?;
            bits += off;
            bitfield_bits = bf;
            if i + 1 < path.len() {
                ty = self.resolve_struct(member_ty).ok_or_else(missing)?;
            }
        }
        Ok(FieldPos {
            byte: bits / 8,
            bit: bits % 8,
            bitfield_bits,
        })
    }

    fn find_struct(&self, name: &str) -> Option<btf_rs::Struct> {
        self.btf
            .resolve_types_by_name(name)
            .ok()?
            .into_iter()
            .find_map(|t| match t {
                Type::Struct(s) if !s.members.is_empty() => Some(s),
                _ => None,
            })
    }

    /// Follows typedefs and qualifiers down to a struct or union.
    fn resolve_struct(&self, mut id: u32) -> Option<btf_rs::Struct> {
        for _ in 0..16 {
            match self.btf.resolve_type_by_id(id).ok()? {
                Type::Struct(s) | Type::Union(s) => return Some(s),
                Type::Typedef(t) => id = t.get_type_id()?,
                Type::Volatile(t) | Type::Const(t) | Type::Restrict(t) => id = t.get_type_id()?,
                _ => return None,
            }
        }
        None
    }

    /// (bit offset, bitfield size, member type id) of member `want`,
    /// searching anonymous members recursively.
    fn find_member(&self, s: &btf_rs::Struct, want: &str) -> Option<(u32, Option<u32>, u32)> {
        for m in &s.members {
            let name = self.btf.resolve_name(m).unwrap_or_default();
            let ty = m.get_type_id()?;
            if name == want {
                return Some((m.bit_offset(), m.bitfield_size().filter(|&b| b > 0), ty));
            }
            if name.is_empty()
                && let Some(inner) = self.resolve_struct(ty)
                && let Some((off, bf, t)) = self.find_member(&inner, want)
            {
                return Some((m.bit_offset() + off, bf, t));
            }
        }
        None
    }

    /// The offsets the ledger programs read (ttp-ebpf/src/kernel.rs).
    pub fn ledger_offsets(&self) -> Result<Offsets, ProbeError> {
        let task = |f: &str| self.field("task_struct", &[f]);
        let in_iowait = task("in_iowait")?;
        if in_iowait.bitfield_bits != Some(1) {
            return Err(ProbeError::MissingField {
                field: "task_struct.in_iowait (expected a 1-bit bitfield)".into(),
            });
        }
        let bio_size = self.field("bio", &["bi_iter", "bi_size"])?;
        Ok(Offsets {
            globals: vec![
                ("OFF_TASK_PID", task("pid")?.byte),
                ("OFF_TASK_TGID", task("tgid")?.byte),
                ("OFF_TASK_START_TIME", task("start_time")?.byte),
                ("OFF_TASK_COMM", task("comm")?.byte),
                ("OFF_TASK_IN_IOWAIT_BYTE", in_iowait.byte),
                ("TASK_IN_IOWAIT_MASK", 1 << in_iowait.bit),
                (
                    "OFF_RQ_CMD_FLAGS",
                    self.field("request", &["cmd_flags"])?.byte,
                ),
                ("OFF_BIO_OPF", self.field("bio", &["bi_opf"])?.byte),
                ("OFF_BIO_SIZE", bio_size.byte),
            ],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches wrong offsets on the running kernel: `pid` and `tgid` are
    /// adjacent 4-byte fields of task_struct (include/linux/sched.h), and
    /// in_iowait is a single bit. Needs /sys/kernel/btf/vmlinux (no root).
    #[test]
    fn task_struct_offsets_are_consistent() {
        let Ok(btf) = KernelBtf::load() else {
            eprintln!("skipped: no {VMLINUX_BTF}");
            return;
        };
        let pid = btf.field("task_struct", &["pid"]).unwrap();
        let tgid = btf.field("task_struct", &["tgid"]).unwrap();
        assert_eq!(tgid.byte, pid.byte + 4);
        let io = btf.field("task_struct", &["in_iowait"]).unwrap();
        assert_eq!(io.bitfield_bits, Some(1));
        assert!(btf.field("task_struct", &["no_such_field"]).is_err());
        let offs = btf.ledger_offsets().unwrap();
        assert_eq!(offs.globals.len(), 9);
    }
}
