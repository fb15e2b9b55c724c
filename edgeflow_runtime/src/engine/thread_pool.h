// A group of threads for data parallelism inside one operator task (a matmul split over output channels, attention
// split over heads). The calling thread takes part.
//
// Two kinds:
//   ThreadPool(n)            owns n - 1 worker threads (tests, benches, the engine's decode steps). Items are dealt
//                            round-robin, thread w taking i = w, w + n, ... (no lock per item: decode's jobs are a
//                            few microseconds each); between jobs the workers spin for a moment before sleeping
//                            (spin_wait.h), so back-to-back short jobs find them awake;
//   ThreadPool(width, hook)  owns no thread: the engine's compute workers that have nothing better to do call
//                            help_one() to take items of the current job (ComputeScheduler, executor.h). `hook` is
//                            called (without any lock of this pool held) whenever a job is posted, to wake them.
//                            Nobody spins here: during a cold start a spinning compute thread takes the CPU that the
//                            I/O thread's reads need (measured: +9% TTFT at 128 tokens on 2 vCPUs).
// size() is the number of threads that may work on one job: callers split their work into about that many pieces.
//
// One job at a time: when a second thread calls parallel_for while a job is running (a CPU worker that stole a
// matmul while the accelerator worker runs one), the second call runs all its items on its own thread. So a pool
// never has more threads working than it has members, and no call ever waits for another caller's job.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace edgeflow {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ThreadPool(int width, std::function<void()> on_post);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return width_; }

    // Runs fn(i) for i in [0, n) across the pool and returns when all are done.
    void parallel_for(int n, const std::function<void(int)>& fn);

    // For external helpers: runs one unclaimed item of the current job; false when there is none.
    bool help_one();
    bool has_work();

private:
    void worker_loop(int index);
    void run_items();
    void run_dealt(int n, const std::function<void(int)>& fn);  // ThreadPool(n)'s parallel_for

    int width_ = 1;
    std::function<void()> on_post_;
    std::atomic<bool> active_{false};  // a parallel_for owns the job slot
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable wake_, done_;
    const std::function<void(int)>* fn_ = nullptr;
    int n_items_ = 0, next_item_ = 0;
    std::atomic<int> pending_{0};  // items (helped pools) or workers (dealt pools) not finished with the job
    std::atomic<unsigned> generation_{0};  // dealt pools: bumped per job (read unlocked while spinning)
    int sleepers_ = 0;                     // dealt pools: workers asleep on wake_ (under mu_)
    std::atomic<bool> stop_{false};
};

}  // namespace edgeflow
