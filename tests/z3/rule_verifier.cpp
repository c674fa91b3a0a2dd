// The Z3 rule verifier; see rule_verifier.h. Per instance of a pattern: call the rewrite, translate
// both sides, and ask Z3 whether assumptions ∧ guard ∧ ¬(RHS defined ∧ LHS = RHS) has a model;
// index division, nonlinear for Z3, gets several encodings, proven quotient lemmas and sign splits.
#include "z3/rule_verifier.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "ir/printer.h"
#include "ir/substitute.h"
#include "support/error.h"
#include "z3/quotient_lemmas.h"
#include "z3/rule_instances.h"
#include "z3/z3_semantics.h"

namespace kiln::z3check {
namespace {

using Outcome = InstanceReport::Outcome;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Z3's own timeout is not honoured by every tactic (nonlinear arithmetic can overrun it), so a
// watchdog interrupts the context as well. An interrupted context is not used again.
// KILN_Z3_TIMEOUT_SCALE (default 1) multiplies every solver timeout: the timeouts are wall-clock
// time, and on a loaded 2-core machine (a sanitizer build beside the suite) proofs that take 2 s
// alone gave up at 3. A larger scale costs time only for queries that would otherwise give up.
unsigned scaled_timeout(unsigned timeout_ms) {
  static const double scale = [] {
    const char* text = std::getenv("KILN_Z3_TIMEOUT_SCALE");
    double value = text != nullptr ? std::strtod(text, nullptr) : 1.0;
    return value >= 1.0 ? value : 1.0;
  }();
  return static_cast<unsigned>(timeout_ms * scale);
}

z3::check_result check_with_deadline(z3::context& context, z3::solver& solver, unsigned timeout_ms,
                                     std::string& reason) {
  timeout_ms = scaled_timeout(timeout_ms);
  z3::params params(context);
  params.set("timeout", timeout_ms);
  solver.set(params);
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (!finished.wait_for(lock, std::chrono::milliseconds(timeout_ms + 500), [&] { return done; }))
      context.interrupt();
  });
  z3::check_result result = z3::unknown;
  try {
    result = solver.check();
    if (result == z3::unknown) reason = solver.reason_unknown();
  } catch (const z3::exception& error) {
    reason = error.msg();
  }
  {
    std::lock_guard lock(mutex);
    done = true;
  }
  finished.notify_all();
  watchdog.join();
  if (result == z3::unknown && reason.empty()) reason = "unknown";
  return result;
}

bool guard_divides(const GuardTerm::Node& node) {
  if (node.kind == GuardTerm::Kind::Binary &&
      (node.op == GuardTerm::Operator::Div || node.op == GuardTerm::Operator::Mod))
    return true;
  return (node.left && guard_divides(*node.left)) || (node.right && guard_divides(*node.right));
}

// Whether the instance divides on index values, where Z3 needs nonlinear integer arithmetic.
bool divides_integers(const UOpPtr& lhs, const UOpPtr& rhs, const Guard& guard) {
  for (const UOpPtr& root : {lhs, rhs})
    for (const UOp* node : toposort(root))
      if ((node->op() == Ops::IDIV || node->op() == Ops::MOD) && node->src(0)->dtype().is_index()) return true;
  return guard.condition() && guard_divides(guard.condition()->node());
}

struct Attempt {
  Attempt(Outcome outcome = Outcome::Unknown, std::string detail = {}) : outcome(outcome), detail(std::move(detail)) {}
  Outcome outcome;
  std::string detail;
  std::vector<std::pair<std::string, std::string>> assignment;
};

// How one attempt at an instance is made; integer division may need several (see the plan below).
struct Strategy {
  IntDivision division = IntDivision::Native;
  bool split_by_sign = false;   // one query per sign (<0, =0, >0) of each index input
  bool quotient_lemmas = false;  // first prove lemmas relating quotients (quotient_lemmas.h)
};

std::string describe(const Strategy& strategy) {
  std::string text;
  switch (strategy.division) {
    case IntDivision::Native: text = "Euclidean div/mod"; break;
    case IntDivision::AbsoluteDivisor: text = "div/mod on |divisor|"; break;
    case IntDivision::QuotientRemainder: text = "quotient/remainder symbols"; break;
  }
  if (strategy.quotient_lemmas) text += " with quotient lemmas";
  if (strategy.split_by_sign) text += ", split by signs";
  return text;
}

