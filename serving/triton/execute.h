// Runs one call of TRITONBACKEND_ModelInstanceExecute: answers and releases every request.
//
// Requests are checked one by one (a bad one gets its own error response and does not disturb the
// others), then grouped: with max_batch_size > 0 the requests whose dimensions agree except the
// first (the batch) form one group, concatenated along the batch dimension and run once; requests
// of another shape (a different sequence length) form their own group and run separately, so no
// request is padded and none is refused for its neighbours' shapes. Each group's outputs are split
// back along the batch dimension to its requests.
#pragma once

#include <cstdint>

#include "model_state.h"
#include "triton_api.h"

namespace kiln::serving {

void execute_requests(InstanceState& instance, TRITONBACKEND_Request** requests, uint32_t request_count);

}  // namespace kiln::serving
