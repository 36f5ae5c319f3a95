//! The code of a function that has no symbol (a static function of a binary
//! that keeps only `.dynsym`), found by following its control flow from
//! its entry: straight-line code, both ways of conditional jumps, and
//! unconditional jumps that stay near and do not land on another
//! function. A block ends at `ret`, `int3`, `ud2`, `hlt`, an indirect `jmp`
//! (a jump table: the cases it reaches are not followed), a known
//! function's start, or padding right after a `call` (the callee does not
//! return). Code reached only through a jump table is missed: its calls
//! stay in the function's img.
use std::collections::HashSet;

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind};

use super::{
    calls::{CallSite, Callee, FunctionCalls, resolve_operand},
    elf::ElfImage,
};

/// Farthest an intra-function jump is followed.
const MAX_SPAN: u64 = 1 << 20;
/// Instructions decoded at most for one function.
const MAX_INSTRUCTIONS: usize = 200_000;

/// The calls of the unnamed function starting at `entry`.
pub(crate) fn unnamed_function_calls(elf: &ElfImage, entry: u64) -> FunctionCalls {
    let mut out = FunctionCalls::default();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut work = vec![entry];
    let mut decoded = 0usize;
    let mut instr = Instruction::default();
    while let Some(block) = work.pop() {
        if seen.contains(&block) || decoded >= MAX_INSTRUCTIONS {
            continue;
        }
        let Some(code) = elf.code(block, MAX_SPAN) else {
            continue;
        };
        let mut decoder = Decoder::with_ip(64, code, block, DecoderOptions::NONE);
        let mut after_call = false;
        while decoder.can_decode() && decoded < MAX_INSTRUCTIONS {
            let ip = decoder.ip();
            if ip != entry && elf.function_at(ip).is_some() {
                break; // fell into the next function
            }
            if !seen.insert(ip) {
                break; // joined code already decoded
            }
            decoder.decode_out(&mut instr);
            decoded += 1;
            if instr.is_invalid() {
                out.undecodable_bytes += instr.len() as u64;
                break;
            }
            let m = instr.mnemonic();
            if after_call && m == Mnemonic::Nop && instr.len() > 1 {
                break; // padding: the call before did not return
            }
            after_call = false;
            match m {
                Mnemonic::Call => {
                    out.call_sites.push(CallSite {
                        call_address: instr.ip(),
                        return_address: instr.next_ip(),
                        callee: resolve_operand(elf, &instr),
                    });
                    after_call = true;
                }
                Mnemonic::Ret | Mnemonic::Int3 | Mnemonic::Ud2 | Mnemonic::Hlt => break,
                Mnemonic::Jmp => {
                    if instr.op0_kind() == OpKind::NearBranch64 {
                        let t = instr.near_branch64();
                        if is_local_jump(elf, entry, t) {
                            work.push(t);
                        } else {
                            let callee = resolve_operand(elf, &instr);
                            if !matches!(callee, Callee::Unnamed { .. } | Callee::Indirect) {
                                out.tail_calls.push(callee);
                            }
                        }
                    }
                    break;
                }
                // Conditional jumps (jcc, loop, jrcxz): both ways.
                _ if instr.op0_kind() == OpKind::NearBranch64 => {
                    let t = instr.near_branch64();
                    if is_local_jump(elf, entry, t) {
                        work.push(t);
                    }
                }
                _ => {}
            }
        }
    }
    out.call_sites.sort_by_key(|c| c.call_address);
    out
}

/// A jump that stays in the function: near, not to a known function.
fn is_local_jump(elf: &ElfImage, entry: u64, target: u64) -> bool {
    target.abs_diff(entry) < MAX_SPAN
        && elf.function_at(target).is_none()
        && !elf.in_plt(target)
        && elf.code(target, 1).is_some()
}
