#include "model/torchscript_pickle.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "common/bounded_json.h"

namespace rapidqa::model {
namespace {

// Bounds on what one pickle may build. PyTorch's pickles of BERT-family
// models need a few thousand values, a stack a few dozen deep and module
// trees under ten levels.
constexpr std::size_t kMaxValues = 1u << 20;
constexpr std::size_t kMaxStack = 1u << 20;
constexpr std::size_t kMaxMarks = 1u << 16;
constexpr std::size_t kMaxGlobalLine = 1024;
constexpr std::size_t kMaxRank = 32;
constexpr std::size_t kMaxMemo = kMaxValues;       // memo entries (MEMOIZE adds one per byte)
constexpr std::size_t kMaxStorageKey = 64;         // bytes of [0-9A-Za-z_]: PyTorch writes "0", "1", ...
constexpr std::size_t kMaxLocation = 64;           // "cpu", "cuda:0"
constexpr std::size_t kMaxAttributeName = 256;     // bytes of one attribute name leading to a tensor or module
constexpr std::size_t kMaxPath = 4096;             // bytes of a dotted name
constexpr int kMaxModuleDepth = 64;
constexpr std::size_t kMaxAttributesWalked = 1u << 22;  // dict entries looked at while naming tensors
// Everything this reader copies out of the input (strings, globals, storage
// keys, shapes, names) is charged to one budget, a small multiple of the
// pickle's size: a memoized string re-used by a few-byte opcode must not
// cost its length again each time. PyTorch's pickles use under 2x.
constexpr std::size_t kBuiltBytesPerPickleByte = 4;
constexpr std::size_t kBuiltBytesAllowance = 1u << 20;

enum class Kind { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kObject, kStorage, kTensor };

struct Value {
  Kind kind = Kind::kNone;
  std::int64_t integer = 0;     // int, bool; index into storages/tensors
  std::string text;             // string; a global's "module.name" (objects keep no class name)
  std::vector<Value*> items;    // tuple and list elements; a dict's keys and values, alternating
  Value* state = nullptr;       // an object's BUILD state
};

struct Storage {
  std::string key;
  std::string type;
  std::int64_t numel = 0;
};

class Unpickler {
 public:
  // `legacy`: torch.save's format before PyTorch 1.6, whose persistent ids
  // carry a sixth field (view metadata, always None since PyTorch 0.4).
  explicit Unpickler(std::string_view data, bool legacy = false)
      : data_(data), budget_(kBuiltBytesPerPickleByte * data.size() + kBuiltBytesAllowance), legacy_(legacy) {}

  Result<std::map<std::string, PickledTensor>> run() {
    Value* root = nullptr;
    if (Status s = interpret(root); !s.is_ok()) return s;
    std::map<std::string, PickledTensor> out;
    Walk walk;
    if (Status s = collect(root, "", 0, walk, out); !s.is_ok()) return s;
    return out;
  }

  // One pickle's value, for the small pickles around a legacy file's main one.
  Result<const Value*> value() {
    Value* root = nullptr;
    if (Status s = interpret(root); !s.is_ok()) return s;
    return static_cast<const Value*>(root);
  }
  // Bytes read up to and including STOP.
  std::size_t end() const { return pos_; }
  // The storages the persistent ids declared: key -> (type, elements).
  std::map<std::string, std::pair<std::string, std::int64_t>> storages() const {
    std::map<std::string, std::pair<std::string, std::int64_t>> out;
    for (const Storage& s : storages_) out.emplace(s.key, std::make_pair(s.type, s.numel));
    return out;
  }

 private:
  Status corrupt(const std::string& why) const {
    return Status::data_loss(fmt::format("data.pkl byte {}: {}", opcode_at_, why));
  }

  // Counts bytes about to be copied out of the input; refuses past budget_.
  Status charge(std::size_t bytes) {
    if (bytes > budget_ - built_) {
      return corrupt(fmt::format("builds more than {} bytes of strings, shapes and names from a {}-byte pickle",
                                 budget_, data_.size()));
    }
    built_ += bytes;
    return Status::ok();
  }

  Result<Value*> make(Kind kind) {
    if (arena_.size() >= kMaxValues) return corrupt(fmt::format("more than {} values", kMaxValues));
    arena_.emplace_back();
    arena_.back().kind = kind;
    return &arena_.back();
  }

