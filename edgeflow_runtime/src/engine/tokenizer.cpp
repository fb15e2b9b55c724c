#include "tokenizer.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace edgeflow {

namespace {

class Reader {
public:
    Reader(std::string data, std::string path) : data_(std::move(data)), path_(std::move(path)) {}
    template <typename T>
    T get(const char* what) {
        T v;
        need(sizeof v, what);
        std::memcpy(&v, data_.data() + pos_, sizeof v);
        pos_ += sizeof v;
        return v;
    }
    std::string bytes(size_t n, const char* what) {
        need(n, what);
        std::string s = data_.substr(pos_, n);
        pos_ += n;
        return s;
    }
    bool done() const { return pos_ == data_.size(); }
    [[noreturn]] void fail(const std::string& why) const {
        throw std::runtime_error("tokenizer file " + path_ + ": " + why);
    }

private:
    void need(size_t n, const char* what) {
        if (data_.size() - pos_ < n) fail(std::string("truncated in ") + what);
    }
    std::string data_, path_;
    size_t pos_ = 0;
};

// UTF-8 -> code points and the byte offset where each starts (offsets has one more entry: the end).
void decode_utf8(const std::string& s, std::vector<uint32_t>& cps, std::vector<size_t>& offsets) {
    for (size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
        if (len == 0 || i + len > s.size())
            throw std::invalid_argument("the prompt is not valid UTF-8 (byte " + std::to_string(i) + ")");
        uint32_t cp = len == 1 ? b : b & (0x7F >> len);
        for (int k = 1; k < len; ++k) {
            const auto c = static_cast<unsigned char>(s[i + k]);
            if ((c >> 6) != 0x2)
                throw std::invalid_argument("the prompt is not valid UTF-8 (byte " + std::to_string(i + k) + ")");
            cp = (cp << 6) | (c & 0x3F);
        }
        cps.push_back(cp);
        offsets.push_back(i);
        i += len;
    }
    offsets.push_back(s.size());
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open tokenizer file " + path + ": " + std::strerror(errno));
    Reader r(std::string(std::istreambuf_iterator<char>(f), {}), path);
    if (r.bytes(4, "the magic") != "EFTK") r.fail("not a tokenizer file (no EFTK magic)");
    if (const auto v = r.get<uint32_t>("the version"); v != 1) r.fail("version " + std::to_string(v) + ", expected 1");

    Tokenizer t;
    const auto n_vocab = r.get<uint32_t>("the vocabulary size");
    t.vocab_.reserve(n_vocab);
    std::fill(std::begin(t.byte_token_), std::end(t.byte_token_), -1);
    for (uint32_t id = 0; id < n_vocab; ++id) {
        t.vocab_.push_back(r.bytes(r.get<uint16_t>("a token length"), "a token"));
        if (t.vocab_.back().size() == 1) {
            auto& slot = t.byte_token_[static_cast<unsigned char>(t.vocab_.back()[0])];
            if (slot < 0) slot = int32_t(id);  // the first id of a byte: an added token may repeat it
        }
    }
    int byte_tokens = 0;  // a byte-level vocabulary may leave out bytes that never occur (SmolLM2 lacks 21)
    for (int b = 0; b < 256; ++b) byte_tokens += t.byte_token_[b] >= 0;
    if (byte_tokens < 128)
        r.fail("only " + std::to_string(byte_tokens) + " bytes have a token: not a byte-level vocabulary");

    const auto n_merges = r.get<uint32_t>("the merge count");
    for (uint32_t rank = 0; rank < n_merges; ++rank) {
        const auto left = r.get<uint32_t>("a merge"), right = r.get<uint32_t>("a merge");
        const auto merged = r.get<uint32_t>("a merge");
        if (left >= n_vocab || right >= n_vocab || merged >= n_vocab)
            r.fail("merge " + std::to_string(rank) + " names an id outside the vocabulary");
        // a repeated pair keeps its first (lowest) rank
        t.merges_.emplace(uint64_t(left) << 32 | right, Merge{rank, int32_t(merged)});
    }
    const auto n_ranges = r.get<uint32_t>("the range count");
    for (uint32_t i = 0; i < n_ranges; ++i) {
        Range g{r.get<uint32_t>("a range"), r.get<uint32_t>("a range"), r.get<uint8_t>("a range")};
        if (g.first > g.last || g.cls > kSpace || (!t.ranges_.empty() && g.first <= t.ranges_.back().last))
            r.fail("code point ranges must be sorted, disjoint and of class 0-3");
        t.ranges_.push_back(g);
    }
    const auto n_special = r.get<uint32_t>("the special token count");
    for (uint32_t i = 0; i < n_special; ++i) {
        const auto id = r.get<uint32_t>("a special token");
        if (id >= n_vocab || t.vocab_[id].empty())
            r.fail("special token " + std::to_string(id) + " is not in the vocabulary");
        t.special_.push_back(int32_t(id));
    }
    if (!r.done()) r.fail("trailing bytes after the special tokens");
    std::stable_sort(t.special_.begin(), t.special_.end(),
                     [&](int32_t a, int32_t b) { return t.vocab_[a].size() > t.vocab_[b].size(); });
    return t;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
    if (id < 0 || size_t(id) >= vocab_.size())
        throw std::out_of_range("token id " + std::to_string(id) + " outside the vocabulary");
    return vocab_[size_t(id)];
}

Tokenizer::Class Tokenizer::classify(uint32_t cp) const {
    if (cp < 128) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return kLetter;
        if (cp >= '0' && cp <= '9') return kNumber;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return kSpace;
        return kOther;
    }
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), cp,
                               [](uint32_t c, const Range& g) { return c < g.first; });
    if (it == ranges_.begin()) return kOther;
    --it;
    return cp <= it->last ? Class(it->cls) : kOther;
}

