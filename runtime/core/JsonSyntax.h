//===- JsonSyntax.h - what a JSON parser lets through, checked first -*- C++
//-*-===//
//
// JSON that dsc reads (ds_config.json in the compiler, a checkpoint's
// manifest.json in the runtime) goes through one iterative pass before it
// is parsed: the parsers keep the last of duplicate keys without a word
// (`{"step": 3, "step": 9}` reads as step 9) and recurse per nesting level
// (a file of 50000 '[' overflows the stack). nlohmann::json's SAX parser
// walks the text without recursion; this walk names the first duplicate
// key or too-deep container by its JSON path ("$.files[0]"). Header-only
// (nlohmann::json is).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_JSONSYNTAX_H
#define DSC_RUNTIME_CORE_JSONSYNTAX_H

#include "runtime/core/Printable.h"

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace dsc {

struct JsonSyntaxRules {
  /// Containers may nest this deep.
  size_t maxDepth = 64;
  /// Said after a duplicate key: which one is meant, and why it matters.
  std::string duplicateHint = "which one is meant?";
  /// Malformed JSON: reported here ("not valid JSON (at byte N)"), or
  /// passed on to the parser that follows, which says where.
  bool reportMalformed = true;
};

namespace detail {

class JsonSyntaxWalk : public nlohmann::json_sax<nlohmann::json> {
public:
  explicit JsonSyntaxWalk(const JsonSyntaxRules &rules) : rules_(rules) {}
  std::string path, what;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t &) override {
    return value();
  }
  bool string(string_t &) override { return value(); }
  bool binary(binary_t &) override { return value(); }
  bool start_object(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool key(string_t &k) override {
    Frame &f = stack_.back();
    if (!f.keys.insert(k).second) {
      path = f.path;
      what = "duplicate key \"" + printable(k) + "\" (" + rules_.duplicateHint +
             ")";
      return false;
    }
    f.key = k;
    return true;
  }
  bool parse_error(std::size_t position, const std::string &,
                   const nlohmann::detail::exception &) override {
    if (rules_.reportMalformed) {
      path = "$";
      // nlohmann counts characters read; the one at fault is one less.
      what = "not valid JSON (at byte " +
             std::to_string(position ? position - 1 : 0) + ")";
    }
    return false;
  }

private:
  struct Frame {
    bool object;
    std::string path, key;
    size_t index = 0;
    std::set<std::string> keys;
  };
  const JsonSyntaxRules &rules_;
  std::vector<Frame> stack_;

  /// The path of the value about to start.
  std::string childPath() const {
    if (stack_.empty())
      return "$";
    const Frame &f = stack_.back();
    return f.object ? f.path + "." + printable(f.key)
                    : f.path + "[" + std::to_string(f.index) + "]";
  }
  bool value() {
    if (!stack_.empty() && !stack_.back().object)
      ++stack_.back().index;
    return true;
  }
  bool open(bool object) {
    if (stack_.size() >= rules_.maxDepth) {
      path = childPath();
      what = "nested more than " + std::to_string(rules_.maxDepth) +
             " levels deep";
      return false;
    }
    stack_.push_back({object, childPath(), "", 0, {}});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return value();
  }
};

} // namespace detail

/// False with `path` ("$.optimizer.params") and `what` set for the first
/// duplicate key, container nested deeper than rules.maxDepth, or (when
/// rules.reportMalformed) syntax error.
inline bool checkJsonSyntax(std::string_view text, const JsonSyntaxRules &rules,
                            std::string &path, std::string &what) {
  detail::JsonSyntaxWalk walk(rules);
  nlohmann::json::sax_parse(text.begin(), text.end(), &walk);
  if (walk.what.empty())
    return true;
  path = walk.path;
  what = walk.what;
  return false;
}

} // namespace dsc

#endif // DSC_RUNTIME_CORE_JSONSYNTAX_H