// One strategy for one instance.
Attempt attempt(const Rule& rule, const PatternInstance& instance, const UOpPtr& rhs, const Strategy& strategy,
                const VerifierOptions& options) {
  bool split_by_sign = strategy.split_by_sign;
  z3::context context;
  Z3Semantics semantics(context, strategy.division);
  std::vector<z3::expr> lhs_defined, rhs_defined;
  z3::expr lhs_value = semantics.translate(instance.root.get(), lhs_defined);
  z3::expr rhs_value = semantics.translate(rhs.get(), rhs_defined);
  GuardLeaves leaves;
  std::vector<std::pair<std::string, std::pair<z3::expr, DType>>> shown;
  std::vector<z3::expr> index_leaves;
  for (const auto& [name, node] : instance.bindings) {
    std::vector<z3::expr> ignored;  // bindings are LHS nodes: their definedness is already assumed
    z3::expr value = semantics.translate(node.get(), ignored);
    auto entry = std::make_pair(value, node->dtype());
    (instance.is_constant(name) ? leaves.constants : leaves.nodes).emplace(std::string(name), entry);
    shown.emplace_back(std::string(name), entry);
    if (node->op() == Ops::DEFINE_VAR && node->dtype().is_index()) index_leaves.push_back(value);
  }
  TranslatedGuard guard = translate_guard(semantics, rule.guard, leaves);

  // Every check gets a fresh solver: after a first check() Z3 switches a solver to its incremental
  // core, which is much slower on bit-vector division than the one-shot bit-blasting tactic.
  std::vector<z3::expr> assumptions = lhs_defined;
  assumptions.insert(assumptions.end(), guard.assumptions.begin(), guard.assumptions.end());
  assumptions.push_back(guard.holds);
  const std::vector<z3::expr>& definitions = semantics.definitions();
  assumptions.insert(assumptions.end(), definitions.begin(), definitions.end());
  auto make_solver = [&] {
    z3::solver solver(context);
    for (const z3::expr& fact : assumptions) solver.add(fact);
    return solver;
  };

  // Assumptions that no input satisfies (a guard that never holds, a LHS that always divides by
  // zero) would make every goal "proven"; such instances are skipped, never counted as proofs.
  {
    std::string reason;
    z3::solver solver = make_solver();
    if (check_with_deadline(context, solver, options.query_timeout_ms, reason) == z3::unsat)
      return {Outcome::Skipped,
              rule.guard.always() ? "the LHS is never defined" : "the guard never holds for this dtype"};
  }
  z3::expr rhs_ok = context.bool_val(true);
  for (const z3::expr& fact : rhs_defined) rhs_ok = rhs_ok && fact;
  z3::expr refutation = !(rhs_ok && lhs_value == rhs_value);

  // Lemmas are facts the solver proves first under the same assumptions; each proven one becomes
  // an assumption of the next proofs (a cut), so none is taken on trust.
  size_t lemmas = 0;
  if (strategy.quotient_lemmas) {
    const std::vector<IntegerDivision>& divisions = semantics.divisions();
    auto proves = [&](const z3::expr& fact) {
      z3::solver solver = make_solver();
      solver.add(!fact);
      std::string reason;
      return check_with_deadline(context, solver, options.split_case_timeout_ms, reason) == z3::unsat;
    };
    std::vector<bool> exact(divisions.size(), false);
    for (size_t i = 0; i < divisions.size(); ++i)
      if (divisions[i].dividend.is_const()) exact[i] = proves(divisions[i].remainder == 0);
    for (const z3::expr& candidate : quotient_lemma_candidates(divisions, exact))
      if (proves(candidate)) {
        assumptions.push_back(candidate);
        ++lemmas;
      }
  }

  auto counter_example = [&](const z3::model& model) {
    Attempt found(Outcome::CounterExample, str_cat("[", instance.label, "] "));
    for (const auto& [name, entry] : shown)
      found.assignment.emplace_back(name, semantics.render(model, entry.first, entry.second));
    for (const auto& [name, symbol] : guard.range_symbols)
      found.assignment.emplace_back(name, render_integer(model, symbol, guard.signed_bitvector));
    found.assignment.emplace_back("LHS", semantics.render(model, lhs_value, instance.root->dtype()));
    bool rhs_defined = model.eval(rhs_ok, true).is_true();
    if (rhs_defined) found.assignment.emplace_back("RHS", semantics.render(model, rhs_value, rhs->dtype()));
    for (size_t i = 0; i < found.assignment.size(); ++i) {
      const auto& [name, value] = found.assignment[i];
      bool constant = i < shown.size() && instance.is_constant(name);
      found.detail += str_cat(i ? ", " : "", name, constant ? " (constant)" : "", " = ", value);
    }
    if (!rhs_defined) found.detail += ", RHS undefined (division by zero or shift out of range)";
    return found;
  };

  size_t cases = 1;
  if (split_by_sign)
    for (size_t i = 0; i < index_leaves.size(); ++i) cases *= 3;
  for (size_t number = 0; number < cases; ++number) {
    z3::solver solver = make_solver();
    solver.add(refutation);
    std::string case_text;
    size_t code = number;
    for (size_t i = 0; split_by_sign && i < index_leaves.size(); ++i, code /= 3) {
      const z3::expr& leaf = index_leaves[i];
      solver.add(code % 3 == 0 ? leaf < 0 : code % 3 == 1 ? leaf == 0 : leaf > 0);
      case_text += str_cat(i ? ", " : "", leaf.to_string(), code % 3 == 0 ? " < 0" : code % 3 == 1 ? " = 0" : " > 0");
    }
    std::string reason;
    unsigned timeout = split_by_sign ? options.split_case_timeout_ms : options.query_timeout_ms;
    z3::check_result result = check_with_deadline(context, solver, timeout, reason);
    if (result == z3::sat) return counter_example(solver.get_model());
    if (result == z3::unknown)
      return {Outcome::Unknown, str_cat("solver gave up (", reason, ")", split_by_sign ? " in case " + case_text : "")};
  }
  return {Outcome::Proven, lemmas ? str_cat(lemmas, " quotient lemma(s) proven first") : ""};
}

