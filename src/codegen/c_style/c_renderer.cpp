// The C-style renderer: control flow, memory and the kernel signature; scalar semantics live in
// c_alu.cpp. Every value is one C variable per lane, declared where the linear program computes it,
// so a C block (a loop body) holds exactly the values the linearizer placed in that loop.
#include "codegen/c_style/c_renderer.h"

#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "codegen/c_style/c_alu.h"
#include "codegen/c_style/c_mma.h"
#include "opt/mma_layout.h"
#include "support/error.h"

namespace kiln {

namespace {

struct Value {
  std::vector<std::string> lanes;  // one C expression per lane (a variable name or a literal)
  const std::string& lane(size_t k) const { return lanes.size() == 1 ? lanes[0] : lanes.at(k); }
};

// A DEFINE_GLOBAL parameter or a DEFINE_REG array.
struct Pointer {
  std::string name;
  DType element;          // the scalar type of one memory element
  int lanes = 1;          // elements per pointee (a vector accumulator holds one element per lane)
  bool is_register = false;
};

// An INDEX: where a LOAD or STORE goes.
struct Access {
  Pointer pointer;
  Value index;
  std::optional<int64_t> constant_index;  // the index when it is a CONST (accumulators: always 0)
  std::optional<Value> valid;
};

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string joined;
  for (const std::string& part : parts) joined += (joined.empty() ? "" : separator) + part;
  return joined;
}

std::string c_identifier(const std::string& name) {
  std::string out = name;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "k_" + out;
  return out;
}

class CRenderer {
 public:
  CRenderer(const LinearProgram& program, const CDialect& dialect, const CDeviceFeatures& features)
      : program_(program), dialect_(dialect), features_(features), context_{dialect, helpers_} {}

  RenderedKernel run() {
    check_dtypes();
    std::string signature = kernel_signature();
    indent_ = 1;
    declare_emulated_mma_tiles();
    for (const UOpPtr& node : program_.ops) render(*node);
    if (open_loops_ != 0) fail(str_cat(open_loops_, " RANGE loops are never closed by an END"));
    std::ostringstream source;
    source << "/* kiln kernel " << program_.name << " (" << dialect_.name << ") */\n" << dialect_.preamble;
    if (uses_f16_) source << dialect_.enable_f16;
    if (uses_f64_) source << dialect_.enable_f64;
    source << helpers_.text() << signature << " {\n" << body_.str() << "}\n";
    return RenderedKernel{kernel_name_, source.str(), buffer_count_, uses_f16_, uses_f64_, variable_names_};
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw InternalError(str_cat(dialect_.name, " renderer, kernel '", program_.name, "': ", message),
                        std::source_location::current(), print_linear(program_));
  }

  // Every dtype the kernel touches must exist on the device: a UserError names the first op that
  // needs a missing one.
  void check_dtypes() {
    for (const UOpPtr& node : program_.ops) {
      DType dtype = node->dtype().is_pointer() ? node->dtype().pointee() : node->dtype();
      ScalarType scalar = dtype.scalar();
      std::string lacks;
      if (scalar == ScalarType::Float16) {
        uses_f16_ = true;
        if (!features_.f16 && !dialect_.f16_requirement.empty()) lacks = "the device lacks " + dialect_.f16_requirement;
      }
      if (scalar == ScalarType::Float64) {
        uses_f64_ = true;
        if (!features_.f64 && !dialect_.f64_requirement.empty()) lacks = "the device lacks " + dialect_.f64_requirement;
      }
      if (!lacks.empty())
        throw UserError(str_cat("unsupported: ", DType(scalar).name(), " (", op_name(node->op()), " in kernel '",
                                program_.name, "') on ", dialect_.name, " device '", features_.device_name, "': ",
                                lacks));
    }
  }

