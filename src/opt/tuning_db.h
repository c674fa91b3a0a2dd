// The tuning database: the Opt list chosen for a kernel by `kiln tune` (a timed search), looked up
// by `kiln compile --tuning` in place of the heuristics. Compiles only read it, so one model and one
// database always give the same plan. The text format, the key and the rules for changing either
// are in docs/tuning.md.
//
// Key: the kernel's unoptimised AST (print_graph text, compared in full; a SHA-256 prefix of it is
// stored for quick checks and to catch hand edits), the code-generation target (cpu_target_id():
// triple, CPU and features, so KILN_CPU_TARGET=avx2 is another target) and kOptSemanticsVersion.
#pragma once

#include <cstdint>
#include <compare>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "opt/opt.h"
#include "support/error.h"

namespace kiln {

struct TuningKey {
  std::string hash;      // 32 hex digits: the first 128 bits of SHA-256 over the fields below
  std::string ast_text;  // print_graph of the unoptimised kernel AST, without a trailing newline
  std::string target;    // cpu_target_id()
  int opt_version = kOptSemanticsVersion;
  // Sorted by hash first, so the file's order does not depend on how kernels are named or printed.
  friend auto operator<=>(const TuningKey& a, const TuningKey& b) {
    return std::tie(a.hash, a.target, a.opt_version, a.ast_text) <=>
           std::tie(b.hash, b.target, b.opt_version, b.ast_text);
  }
  friend bool operator==(const TuningKey&, const TuningKey&) = default;
};

// The hash field for these fields.
std::string tuning_key_hash(const std::string& ast_text, const std::string& target, int opt_version);

// The key of `unoptimised_ast` (a kernel AST before any Opt) on `target`.
TuningKey tuning_key(const UOpPtr& unoptimised_ast, const std::string& target);

struct TuningEntry {
  std::vector<Opt> opts;      // may be empty: the search found the unoptimised kernel best
  double time_us = 0;         // the chosen Opts' measured time, for information only
  double heuristic_us = 0;    // the heuristics' measured time in the same session, for information
  int line = 0;               // where the entry starts in the file it was loaded from (0: not loaded)
};

// A user error in a database file or in applying one of its entries. what() starts with the file
// name and, for a parse error, the line: "tune.db:12: unknown Opt 'UPCASTX'".
class TuningDbError : public UserError {
 public:
  using UserError::UserError;
};

class TuningDb {
 public:
  TuningDb() = default;

  // Parses a database file. Throws TuningDbError naming the file (and line) when it cannot be read
  // or is malformed, truncated or edited so that a hash no longer matches.
  static TuningDb load_file(const std::string& path);
  // Parses `text` as the contents of file `name` (used in messages).
  static TuningDb parse(const std::string& text, const std::string& name);
  // load_file when `path` exists, else an empty database remembering `path` (for `kiln tune`).
  static TuningDb load_or_empty(const std::string& path);

  // The text of the database: deterministic (entries sorted by key, fixed number formats).
  std::string text() const;
  // Writes text() to `path` through a temporary file in the same directory and a rename, so a
  // reader (or an interrupted writer) never sees half a database. Throws TuningDbError.
  void save_file(const std::string& path) const;

  const TuningEntry* find(const TuningKey& key) const;
  void set(const TuningKey& key, TuningEntry entry);
  size_t size() const { return entries_.size(); }
  // The file this database was loaded from ("" when built in memory): error messages name it.
  const std::string& source() const { return source_; }

 private:
  std::map<TuningKey, TuningEntry> entries_;
  std::string source_;
};

}  // namespace kiln
