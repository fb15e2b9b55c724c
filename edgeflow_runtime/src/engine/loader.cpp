#include "loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "edgeflow/format.h"
#include "edgeflow/unpack.h"
#include "tensor_names.h"

namespace edgeflow {
namespace {

constexpr uint32_t kUnpackChannels = 128;  // channels per item of a region's unpack job (~74 KB of int8 at D = 576)
constexpr size_t kHuge = size_t(2) << 20;  // transparent huge page size on x86-64 and arm64 (4 KB granule)

// Anonymous memory in whole huge pages, with transparent huge pages requested: first touches fault in 2 MB at a time
// instead of 4 KB (page faults were most of an unpack task's time). Page-aligned, so fine for O_DIRECT. nullptr on
// failure.
void* map_huge(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without THP these are plain 4 KB pages
#endif
    return p;
}

void unmap(void* p, size_t bytes) { munmap(p, bytes); }

// The packed file, open for pread (O_DIRECT when asked), shared by the weight source and the embedding rows it
// leaves on storage for later lookups.
class FileReader {
public:
    static constexpr uint64_t kBlock = 4096;  // O_DIRECT's offset, size and buffer alignment (and a page anyway)

    FileReader(const std::string& path, bool direct) : path_(path) {
        fd_ = ::open(path.c_str(), O_RDONLY | (direct ? O_DIRECT : 0));
        if (fd_ < 0)
            throw IoError("cannot open " + path + (direct ? " with O_DIRECT" : "") + ": " + std::strerror(errno));
        const off_t end = ::lseek(fd_, 0, SEEK_END);
        if (end < 0) throw IoError("cannot size " + path + ": " + std::strerror(errno));
        size_ = uint64_t(end);
    }
    ~FileReader() { ::close(fd_); }
    FileReader(const FileReader&) = delete;
    FileReader& operator=(const FileReader&) = delete;
    const std::string& path() const { return path_; }

    // Exactly n bytes at off into dst; what = the part of the file, for the error.
    void read(uint8_t* dst, uint64_t n, uint64_t off, const std::string& what) const {
        for (uint64_t done = 0; done < n;) {
            const ssize_t got = ::pread(fd_, dst + done, n - done, off_t(off + done));
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) throw IoError("read of " + path_ + " failed: " + std::strerror(errno));
            if (got == 0) throw FormatError(path_ + ": file ends inside " + what);
            done += uint64_t(got);
        }
    }

