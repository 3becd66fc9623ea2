//===- ConfigSyntax.cpp - duplicate keys and nesting depth in a config ----===//
#include "compiler/config/ConfigSyntax.h"

#include <nlohmann/json.hpp>

#include <set>
#include <vector>

namespace dsc::config {
namespace {

using Json = nlohmann::json;

/// Follows the containers with their JSON paths; stops at the first
/// duplicate key or a container too deep.
class SyntaxCheck : public nlohmann::json_sax<Json> {
public:
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
      what = "duplicate key \"" + k +
             "\" (DeepSpeed refuses duplicate keys; which one is meant?)";
      return false;
    }
    f.key = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &) override {
    return false; // malformed: llvm::json reports it, with its position
  }

private:
  struct Frame {
    bool object;
    std::string path, key;
    size_t index = 0;
    std::set<std::string> keys;
  };
  std::vector<Frame> stack_;

  /// The path of the value about to start.
  std::string childPath() const {
    if (stack_.empty())
      return "$";
    const Frame &f = stack_.back();
    return f.object ? f.path + "." + f.key
                    : f.path + "[" + std::to_string(f.index) + "]";
  }
  bool value() {
    if (!stack_.empty() && !stack_.back().object)
      ++stack_.back().index;
    return true;
  }
  bool open(bool object) {
    if (stack_.size() >= kMaxConfigDepth) {
      path = "$";
      what = "nested more than " + std::to_string(kMaxConfigDepth) +
             " levels deep";
      return false;
    }
    Frame f{object, childPath(), "", 0, {}};
    stack_.push_back(std::move(f));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return value();
  }
};

} // namespace

bool checkConfigSyntax(llvm::StringRef text, std::string &path,
                       std::string &what) {
  SyntaxCheck check;
  Json::sax_parse(text.begin(), text.end(), &check);
  if (check.what.empty())
    return true;
  path = check.path;
  what = check.what;
  return false;
}

} // namespace dsc::config