  // --- reading the byte stream -------------------------------------------

  bool take(std::size_t n, std::string_view& out) {
    if (n > data_.size() - pos_) return false;
    out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool take_le(std::size_t n, std::uint64_t& out) {
    std::string_view bytes;
    if (!take(n, bytes)) return false;
    out = 0;
    for (std::size_t i = n; i-- > 0;) out = (out << 8) | static_cast<unsigned char>(bytes[i]);
    return true;
  }
  bool take_line(std::string& out) {
    const std::size_t end = data_.find('\n', pos_);
    if (end == std::string_view::npos || end - pos_ > kMaxGlobalLine) return false;
    out.assign(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }

  // --- the stack, with Python's rule that a pop never crosses a mark -----

  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  Status push(Value* v) {
    if (stack_.size() >= kMaxStack) return corrupt("stack too deep");
    stack_.push_back(v);
    return Status::ok();
  }
  Status pop(Value*& out) {
    if (stack_.size() <= floor()) return corrupt("stack underflow");
    out = stack_.back();
    stack_.pop_back();
    return Status::ok();
  }
  Status top(Value*& out) const {
    if (stack_.size() <= floor()) return corrupt("stack underflow");
    out = stack_.back();
    return Status::ok();
  }
  Status pop_mark(std::vector<Value*>& items) {
    if (marks_.empty()) return corrupt("no mark to pop to");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return Status::ok();
  }

  Status push_new(Kind kind, std::int64_t integer = 0, std::string text = {}) {
    auto v = make(kind);
    if (!v) return v.status();
    (*v)->integer = integer;
    (*v)->text = std::move(text);
    return push(*v);
  }
  Status push_sequence(Kind kind, std::vector<Value*> items) {
    auto v = make(kind);
    if (!v) return v.status();
    (*v)->items = std::move(items);
    return push(*v);
  }

  // --- the opcodes -----------------------------------------------------

  Status interpret(Value*& result) {
    for (;;) {
      opcode_at_ = pos_;
      std::string_view op_byte;
      if (!take(1, op_byte)) return corrupt("ends before STOP");
      const auto op = static_cast<unsigned char>(op_byte[0]);
      Status s = Status::ok();
      std::uint64_t n = 0;
      std::string_view bytes;
      switch (op) {
        case 0x80:  // PROTO
          if (!take_le(1, n)) return corrupt("truncated PROTO");
          if (n > 5) return corrupt(fmt::format("pickle protocol {} is unknown", n));
          break;
        case 0x95:  // FRAME: a length hint only
          if (!take_le(8, n)) return corrupt("truncated FRAME");
          break;
        case '.': {  // STOP
          Value* v = nullptr;
          if (Status t = pop(v); !t.is_ok()) return t;
          result = v;
          return Status::ok();
        }
        case '(':  // MARK
          if (marks_.size() >= kMaxMarks) return corrupt("too many marks");
          marks_.push_back(stack_.size());
          break;
        case '0': {  // POP
          Value* ignored = nullptr;
          s = pop(ignored);
          break;
        }
        case '1': {  // POP_MARK
          std::vector<Value*> ignored;
          s = pop_mark(ignored);
          break;
        }
        case 'N': s = push_new(Kind::kNone); break;
        case 0x88: s = push_new(Kind::kBool, 1); break;  // NEWTRUE
        case 0x89: s = push_new(Kind::kBool, 0); break;  // NEWFALSE
        case 'J':  // BININT
          if (!take_le(4, n)) return corrupt("truncated BININT");
          s = push_new(Kind::kInt, static_cast<std::int32_t>(static_cast<std::uint32_t>(n)));
          break;
        case 'K':  // BININT1
          if (!take_le(1, n)) return corrupt("truncated BININT1");
          s = push_new(Kind::kInt, static_cast<std::int64_t>(n));
          break;
        case 'M':  // BININT2
          if (!take_le(2, n)) return corrupt("truncated BININT2");
          s = push_new(Kind::kInt, static_cast<std::int64_t>(n));
          break;
        case 0x8a: {  // LONG1: little-endian two's complement of n bytes
          std::uint64_t length = 0;
          if (!take_le(1, length)) return corrupt("truncated LONG1");
          if (length > 8) return corrupt("integer wider than 64 bits");
          if (!take_le(length, n)) return corrupt("truncated LONG1");
          if (length > 0 && length < 8 && (n >> (8 * length - 1)) & 1) n |= ~std::uint64_t{0} << (8 * length);
          s = push_new(Kind::kInt, static_cast<std::int64_t>(n));
          break;
        }
        case 'G': {  // BINFLOAT: big-endian double; only its presence matters here
          if (!take(8, bytes)) return corrupt("truncated BINFLOAT");
          s = push_new(Kind::kFloat);
          break;
        }
        case 'X': case 'T': case 'B':  // BINUNICODE, BINSTRING, BINBYTES
        case 0x8c: case 'U': case 'C':  // SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES
        case 0x8d: case 0x8e: {         // BINUNICODE8, BINBYTES8
          const std::size_t width = (op == 0x8c || op == 'U' || op == 'C') ? 1 : (op == 0x8d || op == 0x8e) ? 8 : 4;
          if (!take_le(width, n) || !take(static_cast<std::size_t>(n), bytes)) return corrupt("truncated string");
          if (Status t = charge(bytes.size()); !t.is_ok()) return t;
          s = push_new(Kind::kString, 0, std::string(bytes));
          break;
        }
        case ')': s = push_sequence(Kind::kTuple, {}); break;  // EMPTY_TUPLE
        case ']': s = push_sequence(Kind::kList, {}); break;   // EMPTY_LIST
        case '}': s = push_sequence(Kind::kDict, {}); break;   // EMPTY_DICT
        case 't': case 'l': case 'd': {  // TUPLE, LIST, DICT from the mark
          std::vector<Value*> items;
          if (Status t = pop_mark(items); !t.is_ok()) return t;
          if (op == 'd' && items.size() % 2 != 0) return corrupt("DICT with an odd number of items");
          s = push_sequence(op == 't' ? Kind::kTuple : op == 'l' ? Kind::kList : Kind::kDict, std::move(items));
          break;
        }
        case 0x85: case 0x86: case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
          std::vector<Value*> items(op - 0x84);
          for (auto it = items.rbegin(); it != items.rend(); ++it) {
            if (Status t = pop(*it); !t.is_ok()) return t;
          }
          s = push_sequence(Kind::kTuple, std::move(items));
          break;
        }
        case 'a': case 's': case 'e': case 'u': s = add_items(op); break;  // APPEND, SETITEM, APPENDS, SETITEMS
        case 'q': case 'r': case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
          if (op == 0x94) {
            n = memo_.size();
          } else if (!take_le(op == 'q' ? 1 : 4, n)) {
            return corrupt("truncated PUT");
          }
          Value* v = nullptr;
          if (Status t = top(v); !t.is_ok()) return t;
          const auto [it, added] = memo_.try_emplace(n, v);
          if (!added) {
            it->second = v;
          } else if (memo_.size() > kMaxMemo) {
            return corrupt(fmt::format("more than {} memo entries", kMaxMemo));
          }
          break;
        }
        case 'h': case 'j': {  // BINGET, LONG_BINGET
          if (!take_le(op == 'h' ? 1 : 4, n)) return corrupt("truncated GET");
          const auto it = memo_.find(n);
          if (it == memo_.end()) return corrupt(fmt::format("memo entry {} is not defined", n));
          s = push(it->second);
          break;
        }
        case 'c': {  // GLOBAL module\nname\n
          std::string module, name;
          if (!take_line(module) || !take_line(name)) return corrupt("malformed GLOBAL");
          if (Status t = charge(module.size() + 1 + name.size()); !t.is_ok()) return t;
          s = push_new(Kind::kGlobal, 0, module + "." + name);
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          Value *name = nullptr, *module = nullptr;
          if (Status t = pop(name); !t.is_ok()) return t;
          if (Status t = pop(module); !t.is_ok()) return t;
          if (name->kind != Kind::kString || module->kind != Kind::kString) return corrupt("STACK_GLOBAL needs two strings");
          // Both may be memoized strings of any length: checked before joining.
          if (module->text.size() > kMaxGlobalLine || name->text.size() > kMaxGlobalLine) {
            return corrupt(fmt::format("STACK_GLOBAL name longer than {} bytes", kMaxGlobalLine));
          }
          if (Status t = charge(module->text.size() + 1 + name->text.size()); !t.is_ok()) return t;
          s = push_new(Kind::kGlobal, 0, module->text + "." + name->text);
          break;
        }
        case 0x81: s = new_object(); break;  // NEWOBJ
        case 'R': s = reduce(); break;       // REDUCE
        case 'b': s = build(); break;        // BUILD
        case 'Q': s = persistent_id(); break;  // BINPERSID
        default:
          return corrupt(fmt::format("opcode 0x{:02x} is not one PyTorch writes", op));
      }
      if (!s.is_ok()) return s;
    }
  }