// Notes constants the RHS builds outside its dtype's range (e.g. -1 as a u8): the generated code
// sees their bit pattern, which is what the proof uses, but the constant folder reads the raw value.
void note_unwrapped_constants(const UOpPtr& rhs, std::set<std::string>& notes) {
  for (const UOp* node : toposort(rhs)) {
    DType dtype = node->dtype();
    if (node->op() != Ops::CONST || !dtype.is_int() || dtype.is_index() || dtype.count() != 1) continue;
    int128 value = node->const_int();
    if (value < min_value(dtype) || value > max_value(dtype))
      notes.insert(str_cat("the RHS builds the ", dtype.name(), " constant ", to_string(value),
                           ", outside the type's range"));
  }
}

// The rewrite's result with the narrow-range leaves mapped back to the instance's leaves, so that
// it can be compared with the result on `instance`.
UOpPtr rewrite_with_other_ranges(const Rule& rule, const PatternInstance& instance, const PatternInstance& narrow) {
  Match match;
  narrow.fill(match);
  UOpPtr rhs = rule.rewrite(match);
  if (!rhs) return rhs;
  std::map<std::pair<std::string, std::string>, UOpPtr> leaves;
  for (const UOp* node : toposort(instance.root))
    if (node->op() == Ops::DEFINE_VAR) leaves[{node->arg_variable().name, node->dtype().name()}] = node->self();
  std::unordered_map<const UOp*, UOpPtr> back;
  for (const UOp* node : toposort(narrow.root))
    if (node->op() == Ops::DEFINE_VAR) back[node] = leaves.at({node->arg_variable().name, node->dtype().name()});
  return substitute(rhs, back);
}

