// The tuning database's key, text format and file handling; see tuning_db.h and docs/tuning.md.
#include "opt/tuning_db.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/SHA256.h>

#include "ir/printer.h"
#include "support/atomic_file.h"

namespace kiln {
namespace {

constexpr const char* kMagic = "kiln-tuning-db";
constexpr int kFormatVersion = 1;

// Reads a file line by line, remembering the line number for messages.
class LineReader {
 public:
  LineReader(const std::string& text, std::string name) : text_(text), name_(std::move(name)) {}

  bool next(std::string& line) {
    if (position_ >= text_.size()) return false;
    size_t end = text_.find('\n', position_);
    if (end == std::string::npos) {
      // A last line without a newline: the writer always ends lines, so the file was cut short.
      truncated_tail_ = true;
      end = text_.size();
    }
    line = text_.substr(position_, end - position_);
    position_ = end + 1;
    ++number_;
    return true;
  }
  bool truncated_tail() const { return truncated_tail_; }
  int number() const { return number_; }

  [[noreturn]] void fail(const std::string& why) const { throw TuningDbError(str_cat(name_, ":", number_, ": ", why)); }

 private:
  const std::string& text_;
  std::string name_;
  size_t position_ = 0;
  int number_ = 0;
  bool truncated_tail_ = false;
};

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

int64_t parse_int(const LineReader& reader, const std::string& word, const char* what) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (error != std::errc() || end != word.data() + word.size() || word.empty())
    reader.fail(str_cat("bad ", what, " '", word, "' (an integer)"));
  return value;
}

double parse_double(const LineReader& reader, const std::string& word, const char* what) {
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(word.c_str(), &end);
  if (word.empty() || *end != '\0' || errno != 0 || !(value >= 0)) reader.fail(str_cat("bad ", what, " '", word, "'"));
  return value;
}

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream stream(line);
  std::string word;
  while (stream >> word) words.push_back(word);
  return words;
}

// "opt UPCAST 1 16": checks what can be checked without the kernel (the op, the axis kinds, the
// amount); whether it fits the kernel is checked when a compile applies it.
Opt parse_opt(const LineReader& reader, const std::vector<std::string>& words) {
  if (words.size() != 4) reader.fail("an Opt line is 'opt OP AXIS AMOUNT'");
  Opt opt;
  const std::string& name = words[1];
  const OptKind* kind = opt_kind_named(name);
  if (kind == nullptr) {
    std::string names;  // "UPCAST, …, SPLIT or BLOCKS"
    const std::vector<OptKind>& kinds = opt_kinds();
    for (size_t i = 0; i < kinds.size(); ++i)
      names += str_cat(i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ", kinds[i].name);
    reader.fail(str_cat("unknown Opt '", name, "' (", names, ")"));
  }
  opt.op = kind->op;
  opt.axis = parse_int(reader, words[2], "axis");
  opt.amount = parse_int(reader, words[3], "amount");
  // Opts split output loops (0…) and reduce loops (1000…), never the UPCAST/UNROLL ranges they make.
  bool loop = opt.axis >= 0 && axis_kind(opt.axis) == AxisKind::Loop;
  bool splittable = loop || (opt.axis >= 0 && axis_kind(opt.axis) == AxisKind::Reduce);
  if (kind->axes == OptAxes::TwoOutputLoops) {
    if (!loop) reader.fail(str_cat("bad axis ", opt.axis, " for ", name, " (an output loop: 0 to 999)"));
    if (opt.amount < 0 || axis_kind(opt.amount) != AxisKind::Loop || opt.amount == opt.axis)
      reader.fail(str_cat("bad other axis ", opt.amount, " for ", name, " (another output loop: 0 to 999)"));
  } else {
    // UPCAST, UNROLL, PADTO and SPLIT take reduce loops too (a symbolic reduction in vector blocks).
    bool output_only = kind->axes == OptAxes::OutputOnly;
    if (output_only ? !loop : !splittable)
      reader.fail(str_cat("bad axis ", opt.axis, " for ", name,
                          output_only ? " (an output loop: 0 to 999)"
                                      : " (an output loop, 0 to 999, or a reduce loop, 1000 to 1999)"));
    if (opt.amount < 2) reader.fail(str_cat("bad amount ", opt.amount, " for ", name, " (at least 2)"));
  }
  return opt;
}

std::string format_us(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}

}  // namespace

