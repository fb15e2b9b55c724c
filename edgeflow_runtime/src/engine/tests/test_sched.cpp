// The compute scheduler and the pipeline policies (paper section 4.3): every policy, thread budget and lane split
// computes the same logits; task stealing runs every task once and never before its inputs; with one thread the
// order is deterministic; bad options fail with clear errors.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "check.h"  // edgeflow_runtime/tests/check.h
#include "engine.h"
#include "tiny_model.h"

using namespace edgeflow;

static const char* kPolicies[] = {"llmnpu-static", "place", "place+priority", "place+priority+steal"};

static EngineOptions opts(const char* policy, int threads, int accel, int chunk, int threshold, bool help) {
    EngineOptions o;
    o.policy = policy;
    o.threads = threads;
    o.accel_threads = accel;
    o.chunk = chunk;
    o.steal_threshold = threshold;
    o.lane_help = help;
    return o;
}

// A schedule whose CPU worker steals whenever the accelerator queue holds anything (threshold 0).
static SchedOptions steal_always(int threads, Policy policy, bool lane_help) {
    SchedOptions so;
    so.threads = threads;
    so.policy = policy;
    so.steal_threshold = 0;
    so.lane_help = lane_help;
    return so;
}

static void test_policies_same_logits() {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 13; ++i) prompt.push_back((i * 11 + 5) % 50);
    Engine ref_engine(tiny_model(3), opts("place", 1, 0, 64, 5, true));
    const auto ref = ref_engine.prefill(prompt, true, 0);
    struct Case {
        int threads, accel, chunk, threshold;
        bool help;
    };
    const Case cases[] = {{1, 0, 1, 5, true}, {2, 0, 1, 0, true}, {2, 1, 3, 5, false}, {3, 2, 2, 0, true},
                          {4, 0, 4, 1, true}, {4, 3, 3, 0, false}};
    for (const char* p : kPolicies)
        for (const Case& c : cases) {
            Engine e(tiny_model(3), opts(p, c.threads, c.accel, c.chunk, c.threshold, c.help));
            const auto got = e.prefill(prompt, true, 0);
            if (got != ref) std::fprintf(stderr, "policy %s threads %d accel %d chunk %d differs\n", p, c.threads, c.accel, c.chunk);
            CHECK(got == ref);
            // One stats record per prefill, one entry per compute thread of the budget.
            CHECK(e.prefill_stats().size() == 1 && e.prefill_stats()[0].workers.size() == size_t(c.threads));
        }
}

// A random DAG of tasks on the CPU, accelerator and unpack lanes: every task checks that its predecessors finished
// before it started and counts its runs. Stealing with threshold 0 must not break either; unpack tasks run on the
// CPU dispatcher, or on the accelerator's when lane help is on.
static void test_steal_runs_once_after_inputs() {
    for (int threads : {2, 3, 4})
        for (const char* p : kPolicies)
            for (bool help : {true, false}) {
                const SchedOptions so = steal_always(threads, parse_policy(p), help);
                Trace trace;
                Executors ex(so, 1, &trace);
                Executor* lanes[kNumLanes];
                ex.lanes(lanes);
                const int n = 300;
                std::vector<std::atomic<int>> runs(n);
                std::vector<std::atomic<bool>> done(n);
                std::vector<std::vector<int>> preds(n);
                std::atomic<int> early{0};
                std::mt19937 rng(7 + threads);
                TaskGraph g;
                std::vector<Task*> tasks;
                for (int i = 0; i < n; ++i) {
                    runs[i] = 0;
                    done[i] = false;
                    for (int k = 0; k < 3 && i > 0; ++k) preds[i].push_back(int(rng() % i));
                    const unsigned pick = rng() % 6;
                    const Lane lane = pick < 3 ? Lane::Accel : pick < 5 ? Lane::CPU : Lane::Unpack;
                    tasks.push_back(g.add("t", i, 0, lane, long(rng() % 50), [&, i] {
                        for (int q : preds[i]) early += done[q].load() ? 0 : 1;
                        runs[i] += 1;
                        volatile double x = 0;  // a few microseconds of work, so that queues fill up
                        for (int k = 0; k < 2000; ++k) x = x + k;
                        done[i] = true;
                    }));
                    for (int q : preds[i]) TaskGraph::depend(tasks[q], tasks.back());
                }
                ex.compute->reset_stats();
                g.run(lanes);
                int bad_runs = 0;
                for (auto& r : runs) bad_runs += r.load() != 1;
                CHECK(bad_runs == 0);
                CHECK(early.load() == 0);
                int stolen_traced = 0, cpu_on_accel = 0, unpacks = 0;
                for (const auto& e : trace.events()) {
                    stolen_traced += e.stolen;
                    unpacks += e.cat == "unpack";
                    // Only the CPU dispatcher steals, and only accelerator tasks; the accelerator never runs CPU tasks,
                    // and unpack tasks only with lane help; nothing runs on an unpack thread (there is none).
                    if (e.stolen) CHECK(e.cat == "accel" && e.track == "cpu-0");
                    if (e.track == "accel-0") cpu_on_accel += e.cat == "cpu" || (e.cat == "unpack" && !help);
                    CHECK(e.track == "cpu-0" || e.track == "accel-0");
                }
                CHECK(cpu_on_accel == 0 && unpacks > 0);
                if (std::string(p) != "place+priority+steal") CHECK(stolen_traced == 0);
                int stolen_stats = 0;
                for (const auto& w : ex.compute->stats()) stolen_stats += w.stolen;
                CHECK(stolen_stats == stolen_traced);
            }
}

