//! A tiny eBPF assembler, for the programs the links load into the kernel: the TUN link's steering
//! program (`tun/steer.rs`) and the AF_XDP link's (`xdp/program.rs`). Instructions are built one
//! by one, jumps to labels resolved at the end; opcodes, sizes and registers are the kernel's
//! (`linux/bpf_common.h`, `linux/bpf.h`). Each program's tests run it on an interpreter of the
//! instructions it uses.

/// One eBPF instruction: opcode, destination and source registers, offset, immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Insn {
    pub(crate) code: u8,
    pub(crate) dst: u8,
    pub(crate) src: u8,
    pub(crate) off: i16,
    pub(crate) imm: i32,
}

impl Insn {
    /// The 8 bytes the kernel reads (registers packed into one byte, destination in the low nibble).
    pub(crate) fn encode(self) -> [u8; 8] {
        let off = self.off.to_le_bytes();
        let imm = self.imm.to_le_bytes();
        [
            self.code,
            (self.src << 4) | self.dst,
            off[0],
            off[1],
            imm[0],
            imm[1],
            imm[2],
            imm[3],
        ]
    }
}

// Instruction classes.
pub(crate) const LD: u8 = 0x00;
pub(crate) const LDX: u8 = 0x01;
pub(crate) const ALU: u8 = 0x04;
pub(crate) const JMP: u8 = 0x05;
pub(crate) const JMP32: u8 = 0x06;
pub(crate) const ALU64: u8 = 0x07;
// Sizes.
pub(crate) const W: u8 = 0x00;
pub(crate) const H: u8 = 0x08;
pub(crate) const B: u8 = 0x10;
pub(crate) const DW: u8 = 0x18;
// Modes.
pub(crate) const IMM: u8 = 0x00;
pub(crate) const ABS: u8 = 0x20;
pub(crate) const IND: u8 = 0x40;
pub(crate) const MEM: u8 = 0x60;
// Sources: the immediate, or the source register.
pub(crate) const K: u8 = 0x00;
pub(crate) const X: u8 = 0x08;
// Operations.
pub(crate) const ADD: u8 = 0x00;
pub(crate) const SUB: u8 = 0x10;
pub(crate) const MUL: u8 = 0x20;
pub(crate) const DIV: u8 = 0x30;
pub(crate) const OR: u8 = 0x40;
pub(crate) const AND: u8 = 0x50;
pub(crate) const LSH: u8 = 0x60;
pub(crate) const RSH: u8 = 0x70;
pub(crate) const XOR: u8 = 0xa0;
pub(crate) const MOV: u8 = 0xb0;
// Jumps.
pub(crate) const JA: u8 = 0x00;
pub(crate) const JEQ: u8 = 0x10;
pub(crate) const JGT: u8 = 0x20;
pub(crate) const JNE: u8 = 0x50;
pub(crate) const JLT: u8 = 0xa0;
pub(crate) const CALL: u8 = 0x80;
pub(crate) const EXIT: u8 = 0x90;

// Registers: r0 the result, r1-r5 arguments (r1 the context at entry), r6-r9 preserved across calls.
pub(crate) const R0: u8 = 0;
pub(crate) const R1: u8 = 1;
pub(crate) const R2: u8 = 2;
pub(crate) const R3: u8 = 3;
pub(crate) const R4: u8 = 4;
pub(crate) const R5: u8 = 5;
pub(crate) const R6: u8 = 6;
pub(crate) const R7: u8 = 7;
pub(crate) const R8: u8 = 8;
pub(crate) const R9: u8 = 9;

/// A label for a jump target, resolved when the program is finished.
#[derive(Clone, Copy)]
pub(crate) struct Label(usize);

/// The assembler: instructions, and jumps whose offsets are filled in at the end.
#[derive(Default)]
pub(crate) struct Asm {
    insns: Vec<Insn>,
    /// (instruction index, label) of every jump.
    jumps: Vec<(usize, Label)>,
    /// Where each label is, once placed.
    at: Vec<Option<usize>>,
}

impl Asm {
    /// Any instruction.
    pub(crate) fn insn(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(Insn {
            code,
            dst,
            src,
            off,
            imm,
        });
    }

    /// An instruction with no offset.
    pub(crate) fn op(&mut self, code: u8, dst: u8, src: u8, imm: i32) {
        self.insn(code, dst, src, 0, imm);
    }

    /// A label, to place later.
    pub(crate) fn label(&mut self) -> Label {
        self.at.push(None);
        Label(self.at.len() - 1)
    }

    /// The next instruction is `l`'s target.
    pub(crate) fn place(&mut self, l: Label) {
        self.at[l.0] = Some(self.insns.len());
    }

    /// `if dst <op> imm goto to`, on all 64 bits (`class` [`JMP`]) or the low 32 ([`JMP32`]).
    pub(crate) fn jump_imm(&mut self, class: u8, op: u8, dst: u8, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.op(class | op | K, dst, 0, imm);
    }

    /// `if dst <op> imm goto to` on 64 bits.
    pub(crate) fn jump(&mut self, op: u8, dst: u8, imm: i32, to: Label) {
        self.jump_imm(JMP, op, dst, imm, to);
    }

    /// `if dst <op> src goto to` on 64 bits.
    pub(crate) fn jump_reg(&mut self, op: u8, dst: u8, src: u8, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.op(JMP | op | X, dst, src, 0);
    }

    /// `dst = *(size *)(src + off)`.
    pub(crate) fn load(&mut self, size: u8, dst: u8, src: u8, off: i16) {
        self.insn(LDX | MEM | size, dst, src, off, 0);
    }

    /// A socket filter's packet load: r0 = the packet's byte, half-word or word at `offset` (host
    /// order; out of bounds ends the program with 0).
    pub(crate) fn load_abs(&mut self, size: u8, offset: i32) {
        self.op(LD | ABS | size, 0, 0, offset);
    }

    /// A socket filter's packet load: r0 = the packet's `size` at `reg + offset`.
    pub(crate) fn load_ind(&mut self, size: u8, reg: u8, offset: i32) {
        self.op(LD | IND | size, 0, reg, offset);
    }

    /// `return value`.
    pub(crate) fn exit_with(&mut self, value: i32) {
        self.op(ALU64 | MOV | K, R0, 0, value);
        self.op(JMP | EXIT, 0, 0, 0);
    }

    /// The program, every jump's offset filled in.
    pub(crate) fn finish(mut self) -> Vec<Insn> {
        for &(i, Label(l)) in &self.jumps {
            let target = self.at[l].expect("every label is placed");
            self.insns[i].off = (target as i64 - i as i64 - 1) as i16;
        }
        self.insns
    }
}