    // Bytes [off, off + n) read as the whole kBlock-aligned blocks around them (readable with O_DIRECT too).
    struct Span {
        std::shared_ptr<uint8_t> blocks;
        uint64_t first = 0, size = 0;  // file offset and bytes of blocks
        const uint8_t* at(uint64_t off) const { return blocks.get() + (off - first); }
    };
    Span read_span(uint64_t off, uint64_t n, const std::string& what) const {
        Span s;
        s.first = off / kBlock * kBlock;
        s.size = (off + n + kBlock - 1) / kBlock * kBlock - s.first;
        void* p = nullptr;
        if (posix_memalign(&p, kBlock, s.size) != 0) throw std::bad_alloc();
        s.blocks.reset(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
        // the last block may end past the file (its end is only 4096-aligned by the format): read what is there
        const uint64_t want = std::min<uint64_t>(s.size, size_ - s.first);
        read(s.blocks.get(), want, s.first, what);
        return s;
    }

private:
    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

// Rows of an int8 table [V, cols] (a raw tensor of the file), read together: rows whose bytes share or touch a
// block come in one pread. Pure I/O; StoredRows checks them.
struct RowBatch {
    std::vector<int32_t> ids;  // ascending
    FileReader::Span span;
};

uint64_t row_offset(const TensorInfo& table, int32_t r) { return table.offset + uint64_t(r) * table.shape[1]; }

std::vector<RowBatch> read_rows(const FileReader& file, const TensorInfo& table, std::vector<int32_t> ids) {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    auto block = [&](int32_t r) { return row_offset(table, r) / FileReader::kBlock; };
    std::vector<RowBatch> out;
    for (size_t a = 0; a < ids.size();) {
        size_t b = a + 1;
        while (b < ids.size() && block(ids[b]) <= block(ids[b - 1] + 1)) ++b;  // starts in a block already read
        const uint64_t off = row_offset(table, ids[a]), end = row_offset(table, ids[b - 1]) + table.shape[1];
        out.push_back({std::vector<int32_t>(ids.begin() + long(a), ids.begin() + long(b)),
                       file.read_span(off, end - off, table.name + " row " + std::to_string(ids[a]))});
        a = b;
    }
    return out;
}

// An untied embedding table left on storage: its rows are the prompt's (read with the embedding's region) plus any
// row first looked up later (read then), each checked against its CRC-32 (model.embed_tokens.row_crc32,
// docs/format.md). A prompt needs a few hundred of a vocabulary's rows; reading Qwen1.5-1.8B's whole 8-bit table
// would be 311 MB, 1.5 s at 200 MB/s, before the first layer could start.
class StoredRows : public RowSource {
public:
    StoredRows(std::shared_ptr<const FileReader> file, const TensorInfo& codes, SharedArray<uint32_t> crcs)
        : file_(std::move(file)), codes_(codes), crcs_(std::move(crcs)) {}

    void add(const RowBatch& batch) {
        std::lock_guard<std::mutex> lk(mu_);
        add_locked(batch);
    }

    const int8_t* row(int r) override {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = rows_.find(r);
        if (it != rows_.end()) return it->second.data();
        for (const RowBatch& b : read_rows(*file_, codes_, {r})) add_locked(b);
        return rows_.at(r).data();
    }

private:
    void add_locked(const RowBatch& batch) {
        for (int32_t r : batch.ids) keep(r, batch.span.at(row_offset(codes_, r)));
    }
    void keep(int32_t r, const uint8_t* bytes) {  // under mu_; a row once kept is never rewritten (readers hold it)
        const size_t cols = codes_.shape[1];
        if (rows_.count(r)) return;
        if (crc32(bytes, cols) != crcs_.data()[r])
            throw FormatError(file_->path() + ": " + codes_.name + " row " + std::to_string(r) +
                              ": checksum mismatch (row corrupt)");
        const auto* codes = reinterpret_cast<const int8_t*>(bytes);
        rows_.emplace(r, std::vector<int8_t>(codes, codes + cols));
    }

    std::shared_ptr<const FileReader> file_;
    TensorInfo codes_;
    SharedArray<uint32_t> crcs_;
    std::mutex mu_;
    std::unordered_map<int32_t, std::vector<int8_t>> rows_;  // node-based: a row's data never moves once kept
};

// Region buffers (map_huge) and recycled: a buffer whose layer has been unpacked is reused for a later
// region, so its pages are faulted in once instead of once per layer. A buffer comes back when its last reference
// goes; one whose raw tables the model keeps (the embedding) simply stays out. At most kMaxBuffers are out at once:
// reading blocks until unpacking catches up, which bounds memory and is what makes the reuse happen.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
public:
    static constexpr int kMaxBuffers = 6;  // embedding + final (kept by the model) + 4 layers in flight

    ~BufferPool() {
        for (auto& [p, cap] : free_) unmap(p, cap);
    }
    std::shared_ptr<uint8_t> acquire(size_t size) {
        uint8_t* p = nullptr;
        size_t cap = 0;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return cancelled_ || out_ < kMaxBuffers || !free_.empty(); });
            if (cancelled_) throw EngineError("loading cancelled");
            ++out_;
            for (size_t i = 0; i < free_.size(); ++i)
                if (free_[i].second >= size) {
                    std::tie(p, cap) = free_[i];
                    free_.erase(free_.begin() + long(i));
                    break;
                }
        }
        if (!p) {
            cap = (size + kHuge - 1) / kHuge * kHuge;
            p = static_cast<uint8_t*>(map_huge(cap));
            if (!p) {
                release(nullptr, 0);
                throw std::bad_alloc();
            }
        }
        std::weak_ptr<BufferPool> pool = shared_from_this();
        return std::shared_ptr<uint8_t>(p, [pool, cap](uint8_t* q) {
            if (auto alive = pool.lock()) alive->release(q, cap);
            else unmap(q, cap);
        });
    }

    // Wakes and fails a reader waiting for a buffer: after another task failed, unpacking may never catch up.
    void cancel() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            cancelled_ = true;
        }
        cv_.notify_all();
    }

private:
    void release(uint8_t* p, size_t cap) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (p) free_.emplace_back(p, cap);
            --out_;
        }
        cv_.notify_one();
    }
    std::mutex mu_;
    std::condition_variable cv_;
    int out_ = 0;  // buffers handed out and not yet returned
    bool cancelled_ = false;
    std::vector<std::pair<uint8_t*, size_t>> free_;
};