std::string tuning_key_hash(const std::string& ast_text, const std::string& target, int opt_version) {
  llvm::SHA256 sha;
  // Each field with its length, so that moving bytes from one field to the next changes the hash.
  std::string lengths = str_cat(ast_text.size(), ":", target.size(), ":", opt_version, ":");
  sha.update(llvm::StringRef(lengths));
  sha.update(llvm::StringRef(ast_text));
  sha.update(llvm::StringRef(target));
  std::array<uint8_t, 32> digest = sha.final();
  static const char* hex = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < 16; ++i) {
    text += hex[digest[i] >> 4];
    text += hex[digest[i] & 15];
  }
  return text;
}

TuningKey tuning_key(const UOpPtr& unoptimised_ast, const std::string& target) {
  TuningKey key;
  key.ast_text = print_graph(unoptimised_ast);
  while (!key.ast_text.empty() && key.ast_text.back() == '\n') key.ast_text.pop_back();
  key.target = target;
  key.opt_version = kOptSemanticsVersion;
  key.hash = tuning_key_hash(key.ast_text, key.target, key.opt_version);
  return key;
}

TuningDb TuningDb::parse(const std::string& text, const std::string& name) {
  TuningDb db;
  db.source_ = name;
  LineReader reader(text, name);
  std::string line;
  bool seen_header = false;
  auto next_line = [&](const char* expecting) -> std::string {
    if (!reader.next(line)) reader.fail(str_cat("the file ends inside an entry, before ", expecting, " (truncated?)"));
    if (reader.truncated_tail()) reader.fail("the last line has no newline (truncated?)");
    return line;
  };
  while (reader.next(line)) {
    if (reader.truncated_tail()) reader.fail("the last line has no newline (truncated?)");
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> words = split_words(line);
    if (!seen_header) {
      if (words.size() != 2 || words[0] != kMagic)
        reader.fail(str_cat("not a kiln tuning database (the first line must be '", kMagic, " ", kFormatVersion, "')"));
      if (parse_int(reader, words[1], "format version") != kFormatVersion)
        reader.fail(str_cat("format version ", words[1], " is not supported (this kiln reads ", kFormatVersion, ")"));
      seen_header = true;
      continue;
    }
    if (words.size() != 2 || words[0] != "entry") reader.fail(str_cat("expected 'entry HASH', found '", line, "'"));
    TuningKey key;
    TuningEntry entry;
    entry.line = reader.number();
    key.hash = words[1];

    next_line("'target'");
    if (!starts_with(line, "target ") || line.size() == 7) reader.fail("expected 'target TARGET-ID'");
    key.target = line.substr(7);

    words = split_words(next_line("'opt-version'"));
    if (words.size() != 2 || words[0] != "opt-version") reader.fail("expected 'opt-version N'");
    key.opt_version = static_cast<int>(parse_int(reader, words[1], "opt-version"));

    words = split_words(next_line("'kernel-lines'"));
    if (words.size() != 2 || words[0] != "kernel-lines") reader.fail("expected 'kernel-lines N'");
    int64_t count = parse_int(reader, words[1], "line count");
    if (count < 1) reader.fail("an entry's kernel has at least one line");
    for (int64_t i = 0; i < count; ++i) {
      next_line("the end of the kernel text");
      if (!starts_with(line, "| ")) reader.fail(str_cat("kernel line ", i + 1, " of ", count, " does not start with '| '"));
      if (i > 0) key.ast_text += '\n';
      key.ast_text += line.substr(2);
    }
    if (tuning_key_hash(key.ast_text, key.target, key.opt_version) != key.hash)
      throw TuningDbError(str_cat(name, ":", entry.line, ": the entry's hash ", key.hash,
                                  " does not match its target, opt-version and kernel text (edited or corrupt)"));
    for (;;) {
      words = split_words(next_line("'end'"));
      if (words.empty()) reader.fail("an empty line inside an entry");
      if (words[0] == "opt") {
        entry.opts.push_back(parse_opt(reader, words));
      } else if (words[0] == "time-us") {
        if (words.size() != 3) reader.fail("expected 'time-us CHOSEN HEURISTIC'");
        entry.time_us = parse_double(reader, words[1], "time");
        entry.heuristic_us = parse_double(reader, words[2], "time");
      } else if (words[0] == "end" && words.size() == 1) {
        break;
      } else {
        reader.fail(str_cat("expected 'opt …', 'time-us …' or 'end', found '", line, "'"));
      }
    }
    if (db.entries_.count(key)) throw TuningDbError(str_cat(name, ":", entry.line, ": a second entry for the same key"));
    db.entries_.emplace(std::move(key), std::move(entry));
  }
  if (!seen_header) throw TuningDbError(str_cat(name, ": empty file: not a kiln tuning database"));
  return db;
}

