// Proves every rule of every table in algebraic_rule_tables() with Z3 (issue 6): each rule must be
// proven for every dtype it admits or be listed as not translatable with a reason. Prints a summary
// per table and the wall time; a failing rule is named with its counter-example.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "passes/symbolic.h"
#include "support/error.h"
#include "z3/rule_verifier.h"

namespace kiln::z3check {
namespace {

unsigned worker_threads() {
  // Two by default: the suite runs on a small shared machine. KILN_Z3_THREADS overrides.
  if (const char* text = std::getenv("KILN_Z3_THREADS")) return static_cast<unsigned>(std::max(1, std::atoi(text)));
  return 2;
}

// KILN_Z3_RULE=text verifies only the rules whose doc contains `text` (for working on one rule).
PatternMatcher selected_rules(const PatternMatcher& table) {
  const char* filter = std::getenv("KILN_Z3_RULE");
  if (filter == nullptr) return table;
  std::vector<Rule> rules;
  for (const Rule& rule : table.rules())
    if (rule.doc.find(filter) != std::string::npos) rules.push_back(rule);
  return PatternMatcher(table.name(), std::move(rules));
}

TEST_CASE("every algebraic rule is proven by Z3 or listed as not translatable") {
  auto start = std::chrono::steady_clock::now();
  std::vector<RuleReport> reports;
  size_t rule_count = 0;
  for (const PatternMatcher* table : algebraic_rule_tables()) {
    PatternMatcher rules = selected_rules(*table);
    rule_count += rules.rules().size();
    std::vector<RuleReport> table_reports = verify_table(rules, VerifierOptions{}, worker_threads());
    reports.insert(reports.end(), table_reports.begin(), table_reports.end());
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("Z3 rule verification\n", summarize(reports), "wall time: ", wall, " s");

  REQUIRE(reports.size() == rule_count);
  for (const RuleReport& report : reports) {
    INFO(report.describe());
    CHECK(report.verdict != RuleReport::Verdict::Failed);
    // A rule is never set aside without saying why.
    if (report.verdict == RuleReport::Verdict::NotTranslatable) CHECK(!report.reason.empty());
    if (report.verdict == RuleReport::Verdict::Proven) CHECK(!report.proven_labels().empty());
  }
  // Proven rules with instances left out (index bitwise ops, declined or vacuous instances) or
  // proven only by a fallback strategy; dtypes the IR spec or a literal rules out are counted.
  std::string details;
  for (const RuleReport& report : reports) {
    bool notable = false;
    for (const InstanceReport& instance : report.instances)
      notable = notable || instance.outcome != InstanceReport::Outcome::Proven ||
                (!instance.method.empty() && instance.method != "Euclidean div/mod");
    if (report.verdict == RuleReport::Verdict::Proven && notable)
      details += str_cat(report.describe(), "\n    (", report.skipped_dtypes.size(),
                         " dtype instances ruled out by the IR spec or the pattern's literals)\n");
  }
  MESSAGE("proven rules with instances left out or proven by a fallback strategy:\n", details);

  // The slowest instances: where a slower machine would first run into the per-query time-outs.
  std::vector<std::pair<double, std::string>> timings;
  for (const RuleReport& report : reports)
    for (const InstanceReport& instance : report.instances)
      timings.emplace_back(instance.seconds, str_cat(report.table, " \"", report.doc, "\" ", instance.label));
  std::sort(timings.rbegin(), timings.rend());
  std::string slowest;
  for (size_t i = 0; i < std::min<size_t>(8, timings.size()); ++i)
    slowest += str_cat("  ", timings[i].first, " s  ", timings[i].second, "\n");
  MESSAGE("slowest instances:\n", slowest);
}

}  // namespace
}  // namespace kiln::z3check