// Stealing happens: one accelerator task blocks until five others ran; only the CPU worker can run them, by
// stealing (the queue holds 19 > threshold 5). Without stealing the same graph would wait forever, so that case is
// not run; a timeout turns a missing steal into a failure instead of a hang.
static void test_steal_happens() {
    SchedOptions so;
    so.threads = 2;
    so.policy = Policy::PlacePrioritySteal;
    so.steal_threshold = 5;
    Trace trace;
    Executors ex(so, 1, &trace);
    Executor* lanes[kNumLanes];
    ex.lanes(lanes);
    std::mutex mu;
    std::condition_variable cv;
    int finished = 0;
    bool first_taken = false, timed_out = false;
    TaskGraph g;
    for (int i = 0; i < 20; ++i)
        g.add("a", i, 0, Lane::Accel, i, [&] {
            std::unique_lock<std::mutex> lk(mu);
            if (!first_taken) {
                first_taken = true;
                timed_out = !cv.wait_for(lk, std::chrono::seconds(60), [&] { return finished >= 5; });
            }
            ++finished;
            cv.notify_all();
        });
    g.run(lanes);
    CHECK(!timed_out && finished == 20);
    int stolen = 0;
    for (const auto& e : trace.events()) stolen += e.stolen;
    CHECK(stolen >= 1);
}

// Tasks with data-parallel jobs on both pools while idle workers help and the CPU worker steals: every item of
// every job runs exactly once, with at most `threads` threads inside jobs at any instant.
static void test_helpers_and_jobs() {
    for (int threads : {2, 3, 4})
        for (bool help : {true, false}) {
            const SchedOptions so = steal_always(threads, Policy::PlacePrioritySteal, help);
            Trace trace;
            Executors ex(so, 1, &trace);
            Executor* lanes[kNumLanes];
            ex.lanes(lanes);
            const int n = 120, items = 16;
            std::vector<std::atomic<int>> hits(size_t(n) * items);
            for (auto& h : hits) h = 0;
            std::atomic<int> inside{0}, peak{0};
            TaskGraph g;
            Task* prev = nullptr;
            for (int i = 0; i < n; ++i) {
                const Lane lane = i % 3 ? Lane::Accel : Lane::CPU;
                Task* t = g.add("j", i, 0, lane, i, [&, i, lane] {
                    ThreadPool& pool = (i % 5 == 0) ? ex.compute->cpu_pool()
                                       : lane == Lane::Accel ? ex.compute->accel_pool() : ex.compute->cpu_pool();
                    pool.parallel_for(items, [&](int k) {
                        const int now = ++inside;
                        int p = peak.load();
                        while (now > p && !peak.compare_exchange_weak(p, now)) {
                        }
                        hits[size_t(i) * items + k] += 1;
                        volatile double x = 0;
                        for (int r = 0; r < 500; ++r) x = x + r;
                        --inside;
                    });
                });
                if (i % 4 == 0) TaskGraph::depend(prev, t);  // some chains, mostly independent tasks
                prev = t;
            }
            g.run(lanes);
            int bad = 0;
            for (auto& h : hits) bad += h.load() != 1;
            CHECK(bad == 0);
            CHECK(peak.load() <= threads);
        }
}

