// Vector masks that stay where they are computed. A PADTO'd vector block (a symbolic contiguous
// axis in blocks of one vector: heuristics.h) masks its loads with `lane < end`, a compare that
// depends on the output loops only, so the renderer and LLVM's optimiser compute it outside the
// reduction loop. Instruction selection then moved it back in: CodeGenPrepare sinks every compare
// into the blocks of its users (x86 has one flags register, so a scalar compare is cheaper beside
// its branch), which for an AVX-512 mask means two 64-bit lane compares and a mask merge on every
// step of the reduction, on the ports the FMAs need. The int8 BERT's attention scores over a
// symbolic key count (8 FMAs per step) ran 1.6x slower than the fixed plan's.
#pragma once

namespace llvm {
class Module;
}

namespace kiln {

// Gives each vector compare that masks a masked load or store in another block a `freeze` of its
// own beside it, and has the load or store take that instead: a freeze is not a compare, so
// CodeGenPrepare leaves it, and the mask stays in a register across the loop. A freeze changes
// nothing for a mask that is not poison (a poison mask already made the access undefined).
void keep_masks_where_computed(llvm::Module& module);

}  // namespace kiln
