//! What the machine code of one function calls (decoded with iced-x86):
//! each `call` instruction and its target, resolved as the dynamic linker
//! would bind it (a PLT stub to the GOT slot its `jmp` reads, the slot's
//! relocation to the symbol). The call graph (callgraph.rs) and the code
//! of a function without a symbol (extent.rs) are built from it.
use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind};

use super::elf::ElfImage;

/// Where a call goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Callee {
    /// A function this file defines (called directly or through its PLT).
    Local(usize),
    /// A function of another file (a shared library), through the PLT/GOT.
    Import { name: String },
    /// A direct call to an address no function symbol starts at.
    Unnamed { target: u64 },
    /// A call through a register or an unbound memory operand.
    Indirect,
}

/// One `call` instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallSite {
    /// Virtual address of the `call` instruction.
    pub call_address: u64,
    /// Virtual address of the instruction after it (where the callee returns).
    pub return_address: u64,
    pub callee: Callee,
}

/// What the machine code of one function calls.
#[derive(Debug, Clone, Default)]
pub(crate) struct FunctionCalls {
    pub call_sites: Vec<CallSite>,
    /// Functions entered by `jmp` from this one (their time is in `img_F`).
    pub tail_calls: Vec<Callee>,
    /// Bytes the decoder could not decode (data in code, or a wrong size).
    pub undecodable_bytes: u64,
}

/// Decodes one function and resolves its call targets.
pub(crate) fn function_calls(elf: &ElfImage, function: usize) -> FunctionCalls {
    let f = &elf.functions()[function];
    let mut out = FunctionCalls::default();
    let Some(code) = elf.code(f.address, f.size_bytes) else {
        return out;
    };
    let mut decoder = Decoder::with_ip(64, code, f.address, DecoderOptions::NONE);
    let mut instr = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut instr);
        if instr.is_invalid() {
            out.undecodable_bytes += instr.len() as u64;
            continue;
        }
        match instr.mnemonic() {
            Mnemonic::Call => out.call_sites.push(CallSite {
                call_address: instr.ip(),
                return_address: instr.next_ip(),
                callee: resolve_operand(elf, &instr),
            }),
            Mnemonic::Jmp => {
                let leaves = match instr.op0_kind() {
                    OpKind::NearBranch64 => !f.contains(instr.near_branch64()),
                    OpKind::Memory => instr.is_ip_rel_memory_operand(),
                    _ => false,
                };
                if leaves {
                    let callee = resolve_operand(elf, &instr);
                    if !matches!(callee, Callee::Unnamed { .. } | Callee::Indirect) {
                        out.tail_calls.push(callee);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Resolves the target of a `call`/`jmp`.
pub(crate) fn resolve_operand(elf: &ElfImage, instr: &Instruction) -> Callee {
    match instr.op0_kind() {
        OpKind::NearBranch64 => resolve_address(elf, instr.near_branch64()),
        OpKind::Memory if instr.is_ip_rel_memory_operand() => {
            resolve_slot(elf, instr.ip_rel_memory_address()).unwrap_or(Callee::Indirect)
        }
        _ => Callee::Indirect,
    }
}

fn resolve_address(elf: &ElfImage, target: u64) -> Callee {
    if elf.in_plt(target) {
        if let Some(callee) = plt_stub_slot(elf, target).and_then(|s| resolve_slot(elf, s)) {
            return callee;
        }
        return Callee::Unnamed { target };
    }
    match elf.function_at(target) {
        Some(i) => Callee::Local(i),
        None => Callee::Unnamed { target },
    }
}

fn resolve_slot(elf: &ElfImage, slot: u64) -> Option<Callee> {
    let import = elf.got_slot(slot)?;
    Some(match import.local {
        Some(i) => Callee::Local(i),
        None => Callee::Import {
            name: import.name.clone(),
        },
    })
}

/// The GOT slot read by the PLT stub at `stub`: the first
/// `jmp qword ptr [rip+disp]` of the stub (after an `endbr64` in `.plt.sec`,
/// first thing in a lazy `.plt` entry or a `.plt.got` entry).
fn plt_stub_slot(elf: &ElfImage, stub: u64) -> Option<u64> {
    let code = elf.code(stub, 16)?;
    let mut decoder = Decoder::with_ip(64, code, stub, DecoderOptions::NONE);
    let mut instr = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut instr);
        match instr.mnemonic() {
            Mnemonic::Endbr64 | Mnemonic::Nop => continue,
            Mnemonic::Jmp if instr.op0_kind() == OpKind::Memory => {
                return instr
                    .is_ip_rel_memory_operand()
                    .then(|| instr.ip_rel_memory_address());
            }
            _ => return None,
        }
    }
    None
}