  std::string kernel_signature() {
    std::map<int64_t, DType> elements;
    std::map<int64_t, bool> written;
    for (const UOpPtr& node : program_.ops) {
      if (node->op() == Ops::DEFINE_GLOBAL) {
        if (node->arg_int() < 0) fail(str_cat("DEFINE_GLOBAL with negative slot ", node->arg_int()));
        elements[node->arg_int()] = node->dtype().pointee();
      }
      if (node->op() == Ops::STORE && node->src(0)->op() == Ops::INDEX && node->src(0)->src(0)->op() == Ops::DEFINE_GLOBAL)
        written[node->src(0)->src(0)->arg_int()] = true;
    }
    kernel_name_ = c_identifier(program_.name);
    buffer_count_ = elements.empty() ? 0 : static_cast<int>(elements.rbegin()->first + 1);
    std::string signature = dialect_.kernel_prefix + " void " + kernel_name_ + "(";
    std::string qualifier = dialect_.global_qualifier.empty() ? "" : dialect_.global_qualifier + " ";
    for (int slot = 0; slot < buffer_count_; ++slot) {
      if (slot != 0) signature += ", ";
      auto found = elements.find(slot);
      if (found == elements.end()) {
        signature += str_cat(qualifier, dialect_.scalar_type(ScalarType::UInt8), "* unused", slot);
        continue;
      }
      if (found->second.count() != 1) fail("a kernel buffer of vector elements (" + found->second.name() + ")");
      signature += str_cat(qualifier, written.count(slot) ? "" : "const ",
                           c_memory_type(dialect_, found->second), "* data", slot);
    }
    // The kernel's variables (symbolic sizes) follow the buffers as 64-bit integers, in the order
    // of their names: the plan's Kernel.variables order (docs/backends.md, "Symbolic device plans").
    for (const std::string& name : program_variables(program_)) {
      variable_parameters_[name] = str_cat("var", variable_names_.size());
      signature += str_cat(buffer_count_ > 0 || !variable_names_.empty() ? ", " : "", dialect_.scalar_type(ScalarType::Int64),
                           " ", variable_parameters_[name]);
      variable_names_.push_back(name);
    }
    return signature + ")";
  }

  void line(const std::string& text) { body_ << std::string(static_cast<size_t>(2 * indent_), ' ') << text << "\n"; }

  // A new variable holding `expression`; its name.
  std::string declare(DType scalar, const std::string& expression) {
    std::string name = str_cat("v", next_variable_++);
    line(c_register_type(dialect_, scalar) + " " + name + " = " + expression + ";");
    return name;
  }

  const Value& value_of(const UOpPtr& node) const {
    auto found = values_.find(node.get());
    if (found == values_.end()) fail(str_cat(op_name(node->op()), " is used before it is defined"));
    return found->second;
  }

  const Pointer& pointer_of(const UOpPtr& node) const {
    auto found = pointers_.find(node.get());
    if (found == pointers_.end()) fail(str_cat("INDEX into a ", op_name(node->op()), ", not a buffer or accumulator"));
    return found->second;
  }

  const Access& access_of(const UOp& node) const {
    auto found = accesses_.find(node.src(0).get());
    if (found == accesses_.end()) fail(str_cat(op_name(node.op()), " through a ", op_name(node.src(0)->op()), ", not an INDEX"));
    return found->second;
  }