InstanceReport prove_instance(const Rule& rule, const PatternInstance& instance, const PatternInstance* narrow,
                              const VerifierOptions& options, std::set<std::string>& notes) {
  Clock::time_point start = Clock::now();
  InstanceReport report;
  report.label = instance.label;
  auto finish = [&](Outcome outcome, std::string detail) {
    report.outcome = outcome;
    report.detail = std::move(detail);
    report.seconds = seconds_since(start);
    return report;
  };
  Match match;
  instance.fill(match);
  UOpPtr rhs;
  try {
    rhs = rule.rewrite(match);
  } catch (const std::exception& error) {
    return finish(Outcome::Invalid, str_cat("the rewrite threw: ", error.what()));
  }
  // The proof below covers the rewrite only if it builds its result from the bindings alone: the
  // same instance with other input ranges must give the same result (else the rule is opaque).
  if (narrow != nullptr) {
    UOpPtr other;
    try {
      other = rewrite_with_other_ranges(rule, instance, *narrow);
    } catch (const std::exception& error) {
      return finish(Outcome::Invalid, str_cat("the rewrite threw: ", error.what()));
    }
    if (other != rhs)
      return finish(Outcome::NotTranslatable,
                    "the rewrite's result depends on the value ranges of its inputs (the rule should be opaque)");
  }
  if (!rhs) return finish(Outcome::Skipped, "the rewrite declined this instance");
  if (rhs == instance.root) return finish(Outcome::Skipped, "the rewrite returned the matched node");
  if (rhs->dtype() != instance.root->dtype())
    return finish(Outcome::Invalid, str_cat("the RHS has dtype ", rhs->dtype().name(), ", the LHS ",
                                            instance.root->dtype().name(), ": ", render_expr(rhs)));
  if (std::string invalid = invalid_node(rhs); !invalid.empty())
    return finish(Outcome::Invalid, str_cat("the RHS is not valid IR at ", invalid, ": ", render_expr(rhs)));
  note_unwrapped_constants(rhs, notes);

  // Bit-vector and float queries are decided by one call. Integer division is nonlinear for Z3, so
  // those instances try exact encodings that suit its heuristics differently, then quotient
  // lemmas, then a split by signs; any definite answer (proof or counter-example) is final.
  std::vector<Strategy> plan = {{}};
  if (divides_integers(instance.root, rhs, rule.guard)) {
    plan = {{IntDivision::QuotientRemainder, false, true},
            {IntDivision::Native, false, false},
            {IntDivision::AbsoluteDivisor, false, false},
            {IntDivision::Native, true, false},
            {IntDivision::QuotientRemainder, true, false}};
  }
  std::string attempts;
  VerifierOptions first_try = options;
  if (plan.size() > 1) first_try.query_timeout_ms = std::min(options.query_timeout_ms, 6000u);
  for (const Strategy& strategy : plan) {
    Attempt result;
    try {
      result = attempt(rule, instance, rhs, strategy, plan.size() > 1 ? first_try : options);
    } catch (const Untranslatable& error) {
      return finish(Outcome::NotTranslatable, error.reason);
    } catch (const z3::exception& error) {
      result = {Outcome::Unknown, str_cat("Z3 error: ", error.msg())};
    }
    std::string method = describe(strategy);
    if (result.outcome != Outcome::Unknown) {
      bool has_note = result.outcome == Outcome::Proven && !result.detail.empty();
      if (plan.size() > 1) report.method = method + (has_note ? ", " + result.detail : "");
      report.assignment = std::move(result.assignment);
      return finish(result.outcome, result.outcome == Outcome::Proven ? "" : result.detail);
    }
    attempts += str_cat(attempts.empty() ? "" : "; ", method, ": ", result.detail);
  }
  return finish(Outcome::Unknown, attempts);
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : separator) + part;
  return text;
}

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::Proven: return "proven";
    case Outcome::CounterExample: return "COUNTER-EXAMPLE";
    case Outcome::Unknown: return "NOT PROVEN (solver)";
    case Outcome::Invalid: return "INVALID REWRITE";
    case Outcome::NotTranslatable: return "not translatable";
    case Outcome::Skipped: return "skipped";
  }
  return "";
}

}  // namespace

std::vector<std::string> RuleReport::proven_labels() const {
  std::vector<std::string> labels;
  for (const InstanceReport& instance : instances)
    if (instance.outcome == InstanceReport::Outcome::Proven) labels.push_back(instance.label);
  return labels;
}

std::string RuleReport::describe() const {
  std::string text =
      str_cat("[", table, "] \"", doc, "\" (", location, ")", guard.empty() ? "" : " when " + guard, ": ");
  switch (verdict) {
    case Verdict::Proven: text += "proven for " + join(proven_labels(), ", "); break;
    case Verdict::NotTranslatable: text += "not translatable: " + reason; break;
    case Verdict::Failed: text += "FAILED: " + reason; break;
  }
  for (const InstanceReport& instance : instances) {
    if (instance.outcome == InstanceReport::Outcome::Proven) {
      if (!instance.method.empty() && instance.method != "Euclidean div/mod")
        text += str_cat("\n    ", instance.label, ": proven with ", instance.method);
      continue;
    }
    text += str_cat("\n    ", instance.label, ": ", outcome_name(instance.outcome), instance.detail.empty() ? "" : ": ",
                    instance.detail);
  }
  return text;
}

