// The Z3 rule verifier: proves that each rewrite rule keeps the value of what it rewrites, for every
// dtype its pattern admits and every input its guard allows (semantics: z3_semantics.h). Rules it
// cannot translate are listed with the reason; solver time-outs count as failures.
#pragma once

#include <string>
#include <vector>

#include "rewrite/pattern_matcher.h"

namespace kiln::z3check {

struct InstanceReport {
  enum class Outcome {
    Proven,           // LHS == RHS for all inputs satisfying the guard
    CounterExample,   // Z3 found inputs where they differ (or the RHS is undefined); `detail` lists them
    Unknown,          // the solver gave up or timed out: a failure
    Invalid,          // the rewrite threw or built an ill-formed or ill-typed RHS: a failure
    NotTranslatable,  // an op or dtype with no Z3 semantics; `detail` says which
    Skipped,          // the rewrite declined, or the guard can never hold for this dtype
  };
  std::string label;  // "i8", "f32 [literal -0.0]"
  Outcome outcome = Outcome::Skipped;
  std::string detail;
  std::string method;  // how a proof or counter-example was obtained (encoding, case split)
  // For a counter-example: each binding's value as text ("x" → "100", "c" → "2"), then the range
  // symbols ("vmin(x)" → "3") and "LHS"/"RHS" (RHS absent when it is undefined).
  std::vector<std::pair<std::string, std::string>> assignment;
  double seconds = 0.0;
  bool failed() const {
    return outcome == Outcome::CounterExample || outcome == Outcome::Unknown || outcome == Outcome::Invalid;
  }
};

struct RuleReport {
  enum class Verdict { Proven, NotTranslatable, Failed };
  std::string table;
  std::string doc;
  std::string location;  // "symbolic.cpp:123"
  std::string guard;
  Verdict verdict = Verdict::Failed;
  std::string reason;  // why not translatable / why failed, in one line
  std::vector<InstanceReport> instances;
  std::vector<std::string> skipped_dtypes;  // instantiations the IR spec or the literal rule out
  double seconds = 0.0;

  std::vector<std::string> proven_labels() const;
  // A multi-line account: verdict, reason, and every failed instance with its counter-example.
  std::string describe() const;
};

struct VerifierOptions {
  unsigned query_timeout_ms = 10000;  // per solver call; reaching it is a failure
  unsigned split_case_timeout_ms = 3000;  // per sign case of a split query, and per quotient lemma
};

// Verifies one rule. The rule's rewrite function is called on symbolic instances of its pattern.
RuleReport verify_rule(const Rule& rule, const std::string& table, const VerifierOptions& options = {});

// Verifies every rule of `table`, using `threads` worker threads (each with its own Z3 contexts).
std::vector<RuleReport> verify_table(const PatternMatcher& table, const VerifierOptions& options = {},
                                     unsigned threads = 1);

// One line per table and verdict counts, then the reasons for rules that are not translatable.
std::string summarize(const std::vector<RuleReport>& reports);

}  // namespace kiln::z3check