const char* raw_dtype(DType t) {
    switch (t) {
        case DType::F32: return "float32";
        case DType::F16: return "float16";
        case DType::I8: return "int8";
        case DType::U8: return "uint8";
        case DType::U32: return "uint32";
        default: return nullptr;
    }
}

// The reader of `path` under `mode` (LoadOptions); `resident`: the file's bytes in the page cache before anything
// was read (open_packed_model); `chosen` says which reads it does and why.
std::shared_ptr<FileReader> open_reader(const std::string& path, IoMode mode, long resident, std::string& chosen) {
    if (mode != IoMode::Auto) {
        chosen = mode == IoMode::Direct ? "direct (asked)" : "buffered (asked)";
        return std::make_shared<FileReader>(path, mode == IoMode::Direct);
    }
    if (resident == 0) {
        try {
            auto reader = std::make_shared<FileReader>(path, true);
            chosen = "direct: none of the file is in the page cache";
            return reader;
        } catch (const IoError&) {
            chosen = "buffered: the filesystem refuses O_DIRECT";
        }
    } else {
        chosen = resident > 0 ? "buffered: " + std::to_string(resident) + " bytes of the file are in the page cache"
                              : "buffered: page-cache residency unknown";
    }
    return std::make_shared<FileReader>(path, false);
}

// The packed file's regions as weight units: region 0 embeddings, 1 + i layer i, n_layers + 1 final.
class PackedWeightSource : public WeightSource {
public:
    PackedWeightSource(const std::string& path, LoadOptions opt, long resident)
        : path_(path), opt_(opt), file_(PackedFile::open(path)) {
        staging_.float_outputs = opt.float_outputs;
        const auto& c = file_.config();
        cfg_.hidden = int(c.hidden_size);
        cfg_.intermediate = int(c.intermediate_size);
        cfg_.n_layers = int(c.num_hidden_layers);
        cfg_.n_heads = int(c.num_attention_heads);
        cfg_.n_kv_heads = int(c.num_key_value_heads);
        cfg_.head_dim = int(c.head_dim);
        cfg_.vocab = int(c.vocab_size);
        cfg_.max_positions = int(c.max_position_embeddings);
        cfg_.rms_eps = c.rms_norm_eps;
        cfg_.rope_theta = c.rope_theta;
        cfg_.tied_embeddings = c.tie_word_embeddings;
        try {
            cfg_.validate();
        } catch (const EngineError& e) {
            throw FormatError(path + ": " + e.what());
        }
        const auto& regions = file_.regions();
        const size_t n = size_t(cfg_.n_layers) + 2;
        bool ok = regions.size() == n && regions.front().kind == RegionKind::Embedding &&
                  regions.back().kind == RegionKind::Final;
        for (int l = 0; ok && l < cfg_.n_layers; ++l)
            ok = regions[l + 1].kind == RegionKind::Layer && regions[l + 1].layer == uint32_t(l);
        if (!ok)
            throw FormatError(path + ": expected regions embedding, layer 0 .. " + std::to_string(cfg_.n_layers - 1) +
                              ", final; found " + std::to_string(regions.size()) + " regions in another order");
        make_code_arena();
        file_reader_ = open_reader(path, opt.io, resident, io_mode_);
        buffers_.resize(n);
        find_stored_rows();
    }

    LlamaConfig config() const override { return cfg_; }
    std::string io_mode() const override { return io_mode_; }
    void cancel() override { pool_->cancel(); }
    uint64_t bytes_read() const override { return bytes_read_.load(); }

    void expect_tokens(const std::vector<int32_t>& tokens) override { prompt_tokens_ = tokens; }

    // File order, except that the final region (the norm and an untied LM head: 155 MB for a 1.8B model's head at 4
    // bits) is read before the last layers that hold at least as many bytes: its unpack then runs while they are
    // read, instead of after the last byte where nothing hides it (where flash is the limit, that is the tail of
    // the cold start). Reading it earlier delays no layer where compute is the limit: reads are ahead there.
    std::vector<int> load_order(int n_units) const override {
        const auto& regions = file_.regions();
        const int final_unit = n_units - 1;
        int before = final_unit;  // read the final region before this unit
        for (uint64_t later = 0; before > 1 && later < regions[size_t(final_unit)].size;)
            later += regions[size_t(--before)].size;
        std::vector<int> order;
        for (int u = 0; u < final_unit; ++u) {
            if (u == before) order.push_back(final_unit);
            order.push_back(u);
        }
        if (before == final_unit) order.push_back(final_unit);
        return order;
    }

