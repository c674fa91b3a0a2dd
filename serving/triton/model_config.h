// The model configuration against the plan: read the backend's parameters, fill in what a minimal
// config leaves out (auto-complete) and refuse a config that contradicts the plan, naming the field.
#pragma once

#include <string>
#include <vector>

#include "json.h"
#include "model_state.h"
#include "triton_api.h"

namespace kiln::serving {

// The parameters the backend reads from `parameters { key: "..." value { string_value: "..." } }`.
struct BackendParameters {
  int threads = 0;                  // `threads`: kernel threads per instance; 0 = cores / instances
  std::vector<std::string> shapes;  // `shapes`: `kiln compile --shape` specs for model.onnx, space-separated
};

// Reads `parameters`; an unknown key or a malformed value is an error naming it.
TRITONSERVER_Error* read_parameters(const Json& config, BackendParameters* out);

// The plan's inputs, outputs and variables.
TRITONSERVER_Error* read_interface(const kiln_plan* plan, PlanInterface* out);

// The variable that can carry Triton's batch: every input and output leads with exactly it, and
// its range starts at 1 (a batch of one request). -1 when there is none.
int64_t batch_variable(const PlanInterface& plan);

// With `auto_complete`, fills what the config leaves out: inputs and outputs (dims of -1 where the
// plan's are symbolic) and, when neither inputs nor max_batch_size were given and the plan has a
// batch variable, max_batch_size = its maximum. Then checks the config against the plan (every
// plan input is named, dtypes and dims agree, max_batch_size fits the batch variable, no reshape)
// and sets *out_max_batch_size and *out_changed (the config must be handed back to the server).
TRITONSERVER_Error* complete_config(Json* config, const PlanInterface& plan, bool auto_complete,
                                    int64_t* out_max_batch_size, bool* out_changed);

// The number of instances instance_group asks for (at least 1); a GPU or MODEL kind is refused.
TRITONSERVER_Error* read_instance_count(const Json& config, int* out_count);

}  // namespace kiln::serving
