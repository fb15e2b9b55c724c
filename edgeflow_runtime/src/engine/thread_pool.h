// A fixed group of worker threads for data parallelism inside one operator task (a matmul split over output
// channels, attention split over heads). The calling thread takes part, so a pool of n threads starts n - 1.
#pragma once
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace edgeflow {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return int(workers_.size()) + 1; }

    // Runs fn(i) for i in [0, n) across the pool and returns when all are done. Not reentrant: one caller at a time.
    void parallel_for(int n, const std::function<void(int)>& fn);

private:
    void worker_loop();
    void run_items();

    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable wake_, done_;
    const std::function<void(int)>* fn_ = nullptr;
    int n_items_ = 0, next_item_ = 0, pending_ = 0;
    unsigned generation_ = 0;
    bool stop_ = false;
};

}  // namespace edgeflow