    void load(int unit) override {
        if (unit == 0 && embed_codes_) return load_embedding_rows();
        const RegionInfo& r = file_.regions().at(unit);
        std::shared_ptr<uint8_t> buf = pool_->acquire(r.size);
        file_reader_->read(buf.get(), r.size, r.offset, "region " + std::to_string(unit));
        bytes_read_ += r.size;
        std::lock_guard<std::mutex> lk(mu_);
        buffers_[unit] = std::move(buf);
    }

    void unpack(int unit, Model& model, ThreadPool& pool) override {
        try {
            if (unit == 0 && embed_codes_) unpack_embedding_rows(model);
            else unpack_region(unit, model, pool);
        } catch (const IoError&) {
            throw;
        } catch (const EngineError& e) {  // a tensor the engine cannot use: the file is wrong, not the request
            throw FormatError(path_ + ": " + e.what());
        }
    }

private:
    // An untied embedding whose file has per-row CRCs is read at the prompt's rows only (StoredRows); a tied one is
    // the LM head too and is read whole, as is any table in a version 1 file.
    void find_stored_rows() {
        if (cfg_.tied_embeddings) return;
        const TensorInfo *codes = nullptr, *crcs = nullptr;
        const RegionInfo& r = file_.regions().front();
        for (uint32_t i = r.first_tensor; i < r.first_tensor + r.n_tensors; ++i) {
            const TensorInfo& t = file_.tensors()[i];
            if (t.name == "model.embed_tokens.codes" && t.dtype == DType::I8 && t.ndim == 2) codes = &t;
            if (t.name == "model.embed_tokens.row_crc32") crcs = &t;
        }
        if (codes && crcs) embed_codes_ = codes;  // shapes are checked when unpacked
    }

    // Region 0 without the table's codes: its other tensors whole (scales, widths, row CRCs: 9 bytes a row) and
    // the rows of the prompt's tokens.
    void load_embedding_rows() {
        const RegionInfo& r = file_.regions().front();
        EmbeddingRead got;
        for (uint32_t i = r.first_tensor; i < r.first_tensor + r.n_tensors; ++i) {
            const TensorInfo& t = file_.tensors()[i];
            if (&t == embed_codes_) continue;
            got.tensors.emplace_back(&t, file_reader_->read_span(t.offset, t.size, t.name));
            bytes_read_ += got.tensors.back().second.size;
        }
        std::vector<int32_t> ids;
        for (int32_t id : prompt_tokens_)
            if (id >= 0 && id < cfg_.vocab) ids.push_back(id);  // others fail in embed(), naming the position
        got.rows = read_rows(*file_reader_, *embed_codes_, std::move(ids));
        for (const RowBatch& b : got.rows) bytes_read_ += b.span.size;
        std::lock_guard<std::mutex> lk(mu_);
        embedding_read_ = std::move(got);
    }

    // One region as a data-parallel job of the compute threads that run it (the engine's thread budget: there is no
    // unpack thread). Items: every 1 MiB piece of a payload's CRC (SplitCrc), every block of rows of a table that is
    // checked by its row CRCs, and every kUnpackChannels channels of a quantized weight. Tables, views and names are
    // set up first, on the calling thread; a failed item fails the region.
    void unpack_region(int unit, Model& model, ThreadPool& pool) {
        std::shared_ptr<uint8_t> buf;  // shared: raw tables (the embedding) stay in it and keep it alive
        {
            std::lock_guard<std::mutex> lk(mu_);
            buf = std::move(buffers_[unit]);
        }
        const RegionInfo& r = file_.regions().at(unit);
        const auto payload = [&](const TensorInfo& t) { return buf.get() + (t.offset - r.offset); };
        Checks checks;
        std::deque<QuantTensor> views;  // stable addresses: items point at them
        for (uint32_t i = r.first_tensor; i < r.first_tensor + r.n_tensors; ++i) {
            const TensorInfo& t = file_.tensors()[i];
            if (opt_.verify_crc) add_crc_checks(t, payload, checks);
            if (!is_quantized(t.dtype)) {
                set_raw_tensor(t, payload(t), buf, model);
                continue;
            }
            int8_t* codes = place_codes(t, model);
            const QuantTensor* view = &views.emplace_back(QuantTensor::view(t, payload(t)));
            for (uint32_t c0 = 0; c0 < t.shape[0]; c0 += kUnpackChannels) {
                const uint32_t c1 = std::min<uint32_t>(t.shape[0], c0 + kUnpackChannels);
                checks.items.push_back(
                    [view, codes, c0, c1] { edgeflow::unpack(*view, c0, c1, codes + size_t(c0) * view->dim); });
            }
        }
        std::mutex error_mu;
        std::exception_ptr error;
        pool.parallel_for(int(checks.items.size()), [&](int i) {
            try {
                checks.items[i]();
            } catch (...) {  // items run on other threads too: carry the first failure back to this one
                std::lock_guard<std::mutex> lk(error_mu);
                if (!error) error = std::current_exception();
            }
        });
        if (error) std::rethrow_exception(error);
        for (auto& check : checks.after) check();
        std::lock_guard<std::mutex> lk(mu_);
        if (r.kind == RegionKind::Layer) staging_.finish_layer(model, int(r.layer));
        else if (r.kind == RegionKind::Embedding) model.check_embedding();
        else model.check_final();
    }

