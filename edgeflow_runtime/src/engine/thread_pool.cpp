#include "thread_pool.h"

namespace edgeflow {

ThreadPool::ThreadPool(int n_threads) {
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
}

// Claims items one at a time under the lock: items are coarse (a block of channels or heads), so contention is low.
void ThreadPool::run_items() {
    std::unique_lock<std::mutex> lk(mu_);
    while (next_item_ < n_items_) {
        const int i = next_item_++;
        const auto* fn = fn_;
        lk.unlock();
        (*fn)(i);
        lk.lock();
        if (--pending_ == 0) done_.notify_all();
    }
}

void ThreadPool::worker_loop() {
    unsigned seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(mu_);
            wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
        }
        run_items();
    }
}

void ThreadPool::parallel_for(int n, const std::function<void(int)>& fn) {
    if (n <= 0) return;
    if (workers_.empty() || n == 1) {
        for (int i = 0; i < n; ++i) fn(i);
        return;
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        fn_ = &fn;
        n_items_ = n;
        next_item_ = 0;
        pending_ = n;
        ++generation_;
    }
    wake_.notify_all();
    run_items();
    std::unique_lock<std::mutex> lk(mu_);
    done_.wait(lk, [&] { return pending_ == 0; });
    fn_ = nullptr;
}

}  // namespace edgeflow