  void render(const UOp& node) {
    switch (node.op()) {
      case Ops::CONST: values_[&node] = Value{{c_constant(context_, node)}}; return;
      case Ops::DEFINE_GLOBAL:
        pointers_[&node] = Pointer{str_cat("data", node.arg_int()), node.dtype().pointee(), 1, false};
        return;
      case Ops::DEFINE_REG: return define_register(node);
      case Ops::DEFINE_LOCAL: return define_local(node);
      case Ops::BARRIER:
        if (dialect_.barrier.empty()) fail("BARRIER, but " + dialect_.name + " has no work-group barrier");
        line(dialect_.barrier);
        return;
      case Ops::DEFINE_VAR:  // a size variable: its parameter, in the node's type (index math may be 32 bits)
        values_[&node] = Value{{declare(node.dtype().base(), str_cat("(", c_register_type(dialect_, node.dtype().base()), ")",
                                                                     variable_parameters_.at(node.arg_variable().name)))}};
        return;
      case Ops::AFTER:
        if (auto found = pointers_.find(node.src(0).get()); found != pointers_.end()) pointers_[&node] = found->second;
        if (auto found = values_.find(node.src(0).get()); found != values_.end()) values_[&node] = found->second;
        return;
      case Ops::INDEX: return index(node);
      case Ops::LOAD: return load(node);
      case Ops::STORE: return store(node);
      case Ops::RANGE: return open_loop(node);
      case Ops::END:
        for (size_t i = 1; i < node.src_count(); ++i) {
          if (open_loops_ == 0) fail("END without an open RANGE");
          --open_loops_;
          --indent_;
          line("}");
        }
        return;
      case Ops::VECTORIZE: {
        Value vector;
        for (const UOpPtr& source : node.srcs())
          for (const std::string& lane : value_of(source).lanes) vector.lanes.push_back(lane);
        if (vector.lanes.size() != static_cast<size_t>(node.dtype().count()))
          fail(str_cat("VECTORIZE of type ", node.dtype().name(), " from ", vector.lanes.size(), " lanes"));
        values_[&node] = std::move(vector);
        return;
      }
      case Ops::GEP: {
        const Value& vector = value_of(node.src(0));
        Value lanes;
        for (int64_t lane : node.arg_list()) {
          if (lane < 0 || static_cast<size_t>(lane) >= vector.lanes.size()) fail(str_cat("GEP of lane ", lane));
          lanes.lanes.push_back(vector.lanes[static_cast<size_t>(lane)]);
        }
        values_[&node] = std::move(lanes);
        return;
      }
      case Ops::SHUFFLE_XOR: return shuffle(node);
      case Ops::WMMA: return wmma(node);
      case Ops::CAST: case Ops::BITCAST: {
        const Value& source = value_of(node.src(0));
        DType from = node.src(0)->dtype().base(), to = node.dtype().base();
        Value result;
        for (int k = 0; k < node.dtype().count(); ++k) {
          const std::string& lane = source.lane(static_cast<size_t>(k));
          std::string expression = node.op() == Ops::CAST ? c_cast(context_, lane, from, to) : c_bitcast(context_, lane, from, to);
          result.lanes.push_back(declare(to, expression));
        }
        values_[&node] = std::move(result);
        return;
      }
      default: break;
    }
    if (!op_is_alu(node.op())) fail(str_cat(op_name(node.op()), " cannot be rendered in ", dialect_.name));
    DType operand = (node.op() == Ops::WHERE ? node.src(1) : node.src(0))->dtype().base();
    DType shift_amount = node.src_count() > 1 ? node.src(1)->dtype().base() : operand;
    Value result;
    for (int k = 0; k < node.dtype().count(); ++k) {
      std::vector<std::string> sources;
      for (const UOpPtr& source : node.srcs()) sources.push_back(value_of(source).lane(static_cast<size_t>(k)));
      result.lanes.push_back(declare(node.dtype().base(), c_alu(context_, node.op(), operand, sources, shift_amount)));
    }
    values_[&node] = std::move(result);
  }

  // The dialect's warp shuffle, lane by lane; f32, i32 and u32 only (what gpu_grid emits).
  void shuffle(const UOp& node) {
    if (dialect_.shuffle_xor.empty()) fail("SHUFFLE_XOR, but " + dialect_.name + " has no warp shuffle");
    ScalarType scalar = node.dtype().scalar();
    if (scalar != ScalarType::Float32 && scalar != ScalarType::Int32 && scalar != ScalarType::UInt32)
      fail("SHUFFLE_XOR of " + node.dtype().name());
    const Value& source = value_of(node.src(0));
    Value result;
    for (int k = 0; k < node.dtype().count(); ++k) {
      std::string expression = dialect_.shuffle_xor;
      expression.replace(expression.find("%v"), 2, source.lane(static_cast<size_t>(k)));
      expression.replace(expression.find("%m"), 2, std::to_string(node.arg_int()));
      result.lanes.push_back(declare(node.dtype().base(), expression));
    }
    values_[&node] = std::move(result);
  }

  // The lanes of WMMA source `s`, checked to be `count` of `scalar`.
  const Value& mma_operand(const UOp& node, size_t s, DType scalar, int count) const {
    const UOpPtr& source = node.src(s);
    if (source->dtype() != scalar.vec(count)) fail(str_cat("WMMA source ", s, " of type ", source->dtype().name()));
    return value_of(source);
  }