    struct Checks {
        std::vector<std::function<void()>> items;  // the region's data-parallel work
        std::vector<std::function<void()>> after;  // checks that need every item done
        std::deque<std::vector<uint32_t>> pieces;  // per CRC-checked payload, its pieces' CRCs
    };

    // A table with row CRCs is checked by blocks of rows (then its entries chained against its CRC: one pass over the
    // table, not two); any other payload by its 1 MiB CRC pieces (then combined).
    template <class PayloadOf>
    void add_crc_checks(const TensorInfo& t, PayloadOf payload, Checks& out) {
        const uint8_t* data = payload(t);
        if (const TensorInfo* row_crcs = file_.row_crcs_of(t)) {
            const uint8_t* entries = payload(*row_crcs);
            const uint64_t rows = t.shape[0], block = std::max<uint64_t>(1, SplitCrc::kPiece / t.shape[1]);
            for (uint64_t r0 = 0; r0 < rows; r0 += block)
                out.items.push_back([this, &t, data, entries, r0, r1 = std::min(rows, r0 + block)] {
                    file_.verify_rows(t, data, entries, r0, r1);
                });
            out.after.push_back([this, &t, entries] { file_.verify_row_chain(t, entries); });
            return;
        }
        std::vector<uint32_t>* crc = &out.pieces.emplace_back(SplitCrc::pieces(t.size));
        for (size_t k = 0; k < crc->size(); ++k)
            out.items.push_back([&t, data, crc, k] { (*crc)[k] = SplitCrc::piece(data, t.size, k); });
        out.after.push_back([this, &t, crc] { file_.check_crc(t, SplitCrc::combine(*crc, t.size)); });
    }

    void unpack_embedding_rows(Model& model) {
        EmbeddingRead got;
        {
            std::lock_guard<std::mutex> lk(mu_);
            got = std::move(embedding_read_);
        }
        for (auto& [t, span] : got.tensors) unpack_tensor(*t, span.at(t->offset), span.blocks, model);
        const TensorInfo& codes = *embed_codes_;
        RowTable& e = model.embed;
        if (codes.shape[0] != uint32_t(cfg_.vocab) || codes.shape[1] != uint32_t(cfg_.hidden))
            throw EngineError(codes.name + ": expected int8 [vocab, hidden]");
        if (e.row_crc32.size() != size_t(cfg_.vocab)) throw EngineError("model.embed_tokens.row_crc32 missing");
        auto rows = std::make_shared<StoredRows>(file_reader_, codes, e.row_crc32);
        for (const RowBatch& b : got.rows) rows->add(b);  // row CRCs are checked even with verify_crc off
        e.rows = cfg_.vocab;
        e.cols = cfg_.hidden;
        e.on_demand = std::move(rows);
        model.check_embedding();
    }

    // One huge-page mapping for the int8 codes of every quantized tensor (106 MB for the default model; with an LM head
    // inside the bit budget, its [V, H] too).
    void make_code_arena() {
        size_t total = 0;
        for (const auto& t : file_.tensors())
            if (is_quantized(t.dtype)) {
                arena_offset_[t.name] = total;
                total += (size_t(t.shape[0]) * t.shape[1] + 63) / 64 * 64;
            }
        const size_t bytes = std::max<size_t>((total + kHuge - 1) / kHuge * kHuge, kHuge);
        void* p = map_huge(bytes);
        if (!p) throw std::bad_alloc();
        arena_ = std::shared_ptr<int8_t>(static_cast<int8_t*>(p), [bytes](int8_t* q) { unmap(q, bytes); });
    }