  Status add_items(unsigned char op) {
    std::vector<Value*> items;
    if (op == 'a' || op == 's') {
      items.resize(op == 'a' ? 1 : 2);
      for (auto it = items.rbegin(); it != items.rend(); ++it) {
        if (Status t = pop(*it); !t.is_ok()) return t;
      }
    } else if (Status t = pop_mark(items); !t.is_ok()) {
      return t;
    }
    const bool dict = op == 's' || op == 'u';
    Value* target = nullptr;
    if (Status t = top(target); !t.is_ok()) return t;
    if (target->kind != (dict ? Kind::kDict : Kind::kList)) {
      return corrupt(dict ? "SETITEM(S) on something that is not a dict" : "APPEND(S) on something that is not a list");
    }
    if (dict && items.size() % 2 != 0) return corrupt("SETITEMS with an odd number of items");
    target->items.insert(target->items.end(), items.begin(), items.end());
    return Status::ok();
  }

  // cls.__new__(cls): an object whose attributes BUILD sets.
  Status new_object() {
    Value *args = nullptr, *cls = nullptr;
    if (Status t = pop(args); !t.is_ok()) return t;
    if (Status t = pop(cls); !t.is_ok()) return t;
    if (cls->kind != Kind::kGlobal || args->kind != Kind::kTuple) return corrupt("NEWOBJ needs a class and a tuple");
    auto object = make(Kind::kObject);
    if (!object) return object.status();
    return push(*object);
  }

