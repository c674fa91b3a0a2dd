// Copy elision: a kernel that only copies an intermediate buffer, element for element, into
// another buffer is removed, and the kernel that wrote the intermediate writes the copy's
// destination instead.
//
// Such copies come from CONTIGUOUS over a value that the scheduler had to store anyway in the
// very order the copy writes (ShuffleNet's channel shuffle before a depthwise conv: the 1x1 conv
// that produces it stores straight into the shuffled order, and the copy then moved 1.4 MB for
// nothing, 11 % of the model's time). A copy is elided only where nothing else can tell: its
// source is an intermediate that exactly one earlier kernel writes and that the copy alone reads,
// its destination is written by the copy alone, and both have the same dtype and size; load and
// store use the same index expression with no mask.
#pragma once

#include "schedule/schedule.h"

namespace kiln {

// Removes every such copy from `schedule` (before memory planning), with the source buffers it
// leaves unused; buffer indices are renumbered. Returns how many copies were removed.
int elide_copies(Schedule& schedule);

}  // namespace kiln