// The GPT-2 pattern, tried in order at each position:
//   's|'t|'re|'ve|'m|'ll|'d |  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
void Tokenizer::split(const std::string& text, const std::vector<uint32_t>& cps, const std::vector<size_t>& offsets,
                      std::vector<std::string>& pieces) const {
    const size_t n = cps.size();
    auto emit = [&](size_t a, size_t b) { pieces.push_back(text.substr(offsets[a], offsets[b] - offsets[a])); };
    for (size_t i = 0; i < n;) {
        const uint32_t c = cps[i];
        if (c == '\'' && i + 1 < n) {
            const uint32_t c1 = cps[i + 1], c2 = i + 2 < n ? cps[i + 2] : 0;
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                emit(i, i + 2), i += 2;
                continue;
            }
            if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                emit(i, i + 3), i += 3;
                continue;
            }
        }
        const size_t j = i + (c == ' ' ? 1 : 0);  // the optional leading space
        if (j < n) {
            const Class k = classify(cps[j]);
            if (k != kSpace) {
                size_t e = j;
                while (e < n && classify(cps[e]) == k) ++e;
                emit(i, e), i = e;
                continue;
            }
        }
        size_t e = i;  // a whitespace run
        while (e < n && classify(cps[e]) == kSpace) ++e;
        const size_t end = e == n ? n : (e - i >= 2 ? e - 1 : i + 1);  // leave the last space to the next word
        emit(i, end), i = end;
    }
}

void Tokenizer::bpe(const std::string& piece, std::vector<int32_t>& out) const {
    std::vector<int32_t> syms;
    syms.reserve(piece.size());
    for (unsigned char b : piece) {
        // Hugging Face's tokenizer would drop such a byte silently: the prompt would not be what it says
        if (byte_token_[b] < 0)
            throw std::invalid_argument("the prompt has a character outside the vocabulary (byte 0x" +
                                        std::string(1, "0123456789abcdef"[b >> 4]) + "0123456789abcdef"[b & 15] +
                                        " has no token)");
        syms.push_back(byte_token_[b]);
    }
    std::vector<int32_t> next;
    while (syms.size() > 1) {
        const Merge* best = nullptr;
        uint64_t best_key = 0;
        for (size_t i = 0; i + 1 < syms.size(); ++i) {
            const uint64_t key = uint64_t(uint32_t(syms[i])) << 32 | uint32_t(syms[i + 1]);
            auto it = merges_.find(key);
            if (it != merges_.end() && (!best || it->second.rank < best->rank)) best = &it->second, best_key = key;
        }
        if (!best) break;
        next.clear();  // merge every occurrence of the best pair, left to right
        for (size_t i = 0; i < syms.size(); ++i) {
            if (i + 1 < syms.size() && (uint64_t(uint32_t(syms[i])) << 32 | uint32_t(syms[i + 1])) == best_key) {
                next.push_back(best->merged);
                ++i;
            } else {
                next.push_back(syms[i]);
            }
        }
        syms.swap(next);
    }
    out.insert(out.end(), syms.begin(), syms.end());
}

std::vector<int32_t> Tokenizer::encode(const std::string& text) const {
    std::vector<int32_t> ids;
    std::vector<std::string> pieces;
    auto encode_plain = [&](const std::string& part) {
        std::vector<uint32_t> cps;
        std::vector<size_t> offsets;
        decode_utf8(part, cps, offsets);
        pieces.clear();
        split(part, cps, offsets, pieces);
        for (const auto& p : pieces) bpe(p, ids);
    };
    size_t start = 0;
    for (size_t i = 0; i < text.size();) {  // added tokens are cut out of the text first, longest match
        const int32_t* hit = nullptr;
        for (const int32_t& id : special_)
            if (text.compare(i, vocab_[id].size(), vocab_[id]) == 0) {
                hit = &id;
                break;
            }
        if (!hit) {
            ++i;
            continue;
        }
        encode_plain(text.substr(start, i - start));
        ids.push_back(*hit);
        i += vocab_[*hit].size();
        start = i;
    }
    encode_plain(text.substr(start));
    return ids;
}

}  // namespace edgeflow
