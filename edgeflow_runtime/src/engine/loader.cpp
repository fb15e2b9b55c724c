#include "loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <map>
#include <mutex>
#include <tuple>

#include "edgeflow/format.h"
#include "edgeflow/unpack.h"
#include "tensor_names.h"

namespace edgeflow {
namespace {

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
        default: return nullptr;
    }
}

// The packed file's regions as weight units: region 0 embeddings, 1 + i layer i, n_layers + 1 final.
class PackedWeightSource : public WeightSource {
public:
    PackedWeightSource(const std::string& path, LoadOptions opt)
        : path_(path), opt_(opt), file_(PackedFile::open(path)) {
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
        fd_ = ::open(path.c_str(), O_RDONLY | (opt.direct_io ? O_DIRECT : 0));
        if (fd_ < 0)
            throw IoError("cannot open " + path + (opt.direct_io ? " with O_DIRECT" : "") + ": " +
                              std::strerror(errno));
        buffers_.resize(n);
    }
    ~PackedWeightSource() override {
        if (fd_ >= 0) ::close(fd_);
    }

    LlamaConfig config() const override { return cfg_; }
    void cancel() override { pool_->cancel(); }
    uint64_t bytes_read() const override { return bytes_read_.load(); }

    void load(int unit) override {
        const RegionInfo& r = file_.regions().at(unit);
        std::shared_ptr<uint8_t> buf = pool_->acquire(r.size);
        for (uint64_t done = 0; done < r.size;) {
            const ssize_t got = ::pread(fd_, buf.get() + done, r.size - done, off_t(r.offset + done));
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) throw IoError("read of " + path_ + " failed: " + std::strerror(errno));
            if (got == 0) throw FormatError(path_ + ": file ends inside region " + std::to_string(unit));
            done += uint64_t(got);
        }
        bytes_read_ += r.size;
        std::lock_guard<std::mutex> lk(mu_);
        buffers_[unit] = std::move(buf);
    }

    void unpack(int unit, Model& model) override {
        std::shared_ptr<uint8_t> buf;  // shared: raw tables (the embedding) stay in it and keep it alive
        {
            std::lock_guard<std::mutex> lk(mu_);
            buf = std::move(buffers_[unit]);
        }
        const RegionInfo& r = file_.regions().at(unit);
        try {
            for (uint32_t i = r.first_tensor; i < r.first_tensor + r.n_tensors; ++i)
                unpack_tensor(file_.tensors()[i], buf.get() + (file_.tensors()[i].offset - r.offset), buf, model);
            std::lock_guard<std::mutex> lk(mu_);
            if (r.kind == RegionKind::Layer) staging_.finish_layer(model, int(r.layer));
            else if (r.kind == RegionKind::Embedding) model.check_embedding();
            else model.check_final();
        } catch (const IoError&) {
            throw;
        } catch (const EngineError& e) {  // a tensor the engine cannot use: the file is wrong, not the request
            throw FormatError(path_ + ": " + e.what());
        }
    }

private:
    // One huge-page mapping for the int8 codes of every quantized linear (106 MB for the default model).
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

    void unpack_tensor(const TensorInfo& t, const uint8_t* payload, const std::shared_ptr<uint8_t>& region,
                       Model& model) {
        if (opt_.verify_crc) file_.verify_payload(t, payload);
        if (is_quantized(t.dtype)) {
            const std::string suffix = ".weight";
            const bool named_ok = t.name.size() > suffix.size() &&
                                  t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
            QLinear* q = named_ok ? find_linear(model, t.name.substr(0, t.name.size() - suffix.size())) : nullptr;
            if (!q) throw FormatError(path_ + ": quantized tensor " + t.name + " is not a Llama linear weight");
            const QuantTensor qt = QuantTensor::view(t, payload);
            q->C = int(qt.channels);
            q->K = int(qt.dim);
            const size_t n = size_t(q->C) * q->K;
            const auto at = arena_offset_.find(t.name);  // always present: offsets cover every quantized tensor
            q->codes.place(arena_.get() + at->second, n, arena_);
            edgeflow::unpack(qt, 0, qt.channels, q->codes.data());
            return;
        }
        const char* dt = raw_dtype(t.dtype);
        if (!dt) throw FormatError(path_ + ": tensor " + t.name + " has an unknown dtype");
        TensorView view{t.name, dt, std::vector<int64_t>(t.shape, t.shape + t.ndim), payload, region};
        std::lock_guard<std::mutex> lk(mu_);
        set_named_tensor(model, staging_, view);
    }

    std::string path_;
    LoadOptions opt_;
    PackedFile file_;
    LlamaConfig cfg_;
    int fd_ = -1;
    std::mutex mu_;
    std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();
    std::shared_ptr<int8_t> arena_;                   // codes of every quantized linear
    std::map<std::string, size_t> arena_offset_;      // tensor name -> byte offset in arena_
    std::vector<std::shared_ptr<uint8_t>> buffers_;  // per unit: bytes read by load(), consumed by unpack()
    ScaleStaging staging_;
    std::atomic<uint64_t> bytes_read_{0};
};

}  // namespace

std::unique_ptr<WeightSource> open_packed_model(const std::string& path, LoadOptions opt) {
    return std::make_unique<PackedWeightSource>(path, opt);
}

}  // namespace edgeflow