RuleReport verify_rule(const Rule& rule, const std::string& table, const VerifierOptions& options) {
  Clock::time_point start = Clock::now();
  RuleReport report;
  report.table = table;
  report.doc = rule.doc;
  report.location = rule_location(rule);
  report.guard = rule.guard.always() ? "" : rule.guard.text();
  auto finish = [&](RuleReport::Verdict verdict, std::string reason) {
    report.verdict = verdict;
    report.reason = std::move(reason);
    report.seconds = seconds_since(start);
    return report;
  };
  if (!rule.opaque_reason.empty())
    return finish(RuleReport::Verdict::NotTranslatable, "opaque rule: " + rule.opaque_reason);
  InstanceSet set = instantiate(rule.pattern);
  report.skipped_dtypes = set.skipped;
  if (!set.untranslatable.empty()) return finish(RuleReport::Verdict::NotTranslatable, set.untranslatable);

  InstanceSet narrow = instantiate(rule.pattern, true);
  std::set<std::string> notes;
  for (size_t i = 0; i < set.instances.size(); ++i) {
    const PatternInstance* other = i < narrow.instances.size() && narrow.instances[i].label == set.instances[i].label
                                       ? &narrow.instances[i] : nullptr;
    report.instances.push_back(prove_instance(rule, set.instances[i], other, options, notes));
  }

  std::vector<std::string> failed, untranslatable, skipped;
  size_t proven = 0;
  for (const InstanceReport& instance : report.instances) {
    if (instance.failed()) failed.push_back(instance.label);
    if (instance.outcome == Outcome::Proven) ++proven;
    if (instance.outcome == Outcome::NotTranslatable) untranslatable.push_back(instance.label + ": " + instance.detail);
    if (instance.outcome == Outcome::Skipped) skipped.push_back(instance.label + ": " + instance.detail);
  }
  for (const std::string& note : notes) report.skipped_dtypes.push_back("note: " + note);
  if (!failed.empty()) return finish(RuleReport::Verdict::Failed, "not proven for " + join(failed, ", "));
  if (proven > 0) return finish(RuleReport::Verdict::Proven, "");
  if (!untranslatable.empty()) return finish(RuleReport::Verdict::NotTranslatable, join(untranslatable, "; "));
  std::vector<std::string> why = skipped;
  why.insert(why.end(), set.skipped.begin(), set.skipped.end());
  return finish(RuleReport::Verdict::Failed, "no instance could be checked (" + join(why, "; ") + ")");
}

std::vector<RuleReport> verify_table(const PatternMatcher& table, const VerifierOptions& options, unsigned threads) {
  const std::vector<Rule>& rules = table.rules();
  std::vector<RuleReport> reports(rules.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t index = next++; index < rules.size(); index = next++)
      reports[index] = verify_rule(rules[index], table.name(), options);
  };
  std::vector<std::thread> workers;
  for (unsigned i = 1; i < std::max(threads, 1u); ++i) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  return reports;
}

std::string summarize(const std::vector<RuleReport>& reports) {
  struct Counts {
    size_t rules = 0, proven = 0, untranslatable = 0, failed = 0;
    double seconds = 0.0;
  };
  std::vector<std::string> order;
  std::map<std::string, Counts> counts;
  std::vector<std::string> reasons, failures;
  auto line_for = [](const RuleReport& report) {
    return str_cat("  ", report.table, " \"", report.doc, "\" (", report.location, "): ", report.reason);
  };
  for (const RuleReport& report : reports) {
    if (counts.count(report.table) == 0) order.push_back(report.table);
    Counts& entry = counts[report.table];
    ++entry.rules;
    entry.seconds += report.seconds;
    switch (report.verdict) {
      case RuleReport::Verdict::Proven: ++entry.proven; break;
      case RuleReport::Verdict::NotTranslatable:
        ++entry.untranslatable;
        reasons.push_back(line_for(report));
        break;
      case RuleReport::Verdict::Failed:
        ++entry.failed;
        failures.push_back(line_for(report));
        break;
    }
  }
  char line[160];
  std::snprintf(line, sizeof line, "%-18s %6s %7s %16s %7s %9s\n", "table", "rules", "proven", "not translatable",
                "failed", "seconds");
  std::string text = line;
  Counts total;
  for (const std::string& name : order) {
    const Counts& entry = counts[name];
    std::snprintf(line, sizeof line, "%-18s %6zu %7zu %16zu %7zu %9.1f\n", name.c_str(), entry.rules, entry.proven,
                  entry.untranslatable, entry.failed, entry.seconds);
    text += line;
    total.rules += entry.rules;
    total.proven += entry.proven;
    total.untranslatable += entry.untranslatable;
    total.failed += entry.failed;
    total.seconds += entry.seconds;
  }
  std::snprintf(line, sizeof line, "%-18s %6zu %7zu %16zu %7zu %9.1f\n", "total", total.rules, total.proven,
                total.untranslatable, total.failed, total.seconds);
  text += line;
  if (!reasons.empty()) text += "not translatable:\n" + join(reasons, "\n") + "\n";
  if (!failures.empty()) text += "failed:\n" + join(failures, "\n") + "\n";
  return text;
}

}  // namespace kiln::z3check
