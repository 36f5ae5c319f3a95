//! Kernel struct field offsets from the running kernel's BTF
//! (/sys/kernel/btf/vmlinux). aya cannot emit CO-RE relocations from Rust, so
//! the offsets are resolved here and handed to the programs as globals.
use std::{cell::RefCell, collections::HashMap, path::Path};

use btf_rs::{Btf, BtfType, Type};

use super::error::ProbeError;

pub(crate) const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// A member's position: byte offset, and for a bitfield the bit within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldPos {
    pub byte: u32,
    pub bit: u32,
    pub bitfield_bits: Option<u32>,
}

/// Every offset the programs need, by the global names they read.
#[derive(Debug, Clone)]
pub(crate) struct Offsets {
    pub globals: Vec<(&'static str, u32)>,
}

pub(crate) struct KernelBtf {
    btf: Btf,
    /// Structs found by name so far: each lookup by name walks every type
    /// of the file (the mapped backend keeps no index), and a session
    /// asks for `task_struct` alone some twenty times.
    structs: RefCell<HashMap<String, Option<btf_rs::Struct>>>,
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

    pub(crate) fn from_path(path: &Path) -> Result<Self, ProbeError> {
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
        Ok(Self {
            btf,
            structs: RefCell::default(),
        })
    }

    /// Position of `path` (e.g. `["bi_iter", "bi_size"]`) inside struct
    /// `name`, looking through anonymous struct/union members.
    pub(crate) fn field(&self, name: &str, path: &[&str]) -> Result<FieldPos, ProbeError> {
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
        if let Some(found) = self.structs.borrow().get(name) {
            return found.clone();
        }
        let found = self.btf.resolve_types_by_name(name).ok().and_then(|types| {
            types.into_iter().find_map(|t| match t {
                Type::Struct(s) if !s.members.is_empty() => Some(s),
                _ => None,
            })
        });
        self.structs
            .borrow_mut()
            .insert(name.to_string(), found.clone());
        found
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
    pub(crate) fn ledger_offsets(&self) -> Result<Offsets, ProbeError> {
        let task = |f: &str| self.field("task_struct", &[f]);
        let in_iowait = task("in_iowait")?;
        if in_iowait.bitfield_bits != Some(1) {
            return Err(ProbeError::MissingField {
                field: "task_struct.in_iowait (expected a 1-bit bitfield)".into(),
            });
        }
        let bio_size = self.field("bio", &["bi_iter", "bi_size"])?;
        // task->sched_info exists only with CONFIG_SCHED_INFO; without it
        // run-queue wait falls back to the wall clock (docs/ledger.md).
        let run_delay = self.field("task_struct", &["sched_info", "run_delay"]).ok();
        if run_delay.is_none() {
            log::warn!(
                "kernel without CONFIG_SCHED_INFO (no task_struct.sched_info.run_delay): run-queue wait is the wall clock from wakeup to switch-in"
            );
        }
        let last_queued = self
            .field("task_struct", &["sched_info", "last_queued"])
            .ok();
        // The switching CPU's rq clock, through next->se.cfs_rq->rq
        // (cfs_rq.rq needs CONFIG_FAIR_GROUP_SCHED): without it a sleep
        // ends at the switch-in (docs/ledger.md).
        let rq_clock = (|| {
            let se = self.field("task_struct", &["se"]).ok()?;
            let cfs = self.field("sched_entity", &["cfs_rq"]).ok()?;
            Some((
                se.byte + cfs.byte,
                self.field("cfs_rq", &["rq"]).ok()?.byte,
                self.field("rq", &["clock"]).ok()?.byte,
            ))
        })()
        .filter(|_| run_delay.is_some() && last_queued.is_some());
        // task->delays->blkio_delay (CONFIG_TASK_DELAY_ACCT): an iowait
        // ends where it grew by the wait.
        let blkio = (|| {
            Some((
                task("delays").ok()?.byte,
                self.field("task_delay_info", &["blkio_delay"]).ok()?.byte,
                self.field("task_delay_info", &["blkio_start"]).ok()?.byte,
            ))
        })();
        if rq_clock.is_none() {
            log::warn!(
                "kernel without task_struct.sched_info.last_queued or cfs_rq.rq: a sleep is taken to end at the thread's switch-in, not at its wake-up"
            );
        }
        Ok(Offsets {
            globals: vec![
                ("OFF_TASK_LAST_QUEUED", last_queued.map_or(0, |f| f.byte)),
                ("OFF_LEDGER_SE_CFS_RQ", rq_clock.map_or(0, |r| r.0)),
                ("OFF_LEDGER_CFS_RQ_RQ", rq_clock.map_or(0, |r| r.1)),
                ("OFF_RQ_CLOCK", rq_clock.map_or(0, |r| r.2)),
                ("HAVE_RQ_CLOCK", rq_clock.is_some() as u32),
                ("OFF_TASK_DELAYS", blkio.map_or(0, |b| b.0)),
                ("OFF_DELAYS_BLKIO", blkio.map_or(0, |b| b.1)),
                ("OFF_DELAYS_BLKIO_START", blkio.map_or(0, |b| b.2)),
                (
                    "HAVE_BLKIO",
                    blkio.is_some() as u32 & rq_clock.is_some() as u32,
                ),
                ("OFF_TASK_PID", task("pid")?.byte),
                ("OFF_TASK_TGID", task("tgid")?.byte),
                ("OFF_TASK_START_TIME", task("start_time")?.byte),
                ("OFF_TASK_COMM", task("comm")?.byte),
                ("OFF_TASK_IN_IOWAIT_BYTE", in_iowait.byte),
                ("TASK_IN_IOWAIT_MASK", 1 << in_iowait.bit),
                (
                    "OFF_TASK_SUM_EXEC",
                    self.field("task_struct", &["se", "sum_exec_runtime"])?.byte,
                ),
                ("OFF_TASK_RUN_DELAY", run_delay.map_or(0, |f| f.byte)),
                ("HAVE_RUN_DELAY", run_delay.is_some() as u32),
                (
                    "OFF_RQ_CMD_FLAGS",
                    self.field("request", &["cmd_flags"])?.byte,
                ),
                ("OFF_BIO_OPF", self.field("bio", &["bi_opf"])?.byte),
                ("OFF_BIO_SIZE", bio_size.byte),
            ],
        })
    }

    /// The offsets only the `--trace` programs read (ttp-ebpf/src/trace.rs):
    /// a request's bytes, sector and disk, a task's run queue and whether
    /// it was the last thread of its process.
    pub(crate) fn trace_offsets(&self) -> Result<Offsets, ProbeError> {
        let se_cfs_rq = {
            let se = self.field("task_struct", &["se"])?;
            let cfs = self.field("sched_entity", &["cfs_rq"])?;
            se.byte + cfs.byte
        };
        let signal_live = {
            let signal = self.field("task_struct", &["signal"])?;
            let live = self.field("signal_struct", &["live"])?;
            (signal.byte, live.byte)
        };
        Ok(Offsets {
            globals: vec![
                (
                    "OFF_RQ_DATA_LEN",
                    self.field("request", &["__data_len"])?.byte,
                ),
                ("OFF_RQ_SECTOR", self.field("request", &["__sector"])?.byte),
                ("OFF_RQ_Q", self.field("request", &["q"])?.byte),
                ("OFF_Q_DISK", self.field("request_queue", &["disk"])?.byte),
                ("OFF_DISK_MAJOR", self.field("gendisk", &["major"])?.byte),
                (
                    "OFF_DISK_FIRST_MINOR",
                    self.field("gendisk", &["first_minor"])?.byte,
                ),
                ("OFF_TASK_SE_CFS_RQ", se_cfs_rq),
                // cfs_rq.rq needs CONFIG_FAIR_GROUP_SCHED (every distribution
                // kernel has it); without it tracing reports the missing field.
                ("OFF_CFS_RQ_RQ", self.field("cfs_rq", &["rq"])?.byte),
                ("OFF_RQ_NR_RUNNING", self.field("rq", &["nr_running"])?.byte),
                ("OFF_TASK_SIGNAL", signal_live.0),
                ("OFF_SIGNAL_LIVE", signal_live.1),
            ],
        })
    }
}

/// Offsets the blame-detail programs read (ttp-ebpf/src/detail.rs), by the
/// source that needs them: a kernel without one field loses that source only.
/// The disk ones are globals the trace programs read too (kernel.rs
/// `Request`), under the same names.
#[derive(Debug)]
pub(crate) struct DetailOffsets {
    /// rq->q->disk->{major, first_minor} and rq->__data_len, for disk I/O
    /// per device (block_rq_complete).
    pub disk: Result<Vec<(&'static str, u32)>, ProbeError>,
    /// compact_control.direct_compaction, to tell direct compaction from
    /// kcompactd's.
    pub compaction: Result<(&'static str, u32), ProbeError>,
}

impl KernelBtf {
    pub(crate) fn detail_offsets(&self) -> DetailOffsets {
        let disk = (|| {
            Ok(vec![
                ("OFF_RQ_Q", self.field("request", &["q"])?.byte),
                (
                    "OFF_RQ_DATA_LEN",
                    self.field("request", &["__data_len"])?.byte,
                ),
                ("OFF_Q_DISK", self.field("request_queue", &["disk"])?.byte),
                ("OFF_DISK_MAJOR", self.field("gendisk", &["major"])?.byte),
                (
                    "OFF_DISK_FIRST_MINOR",
                    self.field("gendisk", &["first_minor"])?.byte,
                ),
            ])
        })();
        let compaction = self
            .field("compact_control", &["direct_compaction"])
            .map(|f| ("OFF_CC_DIRECT_COMPACTION", f.byte));
        DetailOffsets { disk, compaction }
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
        assert_eq!(offs.globals.len(), 21);
        // run_delay is a u64 of the task's sched_info (CONFIG_SCHED_INFO is
        // on on this project's machines).
        let get = |n: &str| offs.globals.iter().find(|(k, _)| *k == n).unwrap().1;
        assert_eq!(get("HAVE_RUN_DELAY"), 1);
        let si = btf.field("task_struct", &["sched_info"]).unwrap().byte;
        assert!(get("OFF_TASK_RUN_DELAY") >= si && get("OFF_TASK_RUN_DELAY") % 8 == 0);
        // last_queued is a u64 of the same sched_info, beside run_delay;
        // the rq clock and the blkio delay are reachable on this kernel
        // (CONFIG_FAIR_GROUP_SCHED, CONFIG_TASK_DELAY_ACCT).
        let lq = get("OFF_TASK_LAST_QUEUED");
        assert!(lq >= si && lq % 8 == 0 && lq != get("OFF_TASK_RUN_DELAY"));
        assert_eq!((get("HAVE_RQ_CLOCK"), get("HAVE_BLKIO")), (1, 1));
        let trace = btf.trace_offsets().unwrap();
        let tget = |n: &str| trace.globals.iter().find(|(k, _)| *k == n).unwrap().1;
        assert_eq!(get("OFF_LEDGER_SE_CFS_RQ"), tget("OFF_TASK_SE_CFS_RQ"));
        assert_eq!(get("OFF_LEDGER_CFS_RQ_RQ"), tget("OFF_CFS_RQ_RQ"));
        assert!(get("OFF_RQ_CLOCK") % 8 == 0 && get("OFF_DELAYS_BLKIO") % 8 == 0);
        // sum_exec_runtime is a u64 inside the task's sched_entity.
        let se = btf.field("task_struct", &["se"]).unwrap().byte;
        let exec = offs
            .globals
            .iter()
            .find(|(n, _)| *n == "OFF_TASK_SUM_EXEC")
            .map(|&(_, off)| off)
            .unwrap();
        assert!(
            exec > se && exec % 8 == 0,
            "se at {se}, sum_exec_runtime at {exec}"
        );
    }

    /// Catches wrong detail offsets on the running kernel: gendisk's major
    /// and first_minor are adjacent ints (include/linux/blkdev.h), and the
    /// globals the detail shares with the trace programs get the same
    /// offsets from both.
    #[test]
    fn detail_offsets_are_consistent() {
        let Ok(btf) = KernelBtf::load() else {
            eprintln!("skipped: no {VMLINUX_BTF}");
            return;
        };
        let d = btf.detail_offsets();
        let disk = d.disk.unwrap();
        let get = |n: &str| disk.iter().find(|(k, _)| *k == n).unwrap().1;
        assert_eq!(get("OFF_DISK_FIRST_MINOR"), get("OFF_DISK_MAJOR") + 4);
        assert_eq!(disk.len(), 5);
        assert!(d.compaction.is_ok());
        let trace = btf.trace_offsets().unwrap().globals;
        for (name, off) in &disk {
            let t = trace.iter().find(|(k, _)| k == name).map(|t| t.1);
            assert_eq!(t, Some(*off), "{name}");
        }
    }

    /// Catches a kernel whose layout the trace programs cannot read: every
    /// trace offset resolves, and the 32-bit request length sits where
    /// include/linux/blk-mq.h puts it, just before the 64-bit sector.
    #[test]
    fn trace_offsets_resolve() {
        let Ok(btf) = KernelBtf::load() else {
            eprintln!("skipped: no {VMLINUX_BTF}");
            return;
        };
        let offs = btf.trace_offsets().unwrap();
        eprintln!("{offs:?}");
        let get = |n: &str| offs.globals.iter().find(|(k, _)| *k == n).unwrap().1;
        assert_eq!(get("OFF_RQ_DATA_LEN") + 4, get("OFF_RQ_SECTOR"));
        assert_eq!(offs.globals.len(), 11);
    }
}
