// `hearth inspect FILE`: a GGUF dump for users — header, metadata, tensor table.
#include <fmt/core.h>

#include <algorithm>
#include <map>

#include "commands.h"
#include "hearth/gguf/gguf_file.h"

namespace hearth::cli {
namespace {

std::string scalar_text(const gguf::Value& v, size_t max_chars) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::kString: {
      std::string s = *v.as_string();
      bool cut = false;
      if (s.size() > max_chars) {
        s.resize(max_chars);
        cut = true;
      }
      std::string out = "\"";
      for (char c : s) {
        if (c == '\n')
          out += "\\n";
        else if (c == '"')
          out += "\\\"";
        else if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\x{:02x}", c);
        else
          out += c;
      }
      return out + (cut ? "...\"" : "\"");
    }
    case ValueType::kBool:
      return *v.as_bool() ? "true" : "false";
    case ValueType::kF32:
      return fmt::format("{}", static_cast<float>(*v.as_f64()));
    case ValueType::kF64:
      return fmt::format("{}", *v.as_f64());
    case ValueType::kArray: {
      const auto& a = *v.as_array();
      std::string out =
          fmt::format("[{} x {}]", a.items.size(), gguf::value_type_name(a.elem_type));
      const size_t show = std::min<size_t>(a.items.size(), 5);
      if (show > 0) {
        out += " ";
        for (size_t i = 0; i < show; ++i) out += (i ? ", " : "") + scalar_text(a.items[i], 24);
        if (show < a.items.size()) out += ", ...";
      }
      return out;
    }
    default:
      if (auto i = v.as_i64()) return fmt::format("{}", *i);
      return fmt::format("{}", *v.as_u64());
  }
}

int run_inspect(const Args& args) {
  CLI::App app{"Print a GGUF file's header, metadata and tensor table", "inspect"};
  std::string path;
  bool no_tensors = false;
  size_t max_chars = 120;
  app.add_option("file", path, "GGUF file")->required();
  app.add_flag("--no-tensors", no_tensors, "omit the tensor table");
  app.add_option("--max-chars", max_chars, "truncate long strings to this many characters");
  if (auto code = parse(app, args)) return *code;

  const auto f = gguf::GgufFile::open(path);
  fmt::print("file:       {}\n", path);
  fmt::print("version:    {}\nsize:       {} bytes\nalignment:  {}\ndata at:    {}\n", f.version(),
             f.file_size(), f.alignment(), f.data_offset());
  fmt::print("metadata:   {} keys\n", f.metadata().size());
  for (const auto& kv : f.metadata()) {
    fmt::print("  {:<44} {:<6} {}\n", kv.key, gguf::value_type_name(kv.value.type),
               scalar_text(kv.value, max_chars));
  }
  uint64_t total = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // name -> (count, bytes)
  for (const auto& t : f.tensors()) {
    total += t.bytes;
    auto& e = by_type[std::string(gguf::tensor_type_name(t.type))];
    e.first += 1;
    e.second += t.bytes;
  }
  fmt::print("tensors:    {} ({:.2f} MiB)\n", f.tensors().size(), total / 1048576.0);
  for (const auto& [name, e] : by_type) {
    fmt::print("  {:<8} {:>5} tensors {:>12.2f} MiB\n", name, e.first, e.second / 1048576.0);
  }
  if (!no_tensors) {
    fmt::print("  {:>5}  {:<32} {:<8} {:<28} {:>12} {:>12}\n", "#", "name", "type", "shape",
               "offset", "bytes");
    size_t i = 0;
    for (const auto& t : f.tensors()) {
      std::string shape;
      for (size_t d = 0; d < t.shape.size(); ++d)
        shape += (d ? " x " : "") + std::to_string(t.shape[d]);
      fmt::print("  {:>5}  {:<32} {:<8} {:<28} {:>12} {:>12}\n", i++, t.name,
                 gguf::tensor_type_name(t.type), shape, t.offset, t.bytes);
    }
  }
  return 0;
}

HEARTH_COMMAND("inspect", "print a GGUF file's metadata and tensor table", run_inspect);

}  // namespace
}  // namespace hearth::cli