  // A warp's D = A·B + C (opt/mma_layout.h): CUDA's mma instructions, or their emulation through
  // the work-group's local memory, which must then be one warp of 32 work-items.
  void wmma(const UOp& node) {
    const bool bf16 = node.arg_string() == mma::kNameBF16;
    if (!bf16 && node.arg_string() != mma::kNameF16) fail("WMMA of shape " + node.arg_string());
    if (node.dtype() != dtypes::f32.vec(mma::kCElements)) fail("WMMA of type " + node.dtype().name());
    const DType operand = bf16 ? dtypes::bf16 : dtypes::f16;
    const Value& a = mma_operand(node, 0, operand, mma::kAElements);
    const Value& b = mma_operand(node, 1, operand, mma::kBElements);
    const Value& c = mma_operand(node, 2, dtypes::f32, mma::kCElements);
    Value result;
    for (int i = 0; i < mma::kCElements; ++i) result.lanes.push_back(str_cat("v", next_variable_++));
    if (dialect_.warp_mma) {
      int architecture = features_.cuda_architecture;
      int oldest = bf16 ? 80 : 75;
      if (architecture < oldest)
        throw UserError(str_cat("unsupported: ", operand.name(), " tensor cores (kernel '", program_.name, "') on ",
                                dialect_.name, " device '", features_.device_name, "': the mma instructions need sm_",
                                oldest, " or newer (KILN_GPU_TENSOR_CORES=0 compiles ", operand.name(),
                                " matmuls without them)"));
      std::string name;
      std::string definition = cuda_mma_helper(architecture, bf16, dialect_, name);
      helpers_.use(name, definition);
      auto pair = [&](const Value& v, int j) {
        auto low = static_cast<size_t>(2 * j);
        return declare(DType(ScalarType::UInt32), str_cat("((uint)", v.lane(low), " | ((uint)", v.lane(low + 1), " << 16))"));
      };
      std::vector<std::string> arguments = result.lanes;
      for (int j = 0; j < mma::kAElements / 2; ++j) arguments.push_back(pair(a, j));
      for (int j = 0; j < mma::kBElements / 2; ++j) arguments.push_back(pair(b, j));
      for (int i = 0; i < mma::kCElements; ++i) arguments.push_back(c.lane(static_cast<size_t>(i)));
      line(str_cat("float ", join(result.lanes, ", "), ";"));
      line(str_cat(name, "(", join(arguments, ", "), ");"));
    } else {
      if (dialect_.barrier.empty() || dialect_.local_qualifier.empty()) fail("WMMA, but " + dialect_.name + " has no local memory");
      std::string name;
      std::string definition = emulated_mma_dot_helper(dialect_, name);
      helpers_.use(name, definition);
      std::string lane = declare(DType(ScalarType::UInt32), str_cat("(uint)(", dialect_.global_id0, " % ", mma::kLanes, ")"));
      line(dialect_.barrier);  // every lane has read the previous step's tiles
      for (int i = 0; i < mma::kAElements; ++i)
        line(str_cat(kEmulatedMmaA, "[", emulated_a_position(lane, i), "] = ",
                     c_cast(context_, a.lane(static_cast<size_t>(i)), operand, dtypes::f32), ";"));
      for (int i = 0; i < mma::kBElements; ++i)
        line(str_cat(kEmulatedMmaB, "[", emulated_b_position(lane, i), "] = ",
                     c_cast(context_, b.lane(static_cast<size_t>(i)), operand, dtypes::f32), ";"));
      line(dialect_.barrier);
      for (int i = 0; i < mma::kCElements; ++i)
        line(str_cat("float ", result.lanes[static_cast<size_t>(i)], " = ", c.lane(static_cast<size_t>(i)), " + ", name, "(", kEmulatedMmaA, ", ", kEmulatedMmaB,
                     ", ", emulated_c_row(lane, i), ", ", emulated_c_column(lane, i), ");"));
    }
    values_[&node] = std::move(result);
  }