TuningDb TuningDb::load_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TuningDbError(str_cat("cannot read the tuning database '", path, "': ", std::strerror(errno)));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw TuningDbError(str_cat("cannot read the tuning database '", path, "'"));
  return parse(contents.str(), path);
}

TuningDb TuningDb::load_or_empty(const std::string& path) {
  std::error_code error;
  if (std::filesystem::exists(path, error)) return load_file(path);
  TuningDb db;
  db.source_ = path;
  return db;
}

std::string TuningDb::text() const {
  std::string out = str_cat("# kiln tuning database (docs/tuning.md): written by `kiln tune`, read by `kiln compile --tuning`\n",
                            kMagic, " ", kFormatVersion, "\n");
  for (const auto& [key, entry] : entries_) {
    out += str_cat("\nentry ", key.hash, "\ntarget ", key.target, "\nopt-version ", key.opt_version, "\n");
    std::vector<std::string> lines;
    std::istringstream stream(key.ast_text);
    std::string line;
    while (std::getline(stream, line)) lines.push_back(line);
    out += str_cat("kernel-lines ", lines.size(), "\n");
    for (const std::string& text : lines) out += "| " + text + "\n";
    for (const Opt& opt : entry.opts) out += str_cat("opt ", opt_kind(opt.op).name, " ", opt.axis, " ", opt.amount, "\n");
    out += str_cat("time-us ", format_us(entry.time_us), " ", format_us(entry.heuristic_us), "\nend\n");
  }
  return out;
}

void TuningDb::save_file(const std::string& path) const {
  // The pid keeps two tuners writing one database from sharing a temporary; the last rename wins.
  std::string temporary = str_cat(path, ".tmp.", getpid());
  std::optional<AtomicWriteFailure> failure = write_file_atomically(path, temporary, text());
  if (!failure) return;
  if (failure->step == AtomicWriteFailure::Step::Write)
    throw TuningDbError(str_cat("cannot write the tuning database to '", failure->file, "'"));
  throw TuningDbError(str_cat("cannot rename '", temporary, "' to '", path, "': ", failure->reason));
}

const TuningEntry* TuningDb::find(const TuningKey& key) const {
  auto found = entries_.find(key);
  return found == entries_.end() ? nullptr : &found->second;
}

void TuningDb::set(const TuningKey& key, TuningEntry entry) {
  entry.line = 0;
  entries_.insert_or_assign(key, std::move(entry));
}

}  // namespace kiln
