#include "thread_pool.h"

#include <algorithm>

#include "spin_wait.h"

namespace edgeflow {

ThreadPool::ThreadPool(int n_threads) : width_(std::max(1, n_threads)) {
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::ThreadPool(int width, std::function<void()> on_post)
    : width_(std::max(1, width)), on_post_(std::move(on_post)) {}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    wake_.notify_all();  // (dealt pools' spinning workers see stop_ without it)
    for (auto& w : workers_) w.join();
}

// Claims items one at a time under the lock: items are coarse (a block of channels or heads), so contention is low.
void ThreadPool::run_items() {
    while (help_one()) {
    }
}

bool ThreadPool::help_one() {
    std::unique_lock<std::mutex> lk(mu_);
    if (!fn_ || next_item_ >= n_items_) return false;
    const int i = next_item_++;
    const auto* fn = fn_;
    lk.unlock();
    (*fn)(i);
    lk.lock();
    if (--pending_ == 0) done_.notify_all();
    return true;
}

bool ThreadPool::has_work() {
    std::lock_guard<std::mutex> lk(mu_);
    return fn_ && next_item_ < n_items_;
}

// A dealt pool's worker: waits (spinning, then asleep) for each new job, runs its share of the items, reports done.
void ThreadPool::worker_loop(int index) {
    unsigned seen = 0;
    for (;;) {
        if (!spin_until([&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; })) {
            std::unique_lock<std::mutex> lk(mu_);
            ++sleepers_;
            wake_.wait(lk, [&] { return stop_.load() || generation_.load() != seen; });
            --sleepers_;
        }
        if (stop_) return;
        seen = generation_.load(std::memory_order_acquire);  // fn_ and n_items_ were written before the bump
        for (int i = index; i < n_items_; i += width_) (*fn_)(i);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard<std::mutex> lk(mu_);  // the caller may be asleep on done_
            done_.notify_all();
        }
    }
}

void ThreadPool::run_dealt(int n, const std::function<void(int)>& fn) {
    fn_ = &fn;
    n_items_ = n;
    pending_.store(int(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (sleepers_ > 0) wake_.notify_all();
    }
    for (int i = 0; i < n; i += width_) fn(i);
    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
        std::unique_lock<std::mutex> lk(mu_);
        done_.wait(lk, [&] { return pending_.load() == 0; });
    }
    fn_ = nullptr;
    n_items_ = 0;
}

void ThreadPool::parallel_for(int n, const std::function<void(int)>& fn) {
    if (n <= 0) return;
    const bool alone = width_ == 1 || n == 1 || (workers_.empty() && !on_post_);
    if (alone || active_.exchange(true)) {  // nobody to share with, or another caller holds the job slot
        for (int i = 0; i < n; ++i) fn(i);
        return;
    }
    if (!workers_.empty()) {
        run_dealt(n, fn);
        active_.store(false);
        return;
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        fn_ = &fn;
        n_items_ = n;
        next_item_ = 0;
        pending_ = n;
    }
    if (on_post_) on_post_();
    run_items();
    {
        std::unique_lock<std::mutex> lk(mu_);
        done_.wait(lk, [&] { return pending_ == 0; });
        fn_ = nullptr;
        n_items_ = 0;
        next_item_ = 0;
    }
    active_.store(false);
}

}  // namespace edgeflow