  // The emulation's tiles, at the kernel's outermost scope as local memory must be.
  void declare_emulated_mma_tiles() {
    if (dialect_.warp_mma) return;
    for (const UOpPtr& node : program_.ops)
      if (node->op() == Ops::WMMA) {
        line(str_cat(dialect_.local_qualifier, " float ", kEmulatedMmaA, "[", mma::kRows * mma::kDepth, "];"));
        line(str_cat(dialect_.local_qualifier, " float ", kEmulatedMmaB, "[", mma::kDepth * mma::kColumns, "];"));
        return;
      }
  }

  void define_register(const UOp& node) {
    DType dtype = node.dtype();
    if (dtype.addrspace() != AddrSpace::Register || dtype.pointer_size() < 1)
      fail("DEFINE_REG of type " + dtype.name() + " (a register array of known size is expected)");
    Pointer pointer{str_cat("acc", node.arg_int()), dtype.pointee().base(), dtype.pointee().count(), true};
    line(str_cat(c_register_type(dialect_, pointer.element), " ", pointer.name, "[",
                 dtype.pointer_size() * pointer.lanes, "];"));
    pointers_[&node] = pointer;
  }

  // Work-group memory: declared at the kernel's outermost scope (OpenCL C requires it there; the
  // linearizer places a DEFINE_LOCAL outside every loop, since it depends on none).
  void define_local(const UOp& node) {
    DType dtype = node.dtype();
    if (dtype.addrspace() != AddrSpace::Local || dtype.pointer_size() < 1 || dtype.pointee().count() != 1)
      fail("DEFINE_LOCAL of type " + dtype.name() + " (a local array of known size and scalar elements is expected)");
    if (dialect_.local_qualifier.empty()) fail("DEFINE_LOCAL, but " + dialect_.name + " has no work-group memory");
    if (indent_ != 1) fail("DEFINE_LOCAL inside a loop");
    Pointer pointer{str_cat("local", node.arg_int()), dtype.pointee(), 1, false};
    line(str_cat(dialect_.local_qualifier, " ", c_memory_type(dialect_, pointer.element), " ", pointer.name, "[",
                 dtype.pointer_size(), "];"));
    pointers_[&node] = pointer;
  }

  void index(const UOp& node) {
    if (node.src_count() < 2 || node.src_count() > 3) fail("INDEX takes a pointer, an index and an optional valid");
    Access access{pointer_of(node.src(0)), value_of(node.src(1)), std::nullopt, std::nullopt};
    if (node.src(1)->op() == Ops::CONST) access.constant_index = node.src(1)->arg_int();
    if (node.src_count() == 3) access.valid = value_of(node.src(2));
    accesses_[&node] = std::move(access);
  }

  // The element that lane k of a `width`-lane access reads or writes.
  std::string element(const Access& access, int width, int k) const {
    const Pointer& pointer = access.pointer;
    if (pointer.is_register) {
      if (width != pointer.lanes) fail(str_cat("an access of ", width, " lanes to an accumulator of ", pointer.lanes));
      if (access.constant_index) return str_cat(pointer.name, "[", *access.constant_index * pointer.lanes + k, "]");
      return str_cat(pointer.name, "[", access.index.lane(0), " * ", pointer.lanes, " + ", k, "]");
    }
    // A vector index gives each lane its own element; a scalar one, `width` contiguous elements.
    if (access.index.lanes.size() > 1) return pointer.name + "[" + access.index.lane(static_cast<size_t>(k)) + "]";
    if (k == 0) return pointer.name + "[" + access.index.lane(0) + "]";
    return str_cat(pointer.name, "[", access.index.lane(0), " + ", k, "]");
  }

  void load(const UOp& node) {
    const Access& access = access_of(node);
    DType dtype = node.dtype();
    if (dtype.base() != access.pointer.element) fail("LOAD of " + dtype.name() + " from " + access.pointer.element.name());
    if (access.valid && node.src_count() != 2) fail("a masked LOAD needs an alternative value (src[1])");
    Value result;
    for (int k = 0; k < dtype.count(); ++k) {
      std::string read = element(access, dtype.count(), k);
      if (dtype.base().is_bool() && !access.pointer.is_register) read = "(" + read + " != 0)";
      // A masked-off lane is never read: its index may lie outside the buffer.
      if (access.valid)
        read = "(" + access.valid->lane(static_cast<size_t>(k)) + " ? " + read + " : " +
               value_of(node.src(1)).lane(static_cast<size_t>(k)) + ")";
      result.lanes.push_back(declare(dtype.base(), read));
    }
    values_[&node] = std::move(result);
  }

