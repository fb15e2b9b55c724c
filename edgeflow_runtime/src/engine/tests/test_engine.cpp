// The whole engine on a tiny random model in memory: chunked prefill through the task graph must give the same
// logits as one chunk and as the plain sequential forward; decode must agree with a longer prefill; bad requests
// must fail with clear errors.
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "check.h"  // edgeflow_runtime/tests/check.h
#include "engine.h"
#include "tiny_model.h"

using namespace edgeflow;

static EngineOptions opts(int chunk, int threads = 2) {
    EngineOptions o;
    o.threads = threads;
    o.chunk = chunk;
    return o;
}

// A weight source whose reads of later layers block until cancel(), like a loader waiting for free buffers, and
// whose unpack of layer 0 fails: the prefill must fail with that error instead of waiting forever.
class StuckSource : public WeightSource {
public:
    explicit StuckSource(Model m) : m_(std::move(m)) {}
    LlamaConfig config() const override { return m_.cfg; }
    uint64_t bytes_read() const override { return 0; }
    void load(int unit) override {
        if (unit < 2) return;
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return cancelled_; });
        throw EngineError("read cancelled");
    }
    void unpack(int unit, Model& model, ThreadPool&) override {
        if (unit == 1) throw EngineError("layer 0 is corrupt");
        if (unit == 0) model.embed = m_.embed;
    }
    void cancel() override {
        std::lock_guard<std::mutex> lk(mu_);
        cancelled_ = true;
        cv_.notify_all();
    }

private:
    Model m_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool cancelled_ = false;
};

int main() {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 11; ++i) prompt.push_back((i * 7 + 3) % 50);

    Engine whole(tiny_model(7), opts(64));
    const auto ref = whole.prefill(prompt, int(prompt.size()), 0);
    CHECK(ref.size() == prompt.size() * 50);
    bool finite = true;
    for (float v : ref) finite &= std::isfinite(v);
    CHECK(finite);

    // Chunking changes the schedule, not the arithmetic of any row: bit-identical logits.
    for (int chunk : {1, 3, 4}) {
        Engine e(tiny_model(7), opts(chunk, 1 + chunk % 2));
        CHECK(e.prefill(prompt, int(prompt.size()), 0) == ref);
        CHECK(e.trace().events().size() > 0);
    }
    // The sequential forward (decode path) computes the same thing without the task graph.
    {
        Model m = tiny_model(7);
        KvCache cache;
        cache.init(m.cfg, int(prompt.size()));
        ThreadPool cpu(2), accel(2);
        Forward fwd(m, cache, cpu, accel);
        ChunkState s;
        s.init(m.cfg, 0, prompt.data(), int(prompt.size()));
        fwd.run_chunk(s, true);
        CHECK(s.logits == ref);
    }
    // Last-position logits only: the last row of the full result.
    {
        Engine e(tiny_model(7), opts(4));
        const auto last = e.prefill(prompt, 1, 0);
        CHECK(std::vector<float>(ref.end() - 50, ref.end()) == last);
        // Greedy decode continues the sequence as a longer prefill would score it.
        Engine e2(tiny_model(7), opts(4));
        const auto l2 = e2.prefill(prompt, 1, 3);
        int32_t tok = argmax(l2.data(), 50);
        std::vector<int32_t> seq = prompt;
        for (int i = 0; i < 3; ++i) {
            seq.push_back(tok);
            const int32_t next = e2.decode_step(tok);
            Engine e3(tiny_model(7), opts(5));
            const auto l3 = e3.prefill(seq, 1, 0);
            CHECK(next == argmax(l3.data(), 50));
            tok = next;
        }
        CHECK_THROWS(std::exception, "context is full", e2.decode_step(tok));
    }
    // The last rows only, and continuations after a kept prefix: the matching rows of the whole prompt's logits.
    {
        const auto rows = [&](int first) { return std::vector<float>(ref.begin() + size_t(first) * 50, ref.end()); };
        Engine e(tiny_model(7), opts(4));
        CHECK(e.prefill(prompt, 3, 0) == rows(8));
        const std::vector<int32_t> head(prompt.begin(), prompt.begin() + 6), tail(prompt.begin() + 6, prompt.end());
        CHECK(e.prefill(head, 1, 5) == std::vector<float>(ref.begin() + 5 * 50, ref.begin() + 6 * 50));
        CHECK(e.extend(6, tail, 5) == rows(6));
        CHECK(e.extend(6, tail, 2) == rows(9));  // again from the same prefix: positions 6.. are overwritten
        const std::vector<int32_t> tail4(prompt.begin() + 4, prompt.end());
        CHECK(e.extend(4, tail4, 7) == rows(4));  // a shorter prefix of what the cache holds
        CHECK_THROWS(std::exception, "cannot keep 12 positions of a sequence of 11", e.extend(12, tail, 1));
        CHECK_THROWS(std::exception, "exceed the cache of 11", e.extend(7, tail, 1));
        Engine fresh(tiny_model(7), opts(4));
        CHECK_THROWS(std::exception, "cannot keep 1 positions of a sequence of 0", fresh.extend(1, tail, 1));
    }
    {
        Engine e(std::make_unique<StuckSource>(tiny_model(7)), opts(4));
        CHECK_THROWS(std::exception, "layer 0 is corrupt", e.prefill(prompt, 1, 0));
    }
    // Bad requests.
    {
        Engine e(tiny_model(7), opts(4));
        CHECK_THROWS(std::exception, "exceeds the context length 64", e.prefill(std::vector<int32_t>(65, 1), 1, 0));
        CHECK_THROWS(std::exception, "plus 10 new tokens", e.prefill(std::vector<int32_t>(60, 1), 1, 10));
        CHECK_THROWS(std::exception, "token id 50 at position 2 is outside the vocabulary", e.prefill({1, 2, 50}, 1, 0));
        CHECK_THROWS(std::exception, "prompt is empty", e.prefill({}, 1, 0));
        CHECK_THROWS(std::exception, "decode needs a prefill", e.decode_step(1));
        CHECK_THROWS(std::exception, "threads must be at least 1", Engine(tiny_model(7), opts(4, 0)));
        CHECK_THROWS(std::exception, "chunk size must be at least 1", Engine(tiny_model(7), opts(0)));
        Model bad = tiny_model(7);
        bad.layers[1].down.codes.resize(10);
        Engine eb(std::move(bad), opts(4));
        CHECK_THROWS(std::exception, "layer 1 down_proj: codes or scales missing", eb.prefill({1, 2}, 1, 0));
    }
    if (g_failures) std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return g_failures ? 1 : 0;
}
