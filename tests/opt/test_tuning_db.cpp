// The tuning database and its use: the text round-trips and is the same whatever the order entries
// were added in; a bad file gets a message with its name and line; an entry overrides the
// heuristics for its kernel and no other, and one that does not fit its kernel is an error naming
// it. Then the beam search on one small kernel: it returns a list that applies (no timed checks).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "codegen/cpu_codegen.h"
#include "opt/beam_search.h"
#include "opt/heuristics.h"
#include "opt/optimize_schedule.h"
#include "opt/tuning_db.h"
#include "schedule/schedule.h"
#include "tensor/tensor_internal.h"

using namespace kiln;

namespace {

// A matmul (the heuristics tile it) and a row sum: two different kernels.
Schedule two_kernel_schedule() {
  std::vector<float> values(32 * 32, 1.0f);
  Tensor a = Tensor::from_vector<float>(values, {32, 32});
  Tensor b = Tensor::from_vector<float>(values, {32, 32});
  Schedule schedule = create_schedule({a.matmul(b).data().node, a.sum({1}).data().node});
  REQUIRE(schedule.kernels.size() == 2);
  return schedule;
}

TuningKey key_of(const std::string& text, const std::string& target = "test-target") {
  TuningKey key;
  key.ast_text = text;
  key.target = target;
  key.hash = tuning_key_hash(key.ast_text, key.target, key.opt_version);
  return key;
}

TuningEntry entry_with(std::vector<Opt> opts, double time_us) {
  TuningEntry entry;
  entry.opts = std::move(opts);
  entry.time_us = time_us;
  entry.heuristic_us = time_us * 2;
  return entry;
}

// The error message parsing `text` gives ("" when it parses).
std::string parse_error(const std::string& text) {
  try {
    TuningDb::parse(text, "bad.db");
  } catch (const TuningDbError& error) {
    return error.what();
  }
  return "";
}

// A valid one-entry file, to damage.
std::string one_entry_text() {
  TuningDb db;
  db.set(key_of("%0 = CONST index {4}\n%1 = RANGE index (%0) {0}"), entry_with({{OptOp::Upcast, 0, 4}}, 1.5));
  return db.text();
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("the text round-trips and does not depend on the order of insertion") {
  TuningKey first = key_of("%0 = CONST index {8}\n%1 = RANGE index (%0) {0}");
  TuningKey second = key_of("%0 = CONST index {16}\n%1 = RANGE index (%0) {0}", "other-target");
  TuningEntry one = entry_with({{OptOp::Upcast, 0, 4}, {OptOp::Unroll, 1000, 2}, {OptOp::Swap, 0, 1}}, 12.25);
  TuningEntry two = entry_with({}, 3.0);
  TuningDb forward, backward;
  forward.set(first, one);
  forward.set(second, two);
  backward.set(second, two);
  backward.set(first, one);
  CHECK(forward.text() == backward.text());

  TuningDb loaded = TuningDb::parse(forward.text(), "round.db");
  CHECK(loaded.size() == 2);
  CHECK(loaded.text() == forward.text());
  REQUIRE(loaded.find(first) != nullptr);
  CHECK(loaded.find(first)->opts == one.opts);
  CHECK(loaded.find(first)->time_us == doctest::Approx(12.25));
  CHECK(loaded.find(second)->opts.empty());
  CHECK(loaded.find(key_of("%0 = CONST index {8}\n%1 = RANGE index (%0) {0}", "a-third-target")) == nullptr);

  // Through a file: written whole (no temporary left behind) and read back the same.
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln-test-tuning-db";
  std::filesystem::create_directories(dir);
  std::string path = (dir / "round.db").string();
  forward.save_file(path);
  CHECK(TuningDb::load_file(path).text() == forward.text());
  int files = 0;
  for (const auto& item : std::filesystem::directory_iterator(dir)) files += item.is_regular_file() ? 1 : 0;
  CHECK(files == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("every kind of Opt is listed once, by its name, and round-trips through the database") {
  // opt_kinds() is the one place an Opt is named (opt.h): Opt::text and the database read it.
  std::vector<Opt> every;
  for (const OptKind& kind : opt_kinds()) {
    CHECK(&opt_kind(kind.op) == &kind);
    REQUIRE(opt_kind_named(kind.name) != nullptr);
    CHECK(opt_kind_named(kind.name)->op == kind.op);
    CHECK(Opt{kind.op, 0, 2}.text().starts_with(std::string(kind.name) + "(axis 0"));
    every.push_back(kind.axes == OptAxes::TwoOutputLoops ? Opt{kind.op, 0, 1} : Opt{kind.op, 0, 2});
  }
  CHECK(opt_kinds().size() == 7);
  CHECK(opt_kind_named("UPCASTX") == nullptr);
  TuningKey key = key_of("%0 = CONST index {8}\n%1 = RANGE index (%0) {0}");
  TuningDb db;
  db.set(key, entry_with(every, 1.0));
  TuningDb loaded = TuningDb::parse(db.text(), "kinds.db");
  REQUIRE(loaded.find(key) != nullptr);
  CHECK(loaded.find(key)->opts == every);
}

TEST_CASE("the key holds the whole kernel text, the target and the opt-semantics version") {
  Schedule schedule = two_kernel_schedule();
  TuningKey key = tuning_key(schedule.kernels[0].ast, "cpu-a");
  CHECK(key.opt_version == kOptSemanticsVersion);
  CHECK(key.hash.size() == 32);
  CHECK(key.ast_text.find("DEFINE_GLOBAL") != std::string::npos);
  CHECK(key == tuning_key(schedule.kernels[0].ast, "cpu-a"));
  CHECK(!(key == tuning_key(schedule.kernels[0].ast, "cpu-b")));
  CHECK(!(key == tuning_key(schedule.kernels[1].ast, "cpu-a")));
  CHECK(key.hash != tuning_key_hash(key.ast_text, key.target, key.opt_version + 1));
}

TEST_CASE("a damaged database gets a message naming the file and the line") {
  std::string good = one_entry_text();
  CHECK(parse_error(good) == "");
  // Line numbers: 1 comment, 2 header, 3 blank, 4 entry, 5 target, 6 opt-version, 7 kernel-lines,
  // 8-9 kernel, 10 opt, 11 time-us, 12 end.
  CHECK(parse_error(replace(good, "opt UPCAST", "opt UPCASTX")) ==
        "bad.db:10: unknown Opt 'UPCASTX' (UPCAST, UNROLL, SWAP, MERGE, PADTO, SPLIT or BLOCKS)");
  // UPCAST, PADTO and SPLIT take reduce loops (the checks that need the kernel come at compile
  // time); BLOCKS takes output loops only.
  CHECK(parse_error(replace(good, "opt UPCAST 0 4", "opt UPCAST 1000 4")) == "");
  CHECK(parse_error(replace(good, "opt UPCAST 0 4", "opt PADTO 1000 16")) == "");
  CHECK(parse_error(replace(good, "opt UPCAST 0 4", "opt BLOCKS 1000 4")) ==
        "bad.db:10: bad axis 1000 for BLOCKS (an output loop: 0 to 999)");
  CHECK(parse_error(replace(good, "opt UPCAST 0 4", "opt BLOCKS 0 4")) == "");
  CHECK(parse_error(replace(good, "opt UPCAST 0 4", "opt UNROLL 2001 4")).find("bad.db:10: bad axis 2001 for UNROLL") == 0);
  CHECK(parse_error(replace(good, "opt UPCAST 0 4", "opt SWAP 0 0")).find("bad.db:10: bad other axis 0") == 0);
  CHECK(parse_error(replace(good, "opt UPCAST 0 4", "opt UPCAST x 4")) == "bad.db:10: bad axis 'x' (an integer)");
  CHECK(parse_error(replace(good, "opt UPCAST 0 4", "opt UPCAST 0 1")).find("bad.db:10: bad amount 1") == 0);
  // Cut short: inside the kernel text, before `end`, and in the middle of the last line.
  CHECK(parse_error(good.substr(0, good.find("| %1"))).find("bad.db:8: the file ends inside an entry") == 0);
  CHECK(parse_error(good.substr(0, good.find("end\n"))).find("bad.db:11: the file ends inside an entry") == 0);
  CHECK(parse_error(good.substr(0, good.size() - 2)) == "bad.db:12: the last line has no newline (truncated?)");
  // Edited kernel text: the hash no longer matches.
  CHECK(parse_error(replace(good, "CONST index {4}", "CONST index {5}")).find("bad.db:4: the entry's hash") == 0);
  CHECK(parse_error("something else\n").find("bad.db:1: not a kiln tuning database") == 0);
  CHECK(parse_error("kiln-tuning-db 99\n").find("bad.db:1: format version 99 is not supported") == 0);
  CHECK(parse_error("") == "bad.db: empty file: not a kiln tuning database");
  CHECK(parse_error(good + good.substr(good.find("entry"))).find("a second entry for the same key") != std::string::npos);
  try {
    TuningDb::load_file("/nonexistent/kiln.db");
    FAIL("no error");
  } catch (const TuningDbError& error) {
    CHECK(std::string(error.what()).find("cannot read the tuning database '/nonexistent/kiln.db'") == 0);
  }
}

TEST_CASE("an entry overrides the heuristics for its kernel and only that kernel") {
  Schedule plain = two_kernel_schedule();
  const TargetCaps& caps = host_cpu_caps();
  std::vector<Opt> heuristic_sum = hand_coded_opts(plain.kernels[1].ast, caps);
  std::vector<Opt> chosen{{OptOp::Unroll, 0, 2}, {OptOp::Unroll, 1000, 4}};
  REQUIRE(chosen != hand_coded_opts(plain.kernels[0].ast, caps));
  TuningDb db = TuningDb::parse(TuningDb().text(), "override.db");
  db.set(tuning_key(plain.kernels[0].ast, "target-x"), entry_with(chosen, 1));

  OptimizeOptions options;
  options.tuning = &db;
  options.target_id = "target-x";
  Schedule tuned = plain;
  OptimizeReport report = optimize_schedule(tuned, caps, options);
  CHECK(report.kernels == 2);
  CHECK(report.from_tuning == 1);
  CHECK(tuned.kernels[0].opts == chosen);
  CHECK(tuned.kernels[1].opts == heuristic_sum);

  // Another target: the entry is not for it, so the heuristics choose everything.
  options.target_id = "target-y";
  Schedule other = plain;
  CHECK(optimize_schedule(other, caps, options).from_tuning == 0);
  CHECK(other.kernels[0].opts == hand_coded_opts(plain.kernels[0].ast, caps));

  // An entry that does not fit its kernel (no axis 7) is an error that names the kernel.
  db.set(tuning_key(plain.kernels[1].ast, "target-x"), entry_with({{OptOp::Upcast, 7, 4}}, 1));
  options.target_id = "target-x";
  Schedule broken = plain;
  try {
    optimize_schedule(broken, caps, options);
    FAIL("no error");
  } catch (const TuningDbError& error) {
    std::string message = error.what();
    CHECK(message.find("override.db") == 0);
    CHECK(message.find(plain.kernels[1].name()) != std::string::npos);
    CHECK(message.find("UPCAST(axis 7, 4)") != std::string::npos);
  }
}

TEST_CASE("beam search: the actions of a kernel, and a short search returns a list that applies") {
  Schedule schedule = two_kernel_schedule();
  const ScheduledKernel& matmul = schedule.kernels[0];
  const TargetCaps& caps = host_cpu_caps();
  std::vector<Opt> actions = beam_actions(matmul.ast, caps);
  auto has = [&](Opt opt) { return std::find(actions.begin(), actions.end(), opt) != actions.end(); };
  CHECK(has({OptOp::Upcast, 1, 4}));
  CHECK(has({OptOp::Unroll, 0, 8}));
  CHECK(has({OptOp::Unroll, 1000, 2}));
  CHECK(has({OptOp::Swap, 0, 1}));
  CHECK(has({OptOp::Merge, 0, 1}));
  CHECK(!has({OptOp::Upcast, 1000, 4}));  // never a reduce axis as lanes

  KernelTimer timer(1);
  BeamSettings settings;
  settings.beam_width = 2;
  settings.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  BeamResult result = beam_search_kernel(schedule, matmul, caps, timer, settings);
  CHECK(result.timed);
  CHECK(!result.interrupted);
  CHECK(result.candidates >= 1);
  CHECK(result.heuristic == hand_coded_opts(matmul.ast, caps));
  if (!result.improved) CHECK(result.opts == result.heuristic);
  ScheduledKernel applied = matmul;
  CHECK_NOTHROW(apply_kernel_opts(applied, result.opts));

  // A search told to stop returns at once, marked incomplete.
  std::atomic<bool> stop{true};
  settings.stop = &stop;
  CHECK(beam_search_kernel(schedule, matmul, caps, timer, settings).interrupted);
}