    // One tensor at once, on the calling thread (the embedding's small tables).
    void unpack_tensor(const TensorInfo& t, const uint8_t* payload, const std::shared_ptr<uint8_t>& region,
                       Model& model) {
        if (opt_.verify_crc) file_.verify_payload(t, payload);
        if (!is_quantized(t.dtype)) return set_raw_tensor(t, payload, region, model);
        const QuantTensor qt = QuantTensor::view(t, payload);
        edgeflow::unpack(qt, 0, qt.channels, place_codes(t, model));
    }

    // Where a quantized tensor's codes go ([C, D] int8, row-major, in the arena): a Llama linear's `P.weight`, or
    // `lm_head.weight`, the LM head inside the bit budget (version 4), which fills the model's LM head table.
    int8_t* place_codes(const TensorInfo& t, Model& model) {
        int8_t* codes = arena_.get() + arena_offset_.at(t.name);  // offsets cover every quantized tensor
        if (t.name == "lm_head.weight") {
            // the LM head table's codes, set as a raw table's are (set_named_tensor checks that the model is untied
            // and the shape is [vocab, hidden])
            TensorView view{"lm_head.codes", "int8", {int64_t(t.shape[0]), int64_t(t.shape[1])}, codes, arena_};
            std::lock_guard<std::mutex> lk(mu_);
            set_named_tensor(model, staging_, view);
            return codes;
        }
        const std::string suffix = ".weight";
        const bool named_ok = t.name.size() > suffix.size() &&
                              t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
        QLinear* q = named_ok ? find_linear(model, t.name.substr(0, t.name.size() - suffix.size())) : nullptr;
        if (!q) throw FormatError(path_ + ": quantized tensor " + t.name + " is not a Llama linear weight");
        q->C = int(t.shape[0]);
        q->K = int(t.shape[1]);
        q->codes.place(codes, size_t(q->C) * q->K, arena_);
        return codes;
    }

    void set_raw_tensor(const TensorInfo& t, const uint8_t* payload, const std::shared_ptr<uint8_t>& region,
                        Model& model) {
        const char* dt = raw_dtype(t.dtype);
        if (!dt) throw FormatError(path_ + ": tensor " + t.name + " has an unknown dtype");
        TensorView view{t.name, dt, std::vector<int64_t>(t.shape, t.shape + t.ndim), payload, region};
        std::lock_guard<std::mutex> lk(mu_);
        set_named_tensor(model, staging_, view);
    }

    std::string path_;
    std::string io_mode_;
    LoadOptions opt_;
    PackedFile file_;
    LlamaConfig cfg_;
    std::shared_ptr<FileReader> file_reader_;
    std::mutex mu_;
    const TensorInfo* embed_codes_ = nullptr;  // set: the embedding stays on storage (StoredRows)
    std::vector<int32_t> prompt_tokens_;       // expect_tokens()
    struct EmbeddingRead {                     // load(0) -> unpack(0) when the embedding stays on storage
        std::vector<std::pair<const TensorInfo*, FileReader::Span>> tensors;  // all but the codes
        std::vector<RowBatch> rows;
    } embedding_read_;
    std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();
    std::shared_ptr<int8_t> arena_;                   // codes of every quantized linear
    std::map<std::string, size_t> arena_offset_;      // tensor name -> byte offset in arena_
    std::vector<std::shared_ptr<uint8_t>> buffers_;  // per unit: bytes read by load(), consumed by unpack()
    ScaleStaging staging_;
    std::atomic<uint64_t> bytes_read_{0};
};

}  // namespace

long resident_bytes(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return -1;
    struct stat st {};
    long resident = -1;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        void* p = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            const long page = sysconf(_SC_PAGESIZE);
            std::vector<unsigned char> vec((size_t(st.st_size) + page - 1) / page);
            if (mincore(p, size_t(st.st_size), vec.data()) == 0) {
                resident = 0;
                for (unsigned char v : vec) resident += (v & 1) ? page : 0;
            }
            munmap(p, size_t(st.st_size));
        }
    }
    ::close(fd);
    return resident;
}

std::unique_ptr<WeightSource> open_packed_model(const std::string& path, LoadOptions opt) {
    // residency before the header and tables are read (through the page cache) below
    const long resident = opt.io == IoMode::Auto ? resident_bytes(path) : -1;
    return std::make_unique<PackedWeightSource>(path, opt, resident);
}

}  // namespace edgeflow