  void store(const UOp& node) {
    if (node.src_count() != 2) fail("STORE takes an INDEX and a value");
    const Access& access = access_of(node);
    DType dtype = node.src(1)->dtype();
    if (dtype.base() != access.pointer.element) fail("STORE of " + dtype.name() + " to " + access.pointer.element.name());
    const Value& value = value_of(node.src(1));
    for (int k = 0; k < dtype.count(); ++k) {
      std::string stored = value.lane(static_cast<size_t>(k));
      if (dtype.base().is_bool() && !access.pointer.is_register)
        stored = "(" + c_memory_type(dialect_, dtype) + ")" + stored;
      std::string assignment = element(access, dtype.count(), k) + " = " + stored + ";";
      if (access.valid) assignment = "if (" + access.valid->lane(static_cast<size_t>(k)) + ") " + assignment;
      line(assignment);
    }
  }

  // Axis 0 is the launch grid: this work-item's index, guarded against the grid's rounding up.
  void open_loop(const UOp& range) {
    std::string name = str_cat("ridx", next_variable_++);
    std::string end = value_of(range.src(0)).lane(0);
    std::string type = c_register_type(dialect_, range.dtype());
    if (range.arg_int() == 0) {
      line(str_cat(type, " ", name, " = (", type, ")", dialect_.global_id0, ";"));
      line(str_cat("if (", name, " < ", end, ") {"));
    } else {
      line(str_cat("for (", type, " ", name, " = 0; ", name, " < ", end, "; ++", name, ") {"));
    }
    values_[&range] = Value{{name}};
    ++open_loops_;
    ++indent_;
  }

  const LinearProgram& program_;
  const CDialect& dialect_;
  const CDeviceFeatures& features_;
  CHelpers helpers_;
  CExpressionContext context_;
  std::string kernel_name_;
  int buffer_count_ = 0;
  std::vector<std::string> variable_names_;                    // in parameter order
  std::map<std::string, std::string> variable_parameters_;     // variable name → its parameter's name
  bool uses_f16_ = false;
  bool uses_f64_ = false;
  std::ostringstream body_;
  int indent_ = 1;
  int open_loops_ = 0;
  int next_variable_ = 0;
  std::unordered_map<const UOp*, Value> values_;
  std::unordered_map<const UOp*, Pointer> pointers_;
  std::unordered_map<const UOp*, Access> accesses_;
};

}  // namespace

bool index_fits_32_bits(const LinearProgram& program) {
  // A margin below 2^31: the launch grid rounds axis 0 up to whole blocks, and those extra threads'
  // indices must not wrap to negative ones that would pass the `ridx0 < end` guard.
  constexpr int64_t kLimit = (int64_t{1} << 31) - (int64_t{1} << 16);
  for (const UOpPtr& node : program.ops)
    if (node->dtype().is_index() && (node->vmin() < -kLimit || node->vmax() > kLimit)) return false;
  return true;
}

RenderedKernel render_c(const LinearProgram& program, const CDialect& dialect, const CDeviceFeatures& features) {
  if (program.name.empty()) throw_internal_error(dialect.name + " renderer: a kernel needs a name");
  if (!index_fits_32_bits(program)) return CRenderer(program, dialect, features).run();
  // GPUs do 64-bit integer division, remainder and multiplication in several instructions each,
  // and the launch grid's index math is full of them.
  CDialect narrowed = dialect;
  narrowed.scalar_type = [wide = dialect.scalar_type](ScalarType scalar) {
    return wide(scalar == ScalarType::Index ? ScalarType::Int32 : scalar);
  };
  return CRenderer(program, narrowed, features).run();
}

}  // namespace kiln