// One thread: the same order every time (the Python simulator replays it: tests/runtime/test_pipeline_sim.py).
static void test_serial_order_deterministic() {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 9; ++i) prompt.push_back(i * 3 % 50);
    for (const char* p : kPolicies) {
        std::vector<std::string> first;
        for (int rep = 0; rep < 3; ++rep) {
            Engine e(tiny_model(5), opts(p, 1, 0, 2, 5, true));
            e.prefill(prompt, false, 0);
            std::vector<std::string> order;
            for (const auto& ev : e.trace().events())
                order.push_back(ev.name + "/" + std::to_string(ev.layer) + "/" + std::to_string(ev.chunk));
            if (rep == 0) first = order;
            CHECK(order == first);
            CHECK(order.size() == size_t(5 + 2 * 8 * 5 + 1));  // 5 embeds, 2 layers x 8 stages x 5 chunks, 1 head
        }
    }
    // Position-guided priority finishes chunk 0 before chunk 1 starts its layers; topological order does not.
    auto order_of = [&](const char* p) {
        Engine e(tiny_model(5), opts(p, 1, 0, 2, 5, true));
        e.prefill(prompt, false, 0);
        return e.trace().events();
    };
    const auto pos = order_of("place+priority");
    const auto topo = order_of("place");
    auto index_of = [](const std::vector<TraceEvent>& evs, const char* name, int layer, int chunk) {
        for (size_t i = 0; i < evs.size(); ++i)
            if (evs[i].name == name && evs[i].layer == layer && evs[i].chunk == chunk) return int(i);
        return -1;
    };
    CHECK(index_of(pos, "down", 1, 0) < index_of(pos, "attn_in", 0, 1));
    CHECK(index_of(topo, "down", 1, 0) > index_of(topo, "attn_in", 0, 1));
    // Topological is the execution graph's stage order within a layer: the last chunk's O projection before the
    // first chunk's FFN (the tie of section 4.3 that position-guided priority breaks the other way).
    CHECK(index_of(topo, "o_proj", 0, 4) < index_of(topo, "ffn_in", 0, 0));
    CHECK(index_of(pos, "ffn_in", 0, 0) < index_of(pos, "o_proj", 0, 4));
}

static void test_bad_options() {
    CHECK_THROWS(std::exception, "unknown pipeline policy 'fast'", Engine(tiny_model(1), opts("fast", 2, 0, 4, 5, true)));
    CHECK_THROWS(std::exception, "accelerator threads must be in [0, threads - 1]",
                 Engine(tiny_model(1), opts("place", 2, 2, 4, 5, true)));
    CHECK_THROWS(std::exception, "accelerator threads must be in", Engine(tiny_model(1), opts("place", 1, 1, 4, 5, true)));
    CHECK_THROWS(std::exception, "steal threshold must be >= 0", Engine(tiny_model(1), opts("place", 2, 0, 4, -1, true)));
    SchedOptions so;
    so.threads = 5;
    CHECK(so.accel_share() == 2 && so.cpu_share() == 3);
    so.threads = 1;
    CHECK(so.accel_share() == 0 && so.cpu_share() == 1);
}

// A pool shared by two callers at once: the second runs its items alone, both complete, nothing runs twice.
static void test_pool_two_callers() {
    ThreadPool pool(2, [] {});
    std::atomic<int> a{0}, b{0};
    std::thread other([&] {
        for (int r = 0; r < 200; ++r) pool.parallel_for(8, [&](int) { a += 1; });
    });
    for (int r = 0; r < 200; ++r) pool.parallel_for(8, [&](int) { b += 1; });
    for (int r = 0; r < 100; ++r) pool.help_one();  // an external helper may join at any time
    other.join();
    CHECK(a.load() == 1600 && b.load() == 1600);
}

int main() {
    test_policies_same_logits();
    test_steal_runs_once_after_inputs();
    test_steal_happens();
    test_helpers_and_jobs();
    test_serial_order_deterministic();
    test_bad_options();
    test_pool_two_callers();
    if (g_failures) std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return g_failures ? 1 : 0;
}
