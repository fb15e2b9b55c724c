// Byte-level BPE tokenizer (GPT-2 family: SmolLM2, Llama-3, Qwen) read from the tokenizer file written beside a packed
// model by harness/engine/tokenizer_file.py, so that edgeflow-run goes from prompt text to the first token as
// llama.cpp does. encode() gives the ids of Hugging Face's `tokenizer.encode(text, add_special_tokens=False)`.
//
// File layout (little-endian; docs/format.md "Tokenizer file"):
//   "EFTK" u32 version(=1)
//   u32 n_vocab,   n_vocab x (u16 length, the token's raw bytes)
//   u32 n_merges,  n_merges x (u32 left id, u32 right id, u32 merged id)      rank = position in the list
//   u32 n_ranges,  n_ranges x (u32 first, u32 last, u8 class)   code points >= 128: 1 letter, 2 number, 3 space
//   u32 n_special, n_special x u32 id                           added tokens, matched literally in the text
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace edgeflow {

class Tokenizer {
public:
    // Throws std::runtime_error naming the file and what is wrong with it.
    static Tokenizer load(const std::string& path);

    // UTF-8 text -> token ids; throws std::invalid_argument on text that is not valid UTF-8 or holds a byte the
    // vocabulary has no token for (Hugging Face's tokenizer drops such bytes silently).
    std::vector<int32_t> encode(const std::string& text) const;
    // The raw bytes of token `id` (may be part of a multi-byte character).
    const std::string& token_bytes(int32_t id) const;
    size_t vocab_size() const { return vocab_.size(); }

private:
    enum Class : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };
    struct Range {
        uint32_t first, last;
        uint8_t cls;
    };
    struct Merge {
        uint32_t rank;
        int32_t merged;
    };

    Class classify(uint32_t cp) const;
    // The GPT-2 pre-tokenizer's pieces of `cps` (code points with their byte offsets in `text`).
    void split(const std::string& text, const std::vector<uint32_t>& cps, const std::vector<size_t>& offsets,
               std::vector<std::string>& pieces) const;
    void bpe(const std::string& piece, std::vector<int32_t>& out) const;

    std::vector<std::string> vocab_;
    int32_t byte_token_[256];  // -1: the vocabulary has no token for that byte
    std::unordered_map<uint64_t, Merge> merges_;  // (left << 32 | right) -> rank, merged id
    std::vector<Range> ranges_;                    // sorted, disjoint
    std::vector<int32_t> special_;                 // longest content first
};

}  // namespace edgeflow