  // Sets an object's state once. The state is kept as data: no
  // __setstate__ is looked up, let alone run. torch.save(state_dict())
  // also BUILDs its OrderedDict, with {'_metadata': ...} (per-module
  // versions, no tensors): that state is dropped.
  Status build() {
    Value *state = nullptr, *object = nullptr;
    if (Status t = pop(state); !t.is_ok()) return t;
    if (Status t = top(object); !t.is_ok()) return t;
    if (object->kind == Kind::kDict && state->kind == Kind::kDict) return Status::ok();
    if (object->kind != Kind::kObject || object->state) {
      return corrupt("BUILD on something that is not a new object or a dict");
    }
    object->state = state;
    return Status::ok();
  }

  static bool storage_key_ok(const std::string& key) {
    if (key.empty() || key.size() > kMaxStorageKey) return false;
    for (const char c : key) {
      if (!(c == '_' || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) return false;
    }
    return true;
  }

  // ('storage', <storage type>, key, location, numel)
  Status persistent_id() {
    Value* id = nullptr;
    if (Status t = pop(id); !t.is_ok()) return t;
    const auto& f = id->items;
    const std::size_t fields = legacy_ ? 6 : 5;
    if (legacy_ && f.size() == 6 && f[5]->kind != Kind::kNone) {
      return corrupt("a legacy storage id with view metadata (written before PyTorch 0.4) is not read");
    }
    if (id->kind != Kind::kTuple || f.size() != fields || f[0]->kind != Kind::kString || f[0]->text != "storage" ||
        f[1]->kind != Kind::kGlobal || f[2]->kind != Kind::kString || f[3]->kind != Kind::kString ||
        f[4]->kind != Kind::kInt || f[4]->integer < 0) {
      return corrupt("persistent id is not ('storage', type, key, location, numel)");
    }
    constexpr std::string_view kPrefix = "torch.";
    const std::string& type = f[1]->text;
    const std::string short_type = type.compare(0, kPrefix.size(), kPrefix) == 0 ? type.substr(kPrefix.size()) : "";
    if (storage_element_size(short_type) == 0) {
      return Status::invalid_argument(fmt::format("data.pkl byte {}: storage type '{}' is not supported", opcode_at_,
                                                  detail::clip_for_message(type)));
    }
    const std::string& key = f[2]->text;
    if (!storage_key_ok(key)) {
      return corrupt(fmt::format("storage key '{}' is not 1 to {} bytes of [0-9A-Za-z_]",
                                 detail::clip_for_message(key, 40), kMaxStorageKey));
    }
    if (f[3]->text.size() > kMaxLocation) {
      return corrupt(fmt::format("storage location longer than {} bytes", kMaxLocation));
    }
    // One key is one record: every persistent id naming it must agree, or a
    // view checked against one declaration would be read from another.
    std::size_t index = storages_.size();
    if (const auto known = storage_index_.find(key); known != storage_index_.end()) {
      index = known->second;
      const Storage& seen = storages_[index];
      if (seen.type != short_type || seen.numel != f[4]->integer) {
        return corrupt(fmt::format("storage '{}' is declared as {} elements of {} and as {} elements of {}", key,
                                   seen.numel, seen.type, f[4]->integer, short_type));
      }
    } else {
      if (Status t = charge(2 * key.size()); !t.is_ok()) return t;
      storage_index_.emplace(key, index);
      storages_.push_back({key, short_type, f[4]->integer});
    }
    auto v = make(Kind::kStorage);
    if (!v) return v.status();
    (*v)->integer = static_cast<std::int64_t>(index);
    return push(*v);
  }

  // The only callables a PyTorch pickle needs; anything else is refused
  // by name rather than looked up.
  Status reduce() {
    Value *args = nullptr, *callable = nullptr;
    if (Status t = pop(args); !t.is_ok()) return t;
    if (Status t = pop(callable); !t.is_ok()) return t;
    if (callable->kind != Kind::kGlobal || args->kind != Kind::kTuple) return corrupt("REDUCE needs a global and a tuple");
    const std::string& name = callable->text;
    const auto& a = args->items;
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") return rebuild_tensor(a);
    if (name == "collections.OrderedDict") return push_sequence(Kind::kDict, {});
    if (name == "torch._utils._rebuild_parameter" || name == "torch.jit._pickle.restore_type_tag" ||
        name == "torch.jit._pickle.build_intlist" || name == "torch.jit._pickle.build_tensorlist" ||
        name == "torch.jit._pickle.build_doublelist" || name == "torch.jit._pickle.build_boollist" ||
        name == "torch.device") {
      // Each returns (a view of) its first argument as far as tensors go.
      if (a.empty()) return corrupt(fmt::format("{} without arguments", name));
      return push(a[0]);
    }
    return Status::invalid_argument(fmt::format("data.pkl byte {}: global '{}' is not supported (a TorchScript module "
                                                "or a state dict of tensors is expected)",
                                                opcode_at_, detail::clip_for_message(name)));
  }

  static bool int_list(const Value* v, std::vector<std::int64_t>& out) {
    if (v->kind != Kind::kTuple && v->kind != Kind::kList) return false;
    if (v->items.size() > kMaxRank) return false;
    out.clear();
    for (const Value* x : v->items) {
      if (x->kind != Kind::kInt) return false;
      out.push_back(x->integer);
    }
    return true;
  }

  // (storage, offset, sizes, strides, ...): the view is checked to lie
  // inside the storage's declared elements, with overflow checks.
  Status rebuild_tensor(const std::vector<Value*>& a) {
    PickledTensor t;
    if (a.size() < 4 || a[0]->kind != Kind::kStorage || a[1]->kind != Kind::kInt || !int_list(a[2], t.sizes) ||
        !int_list(a[3], t.strides) || t.sizes.size() != t.strides.size()) {
      return corrupt("tensor is not (storage, offset, sizes, strides) with at most 32 dimensions");
    }
    const Storage& storage = storages_[static_cast<std::size_t>(a[0]->integer)];
    if (Status s = charge(described_bytes(t, storage.key.size())); !s.is_ok()) return s;
    t.storage_key = storage.key;
    t.storage_type = storage.type;
    t.storage_numel = storage.numel;
    t.offset = a[1]->integer;
    if (t.offset < 0) return corrupt("negative storage offset");
    std::uint64_t elements = 1, last = static_cast<std::uint64_t>(t.offset);
    for (std::size_t d = 0; d < t.sizes.size(); ++d) {
      if (t.sizes[d] < 0 || t.strides[d] < 0) return corrupt("negative size or stride");
      const auto size = static_cast<std::uint64_t>(t.sizes[d]);
      std::uint64_t reach = 0;
      if (__builtin_mul_overflow(elements, size, &elements) ||
          (size > 0 && (__builtin_mul_overflow(size - 1, static_cast<std::uint64_t>(t.strides[d]), &reach) ||
                        __builtin_add_overflow(last, reach, &last)))) {
        return corrupt("tensor size overflows 64 bits");
      }
    }
    if (elements > 0 && last >= static_cast<std::uint64_t>(t.storage_numel)) {
      return corrupt(fmt::format("tensor reaches element {} of a {}-element storage", last, t.storage_numel));
    }
    auto v = make(Kind::kTensor);
    if (!v) return v.status();
    (*v)->integer = static_cast<std::int64_t>(tensors_.size());
    tensors_.push_back(std::move(t));
    return push(*v);
  }

  // --- naming the tensors ------------------------------------------------

  // What a PickledTensor copies: its key, shape and strides.
  static std::size_t described_bytes(const PickledTensor& t, std::size_t key_size) {
    return key_size + 2 * t.sizes.size() * sizeof(std::int64_t);
  }

  struct Walk {
    std::unordered_set<const Value*> seen;  // attribute dicts already walked
    std::size_t attributes = 0;             // dict entries looked at
  };

  // Depth first in attribute order; an object reached a second time (a
  // shared sub-module, a cycle) is skipped, as named_modules() skips it, so
  // each attribute dict is walked once and the work is bounded by the
  // pickle's size, not by the number of paths through it.
  Status collect(const Value* node, const std::string& prefix, int depth, Walk& walk,
                 std::map<std::string, PickledTensor>& out) {
    if (depth > kMaxModuleDepth) return corrupt(fmt::format("modules nested deeper than {}", kMaxModuleDepth));
    const Value* attributes = node->kind == Kind::kObject ? node->state : node;
    if (!attributes || attributes->kind != Kind::kDict) return Status::ok();
    if (!walk.seen.insert(attributes).second) return Status::ok();
    for (std::size_t i = 0; i + 1 < attributes->items.size(); i += 2) {
      if (++walk.attributes > kMaxAttributesWalked) {
        return corrupt(fmt::format("module tree has more than {} attributes", kMaxAttributesWalked));
      }
      const Value* key = attributes->items[i];
      const Value* value = attributes->items[i + 1];
      if (key->kind != Kind::kString) continue;
      const bool tensor = value->kind == Kind::kTensor;
      if (!tensor && value->kind != Kind::kObject) continue;
      if (key->text.size() > kMaxAttributeName) {
        return corrupt(fmt::format("attribute name of {} bytes under '{}' (at most {})", key->text.size(),
                                   detail::clip_for_message(prefix, 80), kMaxAttributeName));
      }
      const std::size_t name_size = prefix.size() + key->text.size() + (tensor ? 0 : 1);  // a module's ends in '.'
      if (name_size > kMaxPath) {
        return corrupt(fmt::format("a name under '{}' is longer than {} bytes", detail::clip_for_message(prefix, 80),
                                   kMaxPath));
      }
      if (tensor) {
        const PickledTensor& t = tensors_[static_cast<std::size_t>(value->integer)];
        if (Status s = charge(name_size + described_bytes(t, t.storage_key.size())); !s.is_ok()) return s;
        out.emplace(prefix + key->text, t);
      } else {
        if (Status s = charge(name_size); !s.is_ok()) return s;
        if (Status s = collect(value, prefix + key->text + ".", depth + 1, walk, out); !s.is_ok()) return s;
      }
    }
    return Status::ok();
  }

  std::string_view data_;
  std::size_t budget_;     // bytes charge() lets the reader copy out of data_
  std::size_t built_ = 0;  // bytes charged so far
  std::size_t pos_ = 0;
  std::size_t opcode_at_ = 0;
  std::deque<Value> arena_;  // every value; pointers into it stay valid, cycles leak nothing
  std::vector<Value*> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Value*> memo_;
  std::vector<Storage> storages_;
  std::unordered_map<std::string, std::size_t> storage_index_;  // key -> storages_ index
  std::vector<PickledTensor> tensors_;
  bool legacy_ = false;
};

// What torch.save's legacy format opens with: the pickled magic number
// 0x1950a86a20f9469cfc6c and protocol version 1001, at pickle protocol 2.
constexpr std::string_view kLegacyMagic = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.";
constexpr std::string_view kLegacyProtocol = "\x80\x02M\xe9\x03.";

}  // namespace

std::size_t storage_element_size(std::string_view type) {
  if (type == "FloatStorage" || type == "IntStorage") return 4;
  if (type == "DoubleStorage" || type == "LongStorage") return 8;
  if (type == "HalfStorage" || type == "BFloat16Storage" || type == "ShortStorage") return 2;
  if (type == "CharStorage" || type == "ByteStorage" || type == "BoolStorage") return 1;
  return 0;
}

Result<std::map<std::string, PickledTensor>> read_pickled_tensors(std::string_view pickle) {
  if (pickle.size() > kMaxPickleBytes) {
    return Status::data_loss(fmt::format("data.pkl is {} bytes, more than the {} accepted", pickle.size(), kMaxPickleBytes));
  }
  return Unpickler(pickle).run();
}

bool is_legacy_torch_save(std::string_view head) { return head.substr(0, kLegacyMagic.size()) == kLegacyMagic; }

Result<LegacyPickles> read_legacy_pickles(std::string_view file) {
  const auto corrupt = [](std::size_t at, const std::string& why) {
    return Status::data_loss(fmt::format("legacy torch.save file byte {}: {}", at, why));
  };
  if (!is_legacy_torch_save(file) || file.substr(kLegacyMagic.size(), kLegacyProtocol.size()) != kLegacyProtocol) {
    return corrupt(0, "not torch.save's legacy format (magic number, protocol 1001)");
  }
  std::size_t at = kLegacyMagic.size() + kLegacyProtocol.size();
  // Each pickle is read from a window of at most kMaxPickleBytes.
  const auto window = [&](std::size_t from) { return file.substr(from, std::min(file.size() - from, kMaxPickleBytes)); };

  // The system information: only little-endian files are read.
  Unpickler info_reader(window(at));
  auto info = info_reader.value();
  if (!info) return Status(info.status().code(), fmt::format("legacy system information: {}", info.status().message()));
  bool little_endian = false;
  if ((*info)->kind == Kind::kDict) {
    for (std::size_t i = 0; i + 1 < (*info)->items.size(); i += 2) {
      const Value* key = (*info)->items[i];
      const Value* value = (*info)->items[i + 1];
      if (key->kind == Kind::kString && key->text == "little_endian") {
        little_endian = value->kind == Kind::kBool && value->integer == 1;
      }
    }
  }
  if (!little_endian) return corrupt(at, "the system information does not say little_endian True");
  at += info_reader.end();

  LegacyPickles out;
  Unpickler main_reader(window(at), /*legacy=*/true);
  auto tensors = main_reader.run();
  if (!tensors) return tensors.status();
  out.tensors = std::move(tensors).value();
  const auto declared = main_reader.storages();
  at += main_reader.end();

  // The storage keys, sorted as torch.save wrote them: each storage the
  // state dict declared, once.
  Unpickler keys_reader(window(at));
  auto keys = keys_reader.value();
  if (!keys) return Status(keys.status().code(), fmt::format("legacy storage keys: {}", keys.status().message()));
  if ((*keys)->kind != Kind::kList) return corrupt(at, "the storage keys are not a list");
  std::set<std::string> listed;
  for (const Value* key : (*keys)->items) {
    if (key->kind != Kind::kString || !declared.count(key->text) || !listed.insert(key->text).second) {
      return corrupt(at, "the storage keys list a storage the state dict does not declare, or one twice");
    }
    out.storage_keys.push_back(key->text);
  }
  if (listed.size() != declared.size()) return corrupt(at, "a storage the state dict declares has no bytes");
  at += keys_reader.end();
  out.data_offset = at;
  for (const std::string& key : out.storage_keys) {
    const auto& [type, numel] = declared.at(key);
    out.storages.push_back({key, type, numel});
  }
  return out;
}

}  // namespace rapidqa::model
